// Drives Aether's console in headless Chromium (playwright-core, the Debian package's
// /usr/bin/chromium), one step per line: Aether's tests write a JSON request per line on stdin
// and read a JSON answer per line on stdout. Screenshots go to SHOTS (a folder).
//
// usage: node console_driver.mjs BASE_URL SHOTS
// requests: {"op":"sign_in","name","password"} | {"op":"goto","page"} | {"op":"shot","name"} |
//   {"op":"expect_pending","tool"} (a row appears without a reload) |
//   {"op":"context","tool"} (what is shown beside that waiting call; the tab's title) |
//   {"op":"registry_bulk","state","reason"} (every definition of that state approved at once) |
//   {"op":"audit_detail","call_id"} (that call's audit row in full; its trace link) |
//   {"op":"decide","tool","verdict":"approve"|"deny","reason"} | {"op":"halt","reason"} |
//   {"op":"resume","reason"} | {"op":"audit_find","call_id"} | {"op":"export","format"} |
//   {"op":"text","selector"} | {"op":"open_pages"} (every page once, a shot each) |
//   {"op":"sign_in_with_provider"} (the identity provider's button, and back) |
//   {"op":"undo","call_id"} (the journal's Undo, confirmed; the result shown) |
//   {"op":"undo_file","call_id","file"} (one file of a call, "root:path", undone likewise) |
//   {"op":"transcript","run"} | {"op":"stop_run","run"} (Stop, the dialog answered with
//   "dialog"; the run's row once it no longer runs) |
//   {"op":"viewport","width","height"} | {"op":"overflow"} (how far each page is wider than
//   the viewport; a shot of each) |
//   {"op":"make_token","agent","label"} (the secret shown once) | {"op":"revoke_token","id"} |
//   {"op":"overview","window"} (the chart drawn for that window: tiles, its label, legend) |
//   {"op":"axe","scheme":"light"|"dark"} (axe-core's WCAG 2 A/AA audit of every page; its
//   violations) | {"op":"keys","key"} (a key pressed on the page; the page then shown) |
//   {"op":"render_times","runs","windows"} (for the benchmark: ms from navigation to the
//   landing page's chart drawn, each run a fresh load; ms from a window's button to its chart)
import { createInterface } from "node:readline";
import { mkdirSync, readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [base, shots] = process.argv.slice(2);
// playwright-core from the peers' install (PLAYWRIGHT_CORE: its index.mjs), else from the
// module path.
const { chromium } = await import(process.env.PLAYWRIGHT_CORE ? pathToFileURL(process.env.PLAYWRIGHT_CORE).href : "playwright-core");
mkdirSync(shots, { recursive: true });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(30000);
const problems = [];
// The undo result on the page (null when there is none), and a wait for one that differs from
// it: a result from an earlier undo may still be shown when the next is asked for.
const undoResult = () => page.$eval("#undo-result", (e) => e.innerText).catch(() => null);
const newUndoResult = (before) =>
  page.waitForFunction((prev) => {
    const e = document.querySelector("#undo-result");
    return e !== null && e.innerText !== prev;
  }, before);
page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
// A 401 is how the page learns it is not signed in (and is answered with the sign-in form);
// any other failed load or script error is a problem.
page.on("console", (m) => {
  if (m.type() === "error" && !/status of 401/.test(m.text())) problems.push(`console: ${m.text()}`);
});
let dialogAnswer = null;
page.on("dialog", async (d) => {
  if (d.type() === "prompt") await d.accept(dialogAnswer || "");
  else await d.accept();
});

// Every page, as the menu lists them.
const PAGES = ["overview", "approvals", "audit", "registry", "agents", "journal", "runs", "commands", "tokens", "sources", "policy", "halt", "accounts"];

const shot = async (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });

async function answer(r) {
  switch (r.op) {
    case "sign_in": {
      await page.goto(`${base}/console`);
      await page.fill("#sign-in-form input[name=name]", r.name);
      await page.fill("#sign-in-form input[name=password]", r.password);
      await shot("sign-in");
      await page.click("#sign-in-form button[type=submit]");
      await page.waitForSelector("#nav:not([hidden])", { timeout: 30000 });
      // A marker that a reload or navigation would wipe: "live" means it survives.
      await page.evaluate(() => { window.__aetherMarker = 1; });
      return await page.textContent("#who-name");
    }
    case "sign_in_with_provider": {
      await page.goto(`${base}/console`);
      await page.waitForSelector("#sign-in-oidc:not([hidden])");
      await shot("sign-in-provider");
      await page.click("#sign-in-oidc");
      await page.waitForSelector("#nav:not([hidden])", { timeout: 30000 });
      return { who: await page.textContent("#who-name"), url: page.url() };
    }
    case "goto": {
      await page.click(`nav a[data-page=${r.page}]`);
      await page.waitForSelector(`nav a.active[data-page=${r.page}]`);
      await page.waitForTimeout(300);
      return page.url();
    }
    case "shot":
      await shot(r.name);
      return r.name;
    case "expect_pending": {
      const row = page.locator("tr[data-call]", { hasText: r.tool });
      await row.first().waitFor({ timeout: 30000 });
      const live = await page.evaluate(() => window.__aetherMarker === 1);
      const text = await row.first().innerText();
      return { live, text };
    }
    case "context": {
      // What the approvals page shows beside a waiting call, once loaded; and the tab's title.
      const row = page.locator("tr[data-call]", { hasText: r.tool }).first();
      await row.locator(".context p").first().waitFor({ timeout: 30000 });
      return { text: await row.locator(".context").innerText(), title: await page.title() };
    }
    case "registry_bulk": {
      // Filter the registry by state, select every definition shown, approve with one reason.
      await page.click("nav a[data-page=registry]");
      await page.waitForSelector("#registry-filters select[name=state]");
      await page.selectOption("#registry-filters select[name=state]", r.state);
      // The rows drawn for this filter, not the page as it was before it applied.
      await page.waitForSelector(`#registry-filters[data-shown^="${r.state}|"]`);
      await page.waitForSelector("#registry-bulk input[name=all]");
      await page.check("#registry-bulk input[name=all]");
      await page.waitForSelector("#registry-bulk input[name=all]:checked");
      await page.fill("#registry-bulk input[name=bulk-why]", r.reason);
      await page.click("#approve-selected");
      await page.waitForFunction(() => /approved/.test(document.querySelector("#status").textContent));
      return await page.textContent("#status");
    }
    case "decide": {
      const row = page.locator("tr[data-call]", { hasText: r.tool }).first();
      await row.locator("input").fill(r.reason);
      await row.locator(r.verdict === "approve" ? "button.approve" : "button.deny").click();
      await row.waitFor({ state: "detached", timeout: 30000 });
      return await page.textContent("#status");
    }
    case "halt":
    case "resume": {
      await page.click("nav a[data-page=halt]");
      await page.waitForSelector(r.op === "halt" ? "#halt-button" : "#resume-button");
      await page.fill("input[name=why]", r.reason);
      await page.click(r.op === "halt" ? "#halt-button" : "#resume-button");
      await page.waitForSelector(r.op === "halt" ? "#resume-button" : "#halt-button", { timeout: 30000 });
      return await page.textContent("#halt-state");
    }
    case "audit_find": {
      await page.click("nav a[data-page=audit]");
      await page.waitForSelector("nav a.active[data-page=audit]");
      await page.fill("input[name=call_id]", r.call_id);
      await page.click("form.row button[type=submit]");
      // The search has answered when the table holds that call's rows and no other (the
      // unfiltered table may already show it: returning then would race the search).
      await page.waitForFunction((id) => {
        const rows = [...document.querySelectorAll("tr[data-call]")];
        return rows.length > 0 && rows.every((row) => row.dataset.call === id);
      }, r.call_id, { timeout: 30000 });
      const row = page.locator(`tr[data-call="${r.call_id}"]`);
      return { rows: await row.count(), text: await row.first().innerText() };
    }
    case "audit_detail": {
      // The row of a call in full (found by its id), and where its trace link goes.
      await answer({ op: "audit_find", call_id: r.call_id });
      await page.click(`tr[data-call="${r.call_id}"] button.link`);
      await page.waitForSelector("#audit-detail");
      const link = await page.$("#trace-link");
      return { text: await page.innerText("#audit-detail"), href: link ? await link.getAttribute("href") : null };
    }
    case "export": {
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.click(`button[data-export=${r.format}]`),
      ]);
      const path = `${shots}/export.${r.format}`;
      await download.saveAs(path);
      return readFileSync(path, "utf8");
    }
    case "verify": {
      await page.click("text=Verify the chain");
      // Read the verdict the moment it shows (a live update may redraw the page after).
      const verdict = await page.waitForFunction(() => {
        const m = document.body.innerText.match(/The chain is[^\n]*/);
        return m && m[0];
      });
      return await verdict.jsonValue();
    }
    case "undo": {
      await page.click("nav a[data-page=journal]");
      await page.waitForSelector("nav a.active[data-page=journal]");
      const before = await undoResult();
      await page.click(`tr[data-call="${r.call_id}"] button.undo`);
      await newUndoResult(before);
      await page.waitForSelector(`tr[data-call="${r.call_id}"] button.undo`, { state: "detached" });
      return await page.innerText("#undo-result");
    }
    case "transcript": {
      // A run's transcript, opened from the Runs page.
      await page.click("nav a[data-page=runs]");
      await page.waitForSelector(`tr[data-run="${r.run}"]`);
      await page.click(`tr[data-run="${r.run}"] button.transcript`);
      await page.waitForSelector("#run-transcript");
      return await page.innerText("#run-transcript");
    }
    case "stop_run": {
      // A running run's Stop, with the reason the dialog is answered with; the row once the
      // run no longer shows as running (the page read again until then).
      await page.click("nav a[data-page=runs]");
      await page.click(`tr[data-run="${r.run}"] button.stop`);
      const deadline = Date.now() + 20000;
      for (;;) {
        await page.reload();
        await page.waitForSelector(`tr[data-run="${r.run}"]`);
        const row = await page.innerText(`tr[data-run="${r.run}"]`);
        if (!(await page.$(`tr[data-run="${r.run}"] button.stop`)) || Date.now() > deadline) return row;
        await page.waitForTimeout(300);
      }
    }
    case "viewport":
      await page.setViewportSize({ width: r.width, height: r.height });
      return page.viewportSize();
    case "overflow": {
      // Every page at the viewport's size: how far each is wider than the screen (0: not at
      // all), a shot of each.
      const wider = {};
      const { width } = page.viewportSize();
      for (const name of PAGES) {
        await page.click(`nav a[data-page=${name}]`);
        await page.waitForSelector(`nav a.active[data-page=${name}]`);
        await page.waitForTimeout(300);
        await shot(`w${width}-${name}`);
        wider[name] = await page.evaluate(() => Math.max(0, document.documentElement.scrollWidth - document.documentElement.clientWidth));
      }
      return wider;
    }
    case "undo_file": {
      // One file of a call ("root:path"), by its own button; confirmed; the result shown.
      await page.click("nav a[data-page=journal]");
      await page.waitForSelector("nav a.active[data-page=journal]");
      const button = `tr[data-call="${r.call_id}"] div[data-file="${r.file}"] button.undo-file`;
      const before = await undoResult();
      await page.click(button);
      await page.waitForSelector(button, { state: "detached" });
      // The new result, not the last undo's still on the page.
      await newUndoResult(before);
      return { result: await page.innerText("#undo-result"), row: await page.innerText(`tr[data-call="${r.call_id}"]`) };
    }
    case "make_token": {
      await page.click("nav a[data-page=tokens]");
      await page.waitForSelector("#token-form");
      await page.selectOption("#token-form select[name=agent]", r.agent);
      await page.fill("#token-form input[name=label]", r.label);
      await page.click("#token-form button[type=submit]");
      await page.waitForSelector("#new-token-value");
      return await page.textContent("#new-token-value");
    }
    case "revoke_token": {
      await page.click(`tr[data-token="${r.id}"] button.revoke`);
      await page.waitForFunction((id) => {
        const row = document.querySelector(`tr[data-token="${id}"]`);
        return row && /revoked/.test(row.innerText);
      }, r.id);
      return await page.innerText(`tr[data-token="${r.id}"]`);
    }
    case "overview": {
      await page.click("nav a[data-page=overview]");
      await page.waitForSelector("nav a.active[data-page=overview]");
      if (r.window) {
        await page.click(`button[data-window="${r.window}"]`);
        await page.waitForSelector(`button[data-window="${r.window}"][aria-pressed=true]`);
      }
      await page.waitForSelector("#calls-chart canvas");
      return {
        tiles: await page.innerText(".tiles"),
        label: await page.getAttribute("#calls-chart", "aria-label"),
        legend: await page.innerText("#calls-chart .u-legend"),
      };
    }
    case "axe": {
      // axe-core from the peers' install, evaluated in the page (DevTools' evaluation is not
      // bound by the page's Content-Security-Policy; a script tag would be).
      const source = readFileSync(process.env.AXE_CORE, "utf8");
      await page.emulateMedia({ colorScheme: r.scheme || "light" });
      const found = [];
      for (const name of PAGES) {
        await page.click(`nav a[data-page=${name}]`);
        await page.waitForSelector(`nav a.active[data-page=${name}]`);
        await page.waitForTimeout(400);
        await page.evaluate(source);
        const violations = await page.evaluate(async () => {
          const result = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
          return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }));
        });
        for (const v of violations) found.push({ page: name, ...v });
        await shot(`axe-${r.scheme || "light"}-${name}`);
      }
      await page.emulateMedia({ colorScheme: "light" });
      return found;
    }
    case "keys": {
      await page.locator("body").press(r.key);
      await page.waitForTimeout(300);
      return { page: await page.getAttribute("nav a[aria-current=page]", "data-page"), focused: await page.evaluate(() => document.activeElement && document.activeElement.dataset.page) };
    }
    case "text":
      return await page.textContent(r.selector);
    case "open_pages": {
      const seen = {};
      for (const name of PAGES) {
        await page.click(`nav a[data-page=${name}]`);
        await page.waitForSelector(`nav a.active[data-page=${name}]`);
        await page.waitForTimeout(400);
        seen[name] = (await page.innerText("#page")).slice(0, 400);
        await shot(`page-${name}`);
      }
      return seen;
    }
    case "render_times": {
      // Measured inside the page (performance.now(), checked every animation frame), so the
      // driver's own round trips are not counted.
      const drawn = (w) => page.waitForFunction((w) => {
        const pressed = document.querySelector(`button[data-window="${w}"][aria-pressed=true]`);
        return pressed && document.querySelector("#calls-chart canvas") ? performance.now() : false;
      }, w, { polling: "raf" }).then((h) => h.jsonValue());
      const first = [];
      const switches = {};
      for (let i = 0; i < (r.runs || 5); i++) {
        await page.goto("about:blank");
        await page.goto(`${base}/console#overview`);
        first.push(await drawn("1h"));
        for (const w of r.windows || []) {
          const t0 = await page.evaluate((w) => {
            const t = performance.now();
            document.querySelector(`button[data-window="${w}"]`).click();
            return t;
          }, w);
          (switches[w] ||= []).push((await drawn(w)) - t0);
        }
      }
      return { first_render_ms: first, switch_ms: switches };
    }
    case "problems":
      return problems;
    default:
      throw new Error(`unknown op ${r.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  if (r.dialog !== undefined) dialogAnswer = r.dialog;
  try {
    process.stdout.write(JSON.stringify({ ok: await answer(r) }) + "\n");
  } catch (e) {
    await shot(`failed-${r.op}`).catch(() => {});
    process.stdout.write(JSON.stringify({ error: String(e && e.message || e) }) + "\n");
  }
}
await browser.close();

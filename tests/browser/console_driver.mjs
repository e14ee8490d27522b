// Drives Aether's console in headless Chromium (playwright-core, the Debian package's
// /usr/bin/chromium), one step per line: Aether's tests write a JSON request per line on stdin
// and read a JSON answer per line on stdout. Screenshots go to SHOTS (a folder).
//
// usage: node console_driver.mjs BASE_URL SHOTS
// requests: {"op":"sign_in","name","password"} | {"op":"goto","page"} | {"op":"shot","name"} |
//   {"op":"expect_pending","tool"} (a row appears without a reload) |
//   {"op":"decide","tool","verdict":"approve"|"deny","reason"} | {"op":"halt","reason"} |
//   {"op":"resume","reason"} | {"op":"audit_find","call_id"} | {"op":"export","format"} |
//   {"op":"text","selector"} | {"op":"open_pages"} (every page once, a shot each)
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
    case "text":
      return await page.textContent(r.selector);
    case "open_pages": {
      const seen = {};
      for (const name of ["approvals", "audit", "registry", "agents", "sources", "policy", "halt", "accounts"]) {
        await page.click(`nav a[data-page=${name}]`);
        await page.waitForSelector(`nav a.active[data-page=${name}]`);
        await page.waitForTimeout(400);
        seen[name] = (await page.innerText("#page")).slice(0, 400);
        await shot(`page-${name}`);
      }
      return seen;
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

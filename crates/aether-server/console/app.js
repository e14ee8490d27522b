// Aether's console: one page per operator task, drawn from the admin JSON API, refreshed when
// the server says something changed (server-sent events). Every value from the server is put
// in the page as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
let me = null;
let current = null;
let events = null;
let refreshTimer = null;
let reads = 0;
let countdowns = [];
const reasons = {};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// The session is the cookie and this key, kept in this tab's storage (never in a cookie: a
// browser sends cookies to every server on this host name, whatever its port).
const KEY = "aether-console-key";
const key = () => sessionStorage.getItem(KEY) || "";

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { "x-aether-key": key() } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!res.ok) {
    if (res.status === 401 && path !== "/api/sign-in") showSignIn("Your session has ended; sign in again.");
    throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`);
  }
  return data;
}

function when(us) {
  if (!us) return "";
  return new Date(us / 1000).toLocaleString();
}

// How long ago, in words; the exact time on hover (and for screen readers, in datetime).
function ago(us) {
  if (!us) return "";
  const at = new Date(us / 1000);
  const s = Math.round((Date.now() - at.getTime()) / 1000);
  const text = s < 45 ? "just now"
    : s < 90 ? "a minute ago"
    : s < 2700 ? `${Math.round(s / 60)} min ago`
    : s < 5400 ? "an hour ago"
    : s < 86400 ? `${Math.round(s / 3600)} h ago`
    : s < 7 * 86400 ? `${Math.round(s / 86400)} d ago`
    : at.toLocaleDateString();
  return el("time", { datetime: at.toISOString(), title: at.toLocaleString() }, text);
}

function status(text, isError) {
  const s = $("status");
  s.textContent = text || "";
  s.className = isError ? "error" : "";
}

function may(permission) {
  return me && me.permissions.includes(permission);
}

function empty(text) {
  return el("p", { class: "empty", text });
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

// ---- signing in -------------------------------------------------------------------------

function hideAll() {
  for (const id of ["sign-in", "setup", "page", "nav", "who"]) $(id).hidden = true;
}

function showSignIn(message) {
  hideAll();
  if (events) { events.abort(); events = null; }
  me = null;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message || "";
}

$("sign-in-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  try {
    const r = await api("POST", "/api/sign-in", { name: f.get("name"), password: f.get("password") });
    sessionStorage.setItem(KEY, r.key);
    e.target.reset();
    await start();
  } catch (err) {
    $("sign-in-error").textContent = err.message;
  }
});

$("setup-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  const token = location.hash.slice(1);
  try {
    const r = await api("POST", "/api/setup", { token, name: f.get("name"), password: f.get("password") });
    sessionStorage.setItem(KEY, r.key);
    history.replaceState(null, "", "/console#approvals");
    await start();
  } catch (err) {
    $("setup-error").textContent = err.message;
  }
});

$("sign-out").addEventListener("click", async () => {
  try { await api("POST", "/api/sign-out"); } catch { /* signed out either way */ }
  sessionStorage.removeItem(KEY);
  showSignIn("Signed out.");
});

// Back from the identity provider: the session's page key is in the fragment (which never
// leaves the browser); kept, and taken out of the address.
function signedInByProvider() {
  const m = location.hash.match(/^#signed-in=([A-Za-z0-9_-]+)$/);
  if (!m) return;
  sessionStorage.setItem(KEY, m[1]);
  history.replaceState(null, "", "/console");
}

// The sign-in form offers the identity provider's button when one is configured.
async function signInMethods() {
  try {
    const m = await (await fetch("/api/sign-in/methods", { credentials: "same-origin" })).json();
    if (m.oidc) {
      const link = $("sign-in-oidc");
      link.href = m.oidc.start;
      link.textContent = `Sign in with ${m.oidc.name}`;
      link.hidden = false;
    }
  } catch { /* the password form stays */ }
}

async function start() {
  signedInByProvider();
  if (location.pathname === "/setup" && location.hash.length > 1) {
    hideAll();
    $("setup").hidden = false;
    return;
  }
  if (!key()) { showSignIn(""); return; }
  try {
    me = await api("GET", "/api/session");
  } catch {
    return;
  }
  hideAll();
  $("nav").hidden = false;
  $("who").hidden = false;
  $("page").hidden = false;
  $("who-name").textContent = `${me.name} (${me.role})`;
  listen();
  await show();
}

// ---- live updates ------------------------------------------------------------------------

// Server-sent events read with fetch (an EventSource cannot send the key header); read
// again after a pause whenever the stream ends, until the session does.
function listen() {
  if (events) return;
  const controller = new AbortController();
  events = controller;
  (async () => {
    let pause = 500;
    while (events === controller) {
      try {
        const res = await fetch("/api/events", { credentials: "same-origin", headers: { "x-aether-key": key() }, signal: controller.signal });
        if (res.status === 401) { showSignIn("Your session has ended; sign in again."); return; }
        if (!res.ok || !res.body) throw new Error(`${res.status}`);
        pause = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const message = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (/^event: changed$/m.test(message)) changed();
          }
        }
      } catch (err) {
        if (controller.signal.aborted) return;
      }
      // The stream ended (a network hiccup, a restart, the session re-checked): if the
      // session is gone api() shows the sign-in form; else read again.
      try { await api("GET", "/api/session"); } catch { return; }
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, 10000);
    }
  })();
}

function changed() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refresh(false), 150);
}

// The calls waiting that the operator has been told of (a notification each, once).
const announced = new Set();

async function badges() {
  try {
    const [pending, halt] = await Promise.all([api("GET", "/api/approvals"), api("GET", "/api/halt")]);
    const count = $("pending-count");
    count.hidden = pending.length === 0;
    count.textContent = pending.length;
    $("halt-flag").hidden = !halt.halted;
    // The tab's title counts them, so a call waiting shows from another tab.
    document.title = pending.length ? `(${pending.length}) Aether console` : "Aether console";
    for (const r of pending) {
      if (announced.has(r.id)) continue;
      announced.add(r.id);
      if (window.Notification && Notification.permission === "granted" && document.hidden) {
        const n = new Notification("A call is waiting for you", { body: `${r.agent}: ${r.tool}`, tag: r.id });
        n.onclick = () => { window.focus(); location.hash = "#approvals"; n.close(); };
      }
    }
  } catch { /* status shown elsewhere */ }
}

// ---- pages -------------------------------------------------------------------------------

const pages = { overview, approvals, audit, registry, agents, journal, runs, commands, tokens, sources, policy, halt, accounts };

window.addEventListener("hashchange", () => show());

// Keys 1-9 and 0 open the first ten pages (as the menu lists them), unless a field is being
// typed in; the menu's links and every button are reached with Tab as well.
document.addEventListener("keydown", (e) => {
  if (!me || e.altKey || e.ctrlKey || e.metaKey || e.isComposing) return;
  const t = e.target;
  if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
  if (!/^[0-9]$/.test(e.key)) return;
  const links = [...document.querySelectorAll("nav a[data-page]")];
  const link = links[e.key === "0" ? 9 : Number(e.key) - 1];
  if (link) { e.preventDefault(); location.hash = link.getAttribute("href"); link.focus(); }
});

async function show() {
  const name = location.hash.slice(1) || "overview";
  current = pages[name] ? name : "overview";
  // What a page showed once (an undo's result, a new token's secret) goes when it is left.
  if (current !== "journal") lastUndo = null;
  if (current !== "tokens") madeToken = null;
  if (current !== "runs") openRun = null;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === current);
    if (a.dataset.page === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  await refresh(true);
}

async function refresh(fresh) {
  if (!me || !current) return;
  // A page with a form being filled in is not redrawn under the operator's hands (the
  // approvals page is: it keeps the reasons being typed, and new calls must show).
  const page = $("page");
  const busy = () => {
    if (fresh || current === "approvals") return false;
    const typing = page.querySelector("[data-keep]:focus, textarea:focus, input:focus");
    const typed = [...page.querySelectorAll("[data-keep]")].some((e) => "defaultValue" in e && e.value !== e.defaultValue);
    return Boolean(typing || typed);
  };
  if (busy()) return;
  // Only the latest read is drawn: an older one finishing late would show a stale page.
  const mine = ++reads;
  countdowns = [];
  try {
    const content = await pages[current]();
    // Typing may have started while the page was read: it is not drawn over then either.
    if (busy() || mine !== reads) return;
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.reasonFor : null;
    page.replaceChildren(content);
    tick();
    if (focused) {
      const again = page.querySelector(`[data-reason-for="${CSS.escape(focused)}"]`);
      if (again) { again.focus(); again.setSelectionRange(again.value.length, again.value.length); }
    }
    // A failure to load is cleared by a load that works; an action's message stays.
    if ($("status").className === "error" && fresh) status("");
  } catch (err) {
    if (err.status !== 401) status(err.message, true);
  }
  badges();
}

function tick() {
  const now = Date.now() * 1000;
  for (const [node, expires] of countdowns) {
    const left = Math.max(0, Math.round((expires - now) / 1e6));
    node.textContent = left > 0 ? `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}` : "expired";
  }
}
setInterval(tick, 1000);

// ---- overview ----------------------------------------------------------------------------

let overviewWindow = "1h";
// What each outcome counts as on the chart, bottom to top.
const KINDS = [
  { name: "admitted", outcomes: ["ok", "tool_error"], color: "#1f7a3d" },
  { name: "refused", outcomes: ["refused"], color: "#c77d00" },
  { name: "failed", outcomes: ["failed", "timed_out", "cancelled", "interrupted"], color: "#b3261e" },
];

function ms(us) {
  if (us === null || us === undefined) return "> 5 s";
  if (us < 1000) return `${us} µs`;
  if (us < 1e6) return `${Math.round(us / 100) / 10} ms`;
  return `${Math.round(us / 1e5) / 10} s`;
}

function duration(us) {
  if (us === null || us === undefined) return "—";
  const s = Math.round(us / 1e6);
  return s < 60 ? `${s} s` : s < 3600 ? `${Math.round(s / 60)} min` : `${Math.round(s / 360) / 10} h`;
}

// Calls over time, stacked by what became of them (uPlot; one bar per span of the window).
function callsChart(o, box) {
  const c = o.calls;
  const starts = [];
  for (let t = c.since_us; t < c.until_us; t += c.span_us) starts.push(t);
  const bySpan = new Map(c.spans.map((s) => [s.start_us, s.by_outcome]));
  const raw = KINDS.map((k) => starts.map((t) => k.outcomes.reduce((n, out) => n + ((bySpan.get(t) || {})[out] || 0), 0)));
  // Stacked: each series is the sum of those below it, drawn top first.
  const stacked = raw.map((_, i) => starts.map((_, j) => raw.slice(0, i + 1).reduce((n, r) => n + r[j], 0)));
  const total = raw.reduce((n, r) => n + r.reduce((a, b) => a + b, 0), 0);
  const width = Math.max(320, (box.clientWidth || 900) - 8);
  const bars = uPlot.paths.bars({ size: [0.8, 48] });
  const order = KINDS.map((_, i) => i).reverse();
  const opts = {
    width, height: 220,
    scales: { x: { time: true } },
    legend: { live: true },
    series: [{}, ...order.map((i) => ({
      label: KINDS[i].name, stroke: KINDS[i].color, fill: KINDS[i].color, width: 0, paths: bars, points: { show: false },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? "—" : raw[i][idx]),
    }))],
    axes: [
      { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.15)" } },
      // Calls are whole: whole ticks only.
      { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.15)" }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6] },
    ],
  };
  const data = [starts.map((t) => t / 1e6), ...order.map((i) => stacked[i])];
  const chart = el("div", { class: "chart", id: "calls-chart", role: "img",
    "aria-label": `Calls in the last ${o.window}: ${KINDS.map((k, i) => `${raw[i].reduce((a, b) => a + b, 0)} ${k.name}`).join(", ")}` });
  box.append(chart);
  new uPlot(opts, data, chart);
  return total;
}

async function overview() {
  const o = await api("GET", `/api/overview?window=${encodeURIComponent(overviewWindow)}`);
  const wrap = el("div", { id: "overview" });
  const picker = el("div", { class: "row", role: "group", "aria-label": "time window" }, o.windows.map((w) =>
    el("button", { type: "button", class: w === o.window ? "" : "secondary", "aria-pressed": w === o.window ? "true" : "false", "data-window": w,
      onclick: () => { overviewWindow = w; refresh(true); } }, w)));
  wrap.append(el("h2", { text: "Overview" }), picker);
  if (o.halt.halted) wrap.append(el("p", { class: "halted", text: `Halted ${when(o.halt.at_us)} by ${o.halt.by}: ${o.halt.why}. No call is admitted.` }));
  const a = o.approvals;
  const counts = KINDS.map((k) => [k.name, o.calls.spans.reduce((n, s) => n + k.outcomes.reduce((m, out) => m + (s.by_outcome[out] || 0), 0), 0)]);
  wrap.append(el("div", { class: "tiles" },
    counts.map(([name, n]) => el("div", { class: `tile ${name}`, "data-tile": name }, el("b", { text: n }), el("span", { text: `${name}` }))),
    el("div", { class: "tile", "data-tile": "waiting" }, el("b", { text: a.waiting }), el("a", { href: "#approvals", text: "waiting for a person" })),
    el("div", { class: "tile", "data-tile": "decided" }, el("b", { text: a.approved + a.denied }),
      el("span", { text: `decided (${a.approved} approved, ${a.denied} denied, ${a.expired} expired); median ${duration(a.median_decision_us)} to decide` }))));
  const chartBox = el("section", { "aria-label": "calls over time" }, el("h3", { text: `Calls in the last ${o.window}` }));
  wrap.append(chartBox);
  // The chart needs the page's width: drawn once the page is in place.
  setTimeout(() => {
    try {
      if (callsChart(o, chartBox) === 0) chartBox.append(empty("No calls in this window yet."));
    } catch (err) { chartBox.append(el("p", { class: "error", text: `The chart could not be drawn: ${err.message}` })); }
  }, 0);
  const most = Math.max(1, ...o.calls.refusals.map((r) => r.calls));
  wrap.append(el("h3", { text: "Refusals by step and rule" }),
    o.calls.refusals.length === 0 ? empty("Nothing was refused in this window.")
      : table(["Step", "Rule", "Calls", ""], o.calls.refusals.map((r) =>
        el("tr", { "data-refusal": `${r.step}/${r.rule}` }, el("td", { text: r.step || "—" }), el("td", { text: r.rule || "—" }), el("td", { text: r.calls }),
          el("td", {}, el("meter", { min: 0, max: most, value: r.calls, "aria-label": `${r.calls} refusals` }))))));
  wrap.append(el("h3", { text: "Latency per tool (calls that ran)" }),
    o.calls.tools.length === 0 ? empty("No tool ran in this window.")
      : table(["Tool", "Calls", "Median", "95th percentile", "Mean"], o.calls.tools.map((t) =>
        el("tr", { "data-tool": t.tool }, el("td", { text: t.tool }), el("td", { text: t.calls }),
          el("td", { text: `≤ ${ms(t.p50_us)}` }), el("td", { text: t.p95_us === null ? "> 5 s" : `≤ ${ms(t.p95_us)}` }), el("td", { text: ms(t.mean_us) })))));
  wrap.append(el("h3", { text: "Upstream servers" }),
    o.upstreams.length === 0 ? empty("No upstream servers.")
      : table(["Upstream", "State", "Tools", "Last error"], o.upstreams.map((u) =>
        el("tr", {}, el("td", { text: u.name }), el("td", { class: u.connected ? "ok" : "error", text: u.connected ? "connected" : "down" }),
          el("td", { text: u.tools }), el("td", { text: u.last_error || "" })))));
  return wrap;
}

// The overview is live: read again every 10 s while it is shown (calls do not announce
// themselves on the event stream).
setInterval(() => { if (me && current === "overview" && !document.hidden) refresh(false); }, 10000);

// What the approvals page knows of each waiting call beyond its row (loaded once per call).
const contexts = new Map();

function diffView(text) {
  return el("pre", { class: "diff" }, text.split("\n").map((line) =>
    el("span", { class: line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : null }, line + "\n")));
}

function detailOf(ctx) {
  const d = ctx.detail;
  const parts = [];
  if (d.kind === "diff") {
    parts.push(el("p", { class: "muted", text: d.unavailable ? `${d.path}: no diff (${d.unavailable})` : d.exists ? `What would change in ${d.path}:` : `A new file, ${d.path}:` }));
    if (d.diff) parts.push(diffView(d.diff));
  } else if (d.kind === "command") {
    parts.push(el("p", {}, "Runs ", el("code", { text: [d.command, ...(d.args || [])].join(" ") }), " in ", el("code", { text: `${d.root ? `${d.root}:` : ""}${d.cwd}` })));
  } else if (d.kind === "request") {
    parts.push(el("p", {}, el("code", { text: `${d.method} ${d.url}` }), ` — body ${d.body_bytes} bytes`));
  }
  if (ctx.recent.length) {
    parts.push(el("p", { class: "muted", text: "This session's latest calls:" }),
      el("ul", { class: "recent" }, ctx.recent.map((c) => el("li", {}, ago(c.at_us), ` ${c.tool}: ${c.outcome}${c.rule ? ` (${c.rule})` : ""}`))));
  } else {
    parts.push(el("p", { class: "muted", text: "No earlier call in this session." }));
  }
  return parts;
}

async function approvals() {
  const [rows, all] = await Promise.all([api("GET", "/api/approvals"), api("GET", "/api/approvals?all=true")]);
  const wrap = el("div", {}, el("h2", { text: "Calls waiting for a person" }));
  if (window.Notification && Notification.permission === "default") {
    wrap.append(el("p", {}, el("button", { type: "button", class: "secondary", id: "notify", onclick: async () => {
      await Notification.requestPermission();
      refresh(true);
    } }, "Notify me when a call waits")));
  }
  if (rows.length === 0) {
    wrap.append(empty("No call is waiting for a person. Calls of Restricted tools, and calls a rule sends to ask_user, appear here the moment they arrive."));
  } else {
    wrap.append(table(["Agent", "Tool", "Arguments", "Asked by", "Time left", "Decision"], rows.map((r) => {
      const left = el("span", { class: "countdown" });
      countdowns.push([left, r.expires_at_us]);
      // A reason being typed survives the page being redrawn when another call arrives.
      const why = el("input", { placeholder: "reason (recorded)", "data-keep": true, "data-reason-for": r.id, maxlength: 1000, "aria-label": `reason for ${r.tool}`,
        value: reasons[r.id] || "", oninput: (e) => { reasons[r.id] = e.target.value; } });
      const decide = (verdict) => async () => {
        if (!why.value.trim()) { status("Say why: the reason is recorded with the decision.", true); why.focus(); return; }
        try {
          await api("POST", `/api/approvals/${encodeURIComponent(r.id)}/${verdict}`, { why: why.value });
          status(`Call ${r.id} ${verdict === "approve" ? "approved" : "denied"}.`);
          refresh(true);
        } catch (err) { status(err.message, true); }
      };
      const can = may("approve_calls");
      // What it would change, run or send, and what the agent did before: loaded beside it.
      const more = el("div", { class: "context", "data-context-for": r.id });
      const show = (ctx) => more.replaceChildren(...detailOf(ctx));
      if (contexts.has(r.id)) show(contexts.get(r.id));
      else api("GET", `/api/approvals/${encodeURIComponent(r.id)}/context`).then((ctx) => { contexts.set(r.id, ctx); show(ctx); }).catch(() => {});
      return el("tr", { "data-call": r.id },
        el("td", { text: r.agent }), el("td", { text: r.tool }),
        el("td", {}, el("pre", { text: r.arguments }), more),
        el("td", { text: r.asked_by + (r.reason ? ` — ${r.reason}` : "") }),
        el("td", {}, left),
        el("td", {}, why, " ",
          el("button", { type: "button", class: "approve", onclick: decide("approve"), disabled: !can }, "Approve"), " ",
          el("button", { type: "button", class: "danger deny", onclick: decide("deny"), disabled: !can }, "Deny")));
    })));
  }
  const decided = all.filter((a) => a.state !== "pending").slice(0, 50);
  wrap.append(el("h3", { text: "Decided and expired" }),
    decided.length === 0 ? empty("No call has been decided yet.")
      : table(["Asked", "Agent", "Tool", "Became", "By", "Why", "Took"], decided.map((a) =>
        el("tr", { "data-decided": a.id },
          el("td", {}, ago(a.requested_at_us)), el("td", { text: a.agent }), el("td", { text: a.tool }),
          el("td", { class: a.state === "approved" ? "ok" : "error", text: a.state }),
          el("td", { text: a.decided_by || "—" }), el("td", { text: a.why || "" }),
          el("td", { text: a.decided_at_us ? duration(a.decided_at_us - a.requested_at_us) : "—" })))));
  return wrap;
}

let auditFilter = {};
let auditVerdict = { cls: "muted", text: "" };

function auditQuery(extra) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...auditFilter, ...extra })) if (v) q.set(k, v);
  return q.toString();
}

// The audit page's place: the newest rows, or those before a row (paging back), and the row
// whose detail is open.
let auditBefore = null;
let auditOpen = null;
const AUDIT_PAGE = 100;

// An audit row in full, with a link to its trace where the operator named a tracing UI.
function auditDetail(r) {
  const traceId = r.trace ? String(r.trace).split("-")[1] : null;
  const link = traceId && me.trace_url
    ? el("a", { href: me.trace_url.replace("{trace_id}", encodeURIComponent(traceId)), target: "_blank", rel: "noopener noreferrer", id: "trace-link" }, `trace ${traceId}`)
    : null;
  return el("div", { class: "notice", id: "audit-detail" },
    el("h3", { text: `Row ${r.seq}: ${r.tool} by ${r.agent}` }),
    el("p", {}, link || (traceId ? `trace ${traceId} (set [console] trace_url to link it)` : "no trace recorded"), " ",
      el("button", { type: "button", class: "secondary", onclick: () => { auditOpen = null; refresh(true); } }, "Close")),
    table(["Field", "Value"], Object.entries(r).map(([k, v]) =>
      el("tr", {}, el("th", { scope: "row", text: k }), el("td", {}, el("pre", { text: typeof v === "string" ? v : JSON.stringify(v) }))))));
}

async function audit() {
  const rows = await api("GET", `/api/audit?${auditQuery({ limit: AUDIT_PAGE, before: auditBefore })}`);
  const field = (name, label, attrs) => el("label", {}, label, " ", el("input", { name, value: auditFilter[name] || "", "data-keep": true, ...attrs }));
  const outcome = el("select", { name: "outcome" }, ["", "ok", "tool_error", "refused", "cancelled", "timed_out", "failed"].map((o) =>
    el("option", { value: o, selected: auditFilter.outcome === o, text: o || "any decision" })));
  const since = el("input", { type: "datetime-local", name: "since" });
  const until = el("input", { type: "datetime-local", name: "until" });
  const form = el("form", { class: "row", onsubmit: (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const us = (v) => (v ? String(new Date(v).getTime() * 1000) : "");
    auditFilter = { agent: f.get("agent"), tool: f.get("tool"), outcome: f.get("outcome"), call_id: f.get("call_id"), since_us: us(f.get("since")), until_us: us(f.get("until")) };
    auditBefore = null;
    auditOpen = null;
    refresh(true);
  } },
    field("agent", "Agent"), field("tool", "Tool"), el("label", {}, "Decision ", outcome), field("call_id", "Call id"),
    el("label", {}, "From ", since), el("label", {}, "To ", until),
    el("button", { type: "submit" }, "Search"));
  // The last verdict survives the page being redrawn by a live update.
  const verdict = el("span", { class: auditVerdict.cls, id: "audit-verdict", text: auditVerdict.text });
  const show = (cls, text) => {
    auditVerdict = { cls, text };
    const node = $("audit-verdict");
    if (node) { node.className = cls; node.textContent = text; }
  };
  const verify = el("button", { type: "button", class: "secondary", onclick: async () => {
    show("muted", "checking…");
    try {
      const r = await api("POST", "/api/audit/verify");
      show(r.intact ? "ok" : "error", r.intact
        ? `The chain is intact: ${r.report.rows} rows, ${r.report.receipts} receipts checked.`
        : `The chain is broken: ${r.report.breaks.length} break(s), ${(r.report.mismatched || []).length} receipt(s) not matching their row, ${r.report.unaudited.length} admitted call(s) without their row.`);
    } catch (err) { show("error", err.message); }
  } }, "Verify the chain");
  const wrap = el("div", {}, el("h2", { text: "Audit" }), form,
    el("p", { class: "row" },
      el("button", { type: "button", class: "secondary", "data-export": "csv", onclick: () => exportAudit("csv") }, "Export CSV"), " ",
      el("button", { type: "button", class: "secondary", "data-export": "json", onclick: () => exportAudit("json") }, "Export JSON"), " ",
      verify, verdict));
  if (rows.length === 0) {
    wrap.append(empty("No audit rows match. Calls appear here as agents make them; widen the search or clear the filters."));
    return wrap;
  }
  const open = rows.find((r) => r.seq === auditOpen);
  if (open) wrap.append(auditDetail(open));
  const pager = el("p", { class: "row", id: "audit-pager" },
    el("button", { type: "button", class: "secondary", id: "audit-newest", disabled: auditBefore === null, onclick: () => { auditBefore = null; refresh(true); } }, "Newest"),
    el("span", { class: "muted", text: `rows ${rows[0].seq} to ${rows[rows.length - 1].seq}` }),
    el("button", { type: "button", class: "secondary", id: "audit-older", disabled: rows.length < AUDIT_PAGE, onclick: () => { auditBefore = rows[rows.length - 1].seq; refresh(true); } }, "Older"));
  wrap.append(pager);
  wrap.append(table(["#", "When", "Agent", "Tool", "Decision", "Step / rule", "Arguments", "Result or reason"], rows.map((r) =>
    el("tr", { "data-call": r.call_id, "data-seq": r.seq },
      el("td", {}, el("button", { type: "button", class: "link", "aria-label": `row ${r.seq} in full`, onclick: () => { auditOpen = r.seq; refresh(true); } }, String(r.seq))),
      el("td", {}, ago(r.at_us)), el("td", { text: r.agent }), el("td", { text: r.tool }),
      el("td", { class: r.outcome === "ok" ? "ok" : "error", text: r.outcome }),
      el("td", { text: [r.step, r.rule].filter(Boolean).join(" / ") }),
      el("td", {}, el("pre", { text: r.arguments })),
      el("td", {}, el("pre", { text: r.reason || r.result }))))));
  return wrap;
}

// A download needs the key header too: fetched, then handed to the browser as a file.
async function exportAudit(format) {
  try {
    const res = await fetch(`/api/audit/export?${auditQuery({ format })}`, { credentials: "same-origin", headers: { "x-aether-key": key() } });
    if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
    const truncated = res.headers.get("x-aether-truncated") === "true";
    const url = URL.createObjectURL(await res.blob());
    const a = el("a", { href: url, download: `aether-audit.${format}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    status(truncated ? "Exported the newest 9,999 matching rows; narrow the search by time for the rest." : "Exported.");
  } catch (err) { status(err.message, true); }
}

// The registry page's filters and the definitions picked for approval.
let registryState = "";
let registryOrigin = "";
let bulkWhy = "";
const picked = new Set();

async function registry() {
  const rows = await api("GET", "/api/registry");
  const wrap = el("div", {}, el("h2", { text: "Registry" }));
  const detail = el("div", { id: "registry-detail" });
  const act = (name, action) => async () => {
    const why = prompt(`Why ${action} ${name}? (recorded)`);
    if (!why) return;
    try {
      await api("POST", `/api/registry/${encodeURIComponent(name)}/${action}`, { why });
      status(`${name}: ${action} done.`);
      refresh(true);
    } catch (err) { status(err.message, true); }
  };
  const showDetail = (name) => async () => {
    try {
      const r = await api("GET", `/api/registry/${encodeURIComponent(name)}`);
      const diff = el("pre", { class: "diff" });
      for (const line of (r.diff || "").split("\n")) {
        diff.append(el("span", { class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "", text: line + "\n" }));
      }
      const isNew = (f) => (r.new_findings || []).some((n) => n.rule === f.rule && n.place === f.place && n.subject === f.subject);
      const findings = (r.findings || []).length === 0 ? null : el("div", { class: "findings" },
        el("h3", { text: `The definition screen found ${r.findings.length} thing(s): review before approving` }),
        table(["", "Finding", "Where", "What"], r.findings.map((f) =>
          el("tr", { "data-finding": f.rule },
            el("td", { class: isNew(f) ? "error" : "muted", text: isNew(f) ? "new" : "" }),
            el("td", { text: `${f.rule} (${f.class})` }),
            el("td", { text: f.place }),
            el("td", { text: f.excerpt })))));
      detail.replaceChildren(el("h3", { text: name }), findings || "",
        r.diff ? el("div", {}, el("p", { text: "The definition changed since it was approved:" }), diff) : el("p", { class: "muted", text: "No change against the approved definition." }),
        el("h3", { text: "Definition now" }), el("pre", { text: JSON.stringify(JSON.parse(r.definition || "{}"), null, 2) }));
    } catch (err) { status(err.message, true); }
  };
  if (rows.length === 0) {
    wrap.append(empty("The registry is empty: it fills when Aether starts (built-ins) and when upstream servers are listed."));
    return wrap;
  }
  const can = may("manage_registry");
  const changedOf = (r) => r.state === "approved" && r.seen_digest !== r.approved_digest;
  const stateOf = (r) => (changedOf(r) ? "changed" : r.state);
  // What an approval would change: not approved yet, withdrawn, or changed since approval.
  const waiting = (r) => r.state !== "approved" || changedOf(r);
  // Filters by state and origin, kept across redraws.
  const origins = [...new Set(rows.map((r) => r.origin))].sort();
  const pick = (name, value, options, set) => el("label", {}, `${name} `,
    el("select", { name, "aria-label": name, onchange: (e) => { set(e.target.value); picked.clear(); refresh(true); } },
      options.map(([v, text]) => el("option", { value: v, selected: v === value, text }))));
  // data-shown says which filters the rows below were drawn for (a test waits on it).
  wrap.append(el("div", { class: "row", id: "registry-filters", "data-shown": `${registryState}|${registryOrigin}` },
    pick("state", registryState, [["", "any state"], ["unapproved", "waiting for approval"], ["changed", "changed since approval"], ["approved", "approved"], ["withdrawn", "withdrawn"]], (v) => { registryState = v; }),
    pick("origin", registryOrigin, [["", "any origin"], ...origins.map((o) => [o, o])], (v) => { registryOrigin = v; })));
  const shown = rows.filter((r) => (!registryState || stateOf(r) === registryState) && (!registryOrigin || r.origin === registryOrigin));
  // Approving several at once: one reason, each pinned to the definition listed here.
  const selectable = shown.filter(waiting);
  for (const name of [...picked]) if (!selectable.some((r) => r.name === name)) picked.delete(name);
  const reason = el("input", { name: "bulk-why", placeholder: "reason (recorded with each)", "aria-label": "reason for approving the selected tools", maxlength: 1000, "data-keep": true,
    value: bulkWhy, oninput: (e) => { bulkWhy = e.target.value; } });
  const approveSelected = async () => {
    const chosen = selectable.filter((r) => picked.has(r.name));
    if (chosen.length === 0) { status("Select the tools to approve first.", true); return; }
    if (!reason.value.trim()) { status("Say why: the reason is recorded with each approval.", true); reason.focus(); return; }
    if (!confirm(`Approve ${chosen.length} tool definition(s)?\n\n${chosen.map((r) => r.name).join("\n")}`)) return;
    const failed = [];
    for (const r of chosen) {
      try { await api("POST", `/api/registry/${encodeURIComponent(r.name)}/approve`, { why: reason.value, digest: r.seen_digest }); }
      catch (err) { failed.push(`${r.name}: ${err.message}`); }
    }
    picked.clear();
    bulkWhy = "";
    status(failed.length ? `${chosen.length - failed.length} approved; not approved: ${failed.join("; ")}` : `${chosen.length} approved.`, failed.length > 0);
    refresh(true);
  };
  if (selectable.length) {
    wrap.append(el("div", { class: "row", id: "registry-bulk" },
      el("label", {}, el("input", { type: "checkbox", name: "all", disabled: !can, checked: selectable.every((r) => picked.has(r.name)),
        // Ticked in place, not redrawn: a redraw while the reason is being typed would drop it.
        onchange: (e) => {
          for (const r of selectable) e.target.checked ? picked.add(r.name) : picked.delete(r.name);
          for (const box of wrap.querySelectorAll("input[name=pick]")) box.checked = picked.has(box.value);
        } }),
        ` all ${selectable.length} waiting shown`),
      reason, el("button", { type: "button", id: "approve-selected", disabled: !can, onclick: approveSelected }, "Approve selected")));
  }
  if (shown.length === 0) {
    wrap.append(empty("No definition matches these filters."), detail);
    return wrap;
  }
  wrap.append(table(["", "Tool", "Origin", "State", "Last change", ""], shown.map((r) => {
    const changed = changedOf(r);
    return el("tr", { "data-tool": r.name },
      el("td", {}, waiting(r) ? el("input", { type: "checkbox", name: "pick", value: r.name, "aria-label": `select ${r.name}`, disabled: !can, checked: picked.has(r.name),
        onchange: (e) => {
          e.target.checked ? picked.add(r.name) : picked.delete(r.name);
          const all = wrap.querySelector("#registry-bulk input[name=all]");
          if (all) all.checked = selectable.every((s) => picked.has(s.name));
        } }) : null),
      el("td", {}, el("a", { href: "#registry", onclick: showDetail(r.name) }, r.name)),
      el("td", { text: r.origin }),
      el("td", { class: changed || r.state !== "approved" ? "error" : "ok", text: changed ? "changed since approval: held back" : r.state },
        (r.findings || []).length ? el("span", { class: "error", "data-findings": String(r.findings.length), text: ` · ${r.findings.length} screen finding(s)` }) : null),
      el("td", {}, ago(r.updated_at_us), ` by ${r.updated_by}: ${r.why}`),
      el("td", {},
        (r.state !== "approved" || changed) ? el("button", { type: "button", onclick: act(r.name, "approve"), disabled: !can }, "Approve") : null, " ",
        r.state !== "withdrawn" ? el("button", { type: "button", class: "secondary", onclick: act(r.name, "withdraw"), disabled: !can }, "Withdraw") : null));
  })), detail);
  return wrap;
}

async function agents() {
  const [list, progress] = await Promise.all([api("GET", "/api/agents"), api("GET", "/api/progress")]);
  const wrap = el("div", {}, el("h2", { text: "Agents at work" }));
  if (progress.length === 0) {
    wrap.append(empty("No progress reported yet: agents with the comms group report it with report_progress, and it shows here as it arrives."));
  } else {
    wrap.append(table(["Agent", "Session", "Progress", "What", "When"], progress.map((p) =>
      el("tr", { "data-progress": p.session },
        el("td", { text: p.agent }), el("td", { text: p.session }),
        el("td", {}, el("progress", { max: 100, value: p.percent }), ` ${p.percent}%`),
        el("td", { text: p.message || "" }), el("td", {}, ago(p.at_us))))));
  }
  wrap.append(el("h2", { text: "Agents and what each is offered" }));
  for (const a of list) {
    const offered = a.tools.filter((t) => t.offered).length;
    const r = a.rates || {};
    const limits = [
      r.rate && `${r.rate} in all`,
      r.per_caller && `${r.per_caller} per caller`,
      ...Object.entries(r.per_tool || {}).map(([tool, rate]) => `${tool} ${rate}`),
      r.concurrent && `${r.concurrent} at once`,
    ].filter(Boolean);
    wrap.append(el("h3", { text: `${a.name}${a.team ? ` (team ${a.team})` : ""}: ${offered} of ${a.tools.length} tools` }),
      el("p", { class: "muted", text: `groups: ${a.groups.join(", ") || "none"}${a.supervisor ? "; supervisor" : ""}` }),
      el("p", { class: "muted", "data-rates": a.name, text: `rate limits: ${limits.join("; ") || "none"}` }),
      table(["Tool", "Group", "Tier", "Offered?"], a.tools.map((t) =>
        el("tr", {}, el("td", { text: t.tool }), el("td", { text: t.group }), el("td", { text: t.tier }),
          el("td", { class: t.offered ? "ok" : "muted", text: t.offered ? "yes" : `no: ${t.why}` })))));
  }
  return wrap;
}

// What the last undo answered: kept across redraws until another page is shown.
let lastUndo = null;

async function journal() {
  const rows = await api("GET", "/api/journal?limit=300");
  const wrap = el("div", {}, el("h2", { text: "File changes" }),
    el("p", { class: "muted", text: "Every write, edit, move and delete an agent made, newest first. Undo puts a call's files back as they were before it; \"undo this file\" does it for one file of a call that changed several (an undo is a call of its own: journalled, audited, and itself undoable)." }));
  if (lastUndo) wrap.append(lastUndo);
  if (rows.length === 0) {
    wrap.append(empty("No file changes yet. What agents write, edit, move or delete shows here, each with an Undo."));
    return wrap;
  }
  // One row per call: its changes together, undone together.
  const calls = new Map();
  for (const e of rows) {
    if (!calls.has(e.call_id)) calls.set(e.call_id, []);
    calls.get(e.call_id).push(e);
  }
  const can = may("undo_changes");
  // Undo a whole call, or (file given) its changes to one file; confirmed first, the result
  // shown above the table.
  const undo = async (call, lines, file) => {
    const what = file ? `${file.root}:${file.path} of call ${call}` : `call ${call}`;
    if (!confirm(`Undo ${what}? ${file ? "It goes" : "These go"} back to how ${file ? "it was" : "they were"} before:\n\n${lines.join("\n")}`)) return;
    try {
      const r = await api("POST", `/api/journal/${encodeURIComponent(call)}/undo`, file);
      lastUndo = el("div", { id: "undo-result", class: "notice" },
        el("p", { class: "ok", text: `${file ? what : `Call ${call}`} undone (the undo is call ${r.undo_call}).` }), el("pre", { text: r.result }));
      status(`${what} undone.`);
    } catch (err) {
      lastUndo = el("div", { id: "undo-result", class: "notice" }, el("p", { class: "error", text: `${what} was not undone: ${err.message}` }));
      status(err.message, true);
    }
    refresh(true);
  };
  wrap.append(table(["When", "Agent", "Tool", "Changes", "Call", ""], [...calls].map(([call, entries]) => {
    const first = entries[0];
    const line = (e) => `${e.op} ${e.root}:${e.path}${e.dest ? ` → ${e.dest}` : ""}`;
    const live = entries.filter((e) => !e.reverted_by);
    // The files a call changed, each once (a move by its destination): per-file undo when the
    // call changed more than one and that one is not undone yet.
    const files = [...new Map(entries.map((e) => [`${e.root}:${e.dest || e.path}`, { root: e.root, path: e.dest || e.path }])).values()];
    const fileLine = (e) => {
      const f = { root: e.root, path: e.dest || e.path };
      const mine = entries.filter((x) => x.root === f.root && (x.path === f.path || x.dest === f.path));
      const button = files.length > 1 && mine.some((x) => !x.reverted_by)
        ? el("button", { type: "button", class: "link undo-file", "aria-label": `undo this file: ${f.root}:${f.path} of call ${call}`, disabled: !can,
          onclick: () => undo(call, mine.filter((x) => !x.reverted_by).map(line), f) }, "undo this file")
        : null;
      return el("div", { "data-file": `${f.root}:${f.path}` }, el("span", { class: e.reverted_by ? "muted" : "", text: line(e) + (e.reverted_by ? ` (undone by ${e.reverted_by})` : "") }), button ? " " : "", button || "");
    };
    return el("tr", { "data-call": call },
      el("td", {}, ago(first.at_us)),
      el("td", { text: first.agent }), el("td", { text: first.tool }),
      el("td", {}, entries.map(fileLine)),
      el("td", {}, el("code", { text: call })),
      el("td", {}, live.length === 0
        ? el("span", { class: "muted", text: `undone (${entries[0].reverted_by})` })
        : el("button", { type: "button", class: "secondary undo", "aria-label": live.length < entries.length ? `Undo the rest of call ${call}` : `Undo call ${call}`,
          disabled: !can, onclick: () => undo(call, live.map(line)) }, live.length < entries.length ? "Undo the rest" : "Undo")));
  })));
  return wrap;
}

// A run whose transcript is open.
let openRun = null;

async function runs() {
  const list = await api("GET", "/api/runs?limit=100");
  const wrap = el("div", {}, el("h2", { text: "Agent runs" }));
  if (list.length === 0) {
    wrap.append(empty("No agent runs yet. aether agent run --agent NAME --model NAME \"task\" starts one; delegate and spawn_subagents start them too."));
    return wrap;
  }
  const can = may("halt");
  wrap.append(table(["Started", "Agent", "Model", "Status", "Rounds", "Tokens", "Task", ""], list.map((r) =>
    el("tr", { "data-run": r.id },
      el("td", {}, ago(r.started_us)), el("td", { text: r.agent }), el("td", { text: r.model }),
      el("td", { class: r.status === "done" ? "ok" : r.status === "running" ? "" : "error", text: r.status }),
      el("td", { text: r.rounds }), el("td", { text: r.prompt_tokens + r.completion_tokens }),
      el("td", { text: r.task.length > 120 ? `${r.task.slice(0, 120)}…` : r.task }),
      el("td", {},
        el("button", { type: "button", class: "secondary transcript", onclick: () => { openRun = r.id; refresh(true); } }, "Transcript"), " ",
        r.status === "running" ? el("button", { type: "button", class: "danger stop", disabled: !can, onclick: async () => {
          const why = prompt(`Why stop run ${r.id}? (recorded)`);
          if (!why) return;
          try { await api("POST", `/api/runs/${encodeURIComponent(r.id)}/stop`, { why }); status(`Asked run ${r.id} to stop.`); refresh(true); } catch (err) { status(err.message, true); }
        } }, "Stop") : null)))));
  if (openRun) {
    try {
      const t = await api("GET", `/api/runs/${encodeURIComponent(openRun)}`);
      wrap.append(el("section", { id: "run-transcript" }, el("h3", { text: `Transcript of run ${t.run.id} (${t.run.status})` }),
        table(["#", "When", "What", "Detail"], t.events.map((e) =>
          el("tr", {}, el("td", { text: e.seq }), el("td", {}, ago(e.at_us)), el("td", { text: e.kind }),
            el("td", {}, el("pre", { text: JSON.stringify(e.body, null, 1) })))))));
    } catch (err) { wrap.append(el("p", { class: "error", text: err.message })); }
  }
  return wrap;
}

async function commands() {
  const list = await api("GET", "/api/commands?limit=200");
  const wrap = el("div", {}, el("h2", { text: "Command log" }),
    el("p", { class: "muted", text: "Every program run_command and run_shell started, newest first." }));
  if (list.length === 0) {
    wrap.append(empty("No command has run yet. Programs an agent runs with run_command or run_shell show here with their exit status."));
    return wrap;
  }
  const exit = (end) => !end ? "running (or Aether stopped first)"
    : end.timed_out ? "timed out" : end.exit_code === null || end.exit_code === undefined ? "killed" : `exit ${end.exit_code}`;
  wrap.append(table(["Started", "Agent", "Tool", "Command", "Folder", "Sandbox", "Ended", "Call"], list.map((c) =>
    el("tr", { "data-command": c.id },
      el("td", {}, ago(c.at_us)), el("td", { text: c.agent }), el("td", { text: c.tool }),
      el("td", {}, el("pre", { text: c.command })),
      el("td", { text: `${c.root}:${c.cwd}` }), el("td", { text: c.sandbox }),
      el("td", { class: c.end && c.end.exit_code === 0 ? "ok" : "error", text: exit(c.end) }),
      el("td", {}, el("code", { text: c.call_id }))))));
  return wrap;
}

// A token just made: its secret, shown on this page until it is left.
let madeToken = null;

async function tokens() {
  if (!may("manage_agents")) return empty("Agents' tokens are managed by operators.");
  const [list, agentList] = await Promise.all([api("GET", "/api/tokens"), api("GET", "/api/agents")]);
  const wrap = el("div", {}, el("h2", { text: "Bearer tokens" }));
  if (madeToken) {
    wrap.append(el("div", { class: "notice", id: "new-token" },
      el("p", { text: `The token for ${madeToken.agent}, shown once (only its hash is kept): give it to the client as Authorization: Bearer …` }),
      el("pre", { id: "new-token-value", text: madeToken.token })));
  }
  const agent = el("select", { name: "agent", "aria-label": "agent" }, agentList.map((a) => el("option", { value: a.name, text: a.name })));
  const label = el("input", { name: "label", placeholder: "label (e.g. the client)", maxlength: 200, "aria-label": "label", "data-keep": true });
  wrap.append(el("form", { class: "row", id: "token-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const r = await api("POST", "/api/tokens", { agent: agent.value, label: label.value });
      madeToken = { agent: agent.value, token: r.token };
      label.value = label.defaultValue;
      status(`Token ${r.row.id} made for ${agent.value}.`);
      refresh(true);
    } catch (err) { status(err.message, true); }
  } }, el("label", {}, "Agent ", agent), el("label", {}, "Label ", label), el("button", { type: "submit" }, "Make a token")));
  if (list.length === 0) {
    wrap.append(empty("No tokens yet. Until one exists, callers on this computer act as the HTTP agent without one."));
    return wrap;
  }
  wrap.append(table(["Id", "Kind", "For", "Label", "Made", "State", ""], list.map((t) =>
    el("tr", { "data-token": t.id },
      el("td", {}, el("code", { text: t.id })), el("td", { text: t.kind }), el("td", { text: t.subject }),
      el("td", { text: t.label }), el("td", {}, ago(t.created_at_us), ` by ${t.created_by}`),
      el("td", { class: t.revoked_at_us ? "muted" : "ok" }, t.revoked_at_us ? ["revoked ", ago(t.revoked_at_us), ` by ${t.revoked_by}`] : "in force"),
      el("td", {}, t.revoked_at_us || t.kind !== "agent" ? null : el("button", { type: "button", class: "danger revoke", "aria-label": `Revoke token ${t.id}`, onclick: async () => {
        if (!confirm(`Revoke token ${t.id} (${t.subject}${t.label ? `, ${t.label}` : ""})? Its client is refused from now on.`)) return;
        try { await api("POST", `/api/tokens/${encodeURIComponent(t.id)}/revoke`); status(`Token ${t.id} revoked.`); refresh(true); } catch (err) { status(err.message, true); }
      } }, "Revoke"))))));
  return wrap;
}

async function sources() {
  const list = await api("GET", "/api/sources");
  const can = may("manage_sources");
  const wrap = el("div", {}, el("h2", { text: "Upstream MCP servers" }),
    el("p", {}, el("button", { type: "button", class: "secondary", disabled: !can, onclick: async () => {
      try { await api("POST", "/api/sources/refresh"); status("Asked every upstream to be listed again."); } catch (err) { status(err.message, true); }
    } }, "List them again")));
  if (list.length === 0) {
    wrap.append(empty("No upstream servers. Add one to aether.toml as [upstreams.NAME] with command = \"…\" (stdio) or url = \"https://…\" (Streamable HTTP), then restart Aether."));
    return wrap;
  }
  wrap.append(table(["Upstream", "Transport", "State", "Tools", "Fingerprint", "Last error", ""], list.map((s) =>
    el("tr", {},
      el("td", { text: s.name }), el("td", { text: s.transport }),
      el("td", { class: s.connected ? "ok" : "error", text: s.connected ? "connected" : "down" }),
      el("td", { text: s.tool_count }), el("td", {}, el("code", { text: s.fingerprint.slice(0, 16) })),
      el("td", { text: s.last_error || "" }),
      el("td", {}, el("button", { type: "button", disabled: !can, onclick: async () => {
        const why = prompt(`Why approve ${s.name}'s waiting tools? (recorded)`);
        if (!why) return;
        try {
          const r = await api("POST", `/api/sources/${encodeURIComponent(s.name)}/approve`, { why, fingerprint: s.fingerprint });
          status(`${r.approved.length} tool(s) of ${s.name} approved.`);
        } catch (err) { status(err.message, true); }
      } }, "Approve its tools"))))));
  return wrap;
}

async function policy() {
  const p = await api("GET", "/api/policy");
  const wrap = el("div", {}, el("h2", { text: "Rules" }),
    el("p", { class: "muted", text: p.file ? `From ${p.file}` : "No rules file: tiers alone decide." }));
  if (p.last_error) wrap.append(el("p", { class: "error", text: `The last reload failed (the previous rules stay in force): ${p.last_error}` }));
  if (p.rules.length === 0) wrap.append(empty("No rules yet. Write permissions.yaml beside aether.toml; Aether reloads it when it changes."));
  else wrap.append(table(["#", "Name", "Action", "Matches", "Reason"], p.rules.map((r) =>
    el("tr", {}, el("td", { text: r.position }), el("td", { text: r.name }), el("td", { text: r.action }),
      el("td", {}, el("pre", { text: JSON.stringify(r.matches) })), el("td", { text: r.reason || "" })))));
  const draft = el("textarea", { name: "draft", "data-keep": true, placeholder: "rules:\n  - name: …" });
  const hours = el("input", { type: "number", name: "hours", value: 24, min: 1, max: 8760, "data-keep": true });
  const result = el("div", { id: "replay-result" });
  wrap.append(el("h3", { text: "Replay a draft against past calls" }), draft,
    el("p", { class: "row" }, el("label", {}, "Hours of audit ", hours),
      el("button", { type: "button", disabled: !may("manage_policy"), onclick: async () => {
        try {
          const r = await api("POST", "/api/policy/replay", { draft: draft.value, hours: Number(hours.value) });
          result.replaceChildren(el("p", { text: `${r.calls} call(s) replayed; ${r.changed.length} decision(s) would change.` }),
            r.changed.length ? table(["When", "Agent", "Tool", "Was", "Now", "After"], r.changed.map((c) =>
              el("tr", {}, el("td", {}, ago(c.at_us)), el("td", { text: c.agent }), el("td", { text: c.tool }),
                el("td", { text: c.outcome }), el("td", { text: c.before }), el("td", { text: c.after })))) : null);
        } catch (err) { result.replaceChildren(el("p", { class: "error", text: err.message })); }
      } }, "Replay")), result);
  return wrap;
}

async function halt() {
  const h = await api("GET", "/api/halt");
  const why = el("input", { name: "why", placeholder: "reason (recorded)", "data-keep": true, maxlength: 1000, size: 40 });
  const act = (stop) => async () => {
    if (!why.value.trim()) { status("Say why: the reason is recorded.", true); why.focus(); return; }
    if (!confirm(stop ? "Halt Aether? No new call will be admitted anywhere until it is resumed." : "Resume Aether? Calls will be admitted again.")) return;
    try {
      await api("POST", stop ? "/api/halt" : "/api/resume", { why: why.value });
      status(stop ? "Halted." : "Resumed.");
      refresh(true);
    } catch (err) { status(err.message, true); }
  };
  const can = may("halt");
  return el("div", {}, el("h2", { text: "Emergency halt" }),
    h.halted
      ? el("p", { class: "halted", id: "halt-state", text: `Halted ${when(h.at_us)} by ${h.by}: ${h.why}. No call is admitted.` })
      : el("p", { id: "halt-state", text: "Running: calls are admitted." }),
    el("p", { class: "row" }, why, " ",
      h.halted
        ? el("button", { type: "button", id: "resume-button", onclick: act(false), disabled: !can }, "Resume")
        : el("button", { type: "button", class: "danger", id: "halt-button", onclick: act(true), disabled: !can }, "Halt everything")));
}

async function accounts() {
  if (!may("manage_accounts")) return empty("Accounts are managed by admins.");
  const data = await api("GET", "/api/accounts");
  const role = el("select", { name: "role" }, data.roles.map((r) => el("option", { value: r.name, text: `${r.name}: ${r.about}` })));
  const form = el("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    try {
      await api("POST", "/api/accounts", { name: f.get("name"), password: f.get("password"), role: f.get("role") });
      status(`Account ${f.get("name")} created.`);
      refresh(true);
    } catch (err) { status(err.message, true); }
  } },
    el("label", {}, "Name ", el("input", { name: "name", required: true, maxlength: 64, "data-keep": true })),
    el("label", {}, "Password ", el("input", { name: "password", type: "password", required: true, minlength: 10, autocomplete: "new-password", "data-keep": true })),
    el("label", {}, "Role ", role), el("button", { type: "submit" }, "Create"));
  return el("div", {}, el("h2", { text: "Accounts" }),
    table(["Name", "Role", "Created", ""], data.accounts.map((a) =>
      el("tr", {}, el("td", { text: a.name }), el("td", { text: a.role }), el("td", {}, ago(a.created_us), ` by ${a.created_by}`),
        el("td", {}, a.name === me.name ? null : el("button", { type: "button", class: "secondary", onclick: async () => {
          if (!confirm(`Remove ${a.name}?`)) return;
          try { await api("POST", `/api/accounts/${encodeURIComponent(a.name)}/remove`); refresh(true); } catch (err) { status(err.message, true); }
        } }, "Remove"))))),
    el("h3", { text: "New account" }), form);
}

signInMethods();
start();

// Aether's console: one page per operator task, drawn from the admin JSON API, refreshed when
// the server says something changed (server-sent events). Every value from the server is put
// in the page as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
let me = null;
let current = null;
let events = null;
let refreshTimer = null;
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

async function start() {
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

async function badges() {
  try {
    const [pending, halt] = await Promise.all([api("GET", "/api/approvals"), api("GET", "/api/halt")]);
    const count = $("pending-count");
    count.hidden = pending.length === 0;
    count.textContent = pending.length;
    $("halt-flag").hidden = !halt.halted;
  } catch { /* status shown elsewhere */ }
}

// ---- pages -------------------------------------------------------------------------------

const pages = { approvals, audit, registry, agents, sources, policy, halt, accounts };

window.addEventListener("hashchange", () => show());

async function show() {
  const name = location.hash.slice(1) || "approvals";
  current = pages[name] ? name : "approvals";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === current);
  await refresh(true);
}

async function refresh(fresh) {
  if (!me || !current) return;
  // A page with a form being filled in is not redrawn under the operator's hands (the
  // approvals page is: it keeps the reasons being typed, and new calls must show).
  const page = $("page");
  if (!fresh && current !== "approvals") {
    const typing = page.querySelector("[data-keep]:focus, textarea:focus, input:focus");
    const typed = [...page.querySelectorAll("[data-keep]")].some((e) => "defaultValue" in e && e.value !== e.defaultValue);
    if (typing || typed) return;
  }
  countdowns = [];
  try {
    const content = await pages[current]();
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

async function approvals() {
  const rows = await api("GET", "/api/approvals");
  const wrap = el("div", {}, el("h2", { text: "Calls waiting for a person" }));
  if (rows.length === 0) {
    wrap.append(empty("No call is waiting for a person. Calls of Restricted tools, and calls a rule sends to ask_user, appear here the moment they arrive."));
    return wrap;
  }
  wrap.append(table(["Agent", "Tool", "Arguments", "Asked by", "Time left", "Decision"], rows.map((r) => {
    const left = el("span", { class: "countdown" });
    countdowns.push([left, r.expires_at_us]);
    // A reason being typed survives the page being redrawn when another call arrives.
    const why = el("input", { placeholder: "reason (recorded)", "data-keep": true, "data-reason-for": r.id, maxlength: 1000, "aria-label": "reason",
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
    return el("tr", { "data-call": r.id },
      el("td", { text: r.agent }), el("td", { text: r.tool }),
      el("td", {}, el("pre", { text: r.arguments })),
      el("td", { text: r.asked_by + (r.reason ? ` — ${r.reason}` : "") }),
      el("td", {}, left),
      el("td", {}, why, " ",
        el("button", { type: "button", class: "approve", onclick: decide("approve"), disabled: !can }, "Approve"), " ",
        el("button", { type: "button", class: "danger deny", onclick: decide("deny"), disabled: !can }, "Deny")));
  })));
  return wrap;
}

let auditFilter = {};
let auditVerdict = { cls: "muted", text: "" };

function auditQuery(extra) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...auditFilter, ...extra })) if (v) q.set(k, v);
  return q.toString();
}

async function audit() {
  const rows = await api("GET", `/api/audit?${auditQuery({ limit: 200 })}`);
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
  wrap.append(table(["#", "When", "Agent", "Tool", "Decision", "Step / rule", "Arguments", "Result or reason"], rows.map((r) =>
    el("tr", { "data-call": r.call_id },
      el("td", { text: r.seq }), el("td", { text: when(r.at_us) }), el("td", { text: r.agent }), el("td", { text: r.tool }),
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
  wrap.append(table(["Tool", "Origin", "State", "Last change", ""], rows.map((r) => {
    const changed = r.state === "approved" && r.seen_digest !== r.approved_digest;
    return el("tr", { "data-tool": r.name },
      el("td", {}, el("a", { href: "#registry", onclick: showDetail(r.name) }, r.name)),
      el("td", { text: r.origin }),
      el("td", { class: changed || r.state !== "approved" ? "error" : "ok", text: changed ? "changed since approval: held back" : r.state },
        (r.findings || []).length ? el("span", { class: "error", "data-findings": String(r.findings.length), text: ` · ${r.findings.length} screen finding(s)` }) : null),
      el("td", { text: `${when(r.updated_at_us)} by ${r.updated_by}: ${r.why}` }),
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
        el("td", { text: p.message || "" }), el("td", { text: when(p.at_us) })))));
  }
  wrap.append(el("h2", { text: "Agents and what each is offered" }));
  for (const a of list) {
    const offered = a.tools.filter((t) => t.offered).length;
    wrap.append(el("h3", { text: `${a.name}${a.team ? ` (team ${a.team})` : ""}: ${offered} of ${a.tools.length} tools` }),
      el("p", { class: "muted", text: `groups: ${a.groups.join(", ") || "none"}${a.supervisor ? "; supervisor" : ""}` }),
      table(["Tool", "Group", "Tier", "Offered?"], a.tools.map((t) =>
        el("tr", {}, el("td", { text: t.tool }), el("td", { text: t.group }), el("td", { text: t.tier }),
          el("td", { class: t.offered ? "ok" : "muted", text: t.offered ? "yes" : `no: ${t.why}` })))));
  }
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
              el("tr", {}, el("td", { text: when(c.at_us) }), el("td", { text: c.agent }), el("td", { text: c.tool }),
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
      el("tr", {}, el("td", { text: a.name }), el("td", { text: a.role }), el("td", { text: `${when(a.created_us)} by ${a.created_by}` }),
        el("td", {}, a.name === me.name ? null : el("button", { type: "button", class: "secondary", onclick: async () => {
          if (!confirm(`Remove ${a.name}?`)) return;
          try { await api("POST", `/api/accounts/${encodeURIComponent(a.name)}/remove`); refresh(true); } catch (err) { status(err.message, true); }
        } }, "Remove"))))),
    el("h3", { text: "New account" }), form);
}

start();

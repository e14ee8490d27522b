//! Governance as an operator runs it: the real binary serving a session while `aether
//! approvals`, `aether registry`, `aether tokens` and `aether policy` act on the same store
//! from another process, and the admin API with operator tokens.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{HttpServer, INIT, StdioServer, Ws, http};

/// Reads messages until the reply with `id`; returns it and the notifications before it.
fn reply_and_notifications(s: &StdioServer, id: i64) -> (Value, Vec<Value>) {
    let mut notes = Vec::new();
    loop {
        let m = s.next_message();
        if m["id"] == json!(id) {
            return (m, notes);
        }
        notes.push(m);
    }
}

/// Waits until `aether approvals list --json` shows one pending request; returns it.
fn pending(ws: &Ws) -> Value {
    let store = ws.store_url();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, out, err) = ws.run(&["approvals", "list", "--json", "--store", &store]);
        assert_eq!(code, 0, "{err}");
        let rows: Vec<Value> = crate::util::json_lines(&out);
        if let Some(row) = rows.into_iter().next() {
            return row;
        }
        assert!(Instant::now() < deadline, "no call asked for approval");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_ask_user_rule_holds_a_stdio_call_until_an_operator_decides_from_the_cli() {
    let ws = Ws::new();
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: ask-for-src\n    match: { tool: read_file, path: \"src/**\" }\n    action: ask_user\n    reason: source needs a look\n",
    );
    let mut s = StdioServer::start(&ws, &[]);
    let store = ws.store_url();
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "read_file", "arguments": {"path": "src/hello.txt"},
            "_meta": {"progressToken": format!("p{id}")}}})
        .to_string()
    };

    s.send_raw(&call(1));
    let row = pending(&ws);
    assert_eq!(row["tool"], "read_file");
    assert_eq!(row["asked_by"], "rule:ask-for-src");
    assert_eq!(row["reason"], "source needs a look");
    assert_eq!(row["agent"], "default");
    let id = row["id"].as_str().unwrap().to_string();
    // Without a reason, nothing is decided.
    let (code, _, err) = ws.run(&["approvals", "approve", &id, "--why", " ", "--store", &store]);
    assert_eq!(code, 1, "{err}");
    // Let at least one progress tick reach the client, then approve from another process.
    std::thread::sleep(Duration::from_millis(1_300));
    let (code, out, err) = ws.run(&[
        "approvals",
        "approve",
        &id,
        "--why",
        "checked",
        "--store",
        &store,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("approved"), "{out}");
    let (reply, notes) = reply_and_notifications(&s, 1);
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("hello from aether"), "{text}");
    let progress: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "no progress while waiting: {notes:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "p1");
    assert!(
        progress[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting for a person's approval"),
        "{progress:?}"
    );
    // Deciding again is refused: the call is no longer waiting.
    let (code, _, err) = ws.run(&["approvals", "deny", &id, "--why", "late", "--store", &store]);
    assert_eq!(code, 1);
    assert!(err.contains("no longer waiting"), "{err}");

    // A denial: the call does not run and says who denied it and why.
    s.send_raw(&call(2));
    let id = pending(&ws)["id"].as_str().unwrap().to_string();
    let (code, _, err) = ws.run(&[
        "approvals",
        "deny",
        &id,
        "--why",
        "not now",
        "--store",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    let (reply, _) = reply_and_notifications(&s, 2);
    assert_eq!(reply["result"]["isError"], true);
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("denied by") && text.contains("not now"),
        "{text}"
    );
    // Paths the rule does not name run at once.
    let r = s.call(3, "read_file", json!({"path": "README.md"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    // The history shows both decisions.
    let (_, out, _) = ws.run(&["approvals", "list", "--all", "--store", &store]);
    assert!(
        out.contains("approved by") && out.contains("denied by"),
        "{out}"
    );
}

#[test]
fn registry_changes_from_the_cli_reach_a_running_session_with_list_changed() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    let store = ws.store_url();
    let list = |s: &mut StdioServer, id: i64| -> Vec<String> {
        s.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string());
        let (reply, _) = reply_and_notifications(s, id);
        reply["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(list(&mut s, 1).contains(&"read_file".to_string()));

    let (code, out, err) = ws.run(&[
        "registry",
        "withdraw",
        "read_file",
        "--why",
        "under review",
        "--store",
        &store,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let note = s.next_message();
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    let tools = list(&mut s, 2);
    assert!(!tools.contains(&"read_file".to_string()), "{tools:?}");
    let r = s.call(3, "read_file", json!({"path": "README.md"}));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("withdrawn"), "{text}");

    // Bad changes: a clear error, nothing changed.
    let (code, _, err) = ws.run(&[
        "registry",
        "withdraw",
        "read_file",
        "--why",
        "again",
        "--store",
        &store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("already withdrawn"), "{err}");
    let (code, _, err) = ws.run(&[
        "registry", "approve", "ghost", "--why", "x", "--store", &store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no tool named \"ghost\""), "{err}");
    let (code, _, err) = ws.run(&[
        "registry",
        "approve",
        "read_file",
        "--why",
        "x",
        "--digest",
        "sha256:0000",
        "--store",
        &store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not the sha256:0000 you reviewed"), "{err}");

    let (code, _, err) = ws.run(&[
        "registry",
        "undo",
        "read_file",
        "--why",
        "cleared",
        "--store",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    let note = s.next_message();
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    assert!(list(&mut s, 4).contains(&"read_file".to_string()));
    assert_eq!(
        s.call(5, "read_file", json!({"path": "README.md"}))["result"]["isError"],
        false
    );

    let (_, out, _) = ws.run(&["registry", "history", "read_file", "--store", &store]);
    assert!(
        out.contains("approved -> withdrawn") && out.contains("under review"),
        "{out}"
    );
    assert!(
        out.contains("withdrawn -> approved (undoes #") && out.contains("cleared"),
        "{out}"
    );
    let (_, out, _) = ws.run(&["registry", "show", "read_file", "--store", &store]);
    assert!(out.contains("state:               approved"), "{out}");
    assert!(out.contains("\"name\": \"read_file\""), "{out}");
    // Every change is an operator row in the audit, and the chain holds.
    let (_, out, _) = ws.run(&["audit", "tail", "--json", "--store", &store]);
    assert!(out.contains("\"tool\":\"registry.withdraw\""), "{out}");
    assert!(out.contains("\"tool\":\"registry.undo\""), "{out}");
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &store]);
    assert_eq!(code, 0, "{out}{err}");
}

fn token(ws: &Ws, args: &[&str]) -> String {
    let store = ws.store_url();
    let mut full = vec!["tokens", "create"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--store", &store]);
    let (code, out, err) = ws.run(&full);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    assert!(token.starts_with("aether_") && token.len() > 40, "{token}");
    token
}

/// Retries `check` for up to two seconds (a running server picks up token changes from the
/// store within its poll interval).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn tokens_decide_who_calls_and_only_operators_reach_the_admin_api() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let mcp = |auth: Option<&str>| {
        let bearer = auth.map(|t| format!("Bearer {t}"));
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(b) = &bearer {
            headers.push(("Authorization", b.as_str()));
        }
        http(&srv.addr, "POST", "/mcp", &headers, INIT.as_bytes()).status
    };
    let api = |method: &str, path: &str, auth: &str, body: &str| {
        let bearer = format!("Bearer {auth}");
        let headers = vec![
            ("Host", host.as_str()),
            ("Content-Type", "application/json"),
            ("Authorization", bearer.as_str()),
        ];
        http(&srv.addr, method, path, &headers, body.as_bytes())
    };
    // On loopback with no token yet, callers act as the configured agent.
    assert_eq!(mcp(None), 200);
    let (code, _, err) = ws.run(&[
        "tokens",
        "create",
        "--agent",
        "ghost",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no agent is named \"ghost\""), "{err}");

    let agent = token(&ws, &["--agent", "default", "--label", "ci"]);
    let operator = token(&ws, &["--operator", "alice"]);
    // From the first agent token on, every caller needs one. (The server sees both tokens
    // within its poll; the operator's was made second, so it is waited for.)
    eventually("a caller without a token is refused", || mcp(None) == 401);
    eventually("the operator token is known", || {
        mcp(Some(&operator)) != 401
    });
    assert_eq!(mcp(Some(&agent)), 200);
    assert_eq!(mcp(Some("aether_not-a-real-token")), 401);
    assert_eq!(
        mcp(Some(&operator)),
        403,
        "an operator token calls no tools"
    );

    // The admin API: operator tokens only.
    let r = api("GET", "/api/registry", &agent, "");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = api("GET", "/api/registry", &operator, "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"name\":\"read_file\""), "{}", r.body);
    let r = api("GET", "/api/tools/mcp-schemas?agent=default", &operator, "");
    let functions: Vec<Value> = serde_json::from_str(&r.body).unwrap();
    assert!(
        functions
            .iter()
            .any(|f| f["function"]["name"] == "read_file")
    );
    assert!(functions.iter().all(|f| f["type"] == "function"));
    assert_eq!(
        api("GET", "/api/tools/mcp-schemas?agent=ghost", &operator, "").status,
        404
    );
    // An agent cannot approve anything, even a call that exists.
    let r = api(
        "POST",
        "/api/approvals/x/approve",
        &agent,
        r#"{"why":"me"}"#,
    );
    assert_eq!(r.status, 403);
    let r = api(
        "POST",
        "/api/approvals/x/approve",
        &operator,
        r#"{"why":"me"}"#,
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("no call waiting"), "{}", r.body);
    let r = api("POST", "/api/halt", &operator, r#"{}"#);
    assert_eq!(r.status, 400, "{}", r.body);
    let r = api("POST", "/api/halt", &operator, r#"{"why":"drill"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"halted\":true"), "{}", r.body);
    let r = api("GET", "/api/halt", &operator, "");
    assert!(r.body.contains("drill"), "{}", r.body);
    let r = api("POST", "/api/resume", &operator, r#"{"why":"drill over"}"#);
    assert!(r.body.contains("\"halted\":false"), "{}", r.body);
    let r = api(
        "POST",
        "/api/registry/read_file/withdraw",
        &operator,
        r#"{"why":"api test"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api(
        "POST",
        "/api/registry/read_file/undo",
        &operator,
        r#"{"why":"api test over"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = api(
        "POST",
        "/api/registry/read_file/explode",
        &operator,
        r#"{"why":"x"}"#,
    );
    assert_eq!(r.status, 404);
    let r = api("GET", "/api/registry/history?name=read_file", &operator, "");
    assert!(
        r.body.contains("api test over") && r.body.contains("alice (api)"),
        "{}",
        r.body
    );

    // The rules as the server holds them, and the last reload's error, for the console.
    let r = api("GET", "/api/policy", &operator, "");
    let policy: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(policy["rules"], json!([]), "{policy}");
    assert!(policy["last_error"].is_null());
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: no-readme\n    match: { tool: read_file, path: README.md }\n    action: always_deny\n",
    );
    eventually("a new rules file is loaded", || {
        api("GET", "/api/policy", &operator, "")
            .body
            .contains("no-readme")
    });
    ws.write("permissions.yaml", "rules:\n  - match: { tool: [ }\n");
    eventually("a broken rules file is reported", || {
        let v: Value =
            serde_json::from_str(&api("GET", "/api/policy", &operator, "").body).unwrap();
        v["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("previous rules stay"))
            && v["rules"][0]["name"] == "no-readme"
    });

    // Revoked: refused within the poll interval.
    let store = ws.store_url();
    let (_, out, _) = ws.run(&["tokens", "list", "--json", "--store", &store]);
    let rows: Vec<Value> = crate::util::json_lines(&out);
    assert!(!out.contains(&agent), "the list never shows a token");
    let id = rows.iter().find(|r| r["kind"] == "agent").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, err) = ws.run(&["tokens", "revoke", &id, "--store", &store]);
    assert_eq!(code, 0, "{err}");
    eventually("a revoked token is refused", || mcp(Some(&agent)) == 401);
    let (code, _, err) = ws.run(&["tokens", "revoke", &id, "--store", &store]);
    assert_eq!(code, 1);
    assert!(err.contains("already revoked"), "{err}");
}

#[test]
fn policy_check_and_replay_test_a_rules_file_before_it_bites() {
    let ws = Ws::new();
    let store = ws.store_url();
    ws.write(
        "broken.yaml",
        "rules:\n  - name: x\n    match: { tool: read_file, args: { path: \"(\" } }\n    action: always_deny\n",
    );
    let (code, _, err) = ws.run(&["policy", "check", "broken.yaml"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("rules[0] (x).match.args.path: invalid regex"),
        "{err}"
    );
    ws.write(
        "draft.yaml",
        "rules:\n  - name: no-readme\n    match: { tool: read_file, path: README.md }\n    action: always_deny\n",
    );
    let (code, out, err) = ws.run(&["policy", "check", "draft.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("1 rule(s)") && out.contains("no-readme"),
        "{out}"
    );

    // No server has run here: said plainly, and no empty store is made.
    let (code, _, err) = ws.run(&["policy", "replay", "draft.yaml", "--store", &store]);
    assert_eq!(code, 1);
    assert!(err.contains("no store at"), "{err}");
    assert!(!ws.path().join(".aether/aether.db").exists());
    let (code, _, err) = ws.run(&[
        "policy",
        "replay",
        "draft.yaml",
        "--since",
        "5x",
        "--store",
        &store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("s, m, h or d"), "{err}");

    let mut s = StdioServer::start(&ws, &[]);
    for (id, path) in [(1, "README.md"), (2, "src/hello.txt"), (3, "./README.md")] {
        assert_eq!(
            s.call(id, "read_file", json!({"path": path}))["result"]["isError"],
            false
        );
    }
    drop(s);
    // A window with no audited call: nothing to replay, said plainly.
    std::thread::sleep(Duration::from_millis(1_100));
    let (code, _, err) = ws.run(&[
        "policy",
        "replay",
        "draft.yaml",
        "--since",
        "1s",
        "--store",
        &store,
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no audited calls in the last 1s"), "{err}");
    let (code, out, err) = ws.run(&[
        "policy",
        "replay",
        "draft.yaml",
        "--since",
        "1h",
        "--store",
        &store,
    ]);
    assert_eq!(code, 0, "{err}");
    let changed: Vec<&str> = out.lines().collect();
    assert_eq!(changed.len(), 2, "{out}");
    assert!(
        changed.iter().all(|l| l.contains("read_file")
            && l.contains("no rule (the tier decides) -> always_deny by rule \"no-readme\"")),
        "{out}"
    );
    assert!(
        err.contains("Replayed 3 call(s)") && err.contains("2 decision(s) would change"),
        "{err}"
    );
}

#[test]
fn no_agent_can_write_the_operators_files_in_the_folder_it_serves() {
    let ws = Ws::new();
    let mut s = StdioServer::start_rw(&ws);
    let open = "rules:\n  - match: { tool: '*' }\n    action: always_allow\n";
    for (id, path, content) in [
        (1, "permissions.yaml", open),
        (2, "aether.toml", "[server]\nauth = \"none\"\n"),
        (3, ".aether/x", "x"),
    ] {
        let r = s.call(id, "write_file", json!({"path": path, "content": content}));
        assert_eq!(r["result"]["isError"], true, "{path}: {r}");
        assert!(!ws.path().join(path).exists(), "{path} was written");
    }
    // Other files in the same folder are writable as usual.
    let r = s.call(
        4,
        "write_file",
        json!({"path": "notes.txt", "content": "ok"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
}

#[test]
fn a_session_opened_with_one_agents_token_cannot_be_used_with_anothers() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.ws]\npath = \".\"\n[server]\nauth = \"token\"\nhttp_agent = \"alice\"\n[agents.alice]\nmcp_servers = [\"workspace\"]\n[agents.mallory]\ntools = [\"list_roots\"]\n",
    );
    let srv = HttpServer::start(&ws, &[]);
    let alice = token(&ws, &["--agent", "alice"]);
    let mallory = token(&ws, &["--agent", "mallory"]);
    let host = srv.addr.clone();
    let post = |token: &str, session: Option<&str>, body: &str| {
        let bearer = format!("Bearer {token}");
        let mut headers = vec![
            ("Host", host.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", bearer.as_str()),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(id) = session {
            headers.push(("Mcp-Session-Id", id));
        }
        http(&srv.addr, "POST", "/mcp", &headers, body.as_bytes())
    };
    // auth = "token": no token, no service, from the start.
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &[
            ("Host", host.as_str()),
            ("Content-Type", "application/json"),
        ],
        INIT.as_bytes(),
    );
    assert_eq!(r.status, 401);
    // The tokens were made after the server started: it picks them up within its poll (both:
    // Mallory's was made second, and may be seen a poll later).
    let deadline = Instant::now() + Duration::from_secs(5);
    while post(&mallory, None, INIT).status == 401 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(25));
    }
    let mut r = post(&alice, None, INIT);
    while r.status == 401 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(25));
        r = post(&alice, None, INIT);
    }
    assert_eq!(r.status, 200, "{}", r.head);
    let session = r
        .head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
                .map(|(_, v)| v.trim().to_string())
        })
        .expect("a session id");
    post(
        &alice,
        Some(&session),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let r = post(&alice, Some(&session), list);
    assert!(r.body.contains("read_file"), "{}", r.body);
    // Mallory's token on Alice's session: refused, and nothing of Alice's catalog is shown.
    let r = post(&mallory, Some(&session), list);
    assert!(!r.body.contains("read_file"), "{}", r.body);
    assert!(r.body.contains("belongs to another agent"), "{}", r.body);
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md"}}}"#;
    let r = post(&mallory, Some(&session), call);
    assert!(!r.body.contains("# demo"), "{}", r.body);
    assert!(r.body.contains("belongs to another agent"), "{}", r.body);
}

#[test]
fn run_command_runs_what_the_project_allows_and_nothing_else() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"builder\"\n[roots.ws]\npath = \".\"\n[agents.builder]\nproject = \"demo\"\nmcp_servers = [\"workspace\", \"shell\"]\n\
         [agents.plain]\nmcp_servers = [\"workspace\", \"shell\"]\n\
         [projects.demo]\ncommands = [{ exe = \"/usr/bin/head\", prefix = [\"-n\", \"1\"] }]\n",
    );
    let config = ws.path().join("aether.toml").display().to_string();
    let mut s = StdioServer::spawn(&ws, &["--config", &config, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let r = s.call(
        1,
        "run_command",
        json!({"command": "/usr/bin/head", "args": ["-n", "1", "src/hello.txt"]}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["stdout"],
        "hello from aether\n"
    );
    let r = s.call(
        2,
        "run_command",
        json!({"command": "/usr/bin/head", "args": ["-n", "1", "--verbose", "src/hello.txt"]}),
    );
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("not an allowed option"), "{text}");
    drop(s);
    // An agent whose project allows nothing is not offered the tool.
    let mut s = StdioServer::spawn(&ws, &["--config", &config, "--agent", "plain"]);
    s.initialize("2025-11-25");
    s.send_raw(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string());
    let list = s.recv(3);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"run_command"), "{names:?}");
    let r = s.call(
        4,
        "run_command",
        json!({"command": "/usr/bin/head", "args": ["-n", "1", "x"]}),
    );
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("allows no commands"), "{text}");
    // A configuration that allows a program's dangerous option does not start.
    ws.write(
        "bad.toml",
        "[roots.ws]\npath = \".\"\n[projects.demo]\ncommands = [{ exe = \"/usr/bin/git\", prefix = [\"log\"], flags = [\"--output\"] }]\n",
    );
    let bad = ws.path().join("bad.toml").display().to_string();
    let (code, _, err) = ws.run(&["mcp-serve", "--config", &bad]);
    assert_eq!(code, 1);
    assert!(
        err.contains("projects.demo.commands[0]") && err.contains("--output"),
        "{err}"
    );
}

#[test]
fn run_shell_runs_sandboxed_for_a_project_with_a_shell_and_is_in_the_command_log() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"builder\"\n[roots.ws]\npath = \".\"\n[agents.builder]\nproject = \"demo\"\nmcp_servers = [\"workspace\", \"shell\"]\n\
         [agents.plain]\nmcp_servers = [\"workspace\", \"shell\"]\n\
         [projects.demo.shell]\nnetwork = false\n",
    );
    let config = ws.path().join("aether.toml").display().to_string();
    let mut s = StdioServer::spawn(&ws, &["--config", &config, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let r = s.call(
        1,
        "run_shell",
        json!({"command": "cat src/hello.txt | tr a-z A-Z; cat aether.toml; ls -A .aether | wc -l"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let out = r["result"]["structuredContent"]["stdout"].as_str().unwrap();
    assert!(out.starts_with("HELLO FROM AETHER\n"), "{out}");
    assert!(
        !out.contains("projects.demo"),
        "the configuration is hidden: {out}"
    );
    assert!(
        out.trim_end().ends_with('0'),
        "the store folder shows empty: {out}"
    );
    drop(s);
    let (code, log, err) = ws.run(&["commands", "--config", &config]);
    assert_eq!(code, 0, "{err}");
    assert!(log.contains("builder run_shell (bubblewrap"), "{log}");
    assert!(log.contains("cat src/hello.txt | tr a-z A-Z"), "{log}");
    assert!(log.contains("[exit 0]"), "{log}");
    // Without shell settings the tool is neither offered nor run.
    let mut s = StdioServer::spawn(&ws, &["--config", &config, "--agent", "plain"]);
    s.initialize("2025-11-25");
    s.send_raw(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string());
    let list = s.recv(2);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"run_shell"), "{names:?}");
    let r = s.call(3, "run_shell", json!({"command": "true"}));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no shell"), "{text}");
}

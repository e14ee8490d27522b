//! MCP over stdio, spoken in raw JSON-RPC: what a client sees, bad input included.

use serde_json::{Value, json};

use crate::util::{StdioServer, Ws};

#[test]
fn tools_list_is_the_agents_catalog_and_read_file_reads() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    s.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let list = s.recv(1);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "list_roots",
            "list_dir",
            "read_file",
            "read_multiple_files",
            "get_file_info",
            "glob",
            "search_files",
            "list_files",
            "write_file",
            "edit_file",
            "move_file",
            "create_directory",
            "delete_file",
            "revert_file"
        ]
    );
    for tool in list["result"]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let writes = names.iter().position(|n| *n == name).unwrap() >= 8;
        assert_eq!(tool["annotations"]["readOnlyHint"], !writes, "{tool}");
        assert_eq!(tool["_meta"]["aether/tier"], "standard");
        assert!(tool["outputSchema"].is_object(), "{tool}");
    }
    let r = s.call(2, "read_file", json!({"path": "src/hello.txt"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        "hello from aether\nsecond line\n"
    );
    assert_eq!(r["result"]["structuredContent"]["total_lines"], 2);
    assert!(r["result"]["_meta"]["aether/callId"].is_string());
}

#[test]
fn bad_lines_are_answered_with_their_json_rpc_errors_while_the_session_goes_on() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    // Each answered (id null where the line had none to answer with), in order.
    for (line, code, id) in [
        ("this is not json", -32700, Value::Null),
        ("{\"jsonrpc\":\"2.0\",\"id\":", -32700, Value::Null),
        (r#"{"hello":"world"}"#, -32600, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":5,"method":"ping"}]"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":5}}"#,
            -32602,
            json!(6),
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{}}"#,
            -32602,
            json!(7),
        ),
    ] {
        s.send_raw(line);
        let answer = s.next_message();
        assert_eq!(answer["error"]["code"], code, "{line}: {answer}");
        assert_eq!(answer["id"], id, "{line}: {answer}");
    }
    s.send_raw(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    assert_eq!(s.recv(8)["result"], json!({}));
    let r = s.call(9, "read_file", json!({"path": "README.md"}));
    assert_eq!(r["result"]["content"][0]["text"], "# demo\n");
}

#[test]
fn unknown_tool_is_mcp_tool_not_implemented() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    let r = s.call(1, "format_disk", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["code"], "mcp-tool-not-implemented");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("format_disk")
    );
}

#[test]
fn schema_invalid_arguments_get_a_clear_error_and_nothing_runs() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    for (id, args, needle) in [
        (1, json!({"path": 5}), "/path"),
        (2, json!({}), "path"),
        (3, json!({"path": "README.md", "mode": "w"}), "mode"),
        (
            4,
            json!({"path": "README.md", "start_line": 0}),
            "/start_line",
        ),
    ] {
        let r = s.call(id, "read_file", args);
        assert_eq!(r["result"]["isError"], true, "{r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("Refused by Aether (arguments"), "{text}");
        assert!(text.contains(needle), "{needle} in {text}");
    }
}

#[test]
fn escapes_and_credentials_are_refused_over_the_wire() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        ws.path().join("link.txt"),
    )
    .unwrap();
    let mut s = StdioServer::start(&ws, &[]);
    for (id, path) in [
        (1, "../secret.txt".to_string()),
        (2, outside.path().join("secret.txt").display().to_string()),
        (3, "link.txt".to_string()),
        (4, ".env".to_string()),
        (5, ".aether/aether.db".to_string()),
    ] {
        let r = s.call(id, "read_file", json!({"path": path}));
        assert_eq!(r["result"]["isError"], true, "{path}: {r}");
        assert!(!r.to_string().contains("outside secret"), "{path}: {r}");
        assert!(
            !r.to_string().contains("ghp_notreallyatoken"),
            "{path}: {r}"
        );
    }
}

#[test]
fn an_agent_sees_and_runs_only_its_own_catalog() {
    // An agent without the workspace group sees no tools and can run none; an agent whose
    // tool list names one tool sees that one and is refused the rest.
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[agents.default]\nmcp_servers = []\n[agents.reader]\ntools = [\"read_file\"]\n",
    );
    let mut s = StdioServer::start(
        &ws,
        &[
            "--config",
            &ws.path().join("aether.toml").display().to_string(),
        ],
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    assert_eq!(s.recv(1)["result"]["tools"], json!([]));
    let r = s.call(2, "read_file", json!({"path": "README.md"}));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Refused by Aether (connection"), "{text}");
    drop(s);
    let mut s = StdioServer::start(
        &ws,
        &[
            "--config",
            &ws.path().join("aether.toml").display().to_string(),
            "--agent",
            "reader",
        ],
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let tools = s.recv(1)["result"]["tools"].clone();
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    let r = s.call(2, "list_dir", json!({}));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("(capability"),
        "{r}"
    );
}

#[test]
fn a_cancelled_call_stops_its_tool_and_is_audited_as_cancelled() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &["--conformance-fixtures"]);
    let started = std::time::Instant::now();
    s.send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_wait_until_cancelled","arguments":{}}}"#);
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user pressed stop"}}"#);
    // The session goes on; the cancelled call's row is written within moments.
    s.send_raw(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#);
    assert_eq!(s.recv(6)["result"], json!({}));
    let store = ws.store_url();
    let mut found = false;
    for _ in 0..50 {
        let (_, out, _) = ws.run(&[
            "audit",
            "tail",
            "--json",
            "--tool",
            "test_wait_until_cancelled",
            "--store",
            &store,
        ]);
        if out.contains("\"outcome\":\"cancelled\"") {
            found = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(found, "the cancelled call is audited as cancelled");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the tool stopped instead of waiting 60 s"
    );
}

#[test]
fn progress_and_log_notifications_reach_the_client_before_the_result() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &["--conformance-fixtures"]);
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}"#,
    );
    assert_eq!(s.recv(1)["result"], json!({}));
    s.send_raw(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"tok-7"}}}"#);
    let mut progress = Vec::new();
    loop {
        let msg = s.next_message();
        if msg["id"] == json!(2) {
            break;
        }
        if msg["method"] == "notifications/progress" {
            assert_eq!(msg["params"]["progressToken"], "tok-7");
            progress.push(msg["params"]["progress"].as_f64().unwrap());
        }
    }
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    s.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}"#);
    let mut logs = 0;
    loop {
        let msg = s.next_message();
        if msg["id"] == json!(3) {
            break;
        }
        if msg["method"] == "notifications/message" {
            logs += 1;
        }
    }
    assert_eq!(logs, 3);
}

#[test]
fn protocol_versions_are_negotiated_as_the_spec_says() {
    let ws = Ws::new();
    for (offered, agreed) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        // A version the server does not know: it answers with the newest it speaks.
        ("2031-01-01", "2025-11-25"),
    ] {
        let mut s = StdioServer::spawn(&ws, &[]);
        let init = s.initialize(offered);
        assert_eq!(
            init["result"]["protocolVersion"], agreed,
            "{offered}: {init}"
        );
    }
}

#[test]
fn resources_are_the_capabilities_and_the_callers_own_audit_events() {
    let ws = Ws::new();
    ws.write("aether.toml", "[agents.default]\nmcp_servers = [\"workspace\"]\n[agents.other]\nmcp_servers = [\"workspace\"]\n");
    let config = ws.path().join("aether.toml").display().to_string();
    {
        let mut other = StdioServer::start(&ws, &["--config", &config, "--agent", "other"]);
        other.call(1, "read_file", json!({"path": "README.md"}));
    }
    let mut s = StdioServer::start(&ws, &["--config", &config]);
    s.call(1, "read_file", json!({"path": "src/hello.txt"}));
    s.call(2, "read_file", json!({"path": ".env"}));
    s.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#);
    let list = s.recv(3);
    assert_eq!(
        list["result"]["resources"][0]["uri"], "aether://capabilities",
        "{list}"
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":4,"method":"resources/templates/list"}"#);
    assert_eq!(
        s.recv(4)["result"]["resourceTemplates"][0]["uriTemplate"],
        "aether://audit/events{?cursor,limit}"
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"aether://capabilities"}}"#);
    let caps: serde_json::Value =
        serde_json::from_str(s.recv(5)["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    let workspace = caps["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "workspace")
        .unwrap()
        .clone();
    assert_eq!(workspace["mcp_exposure"], "exposed");
    let orchestration = caps["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "orchestration")
        .unwrap()
        .clone();
    assert_eq!(orchestration["mcp_exposure"], "exposed");
    assert_eq!(
        orchestration["tools"],
        serde_json::json!(["delegate", "reply", "spawn_subagents"])
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"aether://audit/events?limit=10"}}"#);
    let events: serde_json::Value =
        serde_json::from_str(s.recv(6)["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    let rows = events["events"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "only this agent's rows: {events}");
    assert!(rows.iter().all(|r| r["agent"] == "default"));
    assert_eq!(rows[1]["outcome"], "refused");
    let cursor = rows[0]["seq"].as_i64().unwrap();
    s.send_raw(&format!(r#"{{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{{"uri":"aether://audit/events?cursor={cursor}"}}}}"#));
    let page: serde_json::Value =
        serde_json::from_str(s.recv(7)["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(page["events"].as_array().unwrap().len(), 1);
    s.send_raw(r#"{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"aether://audit/events?cursor=abc"}}"#);
    assert!(
        s.recv(8)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cursor")
    );
    s.send_raw(r#"{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}"#);
    assert!(s.recv(9)["error"].is_object());
}

#[test]
fn a_client_leaving_mid_call_leaves_no_call_without_its_audit_row() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &["--conformance-fixtures"]);
    s.send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_wait_until_cancelled","arguments":{}}}"#);
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.close_stdin();
    let status = s
        .wait_exit(std::time::Duration::from_secs(30))
        .expect("the server exits when its client leaves");
    assert!(status.success(), "{status:?}");
    let store = ws.store_url();
    let (_, out, _) = ws.run(&[
        "audit",
        "tail",
        "--json",
        "--tool",
        "test_wait_until_cancelled",
        "--store",
        &store,
    ]);
    assert!(out.contains("\"outcome\":\"cancelled\""), "{out}");
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &store]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("have no audit row yet"), "{out}");
}

#[test]
fn a_burst_of_calls_in_one_write_gets_every_answer_whole_and_once() {
    // The line pump sends the answers that are ready together. Twenty answers of about
    // 40 KiB (this file's text twice, JSON-escaped) cross its 64 KiB buffers mid-line; each
    // must still go out whole and once, and so must the pump's own answers (to the lines
    // that are not JSON) between them.
    let ws = Ws::new();
    let big: String = (0..600)
        .map(|i| format!("line {i} \"quoted\" \\ and\ta tab\n"))
        .collect();
    ws.write("big.txt", &big);
    let mut s = StdioServer::start(&ws, &[]);
    let mut burst = Vec::new();
    for id in 1..=40 {
        let path = if id % 2 == 0 { "big.txt" } else { "README.md" };
        burst.push(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "read_file", "arguments": {"path": path}}})
            .to_string(),
        );
        if id % 10 == 0 {
            burst.push("this is not json".to_string());
        }
    }
    s.send_raw(&burst.join("\n"));
    let mut answered = std::collections::BTreeSet::new();
    let mut parse_errors = 0;
    while answered.len() < 40 || parse_errors < 4 {
        let m = s.next_message();
        if m["error"]["code"] == -32700 {
            parse_errors += 1;
            continue;
        }
        let id = m["id"].as_i64().unwrap_or_else(|| panic!("{m}"));
        assert!(answered.insert(id), "answered twice: {id}");
        let want = if id % 2 == 0 {
            big.as_str()
        } else {
            "# demo\n"
        };
        assert_eq!(m["result"]["content"][0]["text"], want, "id {id}");
    }
    assert_eq!(parse_errors, 4);
    s.send_raw(r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#);
    assert_eq!(s.recv(99)["result"], json!({}));
    assert!(s.received().is_empty(), "nothing more after the burst");
}

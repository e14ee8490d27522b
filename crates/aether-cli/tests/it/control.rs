//! Aether's own control files in every way it is started: the stdio entry `aether serve`
//! prints runs by the project's configuration, rules and store from any folder (a host starts
//! it from `/`); a stdio process beside a configuration it does not use says so; a
//! configuration that starts programs gets a rules file none of them can create.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{HttpServer, StdioServer, Ws, aether};

/// The two `mcpServers` entries of a banner: (by URL, over stdio).
fn entries(banner: &str) -> (Value, Value) {
    let blocks: Vec<Value> = banner
        .split("\n\n")
        .filter_map(|block| block.find('{').map(|i| &block[i..]))
        .filter_map(|s| serde_json::from_str(s.trim()).ok())
        .collect();
    assert_eq!(blocks.len(), 2, "{banner}");
    (
        blocks[0]["mcpServers"]["aether"].clone(),
        blocks[1]["mcpServers"]["aether"].clone(),
    )
}

/// The stdio entry's process, started as a host starts it: from `/`, stderr kept.
fn start_entry(stdio: &Value, stderr: &std::path::Path) -> StdioServer {
    let args: Vec<String> = stdio["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let mut cmd = Command::new(stdio["command"].as_str().unwrap());
    cmd.args(&args)
        .current_dir("/")
        .stderr(std::fs::File::create(stderr).unwrap());
    let mut s = StdioServer::from_command(cmd);
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "aether", "{init}");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    s
}

fn text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_printed_stdio_entry_runs_by_the_projects_configuration_from_any_folder() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.project]\npath = \".\"\nmode = \"rw\"\n",
    );
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: no-readme\n    match: { tool: read_file, path: README.md }\n    action: always_deny\n",
    );
    let srv = HttpServer::start(&ws, &[]);
    let (_, stdio) = entries(&srv.banner);
    let args: Vec<&str> = stdio["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let config = ws
        .path()
        .join("aether.toml")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    assert_eq!(args[0], "mcp-serve");
    assert!(
        args.windows(2).any(|w| w == ["--config", config.as_str()]),
        "{args:?}"
    );
    let stderr = ws.path().join("entry.stderr");
    let mut s = start_entry(&stdio, &stderr);
    // The project's rules hold in the process the host started.
    let r = s.call(1, "read_file", json!({"path": "README.md"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("no-readme"), "{r}");
    // Its control files are out of reach.
    for (id, tool, a) in [
        (
            2,
            "write_file",
            json!({"path": "permissions.yaml", "content": "rules: []\n"}),
        ),
        (
            3,
            "write_file",
            json!({"path": "aether.toml", "content": "[server]\n"}),
        ),
        (4, "delete_file", json!({"path": "permissions.yaml"})),
    ] {
        let r = s.call(id, tool, a);
        assert_eq!(r["result"]["isError"], true, "{tool}: {r}");
    }
    assert!(
        std::fs::read_to_string(ws.path().join("permissions.yaml"))
            .unwrap()
            .contains("no-readme")
    );
    // The operator's halt on the project's store reaches it.
    let (code, out, err) = ws.run(&["halt", "--why", "drill"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut halted = false;
    for id in 10..60 {
        let r = s.call(id, "read_file", json!({"path": "src/hello.txt"}));
        if text(&r).contains("halted") {
            halted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(halted, "the halt did not reach the host's process");
    let (code, _, _) = ws.run(&["resume", "--why", "drill over"]);
    assert_eq!(code, 0);
}

#[test]
fn without_a_configuration_the_entry_carries_the_store_and_shares_the_rules_file() {
    let ws = Ws::new();
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: no-readme\n    match: { tool: read_file, path: README.md }\n    action: always_deny\n",
    );
    let srv = HttpServer::start(&ws, &[]);
    let (_, stdio) = entries(&srv.banner);
    let args = stdio["args"].to_string();
    assert!(args.contains("--store"), "{args}");
    assert!(
        args.contains(&ws.store_url()) || args.contains(".aether/aether.db"),
        "{args}"
    );
    let stderr = ws.path().join("entry.stderr");
    let mut s = start_entry(&stdio, &stderr);
    let r = s.call(1, "read_file", json!({"path": "README.md"}));
    assert!(text(&r).contains("no-readme"), "{r}");
    let r = s.call(
        2,
        "write_file",
        json!({"path": "permissions.yaml", "content": "rules: []\n"}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
}

/// Started elsewhere with a root that holds a configuration it does not use: it says which
/// configuration and store it does use, on stderr and in the audit.
#[test]
fn a_stdio_process_beside_a_configuration_it_does_not_use_says_so() {
    let ws = Ws::new();
    ws.write("aether.toml", "[roots.project]\npath = \".\"\n");
    let stderr = ws.path().join("stdio.stderr");
    let mut cmd = aether();
    cmd.args(["mcp-serve", "--root"])
        .arg(format!("project={}", ws.path().display()))
        .current_dir("/")
        .stderr(std::fs::File::create(&stderr).unwrap());
    let mut s = StdioServer::from_command(cmd);
    s.initialize("2025-11-25");
    drop(s);
    let said = std::fs::read_to_string(&stderr).unwrap();
    assert!(said.contains("aether.toml"), "{said}");
    assert!(said.contains("embedded default"), "{said}");
    assert!(said.contains("--config"), "{said}");
    let (code, out, err) = ws.run(&["audit", "tail", "--json", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("start.unused_configuration"), "{out}");
}

/// A configuration whose agents run programs (run_command entries, stdio upstreams) gets its
/// rules file made (`rules: []`) when there is none: a program could otherwise create it.
#[test]
fn a_configuration_that_starts_programs_gets_a_rules_file_none_of_them_can_create() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.project]\npath = \".\"\nmode = \"rw\"\n\n[projects.p]\ncommands = [{ exe = \"/bin/true\" }]\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_aether"))
        .args(["tools", "list"])
        .current_dir(ws.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let made = std::fs::read_to_string(ws.path().join("permissions.yaml")).unwrap();
    assert!(made.contains("rules: []"), "{made}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("permissions.yaml"));

    // Without programs, nothing is made.
    let plain = Ws::new();
    plain.write("aether.toml", "[roots.project]\npath = \".\"\n");
    let (code, _, _) = plain.run(&["tools", "list"]);
    assert_eq!(code, 0);
    assert!(!plain.path().join("permissions.yaml").exists());
}

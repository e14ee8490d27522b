//! Aether against independently written MCP software: the official conformance suite, the
//! official Python SDK client and the official inspector, over stdio and Streamable HTTP.
//! These run when `AETHER_PEERS` names an install made by `scripts/install-peers.sh`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{HttpServer, Ws, aether, peers, peers_path, repo_root};

fn python(peers: &Path) -> Command {
    Command::new(peers.join("venv/bin/python"))
}

fn client_script() -> String {
    repo_root()
        .join("tests/peers/mcp_client.py")
        .display()
        .to_string()
}

/// Runs the Python SDK client; returns its JSON report.
fn python_client(peers: &Path, args: &[&str]) -> Value {
    let out = python(peers)
        .arg(client_script())
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

fn check_read(report: &Value) {
    assert_eq!(report["server"], "aether");
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "read_file"),
        "{report}"
    );
    assert_eq!(
        report["result"]["content"][0]["text"], "hello from aether\nsecond line\n",
        "{report}"
    );
}

#[test]
fn python_sdk_lists_tools_and_reads_a_file_over_stdio() {
    let Some(peers) = peers("python_sdk_stdio") else {
        return;
    };
    let ws = Ws::new();
    let bin = env!("CARGO_BIN_EXE_aether");
    let root = ws.root_arg();
    let report = python_client(
        &peers,
        &[
            "stdio",
            "read_file",
            r#"{"path":"src/hello.txt"}"#,
            "--",
            bin,
            "mcp-serve",
            "--root",
            &root,
        ],
    );
    check_read(&report);
    assert_eq!(report["protocolVersion"], "2025-11-25");
}

#[test]
fn python_sdk_lists_tools_and_reads_a_file_over_http() {
    let Some(peers) = peers("python_sdk_http") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let report = python_client(
        &peers,
        &[
            "http",
            "read_file",
            r#"{"path":"src/hello.txt"}"#,
            &srv.url(),
        ],
    );
    check_read(&report);
}

fn inspector(peers: &Path) -> Command {
    let mut c = Command::new(peers.join("npm/node_modules/.bin/mcp-inspector"));
    c.env("PATH", peers_path(peers));
    c
}

pub(crate) fn inspector_reads(peers: &Path, target: &[&str]) {
    // `--strict` lints every tool schema for portability (type arrays, unknown formats, …)
    // and prints each finding to stderr: there must be none.
    let out = inspector(peers)
        .arg("--cli")
        .args(target)
        .args(["--method", "tools/list", "--strict"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let findings = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "inspector tools/list: {text}{findings}"
    );
    assert!(
        !findings.contains("Warning:") && !findings.contains("Schema portability"),
        "the inspector finds schemas less portable than they should be: {findings}"
    );
    let list: Value = serde_json::from_str(&text).unwrap();
    assert!(
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "read_file"),
        "{list}"
    );
    let out = inspector(peers)
        .arg("--cli")
        .args(target)
        .args([
            "--method",
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            "path=src/hello.txt",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector tools/call: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        result["content"][0]["text"], "hello from aether\nsecond line\n",
        "{result}"
    );
}

#[test]
fn inspector_lists_tools_and_reads_a_file_over_stdio() {
    let Some(peers) = peers("inspector_stdio") else {
        return;
    };
    let ws = Ws::new();
    let root = ws.root_arg();
    inspector_reads(
        &peers,
        &[env!("CARGO_BIN_EXE_aether"), "mcp-serve", "--root", &root],
    );
}

#[test]
fn inspector_lists_tools_and_reads_a_file_over_http() {
    let Some(peers) = peers("inspector_http") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    inspector_reads(&peers, &[&srv.url(), "--transport", "http"]);
}

/// One scenario's checks as the conformance suite reported them.
#[derive(Debug, Default)]
pub(crate) struct Scenario {
    pub passed: usize,
    pub failed: usize,
    pub warned: usize,
    /// Each failed or warned check: `STATUS id: message`.
    pub problems: Vec<String>,
}

impl Scenario {
    /// Scenario `name` passed: a check at least, none failed or warned (`log`: the suite's).
    pub fn assert_passed(&self, name: &str, log: &str) {
        assert!(
            self.passed >= 1 && self.problems.is_empty(),
            "{name}: {:?}\n{log}",
            self.problems
        );
    }
}

/// Runs a conformance suite (`suite`: the npm folder of its install, `npm` for 0.1.16,
/// `npm-next` for 0.2.0) against `url`; returns each scenario's checks and the suite's log.
pub(crate) fn conformance_run(
    peers: &Path,
    suite: &str,
    url: &str,
    extra: &[&str],
) -> (BTreeMap<String, Scenario>, String) {
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(peers.join(suite).join("node_modules/.bin/conformance"))
        .env("PATH", peers_path(peers))
        .args(["server", "--url", url, "-o"])
        .arg(out_dir.path())
        .args(extra)
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut scenarios = BTreeMap::new();
    for entry in std::fs::read_dir(out_dir.path()).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // SCENARIO-YYYY-MM-DDTHH-MM-SS-mmmZ, each run's folder.
        let bare = name.strip_prefix("server-").unwrap_or(&name);
        let stamp = bare.match_indices("-20").map(|(i, _)| i).find(|&i| {
            let rest = bare.as_bytes().get(i + 1..i + 12).unwrap_or_default();
            rest.len() == 11 && rest[4] == b'-' && rest[7] == b'-' && rest[10] == b'T'
        });
        let scenario = stamp.map_or(bare, |i| &bare[..i]).to_string();
        let checks: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(dir.join("checks.json")).unwrap())
                .unwrap();
        let count = |status: &str| checks.iter().filter(|c| c["status"] == status).count();
        let problems = checks
            .iter()
            .filter(|c| c["status"] == "FAILURE" || c["status"] == "WARNING")
            .map(|c| format!("{} {}: {}", c["status"], c["id"], c["errorMessage"]))
            .collect();
        scenarios.insert(
            scenario,
            Scenario {
                passed: count("SUCCESS"),
                failed: count("FAILURE"),
                warned: count("WARNING"),
                problems,
            },
        );
    }
    (scenarios, log)
}

/// Runs the 0.1.16 suite against `url`; every scenario it runs must pass without a warning.
/// Returns per-scenario (passed, failed, warned).
fn conformance(peers: &Path, url: &str, extra: &[&str]) -> BTreeMap<String, (usize, usize, usize)> {
    let (scenarios, log) = conformance_run(peers, "npm", url, extra);
    scenarios
        .into_iter()
        .map(|(name, s)| {
            assert!(s.problems.is_empty(), "{name}: {:?}\n{log}", s.problems);
            (name, (s.passed, s.failed, s.warned))
        })
        .collect()
}

/// The fixtures mode is documented where a user looks: both serving commands' help.
#[test]
fn the_conformance_fixtures_flag_is_in_the_help() {
    for command in ["serve", "mcp-serve"] {
        let out = Command::new(env!("CARGO_BIN_EXE_aether"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{help}");
        assert!(
            help.contains("--conformance-fixtures") && help.contains("conformance suite"),
            "{command}: {help}"
        );
    }
}

#[test]
fn conformance_suite_all_active_scenarios_pass_with_the_fixtures() {
    let Some(peers) = peers("conformance_fixtures") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let url = srv.url().replace("127.0.0.1", "localhost");
    let scenarios = conformance(&peers, &url, &[]);
    assert_eq!(
        scenarios.len(),
        30,
        "the suite's 30 active scenarios: {scenarios:?}"
    );
    for (name, (passed, failed, warned)) in &scenarios {
        assert!(
            *passed >= 1 && *failed == 0 && *warned == 0,
            "{name}: {passed}/{failed}/{warned}"
        );
    }
    // The fixtures are ordinary tools in the pipeline: their calls are in the audit.
    let (code, out, _) = ws.run(&["audit", "tail", "-n", "500", "--json"]);
    assert_eq!(code, 0);
    for fixture in [
        "test_simple_text",
        "test_tool_with_progress",
        "test_sampling",
        "test_elicitation",
        "test_error_handling",
    ] {
        assert!(
            out.contains(&format!("\"tool\":\"{fixture}\"")),
            "{fixture} audited"
        );
    }
    let (code, out, _) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn conformance_non_fixture_scenarios_pass_as_shipped() {
    let Some(peers) = peers("conformance_shipped") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let url = srv.url().replace("127.0.0.1", "localhost");
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "logging-set-level",
        "resources-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        let result = conformance(&peers, &url, &["--scenario", scenario]);
        assert_eq!(result.len(), 1, "{scenario}: {result:?}");
        let (passed, failed, warned) = result.values().next().copied().unwrap_or_default();
        assert!(
            passed >= 1 && failed == 0 && warned == 0,
            "{scenario}: {result:?}"
        );
    }
    // Shipped, there are no fixture tools.
    let out = aether()
        .args(["tools", "list"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("test_simple_text"));
}

/// Runs the Python SDK client with extra environment; returns its exit code and report.
fn python_client_env(peers: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let out = python(peers)
        .arg(client_script())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), report, stderr)
}

#[test]
fn python_sdk_calls_over_http_with_an_agent_token() {
    let Some(peers) = peers("python_sdk_token") else {
        return;
    };
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let (code, token, err) = ws.run(&[
        "tokens",
        "create",
        "--agent",
        "default",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let token = token.trim().to_string();
    let args = [
        "http",
        "read_file",
        r#"{"path":"src/hello.txt"}"#,
        &srv.url(),
    ];
    // Without the token the official client is turned away (the server picks up the new
    // token within its poll interval, so allow it a moment).
    let mut refused = false;
    for _ in 0..40 {
        // (The SDK reports the 401 as a failed request; the raw status is checked in
        // governance.rs.)
        let (code, report, _) = python_client_env(&peers, &args, &[]);
        if code == 2 {
            assert!(report.is_null(), "a refused client got a result: {report}");
            refused = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(refused, "a caller without a token was served");
    let (code, report, stderr) = python_client_env(&peers, &args, &[("AETHER_TOKEN", &token)]);
    assert_eq!(code, 0, "{stderr}");
    check_read(&report);
}

#[test]
fn python_sdk_user_decides_through_elicitation() {
    let Some(peers) = peers("python_sdk_elicit") else {
        return;
    };
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[roots.ws]\npath = \".\"\n[agents.default]\nmcp_servers = [\"workspace\"]\napproval = \"elicit\"\n",
    );
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: ask-for-src\n    match: { tool: read_file, path: \"src/**\" }\n    action: ask_user\n",
    );
    let bin = env!("CARGO_BIN_EXE_aether");
    let config = ws.path().join("aether.toml").display().to_string();
    let args = [
        "stdio",
        "read_file",
        r#"{"path":"src/hello.txt"}"#,
        "--",
        bin,
        "mcp-serve",
        "--config",
        &config,
    ];
    let (code, report, stderr) = python_client_env(&peers, &args, &[("AETHER_ELICIT", "approve")]);
    assert_eq!(code, 0, "{stderr}");
    check_read(&report);
    let asked = report["elicited"][0].as_str().unwrap();
    assert!(
        asked.contains("read_file") && asked.contains("src/hello.txt"),
        "{asked}"
    );

    let (code, report, stderr) = python_client_env(&peers, &args, &[("AETHER_ELICIT", "decline")]);
    assert_eq!(code, 1, "{stderr}");
    let text = report["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("did not approve"), "{text}");
    // Both decisions are on record as the client user's.
    let (_, out, _) = ws.run(&["approvals", "list", "--all", "--json"]);
    let rows: Vec<Value> = crate::util::json_lines(&out);
    let states: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["state"].as_str().unwrap(),
                r["decided_by"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("denied", "client-user (elicitation)"),
            ("approved", "client-user (elicitation)")
        ]
    );
}

//! The working tools over MCP, as an agent that has their groups calls them.

use serde_json::json;

use crate::util::{StdioServer, Ws};

#[test]
fn calculate_is_exact_bounded_and_receipted() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"analyst\"\n[roots.ws]\npath = \".\"\n\
         [agents.analyst]\nmcp_servers = [\"workspace\", \"calc\"]\n\
         [agents.writer]\nmcp_servers = [\"workspace\"]\n",
    );
    let cfg = ws.path().join("aether.toml").display().to_string();
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "analyst"]);
    s.initialize("2025-11-25");
    let r = s.call(2, "calculate", json!({"expression": "(1/3 + 0.25) * 2^10"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["fraction"], "1792/3", "{r}");
    assert_eq!(out["exact"], false);
    assert!(
        out["decimal"].as_str().unwrap().starts_with("597.33333"),
        "{r}"
    );
    assert_eq!(out["receipt"].as_str().unwrap().len(), 71, "sha256:… {r}");
    for bad in ["1/0", "2^99999999", "os.system('x')", ""] {
        let r = s.call(3, "calculate", json!({"expression": bad}));
        assert_eq!(r["result"]["isError"], true, "{bad}: {r}");
    }
    // Not in another agent's groups: neither offered nor run.
    drop(s);
    let mut d = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "writer"]);
    d.initialize("2025-11-25");
    let r = d.call(2, "calculate", json!({"expression": "1+1"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[test]
fn plans_belong_to_the_team_and_todos_to_the_agent() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"ana\"\n[roots.ws]\npath = \".\"\n\
         [agents.ana]\nteam = \"core\"\nmcp_servers = [\"planning\"]\n\
         [agents.ben]\nteam = \"core\"\nmcp_servers = [\"planning\"]\n\
         [agents.eve]\nteam = \"other\"\nmcp_servers = [\"planning\"]\n",
    );
    let cfg = ws.path().join("aether.toml").display().to_string();
    let mut ana = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "ana"]);
    ana.initialize("2025-11-25");
    let r = ana.call(
        2,
        "create_plan",
        json!({"name": "release", "goal": "ship 1.0", "steps": ["tests", "notes", "tag"]}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let again = ana.call(
        3,
        "create_plan",
        json!({"name": "release", "goal": "x", "steps": ["a"]}),
    );
    assert!(
        again["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{again}"
    );
    let r = ana.call(
        4,
        "update_plan",
        json!({"name": "release", "step": 1, "status": "done", "result": "all green"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    for (bad, says) in [
        (
            json!({"name": "nope", "step": 1, "status": "done"}),
            "no plan named",
        ),
        (
            json!({"name": "release", "step": 9, "status": "done"}),
            "no step 9",
        ),
    ] {
        let r = ana.call(5, "update_plan", bad);
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(says),
            "{r}"
        );
    }
    // Ana's own to-do list, per run; the team plan is untouched by it.
    let r = ana.call(
        6,
        "todo",
        json!({"action": "write", "items": ["read the spec", "write it"], "run": "r1"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let r = ana.call(
        7,
        "todo",
        json!({"action": "check", "item": 1, "run": "r1"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["items"][0]["done"], true,
        "{r}"
    );
    drop(ana);

    // Ben, same team: the same plan, its next step is the second.
    let mut ben = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "ben"]);
    ben.initialize("2025-11-25");
    let r = ben.call(2, "read_plan", json!({"name": "release"}));
    assert_eq!(r["result"]["structuredContent"]["next_step"], 2, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["steps"][0]["result"],
        "all green"
    );
    // Not Ana's to-do list.
    let r = ben.call(3, "todo", json!({"action": "read", "run": "r1"}));
    assert_eq!(r["result"]["structuredContent"]["items"], json!([]), "{r}");
    drop(ben);

    // Eve, another team: no such plan for her, whatever she names.
    let mut eve = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "eve"]);
    eve.initialize("2025-11-25");
    let r = eve.call(2, "read_plan", json!({"name": "release", "all": true}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("team:other"),
        "{r}"
    );
    // Arguments cannot name another scope: unknown fields are refused by the schema.
    let r = eve.call(3, "read_plan", json!({"name": "release", "team": "core"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[test]
fn teammates_leave_each_other_messages_and_the_user_hears_progress() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"ana\"\n[roots.ws]\npath = \".\"\n\
         [agents.ana]\nteam = \"core\"\nmcp_servers = [\"team\", \"comms\"]\n\
         [agents.ben]\nteam = \"core\"\nmcp_servers = [\"team\"]\n\
         [agents.eve]\nteam = \"other\"\nmcp_servers = [\"team\"]\n\
         [agents.solo]\nmcp_servers = [\"team\"]\n",
    );
    let cfg = ws.path().join("aether.toml").display().to_string();
    let mut ana = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "ana"]);
    ana.initialize("2025-11-25");
    let r = ana.call(
        2,
        "send_message_to",
        json!({"to": "ben", "message": "tests are green"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    for outsider in ["eve", "solo", "nobody"] {
        let r = ana.call(
            3,
            "send_message_to",
            json!({"to": outsider, "message": "psst"}),
        );
        assert_eq!(r["result"]["isError"], true, "{outsider}: {r}");
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("not an agent of team core"),
            "{r}"
        );
    }
    // Progress reaches the client as a progress notification of the call's token.
    ana.send_raw(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "report_progress", "arguments": {"percent": 40, "message": "halfway-ish"},
            "_meta": {"progressToken": "p4"}}})
        .to_string(),
    );
    let mut progress = None;
    loop {
        let m = ana.next_message();
        if m["method"] == "notifications/progress" {
            progress = Some(m.clone());
        }
        if m["id"] == 4 {
            assert_eq!(m["result"]["isError"], false, "{m}");
            break;
        }
    }
    let progress = progress.expect("a progress notification");
    assert_eq!(progress["params"]["progressToken"], "p4");
    assert_eq!(progress["params"]["progress"], 40.0);
    assert_eq!(progress["params"]["message"], "halfway-ish");
    let r = ana.call(5, "report_progress", json!({"percent": 140}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    drop(ana);
    // The console sees the report too (GET /api/progress, what the Agents page shows).
    let srv = crate::util::HttpServer::start(&ws, &["--config", &cfg]);
    let (code, token, err) = ws.run(&["tokens", "create", "--operator", "ops", "--config", &cfg]);
    assert_eq!(code, 0, "{err}");
    let bearer = format!("Bearer {}", token.trim());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let reply = loop {
        let r = crate::util::http(
            &srv.addr,
            "GET",
            "/api/progress",
            &[
                ("Host", srv.addr.as_str()),
                ("Authorization", bearer.as_str()),
            ],
            b"",
        );
        if r.status != 401 || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply.body.contains("halfway-ish") && reply.body.contains("\"agent\":\"ana\""),
        "{}",
        reply.body
    );
    drop(srv);

    let mut ben = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "ben"]);
    ben.initialize("2025-11-25");
    let r = ben.call(2, "read_messages", json!({}));
    let messages = &r["result"]["structuredContent"]["messages"];
    assert_eq!(messages.as_array().unwrap().len(), 1, "{r}");
    assert_eq!(messages[0]["from"], "ana");
    assert_eq!(messages[0]["message"], "tests are green");
    let r = ben.call(3, "read_messages", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["messages"],
        json!([]),
        "read once"
    );
    drop(ben);

    // Another team's agent reads its own (empty) mailbox; an agent without a team has none.
    let mut eve = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "eve"]);
    eve.initialize("2025-11-25");
    let r = eve.call(2, "read_messages", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["messages"],
        json!([]),
        "{r}"
    );
    drop(eve);
    let mut solo = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "solo"]);
    solo.initialize("2025-11-25");
    let r = solo.call(2, "read_messages", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[test]
fn knowledge_is_searched_in_the_callers_scopes_and_written_with_a_receipt() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"ana\"\n[roots.ws]\npath = \".\"\nmode = \"rw\"\n\
         [teams.core]\nknowledge_packs = [\"handbook\"]\n\
         [agents.ana]\nteam = \"core\"\nmcp_servers = [\"knowledge\"]\n\
         [agents.eve]\nteam = \"other\"\nmcp_servers = [\"knowledge\"]\n",
    );
    let cfg = ws.path().join("aether.toml").display().to_string();
    // A pack from a folder; dot-directories are skipped.
    ws.write(
        "kb/deploy.md",
        "# Deploying\n\nRun the canary first.\nThen roll out to every region.\n",
    );
    ws.write(
        "kb/oncall.md",
        "# On call\n\nPage the secondary after fifteen minutes.\n",
    );
    ws.write("kb/.git/secret.md", "# Hidden\n\ncanary secret\n");
    let (code, out, err) = ws.run(&[
        "knowledge",
        "import",
        "kb",
        "--pack",
        "handbook",
        "--config",
        &cfg,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Imported 2 document(s)"), "{out}");
    let (code, _, err) = ws.run(&[
        "knowledge",
        "import",
        "kb",
        "--pack",
        "../x",
        "--config",
        &cfg,
    ]);
    assert_eq!(code, 1, "{err}");

    let mut ana = StdioServer::spawn_root(
        &ws,
        &format!("{}:rw", ws.root_arg()),
        &["--config", &cfg, "--agent", "ana"],
    );
    ana.initialize("2025-11-25");
    let r = ana.call(2, "search_knowledge", json!({"query": "canary"}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let hits = r["result"]["structuredContent"]["hits"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(hits.len(), 1, "{r}");
    assert_eq!(hits[0]["source"], "deploy.md");
    assert_eq!(hits[0]["line"], 3);
    assert!(
        hits[0]["snippet"].as_str().unwrap().contains("[canary]"),
        "{r}"
    );
    let r = ana.call(3, "search_knowledge", json!({"query": "  ?! "}));
    assert_eq!(r["result"]["isError"], true, "an empty query: {r}");
    // Written: saved in the workspace, indexed in the team's scope, with a receipt.
    let r = ana.call(
        4,
        "write_knowledge",
        json!({"title": "Rollback", "content": "Roll back with the previous canary build."}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let receipt = &r["result"]["structuredContent"];
    assert_eq!(receipt["saved"], true);
    assert_eq!(receipt["indexed"], true);
    assert_eq!(receipt["path"], "knowledge/rollback.md");
    assert_eq!(receipt["scope"], "team:core");
    assert!(
        std::fs::read_to_string(ws.path().join("knowledge/rollback.md"))
            .unwrap()
            .contains("previous canary")
    );
    let r = ana.call(5, "search_knowledge", json!({"query": "canary"}));
    assert_eq!(
        r["result"]["structuredContent"]["hits"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{r}"
    );
    drop(ana);

    // Another team searches neither the pack nor the team's notes.
    let mut eve = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "eve"]);
    eve.initialize("2025-11-25");
    let r = eve.call(2, "search_knowledge", json!({"query": "canary"}));
    assert_eq!(r["result"]["structuredContent"]["hits"], json!([]), "{r}");
    assert!(
        !r["result"]["structuredContent"]["scopes"]
            .to_string()
            .contains("core"),
        "{r}"
    );
}

#[test]
fn tests_run_and_code_is_checked_inside_the_shell_sandbox() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nhttp_agent = \"qa\"\n[roots.ws]\npath = \".\"\n\
         [agents.qa]\nproject = \"demo\"\nmcp_servers = [\"workspace\", \"quality\"]\n\
         [agents.noshell]\nmcp_servers = [\"quality\"]\n\
         [projects.demo.shell]\nnetwork = false\n",
    );
    // A project whose tests use node's own runner: one passes, one fails, one is skipped.
    ws.write(
        "app/package.json",
        r#"{"name":"app","version":"1.0.0","scripts":{"test":"node --test"}}"#,
    );
    ws.write(
        "app/test/a.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n\
         test('adds', () => assert.equal(1 + 1, 2));\n\
         test('breaks', () => assert.equal(1, 2));\n\
         test.skip('later', () => {});\n",
    );
    ws.write("scripts/ok.sh", "#!/bin/sh\necho fine\n");
    ws.write("scripts/broken.sh", "#!/bin/sh\nif then fi (\n");
    // Named like an option: still checked as the file it is.
    ws.write("scripts/-x.sh", "#!/bin/sh\nif then fi (\n");
    ws.write("data.unknownext", "x");
    let cfg = ws.path().join("aether.toml").display().to_string();
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "qa"]);
    s.initialize("2025-11-25");
    let r = s.call(2, "run_tests", json!({"cwd": "app"}));
    let out = &r["result"]["structuredContent"];
    assert_eq!(
        r["result"]["isError"], false,
        "the run is reported, failures and all: {r}"
    );
    assert_eq!(out["runner"], "npm", "{r}");
    assert_eq!(out["passed"], 1, "{r}");
    assert_eq!(out["failed"], 1, "{r}");
    assert_eq!(out["skipped"], 1, "{r}");
    assert_eq!(out["failures"], json!(["breaks"]), "{r}");
    let r = s.call(3, "run_tests", json!({"cwd": "scripts"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no test runner found"),
        "{r}"
    );
    // A linter by extension: bash -n here (shellcheck is not installed on this machine).
    let r = s.call(4, "analyze_code", json!({"path": "scripts/broken.sh"}));
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["clean"], false, "{r}");
    assert!(out["linter"].is_string(), "{r}");
    assert!(
        out["findings"].as_str().unwrap().contains("syntax error"),
        "{r}"
    );
    let r = s.call(40, "analyze_code", json!({"path": "scripts/-x.sh"}));
    let findings = r["result"]["structuredContent"]["findings"]
        .as_str()
        .unwrap_or("");
    assert!(findings.contains("syntax error"), "{r}");
    let r = s.call(5, "analyze_code", json!({"path": "scripts/ok.sh"}));
    assert_eq!(r["result"]["structuredContent"]["clean"], true, "{r}");
    let r = s.call(6, "analyze_code", json!({"path": "data.unknownext"}));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("knows no linter"),
        "{r}"
    );
    for escape in ["../etc/passwd", "/etc/passwd", "scripts/../../x.sh"] {
        let r = s.call(7, "analyze_code", json!({"path": escape}));
        assert_eq!(r["result"]["isError"], true, "{escape}: {r}");
    }
    // Every run is in the command log, as run_shell's.
    drop(s);
    let (_, log, _) = ws.run(&["commands", "--config", &cfg]);
    assert!(log.contains("npm test"), "{log}");
    // Without a project shell, neither is offered nor runs.
    let mut n = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "noshell"]);
    n.initialize("2025-11-25");
    let r = n.call(2, "run_tests", json!({"cwd": "app"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
}

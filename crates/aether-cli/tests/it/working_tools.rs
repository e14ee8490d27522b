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

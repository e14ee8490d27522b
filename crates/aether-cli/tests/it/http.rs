//! `aether serve`: the Host/Origin gate, limits, the health check, the banner.

use serde_json::Value;

use crate::util::{HttpServer, INIT, Ws, http};

fn init_headers<'a>(host: &'a str, origin: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![
        ("Host", host),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(o) = origin {
        h.push(("Origin", o));
    }
    h
}

#[test]
fn the_gate_turns_away_foreign_hosts_and_origins() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let own = srv.addr.clone();
    let port = own.rsplit(':').next().unwrap().to_string();
    let localhost = format!("localhost:{port}");
    let own_origin = format!("http://{own}");
    let ok = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&own, None),
        INIT.as_bytes(),
    );
    assert_eq!(ok.status, 200, "{}", ok.head);
    let ok = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&localhost, Some(&own_origin)),
        INIT.as_bytes(),
    );
    assert_eq!(ok.status, 200, "{}", ok.head);
    for (host, origin) in [
        ("evil.example.com", Some("http://evil.example.com")),
        ("evil.example.com", None),
        (own.as_str(), Some("http://evil.example.com")),
        (own.as_str(), Some("null")),
        (own.as_str(), Some("https://127.0.0.1")),
        ("127.0.0.1", None),
        ("127.0.0.1:1", None),
    ] {
        let r = http(
            &srv.addr,
            "POST",
            "/mcp",
            &init_headers(host, origin),
            INIT.as_bytes(),
        );
        assert_eq!(r.status, 403, "host {host} origin {origin:?}: {}", r.head);
        assert!(r.body.contains("Forbidden"), "{}", r.body);
        let r = http(&srv.addr, "GET", "/api/health", &[("Host", host)], b"");
        if origin.is_none() {
            assert_eq!(r.status, 403, "health, host {host}");
        }
    }
}

#[test]
fn health_undeclared_paths_and_oversized_bodies() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let health = http(&srv.addr, "GET", "/api/health", &[("Host", &host)], b"");
    assert_eq!(health.status, 200);
    let v: Value = serde_json::from_str(&health.body).unwrap();
    assert_eq!(v["halted"], false);
    assert_eq!(
        http(&srv.addr, "GET", "/nothing/here", &[("Host", &host)], b"").status,
        404
    );
    assert_eq!(
        http(&srv.addr, "GET", "/api/nothing", &[("Host", &host)], b"").status,
        404
    );
    // Declared admin routes need an operator's token.
    let r = http(&srv.addr, "GET", "/api/registry", &[("Host", &host)], b"");
    assert_eq!(r.status, 401, "{}", r.body);
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&host, None),
        big.as_bytes(),
    );
    assert_eq!(r.status, 413, "{}", r.head);
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&host, None),
        b"{not json",
    );
    assert!((400..500).contains(&r.status), "{}", r.head);
    // And the server still serves.
    assert_eq!(
        http(
            &srv.addr,
            "POST",
            "/mcp",
            &init_headers(&host, None),
            INIT.as_bytes()
        )
        .status,
        200
    );
}

#[test]
fn the_banner_gives_the_mcp_servers_entries() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let json_blocks: Vec<Value> = srv
        .banner
        .split("\n\n")
        .filter_map(|block| block.find('{').map(|i| &block[i..]))
        .filter_map(|s| serde_json::from_str(s.trim()).ok())
        .collect();
    assert_eq!(json_blocks.len(), 2, "{}", srv.banner);
    assert_eq!(json_blocks[0]["mcpServers"]["aether"]["url"], srv.url());
    let stdio = &json_blocks[1]["mcpServers"]["aether"];
    assert!(stdio["command"].as_str().unwrap().ends_with("aether"));
    assert_eq!(stdio["args"][0], "mcp-serve");
    assert!(
        stdio["args"][2]
            .as_str()
            .unwrap()
            .contains(&ws.path().canonicalize().unwrap().display().to_string())
    );
}

#[test]
fn stateless_mode_answers_in_plain_json_without_a_session() {
    let ws = Ws::new();
    ws.write("aether.toml", "[server]\nsessions = false\n");
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&host, None),
        INIT.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{}",
        r.head
    );
    assert!(
        !r.head.to_ascii_lowercase().contains("mcp-session-id"),
        "{}",
        r.head
    );
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["result"]["serverInfo"]["name"], "aether");
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"src/hello.txt"}}}"#;
    let mut headers = init_headers(&host, None);
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let r = http(&srv.addr, "POST", "/mcp", &headers, call.as_bytes());
    assert_eq!(r.status, 200, "{}", r.head);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        v["result"]["content"][0]["text"], "hello from aether\nsecond line\n",
        "{v}"
    );
}

#[test]
fn listening_beyond_loopback_without_tokens_is_refused() {
    let ws = Ws::new();
    ws.write("aether.toml", "[server]\nauth = \"none\"\n");
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let (code, _, err) = ws.run(&["serve", "--listen", addr]);
        assert_eq!(code, 1, "{addr}");
        assert!(
            err.contains("server.auth = \"none\"") && err.contains("127.0.0.1"),
            "{err}"
        );
    }
    // In the configuration itself, too.
    ws.write(
        "aether.toml",
        "[server]\nauth = \"none\"\nlisten = \"0.0.0.0:8484\"\n",
    );
    let (code, _, err) = ws.run(&["serve"]);
    assert_eq!(code, 1);
    assert!(err.contains("needs a loopback server.listen"), "{err}");
}

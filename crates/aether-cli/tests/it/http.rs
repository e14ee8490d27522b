//! `aether serve`: the Host/Origin gate, limits, the health check, the banner.

use serde_json::Value;

use crate::util::{HttpServer, INIT, Ws, http, read_head, send};

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

/// The banner's two `mcpServers` blocks: (by URL, over stdio).
fn banner_entries(banner: &str) -> Vec<Value> {
    banner
        .split("\n\n")
        .filter_map(|block| block.find('{').map(|i| &block[i..]))
        .filter_map(|s| serde_json::from_str(s.trim()).ok())
        .collect()
}

#[test]
fn the_banner_gives_the_mcp_servers_entries() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let json_blocks = banner_entries(&srv.banner);
    assert_eq!(json_blocks.len(), 2, "{}", srv.banner);
    assert_eq!(json_blocks[0]["mcpServers"]["aether"]["url"], srv.url());
    // No token yet: callers need none, and the URL entry carries no header.
    assert!(json_blocks[0]["mcpServers"]["aether"]["headers"].is_null());
    let stdio = &json_blocks[1]["mcpServers"]["aether"];
    assert!(stdio["command"].as_str().unwrap().ends_with("aether"));
    assert_eq!(stdio["args"][0], "mcp-serve");
    assert!(
        stdio["args"][2]
            .as_str()
            .unwrap()
            .contains(&ws.path().canonicalize().unwrap().display().to_string())
    );
    drop(srv);

    // Once an agent's token exists, the URL entry carries the header a caller needs.
    let (code, _, err) = ws.run(&["tokens", "create", "--agent", "default"]);
    assert_eq!(code, 0, "{err}");
    let srv = HttpServer::start(&ws, &[]);
    let json_blocks = banner_entries(&srv.banner);
    let header = &json_blocks[0]["mcpServers"]["aether"]["headers"]["Authorization"];
    assert!(
        header.as_str().is_some_and(|h| h.starts_with("Bearer ")),
        "{}",
        srv.banner
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

/// The JSON-RPC body of a reply (a JSON body, or the first `data:` of an event stream).
/// The `Mcp-Session-Id` a reply opened.
fn session_of(r: &crate::util::HttpReply) -> Option<String> {
    r.header("mcp-session-id")
}

fn rpc(r: &crate::util::HttpReply) -> Value {
    let text = r
        .body
        .lines()
        .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
        .unwrap_or(r.body.trim());
    // A chunked body carries its chunk sizes: take the JSON object itself.
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |i| i + 1);
    serde_json::from_str(&text[start..end]).unwrap_or_else(|e| panic!("{e}: {}", r.body))
}

/// Protocol errors as clients expect them: malformed JSON is 400 with `-32700`, a body that
/// is not one JSON-RPC message 400 with `-32600`, a `tools/call` whose params do not fit
/// `-32602` with the request's id; a missing token 401 with a JSON-RPC body and
/// `WWW-Authenticate: Bearer`.
#[test]
fn protocol_errors_come_back_as_json_rpc_errors() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    for (body, status, code, id) in [
        ("{not json", 400, -32700, Value::Null),
        ("", 400, -32700, Value::Null),
        ("[1, 2]", 400, -32600, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            400,
            -32600,
            Value::Null,
        ),
        ("42", 400, -32600, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":7}"#,
            400,
            -32600,
            serde_json::json!(7),
        ),
        (
            r#"{"jsonrpc":"1.0","id":8,"method":"ping"}"#,
            400,
            -32600,
            serde_json::json!(8),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":7}"#,
            400,
            -32600,
            serde_json::json!(9),
        ),
        (
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":5}}"#,
            200,
            -32602,
            serde_json::json!(10),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":"x"}"#,
            200,
            -32602,
            serde_json::json!("s"),
        ),
    ] {
        let r = http(
            &srv.addr,
            "POST",
            "/mcp",
            &init_headers(&host, None),
            body.as_bytes(),
        );
        assert_eq!(r.status, status, "{body}: {}", r.head);
        let v = rpc(&r);
        assert_eq!(v["jsonrpc"], "2.0", "{body}: {v}");
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
        assert_eq!(v["id"], id, "{body}: {v}");
    }
    // The server still serves.
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&host, None),
        INIT.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);

    // With tokens on: 401 with a JSON-RPC body and the Bearer challenge.
    let (code, _, err) = ws.run(&["tokens", "create", "--agent", "default"]);
    assert_eq!(code, 0, "{err}");
    let mut unknown = init_headers(&host, None);
    unknown.push(("Authorization", "Bearer aether_not-a-real-token"));
    // No token: a token is needed; an unknown one: RFC 6750's `invalid_token`.
    for (headers, invalid) in [(init_headers(&host, None), false), (unknown, true)] {
        let mut r = crate::util::HttpReply {
            status: 0,
            head: String::new(),
            body: String::new(),
        };
        for _ in 0..50 {
            r = http(&srv.addr, "POST", "/mcp", &headers, INIT.as_bytes());
            if r.status == 401 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(r.status, 401, "{}", r.head);
        assert!(
            r.head
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{}",
            r.head
        );
        assert_eq!(
            r.head.contains("error=\"invalid_token\""),
            invalid,
            "{}",
            r.head
        );
        let v = rpc(&r);
        assert_eq!(v["jsonrpc"], "2.0");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("token"),
            "{v}"
        );
    }
}

/// What a browser marks as sent for another site never reaches `/mcp`, `/api` or the console.
#[test]
fn requests_a_browser_marks_as_cross_site_are_refused_everywhere() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let own = format!("http://{host}");
    for (method, path) in [
        ("POST", "/mcp"),
        ("GET", "/api/health"),
        ("GET", "/api/halt"),
        ("GET", "/console"),
        ("GET", "/"),
    ] {
        for (site, origin, refused) in [
            ("cross-site", None, true),
            ("cross-site", Some(own.as_str()), true),
            ("same-site", None, true),
            ("same-site", Some("http://other.localhost"), true),
            ("same-origin", None, false),
            ("none", None, false),
        ] {
            let mut headers = init_headers(&host, origin);
            headers.push(("Sec-Fetch-Site", site));
            let body = if method == "POST" {
                INIT.as_bytes()
            } else {
                b""
            };
            let r = http(&srv.addr, method, path, &headers, body);
            if refused {
                assert_eq!(
                    r.status, 403,
                    "{method} {path} {site} {origin:?}: {}",
                    r.head
                );
            } else {
                assert_ne!(r.status, 403, "{method} {path} {site}: {}", r.head);
            }
        }
    }
}

/// A person sent here by another site (an MCP client to the consent page, an identity provider
/// back to the console) loads the entry pages; nothing else is reached that way, not in a
/// frame, not by another method, not under another Host.
#[test]
fn another_site_may_send_a_person_to_the_entry_pages_and_nowhere_else() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let navigate = |method: &str, path: &str, host: &str, dest: &str| {
        http(
            &srv.addr,
            method,
            path,
            &[
                ("Host", host),
                ("Sec-Fetch-Site", "cross-site"),
                ("Sec-Fetch-Mode", "navigate"),
                ("Sec-Fetch-Dest", dest),
            ],
            b"",
        )
    };
    for path in ["/console", "/oauth/authorize", "/console/oidc/callback"] {
        let r = navigate("GET", path, &host, "document");
        assert_ne!(r.status, 403, "{path}: {}", r.head);
        assert_eq!(
            navigate("GET", path, &host, "iframe").status,
            403,
            "{path} framed"
        );
        assert_eq!(
            navigate("POST", path, &host, "document").status,
            403,
            "{path} posted"
        );
        assert_eq!(
            navigate("GET", path, "evil.example:80", "document").status,
            403,
            "{path} under another Host"
        );
    }
    for path in [
        "/",
        "/api/health",
        "/api/halt",
        "/console/oidc",
        "/console/app.js",
        "/mcp",
    ] {
        assert_eq!(
            navigate("GET", path, &host, "document").status,
            403,
            "{path}"
        );
    }
}

/// One client holding hundreds of idle connections cannot turn the next client away: past
/// half the server's connections, a client beyond its share is refused, not a newcomer; and a
/// connection that never starts a request is closed after a short while.
#[test]
fn one_client_holding_idle_connections_cannot_turn_others_away() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let addr: std::net::SocketAddr = srv.addr.parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect_from = |source: &str| {
        let source: std::net::SocketAddr = format!("{source}:0").parse().unwrap();
        runtime.block_on(async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(source).unwrap();
            socket.connect(addr).await.map(|s| s.into_std().unwrap())
        })
    };
    // Client A: 600 connections, none sending anything (more than the server's 512).
    let mut held = Vec::new();
    for _ in 0..600 {
        if let Ok(s) = connect_from("127.0.0.1") {
            held.push(s);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Client B, from another address: served.
    let ok = |source: &str| -> bool {
        let Ok(mut s) = connect_from(source) else {
            return false;
        };
        use std::io::{Read, Write};
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let req = format!(
            "GET /api/health HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            srv.addr
        );
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply.starts_with("HTTP/1.1 200")
    };
    for source in ["127.0.0.2", "127.0.0.3"] {
        assert!(ok(source), "a new client from {source} was turned away");
    }
    // A's connections past its share were closed by the server (they read end of stream).
    let mut closed = 0;
    for s in &mut held {
        use std::io::Read;
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .unwrap();
        if matches!(s.read(&mut [0u8; 1]), Ok(0)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 600 - 256,
        "only {closed} of A's connections were refused"
    );
    // A connection that never starts a request is closed after the first-request limit.
    let mut idle = connect_from("127.0.0.4").unwrap();
    idle.set_nonblocking(false).unwrap();
    idle.set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    let started = std::time::Instant::now();
    use std::io::Read;
    assert!(
        matches!(idle.read(&mut [0u8; 1]), Ok(0)),
        "the idle connection stayed open"
    );
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(9) && waited < std::time::Duration::from_secs(14),
        "closed after {waited:?}"
    );
}

/// MCP sessions are bounded per caller (a token, or the agent reached without one) and in
/// all: past either, a new session is refused with a JSON-RPC error (503); one closed makes
/// room again.
#[test]
fn mcp_sessions_are_bounded_per_caller_and_in_all() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nmax_sessions_per_caller = 3\nmax_sessions = 5\n[roots.ws]\npath = \".\"\n",
    );
    let srv = HttpServer::start(&ws, &[]);
    let host = srv.addr.clone();
    let open = |bearer: Option<&str>| -> (u16, Option<String>, Value) {
        let mut headers = init_headers(&host, None);
        if let Some(b) = bearer {
            headers.push(("Authorization", b));
        }
        let r = http(&srv.addr, "POST", "/mcp", &headers, INIT.as_bytes());
        (r.status, session_of(&r), rpc(&r))
    };
    let mut mine = Vec::new();
    for _ in 0..3 {
        let (status, id, _) = open(None);
        assert_eq!(status, 200);
        mine.push(id.expect("a session id"));
    }
    let (status, id, v) = open(None);
    assert_eq!(status, 503, "{v}");
    assert!(id.is_none());
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_sessions_per_caller"),
        "{v}"
    );
    // Closing one makes room.
    let mut headers = init_headers(&host, None);
    headers.push(("Mcp-Session-Id", &mine[0]));
    let r = http(&srv.addr, "DELETE", "/mcp", &headers, b"");
    assert_eq!(r.status, 200, "{}", r.head);
    // Ended: it is unknown now, as is one that never began.
    let r = http(&srv.addr, "DELETE", "/mcp", &headers, b"");
    assert_eq!(r.status, 404, "{}", r.head);
    let mut unknown = init_headers(&host, None);
    unknown.push(("Mcp-Session-Id", "never-opened"));
    let r = http(&srv.addr, "DELETE", "/mcp", &unknown, b"");
    assert_eq!(r.status, 404, "{}", r.head);
    let (status, _, v) = open(None);
    assert_eq!(status, 200, "{v}");

    // Another caller (a token): its own share, until the server's total.
    let (code, token, err) = ws.run(&["tokens", "create", "--agent", "default"]);
    assert_eq!(code, 0, "{err}");
    let bearer = format!("Bearer {}", token.trim());
    // (The server learns of the new token within its poll of the store.)
    let mut first = open(Some(&bearer)).0;
    for _ in 0..50 {
        if first != 401 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        first = open(Some(&bearer)).0;
    }
    let mut statuses = vec![first];
    for _ in 0..2 {
        statuses.push(open(Some(&bearer)).0);
    }
    assert_eq!(statuses, [200, 200, 503], "3 + 2 = the server's 5");
    let (_, _, v) = open(Some(&bearer));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_sessions"),
        "{v}"
    );
}

/// A kept-alive connection in use is not closed at the first-request limit: only one quiet
/// that long is.
#[test]
fn a_connection_in_use_stays_open_past_the_first_request_limit() {
    use std::io::{BufRead, BufReader, Read, Write};
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let stream = std::net::TcpStream::connect(&srv.addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let started = std::time::Instant::now();
    let mut served = 0;
    while started.elapsed() < std::time::Duration::from_secs(14) {
        let req = format!("GET /api/health HTTP/1.1\r\nHost: {}\r\n\r\n", srv.addr);
        writer.write_all(req.as_bytes()).unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(
            status.starts_with("HTTP/1.1 200"),
            "after {served} requests: {status:?}"
        );
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        served += 1;
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    assert!(served >= 6, "{served}");
}

/// A GET request on `/mcp` for `session`, left open: its status, and the connection (the
/// stream lasts while it is held).
/// Opens a handshake-era MCP session (initialize, then initialized); returns its id.
fn open_session(srv: &HttpServer) -> String {
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &init_headers(&srv.addr, None),
        INIT.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.head);
    let session = session_of(&r).expect("a session id");
    let r = http(
        &srv.addr,
        "POST",
        "/mcp",
        &session_headers(&srv.addr, &session),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!(r.status < 300, "{}", r.head);
    session
}

/// The headers of a request in session `session`.
fn session_headers<'a>(host: &'a str, session: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut headers = init_headers(host, None);
    headers.push(("Mcp-Session-Id", session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    headers
}

fn open_stream(addr: &str, session: &str) -> (u16, std::net::TcpStream) {
    let headers = [
        ("Host", addr),
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let mut s = send(addr, "GET", "/mcp", &headers, b"");
    (read_head(&mut s).0, s)
}

#[test]
fn a_session_has_one_get_stream_at_a_time() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &[]);
    let session = open_session(&srv);
    let (status, first) = open_stream(&srv.addr, &session);
    assert_eq!(status, 200);
    // A second stream would never be told anything: refused while the first is open.
    let (status, _) = open_stream(&srv.addr, &session);
    assert_eq!(status, 409);
    // Once the first is closed, a new one is served.
    drop(first);
    let mut status = 0;
    for _ in 0..50 {
        status = open_stream(&srv.addr, &session).0;
        if status == 200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(status, 200);
}

/// Two clients sharing a session send a request under the same id at once: rmcp routes an
/// answer by its id, so the second would wait forever. It is refused at once (409, a
/// JSON-RPC error), the first is answered, and the id is free again afterwards.
#[test]
fn a_request_id_already_in_flight_in_a_session_is_refused_not_left_hanging() {
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let session = open_session(&srv);
    let headers = session_headers(&srv.addr, &session);
    // The first request under id 7 waits (until cancelled); its stream is open.
    let waiting = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_wait_until_cancelled","arguments":{}}}"#;
    let mut first = send(&srv.addr, "POST", "/mcp", &headers, waiting);
    assert_eq!(read_head(&mut first).0, 200);
    // A second request under the same id, from a client sharing the session: refused at
    // once, where it would have waited forever.
    let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}"#;
    let second = http(&srv.addr, "POST", "/mcp", &headers, call);
    assert_eq!(second.status, 409, "{}", second.body);
    let answer = rpc(&second);
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in flight"),
        "{answer}"
    );
    // The first client goes away: its request is over, and the id is free again.
    drop(first);
    let mut again = http(&srv.addr, "POST", "/mcp", &headers, call);
    for _ in 0..50 {
        if again.status == 200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        again = http(&srv.addr, "POST", "/mcp", &headers, call);
    }
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(rpc(&again)["result"]["isError"], false, "{}", again.body);
}

/// A client whose stream dropped mid-call resumes it with `Last-Event-ID` after the call
/// finished: it hears what it missed, the result included, once; resuming from the result
/// replays nothing more.
#[test]
fn a_stream_resumed_after_its_call_finished_replays_the_result_once() {
    use std::io::Read;
    let ws = Ws::new();
    let srv = HttpServer::start(&ws, &["--conformance-fixtures"]);
    let session = open_session(&srv);
    let headers = session_headers(&srv.addr, &session);
    // The call's stream: read up to its first event id, then drop it.
    let call = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"p"}}}"#;
    let mut s = send(&srv.addr, "POST", "/mcp", &headers, call);
    let mut seen = read_head(&mut s).1;
    let mut byte = [0u8; 1];
    while !(seen.contains("\nid: ") && seen.ends_with('\n')) && s.read(&mut byte).unwrap() == 1 {
        seen.push(byte[0] as char);
    }
    let last = seen
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("an event id")
        .trim()
        .to_string();
    drop(s);
    // The call finishes meanwhile (about 100 ms).
    std::thread::sleep(std::time::Duration::from_millis(800));
    let resume = |from: &str| {
        let mut h = headers.clone();
        h.retain(|(k, _)| *k != "Content-Type");
        h.push(("Last-Event-ID", from));
        http(&srv.addr, "GET", "/mcp", &h, b"")
    };
    let replay = resume(&last);
    assert_eq!(replay.status, 200, "{}", replay.head);
    let results: Vec<&str> = replay
        .body
        .lines()
        .filter(|l| l.contains(r#""id":5"#) && l.contains("Progress reported"))
        .collect();
    assert_eq!(results.len(), 1, "{}", replay.body);
    let ids: Vec<&str> = replay
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert!(
        !ids.contains(&last.as_str()),
        "the last event seen is not sent again: {ids:?}"
    );
    // From the result on, nothing is left.
    let after = resume(ids.last().expect("replayed events have ids"));
    assert!(!after.body.contains("Progress reported"), "{}", after.body);
}

/// A request refused before its body is read (the Host gate, a missing operator token, a
/// missing agent token on /mcp) leaves its connection usable: the body that comes after the
/// answer was decided is read, so the client's next request on the same connection (what
/// every MCP SDK sends at once after a 401: discovery) is answered, not cut off.
#[test]
fn a_request_refused_before_its_body_keeps_its_connection() {
    use std::io::{Read, Write};
    let ws = Ws::new();
    let (code, _, err) = ws.run(&["tokens", "create", "--agent", "default"]);
    assert_eq!(code, 0, "{err}");
    let srv = HttpServer::start(&ws, &[]);
    let own = srv.addr.clone();
    for (path, host, refused) in [
        ("/mcp", own.as_str(), 401),
        ("/api/halt", own.as_str(), 401),
        ("/mcp", "evil.example.com", 403),
    ] {
        let mut s = std::net::TcpStream::connect(&srv.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
            INIT.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        // The body follows later than the server needs to decide.
        std::thread::sleep(std::time::Duration::from_millis(300));
        s.write_all(INIT.as_bytes()).unwrap();
        let (status, head) = read_head(&mut s);
        assert_eq!(status, refused, "{path} {host}: {head}");
        let length: usize = crate::util::HttpReply {
            status,
            head: head.clone(),
            body: String::new(),
        }
        .header("content-length")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{path}: a length: {head}"));
        let mut body = vec![0; length];
        s.read_exact(&mut body).unwrap();
        assert!(
            !head.to_ascii_lowercase().contains("connection: close"),
            "{path}: {head}"
        );
        // The same connection, again.
        let next = format!("GET /api/health HTTP/1.1\r\nHost: {own}\r\nConnection: close\r\n\r\n");
        let mut rest = String::new();
        if let Err(e) = s.write_all(next.as_bytes()) {
            panic!("{path} {host}: the connection was closed under the client: {e}");
        }
        let _ = s.read_to_string(&mut rest);
        assert!(
            rest.starts_with("HTTP/1.1 200"),
            "{path} {host}: the next request on the connection got {rest:?}"
        );
    }
}

/// A handshake-era session idle past `[server] session_sleep_seconds` has its worker let go
/// and is woken from the store by its next request, the same session as before; one with its
/// GET stream open is kept awake.
#[test]
fn an_idle_session_sleeps_and_wakes_as_the_same_session() {
    let ws = Ws::new();
    ws.write(
        "aether.toml",
        "[server]\nsession_sleep_seconds = 1\nmax_sessions_per_caller = 4\n[roots.ws]\npath = \".\"\nmode = \"rw\"\n",
    );
    let srv = HttpServer::start(&ws, &[]);
    let post = |session: &str, body: &str| {
        http(
            &srv.addr,
            "POST",
            "/mcp",
            &session_headers(&srv.addr, session),
            body.as_bytes(),
        )
    };
    let (sleeper, listener, keeper) = (open_session(&srv), open_session(&srv), open_session(&srv));
    // Ids nobody issued take no place among the caller's sessions: answered 404, or named
    // on 2026-07-28 requests (served, standing alone).
    let modern = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    for i in 0..8 {
        let bogus = format!("00000000-0000-0000-0000-00000000000{i}");
        let r = post(&bogus, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert_eq!(r.status, 404, "{}", r.body);
        let mut headers = init_headers(&srv.addr, None);
        headers.extend([
            ("Mcp-Session-Id", bogus.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ]);
        let r = http(&srv.addr, "POST", "/mcp", &headers, modern.as_bytes());
        assert_eq!(r.status, 200, "{}{}", r.head, r.body);
        assert!(r.body.contains("read_file"), "{}", r.body);
    }
    open_session(&srv);
    let write = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"note.txt","content":"before sleep\n"}}}"#;
    let r = post(&keeper, write);
    assert!(
        r.status == 200 && !r.body.contains("\"isError\":true"),
        "{}",
        r.body
    );
    assert!(ws.path().join("note.txt").exists());
    let (status, _stream) = open_stream(&srv.addr, &listener);
    assert_eq!(status, 200);
    // Without their records, a session whose worker was let go cannot be woken (404); the
    // one whose stream is open never sleeps. (Each request keeps its session awake for
    // another second, so the sleeper is asked only every three.)
    let db = rusqlite::Connection::open(ws.path().join(".aether/aether.db")).unwrap();
    for id in [&sleeper, &listener] {
        db.execute("DELETE FROM mcp_sessions WHERE id = ?1", [id.as_str()])
            .unwrap();
    }
    let list = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let mut status = 0;
    for _ in 0..10 {
        std::thread::sleep(std::time::Duration::from_secs(3));
        status = post(&sleeper, list).status;
        if status == 404 {
            break;
        }
    }
    assert_eq!(status, 404, "the idle session never slept");
    let r = post(&listener, list);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("read_file"), "{}", r.body);
    // The keeper wakes from its record, the same session: its revert_file takes back what it
    // wrote before it slept.
    let revert = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"revert_file","arguments":{"path":"note.txt"}}}"#;
    let r = post(&keeper, revert);
    assert!(
        r.status == 200 && !r.body.contains("\"isError\":true"),
        "{}",
        r.body
    );
    assert!(!ws.path().join("note.txt").exists(), "{}", r.body);
}

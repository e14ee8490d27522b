//! The console's API from outside, the way a browser and an attacker's page would reach it:
//! the gate (Host, Origin), the first admin's one-time setup link, sign-in (cookie flags, rate
//! limit), permissions per route, CSRF attempts, sign-out; and the OpenAPI description kept
//! true against the routes. (The pages themselves are driven in a real browser by
//! `browser.rs`.)

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{HttpReply, HttpServer, Ws, http, repo_root};

struct Console {
    srv: HttpServer,
    host: String,
    origin: String,
}

impl Console {
    fn start(ws: &Ws) -> Console {
        let srv = HttpServer::start(ws, &[]);
        let host = srv.addr.clone();
        let origin = format!("http://{host}");
        Console { srv, host, origin }
    }

    /// A request with this server's Host, and optionally a session (`COOKIE|KEY`, as
    /// [`session_of`] gives it), an Origin and a body.
    fn req(
        &self,
        method: &str,
        path: &str,
        cookie: Option<&str>,
        origin: Option<&str>,
        body: Option<Value>,
    ) -> HttpReply {
        let (cookie, key) = match cookie.map(|c| c.split_once('|').unwrap_or((c, ""))) {
            Some((c, k)) => (Some(format!("aether_console={c}")), Some(k.to_string())),
            None => (None, None),
        };
        let mut headers = vec![("Host", self.host.as_str())];
        if let Some(c) = &cookie {
            headers.push(("Cookie", c.as_str()));
        }
        if let Some(k) = key.as_deref().filter(|k| !k.is_empty()) {
            headers.push(("X-Aether-Key", k));
        }
        if let Some(o) = origin {
            headers.push(("Origin", o));
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        if !body.is_empty() {
            headers.push(("Content-Type", "application/json"));
        }
        http(&self.srv.addr, method, path, &headers, body.as_bytes())
    }

    fn setup_token(&self) -> String {
        self.srv
            .banner
            .lines()
            .find_map(|l| l.trim().split_once("/setup#").map(|(_, t)| t.to_string()))
            .expect("the banner has a setup link")
    }
}

/// The session a reply starts (`COOKIE|KEY`: the cookie it sets, after checking its flags,
/// and the key in its body).
fn session_of(reply: &HttpReply) -> String {
    let line = reply
        .head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie set: {}", reply.head));
    assert!(line.contains("HttpOnly"), "{line}");
    assert!(line.contains("SameSite=Strict"), "{line}");
    assert!(line.contains("Path=/"), "{line}");
    assert!(line.contains("Max-Age="), "{line}");
    let value = line.split_once("aether_console=").unwrap().1;
    let cookie = value.split(';').next().unwrap().to_string();
    let key = body(reply)["key"].as_str().unwrap().to_string();
    assert!(
        key.len() > 40 && !reply.head.contains(&key),
        "the key is in the body only"
    );
    format!("{cookie}|{key}")
}

fn body(reply: &HttpReply) -> Value {
    // Chunked bodies: the JSON is the line that starts with { or [.
    reply
        .body
        .lines()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
        .unwrap_or(Value::Null)
}

#[test]
fn the_console_api_admits_only_its_own_signed_in_operators_with_the_right_permission() {
    let ws = Ws::new();
    let c = Console::start(&ws);
    let origin = c.origin.clone();
    let me = Some(origin.as_str());
    let evil = Some("http://evil.example");

    // Before anything: pages are served; the API needs a sign-in; undeclared paths are 404.
    let page = c.req("GET", "/console", None, None, None);
    assert_eq!(page.status, 200);
    assert!(
        page.head
            .to_ascii_lowercase()
            .contains("content-security-policy: default-src 'none'"),
        "{}",
        page.head
    );
    assert_eq!(c.req("GET", "/api/session", None, None, None).status, 401);
    assert_eq!(
        c.req("GET", "/api/nothing-here", None, None, None).status,
        404
    );
    let wrong_host = http(
        &c.srv.addr,
        "GET",
        "/console",
        &[("Host", "attacker.example:8484")],
        b"",
    );
    assert_eq!(wrong_host.status, 403, "DNS rebinding: another Host");

    // The first admin, by the one-time link: Origin required, the password checked, once.
    let token = c.setup_token();
    let setup = |origin: Option<&str>, token: &str, password: &str| {
        c.req(
            "POST",
            "/api/setup",
            None,
            origin,
            Some(json!({"token": token, "name": "root-admin", "password": password})),
        )
    };
    assert_eq!(setup(None, &token, "correct horse battery").status, 403);
    assert_eq!(setup(evil, &token, "correct horse battery").status, 403);
    let guessed = setup(me, "not-the-token", "correct horse battery");
    assert_eq!(guessed.status, 400, "{}", guessed.body);
    assert!(guessed.body.contains("setup link"), "{}", guessed.body);
    let weak = setup(me, &token, "short");
    assert_eq!(weak.status, 400, "{}", weak.body);
    let ok = setup(me, &token, "correct horse battery");
    assert_eq!(ok.status, 200, "{}", ok.body);
    let admin = session_of(&ok);
    assert_eq!(
        setup(me, &token, "correct horse battery").status,
        400,
        "one use"
    );
    let who = c.req("GET", "/api/session", Some(&admin), None, None);
    assert_eq!(body(&who)["role"], "admin", "{}", who.body);
    // The cookie alone (which a browser also sends to other servers on this host name) is
    // not a session; nor is the key with another cookie.
    let (cookie_only, key_only) = admin.split_once('|').unwrap();
    assert_eq!(
        c.req("GET", "/api/session", Some(cookie_only), None, None)
            .status,
        401
    );
    assert_eq!(
        c.req(
            "GET",
            "/api/session",
            Some(&format!("forged|{key_only}")),
            None,
            None
        )
        .status,
        401
    );

    // CSRF: a change with the cookie but without this console's Origin is refused.
    let halt = |cookie: &str, origin: Option<&str>| {
        c.req(
            "POST",
            "/api/halt",
            Some(cookie),
            origin,
            Some(json!({"why": "test"})),
        )
    };
    assert_eq!(halt(&admin, None).status, 403);
    assert_eq!(halt(&admin, evil).status, 403);
    assert_eq!(halt(&admin, Some("null")).status, 403);
    assert!(
        !body(&c.req("GET", "/api/halt", Some(&admin), None, None))["halted"]
            .as_bool()
            .unwrap()
    );
    assert_eq!(halt(&admin, me).status, 200);
    assert_eq!(
        c.req(
            "POST",
            "/api/resume",
            Some(&admin),
            me,
            Some(json!({"why": "done"}))
        )
        .status,
        200
    );
    // A forged cookie is nobody.
    assert_eq!(
        c.req("GET", "/api/session", Some("forged"), None, None)
            .status,
        401
    );

    // A viewer: reads, changes nothing, manages no accounts.
    let made = c.req(
        "POST",
        "/api/accounts",
        Some(&admin),
        me,
        Some(json!({"name": "vera", "password": "viewer password 1", "role": "viewer"})),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let bad_role = c.req(
        "POST",
        "/api/accounts",
        Some(&admin),
        me,
        Some(json!({"name": "x", "password": "viewer password 1", "role": "root"})),
    );
    assert_eq!(bad_role.status, 400, "{}", bad_role.body);
    let sign_in = |name: &str, password: &str, origin: Option<&str>| {
        c.req(
            "POST",
            "/api/sign-in",
            None,
            origin,
            Some(json!({"name": name, "password": password})),
        )
    };
    assert_eq!(sign_in("vera", "viewer password 1", None).status, 403);
    let vera = session_of(&sign_in("vera", "viewer password 1", me));
    assert_eq!(
        c.req("GET", "/api/audit", Some(&vera), None, None).status,
        200
    );
    assert_eq!(
        c.req("GET", "/metrics", Some(&vera), None, None).status,
        200
    );
    let refused = halt(&vera, me);
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("halt"), "{}", refused.body);
    assert_eq!(
        c.req("GET", "/api/accounts", Some(&vera), None, None)
            .status,
        403
    );
    let approve = c.req(
        "POST",
        "/api/approvals/some-call/approve",
        Some(&vera),
        me,
        Some(json!({"why": "x"})),
    );
    assert_eq!(approve.status, 403, "{}", approve.body);
    // An approval for a call that is not waiting says so.
    let stale = c.req(
        "POST",
        "/api/approvals/no-such-call/approve",
        Some(&admin),
        me,
        Some(json!({"why": "x"})),
    );
    assert_eq!(stale.status, 404, "{}", stale.body);

    // Guessing is rate limited, and a right password does not get through meanwhile.
    for _ in 0..5 {
        assert_eq!(sign_in("vera", "wrong password!", me).status, 401);
    }
    let limited = sign_in("vera", "viewer password 1", me);
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(
        limited.head.to_ascii_lowercase().contains("retry-after:"),
        "{}",
        limited.head
    );
    // Unknown names are answered like wrong passwords.
    assert_eq!(sign_in("nobody", "whatever password", me).status, 401);

    // Signing out ends the session; a changed role ends the account's sessions.
    let out = c.req("POST", "/api/sign-out", Some(&admin), me, None);
    assert_eq!(out.status, 200);
    assert_eq!(
        c.req("GET", "/api/session", Some(&admin), None, None)
            .status,
        401
    );

    // The CLI shares the accounts (headless setup).
    let (code, out, err) = ws.run(&["accounts", "list", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("root-admin") && out.contains("vera"), "{out}");
    let (code, _, err) = ws.run(&[
        "accounts",
        "role",
        "vera",
        "approver",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let started = Instant::now();
    assert_eq!(
        c.req("GET", "/api/audit", Some(&vera), None, None).status,
        401
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let (code, _, err) = ws.run(&[
        "accounts",
        "remove",
        "root-admin",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 1, "the last admin stays");
    assert!(err.contains("last admin"), "{err}");
    // The account changes are in the audit.
    let (_, audit, _) = ws.run(&[
        "audit",
        "tail",
        "-n",
        "50",
        "--json",
        "--store",
        &ws.store_url(),
    ]);
    assert!(
        audit.contains("accounts.create") && audit.contains("accounts.update"),
        "{audit}"
    );
}

/// The routes the server declares, from its source: (method, path).
fn declared_routes() -> std::collections::BTreeSet<(String, String)> {
    let mut routes = std::collections::BTreeSet::new();
    let route = regex::Regex::new(r#"\.route\(\s*"([^"]+)",\s*([^\n]+)"#).unwrap();
    let method = regex::Regex::new(r"\b(get|post|put|delete|patch)\(").unwrap();
    for file in ["admin.rs", "console.rs", "http.rs"] {
        let text = std::fs::read_to_string(repo_root().join("crates/aether-server/src").join(file))
            .unwrap();
        for c in route.captures_iter(&text) {
            for m in method.captures_iter(&c[2]) {
                routes.insert((m[1].to_string(), c[1].to_string()));
            }
        }
    }
    // The admin routes, as they declare themselves with their permissions.
    for (method, path, _) in aether_server::admin_permissions() {
        routes.insert((method.to_ascii_lowercase(), path.to_string()));
    }
    routes
}

#[test]
fn the_openapi_description_is_true_to_the_routes() {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("crates/aether-server/openapi.json")).unwrap(),
    )
    .unwrap();
    let mut described = std::collections::BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            described.insert((method.clone(), path.clone()));
        }
    }
    let pages = [
        "/",
        "/console",
        "/setup",
        "/console/app.js",
        "/console/app.css",
    ];
    let declared: std::collections::BTreeSet<_> = declared_routes()
        .into_iter()
        .filter(|(_, p)| !pages.contains(&p.as_str()))
        .collect();
    assert!(declared.len() > 30, "{declared:?}");
    let undocumented: Vec<_> = declared.difference(&described).collect();
    let phantom: Vec<_> = described.difference(&declared).collect();
    assert!(
        undocumented.is_empty(),
        "routes missing from openapi.json: {undocumented:?}"
    );
    assert!(
        phantom.is_empty(),
        "openapi.json describes routes that do not exist: {phantom:?}"
    );
    // Every described route answers (not 404) on a live server, and says which permission.
    let ws = Ws::new();
    let c = Console::start(&ws);
    let (code, token, err) = ws.run(&[
        "tokens",
        "create",
        "--operator",
        "ops",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let bearer = format!("Bearer {}", token.trim());
    let permissions = aether_server::admin_permissions();
    let deadline = Instant::now() + Duration::from_secs(5);
    for (method, path) in &described {
        if path == "/api/events" {
            continue; // a stream that does not end
        }
        let concrete = path
            .replace("{name}", "x")
            .replace("{id}", "x")
            .replace("{call_id}", "x")
            .replace("{action}", "approve")
            .replace("{decision}", "approve");
        loop {
            let r = http(
                &c.srv.addr,
                &method.to_uppercase(),
                &concrete,
                &[
                    ("Host", &c.host),
                    ("Authorization", &bearer),
                    ("Content-Type", "application/json"),
                ],
                b"{}",
            );
            if r.status == 401 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                continue; // the server has not seen the new token yet
            }
            let unrouted = r.status == 404 && r.body.contains("\"not found\"");
            assert!(
                !unrouted && r.status != 405,
                "{method} {concrete}: {} {}",
                r.status,
                r.body
            );
            break;
        }
        let op = &doc["paths"][path][method];
        let public = [
            "/api/health",
            "/api/sign-in",
            "/api/sign-out",
            "/api/setup",
            "/.well-known/oauth-protected-resource",
        ];
        if !public.contains(&path.as_str()) {
            let p = op["x-permission"].as_str().unwrap_or_default();
            let (_, _, needs) = permissions
                .iter()
                .find(|(m, at, _)| m.eq_ignore_ascii_case(method) && at == path)
                .unwrap_or_else(|| {
                    panic!("{method} {path} is described but declares no permission")
                });
            assert_eq!(p, needs.as_str(), "{method} {path}");
        }
    }
}

#[test]
fn one_operator_holds_a_bounded_number_of_event_streams() {
    use std::io::{Read, Write};
    let ws = Ws::new();
    let c = Console::start(&ws);
    let (code, token, err) = ws.run(&[
        "tokens",
        "create",
        "--operator",
        "ops",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let request = format!(
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        c.host,
        token.trim()
    );
    let open = || {
        let mut s = std::net::TcpStream::connect(&c.srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).unwrap();
        (s, String::from_utf8_lossy(&head[..n]).into_owned())
    };
    // The server sees the new token within its poll.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut first = open();
    while first.1.contains(" 401 ") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        first = open();
    }
    assert!(first.1.starts_with("HTTP/1.1 200"), "{}", first.1);
    let mut held = vec![first.0];
    for _ in 1..16 {
        let (s, head) = open();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    let (_, head) = open();
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    // A closed stream frees its place.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, head) = open();
        if head.starts_with("HTTP/1.1 200") {
            held.push(s);
            break;
        }
        assert!(Instant::now() < deadline, "a place never came free: {head}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

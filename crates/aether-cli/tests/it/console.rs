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
    for file in [
        "admin.rs",
        "console.rs",
        "http.rs",
        "authz.rs",
        "console_oidc.rs",
    ] {
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
        "/console/vendor/uplot.js",
        "/console/vendor/uplot.css",
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
        // Routed only when configured (`x-when`: the built-in authorization server, the
        // console's identity provider); their own tests reach them.
        if doc["paths"][path][method].get("x-when").is_some() {
            continue;
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
            "/api/sign-in/methods",
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

/// An account made on the command line (the password on stdin).
pub(crate) fn account(ws: &Ws, name: &str, role: &str, password: &str) {
    use std::io::Write;
    let mut create = crate::util::aether()
        .args(["accounts", "create", name, "--role", role])
        .current_dir(ws.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    writeln!(create.stdin.take().unwrap(), "{password}").unwrap();
    assert!(create.wait().unwrap().success());
}

/// What only the command line did before, from the console's API, with the same rules: the
/// journal and undo (a person with `undo_changes`; once; the file comes back), agents' tokens
/// (made and shown once, working on /mcp, revoked and refused; never an operator's token), and
/// agent runs (list, transcript, stop) — each refused without its permission or this
/// console's Origin.
#[test]
fn the_journal_tokens_and_runs_are_served_with_the_clis_rules() {
    use crate::util::StdioServer;
    let ws = Ws::new();
    // The stdio session and the console's server serve the same root, by the same name.
    ws.write("aether.toml", "[roots.ws]\npath = \".\"\nmode = \"rw\"\n");
    // An agent's edit, journalled.
    let call = {
        let mut s = StdioServer::start_rw(&ws);
        let reply = s.call(
            1,
            "edit_file",
            json!({"path": "src/hello.txt", "search": "hello from aether", "replace": "changed"}),
        );
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        reply["result"]["structuredContent"]["call_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    account(&ws, "olga", "operator", "operator password 1");
    account(&ws, "vera", "viewer", "viewer password 1");
    let c = Console::start(&ws);
    let me = Some(c.origin.as_str());
    let sign_in = |name: &str, password: &str| {
        session_of(&c.req(
            "POST",
            "/api/sign-in",
            None,
            me,
            Some(json!({"name": name, "password": password})),
        ))
    };
    let olga = sign_in("olga", "operator password 1");
    let vera = sign_in("vera", "viewer password 1");

    // The journal: anyone may read it; undo needs undo_changes and this console's Origin.
    let journal = c.req(
        "GET",
        &format!("/api/journal?call={call}"),
        Some(&vera),
        None,
        None,
    );
    assert_eq!(journal.status, 200, "{}", journal.body);
    let entries = body(&journal);
    assert_eq!(entries[0]["call_id"], call.as_str(), "{entries}");
    assert_eq!(entries[0]["path"], "src/hello.txt", "{entries}");
    let undo = format!("/api/journal/{call}/undo");
    assert_eq!(c.req("POST", &undo, Some(&vera), me, None).status, 403);
    assert_eq!(c.req("POST", &undo, Some(&olga), None, None).status, 403);
    // One file: a body naming a file the call did not change is 409 and changes nothing; a
    // body that is not {root, path} is 400.
    let other = c.req(
        "POST",
        &undo,
        Some(&olga),
        me,
        Some(json!({"root": "ws", "path": "other.txt"})),
    );
    assert_eq!(other.status, 409, "{}", other.body);
    assert!(
        other.body.contains("nothing of ws:other.txt"),
        "{}",
        other.body
    );
    let bad = c.req(
        "POST",
        &undo,
        Some(&olga),
        me,
        Some(json!({"path": "src/hello.txt"})),
    );
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        std::fs::read_to_string(ws.path().join("src/hello.txt"))
            .unwrap()
            .starts_with("changed")
    );
    let done = c.req(
        "POST",
        &undo,
        Some(&olga),
        me,
        Some(json!({"root": "ws", "path": "src/hello.txt"})),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(body(&done)["undone"], call.as_str());
    assert_eq!(body(&done)["file"]["path"], "src/hello.txt");
    let back = std::fs::read_to_string(ws.path().join("src/hello.txt")).unwrap();
    assert!(back.starts_with("hello from aether"), "{back}");
    let again = c.req("POST", &undo, Some(&olga), me, None);
    assert_eq!(again.status, 409, "{}", again.body);
    let undone = body(&c.req(
        "GET",
        &format!("/api/journal?call={call}"),
        Some(&olga),
        None,
        None,
    ));
    assert!(undone[0]["reverted_by"].is_string(), "{undone}");

    // Tokens: managing agents; an agent's token is shown once and works until revoked.
    assert_eq!(
        c.req("GET", "/api/tokens", Some(&vera), None, None).status,
        403
    );
    let made = c.req(
        "POST",
        "/api/tokens",
        Some(&olga),
        me,
        Some(json!({"agent": "default", "label": "ci"})),
    );
    assert_eq!(made.status, 200, "{}", made.body);
    let made = body(&made);
    let token = made["token"].as_str().unwrap().to_string();
    let id = made["row"]["id"].as_str().unwrap().to_string();
    let listed = c.req("GET", "/api/tokens", Some(&olga), None, None);
    assert!(listed.body.contains(&id) && !listed.body.contains(&token));
    let bearer = format!("Bearer {token}");
    let hello = |bearer: &str| {
        http(
            &c.srv.addr,
            "POST",
            "/mcp",
            &[
                ("Host", &c.host),
                ("Authorization", bearer),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            crate::util::INIT.as_bytes(),
        )
        .status
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while hello(&bearer) != 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(hello(&bearer), 200, "the new token works on /mcp");
    for (body_json, status) in [
        (json!({"agent": "ghost"}), 404),
        (json!({"agent": "default", "label": "a\u{1b}[2J"}), 400),
        (json!({"agent": "default", "kind": "operator"}), 400),
    ] {
        let r = c.req(
            "POST",
            "/api/tokens",
            Some(&olga),
            me,
            Some(body_json.clone()),
        );
        assert_eq!(r.status, status, "{body_json}: {}", r.body);
    }
    let revoke = format!("/api/tokens/{id}/revoke");
    assert_eq!(c.req("POST", &revoke, Some(&olga), None, None).status, 403);
    assert_eq!(c.req("POST", &revoke, Some(&olga), me, None).status, 200);
    assert_eq!(c.req("POST", &revoke, Some(&olga), me, None).status, 409);
    let deadline = Instant::now() + Duration::from_secs(3);
    while hello(&bearer) != 401 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(hello(&bearer), 401, "a revoked token is refused");
    // An operator's token (every permission) is not this page's to revoke.
    let (code, _, err) = ws.run(&["tokens", "create", "--operator", "ci-bot"]);
    assert_eq!(code, 0, "{err}");
    let rows = body(&c.req("GET", "/api/tokens", Some(&olga), None, None));
    let operator = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "operator")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.req(
        "POST",
        &format!("/api/tokens/{operator}/revoke"),
        Some(&olga),
        me,
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);

    // Runs: none yet; an unknown one is 404; stopping needs a reason.
    let runs = c.req("GET", "/api/runs", Some(&vera), None, None);
    assert_eq!((runs.status, body(&runs)), (200, json!([])));
    assert_eq!(
        c.req("GET", "/api/runs/nope", Some(&vera), None, None)
            .status,
        404
    );
    let stop = |why: Value| c.req("POST", "/api/runs/nope/stop", Some(&olga), me, Some(why));
    assert_eq!(stop(json!({})).status, 400);
    assert_eq!(stop(json!({"why": "test"})).status, 404);
    assert_eq!(
        c.req(
            "POST",
            "/api/runs/nope/stop",
            Some(&vera),
            me,
            Some(json!({"why": "x"}))
        )
        .status,
        403
    );
}

/// The overview counts what the audit holds, by outcome, refusing step and tool, for the
/// window asked (from the per-minute counts, not the audit itself), with approvals, upstreams
/// and the halt; an unknown window is refused.
#[test]
fn the_overview_counts_calls_refusals_and_latency_for_a_window() {
    use crate::util::StdioServer;
    let ws = Ws::new();
    {
        let mut s = StdioServer::start(&ws, &[]);
        s.call(1, "read_file", json!({"path": "README.md"}));
        s.call(2, "read_file", json!({"path": ".env"}));
        s.call(3, "list_dir", json!({}));
        s.call(4, "read_file", json!({"path": "src/hello.txt"}));
    }
    account(&ws, "vera", "viewer", "viewer password 1");
    let (code, _, err) = ws.run(&["halt", "--why", "overview test"]);
    assert_eq!(code, 0, "{err}");
    let c = Console::start(&ws);
    let me = Some(c.origin.as_str());
    let vera = session_of(&c.req(
        "POST",
        "/api/sign-in",
        None,
        me,
        Some(json!({"name": "vera", "password": "viewer password 1"})),
    ));
    assert_eq!(c.req("GET", "/api/overview", None, None, None).status, 401);
    let reply = c.req("GET", "/api/overview?window=15m", Some(&vera), None, None);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let o = body(&reply);
    assert_eq!(o["window"], "15m");
    let total = |outcome: &str| -> i64 {
        o["calls"]["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["by_outcome"][outcome].as_i64().unwrap_or(0))
            .sum()
    };
    assert_eq!((total("ok"), total("refused")), (3, 1), "{o}");
    assert_eq!(o["calls"]["spans"].as_array().unwrap().len(), 1, "{o}");
    let refusal = &o["calls"]["refusals"][0];
    assert_eq!(refusal["calls"], 1, "{o}");
    assert_eq!(refusal["rule"], "confinement", "{o}");
    let read = o["calls"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "read_file")
        .unwrap_or_else(|| panic!("{o}"));
    assert_eq!(read["calls"], 2, "{o}");
    assert!(read["p50_us"].as_i64().unwrap() > 0, "{o}");
    assert_eq!(o["halt"]["halted"], true, "{o}");
    assert_eq!(o["approvals"]["waiting"], 0, "{o}");
    // The operator's halt is not a call.
    assert!(!reply.body.contains("\"tool\":\"halt\""), "{o}");
    for window in ["1h", "6h", "24h", "7d", "30d"] {
        let r = c.req(
            "GET",
            &format!("/api/overview?window={window}"),
            Some(&vera),
            None,
            None,
        );
        assert_eq!(r.status, 200, "{window}: {}", r.body);
    }
    let bad = c.req("GET", "/api/overview?window=1y", Some(&vera), None, None);
    assert_eq!(bad.status, 400, "{}", bad.body);
}

/// A person deciding a waiting write sees the diff against the file as it is now and the
/// session's latest calls; once decided, the call is in the history with who and why.
#[test]
fn a_waiting_write_shows_its_diff_and_the_sessions_calls() {
    use crate::util::StdioServer;
    let ws = Ws::new();
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: writes-need-a-person\n    match: { tool: write_file }\n    action: ask_user\n",
    );
    let mut s = StdioServer::start_rw(&ws);
    s.call(1, "read_file", json!({"path": "src/hello.txt"}));
    s.send_raw(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "src/hello.txt", "content": "hello from a person\n"}}})
        .to_string(),
    );
    account(&ws, "olga", "operator", "operator password 1");
    let c = Console::start(&ws);
    let me = Some(c.origin.as_str());
    let olga = session_of(&c.req(
        "POST",
        "/api/sign-in",
        None,
        me,
        Some(json!({"name": "olga", "password": "operator password 1"})),
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = loop {
        let rows = body(&c.req("GET", "/api/approvals", Some(&olga), None, None));
        if let Some(id) = rows[0]["id"].as_str() {
            break id.to_string();
        }
        assert!(Instant::now() < deadline, "the write never waited");
        std::thread::sleep(Duration::from_millis(100));
    };
    let ctx = c.req(
        "GET",
        &format!("/api/approvals/{id}/context"),
        Some(&olga),
        None,
        None,
    );
    assert_eq!(ctx.status, 200, "{}", ctx.body);
    let ctx = body(&ctx);
    assert_eq!(ctx["detail"]["kind"], "diff", "{ctx}");
    assert_eq!(ctx["detail"]["exists"], true, "{ctx}");
    let diff = ctx["detail"]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-hello from aether") && diff.contains("+hello from a person"),
        "{diff}"
    );
    assert_eq!(ctx["recent"][0]["tool"], "read_file", "{ctx}");
    let unknown = c.req(
        "GET",
        "/api/approvals/nope/context",
        Some(&olga),
        None,
        None,
    );
    assert_eq!(unknown.status, 404);
    let denied = c.req(
        "POST",
        &format!("/api/approvals/{id}/deny"),
        Some(&olga),
        me,
        Some(json!({"why": "not this week"})),
    );
    assert_eq!(denied.status, 200, "{}", denied.body);
    let reply = s.recv(2);
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let file = std::fs::read_to_string(ws.path().join("src/hello.txt")).unwrap();
    assert!(file.starts_with("hello from aether"), "{file}");
    let all = body(&c.req("GET", "/api/approvals?all=true", Some(&olga), None, None));
    let decided = all
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap();
    assert_eq!(
        (decided["state"].as_str(), decided["why"].as_str()),
        (Some("denied"), Some("not this week"))
    );
    assert!(
        decided["decided_by"].as_str().unwrap().contains("olga"),
        "{decided}"
    );
}

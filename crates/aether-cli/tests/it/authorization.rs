//! Aether as its own OAuth 2.1 authorization server (issue 27 §2, `[auth] builtin`): the
//! official Python SDK's OAuth client logs in with a client ID metadata document served over
//! HTTPS, or by dynamic client registration when it is on, a person consenting on Aether's
//! page with a console account; refresh tokens rotate (a used one presented again ends the
//! grant), revocation ends a grant on /mcp within a second, and the authorization endpoint
//! refuses what it must (unknown clients and redirect URIs on a page of its own, never by
//! redirect; no PKCE; another resource; a code used twice).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::oauth::{audit_rows, free_port, read_hello};
use crate::util::*;

const REDIRECT: &str = "http://127.0.0.1:33418/callback";
const PASSWORD: &str = "alice's long password";

/// The HTTPS server of a client ID metadata document (tests/peers/cimd_server.py).
struct Documents {
    _child: Killed,
    client_id: String,
    port: u16,
    ca: String,
}

impl Documents {
    fn start(peers: &Path, dir: &Path) -> Documents {
        let (child, started) = spawn_announcing(
            Command::new(peers.join("venv/bin/python"))
                .arg(repo_root().join("tests/peers/cimd_server.py"))
                .args([dir.to_str().unwrap(), REDIRECT])
                .stdin(Stdio::piped())
                .stderr(Stdio::null()),
        );
        Documents {
            _child: child,
            client_id: started["client_id"].as_str().unwrap().into(),
            port: started["port"].as_u64().unwrap() as u16,
            ca: started["ca"].as_str().unwrap().into(),
        }
    }
}

/// Aether on `port`, its own authorization server, with the console account alice.
fn serve(ws: &Ws, port: u16, registration: bool, env: &[(&str, &str)]) -> HttpServer {
    configure(ws, port, registration, &[]);
    HttpServer::start_with(ws, &format!("127.0.0.1:{port}"), &[], env)
}

/// The configuration (Aether on `port` its own authorization server) and the console account
/// alice, in the store `extra` names (`--store URL`) or the workspace's.
fn configure(ws: &Ws, port: u16, registration: bool, extra: &[&str]) {
    ws.write(
        "aether.toml",
        &format!(
            r#"[roots.workspace]
path = "."
mode = "rw"

[auth]
builtin = true
resource = "http://127.0.0.1:{port}/mcp"
registration = {registration}

[auth.scopes]
"mcp:tools" = {{ agent = "default" }}
"mcp:read" = {{ agent = "default", tools = ["read_file"] }}
"#
        ),
    );
    let mut create = aether()
        .args(["accounts", "create", "alice", "--role", "operator"])
        .args(extra)
        .current_dir(ws.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(create.stdin.take().unwrap(), "{PASSWORD}").unwrap();
    assert!(create.wait().unwrap().success());
}

/// The Python SDK's OAuth client, consenting as alice: its report, or its failure.
fn log_in(peers: &Path, url: &str, extra: &[&str]) -> Result<Value, String> {
    let out = Command::new(peers.join("venv/bin/python"))
        .arg(repo_root().join("tests/peers/oauth_client.py"))
        .arg(url)
        .args(["--consent", &format!("alice:{PASSWORD}")])
        .args(["--call", "read_file", r#"{"path":"src/hello.txt"}"#])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    match out.status.code() {
        Some(0) => Ok(serde_json::from_str(stdout.trim()).unwrap()),
        _ => Err(format!(
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// The S256 code challenge of `verifier` (RFC 7636).
fn challenge_of(verifier: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// The `code` of an authorization response's redirect.
fn code_in(location: &str) -> String {
    url::Url::parse(location)
        .unwrap_or_else(|e| panic!("{location:?}: {e}"))
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("no code in {location:?}"))
}

/// A refresh of `token` by `client` at `addr`'s token endpoint; the reply.
fn refreshed(addr: &str, token: &str, client: &str) -> HttpReply {
    post_form(
        addr,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", token),
            ("client_id", client),
        ],
        false,
    )
}

/// A form POST to Aether; the reply.
fn post_form(addr: &str, path: &str, form: &[(&str, &str)], origin: bool) -> HttpReply {
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let origin_value = format!("http://{addr}");
    let mut headers = vec![
        ("Host", addr),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    if origin {
        headers.push(("Origin", &origin_value));
    }
    http(addr, "POST", path, &headers, body.as_bytes())
}

fn json_of(reply: &HttpReply) -> Value {
    serde_json::from_str(&reply.body).unwrap_or(Value::Null)
}

/// `/mcp` refuses `token` within two seconds (a revoked grant is seen within one).
fn refused_soon(addr: &str, token: &str) -> HttpReply {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let reply = read_hello(addr, token);
        if reply.status == 401 || Instant::now() > deadline {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_python_sdk_logs_in_to_aether_itself_with_a_client_metadata_document() {
    let Some(peers) = peers("authorization_cimd") else {
        return;
    };
    let ws = Ws::new();
    let docs = Documents::start(&peers, ws.path());
    let port = free_port();
    // Aether trusts the test's CA for the document's HTTPS.
    let srv = serve(&ws, port, false, &[("SSL_CERT_FILE", &docs.ca)]);
    let addr = srv.addr.clone();
    // The metadata names the built-in server, and the resource points at it.
    let meta = http(
        &addr,
        "GET",
        "/.well-known/oauth-authorization-server",
        &[("Host", &addr)],
        b"",
    );
    let meta: Value = serde_json::from_str(&meta.body).unwrap();
    assert_eq!(meta["issuer"], format!("http://127.0.0.1:{port}"));
    assert_eq!(
        meta["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    assert_eq!(meta["client_id_metadata_document_supported"], true);
    assert!(meta.get("registration_endpoint").is_none(), "{meta}");
    let prm = http(
        &addr,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        &[("Host", &addr)],
        b"",
    );
    assert!(
        prm.body.contains(&format!("\"http://127.0.0.1:{port}\"")),
        "{}",
        prm.body
    );

    let report = log_in(
        &peers,
        &srv.url(),
        &["--client-metadata-url", &docs.client_id],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report["result"].to_string().contains("hello from aether"),
        "{report}"
    );
    assert_eq!(report["client_id"], docs.client_id.as_str(), "{report}");
    let rows = audit_rows(&ws);
    let row = rows.iter().find(|r| r["tool"] == "read_file").unwrap();
    assert_eq!(row["subject"], "alice", "{row}");
    assert_eq!(row["agent"], "default", "{row}");

    // Documents that do not name themselves, or that redirect, are refused on a page of
    // Aether's own (no redirect to the client).
    for path in ["other.json", "redirect.json", "missing.json"] {
        let query = format!(
            "/oauth/authorize?response_type=code&client_id=https%3A%2F%2F127.0.0.1%3A{}%2F{path}&redirect_uri={}&code_challenge={}&code_challenge_method=S256",
            docs.port,
            url::form_urlencoded::byte_serialize(REDIRECT.as_bytes()).collect::<String>(),
            "a".repeat(43)
        );
        let reply = http(&addr, "GET", &query, &[("Host", &addr)], b"");
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert!(reply.header("location").is_none(), "{path}");
    }
    // Registration is off: the SDK, given no metadata URL, cannot register.
    let failed = log_in(&peers, &srv.url(), &[]).expect_err("no registration endpoint");
    assert!(!failed.is_empty());
    let reply = post_form(&addr, "/oauth/register", &[], false);
    assert_eq!(reply.status, 403, "{}", reply.body);
    let (code, out, err) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn refresh_tokens_rotate_and_a_reused_or_revoked_one_ends_its_grant_everywhere() {
    let Some(peers) = peers("authorization_refresh") else {
        return;
    };
    let ws = Ws::new();
    let port = free_port();
    let srv = serve(&ws, port, true, &[]);
    let addr = srv.addr.clone();
    // Dynamic client registration, on here: the SDK registers itself.
    let report = log_in(&peers, &srv.url(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let client_id = report["client_id"].as_str().unwrap().to_string();
    let first_access = report["access_token"].as_str().unwrap().to_string();
    let first_refresh = report["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(read_hello(&addr, &first_access).status, 200);

    // A refresh: a new pair; the old refresh token is used up.
    let reply = refreshed(&addr, &first_refresh, &client_id);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let second = json_of(&reply);
    let second_access = second["access_token"].as_str().unwrap().to_string();
    let second_refresh = second["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(second_refresh, first_refresh);
    assert_eq!(read_hello(&addr, &second_access).status, 200);
    // Asking for a wider scope is refused.
    let reply = post_form(
        &addr,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &second_refresh),
            ("client_id", &client_id),
            ("scope", "mcp:tools mcp:admin"),
        ],
        false,
    );
    assert_eq!(json_of(&reply)["error"], "invalid_scope", "{}", reply.body);
    // The first refresh token again: someone holds a copy, so the whole grant ends — the
    // access tokens it gave stop working on /mcp.
    let reply = refreshed(&addr, &first_refresh, &client_id);
    assert_eq!(json_of(&reply)["error"], "invalid_grant", "{}", reply.body);
    let refused = refused_soon(&addr, &second_access);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(
        refused
            .header("www-authenticate")
            .unwrap_or_default()
            .contains("invalid_token")
    );

    // A new login; its access token revoked (RFC 7009) ends it too.
    let report = log_in(&peers, &srv.url(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let access = report["access_token"].as_str().unwrap().to_string();
    let refresh = report["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(read_hello(&addr, &access).status, 200);
    let reply = post_form(&addr, "/oauth/revoke", &[("token", &access)], false);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(refused_soon(&addr, &access).status, 401);
    let reply = refreshed(&addr, &refresh, &client_id);
    assert_eq!(json_of(&reply)["error"], "invalid_grant", "{}", reply.body);
    // The operator sees the grants and revokes one from the command line (audited).
    let report = log_in(&peers, &srv.url(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let access = report["access_token"].as_str().unwrap().to_string();
    assert_eq!(read_hello(&addr, &access).status, 200);
    let (code, out, err) = ws.run(&["oauth", "grants", "--account", "alice", "--json"]);
    assert_eq!(code, 0, "{err}");
    let grants: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let live: Vec<&Value> = grants.iter().filter(|g| g["state"] == "live").collect();
    assert_eq!(live.len(), 1, "{out}");
    assert_eq!(live[0]["client_id"], report["client_id"], "{out}");
    let grant = live[0]["grant"].as_str().unwrap();
    // Ids people type are hex: never taken for an option (a base64 one began with "-" once in
    // 64 grants). One that does begin so is still read as an id.
    assert!(
        grant.len() == 32 && grant.chars().all(|c| c.is_ascii_hexdigit()),
        "{grant}"
    );
    let (code, _, err) = ws.run(&["oauth", "revoke", "-kNotAGrant", "--why", "typo"]);
    assert_ne!(code, 0);
    assert!(err.contains("no grant has the id \"-kNotAGrant\""), "{err}");
    let (code, out, err) = ws.run(&["oauth", "revoke", grant, "--why", "lost laptop"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(refused_soon(&addr, &access).status, 401);
    assert!(
        audit_rows(&ws)
            .iter()
            .any(|r| r["tool"] == "oauth.revoke" || r.to_string().contains("oauth.revoke")),
        "the revocation is audited"
    );
    let (code, _, err) = ws.run(&["oauth", "revoke", "no-such-grant", "--why", "x"]);
    assert_ne!(code, 0);
    assert!(err.contains("no grant"), "{err}");
    // A change to the account (here its role; a password reset or a removal alike) ends the
    // grants its person gave, as it ends their console sessions.
    let report = log_in(&peers, &srv.url(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let access = report["access_token"].as_str().unwrap().to_string();
    assert_eq!(read_hello(&addr, &access).status, 200);
    let (code, _, err) = ws.run(&["accounts", "role", "alice", "admin"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(refused_soon(&addr, &access).status, 401);
    // An unknown token is revoked quietly (RFC 7009 §2.2).
    let reply = post_form(&addr, "/oauth/revoke", &[("token", "nothing-known")], false);
    assert_eq!(reply.status, 200);
}

#[test]
fn the_authorization_endpoint_refuses_what_it_must() {
    let Some(_peers) = peers("authorization_refusals") else {
        return;
    };
    let ws = Ws::new();
    let port = free_port();
    let srv = serve(&ws, port, true, &[]);
    let addr = srv.addr.clone();
    let reply = http(
        &addr,
        "POST",
        "/oauth/register",
        &[("Host", &addr), ("Content-Type", "application/json")],
        format!(r#"{{"client_name":"<b>bold</b> app","redirect_uris":["{REDIRECT}"]}}"#).as_bytes(),
    );
    assert_eq!(reply.status, 201, "{}", reply.body);
    let client = json_of(&reply)["client_id"].as_str().unwrap().to_string();
    for bad in ["http://evil.example/cb", "javascript:alert(1)"] {
        let reply = http(
            &addr,
            "POST",
            "/oauth/register",
            &[("Host", &addr), ("Content-Type", "application/json")],
            format!(r#"{{"redirect_uris":["{bad}"]}}"#).as_bytes(),
        );
        assert_eq!(
            json_of(&reply)["error"],
            "invalid_redirect_uri",
            "{bad}: {}",
            reply.body
        );
    }
    let verifier = "v".repeat(50);
    let challenge = challenge_of(&verifier);
    let authorize = |pairs: &[(&str, &str)]| {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        http(
            &addr,
            "GET",
            &format!("/oauth/authorize?{query}"),
            &[("Host", &addr)],
            b"",
        )
    };
    let good = [
        ("response_type", "code"),
        ("client_id", client.as_str()),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "s1"),
    ];
    // The consent page names the client (escaped) and what each scope grants.
    let page = authorize(&good);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("&lt;b&gt;bold&lt;/b&gt; app"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<b>bold</b>"));
    assert!(page.body.contains("mcp:tools"), "{}", page.body);
    assert!(
        page.header("content-security-policy")
            .unwrap_or_default()
            .contains("frame-ancestors 'none'")
    );
    // Unknown client, or a redirect URI it did not register: a page, never a redirect.
    fn with<'a>(good: &[(&'a str, &'a str)], key: &str, value: &'a str) -> Vec<(&'a str, &'a str)> {
        good.iter()
            .map(|(k, v)| if *k == key { (*k, value) } else { (*k, *v) })
            .collect()
    }
    for (key, value) in [
        ("client_id", "made-up"),
        ("redirect_uri", "http://127.0.0.1:9/elsewhere"),
    ] {
        let reply = authorize(&with(&good, key, value));
        assert_eq!(reply.status, 400, "{key}");
        assert!(reply.header("location").is_none(), "{key}");
    }
    // No PKCE, the plain method, another resource, an unknown scope: said on a page, never
    // by a redirect before the person has acted (the client is anyone's: an open redirect).
    for (pairs, error) in [
        (
            with(&good, "code_challenge_method", "plain"),
            "invalid_request",
        ),
        (
            good.iter()
                .copied()
                .filter(|(k, _)| *k != "code_challenge")
                .collect(),
            "invalid_request",
        ),
        (
            [
                good.to_vec(),
                vec![("resource", "http://other.example/mcp")],
            ]
            .concat(),
            "invalid_target",
        ),
        (
            [good.to_vec(), vec![("scope", "mcp:nothing")]].concat(),
            "invalid_scope",
        ),
    ] {
        let reply = authorize(&pairs);
        assert_eq!(reply.status, 400, "{error}: {}", reply.head);
        assert!(reply.header("location").is_none(), "{error}");
        assert!(reply.body.contains(error), "{error}: {}", reply.body);
    }
    // A missing response_type too (an attacker's client listing its own redirect URI gets no
    // redirect out of this server).
    let reply = authorize(
        &good
            .iter()
            .copied()
            .filter(|(k, _)| *k != "response_type")
            .collect::<Vec<_>>(),
    );
    assert_eq!(reply.status, 400);
    assert!(reply.header("location").is_none());
    // An account that may not let a client act as an agent (a viewer) cannot consent.
    let mut create = aether()
        .args(["accounts", "create", "victor", "--role", "viewer"])
        .current_dir(ws.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(create.stdin.take().unwrap(), "{PASSWORD}").unwrap();
    assert!(create.wait().unwrap().success());
    let mut form: Vec<(&str, &str)> = good.to_vec();
    form.extend([
        ("name", "victor"),
        ("password", PASSWORD),
        ("decision", "allow"),
    ]);
    let reply = post_form(&addr, "/oauth/authorize", &form, true);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.body.contains("manage_agents"), "{}", reply.body);
    assert!(reply.header("location").is_none());
    // The form: a wrong password stays on the page; without Origin it is refused; allowed,
    // a code comes back with the state and this issuer.
    let mut form: Vec<(&str, &str)> = good.to_vec();
    form.extend([
        ("name", "alice"),
        ("password", "wrong"),
        ("decision", "allow"),
    ]);
    let reply = post_form(&addr, "/oauth/authorize", &form, true);
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.header("location").is_none());
    let mut form: Vec<(&str, &str)> = good.to_vec();
    form.extend([
        ("name", "alice"),
        ("password", PASSWORD),
        ("decision", "allow"),
    ]);
    assert_eq!(
        post_form(&addr, "/oauth/authorize", &form, false).status,
        403
    );
    let reply = post_form(&addr, "/oauth/authorize", &form, true);
    let location = reply.header("location").unwrap_or_default();
    assert!(
        location.contains("state=s1") && location.contains("iss=http"),
        "{location}"
    );
    let code: String = code_in(&location);
    // Denied: access_denied.
    let mut denied: Vec<(&str, &str)> = good.to_vec();
    denied.push(("decision", "deny"));
    let reply = post_form(&addr, "/oauth/authorize", &denied, true);
    assert!(
        reply
            .header("location")
            .unwrap_or_default()
            .contains("error=access_denied")
    );

    // The token endpoint: a wrong verifier spends the code; a code used twice is refused.
    let redeem = |code: &str, verifier: &str| {
        post_form(
            &addr,
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("client_id", &client),
                ("redirect_uri", REDIRECT),
                ("code_verifier", verifier),
            ],
            false,
        )
    };
    let reply = redeem(&code, &verifier);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let token = json_of(&reply)["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(read_hello(&addr, &token).status, 200);
    let again = redeem(&code, &verifier);
    assert_eq!(json_of(&again)["error"], "invalid_grant", "{}", again.body);
    // ... and the grant the code started ends with it.
    assert_eq!(refused_soon(&addr, &token).status, 401);
    let reply = post_form(&addr, "/oauth/authorize", &form, true);
    let location = reply.header("location").unwrap_or_default();
    let code: String = code_in(&location);
    let wrong = redeem(&code, &"w".repeat(50));
    assert_eq!(json_of(&wrong)["error"], "invalid_grant");
    assert_eq!(json_of(&redeem(&code, &verifier))["error"], "invalid_grant");
    // A grant type it does not do.
    let reply = post_form(&addr, "/oauth/token", &[("grant_type", "password")], false);
    assert_eq!(json_of(&reply)["error"], "unsupported_grant_type");
}

/// A code for `client` (registered at `addr`), consented to by alice on `addr`'s form.
fn consent(addr: &str, client: &str, challenge: &str) -> String {
    let form = [
        ("response_type", "code"),
        ("client_id", client),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("name", "alice"),
        ("password", PASSWORD),
        ("decision", "allow"),
    ];
    let reply = post_form(addr, "/oauth/authorize", &form, true);
    let location = reply.header("location").unwrap_or_default();
    code_in(&location)
}

#[test]
fn two_replicas_on_postgresql_share_codes_grants_refresh_tokens_and_revocations() {
    let pg = crate::replicas::PgSchema::new("authz");
    let ws = Ws::new();
    let port = free_port();
    configure(&ws, port, true, &["--store", &pg.url]);
    let a = HttpServer::start_with(
        &ws,
        &format!("127.0.0.1:{port}"),
        &["--store", &pg.url],
        &[],
    );
    let b = HttpServer::start(&ws, &["--store", &pg.url]);
    // Registered on a, consented on a, redeemed on b.
    let reply = http(
        &a.addr,
        "POST",
        "/oauth/register",
        &[("Host", &a.addr), ("Content-Type", "application/json")],
        format!(r#"{{"redirect_uris":["{REDIRECT}"]}}"#).as_bytes(),
    );
    let client = json_of(&reply)["client_id"].as_str().unwrap().to_string();
    let verifier = "r".repeat(64);
    let challenge = challenge_of(&verifier);
    let code = consent(&a.addr, &client, &challenge);
    let reply = post_form(
        &b.addr,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("client_id", &client),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &verifier),
        ],
        false,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    let tokens = json_of(&reply);
    let access = tokens["access_token"].as_str().unwrap().to_string();
    // Both replicas sign and check with the key both derive from the vault key.
    assert_eq!(read_hello(&a.addr, &access).status, 200);
    assert_eq!(read_hello(&b.addr, &access).status, 200);
    // Refreshed on a; the old refresh token is spent on b too.
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    let reply = refreshed(&a.addr, &refresh, &client);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let renewed = json_of(&reply)["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    // Revoked on b: a refuses it within a second or so.
    let reply = post_form(&b.addr, "/oauth/revoke", &[("token", &renewed)], false);
    assert_eq!(reply.status, 200);
    assert_eq!(refused_soon(&a.addr, &renewed).status, 401);
    assert_eq!(refused_soon(&a.addr, &access).status, 401);
    // The operator's list, from the shared store, says so.
    let (code, out, err) = ws.run(&[
        "oauth",
        "grants",
        "--account",
        "alice",
        "--json",
        "--store",
        &pg.url,
    ]);
    assert_eq!(code, 0, "{err}");
    let grants: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(grants.len(), 1, "{out}");
    assert!(
        grants[0]["state"].as_str().unwrap().starts_with("revoked"),
        "{out}"
    );
}

//! Signing in to the console through an OpenID provider (issue 27 §5, `[console.oidc]`): a
//! real provider (`oidc-provider`, tests/peers/oidc_issuer.mjs), the browser's round trip
//! played over raw HTTP with a cookie jar, the role taken from the ID token's `groups` claim;
//! a person the claim gives no role, a forged state and a password for the provider's
//! account are refused.

use std::collections::HashMap;

use serde_json::Value;

use crate::oauth::{Issuer, free_port};
use crate::util::*;

/// Aether on `port` whose console signs people in through `issuer`, with `roles`.
fn serve(ws: &Ws, port: u16, issuer: &str, roles: &str) -> HttpServer {
    ws.write(
        "aether.toml",
        &format!(
            r#"[agents.default]
mcp_servers = ["workspace"]
rate = "120/min"
rates = {{ read_file = "30/min" }}
concurrent = 4

[console.oidc]
issuer = "{issuer}"
client_id = "aether-console"
redirect_uri = "http://127.0.0.1:{port}/console/oidc/callback"
name = "Test IdP"
roles = {{ {roles} }}
"#
        ),
    );
    HttpServer::start_at(ws, &format!("127.0.0.1:{port}"), &[])
}

/// The `name=value` of every `Set-Cookie` in a reply's head.
fn set_cookies(reply: &HttpReply) -> Vec<(String, String)> {
    reply
        .head
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case("set-cookie").then_some(v)?;
            let pair = v.trim().split(';').next()?;
            let (name, value) = pair.split_once('=')?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

/// A browser's round trip: from the console's start, through the provider's redirects (its
/// cookies kept), to the reply of Aether's callback.
fn round_trip(aether: &str, issuer: &Issuer) -> HttpReply {
    let mut jar: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut url = format!("http://{aether}/console/oidc");
    for _ in 0..20 {
        let u = url::Url::parse(&url).unwrap();
        let host = format!("{}:{}", u.host_str().unwrap(), u.port().unwrap());
        let path = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        let cookies: String = jar
            .get(&host)
            .map(|c| {
                c.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        let mut headers = vec![("Host", host.as_str())];
        if !cookies.is_empty() {
            headers.push(("Cookie", cookies.as_str()));
        }
        let reply = http(&host, "GET", &path, &headers, b"");
        for (k, v) in set_cookies(&reply) {
            jar.entry(host.clone()).or_default().insert(k, v);
        }
        // Aether's callback answers: that is the end of the trip.
        if host == aether && u.path() == "/console/oidc/callback" {
            return reply;
        }
        let location = reply
            .header("location")
            .unwrap_or_else(|| panic!("the trip stopped at {url}: {}{}", reply.head, reply.body));
        url = u.join(&location).unwrap().to_string();
        assert!(
            url.starts_with(&format!("http://{aether}")) || url.starts_with(&issuer.url),
            "{url}"
        );
    }
    panic!("the sign-in never came back to Aether");
}

#[test]
fn the_console_signs_people_in_through_the_organizations_provider_with_their_role() {
    let Some(peers) = peers("console_sso") else {
        return;
    };
    let ws = Ws::new();
    let port = free_port();
    let callback = format!("http://127.0.0.1:{port}/console/oidc/callback");
    let issuer = Issuer::start_with(
        &peers,
        &[],
        &[
            "--console-redirect",
            &callback,
            "--groups",
            "staff aether-ops",
        ],
    );
    let srv = serve(
        &ws,
        port,
        &issuer.url,
        r#""aether-admins" = "admin", "aether-ops" = "operator", "staff" = "viewer""#,
    );
    let addr = srv.addr.clone();
    // The sign-in form learns of the provider.
    let methods = http(
        &addr,
        "GET",
        "/api/sign-in/methods",
        &[("Host", &addr)],
        b"",
    );
    let methods: Value = serde_json::from_str(&methods.body).unwrap();
    assert_eq!(methods["oidc"]["name"], "Test IdP", "{methods}");

    let reply = round_trip(&addr, &issuer);
    let location = reply.header("location").unwrap_or_default();
    let key = location
        .strip_prefix("/console#signed-in=")
        .unwrap_or_else(|| panic!("{}{}", reply.head, reply.body))
        .to_string();
    let session = set_cookies(&reply)
        .into_iter()
        .find(|(k, _)| k == "aether_console")
        .map(|(_, v)| v)
        .expect("a console session cookie");
    let cookie = format!("aether_console={session}");
    let me = http(
        &addr,
        "GET",
        "/api/session",
        &[("Host", &addr), ("Cookie", &cookie), ("X-Aether-Key", &key)],
        b"",
    );
    assert_eq!(me.status, 200, "{}", me.body);
    let me: Value = serde_json::from_str(&me.body).unwrap();
    // The most privileged role the groups map to.
    assert_eq!(me["name"], "sso.alice", "{me}");
    assert_eq!(me["role"], "operator", "{me}");
    // An operator may read the audit; the account has no password to sign in with.
    let audit = http(
        &addr,
        "GET",
        "/api/audit",
        &[("Host", &addr), ("Cookie", &cookie), ("X-Aether-Key", &key)],
        b"",
    );
    assert_eq!(audit.status, 200, "{}", audit.body);
    // The agents' rate limits are on the console's agents page (from /api/agents).
    let agents = http(
        &addr,
        "GET",
        "/api/agents",
        &[("Host", &addr), ("Cookie", &cookie), ("X-Aether-Key", &key)],
        b"",
    );
    let agents: Value = serde_json::from_str(&agents.body).unwrap();
    let rates = &agents[0]["rates"];
    assert_eq!(rates["rate"], "120/min", "{agents}");
    assert_eq!(rates["per_tool"]["read_file"], "30/min", "{agents}");
    assert_eq!(rates["concurrent"], 4, "{agents}");
    let origin = format!("http://{addr}");
    let password = http(
        &addr,
        "POST",
        "/api/sign-in",
        &[
            ("Host", &addr),
            ("Origin", &origin),
            ("Content-Type", "application/json"),
        ],
        br#"{"name":"sso.alice","password":"anything at all"}"#,
    );
    assert_eq!(password.status, 401, "{}", password.body);

    // A callback whose state is not the one this browser started is refused.
    let forged = http(
        &addr,
        "GET",
        "/console/oidc/callback?code=x&state=forged",
        &[("Host", &addr)],
        b"",
    );
    assert_eq!(forged.status, 400, "{}", forged.body);
    assert!(
        set_cookies(&forged)
            .iter()
            .all(|(k, _)| k != "aether_console")
    );

    // The same person, where their groups map to no role: refused, no session.
    drop(srv);
    let srv = serve(&ws, port, &issuer.url, r#""aether-admins" = "admin""#);
    let reply = round_trip(&srv.addr, &issuer);
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.body.contains("no role in Aether"), "{}", reply.body);
    assert!(
        set_cookies(&reply)
            .iter()
            .all(|(k, v)| k != "aether_console" || v.is_empty())
    );
}

#[test]
fn in_a_real_browser_the_providers_button_signs_in_and_the_page_keeps_its_key() {
    let Some(peers) = peers("console_sso in a browser") else {
        return;
    };
    if !std::path::Path::new("/usr/bin/chromium").exists() {
        eprintln!(
            "console_sso in a browser: skipped; no /usr/bin/chromium (scripts/test.sh installs it)"
        );
        return;
    }
    let ws = Ws::new();
    let port = free_port();
    let callback = format!("http://127.0.0.1:{port}/console/oidc/callback");
    let issuer = Issuer::start_with(&peers, &[], &["--console-redirect", &callback]);
    let srv = serve(&ws, port, &issuer.url, r#""aether-admins" = "admin""#);
    let shots = repo_root().join("target/screenshots/sso");
    let mut browser =
        crate::browser::Browser::open(&peers, &format!("http://{}", srv.addr), &shots);
    let signed_in = browser.ok(serde_json::json!({"op": "sign_in_with_provider"}));
    assert_eq!(signed_in["who"], "sso.alice (admin)", "{signed_in}");
    // The page key left the address once kept.
    assert!(
        signed_in["url"].as_str().unwrap().ends_with("/console"),
        "{signed_in}"
    );
    browser.ok(serde_json::json!({"op": "goto", "page": "agents"}));
    let limits = browser.ok(serde_json::json!({"op": "text", "selector": "[data-rates=default]"}));
    assert_eq!(
        limits, "rate limits: 120/min in all; read_file 30/min; 4 at once",
        "{limits}"
    );
    let problems = browser.ok(serde_json::json!({"op": "problems"}));
    assert_eq!(problems, serde_json::json!([]), "{problems}");
}

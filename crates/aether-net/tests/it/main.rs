//! The network tools against a real HTTP server on loopback, with names answered by an
//! injected resolver: what the egress gate lets through, and every way it refuses.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use aether_net::Resolve;
use aether_policy::AgentProfile;
use aether_policy::config::Limits;
use aether_tools_core::{CallContext, NoClient, Roots, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Names answered from a table; anything else is "not found".
struct FakeDns(HashMap<String, Vec<IpAddr>>);

#[async_trait]
impl Resolve for FakeDns {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        let host = host
            .strip_suffix('.')
            .expect("names are looked up fully qualified (with the root's dot)");
        self.0.get(host).cloned().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such host (test resolver)")
        })
    }
}

fn dns(entries: &[(&str, &[&str])]) -> Arc<dyn Resolve> {
    Arc::new(FakeDns(
        entries
            .iter()
            .map(|(name, ips)| {
                (
                    name.to_string(),
                    ips.iter().map(|ip| ip.parse().unwrap()).collect(),
                )
            })
            .collect(),
    ))
}

/// The port a request came to, from its Host header.
fn port_of(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.rsplit_once(':'))
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| "80".into())
}

/// A test server on 127.0.0.1 with a few routes; returns its port.
async fn server() -> u16 {
    let app = Router::new()
        .route("/hello", get(|| async { "hello from the test server" }))
        .route(
            "/echo",
            any(|headers: HeaderMap, body: String| async move {
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .map(|v| v.to_str().unwrap_or("").to_string())
                    .unwrap_or_default();
                format!("auth=[{auth}] body=[{body}]")
            }),
        )
        .route(
            "/to-metadata",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "http://169.254.169.254/latest/meta-data")],
                )
            }),
        )
        .route(
            "/to-hello",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/hello")]) }),
        )
        .route(
            "/to-other-site",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "http://other.test/echo")],
                )
            }),
        )
        .route(
            "/to-other-307",
            any(|headers: HeaderMap| async move {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(
                        header::LOCATION,
                        format!("http://other.test:{}/echo", port_of(&headers)),
                    )],
                )
            }),
        )
        .route(
            "/headers",
            get(|headers: HeaderMap| async move {
                let mut names: Vec<String> = headers.keys().map(|k| k.to_string()).collect();
                names.sort();
                names.join(",")
            }),
        )
        .route(
            "/to-other-headers",
            get(|headers: HeaderMap| async move {
                (
                    StatusCode::FOUND,
                    [(
                        header::LOCATION,
                        format!("http://other.test:{}/headers", port_of(&headers)),
                    )],
                )
            }),
        )
        .route(
            "/loop",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]) }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route("/big", get(|| async { "x".repeat(3 << 20) }))
        .route(
            "/binary",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/octet-stream")],
                    vec![0u8, 159, 146, 150, 255],
                )
                    .into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

fn agent(domains: &[&str], private: bool) -> AgentProfile {
    AgentProfile {
        allowed_domains: domains.iter().map(|d| d.to_string()).collect(),
        allow_private_network: private,
        ..AgentProfile::with_groups("researcher", &["research"])
    }
}

fn cx(agent: AgentProfile) -> CallContext {
    CallContext {
        call_id: "test-call".into(),
        session: "test-session".into(),
        agent: Arc::new(agent),
        roots: Arc::new(Roots::open(&[]).unwrap()),
        limits: Arc::new(Limits::default()),
        cancel: CancellationToken::new(),
        client: Arc::new(NoClient),
        ledger: Arc::new(aether_tools_core::NoLedger),
        destinations: Arc::new(aether_tools_core::AnyDestination),
        paths: Arc::new(aether_tools_core::AnyPath),
        receipt: None,
        subject: None,
        scope: None,
        trace: None,
    }
}

/// A destination rule: `other.test` is denied mid-call.
struct DenyOther;

impl aether_tools_core::DestinationCheck for DenyOther {
    fn check(&self, _url: &str, host: &str) -> Result<(), ToolError> {
        if host == "other.test" {
            return Err(ToolError::denied("rules", "other.test is denied by a rule"));
        }
        Ok(())
    }
}

fn tool(resolver: Arc<dyn Resolve>, name: &str) -> Arc<dyn Tool> {
    aether_net::tools(resolver)
        .into_iter()
        .find(|t| t.def().name == name)
        .unwrap()
}

async fn request(
    resolver: Arc<dyn Resolve>,
    agent: AgentProfile,
    args: Value,
) -> Result<ToolOutput, ToolError> {
    tool(resolver, "http_request").call(cx(agent), args).await
}

fn structured(out: &ToolOutput) -> &Value {
    out.structured.as_ref().expect("structured output")
}

fn denied_rule(result: &Result<ToolOutput, ToolError>) -> &'static str {
    match result {
        Err(ToolError::Denied { rule, .. }) => rule,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_allowed_host_is_reached_at_the_address_it_was_vetted_for() {
    let port = server().await;
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    let out = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/hello")}),
    )
    .await
    .unwrap();
    let v = structured(&out);
    assert_eq!(v["status"], 200);
    assert_eq!(v["body"], "hello from the test server");
    // POST with a body, and a relative redirect followed.
    let out = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/echo"), "method": "POST", "body": "ping"}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&out)["body"], "auth=[] body=[ping]");
    let out = request(
        resolver,
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/to-hello")}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&out)["body"], "hello from the test server");
    assert_eq!(structured(&out)["redirects"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn localhost_is_this_machines_loopback_whatever_the_resolver_says() {
    let port = server().await;
    // A resolver that knows no name at all (the system's has no "localhost." either).
    let nobody = dns(&[]);
    for host in ["localhost", "app.localhost"] {
        let url = format!("http://{host}:{port}/hello");
        let out = request(nobody.clone(), agent(&[host], true), json!({"url": url}))
            .await
            .unwrap();
        assert_eq!(structured(&out)["body"], "hello from the test server");
        // Loopback all the same: refused to an agent that may not reach private addresses.
        let r = request(nobody.clone(), agent(&[host], false), json!({"url": url})).await;
        assert_eq!(denied_rule(&r), "egress:private-address");
    }
}

#[tokio::test]
async fn private_addresses_are_refused_unless_the_agent_may_reach_them() {
    let port = server().await;
    let url = format!("http://site.test:{port}/hello");
    // The name is allowed, but it resolves to loopback.
    let r = request(
        dns(&[("site.test", &["127.0.0.1"])]),
        agent(&["site.test"], false),
        json!({"url": url}),
    )
    .await;
    assert_eq!(denied_rule(&r), "egress:private-address");
    // Rebinding: a public and a private address in one answer.
    let r = request(
        dns(&[("site.test", &["93.184.216.34", "127.0.0.1"])]),
        agent(&["site.test"], false),
        json!({"url": url}),
    )
    .await;
    assert_eq!(denied_rule(&r), "egress:private-address");
    // IP literals in their many spellings, and metadata addresses.
    for url in [
        "http://127.0.0.1/",
        "http://0x7f.1/",
        "http://2130706433/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00:ec2::254]/",
        "http://10.0.0.1/",
        "http://100.64.0.1/",
    ] {
        let r = request(dns(&[]), agent(&["site.test"], false), json!({"url": url})).await;
        let rule = denied_rule(&r);
        assert!(
            rule == "egress:private-address" || rule == "egress:domain-not-allowed",
            "{url}: {rule}"
        );
    }
}

#[tokio::test]
async fn every_redirect_hop_is_checked_again() {
    let port = server().await;
    let resolver = dns(&[
        ("site.test", &["127.0.0.1"]),
        ("other.test", &["127.0.0.1"]),
    ]);
    // To the metadata service: refused at the hop, even for an agent allowed private ranges
    // only for the site (the metadata address is not in its allowed domains).
    let r = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/to-metadata")}),
    )
    .await;
    let rule = denied_rule(&r);
    assert!(
        rule == "egress:domain-not-allowed" || rule == "egress:private-address",
        "{rule}"
    );
    // To a site that is not allowed.
    let r = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/to-other-site")}),
    )
    .await;
    assert_eq!(denied_rule(&r), "egress:domain-not-allowed");
    // A loop stops at five hops.
    let r = request(
        resolver,
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/loop")}),
    )
    .await;
    assert_eq!(denied_rule(&r), "egress:too-many-redirects");
}

#[tokio::test]
async fn bad_urls_and_headers_get_clear_errors() {
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    for (url, rule) in [
        ("http://user:pw@site.test/", "egress:credentials-in-url"),
        ("file:///etc/passwd", "egress:scheme"),
        ("gopher://site.test/", "egress:scheme"),
        ("not a url", "egress:malformed-url"),
        ("http://elsewhere.test/", "egress:domain-not-allowed"),
    ] {
        let r = request(
            resolver.clone(),
            agent(&["site.test"], true),
            json!({"url": url}),
        )
        .await;
        assert_eq!(denied_rule(&r), rule, "{url}");
        let text = r.unwrap_err().to_string();
        assert!(
            !text.contains("pw"),
            "the refusal repeats a credential: {text}"
        );
    }
    let r = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": "http://site.test/", "headers": {"Host": "metadata.google.internal"}}),
    )
    .await;
    assert!(
        matches!(r, Err(ToolError::InvalidArguments(ref m)) if m.contains("Host")),
        "{r:?}"
    );
    // A name nobody answers.
    let r = request(
        resolver,
        agent(&["nowhere.test"], true),
        json!({"url": "http://nowhere.test/"}),
    )
    .await;
    assert!(
        matches!(r, Err(ToolError::Failed(ref m)) if m.contains("cannot resolve nowhere.test")),
        "{r:?}"
    );
}

#[tokio::test]
async fn answers_are_bounded_in_time_and_size() {
    let port = server().await;
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    let a = || agent(&["site.test"], true);
    let r = request(
        resolver.clone(),
        a(),
        json!({"url": format!("http://site.test:{port}/slow"), "timeout_seconds": 1}),
    )
    .await;
    assert!(
        matches!(r, Err(ToolError::Failed(ref m)) if m.contains("within 1 s")),
        "{r:?}"
    );
    let out = request(
        resolver.clone(),
        a(),
        json!({"url": format!("http://site.test:{port}/big")}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&out)["truncated"], true);
    assert_eq!(structured(&out)["body"].as_str().unwrap().len(), 1 << 20);
    let out = request(
        resolver.clone(),
        a(),
        json!({"url": format!("http://site.test:{port}/binary")}),
    )
    .await
    .unwrap();
    assert_eq!(
        structured(&out)["body"],
        "[5 bytes of binary content, application/octet-stream]"
    );
    // Nothing listening.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = request(
        resolver.clone(),
        a(),
        json!({"url": format!("http://site.test:{closed}/")}),
    )
    .await;
    assert!(
        matches!(r, Err(ToolError::Failed(ref m)) if m.contains("could not connect")),
        "{r:?}"
    );
    // TLS to a plain-HTTP port fails as TLS, clearly.
    let r = request(
        resolver,
        a(),
        json!({"url": format!("https://site.test:{port}/hello")}),
    )
    .await;
    assert!(matches!(r, Err(ToolError::Failed(_))), "{r:?}");
}

#[tokio::test]
async fn a_health_check_reports_status_and_latency() {
    let port = server().await;
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    let out = tool(resolver.clone(), "http_health_check")
        .call(
            cx(agent(&["site.test"], true)),
            json!({"url": format!("http://site.test:{port}/hello")}),
        )
        .await
        .unwrap();
    let v = structured(&out);
    assert_eq!(v["healthy"], true);
    assert_eq!(v["status"], 200);
    let r = tool(resolver, "http_health_check")
        .call(
            cx(agent(&["site.test"], false)),
            json!({"url": format!("http://site.test:{port}/hello")}),
        )
        .await;
    assert_eq!(denied_rule(&r), "egress:private-address");
}

/// Counts lookups: the client must not look a name up again after vetting its address (that
/// second answer could point elsewhere: DNS rebinding).
struct Counting {
    inner: Arc<dyn Resolve>,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Resolve for Counting {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.resolve(host, port).await
    }
}

#[tokio::test]
async fn a_name_is_looked_up_once_per_hop_and_never_by_the_http_client() {
    let port = server().await;
    let counting = Arc::new(Counting {
        inner: dns(&[("site.test", &["127.0.0.1"])]),
        calls: Default::default(),
    });
    let resolver: Arc<dyn Resolve> = counting.clone();
    let out = request(
        resolver.clone(),
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/hello")}),
    )
    .await
    .unwrap();
    assert_eq!(structured(&out)["status"], 200);
    assert_eq!(counting.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // One more lookup for the one redirect hop, none by the client itself.
    request(
        resolver,
        agent(&["site.test"], true),
        json!({"url": format!("http://site.test:{port}/to-hello")}),
    )
    .await
    .unwrap();
    assert_eq!(counting.calls.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn redirects_carry_nothing_of_the_caller_to_another_origin() {
    let port = server().await;
    let resolver = dns(&[
        ("site.test", &["127.0.0.1"]),
        ("other.test", &["127.0.0.1"]),
    ]);
    let both = || agent(&["site.test", "other.test"], true);
    // A 307 to another origin would resend the body: refused.
    let r = request(
        resolver.clone(),
        both(),
        json!({"url": format!("http://site.test:{port}/to-other-307"), "method": "POST",
               "body": "payload", "headers": {"X-Api-Key": "k-123"}}),
    )
    .await;
    assert_eq!(denied_rule(&r), "egress:redirect-body");
    // A 302 to another origin keeps only the headers that describe the request.
    let out = request(
        resolver.clone(),
        both(),
        json!({"url": format!("http://site.test:{port}/to-other-headers"),
               "headers": {"X-Api-Key": "k-123", "Authorization": "Bearer x", "Accept": "text/plain"}}),
    )
    .await
    .unwrap();
    let seen = structured(&out)["body"].as_str().unwrap().to_string();
    assert!(seen.contains("accept"), "{seen}");
    // Every hop carries the mark Aether's listener refuses (an agent cannot call Aether
    // through this tool), and a caller cannot send it or leave it off.
    assert!(seen.contains(aether_policy::egress::EGRESS_MARK), "{seen}");
    let r = request(
        resolver.clone(),
        both(),
        json!({"url": format!("http://site.test:{port}/headers"),
               "headers": {"X-Aether-Egress": "0"}}),
    )
    .await;
    assert!(matches!(r, Err(ToolError::InvalidArguments(_))), "{r:?}");
    assert!(
        !seen.contains("x-api-key") && !seen.contains("authorization"),
        "{seen}"
    );
    // The operator's rules judge every hop.
    let mut cx = cx(both());
    cx.destinations = Arc::new(DenyOther);
    let r = tool(resolver.clone(), "http_request")
        .call(
            cx,
            json!({"url": format!("http://site.test:{port}/to-other-headers")}),
        )
        .await;
    assert_eq!(denied_rule(&r), "rules");
}

#[tokio::test]
async fn a_secret_split_across_the_query_never_leaves() {
    let port = server().await;
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    let r = request(
        resolver,
        agent(&["site.test"], true),
        json!({"url": format!(
            "http://site.test:{port}/hello?a=ghp_Q8vX2mK7pL4nR9tZ3w&b=B6yC1dF5gH0jS7uA2e"
        )}),
    )
    .await;
    assert_eq!(denied_rule(&r), "dlp:github-token");
    let text = r.unwrap_err().to_string();
    assert!(!text.contains("ghp_Q8vX"), "{text}");
}

#[tokio::test]
async fn web_fetch_returns_readable_text_cut_with_a_marker() {
    let app = Router::new()
        .route(
            "/page",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<html><head><title>T</title><style>body{color:red}</style>\
                     <script>var secret = 'do-not-show';</script></head>\
                     <body><h1>Heading</h1><p>First <b>bold</b> paragraph.</p>\
                     <a href=\"/next\">next page</a></body></html>",
                )
            }),
        )
        .route(
            "/long",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "word ".repeat(10_000),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let resolver = dns(&[("site.test", &["127.0.0.1"])]);
    let fetch = tool(resolver.clone(), "web_fetch");
    let out = fetch
        .call(
            cx(agent(&["site.test"], true)),
            json!({"url": format!("http://site.test:{port}/page")}),
        )
        .await
        .unwrap();
    let text = structured(&out)["text"].as_str().unwrap().to_string();
    assert!(
        text.contains("Heading") && text.contains("First") && text.contains("paragraph"),
        "{text}"
    );
    assert!(
        !text.contains("<p>") && !text.contains("color:red") && !text.contains("do-not-show"),
        "{text}"
    );
    let out = fetch
        .call(
            cx(agent(&["site.test"], true)),
            json!({"url": format!("http://site.test:{port}/long"), "max_chars": 1000}),
        )
        .await
        .unwrap();
    let v = structured(&out);
    assert_eq!(v["truncated"], true);
    assert!(v["text"].as_str().unwrap().chars().count() < 1200);
    // The same gate as every network tool.
    let r = fetch
        .call(
            cx(agent(&["site.test"], false)),
            json!({"url": format!("http://site.test:{port}/page")}),
        )
        .await;
    assert_eq!(denied_rule(&r), "egress:private-address");
}

#[tokio::test]
async fn web_search_asks_the_operators_searxng_and_scans_the_query() {
    let app = Router::new().route(
        "/search",
        get(
            |axum::extract::RawQuery(q): axum::extract::RawQuery| async move {
                let q = q.unwrap_or_default();
                assert!(q.contains("format=json"), "{q}");
                axum::Json(json!({"results": [
                    {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language"},
                    {"title": "Docs", "url": "https://docs.rs/", "content": "Crate docs"}
                ]}))
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let searx: url::Url = format!("http://127.0.0.1:{port}/").parse().unwrap();
    let search = aether_net::tools_with(dns(&[]), Some(searx))
        .into_iter()
        .find(|t| t.def().name == "web_search")
        .unwrap();
    // The agent needs no allowed domain for the operator's own engine.
    let out = search
        .call(
            cx(agent(&[], false)),
            json!({"query": "rust language", "max_results": 1}),
        )
        .await
        .unwrap();
    let v = structured(&out);
    assert_eq!(v["results"].as_array().unwrap().len(), 1);
    assert_eq!(v["results"][0]["url"], "https://www.rust-lang.org/");
    // A secret in the query never leaves.
    let r = search
        .call(
            cx(agent(&[], false)),
            json!({"query": "ghp_Q8vX2mK7pL4nR9tZ3wB6yC1dF5gH0jS7uA2e"}),
        )
        .await;
    assert_eq!(denied_rule(&r), "dlp:github-token");
    // Without an engine the tool is not offered.
    let none = aether_net::tools(dns(&[]))
        .into_iter()
        .find(|t| t.def().name == "web_search")
        .unwrap();
    assert!(none.available_to(&agent(&[], false)).is_err());
}

#[test]
fn tools_that_go_where_their_arguments_say_are_not_offered_without_an_allowed_domain() {
    for t in aether_net::tools(dns(&[])) {
        let name = t.def().name.clone();
        let none = t.available_to(&agent(&[], false));
        let some = t.available_to(&agent(&["docs.rs"], false));
        if name == "web_search" {
            // It goes to the operator's engine; here none is configured.
            assert!(none.is_err() && some.is_err(), "{name}");
        } else {
            assert!(none.unwrap_err().contains("no allowed_domains"), "{name}");
            assert!(some.is_ok(), "{name}");
        }
    }
}

/// A PDF with one line of text on each page, built with lopdf.
fn pdf(pages: &[&str]) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Courier",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources_id = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font_id}});
    let mut kids: Vec<Object> = Vec::new();
    for text in pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => count,
            "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A server with PDFs good and bad; returns its port.
async fn pdf_server() -> u16 {
    let good = pdf(&["Quarterly report page one", "Second page: totals 42"]);
    let app = Router::new()
        .route(
            "/report.pdf",
            get(move || {
                let good = good.clone();
                async move { ([(header::CONTENT_TYPE, "application/pdf")], good) }
            }),
        )
        .route(
            "/mislabelled",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/pdf")],
                    "<html>not a pdf</html>",
                )
            }),
        )
        .route(
            "/corrupt.pdf",
            get(|| async {
                "%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R >>\ntrailer garbage"
            }),
        )
        .route(
            "/huge.pdf",
            get(|| async {
                let mut body = b"%PDF-1.4\n".to_vec();
                body.resize(21 << 20, b' ');
                body
            }),
        )
        .route(
            "/missing.pdf",
            get(|| async { (StatusCode::NOT_FOUND, "gone") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

#[tokio::test]
async fn download_pdf_reads_the_text_of_each_page_and_refuses_what_is_not_a_pdf() {
    let port = pdf_server().await;
    let resolver = dns(&[("docs.test", &["127.0.0.1"])]);
    let t = tool(resolver.clone(), "download_pdf");
    assert_eq!(t.def().tier, aether_policy::Tier::Restricted);
    assert!(t.def().meta.reaches_network);
    let get = |path: &str| {
        let t = t.clone();
        let url = format!("http://docs.test:{port}{path}");
        async move {
            t.call(cx(agent(&["docs.test"], true)), json!({ "url": url }))
                .await
        }
    };
    let out = get("/report.pdf").await.unwrap();
    let v = structured(&out);
    assert_eq!(v["pages"], 2, "{v}");
    assert_eq!(v["pages_read"], 2);
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("Quarterly report page one"), "{text:?}");
    assert!(text.contains("Second page: totals 42"), "{text:?}");
    assert_eq!(v["truncated"], false);

    for (path, want) in [
        ("/mislabelled", "not a PDF"),
        ("/corrupt.pdf", "could not be read as a PDF"),
        ("/huge.pdf", "larger than 20 MiB"),
        ("/missing.pdf", "HTTP 404"),
    ] {
        let err = get(path).await.unwrap_err().to_string();
        assert!(err.contains(want), "{path}: {err}");
    }
    // The egress gate holds as for every network tool.
    let err = t
        .call(
            cx(agent(&["docs.test"], false)),
            json!({ "url": format!("http://docs.test:{port}/report.pdf") }),
        )
        .await;
    assert!(matches!(err, Err(ToolError::Denied { .. })), "{err:?}");
}

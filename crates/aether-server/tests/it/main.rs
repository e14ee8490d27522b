//! The server crate's integration tests: the HTTP router driven without a socket, gate first.

use std::sync::Arc;

use aether_pipeline::{Pipeline, Settings};
use aether_server::{HttpOptions, Mode, router};
use axum::body::Body;
use http::{Request, StatusCode};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

async fn pipeline(dir: &tempfile::TempDir) -> Arc<Pipeline> {
    let store = aether_store::Store::open_sqlite(&dir.path().join(".aether/aether.db")).unwrap();
    let pipeline = Pipeline::new(Settings {
        agents: aether_policy::config::RawConfig::default().agent_profiles(),
        roots: aether_tools::Roots::open(&[]).unwrap(),
        limits: Default::default(),
        store,
        tools: aether_tools::builtin_tools(),
        external_tools: Vec::new(),
        journal: Default::default(),
        approval_window: std::time::Duration::from_secs(300),
        rules: aether_pipeline::Rules::none(),
        screen: Default::default(),
        private: Vec::new(),
        undo: std::sync::Arc::new(aether_tools::workspace::UndoCall::new()),
        tracer: None,
    })
    .await
    .unwrap();
    Arc::new(pipeline)
}

fn options(agent: &str) -> HttpOptions {
    HttpOptions {
        addr: "127.0.0.1:8484".parse().unwrap(),
        mode: Mode::Shipped,
        agent: agent.into(),
        session_idle: std::time::Duration::from_secs(60),
        sessions: true,
        auth: Default::default(),
        shutdown: CancellationToken::new(),
        upstreams: aether_server::upstream::Upstreams::none(),
        public_hosts: vec!["aether.example.com".into()],
        max_sessions: 8_192,
        max_sessions_per_caller: 1_024,
        session_sleep: None,
        oauth: None,
        authority: None,
        console_sign_in: None,
        trace_url: None,
    }
}

async fn app() -> (tempfile::TempDir, axum::Router) {
    let dir = tempfile::tempdir().unwrap();
    let app = router(pipeline(&dir).await, &options("default")).unwrap();
    (dir, app)
}

fn get(path: &str, host: &str, origin: Option<&str>) -> Request<Body> {
    let mut b = Request::builder().uri(path).header("host", host);
    if let Some(o) = origin {
        b = b.header("origin", o);
    }
    b.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn the_gate_runs_before_every_route() {
    let (_dir, app) = app().await;
    for path in ["/api/health", "/mcp", "/anything"] {
        let r = app
            .clone()
            .oneshot(get(path, "evil.example.com", None))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
        let r = app
            .clone()
            .oneshot(get(path, "127.0.0.1:8484", Some("http://evil.example.com")))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
    }
    let r = app
        .clone()
        .oneshot(get(
            "/api/health",
            "localhost:8484",
            Some("http://localhost:8484"),
        ))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = app
        .clone()
        .oneshot(get("/anything", "127.0.0.1:8484", None))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_request_sent_by_aethers_own_network_tools_is_refused() {
    let (_dir, app) = app().await;
    for path in ["/api/health", "/mcp"] {
        let mut request = get(path, "127.0.0.1:8484", None);
        request.headers_mut().insert(
            aether_policy::egress::EGRESS_MARK,
            http::HeaderValue::from_static("1"),
        );
        let r = app.clone().oneshot(request).await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
    }
}

#[tokio::test]
async fn a_load_balancers_public_host_is_accepted_and_no_other() {
    let (_dir, app) = app().await;
    for (host, origin, status) in [
        (
            "aether.example.com",
            Some("https://aether.example.com"),
            StatusCode::OK,
        ),
        ("AETHER.example.com", None, StatusCode::OK),
        // A look-alike, a subdomain, or the name with a port it was not given: refused.
        ("aether.example.com.evil.net", None, StatusCode::FORBIDDEN),
        ("x.aether.example.com", None, StatusCode::FORBIDDEN),
        ("aether.example.com:8080", None, StatusCode::FORBIDDEN),
        // The public name's origin on another host's request: refused.
        (
            "aether.example.com",
            Some("https://evil.example.com"),
            StatusCode::FORBIDDEN,
        ),
    ] {
        let r = app
            .clone()
            .oneshot(get("/api/health", host, origin))
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{host} {origin:?}");
    }
}

#[tokio::test]
async fn an_agent_that_does_not_exist_is_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let err = router(pipeline(&dir).await, &options("ghost")).expect_err("refused");
    assert!(err.to_string().contains("ghost"), "{err}");
}

#[tokio::test]
async fn doubled_headers_and_foreign_absolute_targets_are_refused() {
    let (_dir, app) = app().await;
    let two_hosts = Request::builder()
        .uri("/api/health")
        .header("host", "127.0.0.1:8484")
        .header("host", "evil.example.com")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(two_hosts).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let two_origins = Request::builder()
        .uri("/api/health")
        .header("host", "127.0.0.1:8484")
        .header("origin", "http://127.0.0.1:8484")
        .header("origin", "http://evil.example.com")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(two_origins).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let absolute = Request::builder()
        .uri("http://evil.example.com:8484/api/health")
        .header("host", "127.0.0.1:8484")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(absolute).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let own_absolute = Request::builder()
        .uri("http://127.0.0.1:8484/api/health")
        .header("host", "127.0.0.1:8484")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(own_absolute).await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_client_that_trickles_its_headers_is_cut_off_and_others_are_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(
        pipeline(&dir).await,
        &HttpOptions {
            addr,
            ..options("default")
        },
    )
    .unwrap();
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(aether_server::serve_http_with(
        listener,
        app,
        shutdown.clone(),
        std::time::Duration::from_millis(300),
    ));
    let health = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    // Half a request, then nothing: the connection is closed once the header time is up.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let ended = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        slow.read_to_end(&mut got),
    )
    .await;
    assert!(
        ended.is_ok(),
        "the trickling client was still connected after 5 s"
    );
    assert!(
        !String::from_utf8_lossy(&got).contains("200 OK"),
        "a half request was answered: {}",
        String::from_utf8_lossy(&got)
    );
    // Meanwhile and after, a whole request is answered.
    let mut fast = tokio::net::TcpStream::connect(addr).await.unwrap();
    fast.write_all(health.as_bytes()).await.unwrap();
    let mut answer = String::new();
    fast.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A shutdown stops the listener.
    shutdown.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(12), served)
        .await
        .expect("the server stopped")
        .unwrap()
        .unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn a_padded_initialize_request_is_not_kept_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = pipeline(&dir).await;
    let store = pipeline.store().clone();
    // Loopback and no proxy in front: no token is asked for yet.
    let mut local = options("default");
    local.public_hosts.clear();
    let app = router(pipeline, &local).unwrap();
    let initialize = |pad: usize| {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "clientInfo": {"name": "x", "version": "1"},
            "capabilities": {"experimental": {"x": {"pad": "p".repeat(pad)}}}}});
        Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "127.0.0.1:8484")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let session = |r: &axum::response::Response| {
        r.headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string())
    };
    // An ordinary one is kept, so another replica can resume the session...
    let r = app.clone().oneshot(initialize(10)).await.unwrap();
    let id = session(&r).expect("a session id");
    assert!(store.mcp_session(&id).await.unwrap().is_some());
    // ...a padded one is not (whatever the client is told).
    let r = app.clone().oneshot(initialize(3_000_000)).await.unwrap();
    if let Some(id) = session(&r) {
        assert!(store.mcp_session(&id).await.unwrap().is_none());
    }
}

/// Behind a proxy or load balancer (`public_hosts`), a request from loopback may be anyone's:
/// `auth = "auto"` asks for a token even before one exists.
#[tokio::test]
async fn behind_public_hosts_a_caller_without_a_token_is_refused() {
    let (_dir, app) = app().await;
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "clientInfo": {"name": "x", "version": "1"},
        "capabilities": {}}});
    for host in ["127.0.0.1:8484", "aether.example.com"] {
        let request = Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(body.to_string()))
            .unwrap();
        let r = app.clone().oneshot(request).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{host}");
    }
}

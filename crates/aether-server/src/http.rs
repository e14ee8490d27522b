//! The HTTP listener: MCP over Streamable HTTP at `/mcp`, a health check at `/api/health`,
//! everything behind the [`HostGate`]. Anything not declared here answers 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::{Pipeline, PipelineError, Transport};
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use axum::serve::ListenerExt;
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::gate::{self, HostGate};
use crate::handler::{AetherMcp, Mode};

/// The largest JSON-RPC message `/mcp` accepts.
pub const MAX_BODY_BYTES: usize = 4 << 20;

#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    pub mode: Mode,
    /// The agent HTTP callers act as.
    pub agent: String,
    /// An MCP session idle this long is closed; the client re-initializes.
    pub session_idle: Duration,
    /// Sessions and SSE replies (`true`), or stateless with plain JSON replies (`false`).
    pub sessions: bool,
    pub shutdown: CancellationToken,
}

/// The whole HTTP application, ready to serve or to drive in tests.
pub fn router(pipeline: Arc<Pipeline>, opts: &HttpOptions) -> Result<Router, PipelineError> {
    // Fail now, not on the first request, if the agent does not exist.
    pipeline.session(&opts.agent, Transport::Http, String::new())?;
    let gate = HostGate::for_addr(opts.addr);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(opts.session_idle);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(gate.hosts().to_vec())
        .with_allowed_origins(gate.origins().to_vec())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(opts.shutdown.child_token())
        .with_legacy_session_mode(opts.sessions)
        .with_json_response(!opts.sessions);
    let (p, agent, mode) = (pipeline.clone(), opts.agent.clone(), opts.mode);
    let mcp = StreamableHttpService::new(
        move || {
            let session = p
                .session(&agent, Transport::Http, uuid::Uuid::now_v7().to_string())
                .map_err(std::io::Error::other)?;
            Ok(AetherMcp::new(p.clone(), session, mode))
        },
        Arc::new(sessions),
        config,
    );
    Ok(Router::new()
        .route("/api/health", get(health))
        .nest_service("/mcp", mcp)
        .fallback(not_found)
        .with_state(pipeline)
        .layer(axum::middleware::from_fn_with_state(gate, gate::guard)))
}

async fn health(State(pipeline): State<Arc<Pipeline>>) -> impl IntoResponse {
    match pipeline.store().halt_state().await {
        Ok(state) => (
            StatusCode::OK,
            Json(json!({"status": "ok", "halted": state.halted})),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "store unavailable", "error": e.to_string()})),
        ),
    }
}

async fn not_found() -> impl IntoResponse {
    (StatusCode::NOT_FOUND, Json(json!({"error": "not found"})))
}

/// Serves `router` on `listener` until `shutdown` is cancelled.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    // An SSE reply is written in several small pieces; with Nagle's algorithm on, the last
    // piece of a reply on a kept-alive connection waits for the client's delayed ACK (~40 ms).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

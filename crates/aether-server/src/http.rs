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
use futures::StreamExt;
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::gate::{self, HostGate};
use crate::handler::{AetherMcp, Caller, Mode};
use crate::{admin, api};
use aether_pipeline::Principal;
use aether_policy::config::HttpAuth;
use aether_store::TokenKind;

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
    /// How `/mcp` callers prove who they are.
    pub auth: HttpAuth,
    pub shutdown: CancellationToken,
    /// Upstream servers whose resources and prompts sessions may reach.
    pub upstreams: Arc<crate::upstream::Upstreams>,
    /// More Host names accepted: a load balancer's (`[server] public_hosts`).
    pub public_hosts: Vec<String>,
    /// MCP sessions held at once in all, and by one caller (`[server] max_sessions`,
    /// `max_sessions_per_caller`).
    pub max_sessions: usize,
    pub max_sessions_per_caller: usize,
    /// A handshake-era session idle this long (no request in flight, no GET stream open)
    /// has its worker let go; its next request wakes it from the store (`[server]
    /// session_sleep_seconds`; `None`: never).
    pub session_sleep: Option<Duration>,
    /// OAuth access tokens from `[auth] issuer` (or the built-in server), when configured.
    pub oauth: Option<Arc<crate::oauth::OAuth>>,
    /// Aether's own authorization server (`[auth] builtin`), when it is on.
    pub authority: Option<Arc<crate::authz::Authority>>,
    /// The console's sign-in through an OpenID provider (`[console.oidc]`), when configured.
    pub console_sign_in: Option<Arc<crate::console_oidc::ConsoleSignIn>>,
    /// Where the console links an audit row's trace (`[console] trace_url`).
    pub trace_url: Option<String>,
}

/// The whole HTTP application, ready to serve or to drive in tests.
pub fn router(pipeline: Arc<Pipeline>, opts: &HttpOptions) -> Result<Router, PipelineError> {
    // Fail now, not on the first request, if the agent does not exist.
    pipeline.session(&opts.agent, Transport::Http, String::new())?;
    let gate = HostGate::for_addr(opts.addr).with_public_hosts(&opts.public_hosts);
    // A stream's recent events are kept, so a client resuming it with `Last-Event-ID` hears
    // what it missed (the call's result included) once.
    let mut sessions = LocalSessionManager::default()
        .with_event_store(Arc::new(crate::events::RecentEvents::default()));
    sessions.session_config.keep_alive = Some(opts.session_idle);
    let sessions = Arc::new(sessions);
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(gate.hosts().to_vec())
        .with_allowed_origins(gate.origins().to_vec())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_cancellation_token(opts.shutdown.child_token())
        .with_legacy_session_mode(opts.sessions)
        // A request served without a session (every 2026-07-28 request; with sessions off,
        // every request) is answered with plain JSON, or SSE when it streams progress first.
        .with_json_response(true);
    // Sessions live in the store: a request that lands on another replica (or on this one
    // after a restart) resumes its session there instead of failing.
    config.session_store = Some(Arc::new(StoredSessions(pipeline.store().clone())));
    forget_old_sessions(pipeline.store().clone(), opts.shutdown.child_token());
    let (p, agent, mode, lasting) = (
        pipeline.clone(),
        opts.agent.clone(),
        opts.mode,
        opts.sessions,
    );
    let upstreams = opts.upstreams.clone();
    // One key for every request's rounds (a 2026-07-28 request makes a handler of its own).
    let rounds = crate::link::round_codec(pipeline.store());
    let book = Arc::new(SessionBook {
        sessions: sessions.clone(),
        idle: opts.session_idle,
        max: opts.max_sessions,
        max_per_caller: opts.max_sessions_per_caller,
        lasting: opts.sessions,
        inner: std::sync::Mutex::default(),
        gate: tokio::sync::Mutex::new(()),
    });
    if let Some(after) = opts.session_sleep.filter(|_| opts.sessions) {
        put_idle_sessions_to_sleep(book.clone(), after, opts.shutdown.child_token());
    }
    let mcp = StreamableHttpService::new(
        move || {
            let session = p
                .session(&agent, Transport::Http, uuid::Uuid::now_v7().to_string())
                .map_err(std::io::Error::other)?;
            let handler = AetherMcp::with_rounds(p.clone(), session, mode, rounds.clone())
                .with_upstreams(upstreams.clone());
            Ok(if lasting { handler } else { handler.one_shot() })
        },
        sessions,
        config,
    );
    let auth = Arc::new(McpAuth {
        book,
        bindings: Arc::default(),
        pipeline: pipeline.clone(),
        mode: opts.auth,
        agent: opts.agent.clone(),
        // Reached only from this computer: bound to loopback, and no load balancer or proxy
        // in front (`public_hosts`), which would bring anyone's requests from loopback.
        loopback: opts.addr.ip().is_loopback() && opts.public_hosts.is_empty(),
        listening: Arc::default(),
        oauth: opts.oauth.clone(),
    });
    let mcp = Router::new()
        .nest_service("/mcp", Shared(Arc::new(mcp)))
        .layer(axum::middleware::from_fn_with_state(
            Messages {
                sessions: opts.sessions,
                pipeline: pipeline.clone(),
                oauth: opts.oauth.clone(),
                in_flight: Arc::default(),
                listens: Arc::default(),
            },
            json_rpc_errors,
        ))
        .layer(axum::middleware::from_fn_with_state(auth, authenticate));
    // The protected resource metadata (RFC 9728), at the well-known URI and at its form with
    // the resource's path appended, when an authorization server is configured.
    let metadata = opts.oauth.as_ref().map(|oauth| oauth.metadata());
    let serve = move || {
        let metadata = metadata.clone();
        async move {
            match metadata {
                Some(metadata) => Json(metadata).into_response(),
                None => api::error(
                    StatusCode::NOT_FOUND,
                    "this server names no authorization server ([auth]); its callers use static bearer tokens",
                ),
            }
        }
    };
    let mut mcp = mcp.route("/.well-known/oauth-protected-resource", get(serve.clone()));
    if let Some(oauth) = &opts.oauth
        && let Ok(resource) = url::Url::parse(oauth.resource())
        && !resource.path().trim_end_matches('/').is_empty()
    {
        let suffixed = format!(
            "/.well-known/oauth-protected-resource{}",
            resource.path().trim_end_matches('/')
        );
        mcp = mcp.route(&suffixed, get(serve));
    }
    let api = admin::routes().layer(axum::middleware::from_fn_with_state(
        pipeline.clone(),
        crate::console::authorize,
    ));
    let mut app = Router::new()
        .route("/api/health", get(health))
        .merge(api)
        .merge(crate::console::public_routes());
    if let Some(authority) = &opts.authority {
        app = app.merge(crate::authz::routes(authority.clone()));
    }
    if let Some(sign_in) = &opts.console_sign_in {
        app = app
            .merge(crate::console_oidc::routes(sign_in.clone()))
            .layer(axum::Extension(sign_in.clone()));
    }
    Ok(app
        .layer(axum::Extension(crate::console::Links {
            trace_url: opts.trace_url.clone(),
        }))
        .layer(axum::Extension(crate::console::Limiter::default()))
        .layer(axum::Extension(crate::console::Changes::default()))
        .merge(mcp)
        .fallback(not_found)
        .with_state(pipeline)
        .layer(axum::middleware::from_fn_with_state(gate, gate::guard))
        // Outermost: a body a refusal above left unread is read before the answer goes, so
        // the connection stays usable (hyper closes it otherwise, under the client's feet).
        .layer(axum::middleware::from_fn(crate::drain::drain_unread)))
}

/// rmcp's HTTP service, shared: the router hands each request a clone of its service, and
/// rmcp's own clone copies its configuration (the allowed hosts and origins among it).
#[derive(Clone)]
struct Shared<S>(Arc<S>);

impl<S, M> tower::Service<axum::extract::Request> for Shared<StreamableHttpService<S, M>>
where
    S: rmcp::ServerHandler + Send + 'static,
    M: rmcp::transport::streamable_http_server::SessionManager,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(request).await.map(axum::body::Body::new)) })
    }
}

/// MCP sessions kept in the store, by id, with the client's initialize request: the state
/// rmcp needs to resume a session on any replica. The id is a random UUID the store never
/// hands out; identity still comes from each request's own credentials.
struct StoredSessions(aether_store::Store);

/// How long a session may be resumed after it began.
pub const SESSION_DAYS: i64 = 7;

/// The most bytes of a session's state (its initialize request) kept in the store.
const MAX_SESSION_STATE: usize = 64 << 10;

/// Forgets stored sessions older than [`SESSION_DAYS`], hourly, until `stop` (a client that
/// never says goodbye leaves its session's row behind).
fn forget_old_sessions(store: aether_store::Store, stop: CancellationToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        loop {
            let cutoff = aether_store::now_us() - SESSION_DAYS * 86_400_000_000;
            match store.remove_mcp_sessions(None, cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    sessions = n,
                    "forgot MCP sessions older than {SESSION_DAYS} days"
                ),
                Err(e) => tracing::warn!(error = %e, "old MCP sessions could not be forgotten"),
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
            }
        }
    });
}

#[async_trait::async_trait]
impl SessionStore for StoredSessions {
    async fn load(&self, id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(text) = self.0.mcp_session(id).await? else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_str(&text)?))
    }

    async fn store(&self, id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        // A client's initialize request is a few KiB; a padded one is not kept.
        if text.len() > MAX_SESSION_STATE {
            return Err(format!(
                "the session's initialize request is {} bytes; at most {MAX_SESSION_STATE} are kept",
                text.len()
            )
            .into());
        }
        Ok(self.0.put_mcp_session(id, text).await?)
    }

    async fn delete(&self, id: &str) -> Result<(), SessionStoreError> {
        let expired = aether_store::now_us() - SESSION_DAYS * 86_400_000_000;
        self.0.remove_mcp_sessions(Some(id), expired).await?;
        Ok(())
    }
}

/// The MCP sessions this server holds, by id: whose they are and when a request last named
/// them, so that a caller cannot open more than its share (`max_per_caller`, and `max` in
/// all), and a session whose worker rmcp let go after its idle time is dropped from rmcp's
/// own table too (which keeps its handle otherwise).
struct SessionBook {
    sessions: Arc<LocalSessionManager>,
    idle: Duration,
    max: usize,
    max_per_caller: usize,
    /// Whether sessions are kept at all (`[server] sessions`).
    lasting: bool,
    inner: std::sync::Mutex<Book>,
    /// Held while sessions are being put to sleep: a request waking one waits for it.
    gate: tokio::sync::Mutex<()>,
}

/// A session held here.
struct Held {
    caller: String,
    /// When a request last named it.
    seen: std::time::Instant,
    /// Its requests in flight (a GET stream counts while it is open).
    busy: usize,
    /// Its worker was let go; the next request wakes it from the store.
    asleep: bool,
}

impl Held {
    fn new(caller: &str) -> Held {
        Held {
            caller: caller.to_string(),
            seen: std::time::Instant::now(),
            busy: 0,
            asleep: false,
        }
    }
}

#[derive(Default)]
struct Book {
    live: std::collections::HashMap<String, Held>,
    /// Sessions being opened now, by caller.
    opening: std::collections::HashMap<String, usize>,
    pruned: Option<std::time::Instant>,
}

impl SessionBook {
    /// Makes room for `caller` to open a session, or says why it may not.
    fn reserve(&self, caller: &str) -> Result<(), String> {
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.prune(&mut book);
        let opening: usize = book.opening.values().sum();
        if book.live.len() + opening >= self.max {
            return Err(format!(
                "this server holds {} MCP sessions, as many as it keeps ([server] max_sessions); try again later",
                self.max
            ));
        }
        let own = book.live.values().filter(|h| h.caller == caller).count()
            + book.opening.get(caller).copied().unwrap_or(0);
        if own >= self.max_per_caller {
            return Err(format!(
                "this caller holds {} MCP sessions, as many as one caller may ([server] \
                 max_sessions_per_caller); close some (DELETE /mcp with their Mcp-Session-Id) or reuse one",
                self.max_per_caller
            ));
        }
        *book.opening.entry(caller.to_string()).or_default() += 1;
        Ok(())
    }

    /// The session `caller` was opening is open (as `id`), or was not opened (`None`).
    fn settle(&self, caller: &str, id: Option<&str>) {
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = book.opening.get_mut(caller) {
            *n -= 1;
            if *n == 0 {
                book.opening.remove(caller);
            }
        }
        if let Some(id) = id {
            book.live.insert(id.to_string(), Held::new(caller));
        }
    }

    /// A request naming session `id` begins, and the session is busy until
    /// [`SessionBook::leave`]; returns whether it was asleep (its worker let go). `served_by`:
    /// rmcp has just served it (woken from the store, say; opened by another replica), and
    /// it is held here for `served_by` from now on. Without it, a session not held here is
    /// left alone (`None`): an id nobody issued must not take a place in the book.
    fn enter(&self, id: &str, served_by: Option<&str>) -> Option<bool> {
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let held = match served_by {
            Some(caller) => book
                .live
                .entry(id.to_string())
                .or_insert_with(|| Held::new(caller)),
            None => book.live.get_mut(id)?,
        };
        held.busy += 1;
        held.seen = std::time::Instant::now();
        Some(std::mem::replace(&mut held.asleep, false))
    }

    /// A request naming session `id` has ended (its reply sent, or its stream closed).
    fn leave(&self, id: &str) {
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = book.live.get_mut(id) {
            held.busy = held.busy.saturating_sub(1);
            held.seen = std::time::Instant::now();
        }
    }

    fn forget(&self, id: &str) {
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        book.live.remove(id);
    }

    /// Drops sessions no request named for longer than rmcp keeps an idle one (its worker is
    /// gone; its handle would stay in rmcp's table for good), at most once a second.
    fn prune(&self, book: &mut Book) {
        let now = std::time::Instant::now();
        if book
            .pruned
            .is_some_and(|at| now - at < Duration::from_secs(1))
        {
            return;
        }
        book.pruned = Some(now);
        let limit = self.idle + Duration::from_secs(60);
        let stale: Vec<String> = book
            .live
            .iter()
            .filter(|(_, h)| h.busy == 0 && now - h.seen > limit)
            .map(|(id, _)| id.clone())
            .collect();
        if stale.is_empty() {
            return;
        }
        for id in &stale {
            book.live.remove(id);
        }
        let sessions = self.sessions.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                use rmcp::transport::streamable_http_server::session::SessionManager;
                for id in stale {
                    let _ = sessions.close_session(&id.into()).await;
                }
            });
        }
    }
}

/// A reply's body that holds its guards until it is dropped (sent whole, or its client
/// gone); its frames and size are the body's own.
struct Holding<G> {
    body: axum::body::Body,
    _guards: G,
}

impl<G: Send + Unpin + 'static> http_body::Body for Holding<G> {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A request in flight in a session: the session is busy until the reply's body is dropped
/// (sent whole, or its client gone).
struct Busy {
    book: Arc<SessionBook>,
    id: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.book.leave(&self.id);
    }
}

/// Lets go the workers of handshake-era sessions idle for `after` (no request in flight, no
/// GET stream open), checking every `after / 2` (1 s to 30 s). Each such session stays in the
/// book and the store: its next request wakes it (rmcp replays its `initialize` from the
/// store, as on another replica), and it is the same session (see `handler::session_for`).
/// An idle session then costs its book entry and its row, not a worker's channels and tasks.
fn put_idle_sessions_to_sleep(book: Arc<SessionBook>, after: Duration, stop: CancellationToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let every = (after / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
    runtime.spawn(async move {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            // Requests waking a session wait on the gate until its worker is gone.
            let _gate = book.gate.lock().await;
            let idle: Vec<String> = {
                let mut held = book.inner.lock().unwrap_or_else(|e| e.into_inner());
                let now = std::time::Instant::now();
                held.live
                    .iter_mut()
                    .filter(|(_, h)| h.busy == 0 && !h.asleep && now - h.seen >= after)
                    .map(|(id, h)| {
                        h.asleep = true;
                        id.clone()
                    })
                    .collect()
            };
            if idle.is_empty() {
                continue;
            }
            for id in &idle {
                let _ = book.sessions.close_session(&id.clone().into()).await;
            }
            tracing::debug!(
                sessions = idle.len(),
                "let go the workers of idle MCP sessions"
            );
        }
    });
}

/// A session being opened, counted against its caller until it is open or not.
struct Reservation {
    book: Arc<SessionBook>,
    caller: String,
    settled: bool,
}

impl Reservation {
    fn opened(mut self, id: Option<&str>) {
        self.book.settle(&self.caller, id);
        self.settled = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.book.settle(&self.caller, None);
        }
    }
}

/// How `/mcp` requests are authenticated.
struct McpAuth {
    /// The sessions held, by caller.
    book: Arc<SessionBook>,
    /// MCP sessions seen here, by id, and the agent each is bound to.
    bindings: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    pipeline: Arc<Pipeline>,
    mode: HttpAuth,
    /// The agent of a caller without a token, where that is allowed.
    agent: String,
    loopback: bool,
    /// Sessions whose GET stream (where their notifications go) is open here, each with the
    /// number of the stream that holds it.
    listening: Arc<std::sync::Mutex<Streams>>,
    oauth: Option<Arc<crate::oauth::OAuth>>,
}

#[derive(Default)]
struct Streams {
    open: std::collections::HashMap<String, u64>,
    opened: u64,
}

/// A session's open GET stream: it is forgotten when the stream's body is dropped (the
/// client went away, or the session ended).
struct Listening {
    streams: Arc<std::sync::Mutex<Streams>>,
    id: String,
    number: u64,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if streams.open.get(&self.id) == Some(&self.number) {
            streams.open.remove(&self.id);
        }
    }
}

impl McpAuth {
    /// Whether a caller must bring a token: always with `auth = "token"`, never with
    /// `"none"`, and with `"auto"` off loopback (or behind the names of `public_hosts`) or
    /// once any agent token exists.
    fn required(&self) -> bool {
        match self.mode {
            HttpAuth::Token | HttpAuth::OAuth => true,
            HttpAuth::None => false,
            HttpAuth::Auto => {
                self.oauth.is_some() || !self.loopback || self.pipeline.agent_tokens() > 0
            }
        }
    }

    /// The answer to an `/mcp` caller without a valid token: 401, a JSON-RPC body, and
    /// `WWW-Authenticate: Bearer` (RFC 6750), which with an authorization server says where
    /// to find it (RFC 9728's `resource_metadata`).
    fn unauthorized(&self, challenge: Challenge, message: &str) -> axum::response::Response {
        let header = match (&self.oauth, challenge) {
            (Some(oauth), Challenge::Bearer) => oauth.challenge(None, &[], None),
            (Some(oauth), Challenge::InvalidToken) => {
                oauth.challenge(Some("invalid_token"), &[], Some(message))
            }
            (None, Challenge::Bearer) => "Bearer".into(),
            (None, Challenge::InvalidToken) => "Bearer error=\"invalid_token\"".into(),
        };
        challenged(
            mcp_error(StatusCode::UNAUTHORIZED, -32001, message),
            &header,
        )
    }
}

/// `response` with `WWW-Authenticate: header`.
fn challenged(mut response: axum::response::Response, header: &str) -> axum::response::Response {
    if let Ok(value) = http::HeaderValue::from_str(header) {
        response
            .headers_mut()
            .insert(http::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// A 403 for a valid access token whose scopes do not reach what it asked for, naming the
/// scopes that would (the client may ask its user for them: step-up authorization).
fn insufficient_scope(
    oauth: &crate::oauth::OAuth,
    id: &serde_json::Value,
    needed: &[String],
    why: &str,
) -> axum::response::Response {
    challenged(
        mcp_error_to(StatusCode::FORBIDDEN, id, -32001, why),
        &oauth.challenge(Some("insufficient_scope"), needed, Some(why)),
    )
}

/// Resolves the caller of an `/mcp` request to an agent ([`Caller`]) before the MCP service
/// sees it, or answers 401/403. Identity comes from here, never from the request's body.
async fn authenticate(
    State(auth): State<Arc<McpAuth>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let mut token_id = None;
    let mut grant = None;
    let agent = match (api::bearer(request.headers()), &auth.oauth) {
        (Some(token), Some(oauth)) if crate::oauth::OAuth::looks_like_jwt(token) => {
            match oauth.validate(token).await {
                Ok(g) => {
                    // Sessions are counted per person, not per token (tokens are refreshed).
                    token_id = Some(format!("oauth:{}", g.subject));
                    let agent = g.agent.clone();
                    grant = Some(g);
                    agent
                }
                Err(crate::oauth::Refusal::Invalid(why)) => {
                    return auth.unauthorized(Challenge::InvalidToken, &why);
                }
                Err(crate::oauth::Refusal::Scope { needed, why }) => {
                    return insufficient_scope(oauth, &serde_json::Value::Null, &needed, &why);
                }
                Err(crate::oauth::Refusal::Unavailable(why)) => {
                    tracing::warn!(%why, "cannot check an access token");
                    return mcp_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32001,
                        &format!("cannot check the access token just now: {why}"),
                    );
                }
            }
        }
        (Some(_), _) if auth.mode == HttpAuth::OAuth => {
            return auth.unauthorized(
                Challenge::InvalidToken,
                "this server takes OAuth access tokens only (server.auth = \"oauth\")",
            );
        }
        (Some(token), _) => match auth.pipeline.authenticate(token) {
            Some(Principal {
                kind: TokenKind::Agent,
                subject,
                token_id: id,
            }) => {
                token_id = Some(id);
                subject
            }
            Some(_) => {
                return mcp_error(
                    StatusCode::FORBIDDEN,
                    -32001,
                    "an operator's token cannot call tools; use an agent's token",
                );
            }
            None => {
                return auth.unauthorized(
                    Challenge::InvalidToken,
                    "the bearer token is unknown or revoked",
                );
            }
        },
        (None, _) if auth.required() => {
            return auth.unauthorized(
                Challenge::Bearer,
                if auth.oauth.is_some() {
                    "this server needs an access token (Authorization: Bearer …) from its authorization server; see the resource_metadata in WWW-Authenticate"
                } else {
                    "this server needs a bearer token (Authorization: Bearer …); an operator makes one with `aether tokens create --agent NAME`"
                },
            );
        }
        (None, _) => auth.agent.clone(),
    };
    if !auth.pipeline.has_agent(&agent) {
        // A token for an agent the configuration no longer has.
        return api::error(
            StatusCode::FORBIDDEN,
            &format!("this token's agent {agent:?} is not configured on this server"),
        );
    }
    // A session stays with the agent that first used it (and, for an access token, the
    // person it was issued to), on every replica: the binding is in the store (and remembered
    // here once seen).
    let owner = aether_pipeline::owner(&agent, grant.as_ref().map(|g| g.subject.as_str()));
    if let Some(id) = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        let known = auth.bindings.lock().ok().and_then(|b| b.get(id).cloned());
        let bound = match known {
            Some(bound) => Some(bound),
            None => match auth.pipeline.store().bind_mcp_session(id, &owner).await {
                Ok(bound) => bound,
                Err(e) => {
                    return api::error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!("cannot check this MCP session's owner: {e}"),
                    );
                }
            },
        };
        if let Some(bound) = bound {
            if bound != owner {
                return api::error(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "this MCP session belongs to another agent; a token for agent {agent:?} must open its own session"
                    ),
                );
            }
            if let Ok(mut b) = auth.bindings.lock() {
                if b.len() >= 10_000 {
                    b.clear();
                }
                b.insert(id.to_string(), bound);
            }
        }
    }
    // Sessions: one named is seen now; a new one (a POST without one) is counted against its
    // caller's share before rmcp opens it; a closed one is forgotten.
    let named = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // A 2026-07-28 request stands alone: it opens no session and acts in none, whatever
    // `Mcp-Session-Id` it carries (rmcp serves it statelessly).
    let modern = modern_header(request.headers());
    let opening =
        auth.book.lasting && !modern && named.is_none() && request.method() == http::Method::POST;
    let deleting = request.method() == http::Method::DELETE;
    let caller = match &token_id {
        Some(id) => format!("token:{id}"),
        None => format!("agent:{agent}"),
    };
    // The reservation is let go however the request ends (also when the client leaves and
    // the request is dropped half way).
    let mut reserved = None;
    if opening {
        if let Err(why) = auth.book.reserve(&caller) {
            return mcp_error(StatusCode::SERVICE_UNAVAILABLE, -32000, &why);
        }
        reserved = Some(Reservation {
            book: auth.book.clone(),
            caller: caller.clone(),
            settled: false,
        });
    }
    // Ending a session: one this server (or another replica, through the store) holds is
    // ended with 200; an unknown one is 404, as the MCP spec says for any unknown session.
    if deleting && let Some(id) = &named {
        let here = auth
            .book
            .sessions
            .sessions
            .read()
            .await
            .contains_key(id.as_str());
        let stored = !here && matches!(auth.pipeline.store().mcp_session(id).await, Ok(Some(_)));
        if !here && !stored {
            return mcp_error(
                StatusCode::NOT_FOUND,
                -32001,
                "no session has this Mcp-Session-Id: it ended, or never began",
            );
        }
    }
    // A session has one GET stream: a second one would be accepted by rmcp but never told
    // anything (its notifications go to the first), so it is refused while the first is open.
    // A stream resumed with `Last-Event-ID` takes the place of the one it resumes (whose
    // client is gone, though the server may not have noticed yet).
    let mut listening = None;
    if request.method() == http::Method::GET
        && let Some(id) = &named
    {
        // A resumption replays what the stream's client missed and ends (the client polls
        // again): it is not the session's stream, and leaves the count as it is.
        let resuming = request.headers().contains_key("last-event-id");
        let mut streams = auth.listening.lock().unwrap_or_else(|e| e.into_inner());
        if !resuming {
            if streams.open.contains_key(id) {
                return mcp_error(
                    StatusCode::CONFLICT,
                    -32000,
                    "this session's GET stream is already open (its notifications go there); close it before opening another",
                );
            }
            streams.opened += 1;
            let number = streams.opened;
            streams.open.insert(id.clone(), number);
            listening = Some(Listening {
                streams: auth.listening.clone(),
                id: id.clone(),
                number,
            });
        }
    }
    request.extensions_mut().insert(Caller {
        agent,
        token: token_id.clone().filter(|_| grant.is_none()),
        subject: grant.as_ref().map(|g| g.subject.clone()),
        reach: grant.map(|g| g.reach),
    });
    // A session's request keeps it awake while it runs; one whose worker was let go waits
    // until the worker is gone, and rmcp then wakes the session from the store.
    let counted = named
        .as_ref()
        .filter(|_| auth.book.lasting && !deleting && !modern);
    let mut busy = None;
    if let Some(id) = counted
        && let Some(asleep) = auth.book.enter(id, None)
    {
        if asleep {
            drop(auth.book.gate.lock().await);
        }
        busy = Some(Busy {
            book: auth.book.clone(),
            id: id.clone(),
        });
    }
    let mut response = next.run(request).await;
    if busy.is_none()
        && let Some(id) = counted
        && response.status().is_success()
    {
        auth.book.enter(id, Some(&caller));
        busy = Some(Busy {
            book: auth.book.clone(),
            id: id.clone(),
        });
    }
    // The stream stays counted, and the session busy, while the body is being sent.
    let listening = listening.filter(|_| response.status().is_success());
    if listening.is_some() || busy.is_some() {
        let (parts, body) = response.into_parts();
        let body = axum::body::Body::new(Holding {
            body,
            _guards: (listening, busy),
        });
        response = axum::response::Response::from_parts(parts, body);
    }
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    if let Some(reservation) = reserved.take() {
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok());
        reservation.opened(id);
    }
    // (A session's other requests were counted above, when they began and ended.)
    if let Some(id) = &named
        && deleting
        && response.status().is_success()
    {
        auth.book.forget(id);
    }
    response
}

/// Whether a request's `MCP-Protocol-Version` header names 2026-07-28 or later: it stands
/// alone, with no session.
pub(crate) fn modern_header(headers: &http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// A JSON-RPC error as the answer to an `/mcp` request (`id` null: the request was not read).
fn mcp_error(status: StatusCode, code: i64, message: &str) -> axum::response::Response {
    mcp_error_to(status, &serde_json::Value::Null, code, message)
}

/// A JSON-RPC error as the answer to the `/mcp` request `id`.
fn mcp_error_to(
    status: StatusCode,
    id: &serde_json::Value,
    code: i64,
    message: &str,
) -> axum::response::Response {
    (
        status,
        Json(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        })),
    )
        .into_response()
}

/// What a 401 from `/mcp` tells the caller in `WWW-Authenticate` (RFC 6750).
enum Challenge {
    /// No token was sent: one is needed.
    Bearer,
    /// The token sent is not one this server knows (or it was revoked).
    InvalidToken,
}

/// Answers a POSTed `/mcp` body that is not a JSON-RPC message Aether takes with the
/// JSON-RPC error clients expect (`protocol::check`), before rmcp reads it; any other
/// request goes on as it came.
async fn json_rpc_errors(
    State(messages): State<Messages>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let json = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if request.method() != http::Method::POST || !json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return mcp_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                &format!("Invalid request: a message is at most {MAX_BODY_BYTES} bytes"),
            );
        }
    };
    let checked = match crate::protocol::check(&bytes, modern_header(&parts.headers)) {
        Ok(checked) => checked,
        Err(problem) => return (problem.status(), Json(problem.to_json())).into_response(),
    };
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // With sessions on, a handshake-era request without one comes before its `initialize`.
    if messages.sessions && checked.needs_a_session() && session.is_none() {
        let problem = crate::protocol::Problem::NotInitialized {
            id: checked.id,
            method: checked.method.unwrap_or_default(),
        };
        return (problem.status(), Json(problem.to_json())).into_response();
    }
    // A tool the agent may call but the access token's scopes do not reach, where another
    // scope would: refused (and audited) as the pipeline would, answered 403 naming that scope
    // (step-up authorization). A tool the agent itself may not call is left to the pipeline,
    // whose refusal says why: no scope would help.
    if let (Some(tool), Some(caller), Some(oauth)) = (
        &checked.tool,
        parts.extensions.get::<Caller>(),
        &messages.oauth,
    ) && let Some(reach) = &caller.reach
        && let Some(entry) = messages.pipeline.catalog().get(tool).cloned()
        && let Err(hidden) = reach.check(entry.def())
        && let aether_policy::Hidden::OutOfScope { scopes } = &hidden
        && !scopes.is_empty()
        && let Ok(ctx) = messages.pipeline.session(
            &caller.agent,
            aether_pipeline::Transport::Http,
            session.clone().unwrap_or_else(|| "http".into()),
        )
        && messages.pipeline.offer(&ctx, &entry) == aether_policy::Offer::Offered
    {
        let why = hidden.explain(tool, &caller.agent);
        let scoped = aether_pipeline::SessionContext {
            subject: caller.subject.clone(),
            scope: Some(reach.clone()),
            ..ctx
        };
        messages
            .pipeline
            .audit_refused(
                &scoped,
                tool,
                aether_policy::Refusal::new(aether_policy::Step::Capability, "scope", why.clone()),
            )
            .await;
        return insufficient_scope(oauth, &checked.id, scopes, &why);
    }
    // A `subscriptions/listen` stream stays open: each agent may hold only so many at once
    // (a stateless request counts against no session).
    let mut listening = None;
    if checked.request && checked.method.as_deref() == Some("subscriptions/listen") {
        // Counted per owner: one person cannot use up their agent's streams for the rest.
        let agent = parts
            .extensions
            .get::<Caller>()
            .map(|c| aether_pipeline::owner(&c.agent, c.subject.as_deref()))
            .unwrap_or_default();
        let mut open = messages.listens();
        let count = open.entry(agent.clone()).or_default();
        if *count >= MAX_LISTENS_PER_AGENT {
            return mcp_error_to(
                StatusCode::TOO_MANY_REQUESTS,
                &checked.id,
                -32000,
                &format!(
                    "agent {agent:?} has {MAX_LISTENS_PER_AGENT} subscriptions/listen streams open, as many as one agent may; close one first"
                ),
            );
        }
        *count += 1;
        listening = Some(Listen {
            messages: messages.clone(),
            agent,
        });
    }
    // In a session, a request id names one request until it is answered: rmcp routes the
    // answer by it, so a second request under the same id (another client sharing the
    // session) would wait forever. It is refused at once instead.
    let mut in_flight = None;
    if let Some(session) = session
        && checked.request
    {
        let key = (session, checked.id.to_string());
        if !messages.in_flight().insert(key.clone()) {
            return mcp_error_to(
                StatusCode::CONFLICT,
                &checked.id,
                -32600,
                &format!(
                    "Invalid request: a request with id {} is already in flight in this session; give each request an id of its own",
                    crate::protocol::bounded(&checked.id.to_string())
                ),
            );
        }
        in_flight = Some(InFlight {
            messages: messages.clone(),
            key,
        });
    }
    let response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        ))
        .await;
    // The id is free again once its answer has been sent (an event stream's last event), and
    // a listen stream counts until it ends.
    if in_flight.is_none() && listening.is_none() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = (&in_flight, &listening);
        chunk
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// The most `subscriptions/listen` streams one agent may hold open on a listener.
pub const MAX_LISTENS_PER_AGENT: usize = 32;

/// An open listen stream, counted against its agent until its body is dropped.
struct Listen {
    messages: Messages,
    agent: String,
}

impl Drop for Listen {
    fn drop(&mut self) {
        let mut open = self.messages.listens();
        if let Some(count) = open.get_mut(&self.agent) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.agent);
            }
        }
    }
}

/// What the `/mcp` message check keeps: whether sessions are on, the requests in flight in
/// each session, by id, and each agent's open listen streams.
#[derive(Clone)]
struct Messages {
    sessions: bool,
    pipeline: Arc<Pipeline>,
    oauth: Option<Arc<crate::oauth::OAuth>>,
    in_flight: Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>,
    /// Open `subscriptions/listen` streams, by agent.
    listens: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

impl Messages {
    fn listens(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, usize>> {
        self.listens.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, String)>> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A request in flight in a session, forgotten when its answer's body is dropped.
struct InFlight {
    messages: Messages,
    key: (String, String),
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.messages.in_flight().remove(&self.key);
    }
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

/// The most connections served at once; beyond it a new connection is closed at once, so a
/// flood of idle or slow connections cannot use up the process's file descriptors (which its
/// tools, upstreams and store need too).
pub const MAX_CONNECTIONS: usize = 512;

/// Connections one client (an IPv4 address, or an IPv6 /64) may hold once the server is half
/// full: below half, anyone may open more; above it, a client past its share is turned away,
/// so one client's hundreds of connections cannot turn the next client away. (Behind a proxy
/// every client is the proxy: give it a limit of its own there.)
pub const CLIENT_SHARE: usize = 64;

/// How long a new connection may take to start its first request before it is closed.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may go without a byte either way before it is closed (after the
/// request in flight, if any: an event stream sends a keep-alive every 15 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How much longer a connection asked to close while idle may stay quiet before it is dropped
/// with its request: longer than any call waits for a person by default.
pub const STUCK_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Who a connection counts against: its IPv4 address, or its IPv6 /64 (one host usually holds
/// a whole /64).
fn client_of(addr: &SocketAddr) -> std::net::IpAddr {
    match addr.ip() {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                std::net::IpAddr::V6(std::net::Ipv6Addr::from(octets))
            }
        },
        v4 => v4,
    }
}

/// The connections open now, in all and by client.
#[derive(Default)]
struct Connections {
    by_client: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
    total: std::sync::atomic::AtomicUsize,
}

/// A connection counted in [`Connections`]; uncounted when dropped.
struct Counted {
    connections: Arc<Connections>,
    client: std::net::IpAddr,
}

impl Connections {
    /// Counts a new connection from `client`, or says why it is turned away.
    fn admit(self: &Arc<Self>, client: std::net::IpAddr) -> Result<Counted, &'static str> {
        use std::sync::atomic::Ordering;
        let mut by_client = self.by_client.lock().unwrap_or_else(|e| e.into_inner());
        let total = self.total.load(Ordering::SeqCst);
        if total >= MAX_CONNECTIONS {
            return Err("the server holds as many connections as it serves");
        }
        let own = by_client.get(&client).copied().unwrap_or(0);
        if own >= CLIENT_SHARE && total >= MAX_CONNECTIONS / 2 {
            return Err("this client holds more than its share of connections");
        }
        by_client.insert(client, own + 1);
        self.total.store(total + 1, Ordering::SeqCst);
        Ok(Counted {
            connections: self.clone(),
            client,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        let mut by_client = self
            .connections
            .by_client
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match by_client.get_mut(&self.client) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                by_client.remove(&self.client);
            }
        }
        self.connections.total.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's stream, noting when a byte last went either way (milliseconds since
/// `epoch`) and whether the client has sent any.
struct Watched<S> {
    inner: S,
    epoch: std::time::Instant,
    last: Arc<std::sync::atomic::AtomicU64>,
    spoke: Arc<std::sync::atomic::AtomicBool>,
}

impl<S> Watched<S> {
    fn touch(&self) {
        self.last.store(
            self.epoch.elapsed().as_millis() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.spoke.store(true, std::sync::atomic::Ordering::Relaxed);
            self.touch();
        }
        polled
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How long a client may take to send a request's headers (a connection kept alive between
/// requests counts from the next request's first byte): a client that trickles them
/// (slowloris) is cut off.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves `router` on `listener` until `shutdown` is cancelled: HTTP/1.1, at most
/// [`MAX_CONNECTIONS`] at once, each request's headers within [`HEADER_READ_TIMEOUT`]. On
/// shutdown it stops accepting, asks every connection to finish its request in flight, and
/// waits for them up to 10 s.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_http_with(listener, router, shutdown, HEADER_READ_TIMEOUT).await
}

/// [`serve_http`] with another header timeout (the tests' is short).
pub async fn serve_http_with(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: CancellationToken,
    header_timeout: Duration,
) -> std::io::Result<()> {
    use tower::ServiceExt;
    let counted = Arc::new(Connections::default());
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (tcp, addr) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A connection that failed before it was accepted, or a descriptor shortage:
                // not the listener's end. Back off a moment and go on.
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = match counted.admit(client_of(&addr)) {
            Ok(permit) => permit,
            Err(why) => {
                tracing::warn!(client = %addr, "{why}; closing a new connection");
                continue;
            }
        };
        // An SSE reply is written in several small pieces; with Nagle's algorithm on, the
        // last piece of a reply on a kept-alive connection waits for the client's delayed
        // ACK (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        // The client's address reaches handlers (the console's sign-in rate limit is per
        // client).
        let service = router.clone().map_request(
            move |mut request: hyper::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(addr));
                request.map(axum::body::Body::new)
            },
        );
        let service = hyper_util::service::TowerToHyperService::new(service);
        let stop = shutdown.clone();
        connections.spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout);
            let epoch = std::time::Instant::now();
            let (last, spoke) = (Arc::default(), Arc::default());
            let watched = Watched {
                inner: tcp,
                epoch,
                last: Arc::clone(&last),
                spoke: Arc::clone(&spoke),
            };
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(watched), service);
            let mut connection = std::pin::pin!(connection);
            // When this connection has been quiet too long: its first request has a short
            // while to start, any later one the idle limit (from the last byte either way).
            let quiet_until = || {
                if spoke.load(std::sync::atomic::Ordering::Relaxed) {
                    Duration::from_millis(last.load(std::sync::atomic::Ordering::Relaxed))
                        + IDLE_TIMEOUT
                } else {
                    FIRST_REQUEST_TIMEOUT
                }
            };
            // Once asked to close: stopping (the server ends), or idle (then it is dropped if it
            // stays quiet for [`STUCK_TIMEOUT`] more: a request whose body never comes; a call
            // waiting quietly for a person's approval is answered well within that).
            let mut stopping = false;
            let mut idle_since: Option<Duration> = None;
            loop {
                let wake = match idle_since {
                    Some(at) => at.max(quiet_until()) + STUCK_TIMEOUT,
                    None => quiet_until(),
                };
                tokio::select! {
                    served = connection.as_mut() => {
                        if let Err(e) = served {
                            tracing::debug!(client = %addr, error = %e, "connection ended");
                        }
                        break;
                    }
                    _ = stop.cancelled(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(epoch + wake)), if !stopping => {
                        // Quiet that long by now (a byte since pushes the limit back).
                        let now = epoch.elapsed();
                        match idle_since {
                            None if now >= quiet_until() => {
                                idle_since = Some(now);
                                connection.as_mut().graceful_shutdown();
                            }
                            Some(at) if now >= at.max(quiet_until()) + STUCK_TIMEOUT => {
                                tracing::debug!(client = %addr, "an idle connection's request never ended; dropped");
                                break;
                            }
                            _ => {}
                        }
                    }
                }
            }
            drop(permit);
        });
    }
    connections.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), connections.wait()).await;
    Ok(())
}

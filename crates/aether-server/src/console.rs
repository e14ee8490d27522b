//! The console: its pages (one small front end served by Aether itself, nothing from a CDN),
//! signing in and out, the first admin's setup, who may call which admin route, live updates
//! over SSE, and `/metrics`.
//!
//! A console request is authenticated by its session — the cookie `aether_console` (HttpOnly,
//! SameSite=Strict) *and* the key the page keeps in its own session storage and sends as
//! `X-Aether-Key` (a browser sends cookies to every server on the same host name, whatever its
//! port; the key stays with this origin) — the store keeping only their SHA-256s; or by an
//! operator bearer token (a script). Every admin route declares the one permission it needs where it is routed (`admin::routes`);
//! an account has those of its role, an operator token all of them. A change made with a
//! cookie must carry this console's own `Origin` (the gate refuses any other Origin, and here
//! a missing one): a page elsewhere cannot make the operator's browser act.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::accounts::{self, AccountError, SignInLimiter};
use aether_pipeline::{Pipeline, Principal};
use aether_policy::roles::{self, Permission};
use aether_store::TokenKind;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::{Extension, Router};
use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, ORIGIN, SET_COOKIE};
use serde::Deserialize;
use serde_json::json;

use crate::api::{bearer, error, unauthorized};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "aether_console";
/// The header carrying the session's second secret.
pub const KEY_HEADER: &str = "x-aether-key";

const INDEX: &str = include_str!("../console/index.html");
const APP_JS: &str = include_str!("../console/app.js");
const APP_CSS: &str = include_str!("../console/app.css");
/// The charting library the overview draws with: uPlot, pinned from npm
/// (`scripts/vendor-console.sh` checks these are the package's files).
const CHART_JS: &str = include_str!("../console/vendor/uPlot.iife.min.js");
const CHART_CSS: &str = include_str!("../console/vendor/uPlot.min.css");

/// The operator an admin request authenticated as (its account or token's name), for the
/// record of who made a change.
#[derive(Clone, Debug)]
pub struct Operator(pub String);

/// Who is acting on the admin API, and what they may do.
#[derive(Clone, Debug)]
pub struct Actor {
    pub name: String,
    /// The account's role, or `operator-token`.
    pub role: String,
    pub permissions: Vec<Permission>,
}

impl Actor {
    pub fn may(&self, permission: Permission) -> bool {
        self.permissions.contains(&permission)
    }
}

/// Where the console links to: a trace in the operator's tracing UI (`[console] trace_url`,
/// `{trace_id}` replaced by an audit row's trace id).
#[derive(Clone, Default)]
pub struct Links {
    pub trace_url: Option<String>,
}

/// Sign-in attempts remembered for rate limiting, shared by the listener's handlers.
#[derive(Clone, Default)]
pub struct Limiter(pub Arc<SignInLimiter>);

/// The pages and the routes that need no sign-in (signing in, the first admin's setup).
pub fn public_routes() -> Router<Arc<Pipeline>> {
    use axum::routing::{get, post};
    Router::new()
        .route(
            "/",
            get(|| async { axum::response::Redirect::to("/console") }),
        )
        .route("/console", get(index))
        .route("/setup", get(index))
        .route("/console/app.js", get(app_js))
        .route("/console/app.css", get(app_css))
        .route(
            "/console/vendor/uplot.js",
            get(|| async {
                ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], CHART_JS).into_response()
            }),
        )
        .route(
            "/console/vendor/uplot.css",
            get(|| async {
                ([(CONTENT_TYPE, "text/css; charset=utf-8")], CHART_CSS).into_response()
            }),
        )
        .route("/api/sign-in", post(sign_in))
        .route(
            "/api/sign-in/methods",
            get(crate::console_oidc::sign_in_methods),
        )
        .route("/api/sign-out", post(sign_out))
        .route("/api/setup", post(setup))
}

async fn index() -> Response {
    let mut response = Html(INDEX).into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    // The page runs only its own script and styles, talks only to this server, and cannot be
    // framed by another site.
    response.headers_mut().insert(
        "content-security-policy",
        http::HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    response
        .headers_mut()
        .insert("x-frame-options", http::HeaderValue::from_static("DENY"));
    response
}

async fn app_js() -> Response {
    ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], APP_JS).into_response()
}

async fn app_css() -> Response {
    ([(CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS).into_response()
}

/// The session cookie of a request, if it has one.
pub fn session_cookie(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE_NAME)
        .map(|c| c.value().to_string())
}

/// The `Set-Cookie` value of a new session's cookie.
pub(crate) fn session_cookie_header(value: &str) -> http::HeaderValue {
    set_cookie(value, accounts::SESSION_LIFETIME)
}

fn set_cookie(value: &str, max_age: Duration) -> http::HeaderValue {
    let cookie = cookie::Cookie::build((COOKIE_NAME, value.to_string()))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::seconds(max_age.as_secs() as i64))
        .build();
    http::HeaderValue::from_str(&cookie.to_string())
        .unwrap_or_else(|_| http::HeaderValue::from_static(""))
}

/// A browser's sign-in, setup and cookie-made changes must say where they come from (the
/// gate has already refused any Origin but this console's).
fn needs_origin(headers: &http::HeaderMap) -> Option<Response> {
    if headers.get(ORIGIN).is_none() {
        return Some(error(
            StatusCode::FORBIDDEN,
            "a change from a browser must carry this console's Origin header",
        ));
    }
    None
}

/// Authenticates an admin request (operator token or session cookie) and checks the
/// permission its route needs.
pub async fn authorize(
    State(pipeline): State<Arc<Pipeline>>,
    mut request: Request,
    next: Next,
) -> Response {
    let method = request.method().as_str().to_string();
    // The actor, and the session it signed in with (None for an operator token).
    let (actor, live) = match bearer(request.headers()) {
        Some(token) => match pipeline.authenticate(token) {
            Some(Principal {
                kind: TokenKind::Operator,
                subject,
                ..
            }) => (
                Actor {
                    name: subject,
                    role: "operator-token".into(),
                    permissions: Permission::ALL.to_vec(),
                },
                None,
            ),
            Some(_) => {
                return error(
                    StatusCode::FORBIDDEN,
                    "an agent's token cannot use the admin API; use an operator token (aether tokens create --operator NAME) or sign in to the console",
                );
            }
            None => return unauthorized("the bearer token is unknown or revoked"),
        },
        None => {
            let Some(cookie) = session_cookie(request.headers()) else {
                return unauthorized(
                    "sign in to the console, or send an operator bearer token (aether tokens create --operator NAME)",
                );
            };
            let live = LiveSession {
                cookie,
                key: request
                    .headers()
                    .get(KEY_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string(),
            };
            match accounts::session_account(pipeline.store(), &live.cookie, &live.key).await {
                Ok(Some((account, _))) => (
                    Actor {
                        permissions: roles::role(&account.role)
                            .map(|r| r.permissions.to_vec())
                            .unwrap_or_default(),
                        name: account.name,
                        role: account.role,
                    },
                    Some(live),
                ),
                Ok(None) => {
                    return unauthorized(
                        "the session has ended (or this page does not hold its key); sign in again",
                    );
                }
                Err(e) => {
                    return error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!("the store cannot be read: {e}"),
                    );
                }
            }
        }
    };
    // A change made with a session (a browser) needs this console's Origin.
    if live.is_some()
        && !matches!(method.as_str(), "GET" | "HEAD")
        && let Some(refused) = needs_origin(request.headers())
    {
        return refused;
    }
    request
        .extensions_mut()
        .insert(Operator(actor.name.clone()));
    if let Some(live) = live {
        request.extensions_mut().insert(live);
    }
    request.extensions_mut().insert(actor);
    next.run(request).await
}

/// Checks that whoever [`authorize`] found has `needs`, the permission the route declared
/// (`admin::routes`).
pub async fn require(needs: Permission, request: Request, next: Next) -> Response {
    let Some(actor) = request.extensions().get::<Actor>() else {
        return unauthorized("sign in to the console, or send an operator bearer token");
    };
    if !actor.may(needs) {
        return error(
            StatusCode::FORBIDDEN,
            &format!(
                "{} ({}) does not have the permission {}",
                actor.name,
                actor.role,
                needs.as_str()
            ),
        );
    }
    next.run(request).await
}

/// The secrets of the session a request came with (for streams that re-check it).
#[derive(Clone)]
pub struct LiveSession {
    cookie: String,
    key: String,
}

/// The client, for the sign-in rate limit: its IPv4 address, or its IPv6 /64 (one client
/// holds a whole /64 and could rotate through it); `unknown` where the listener has none.
pub(crate) fn client_of(
    info: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
) -> String {
    info.map(|Extension(axum::extract::ConnectInfo(addr))| client_key(addr.ip()))
        .unwrap_or_else(|| "unknown".into())
}

fn client_key(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
        v4 => v4.to_string(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    name: String,
    password: String,
}

fn account_error(e: AccountError) -> Response {
    match e {
        AccountError::Invalid(message) => error(StatusCode::BAD_REQUEST, &message),
        AccountError::WrongCredentials => error(StatusCode::UNAUTHORIZED, &e.to_string()),
        AccountError::RateLimited(wait) => {
            let mut response = error(StatusCode::TOO_MANY_REQUESTS, &e.to_string());
            if let Ok(v) = http::HeaderValue::from_str(&(wait.as_secs() + 1).to_string()) {
                response.headers_mut().insert("retry-after", v);
            }
            response
        }
        AccountError::Store(aether_store::StoreError::Invalid(message)) => {
            error(StatusCode::CONFLICT, &message)
        }
        AccountError::Store(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

/// The reply to a sign-in: the cookie set, and the key for the page to keep and send.
fn signed_in(new: &accounts::NewSession) -> Response {
    let mut response = Json(json!({
        "account": new.session.account,
        "expires_us": new.session.expires_us,
        "key": new.key,
    }))
    .into_response();
    response.headers_mut().insert(
        SET_COOKIE,
        set_cookie(&new.cookie, accounts::SESSION_LIFETIME),
    );
    response
        .headers_mut()
        .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

async fn sign_in(
    State(pipeline): State<Arc<Pipeline>>,
    Extension(limiter): Extension<Limiter>,
    info: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: http::HeaderMap,
    body: Result<Json<SignIn>, axum::extract::rejection::JsonRejection>,
) -> Response {
    if let Some(refused) = needs_origin(&headers) {
        return refused;
    }
    let Ok(Json(body)) = body else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body must be JSON: {\"name\": \"...\", \"password\": \"...\"}",
        );
    };
    match accounts::sign_in(
        pipeline.store(),
        &limiter.0,
        &client_of(info),
        &body.name,
        &body.password,
    )
    .await
    {
        Ok(new) => signed_in(&new),
        Err(e) => account_error(e),
    }
}

async fn sign_out(State(pipeline): State<Arc<Pipeline>>, headers: http::HeaderMap) -> Response {
    if let Some(refused) = needs_origin(&headers) {
        return refused;
    }
    if let Some(cookie) = session_cookie(&headers)
        && let Err(e) = pipeline
            .store()
            .end_console_session(&accounts::cookie_hash(&cookie))
            .await
    {
        return error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
    }
    let mut response = Json(json!({"signed_out": true})).into_response();
    response
        .headers_mut()
        .insert(SET_COOKIE, set_cookie("", Duration::ZERO));
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    token: String,
    name: String,
    password: String,
}

/// The first admin, made with the one-time setup link `aether serve` printed; signed in at
/// once.
async fn setup(
    State(pipeline): State<Arc<Pipeline>>,
    Extension(limiter): Extension<Limiter>,
    info: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: http::HeaderMap,
    body: Result<Json<Setup>, axum::extract::rejection::JsonRejection>,
) -> Response {
    if let Some(refused) = needs_origin(&headers) {
        return refused;
    }
    let Ok(Json(body)) = body else {
        return error(
            StatusCode::BAD_REQUEST,
            "the body must be JSON: {\"token\", \"name\", \"password\"}",
        );
    };
    // Guessing setup links is rate limited like passwords.
    let client = client_of(info);
    if let Err(wait) = limiter.0.begin(&client, "(setup)") {
        return account_error(AccountError::RateLimited(wait));
    }
    let by = format!("{} (setup link)", body.name);
    if let Err(e) = accounts::create(
        pipeline.store(),
        &body.name,
        &body.password,
        "admin",
        &by,
        Some(&body.token),
    )
    .await
    {
        return account_error(e);
    }
    limiter.0.succeeded(&client, "(setup)");
    match accounts::start_session(pipeline.store(), &body.name).await {
        Ok(new) => signed_in(&new),
        Err(e) => account_error(e),
    }
}

/// What every open page is told: one poller for the whole listener (started with the first
/// stream), whatever the number of pages.
#[derive(Clone, Default)]
pub struct Changes {
    rx: Arc<std::sync::OnceLock<tokio::sync::watch::Receiver<serde_json::Value>>>,
    /// Open streams per operator: each costs a connection, so one operator cannot hold
    /// unboundedly many.
    open: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

/// Open event streams one operator may hold (a console in several tabs; far fewer than a
/// flood).
pub const STREAMS_PER_OPERATOR: usize = 16;

/// One open stream, counted while it lives.
struct StreamSlot {
    open: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    who: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.who);
            }
        }
    }
}

impl Changes {
    fn take_slot(&self, who: &str) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(who.to_string()).or_insert(0);
        if *n >= STREAMS_PER_OPERATOR {
            return None;
        }
        *n += 1;
        Some(StreamSlot {
            open: self.open.clone(),
            who: who.to_string(),
        })
    }

    fn subscribe(
        &self,
        pipeline: &Arc<Pipeline>,
    ) -> tokio::sync::watch::Receiver<serde_json::Value> {
        self.rx
            .get_or_init(|| {
                let (tx, rx) = tokio::sync::watch::channel(serde_json::Value::Null);
                let pipeline = Arc::downgrade(pipeline);
                tokio::spawn(async move {
                    loop {
                        let Some(p) = pipeline.upgrade() else { return };
                        let now = snapshot(&p).await;
                        drop(p);
                        tx.send_if_modified(|last| {
                            if *last == now {
                                false
                            } else {
                                *last = now;
                                true
                            }
                        });
                        tokio::time::sleep(Duration::from_millis(400)).await;
                    }
                });
                rx
            })
            .clone()
    }
}

/// What an event stream was opened with, checked again while it runs.
enum Credential {
    Session(LiveSession),
    Token(String),
}

/// How often an open stream checks that its session (or operator token) still stands.
const STREAM_RECHECK: Duration = Duration::from_secs(30);

/// `GET /api/events`: a server-sent event `changed` whenever approvals, the audit, the halt
/// flag, the registry, the upstreams or the accounts change (the page then reloads what it
/// shows), and a keep-alive comment every 15 s. One poller serves every stream. A stream of a
/// signed-in page ends when its session does (sign-out, expiry, a password or role change),
/// and one opened with an operator token when the token is revoked, checked at least every
/// 30 s: the page then asks to sign in again.
pub async fn events(
    State(pipeline): State<Arc<Pipeline>>,
    Extension(changes): Extension<Changes>,
    Extension(actor): Extension<Actor>,
    session: Option<Extension<LiveSession>>,
    headers: http::HeaderMap,
) -> Response {
    let Some(slot) = changes.take_slot(&actor.name) else {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "{} already has {STREAMS_PER_OPERATOR} event streams open; close a console tab",
                actor.name
            ),
        );
    };
    let rx = changes.subscribe(&pipeline);
    // What the stream was opened with: a signed-in page's session, or an operator token.
    let credential = match session {
        Some(Extension(s)) => Credential::Session(s),
        None => Credential::Token(bearer(&headers).unwrap_or("").to_string()),
    };
    let state = (
        pipeline,
        rx,
        credential,
        true,
        tokio::time::Instant::now(),
        slot,
    );
    let stream = futures::stream::unfold(
        state,
        |(pipeline, mut rx, session, first, mut checked, slot)| async move {
            let mut first = first;
            loop {
                let mut news = first && !rx.borrow().is_null();
                if !news {
                    let wait = tokio::time::sleep_until(checked + STREAM_RECHECK);
                    tokio::select! {
                        changed = rx.changed() => {
                            if changed.is_err() {
                                return None;
                            }
                            news = true;
                        }
                        _ = wait => {}
                    }
                }
                if first || checked.elapsed() >= STREAM_RECHECK {
                    checked = tokio::time::Instant::now();
                    let stands = match &session {
                        Credential::Session(s) => matches!(
                            accounts::session_account(pipeline.store(), &s.cookie, &s.key).await,
                            Ok(Some(_))
                        ),
                        Credential::Token(token) => matches!(
                            pipeline.authenticate(token),
                            Some(Principal {
                                kind: TokenKind::Operator,
                                ..
                            })
                        ),
                    };
                    if !stands {
                        return None;
                    }
                }
                first = false;
                let now = rx.borrow_and_update().clone();
                if !news || now.is_null() {
                    continue;
                }
                let event = Event::default().event("changed").data(now.to_string());
                return Some((
                    Ok::<_, Infallible>(event),
                    (pipeline, rx, session, false, checked, slot),
                ));
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// What the console's pages show, in a few numbers: when one changes, pages reload.
async fn snapshot(pipeline: &Pipeline) -> serde_json::Value {
    let store = pipeline.store();
    let revisions = store.revisions().await.ok();
    let audit_head = store
        .audit_query(aether_store::AuditQuery {
            limit: 1,
            newest_first: true,
            ..Default::default()
        })
        .await
        .ok()
        .and_then(|rows| rows.first().map(|r| r.seq));
    let sources = store
        .upstream_statuses()
        .await
        .map(|s| {
            s.iter()
                .map(|u| format!("{}:{}:{}", u.name, u.connected, u.fingerprint))
                .collect::<Vec<_>>()
        })
        .ok();
    let progress = store
        .documents_of_kind("progress", 1)
        .await
        .ok()
        .and_then(|d| d.first().map(|d| (d.updated_us, d.version)));
    json!({
        "revisions": revisions,
        "audit_head": audit_head,
        "sources": sources,
        "progress": progress,
    })
}

/// `GET /metrics`, behind the view permission.
pub async fn metrics(State(pipeline): State<Arc<Pipeline>>) -> Response {
    match pipeline.metrics_text().await {
        Ok(text) => (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_limits_count_an_ipv6_client_by_its_64() {
        let key = |ip: &str| client_key(ip.parse().unwrap());
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
    }
}

//! The admin JSON API under `/api/`: the operator's registry, approvals, halt, rules, the
//! command log and schema export, on the same listener as `/mcp`, behind the same Host/Origin gate.
//!
//! Every route needs an operator bearer token (`aether tokens create --operator NAME`); an
//! agent's token is refused, so no agent can approve its own calls. (Accounts with passwords,
//! cookies and roles come with the console.) Each change is made through
//! `aether_pipeline::operator`, so it is recorded with who and why and audited, exactly as
//! the same change from the CLI.

use std::sync::Arc;

use aether_pipeline::{Pipeline, PipelineError, Principal, Transport};
use aether_store::{RegistryAction, RegistryChange, StoreError, TokenKind};
use axum::extract::{Path, Query, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::StatusCode;
use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use serde::Deserialize;
use serde_json::{Value, json};

/// The operator an admin request authenticated as.
#[derive(Clone, Debug)]
pub struct Operator(pub String);

pub fn routes() -> Router<Arc<Pipeline>> {
    Router::new()
        .route("/api/registry", get(registry_list))
        .route("/api/registry/history", get(registry_history))
        .route("/api/registry/{name}", get(registry_show))
        .route("/api/registry/{name}/{action}", post(registry_change))
        .route("/api/approvals", get(approvals_list))
        .route("/api/commands", get(commands_list))
        .route("/api/approvals/{id}/{decision}", post(approvals_decide))
        .route("/api/halt", get(halt_state).post(halt))
        .route("/api/resume", post(resume))
        .route("/api/policy", get(policy))
        .route("/api/tools/mcp-schemas", get(schemas))
}

/// The operator-token check in front of every admin route.
pub async fn require_operator(
    State(pipeline): State<Arc<Pipeline>>,
    mut request: Request,
    next: Next,
) -> Response {
    match bearer(request.headers()).map(|t| pipeline.authenticate(t)) {
        Some(Some(Principal {
            kind: TokenKind::Operator,
            subject,
            ..
        })) => {
            request.extensions_mut().insert(Operator(subject));
            next.run(request).await
        }
        Some(Some(_)) => error(
            StatusCode::FORBIDDEN,
            "an agent's token cannot use the admin API; use an operator token (aether tokens create --operator NAME)",
        ),
        Some(None) => unauthorized("the bearer token is unknown or revoked"),
        None => unauthorized(
            "the admin API needs an operator bearer token (aether tokens create --operator NAME)",
        ),
    }
}

/// The token of an `Authorization: Bearer …` header; `None` without one. A malformed header
/// counts as a token nobody has.
pub fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return Some("");
    }
    let text = value.to_str().unwrap_or("");
    let (scheme, token) = text.split_once(' ').unwrap_or((text, ""));
    if scheme.eq_ignore_ascii_case("bearer") {
        Some(token.trim())
    } else {
        Some("")
    }
}

pub fn unauthorized(message: &str) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    response
}

pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

fn failed(e: impl Into<PipelineError>) -> Response {
    match e.into() {
        PipelineError::Store(StoreError::Invalid(message)) => error(StatusCode::CONFLICT, &message),
        PipelineError::UnknownAgent { name, known } => error(
            StatusCode::NOT_FOUND,
            &format!("no agent is named {name:?}; configured agents: {known}"),
        ),
        other => error(StatusCode::INTERNAL_SERVER_ERROR, &other.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Why {
    why: String,
    /// For approve: the definition digest the operator reviewed.
    #[serde(default)]
    digest: Option<String>,
}

fn why_of(body: Result<Json<Why>, axum::extract::rejection::JsonRejection>) -> Result<Why, String> {
    why_with(body, false)
}

/// The body of a change: `{"why": "…"}`, plus `"digest"` where `digest` is allowed (a registry
/// approval); anything else is refused rather than ignored.
fn why_with(
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
    digest: bool,
) -> Result<Why, String> {
    match body {
        Ok(Json(why)) if why.digest.is_some() && !digest => {
            Err("\"digest\" belongs to a registry approval only".into())
        }
        Ok(Json(why)) if !why.why.trim().is_empty() => Ok(why),
        Ok(_) => Err("say why: {\"why\": \"...\"}".into()),
        Err(e) => Err(format!("the body must be JSON {{\"why\": \"...\"}}: {e}")),
    }
}

async fn registry_list(State(p): State<Arc<Pipeline>>) -> Response {
    match p.store().registry().await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(e),
    }
}

async fn registry_show(State(p): State<Arc<Pipeline>>, Path(name): Path<String>) -> Response {
    match p.store().registry().await {
        Ok(rows) => match rows.into_iter().find(|r| r.name == name) {
            Some(row) => Json(row).into_response(),
            None => error(
                StatusCode::NOT_FOUND,
                &format!("the registry has no tool named {name:?}"),
            ),
        },
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
struct HistoryQuery {
    name: Option<String>,
}

async fn registry_history(
    State(p): State<Arc<Pipeline>>,
    Query(q): Query<HistoryQuery>,
) -> Response {
    match p.store().registry_history(q.name).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(e),
    }
}

async fn registry_change(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path((name, action)): Path<(String, String)>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let why = match why_with(body, action == "approve") {
        Ok(why) => why,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let action = match action.as_str() {
        "approve" => RegistryAction::Approve { digest: why.digest },
        "withdraw" => RegistryAction::Withdraw,
        "undo" => RegistryAction::Undo,
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "registry actions are approve, withdraw and undo",
            );
        }
    };
    let change = RegistryChange {
        name,
        action,
        by: format!("{by} (api)"),
        why: why.why,
    };
    match p.change_registry(change).await {
        Ok(row) => Json(row).into_response(),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
struct ApprovalsQuery {
    #[serde(default)]
    all: bool,
}

async fn approvals_list(
    State(p): State<Arc<Pipeline>>,
    Query(q): Query<ApprovalsQuery>,
) -> Response {
    match p.store().approvals(!q.all, 500).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
struct CommandsQuery {
    agent: Option<String>,
    call: Option<String>,
    limit: Option<usize>,
}

/// The command log (`run_command`, `run_shell`), newest first.
async fn commands_list(State(p): State<Arc<Pipeline>>, Query(q): Query<CommandsQuery>) -> Response {
    let query = aether_store::CommandQuery {
        agent: q.agent,
        call_id: q.call,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
    };
    match p.store().commands(query).await {
        Ok(rows) => Json(rows).into_response(),
        Err(e) => failed(e),
    }
}

async fn approvals_decide(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path((id, decision)): Path<(String, String)>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let why = match why_of(body) {
        Ok(why) => why,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return error(StatusCode::NOT_FOUND, "decisions are approve and deny"),
    };
    match p.store().approval(&id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return error(
                StatusCode::NOT_FOUND,
                &format!("no call waiting for approval has id {id:?}"),
            );
        }
        Err(e) => return failed(e),
    }
    match p
        .decide(&id, approve, &format!("{by} (api)"), &why.why)
        .await
    {
        Ok(row) => Json(row).into_response(),
        Err(e) => failed(e),
    }
}

async fn halt_state(State(p): State<Arc<Pipeline>>) -> Response {
    match p.store().halt_state().await {
        Ok(state) => Json(state).into_response(),
        Err(e) => failed(e),
    }
}

async fn set_halt(
    p: Arc<Pipeline>,
    by: String,
    halted: bool,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let why = match why_of(body) {
        Ok(why) => why,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    match p.set_halt(halted, &format!("{by} (api)"), &why.why).await {
        Ok(state) => Json(state).into_response(),
        Err(e) => failed(e),
    }
}

async fn halt(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Response {
    set_halt(p, by, true, body).await
}

async fn resume(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Response {
    set_halt(p, by, false, body).await
}

async fn policy(State(p): State<Arc<Pipeline>>) -> Response {
    let rules = p.rules().current();
    let summary: Vec<Value> = rules
        .rules()
        .map(|r| {
            json!({
                "position": r.position,
                "name": r.name,
                "action": r.action.as_str(),
                "matches": r.matches,
                "reason": r.reason,
            })
        })
        .collect();
    Json(json!({
        "file": p.rules().path().map(|p| p.display().to_string()),
        "rules": summary,
        "last_error": p.rules().last_error(),
    }))
    .into_response()
}

#[derive(Deserialize)]
struct AgentQuery {
    agent: Option<String>,
}

async fn schemas(State(p): State<Arc<Pipeline>>, Query(q): Query<AgentQuery>) -> Response {
    let agent = q
        .agent
        .unwrap_or_else(|| aether_policy::config::DEFAULT_AGENT.to_string());
    let session = match p.session(&agent, Transport::InProcess, "api".into()) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    Json(p.openai_functions(&session)).into_response()
}

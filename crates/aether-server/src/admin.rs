//! The admin JSON API under `/api/` (and `/metrics`): approvals, audit, registry, agents,
//! rules, halt, the command log, upstreams and their data, accounts — on the same listener as
//! `/mcp`, behind the same Host/Origin gate, described by `openapi.json` (served at
//! `/api/openapi.json` and checked against these routes by a test).
//!
//! Every route is behind `console::authorize` (a session cookie or an operator bearer token)
//! and declares, where it is routed, the permission it needs ([`routes`]). An agent's token is refused, so no agent can approve its
//! own calls. Each change is made through `aether_pipeline::operator` (or `accounts`), so it is
//! recorded with who and why and audited, exactly as the same change from the CLI.

use std::sync::Arc;

use aether_pipeline::{Pipeline, Transport};
use aether_policy::roles::Permission;
use aether_store::{RegistryAction, RegistryChange, StoreError};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::ApiError;
use crate::console::Operator;

/// What a handler answers: its response, or why the request cannot be served.
type Answer = Result<Response, ApiError>;

pub fn routes() -> Router<Arc<Pipeline>> {
    guarded().router
}

/// Every admin route's method and path (as routed, `{name}` for a parameter) and the
/// permission it declares.
pub fn permissions() -> Vec<(&'static str, &'static str, Permission)> {
    guarded().declared
}

fn guarded() -> Guarded {
    use Permission::*;
    Guarded::default()
        .get("/api/registry", View, registry_list)
        .get("/api/registry/history", View, registry_history)
        .get("/api/registry/{name}", View, registry_show)
        .post(
            "/api/registry/{name}/{action}",
            ManageRegistry,
            registry_change,
        )
        .get("/api/approvals", View, approvals_list)
        .get("/api/commands", View, commands_list)
        .get("/api/overview", View, overview)
        .get("/api/journal", View, journal_list)
        .post("/api/journal/{call_id}/undo", UndoChanges, journal_undo)
        .get("/api/tokens", ManageAgents, tokens_list)
        .post("/api/tokens", ManageAgents, token_create)
        .post("/api/tokens/{id}/revoke", ManageAgents, token_revoke)
        .get("/api/runs", View, runs_list)
        .get("/api/runs/{id}", View, run_show)
        .post("/api/runs/{id}/stop", Halt, run_stop)
        .get("/api/approvals/{id}/context", View, approval_context)
        .post(
            "/api/approvals/{id}/{decision}",
            ApproveCalls,
            approvals_decide,
        )
        .get("/api/halt", View, halt_state)
        .post("/api/halt", Halt, halt)
        .post("/api/resume", Halt, resume)
        .get("/api/policy", View, policy)
        .get("/api/tools/mcp-schemas", View, schemas)
        .get("/api/sources", View, sources_list)
        .post("/api/sources/refresh", ManageSources, sources_refresh)
        .get("/api/sources/datasets", View, datasets_list)
        .get("/api/sources/datasets/{call_id}", View, dataset_export)
        .get("/api/sources/reports", View, reports_list)
        .post("/api/sources/reports/{name}", ManageSources, report_save)
        .post(
            "/api/sources/reports/{name}/{action}",
            ManageSources,
            report_action,
        )
        .get("/api/sources/{name}", View, source_show)
        .post("/api/sources/{name}/approve", ManageSources, source_approve)
        .get("/api/session", View, session_info)
        .get("/api/events", View, crate::console::events)
        .get("/api/audit", View, audit_search)
        .get("/api/audit/export", View, audit_export)
        .post("/api/audit/verify", View, audit_verify)
        .get("/api/agents", View, agents_list)
        .post("/api/policy/replay", ManagePolicy, policy_replay)
        .get("/api/accounts", ManageAccounts, accounts_list)
        .post("/api/accounts", ManageAccounts, account_create)
        .post("/api/accounts/{name}", ManageAccounts, account_update)
        .post(
            "/api/accounts/{name}/remove",
            ManageAccounts,
            account_remove,
        )
        .get("/api/progress", View, progress_list)
        .get("/api/openapi.json", View, openapi)
        .get("/metrics", View, crate::console::metrics)
}

/// The admin routes, each method of each declared with the permission it needs: the router
/// is built only through [`Guarded::get`] and [`Guarded::post`], so no route exists without
/// one (`console::authorize` finds who is asking; [`crate::console::require`], layered on the
/// route itself, checks the permission).
#[derive(Default)]
struct Guarded {
    router: Router<Arc<Pipeline>>,
    /// What was declared: (method, path, permission).
    declared: Vec<(&'static str, &'static str, Permission)>,
}

impl Guarded {
    fn get<H, T>(self, path: &'static str, needs: Permission, handler: H) -> Guarded
    where
        H: axum::handler::Handler<T, Arc<Pipeline>>,
        T: 'static,
    {
        self.at(path, "GET", needs, get(handler))
    }

    fn post<H, T>(self, path: &'static str, needs: Permission, handler: H) -> Guarded
    where
        H: axum::handler::Handler<T, Arc<Pipeline>>,
        T: 'static,
    {
        self.at(path, "POST", needs, post(handler))
    }

    fn at(
        mut self,
        path: &'static str,
        method: &'static str,
        needs: Permission,
        route: axum::routing::MethodRouter<Arc<Pipeline>>,
    ) -> Guarded {
        self.declared.push((method, path, needs));
        let route = route.route_layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                crate::console::require(needs, request, next)
            },
        ));
        Guarded {
            router: self.router.route(path, route),
            declared: self.declared,
        }
    }
}

/// The OpenAPI description of this API (kept true by a test against these routes).
pub const OPENAPI: &str = include_str!("../openapi.json");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Why {
    why: String,
    /// For approve: the definition digest the operator reviewed.
    #[serde(default)]
    digest: Option<String>,
}

fn why_of(
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Result<Why, ApiError> {
    why_with(body, false)
}

/// The body of a change: `{"why": "…"}`, plus `"digest"` where `digest` is allowed (a registry
/// approval); anything else is refused rather than ignored.
fn why_with(
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
    digest: bool,
) -> Result<Why, ApiError> {
    match body {
        Ok(Json(why)) if why.digest.is_some() && !digest => Err(ApiError::bad_request(
            "\"digest\" belongs to a registry approval only",
        )),
        Ok(Json(why)) if !why.why.trim().is_empty() => Ok(why),
        Ok(_) => Err(ApiError::bad_request("say why: {\"why\": \"...\"}")),
        Err(e) => Err(ApiError::bad_request(format!(
            "the body must be JSON {{\"why\": \"...\"}}: {e}"
        ))),
    }
}

async fn registry_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let rows = p.store().registry().await?;
    // Each row with what the definition screen found in it.
    let screen = aether_pipeline::screening::screen_for(&rows);
    let listed: Vec<Value> = rows
        .iter()
        .map(|row| {
            let mut v = serde_json::to_value(row).unwrap_or_default();
            v["findings"] = json!(aether_pipeline::screening::screen_row(&screen, row).findings);
            v
        })
        .collect();
    Ok(Json(listed).into_response())
}

async fn registry_show(State(p): State<Arc<Pipeline>>, Path(name): Path<String>) -> Answer {
    let rows = p.store().registry().await?;
    let row = rows
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| ApiError::not_found(format!("the registry has no tool named {name:?}")))?;
    let screened =
        aether_pipeline::screening::screen_row(&aether_pipeline::screening::screen_for(&rows), row);
    let mut v = serde_json::to_value(row).unwrap_or_default();
    v["diff"] = json!(definition_diff(row));
    v["findings"] = json!(screened.findings);
    v["new_findings"] = json!(screened.new_since_approval);
    Ok(Json(v).into_response())
}

#[derive(Deserialize)]
struct HistoryQuery {
    name: Option<String>,
}

async fn registry_history(State(p): State<Arc<Pipeline>>, Query(q): Query<HistoryQuery>) -> Answer {
    Ok(Json(p.store().registry_history(q.name).await?).into_response())
}

async fn registry_change(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path((name, action)): Path<(String, String)>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let why = why_with(body, action == "approve")?;
    let action = match action.as_str() {
        "approve" => RegistryAction::Approve { digest: why.digest },
        "withdraw" => RegistryAction::Withdraw,
        "undo" => RegistryAction::Undo,
        _ => {
            return Err(ApiError::not_found(
                "registry actions are approve, withdraw and undo",
            ));
        }
    };
    let change = RegistryChange {
        name,
        action,
        by: format!("{by} (api)"),
        why: why.why,
    };
    Ok(Json(p.change_registry(change).await?).into_response())
}

#[derive(Deserialize)]
struct ApprovalsQuery {
    #[serde(default)]
    all: bool,
}

async fn approvals_list(State(p): State<Arc<Pipeline>>, Query(q): Query<ApprovalsQuery>) -> Answer {
    Ok(Json(p.store().approvals(!q.all, 500).await?).into_response())
}

#[derive(Deserialize)]
struct CommandsQuery {
    agent: Option<String>,
    call: Option<String>,
    limit: Option<usize>,
}

/// The command log (`run_command`, `run_shell`), newest first.
async fn commands_list(State(p): State<Arc<Pipeline>>, Query(q): Query<CommandsQuery>) -> Answer {
    let query = aether_store::CommandQuery {
        agent: q.agent,
        call_id: q.call,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
    };
    Ok(Json(p.store().commands(query).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverviewQuery {
    window: Option<String>,
}

/// The windows the overview offers, each with the span its chart's bars cover.
const WINDOWS: [(&str, i64, i64); 6] = [
    ("15m", 15 * MINUTE, MINUTE),
    ("1h", 60 * MINUTE, MINUTE),
    ("6h", 6 * 60 * MINUTE, 5 * MINUTE),
    ("24h", 24 * 60 * MINUTE, 15 * MINUTE),
    ("7d", 7 * 24 * 60 * MINUTE, 2 * 60 * MINUTE),
    ("30d", 30 * 24 * 60 * MINUTE, 6 * 60 * MINUTE),
];
const MINUTE: i64 = 60_000_000;

/// The console's landing page: calls over the window by outcome, refusals by step and rule,
/// latency per tool (all from the per-minute and per-hour counts of the audit), approvals waiting
/// and decided (with the time people took), upstream health and the halt.
async fn overview(State(p): State<Arc<Pipeline>>, Query(q): Query<OverviewQuery>) -> Answer {
    let name = q.window.as_deref().unwrap_or("1h");
    let Some(&(name, length, span)) = WINDOWS.iter().find(|(w, _, _)| *w == name) else {
        return Err(ApiError::bad_request(format!(
            "window is one of {}",
            WINDOWS.map(|(w, _, _)| w).join(", ")
        )));
    };
    let store = p.store();
    let now = aether_store::now_us();
    // Whole spans, the last one holding now.
    let until = (now / span + 1) * span;
    let since = until - length;
    // The calls since the watcher's last count, counted now: the page is never a second behind.
    store.count_calls().await?;
    let calls = store.call_overview(since, until, span).await?;
    let approvals = store.approvals(false, 500).await?;
    let in_window = approvals
        .iter()
        .filter(|a| a.request.requested_at_us >= since);
    let (mut waiting, mut approved, mut denied, mut expired, mut waits) = (0, 0, 0, 0, Vec::new());
    for a in in_window {
        match a.state {
            aether_store::ApprovalState::Pending if a.request.expires_at_us > now => waiting += 1,
            aether_store::ApprovalState::Pending | aether_store::ApprovalState::Expired => {
                expired += 1
            }
            aether_store::ApprovalState::Approved => approved += 1,
            aether_store::ApprovalState::Denied => denied += 1,
            aether_store::ApprovalState::Cancelled => {}
        }
        if let (Some(at), true) = (
            a.decided_at_us,
            matches!(
                a.state,
                aether_store::ApprovalState::Approved | aether_store::ApprovalState::Denied
            ),
        ) {
            waits.push(at - a.request.requested_at_us);
        }
    }
    waits.sort_unstable();
    let median_wait = waits.get(waits.len() / 2).copied();
    let upstreams: Vec<Value> = store
        .upstream_statuses()
        .await?
        .into_iter()
        .map(|u| {
            json!({"name": u.name, "connected": u.connected, "tools": u.tool_count,
                   "last_error": u.last_error, "updated_us": u.updated_us})
        })
        .collect();
    Ok(Json(json!({
        "window": name,
        "windows": WINDOWS.map(|(w, _, _)| w),
        "now_us": now,
        "calls": calls,
        "approvals": {
            "waiting": waiting, "approved": approved, "denied": denied, "expired": expired,
            "median_decision_us": median_wait,
        },
        "upstreams": upstreams,
        "halt": store.halt_state().await?,
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JournalFilter {
    root: Option<String>,
    path: Option<String>,
    call: Option<String>,
    session: Option<String>,
    limit: Option<usize>,
}

/// The journal of file changes, newest first: what each call changed, and what undid it.
async fn journal_list(State(p): State<Arc<Pipeline>>, Query(q): Query<JournalFilter>) -> Answer {
    let query = aether_store::JournalQuery {
        session: q.session,
        call_id: q.call,
        root: q.root,
        path: q.path,
        live_only: false,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
    };
    Ok(Json(p.store().journal_entries(query).await?).into_response())
}

/// One file of a call to undo (`/api/journal/{call}/undo`'s optional body).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UndoFile {
    root: String,
    path: String,
}

/// Undoes every file change one call made (or, with a body, its changes to one file), as
/// `aether undo CALL_ID [--file ROOT:PATH]` does: the undo is a call of its own (journalled
/// and audited), and its result is the answer.
async fn journal_undo(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(call_id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    // No body: the whole call; {"root", "path"}: that file's changes only.
    let file: Option<UndoFile> = if body.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body is empty (undo the whole call) or {{\"root\", \"path\"}} (one file): {e}"
            ))
        })?)
    };
    let result = p
        .operator_undo(
            &format!("{by} (api)"),
            &call_id,
            file.as_ref().map(|f| (f.root.as_str(), f.path.as_str())),
        )
        .await;
    let text = |output: &aether_tools::ToolOutput| {
        output
            .content
            .iter()
            .filter_map(|c| match c {
                aether_tools::Content::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match result.outcome {
        aether_pipeline::CallOutcome::Ran(output) if !output.is_error => Ok(Json(json!({
            "undone": call_id,
            "file": file.map(|f| json!({"root": f.root, "path": f.path})),
            "undo_call": result.call_id,
            "result": text(&output),
        }))
        .into_response()),
        // Nothing to undo, already undone, a file changed since: the tool says which.
        aether_pipeline::CallOutcome::Ran(output) => Err(ApiError::conflict(text(&output))),
        other => Err(ApiError::conflict(format!(
            "the undo did not run: {other:?}"
        ))),
    }
}

/// Every token (agents' and operators'), without secrets.
async fn tokens_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let rows: Vec<Value> = p
        .store()
        .tokens()
        .await?
        .into_iter()
        .map(|(row, _)| json!(row))
        .collect();
    Ok(Json(rows).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewToken {
    agent: String,
    #[serde(default)]
    label: String,
}

/// Mints an agent's token; the secret is in this answer only. Operator tokens (every
/// permission) are made on the command line, never here: managing agents must not reach
/// managing accounts.
async fn token_create(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<NewToken>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Json(new) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "the body must be JSON {{\"agent\": \"NAME\", \"label\": \"...\"}}: {e}"
        ))
    })?;
    if !p.agents().any(|a| a.name == new.agent) {
        return Err(ApiError::not_found(format!(
            "no agent is named {:?}; configured agents: {}",
            new.agent,
            p.agents()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if new.label.chars().count() > 200 || new.label.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "a label is at most 200 characters, none of them control characters",
        ));
    }
    let (row, token) = aether_pipeline::tokens::mint(
        p.store(),
        aether_store::TokenKind::Agent,
        &new.agent,
        &new.label,
        &format!("{by} (api)"),
    )
    .await?;
    Ok(Json(json!({"token": token, "row": row})).into_response())
}

/// Revokes an agent's token. An operator token is revoked on the command line only (see
/// [`token_create`]).
async fn token_revoke(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(id): Path<String>,
) -> Answer {
    let tokens = p.store().tokens().await?;
    let Some((row, _)) = tokens.iter().find(|(row, _)| row.id == id) else {
        return Err(ApiError::not_found(format!("no token has id {id:?}")));
    };
    if row.kind != aether_store::TokenKind::Agent {
        return Err(ApiError::new(
            http::StatusCode::FORBIDDEN,
            "an operator token is revoked on the command line: aether tokens revoke ID",
        ));
    }
    if row.revoked_at_us.is_some() {
        return Err(ApiError::conflict(format!("token {id} is already revoked")));
    }
    let row = aether_pipeline::tokens::revoke(p.store(), &id, &format!("{by} (api)")).await?;
    Ok(Json(row).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsFilter {
    limit: Option<usize>,
}

/// Agent runs, newest first.
async fn runs_list(State(p): State<Arc<Pipeline>>, Query(q): Query<RunsFilter>) -> Answer {
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    Ok(Json(p.store().runs(limit).await?).into_response())
}

/// One run and its transcript.
async fn run_show(State(p): State<Arc<Pipeline>>, Path(id): Path<String>) -> Answer {
    let Some(run) = p.store().run(&id).await? else {
        return Err(ApiError::not_found(format!("no run has id {id:?}")));
    };
    let events: Vec<Value> = p
        .store()
        .run_events(&id)
        .await?
        .iter()
        .map(|e| {
            json!({"seq": e.seq, "at_us": e.at_us, "kind": e.kind,
                "body": serde_json::from_str::<Value>(&e.body).unwrap_or(Value::Null)})
        })
        .collect();
    Ok(Json(json!({"run": run, "events": events})).into_response())
}

/// Asks a running run to stop (before its next model request or tool call), with a reason.
async fn run_stop(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(id): Path<String>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let why = why_of(body)?;
    if p.store()
        .run_stop(&id, &format!("{by} (api)"), &why.why)
        .await?
    {
        return Ok(Json(json!({"stopping": id})).into_response());
    }
    match p.store().run(&id).await? {
        None => Err(ApiError::not_found(format!("no run has id {id:?}"))),
        Some(r) => Err(ApiError::conflict(format!(
            "run {id} is not running (it is {})",
            r.status
        ))),
    }
}

/// The most of a file's text shown in an approval's diff.
const MAX_DIFF_BYTES: u64 = 256 << 10;

/// What a person deciding a waiting call needs beside its arguments: what it would change
/// (a unified diff for `write_file` against the file as it is now, and for `edit_file` of its
/// search and replace texts), run (the command, its arguments and folder) or send (method,
/// URL, body size); and the agent's latest calls in the same session.
async fn approval_context(State(p): State<Arc<Pipeline>>, Path(id): Path<String>) -> Answer {
    let Some(row) = p.store().approval(&id).await? else {
        return Err(ApiError::not_found(format!(
            "no call waiting for approval has id {id:?}"
        )));
    };
    let args: Value = serde_json::from_str(&row.request.arguments).unwrap_or(Value::Null);
    let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    let detail = match row.request.tool.as_str() {
        "write_file" => {
            let (path, content) = (
                text("path").unwrap_or_default(),
                text("content").unwrap_or_default(),
            );
            let pipeline = p.clone();
            let (root, shown) = (text("root"), path.clone());
            let before = tokio::task::spawn_blocking(move || {
                current_text(&pipeline, root.as_deref(), &path)
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            match before {
                Ok(before) => json!({
                    "kind": "diff", "path": shown, "exists": before.is_some(),
                    "diff": unified(before.as_deref().unwrap_or(""), &content, &shown),
                }),
                Err(why) => json!({"kind": "diff", "path": shown, "unavailable": why}),
            }
        }
        tool => described(tool, &args),
    };
    let recent = p
        .store()
        .audit_query(aether_store::AuditQuery {
            session: Some(row.request.session.clone()),
            limit: 10,
            newest_first: true,
            ..Default::default()
        })
        .await?;
    let recent: Vec<Value> = recent
        .iter()
        .map(|r| {
            let e = &r.event;
            json!({"at_us": e.at_us, "tool": e.tool, "outcome": e.outcome, "call_id": e.call_id,
                   "rule": e.rule, "reason": e.reason})
        })
        .collect();
    Ok(Json(json!({"approval": row, "detail": detail, "recent": recent})).into_response())
}

/// What a call of `tool` with `args` would do, from its arguments alone: the diff of an
/// `edit_file`'s search and replace texts, the command a `run_command` or `run_shell` runs and
/// where, the method, URL and body size of a call with a `url`.
fn described(tool: &str, args: &Value) -> Value {
    let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    match tool {
        "edit_file" => {
            let path = text("path").unwrap_or_default();
            let pairs: Vec<(String, String)> = match args.get("edits").and_then(Value::as_array) {
                Some(edits) => edits
                    .iter()
                    .map(|e| {
                        let t =
                            |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                        (t("search"), t("replace"))
                    })
                    .collect(),
                None => vec![(
                    text("search").unwrap_or_default(),
                    text("replace").unwrap_or_default(),
                )],
            };
            let diff: String = pairs.iter().map(|(a, b)| unified(a, b, &path)).collect();
            json!({"kind": "diff", "path": path, "exists": true, "diff": diff})
        }
        "run_command" | "run_shell" => json!({
            "kind": "command",
            "command": text("command"),
            "args": args.get("args").cloned().unwrap_or(json!([])),
            "root": text("root"),
            "cwd": text("cwd").unwrap_or_else(|| ".".into()),
        }),
        _ if args.get("url").is_some_and(Value::is_string) => json!({
            "kind": "request",
            "method": text("method").unwrap_or_else(|| "GET".into()),
            "url": text("url"),
            "body_bytes": text("body").map_or(0, |b| b.len()),
        }),
        _ => json!({"kind": "arguments"}),
    }
}

/// The text of `path` in the roots as it is now, read as a tool would read it (confined, no
/// credential file, no link out), `None` when there is no such file; an error when it cannot
/// be shown (too large, not text, refused).
fn current_text(p: &Pipeline, root: Option<&str>, path: &str) -> Result<Option<String>, String> {
    use std::io::Read;
    let roots = p.roots();
    let mut rel = String::new();
    let loc = roots
        .locate(root, path, &mut rel)
        .map_err(|e| e.to_string())?;
    let opening = aether_tools::Opening::unruled(roots.credentials());
    let (file, meta) = match loc.root.open_file(loc.rel, opening) {
        Ok(opened) => opened,
        Err(aether_tools::ToolError::Failed(m)) if m.ends_with("no such file or folder") => {
            return Ok(None);
        }
        Err(e) => return Err(e.to_string()),
    };
    if meta.len() > MAX_DIFF_BYTES {
        return Err(format!(
            "the file is {} bytes; diffs are shown up to {MAX_DIFF_BYTES}",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_DIFF_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "the file is not UTF-8 text".to_string())
}

/// A unified diff from `before` to `after` (three lines of context).
fn unified(before: &str, after: &str, path: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

async fn approvals_decide(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path((id, decision)): Path<(String, String)>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let why = why_of(body)?;
    let approve = match decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return Err(ApiError::not_found("decisions are approve and deny")),
    };
    if p.store().approval(&id).await?.is_none() {
        return Err(ApiError::not_found(format!(
            "no call waiting for approval has id {id:?}"
        )));
    }
    let row = p
        .decide(&id, approve, &format!("{by} (api)"), &why.why)
        .await?;
    Ok(Json(row).into_response())
}

async fn halt_state(State(p): State<Arc<Pipeline>>) -> Answer {
    Ok(Json(p.store().halt_state().await?).into_response())
}

async fn set_halt(
    p: Arc<Pipeline>,
    by: String,
    halted: bool,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let why = why_of(body)?;
    let state = p.set_halt(halted, &format!("{by} (api)"), &why.why).await?;
    Ok(Json(state).into_response())
}

async fn halt(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    set_halt(p, by, true, body).await
}

async fn resume(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<Why>, axum::extract::rejection::JsonRejection>,
) -> Answer {
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

async fn schemas(State(p): State<Arc<Pipeline>>, Query(q): Query<AgentQuery>) -> Answer {
    let agent = q
        .agent
        .unwrap_or_else(|| aether_policy::config::DEFAULT_AGENT.to_string());
    let session = p.session(&agent, Transport::InProcess, "api".into())?;
    Ok(Json(p.openai_functions(&session)).into_response())
}

/// An upstream's recorded status, its listing as JSON.
fn status_json(s: aether_store::UpstreamStatus) -> Value {
    let listing: Value = serde_json::from_str(&s.listing).unwrap_or_default();
    let mut v = serde_json::to_value(&s).unwrap_or_default();
    v["listing"] = listing;
    v
}

async fn sources_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let rows = p.store().upstream_statuses().await?;
    Ok(Json(rows.into_iter().map(status_json).collect::<Vec<_>>()).into_response())
}

async fn source_show(State(p): State<Arc<Pipeline>>, Path(name): Path<String>) -> Answer {
    let rows = p.store().upstream_statuses().await?;
    let status = rows
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ApiError::not_found(format!("no upstream {name:?} has been seen")))?;
    Ok(Json(status_json(status)).into_response())
}

async fn sources_refresh(State(p): State<Arc<Pipeline>>) -> Answer {
    p.store().request_sources_refresh().await?;
    Ok(Json(json!({"refresh": "requested"})).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceApproval {
    why: String,
    /// The fingerprint the operator reviewed; refused if the upstream's tools changed since.
    #[serde(default)]
    fingerprint: Option<String>,
}

async fn source_approve(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(name): Path<String>,
    body: Result<Json<SourceApproval>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON: {\"why\": \"...\", \"fingerprint\": \"optional\"}",
        ));
    };
    let by = format!("{by} (api)");
    let rows = aether_pipeline::operator::approve_source(
        p.store(),
        &name,
        body.fingerprint.as_deref(),
        &by,
        &body.why,
        p.screen(),
    )
    .await?;
    p.sync().await?;
    Ok(Json(json!({ "approved": rows })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitQuery {
    #[serde(default)]
    limit: Option<usize>,
}

async fn datasets_list(State(p): State<Arc<Pipeline>>, Query(q): Query<LimitQuery>) -> Answer {
    Ok(Json(p.store().datasets(q.limit.unwrap_or(100)).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    #[serde(default)]
    format: Option<String>,
}

async fn dataset_export(
    State(p): State<Arc<Pipeline>>,
    Path(call_id): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Answer {
    let dataset = p
        .store()
        .dataset(&call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no data set for call {call_id:?}")))?;
    match q.format.as_deref().unwrap_or("json") {
        "json" => Ok(Json(aether_pipeline::tables::to_json(&dataset)).into_response()),
        "csv" => {
            let text = aether_pipeline::tables::to_csv(&dataset).map_err(ApiError::internal)?;
            Ok((
                [
                    (
                        http::header::CONTENT_TYPE,
                        "text/csv; charset=utf-8".to_string(),
                    ),
                    (
                        http::header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{call_id}.csv\""),
                    ),
                ],
                text,
            )
                .into_response())
        }
        other => Err(ApiError::bad_request(format!(
            "format {other:?}: use csv or json"
        ))),
    }
}

async fn reports_list(State(p): State<Arc<Pipeline>>) -> Answer {
    Ok(Json(p.store().reports().await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveReport {
    /// The call whose tool and arguments the report runs again.
    from: String,
}

async fn report_save(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(name): Path<String>,
    body: Result<Json<SaveReport>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON: {\"from\": \"CALL_ID\"} (a call that returned a table)",
        ));
    };
    if !aether_policy::is_plain_name(&name) {
        return Err(ApiError::bad_request(
            "a report name is 1-64 of letters, digits, -, _ and .",
        ));
    }
    let dataset = p
        .store()
        .dataset(&body.from)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no data set for call {:?}", body.from)))?;
    let report = aether_store::Report {
        name,
        tool: dataset.tool,
        arguments: dataset.arguments,
        agent: dataset.agent,
        saved_by: format!("{by} (api)"),
        at_us: aether_store::now_us(),
        last_call: Some(dataset.call_id),
    };
    p.store().save_report(report.clone()).await?;
    Ok(Json(report).into_response())
}

async fn report_action(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path((name, action)): Path<(String, String)>,
) -> Answer {
    let no_report = || ApiError::not_found(format!("no report named {name:?}"));
    let report = p
        .store()
        .reports()
        .await?
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(no_report)?;
    match action.as_str() {
        "run" => {
            let (call_id, _) =
                aether_pipeline::tables::run_report(&p, &report, &format!("{by} (api)"))
                    .await
                    .map_err(ApiError::conflict)?;
            p.store().report_ran(&name, &call_id).await?;
            Ok(match p.store().dataset(&call_id).await? {
                Some(d) => Json(aether_pipeline::tables::to_json(&d)).into_response(),
                None => Json(
                    json!({"call_id": call_id, "rows": null, "note": "the call returned no table"}),
                )
                .into_response(),
            })
        }
        "remove" => match p.store().remove_report(&name).await? {
            true => Ok(Json(json!({"removed": name})).into_response()),
            false => Err(no_report()),
        },
        _ => Err(ApiError::not_found("report actions are run and remove")),
    }
}

/// A changed definition against the approved one, as a unified diff of their pretty JSON
/// (`None` when nothing changed or nothing was approved).
fn definition_diff(row: &aether_store::RegistryRow) -> Option<String> {
    let approved = row.approved_definition.as_deref()?;
    if row.approved_digest == row.seen_digest {
        return None;
    }
    let pretty = |text: &str| {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| text.to_string())
    };
    let (before, after) = (pretty(approved), pretty(&row.definition));
    Some(
        similar::TextDiff::from_lines(&before, &after)
            .unified_diff()
            .header("approved", "seen now")
            .to_string(),
    )
}

async fn openapi() -> Response {
    ([(http::header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn session_info(
    Extension(actor): Extension<crate::console::Actor>,
    links: Option<Extension<crate::console::Links>>,
) -> Response {
    Json(json!({
        "name": actor.name,
        "role": actor.role,
        "permissions": actor.permissions,
        "trace_url": links.and_then(|Extension(l)| l.trace_url),
    }))
    .into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditFilter {
    agent: Option<String>,
    tool: Option<String>,
    /// The outcome (ok, tool_error, refused, cancelled, timed_out, failed).
    outcome: Option<String>,
    /// Rows at or after this time, µs since the epoch.
    since_us: Option<i64>,
    /// Rows before this time, µs since the epoch.
    until_us: Option<i64>,
    /// A call id.
    call_id: Option<String>,
    /// The person calls were made for (an OAuth token's subject).
    subject: Option<String>,
    /// An MCP session's rows.
    session: Option<String>,
    /// Rows after this sequence number (paging).
    after: Option<i64>,
    /// Rows before this sequence number (paging back).
    before: Option<i64>,
    limit: Option<usize>,
    /// For export: csv or json.
    format: Option<String>,
}

impl AuditFilter {
    fn check(&self) -> Result<(), ApiError> {
        for (what, v) in [
            ("agent", &self.agent),
            ("tool", &self.tool),
            ("outcome", &self.outcome),
            ("call_id", &self.call_id),
            ("subject", &self.subject),
        ] {
            if v.as_ref().is_some_and(|v| v.len() > 256) {
                return Err(ApiError::bad_request(format!(
                    "{what} is longer than 256 characters"
                )));
            }
        }
        if let (Some(a), Some(b)) = (self.since_us, self.until_us)
            && a > b
        {
            return Err(ApiError::bad_request("since_us is after until_us"));
        }
        Ok(())
    }
}

/// Audit rows matching `f`, newest first, at most `limit` (below the store's 10,000 per
/// answer), and whether more matched.
async fn audit_rows(
    p: &Pipeline,
    f: &AuditFilter,
    limit: usize,
) -> Result<(Vec<aether_store::AuditRecord>, bool), StoreError> {
    let blank = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
    let limit = limit.clamp(1, 9_999);
    let mut rows = p
        .store()
        .audit_query(aether_store::AuditQuery {
            after: f.after,
            before: f.before,
            since_us: f.since_us,
            until_us: f.until_us,
            agent: blank(&f.agent),
            tool: blank(&f.tool),
            outcome: blank(&f.outcome),
            call_id: blank(&f.call_id),
            subject: blank(&f.subject),
            session: blank(&f.session),
            limit: limit + 1,
            newest_first: true,
        })
        .await?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    Ok((rows, more))
}

async fn audit_search(State(p): State<Arc<Pipeline>>, Query(f): Query<AuditFilter>) -> Answer {
    f.check()?;
    let (rows, more) = audit_rows(&p, &f, f.limit.unwrap_or(100).clamp(1, 1_000)).await?;
    let mut response = Json(rows).into_response();
    if more {
        response
            .headers_mut()
            .insert("x-aether-more", http::HeaderValue::from_static("true"));
    }
    Ok(response)
}

async fn audit_export(State(p): State<Arc<Pipeline>>, Query(f): Query<AuditFilter>) -> Answer {
    f.check()?;
    let (rows, more) = audit_rows(&p, &f, f.limit.unwrap_or(9_999)).await?;
    let format = f.format.as_deref().unwrap_or("json");
    let (body, kind) = match format {
        "json" => (
            serde_json::to_string_pretty(&rows).unwrap_or_default(),
            "application/json",
        ),
        "csv" => {
            let mut out = csv::Writer::from_writer(Vec::new());
            let _ = out.write_record([
                "seq",
                "at_us",
                "call_id",
                "agent",
                "subject",
                "tool",
                "tier",
                "outcome",
                "step",
                "rule",
                "reason",
                "arguments",
                "result",
                "duration_us",
                "hash",
            ]);
            for r in &rows {
                let e = &r.event;
                let cell = aether_pipeline::tables::inert;
                let _ = out.write_record([
                    r.seq.to_string(),
                    e.at_us.to_string(),
                    cell(&e.call_id),
                    cell(&e.agent),
                    cell(e.subject.as_deref().unwrap_or("")),
                    cell(&e.tool),
                    cell(&e.tier),
                    cell(&e.outcome),
                    cell(e.step.as_deref().unwrap_or("")),
                    cell(e.rule.as_deref().unwrap_or("")),
                    cell(e.reason.as_deref().unwrap_or("")),
                    cell(&e.arguments),
                    cell(&e.result),
                    e.duration_us.to_string(),
                    r.hash.clone(),
                ]);
            }
            (
                String::from_utf8(out.into_inner().unwrap_or_default()).unwrap_or_default(),
                "text/csv; charset=utf-8",
            )
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "format {other:?}: use csv or json"
            )));
        }
    };
    let mut response = (
        [
            (http::header::CONTENT_TYPE, kind.to_string()),
            (
                http::header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"aether-audit.{format}\""),
            ),
        ],
        body,
    )
        .into_response();
    // An export holds at most 9,999 rows, the newest; the header says when more matched
    // (narrow the search by time to export the rest).
    response.headers_mut().insert(
        "x-aether-truncated",
        http::HeaderValue::from_static(if more { "true" } else { "false" }),
    );
    Ok(response)
}

async fn audit_verify(State(p): State<Arc<Pipeline>>) -> Answer {
    let report = p.store().verify_audit(None).await?;
    Ok(Json(json!({
        "intact": report.is_intact(),
        "report": report,
    }))
    .into_response())
}

/// Every agent's effective catalog: each tool, offered or not, and why not.
async fn agents_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let mut out = Vec::new();
    let catalog = p.catalog();
    for agent in p.agents() {
        let ctx = p.session(
            &agent.name,
            Transport::InProcess,
            format!("console:{}", agent.name),
        )?;
        let tools: Vec<Value> = catalog
            .iter()
            .map(|entry| {
                let name = &entry.def().name;
                match p.offer(&ctx, entry) {
                    aether_policy::agent::Offer::Offered => json!({
                        "tool": name, "group": entry.def().group, "tier": entry.def().tier.as_str(), "offered": true
                    }),
                    aether_policy::agent::Offer::Hidden(h) => json!({
                        "tool": name, "group": entry.def().group, "tier": entry.def().tier.as_str(), "offered": false,
                        "why": h.explain(name, &agent.name)
                    }),
                }
            })
            .collect();
        let r = &agent.rates;
        out.push(json!({
            "name": agent.name,
            "team": agent.team,
            "project": agent.project,
            "supervisor": agent.supervisor,
            "groups": ctx.groups.iter().collect::<Vec<_>>(),
            "tools": tools,
            "rates": {
                "rate": r.rate.map(|r| r.to_string()),
                "per_caller": r.per_caller.map(|r| r.to_string()),
                "per_tool": r.per_tool.iter().map(|(t, r)| (t.clone(), r.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
                "concurrent": r.concurrent,
            },
        }));
    }
    Ok(Json(out).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayRequest {
    /// The draft rules (permissions.yaml's text).
    draft: String,
    /// Hours of the audit to replay (default 24, at most 8,760).
    hours: Option<u32>,
}

async fn policy_replay(
    State(p): State<Arc<Pipeline>>,
    body: Result<Json<ReplayRequest>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON: {\"draft\": \"rules: ...\", \"hours\": 24}",
        ));
    };
    if body.draft.len() > 1 << 20 {
        return Err(ApiError::bad_request("the draft is larger than 1 MiB"));
    }
    let draft = aether_policy::rules::RuleSet::parse(&body.draft)
        .map_err(|e| ApiError::bad_request(format!("the draft is not valid: {e}")))?;
    let hours = i64::from(body.hours.unwrap_or(24).clamp(1, 8_760));
    let since = aether_store::now_us() - hours * 3_600 * 1_000_000;
    let roots: Vec<(String, String)> = p
        .roots()
        .iter()
        .map(|r| (r.name.clone(), r.path.display().to_string()))
        .collect();
    let agents = p.agents().map(|a| (a.name.clone(), a.clone())).collect();
    let report = aether_pipeline::replay::replay(
        p.store(),
        &p.rules().current(),
        &draft,
        since,
        &roots,
        &agents,
    )
    .await?;
    Ok(Json(report).into_response())
}

async fn accounts_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let rows = p.store().accounts().await?;
    Ok(Json(json!({
        "accounts": rows,
        "roles": aether_policy::roles::ROLES,
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewAccount {
    name: String,
    password: String,
    role: String,
}

async fn account_create(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    body: Result<Json<NewAccount>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON: {\"name\", \"password\", \"role\"}",
        ));
    };
    let account = aether_pipeline::accounts::create(
        p.store(),
        &body.name,
        &body.password,
        &body.role,
        &format!("{by} (console)"),
        None,
    )
    .await?;
    Ok(Json(account).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountChange {
    role: Option<String>,
    password: Option<String>,
}

async fn account_update(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(name): Path<String>,
    body: Result<Json<AccountChange>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON: {\"role\"?, \"password\"?}",
        ));
    };
    aether_pipeline::accounts::update(
        p.store(),
        &name,
        body.role.as_deref(),
        body.password.as_deref(),
        &format!("{by} (console)"),
    )
    .await?;
    Ok(Json(json!({"changed": name})).into_response())
}

async fn account_remove(
    State(p): State<Arc<Pipeline>>,
    Extension(Operator(by)): Extension<Operator>,
    Path(name): Path<String>,
) -> Answer {
    aether_pipeline::accounts::remove(p.store(), &name, &format!("{by} (console)")).await?;
    Ok(Json(json!({"removed": name})).into_response())
}

/// The agents' latest progress reports (one per session), newest first.
async fn progress_list(State(p): State<Arc<Pipeline>>) -> Answer {
    let docs = p.store().documents_of_kind("progress", 50).await?;
    let reports: Vec<Value> = docs
        .into_iter()
        .map(|d| {
            let body: Value = serde_json::from_str(&d.body).unwrap_or_default();
            json!({
                "agent": d.updated_by,
                "session": d.name,
                "percent": body["percent"],
                "message": body["message"],
                "call_id": body["call_id"],
                "at_us": d.updated_us,
            })
        })
        .collect();
    Ok(Json(reports).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A person deciding a call sees what it would do, from its arguments.
    #[test]
    fn a_waiting_call_is_described_by_what_it_would_do() {
        let edit = described(
            "edit_file",
            &json!({"path": "src/a.rs", "edits": [{"search": "let x = 1;\n", "replace": "let x = 2;\n"}]}),
        );
        assert_eq!(edit["kind"], "diff");
        let diff = edit["diff"].as_str().unwrap();
        assert!(
            diff.contains("-let x = 1;") && diff.contains("+let x = 2;"),
            "{diff}"
        );
        assert!(diff.contains("a/src/a.rs"), "{diff}");
        let run = described(
            "run_command",
            &json!({"command": "/usr/bin/git", "args": ["push", "--force"], "cwd": "app"}),
        );
        assert_eq!(
            (
                run["kind"].as_str(),
                run["command"].as_str(),
                run["cwd"].as_str()
            ),
            (Some("command"), Some("/usr/bin/git"), Some("app"))
        );
        assert_eq!(run["args"], json!(["push", "--force"]));
        let shell = described("run_shell", &json!({"command": "rm -rf build"}));
        assert_eq!(shell["cwd"], ".");
        let post = described(
            "http_request",
            &json!({"url": "https://api.example.com/v1", "method": "POST", "body": "{\"a\":1}"}),
        );
        assert_eq!(
            (
                post["method"].as_str(),
                post["url"].as_str(),
                post["body_bytes"].as_u64()
            ),
            (Some("POST"), Some("https://api.example.com/v1"), Some(7))
        );
        assert_eq!(
            described("web_fetch", &json!({"url": "https://x.example"}))["method"],
            "GET"
        );
        assert_eq!(
            described("calculate", &json!({"expression": "1+1"}))["kind"],
            "arguments"
        );
    }
}

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

async fn session_info(Extension(actor): Extension<crate::console::Actor>) -> Response {
    Json(json!({
        "name": actor.name,
        "role": actor.role,
        "permissions": actor.permissions,
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
    /// Rows after this sequence number (paging).
    after: Option<i64>,
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
            since_us: f.since_us,
            until_us: f.until_us,
            agent: blank(&f.agent),
            tool: blank(&f.tool),
            outcome: blank(&f.outcome),
            call_id: blank(&f.call_id),
            subject: blank(&f.subject),
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
        out.push(json!({
            "name": agent.name,
            "team": agent.team,
            "project": agent.project,
            "supervisor": agent.supervisor,
            "groups": ctx.groups.iter().collect::<Vec<_>>(),
            "tools": tools,
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

//! Refusals by the unknown-tool, registry, connection, capability and tier steps: each is
//! audited once with its step and rule, and a refused call never runs and is never receipted.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::config::Limits;
use aether_policy::{AgentProfile, Step, Tier};
use aether_tools::Tool;
use serde_json::json;

use crate::support::*;

/// `worker` reaches `alpha`; `narrow` reaches `alpha` but lists only `echo`.
fn narrow() -> AgentProfile {
    AgentProfile {
        tools: Some(["echo".to_string()].into()),
        ..AgentProfile::with_groups("narrow", &["alpha"])
    }
}

#[tokio::test]
async fn an_unknown_tool_is_refused_before_anything_else() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "no_such_tool", json!({"anything": 1})).await;
    let (reason, row) = refused(&h.store, &result, Step::UnknownTool, "catalog").await;
    assert!(reason.contains("no_such_tool"), "{reason}");
    assert_eq!(row.event.step.as_deref(), Some("mcp-tool-not-implemented"));
    assert_eq!(row.event.tier, "unknown");
    assert_eq!(row.event.definition, None);

    // A caller-chosen name is cut before it reaches the audit.
    let long = "x".repeat(300);
    let result = call(&p, &ctx, &long, json!({})).await;
    let (_, row) = refused(&h.store, &result, Step::UnknownTool, "catalog").await;
    assert_eq!(row.event.tool, "x".repeat(128));
    // However long the name, neither the reply nor the audit row grows with it.
    let huge = "y".repeat(1 << 20);
    let result = call(&p, &ctx, &huge, json!({})).await;
    let (reason, row) = refused(&h.store, &result, Step::UnknownTool, "catalog").await;
    assert!(reason.len() < 1024, "{} bytes", reason.len());
    assert!(row.event.reason.unwrap().len() <= 1024 * 4);
    assert_eq!(echo.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn the_registry_refuses_unapproved_withdrawn_and_changed_definitions() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");
    let digest = p.catalog().get("echo").unwrap().digest.to_string();

    // Built-ins are approved from source when the pipeline starts.
    let rows = h.store.registry().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].state.as_str(), rows[0].approved_digest.as_deref()),
        ("approved", Some(digest.as_str()))
    );
    ok_text(&call(&p, &ctx, "echo", valid()).await);

    let cases = [
        (
            "state = 'unapproved'",
            "registry:unapproved",
            "not approved",
        ),
        ("state = 'withdrawn'", "registry:withdrawn", "withdrawn"),
        (
            "state = 'approved', approved_digest = 'sha256:0000000000000000000000000000000000000000000000000000000000000000'",
            "registry:definition-changed",
            "changed since it was approved",
        ),
    ];
    for (set, rule, says) in cases {
        h.edit_registry(&p, "echo", set).await;
        assert!(
            p.offered(&ctx).is_empty(),
            "{rule}: a tool the registry refuses is not offered"
        );
        let result = call(&p, &ctx, "echo", valid()).await;
        let (reason, row) = refused(&h.store, &result, Step::Registry, rule).await;
        assert!(reason.contains(says), "{rule}: {reason}");
        assert_eq!(
            row.event.definition.as_deref(),
            Some(digest.as_str()),
            "the row names the definition refused"
        );
    }

    // A tool with no registry row at all is unapproved.
    h.sql()
        .execute("DELETE FROM registry WHERE name = 'echo'", [])
        .unwrap();
    p.reload_registry().await.unwrap();
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Registry, "registry:unapproved").await;
    assert_eq!(echo.calls(), 1, "no refused call ran");

    // Approving the live definition again lets it run.
    h.sql()
        .execute(
            "INSERT INTO registry (name, state, approved_digest, definition, origin, updated_at_us, updated_by, why)
             VALUES ('echo', 'approved', ?1, '{}', 'builtin', 0, 'test', 'approved again')",
            [&digest],
        )
        .unwrap();
    p.reload_registry().await.unwrap();
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    assert_eq!(echo.calls(), 2);
    h.check().await;
}

#[tokio::test]
async fn a_withdrawn_builtin_stays_withdrawn_when_the_pipeline_restarts() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    h.edit_registry(&p, "echo", "state = 'withdrawn'").await;
    drop(p);

    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Registry, "registry:withdrawn").await;
    assert_eq!(echo.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn the_connection_layer_refuses_a_tool_of_another_group() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let elsewhere = Echo::new("elsewhere", "beta", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), elsewhere.clone()];
    let p = h.pipeline(vec![worker()], Limits::default(), tools).await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "elsewhere", valid()).await;
    let (reason, row) = refused(&h.store, &result, Step::Connection, "connection").await;
    assert!(reason.contains("\"beta\""), "{reason}");
    assert_eq!(row.event.tier, "standard");
    assert_eq!(elsewhere.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn the_capability_layer_refuses_a_tool_left_out_of_the_agents_list() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let unlisted = Echo::new("unlisted", "alpha", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), unlisted.clone()];
    let p = h.pipeline(vec![narrow()], Limits::default(), tools).await;
    let ctx = session(&p, "narrow", "s1");

    let result = call(&p, &ctx, "unlisted", valid()).await;
    let (reason, _) = refused(&h.store, &result, Step::Capability, "capability").await;
    assert!(reason.contains("tool list"), "{reason}");
    assert_eq!(unlisted.calls(), 0);
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    h.check().await;
}

#[tokio::test]
async fn a_restricted_tool_nobody_approves_is_denied_when_its_window_closes() {
    let h = Harness::new();
    let restricted = Echo::new("restricted", "alpha", Tier::Restricted);
    let p = h
        .pipeline_with(vec![worker()], vec![restricted.clone()], |s| {
            s.approval_window = Duration::from_millis(300)
        })
        .await;
    let ctx = session(&p, "worker", "s1");

    let started = std::time::Instant::now();
    let result = call(&p, &ctx, "restricted", valid()).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    let (reason, row) = refused(
        &h.store,
        &result,
        Step::Tier,
        "approval:expired (tier:restricted)",
    )
    .await;
    assert!(reason.contains("nobody decided in time"), "{reason}");
    assert_eq!(row.event.tier, "restricted");
    assert_eq!(restricted.calls(), 0);
    let request = h.store.approval(&result.call_id).await.unwrap().unwrap();
    assert_eq!(request.state, aether_store::ApprovalState::Expired);
    h.check().await;
}

#[tokio::test]
async fn no_refused_call_runs_or_writes_a_receipt() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let unlisted = Echo::new("unlisted", "alpha", Tier::Standard);
    let elsewhere = Echo::new("elsewhere", "beta", Tier::Standard);
    let restricted = Echo::new("restricted", "alpha", Tier::Restricted);
    let withdrawn = Echo::new("withdrawn", "alpha", Tier::Standard);
    let all = [&echo, &unlisted, &elsewhere, &restricted, &withdrawn];
    let tools: Vec<Arc<dyn Tool>> = all
        .iter()
        .map(|t| Arc::clone(*t) as Arc<dyn Tool>)
        .collect();
    let mut agent = AgentProfile::with_groups("agent", &["alpha"]);
    agent.tools = Some(["echo", "restricted", "withdrawn"].map(String::from).into());
    let p = h
        .pipeline_with(vec![agent], tools, |s| {
            s.approval_window = Duration::from_millis(50)
        })
        .await;
    h.edit_registry(&p, "withdrawn", "state = 'withdrawn'")
        .await;
    let ctx = session(&p, "agent", "s1");

    let cases = [
        ("ghost", valid(), Step::UnknownTool),
        ("withdrawn", valid(), Step::Registry),
        ("elsewhere", valid(), Step::Connection),
        ("unlisted", valid(), Step::Capability),
        ("echo", json!({"text": 1}), Step::Arguments),
        ("restricted", valid(), Step::Tier),
    ];
    for (tool, args, step) in cases {
        let result = call(&p, &ctx, tool, args).await;
        match &result.outcome {
            aether_pipeline::CallOutcome::Refused(r) => assert_eq!(r.step, step, "{tool}: {r}"),
            other => panic!("{tool}: expected a refusal, got {other:?}"),
        }
    }
    for t in all {
        assert_eq!(t.calls(), 0, "{} ran", t.def().name);
    }
    assert!(h.receipt_ids().is_empty(), "a refused call was receipted");
    let report = h.check().await;
    assert_eq!(report.rows, 6);
}

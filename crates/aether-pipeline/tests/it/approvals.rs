//! Calls that wait for a person: a Restricted tool or an `ask_user` rule. Decisions come from
//! another handle on the store (as `aether approvals` in another process would), and reach
//! the waiting call through the pipeline's watcher.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_pipeline::{CallOutcome, CallResult, Pipeline, SessionContext, operator};
use aether_policy::{Step, Tier};
use aether_store::{ApprovalRow, ApprovalState, Store};
use aether_tools::{NoClient, Tool};
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// Starts `tool` for `ctx` in the background and waits until its request is pending.
async fn waiting(
    p: &Arc<Pipeline>,
    ctx: &SessionContext,
    tool: &str,
    cancel: CancellationToken,
) -> (tokio::task::JoinHandle<CallResult>, ApprovalRow) {
    let (p2, ctx2, tool2) = (p.clone(), ctx.clone(), tool.to_string());
    let task = tokio::spawn(async move {
        p2.call(&ctx2, &tool2, object(valid()), Arc::new(NoClient), cancel)
            .await
    });
    let row = pending(p.store(), tool).await;
    (task, row)
}

async fn pending(store: &Store, tool: &str) -> ApprovalRow {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = store.approvals(true, 100).await.unwrap();
        if let Some(row) = rows.into_iter().find(|r| r.request.tool == tool) {
            return row;
        }
        assert!(Instant::now() < deadline, "{tool} never asked for approval");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn restricted_world(window: Duration) -> (Harness, Arc<Echo>, Arc<Pipeline>, SessionContext) {
    let h = Harness::new();
    let tool = Echo::new("launch", "alpha", Tier::Restricted);
    let p = h
        .pipeline_with(vec![worker()], vec![tool.clone() as Arc<dyn Tool>], |s| {
            s.approval_window = window
        })
        .await;
    let ctx = session(&p, "worker", "s1");
    (h, tool, p, ctx)
}

#[tokio::test]
async fn an_operator_in_another_process_approves_and_the_call_runs_once() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_secs(60)).await;
    let _watch = p.watch(Duration::from_millis(20));
    let (task, row) = waiting(&p, &ctx, "launch", CancellationToken::new()).await;
    assert_eq!(row.request.agent, "worker");
    assert_eq!(row.request.asked_by, "tier:restricted");
    assert_eq!(row.request.arguments, r#"{"count":2,"text":"hello"}"#);
    assert_eq!(tool.calls(), 0, "nothing runs before a person decides");
    assert_eq!(
        h.store.receipt(&row.request.id).await.unwrap(),
        None,
        "no receipt before the decision"
    );

    let other = h.second_handle();
    let decided = operator::decide(&other, &row.request.id, true, "alice", "looks right")
        .await
        .unwrap();
    assert_eq!(decided.state, ApprovalState::Approved);
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the approved call finished")
        .unwrap();
    ok_text(&result);
    assert_eq!(result.call_id, row.request.id);
    assert_eq!(tool.calls(), 1);
    let receipt = h.store.receipt(&result.call_id).await.unwrap().unwrap();
    assert_eq!(receipt.decision, "approved by alice: looks right");
    let audit = row_of(&h.store, &result.call_id).await;
    assert_eq!(audit.event.outcome, "ok");
    assert_eq!(
        audit.event.reason.as_deref(),
        Some("approved by alice: looks right")
    );
    // The decision is its own audit row, by the operator.
    let rows = all_rows(&h.store).await;
    let decision = rows
        .iter()
        .find(|r| r.event.tool == "approvals.approve")
        .expect("the decision is audited");
    assert_eq!(decision.event.agent, "operator:alice");
    assert!(decision.event.arguments.contains(&row.request.id));

    // A decision on a call that already ended changes nothing and says why.
    let late = operator::decide(&other, &row.request.id, false, "bob", "too late")
        .await
        .unwrap_err()
        .to_string();
    assert!(late.contains("no longer waiting"), "{late}");
    assert!(late.contains("approved by alice"), "{late}");
    let unknown = operator::decide(&other, "no-such-call", true, "bob", "x")
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("no call waiting"), "{unknown}");
    assert_eq!(
        h.store
            .approval(&row.request.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        ApprovalState::Approved
    );
    h.check().await;
}

#[tokio::test]
async fn a_denied_call_never_runs_and_says_who_denied_it() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_secs(60)).await;
    let _watch = p.watch(Duration::from_millis(20));
    let (task, row) = waiting(&p, &ctx, "launch", CancellationToken::new()).await;
    // Without a reason, nothing is decided.
    let err = operator::decide(&h.second_handle(), &row.request.id, false, "alice", "  ")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("why"), "{err}");
    operator::decide(
        &h.second_handle(),
        &row.request.id,
        false,
        "alice",
        "not today",
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let (reason, _) = refused(
        &h.store,
        &result,
        Step::Tier,
        "approval:denied (tier:restricted)",
    )
    .await;
    assert!(reason.contains("denied by alice: not today"), "{reason}");
    assert_eq!(tool.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn a_halt_denies_waiting_calls_within_a_tenth_of_a_second() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_secs(60)).await;
    let _watch = p.watch(Duration::from_millis(20));
    let (task, row) = waiting(&p, &ctx, "launch", CancellationToken::new()).await;
    let halted_at = Instant::now();
    operator::set_halt(&h.second_handle(), true, "ops", "incident 7")
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let waited = halted_at.elapsed();
    assert!(
        waited < Duration::from_millis(100),
        "the waiting call heard of the halt after {waited:?}"
    );
    let (reason, _) = refused(
        &h.store,
        &result,
        Step::Tier,
        "approval:denied (tier:restricted)",
    )
    .await;
    assert!(reason.contains("halted: incident 7"), "{reason}");
    assert_eq!(tool.calls(), 0);
    let state = h.store.approval(&row.request.id).await.unwrap().unwrap();
    assert_eq!(state.state, ApprovalState::Denied);
    // The halt and the resume are audited as operator actions.
    operator::set_halt(&h.store, false, "ops", "resolved")
        .await
        .unwrap();
    let rows = all_rows(&h.store).await;
    let actions: Vec<&str> = rows
        .iter()
        .filter(|r| r.event.transport == "operator")
        .map(|r| r.event.tool.as_str())
        .collect();
    assert_eq!(actions, ["halt", "resume"]);
    h.check().await;
}

#[tokio::test]
async fn while_halted_nothing_asks_for_a_person() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_secs(60)).await;
    operator::set_halt(&h.second_handle(), true, "ops", "freeze")
        .await
        .unwrap();
    let result = call(&p, &ctx, "launch", valid()).await;
    refused(&h.store, &result, Step::Halt, "halt").await;
    assert!(h.store.approvals(false, 10).await.unwrap().is_empty());
    assert_eq!(tool.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn a_caller_who_gives_up_withdraws_the_request() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_secs(60)).await;
    let cancel = CancellationToken::new();
    let (task, row) = waiting(&p, &ctx, "launch", cancel.clone()).await;
    cancel.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(result.outcome, CallOutcome::Cancelled { .. }),
        "{:?}",
        result.outcome
    );
    let state = h.store.approval(&row.request.id).await.unwrap().unwrap();
    assert_eq!(state.state, ApprovalState::Cancelled);
    // An operator arriving afterwards is told, and nothing runs.
    let err = operator::decide(&h.store, &row.request.id, true, "alice", "ok")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cancelled"), "{err}");
    assert_eq!(tool.calls(), 0);
    assert_eq!(
        row_of(&h.store, &row.request.id).await.event.outcome,
        "cancelled"
    );
    h.check().await;
}

#[tokio::test]
async fn an_approval_after_the_window_closed_is_refused() {
    let (h, tool, p, ctx) = restricted_world(Duration::from_millis(200)).await;
    let (task, row) = waiting(&p, &ctx, "launch", CancellationToken::new()).await;
    let result = task.await.unwrap();
    refused(
        &h.store,
        &result,
        Step::Tier,
        "approval:expired (tier:restricted)",
    )
    .await;
    let err = operator::decide(&h.store, &row.request.id, true, "alice", "sorry, was away")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("expired"), "{err}");
    assert_eq!(tool.calls(), 0);
    h.check().await;
}

#[tokio::test]
async fn a_request_left_by_a_stopped_process_expires() {
    let h = Harness::new();
    // A request whose window closed while nobody waited for it (its process died).
    let other = h.second_handle();
    other
        .request_approval(aether_store::ApprovalRequest {
            id: "orphan".into(),
            requested_at_us: 1,
            expires_at_us: 2,
            session: "s".into(),
            transport: "stdio".into(),
            agent: "worker".into(),
            team: None,
            project: None,
            tool: "launch".into(),
            tier: "restricted".into(),
            definition: "d".into(),
            arguments: "{}".into(),
            arguments_digest: "a".into(),
            asked_by: "tier:restricted".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        h.store
            .expire_approvals(aether_store::now_us())
            .await
            .unwrap(),
        1
    );
    let row = h.store.approval("orphan").await.unwrap().unwrap();
    assert_eq!(row.state, ApprovalState::Expired);
    assert!(h.store.approvals(true, 10).await.unwrap().is_empty());
}

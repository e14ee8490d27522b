//! Calls that are admitted: ok, tool errors, tool denials, cancellation, the time limit and
//! panics, each with its receipt and its one audit row; and the receipt-before-run invariant.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_pipeline::{CallOutcome, Transport};
use aether_policy::config::Limits;
use aether_policy::{Tier, canonical_json, sha256};
use aether_tools::{NoClient, Tool, ToolError};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::*;

#[tokio::test]
async fn an_admitted_call_is_receipted_run_and_audited_as_ok() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = p
        .session("worker", Transport::InProcess, "s-ok".into())
        .unwrap();

    let result = call(&p, &ctx, "echo", valid()).await;
    assert_eq!(ok_text(&result), canonical_json(&valid()));
    match &result.outcome {
        CallOutcome::Ran(out) => assert_eq!(out.structured, Some(valid())),
        other => panic!("{other:?}"),
    }
    assert_eq!(echo.calls(), 1);

    let digest = p.catalog().get("echo").unwrap().digest.to_string();
    let args_digest = sha256(canonical_json(&valid()).as_bytes()).to_string();
    let receipt = h
        .store
        .receipt(&result.call_id)
        .await
        .unwrap()
        .expect("receipt");
    assert_eq!(
        (
            receipt.tool.as_str(),
            receipt.agent.as_str(),
            receipt.session.as_str(),
            receipt.transport.as_str()
        ),
        ("echo", "worker", "s-ok", "in-process")
    );
    assert_eq!(receipt.definition, digest);
    assert_eq!(receipt.arguments, args_digest);
    assert_eq!(receipt.decision, "admitted");

    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.outcome, "ok");
    assert_eq!((row.step, row.rule, row.reason), (None, None, None));
    assert_eq!(
        (row.tool.as_str(), row.tier.as_str(), row.agent.as_str()),
        ("echo", "standard", "worker")
    );
    assert_eq!(
        (row.team.as_deref(), row.project.as_deref()),
        (Some("core"), Some("aether"))
    );
    assert_eq!(
        (row.session.as_str(), row.transport.as_str()),
        ("s-ok", "in-process")
    );
    assert_eq!(row.definition.as_deref(), Some(digest.as_str()));
    assert_eq!(row.arguments_digest, args_digest);
    assert_eq!(row.arguments, canonical_json(&valid()));
    assert_eq!(row.result, canonical_json(&valid()));
    h.check().await;
}

#[tokio::test]
async fn a_failing_tool_is_reported_to_the_caller_and_audited_as_tool_error() {
    let h = Harness::new();
    let fails = Fails::new("fails", ToolError::failed("the widget is missing"));
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![fails.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "fails", json!({})).await;
    match &result.outcome {
        CallOutcome::Ran(out) => assert!(out.is_error, "a tool error is reported as isError"),
        other => panic!("{other:?}"),
    }
    assert_eq!(text(&result), "the widget is missing");
    assert_eq!(fails.calls(), 1);
    assert!(h.store.receipt(&result.call_id).await.unwrap().is_some());
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.outcome, "tool_error");
    assert_eq!((row.step, row.rule), (None, None));
    assert_eq!(row.reason.as_deref(), Some("the widget is missing"));
    assert_eq!(row.result, "the widget is missing");
    h.check().await;
}

#[tokio::test]
async fn a_denial_by_the_tool_itself_is_audited_as_refused_with_its_rule() {
    let h = Harness::new();
    let denies = Fails::new(
        "denies",
        ToolError::denied("path:outside-roots", "that path is outside every root"),
    );
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![denies.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "denies", json!({})).await;
    match &result.outcome {
        CallOutcome::Ran(out) => assert!(out.is_error),
        other => panic!("{other:?}"),
    }
    assert_eq!(text(&result), "that path is outside every root");
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.outcome, "refused");
    assert_eq!(row.step, None, "the tool refused, not a pipeline step");
    assert_eq!(row.rule.as_deref(), Some("path:outside-roots"));
    assert_eq!(
        row.reason.as_deref(),
        Some("that path is outside every root")
    );
    h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_token_stops_a_running_tool() {
    let h = Harness::new();
    let sleeps = Sleeps::new("sleeps");
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![sleeps.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let cancel = CancellationToken::new();
    let started = Instant::now();
    let task = {
        let (p, ctx, cancel) = (p.clone(), ctx.clone(), cancel.clone());
        tokio::spawn(async move {
            p.call(&ctx, "sleeps", None, Arc::new(NoClient), cancel)
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(10), sleeps.started.notified())
        .await
        .expect("the tool never started");
    assert!(!task.is_finished(), "the sleeper returned on its own");
    cancel.cancel();
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("cancel did not stop the call")
        .unwrap();

    assert!(
        matches!(result.outcome, CallOutcome::Cancelled { timed_out: false }),
        "{:?}",
        result.outcome
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(sleeps.calls(), 1);
    assert!(
        h.store.receipt(&result.call_id).await.unwrap().is_some(),
        "it ran, so it had a receipt"
    );
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.outcome, "cancelled");
    assert_eq!((row.step, row.rule), (None, None));
    h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_limit_stops_a_tool_and_cancels_its_token() {
    let h = Harness::new();
    let sleeps = Sleeps::new("sleeps");
    let limits = Limits {
        tool_seconds: 1,
        ..Limits::default()
    };
    let p = h
        .pipeline(vec![worker()], limits, vec![sleeps.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(20), call(&p, &ctx, "sleeps", json!({})))
        .await
        .expect("the time limit did not stop the call");
    let took = started.elapsed();

    assert!(
        matches!(result.outcome, CallOutcome::Cancelled { timed_out: true }),
        "{:?}",
        result.outcome
    );
    assert!(
        took >= Duration::from_secs(1),
        "stopped before its time limit: {took:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "stopped long after its time limit: {took:?}"
    );
    assert!(
        sleeps.token().is_cancelled(),
        "the tool's token is cancelled so work it started can stop"
    );
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.outcome, "timed_out");
    assert!(row.duration_us >= 1_000_000, "{}", row.duration_us);
    h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_fails_its_call_and_the_pipeline_keeps_serving() {
    let h = Harness::new();
    let on_async = Panics::new("panics", false);
    let in_blocking = Panics::new("panics_blocking", true);
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![on_async.clone(), in_blocking.clone(), echo.clone()];
    let p = h.pipeline(vec![worker()], Limits::default(), tools).await;
    let ctx = session(&p, "worker", "s1");

    for (tool, message) in [
        ("panics", "boom on the async thread"),
        ("panics_blocking", "boom in a blocking task"),
    ] {
        let result = call(&p, &ctx, tool, json!({})).await;
        match &result.outcome {
            CallOutcome::Failed(m) => assert!(m.contains(message), "{m}"),
            other => panic!("{tool}: expected Failed, got {other:?}"),
        }
        let row = row_of(&h.store, &result.call_id).await.event;
        assert_eq!(row.outcome, "panicked", "{tool}");
        assert!(
            row.reason.as_deref().unwrap_or_default().contains(message),
            "{:?}",
            row.reason
        );

        // The next call on the same pipeline and session is served normally.
        let next = call(&p, &ctx, "echo", valid()).await;
        assert_eq!(ok_text(&next), canonical_json(&valid()));
    }
    assert_eq!(
        (on_async.calls(), in_blocking.calls(), echo.calls()),
        (1, 1, 2)
    );
    h.check().await;
}

#[tokio::test]
async fn the_receipt_is_durable_before_the_tool_runs_and_binds_definition_and_arguments() {
    let h = Harness::new();
    let probe = Probe::new("probe", h.store.clone());
    let mut agent = worker();
    // A default the caller leaves out: the receipt binds the arguments as admitted.
    agent.arg_defaults.insert(
        "probe".into(),
        serde_json::from_value(json!({"count": 9})).unwrap(),
    );
    let p = h
        .pipeline(vec![agent], Limits::default(), vec![probe.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let mut ids = Vec::new();
    for text in ["one", "two", "three"] {
        let result = call(&p, &ctx, "probe", json!({"text": text})).await;
        assert_eq!(ok_text(&result), "probed");
        ids.push(result.call_id);
    }

    let seen = probe.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let digest = p.catalog().get("probe").unwrap().digest.to_string();
    for ((call_id, args, receipt), id) in seen.iter().zip(&ids) {
        assert_eq!(call_id, id, "the tool runs under the call's id");
        let receipt = receipt
            .as_ref()
            .expect("the tool ran before its receipt was durable");
        assert_eq!(&receipt.call_id, call_id);
        assert_eq!(receipt.definition, digest);
        assert_eq!(args["count"], 9);
        assert_eq!(
            receipt.arguments,
            sha256(canonical_json(args).as_bytes()).to_string()
        );
        let row = row_of(&h.store, call_id).await.event;
        assert_eq!(row.arguments_digest, receipt.arguments);
        assert_eq!(row.definition.as_deref(), Some(digest.as_str()));
    }
    h.check().await;
}

#[tokio::test]
async fn callers_read_only_their_own_audit_rows() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let other = aether_policy::AgentProfile::with_groups("other", &["alpha"]);
    let p = h
        .pipeline(vec![worker(), other], Limits::default(), vec![echo.clone()])
        .await;
    let mine = session(&p, "worker", "s1");
    let theirs = session(&p, "other", "s2");

    let a = call(&p, &mine, "echo", valid()).await;
    call(&p, &theirs, "echo", valid()).await;
    let b = call(&p, &mine, "nope", json!({})).await;

    let rows = p.audit_events(&mine, None, 100).await.unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.event.call_id.as_str()).collect();
    assert_eq!(ids, [a.call_id.as_str(), b.call_id.as_str()]);
    let after = p.audit_events(&mine, Some(rows[0].seq), 100).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].event.call_id, b.call_id);
    h.check().await;
}

#[tokio::test]
async fn the_time_limit_stops_only_its_own_call_not_the_callers_token() {
    let h = Harness::new();
    let sleeps = Sleeps::new("sleeps");
    let limits = Limits {
        tool_seconds: 1,
        ..Limits::default()
    };
    let p = h
        .pipeline(vec![worker()], limits, vec![sleeps.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");
    let callers = CancellationToken::new();
    let result = p
        .call(
            &ctx,
            "sleeps",
            object(json!({})),
            Arc::new(NoClient),
            callers.clone(),
        )
        .await;
    assert!(matches!(
        result.outcome,
        CallOutcome::Cancelled { timed_out: true }
    ));
    assert!(
        sleeps.token().is_cancelled(),
        "the tool's token is cancelled"
    );
    assert!(
        !callers.is_cancelled(),
        "the caller's token, shared with its other calls, is not"
    );
    h.check().await;
}

#[tokio::test]
async fn a_call_dropped_by_its_transport_midway_is_still_audited() {
    let h = Harness::new();
    let sleeps = Sleeps::new("sleeps");
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![sleeps.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");
    {
        let fut = call(&p, &ctx, "sleeps", json!({}));
        tokio::pin!(fut);
        tokio::select! {
            _ = &mut fut => panic!("the sleeper finished"),
            _ = sleeps.started.notified() => {}
        }
        // The future is dropped here, as a transport does when its client vanishes.
    }
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = all_rows(&h.store).await;
        if !rows.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rows.len(), 1, "the dropped call's row was written");
    assert_eq!(rows[0].event.outcome, "cancelled");
    assert!(
        h.receipt_ids().contains(&rows[0].event.call_id),
        "it had been admitted"
    );
    h.check().await;
}

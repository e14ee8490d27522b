//! The halt flag: set through the pipeline's own store or through a second handle on the same
//! file (so the in-memory flag is stale), it refuses every call before anything runs; after a
//! resume, calls run again.

use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::CallOutcome;
use aether_policy::config::Limits;
use aether_policy::{Step, Tier};
use aether_tools::Tool;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_halt_set_through_another_handle_is_caught_by_the_receipt_transaction() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let probe = Probe::new("probe", h.store.clone());
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), probe.clone()];
    let p = h.pipeline(vec![worker()], Limits::default(), tools).await;
    let ctx = session(&p, "worker", "s1");
    ok_text(&call(&p, &ctx, "echo", valid()).await);

    // Another process halts; this pipeline's in-memory flag does not know (nothing watches).
    let other = h.second_handle();
    other
        .set_halt(true, "ops", "incident 42", None)
        .await
        .unwrap();

    // The first call after the halt meets it in the receipt transaction (the probe would see
    // a missing receipt if it ran).
    let result = call(&p, &ctx, "probe", valid()).await;
    let (reason, row) = refused(&h.store, &result, Step::Halt, "halt").await;
    assert!(
        reason.contains("incident 42"),
        "the receipt transaction names the operator's reason: {reason}"
    );
    assert_eq!(row.event.tool, "probe");
    assert_eq!(row.event.tier, "standard", "it got as far as the receipt");
    // Still halted: refused again (the in-memory flag has caught up).
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Halt, "halt").await;
    assert_eq!(echo.calls(), 1, "nothing ran while halted");
    assert!(
        probe.seen.lock().unwrap().is_empty(),
        "nothing ran while halted"
    );

    // Resumed through the other handle: the next call runs, with no watcher running.
    other
        .set_halt(false, "ops", "resolved", None)
        .await
        .unwrap();
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    ok_text(&call(&p, &ctx, "probe", valid()).await);
    assert_eq!(echo.calls(), 2);
    h.check().await;
}

#[tokio::test]
async fn a_halt_set_through_the_pipelines_own_store_refuses_and_resume_restores() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    p.store()
        .set_halt(true, "ops", "maintenance", None)
        .await
        .unwrap();
    for tool in ["echo", "echo", "ghost"] {
        let result = call(&p, &ctx, tool, valid()).await;
        refused(&h.store, &result, Step::Halt, "halt").await;
    }
    assert_eq!(echo.calls(), 0);

    p.store()
        .set_halt(false, "ops", "done", None)
        .await
        .unwrap();
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    let result = call(&p, &ctx, "ghost", valid()).await;
    refused(&h.store, &result, Step::UnknownTool, "catalog").await;
    assert_eq!(echo.calls(), 1);
    h.check().await;
}

#[tokio::test]
async fn a_pipeline_started_while_halted_refuses_until_resumed() {
    let h = Harness::new();
    h.store
        .set_halt(true, "ops", "before start", None)
        .await
        .unwrap();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Halt, "halt").await;
    h.second_handle()
        .set_halt(false, "ops", "go", None)
        .await
        .unwrap();
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    assert_eq!(echo.calls(), 1);
    h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_watcher_running_halt_and_resume_from_another_handle_take_effect() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let watcher = p.watch(Duration::from_millis(20));
    let ctx = session(&p, "worker", "s1");
    let other = h.second_handle();

    other.set_halt(true, "ops", "watch me", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        let result = call(&p, &ctx, "echo", valid()).await;
        refused(&h.store, &result, Step::Halt, "halt").await;
    }
    assert_eq!(echo.calls(), 0);

    other.set_halt(false, "ops", "over", None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    assert_eq!(echo.calls(), 1);

    // The watcher holds the pipeline weakly and ends once the pipeline is gone.
    drop(p);
    tokio::time::timeout(Duration::from_secs(5), watcher)
        .await
        .expect("the watcher outlived its pipeline")
        .unwrap();
    h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_halt_during_a_burst_lets_no_call_run_after_it_commits() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let other = h.second_handle();
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (p, ctx, other) = (p.clone(), ctx.clone(), other.clone());
        tasks.push(tokio::spawn(async move {
            if i == 20 {
                other
                    .set_halt(true, "ops", "mid-burst", None)
                    .await
                    .unwrap();
            }
            call(&p, &ctx, "echo", json!({"text": format!("call {i}")})).await
        }));
    }
    let mut ran = 0;
    for t in tasks {
        let result = t.await.unwrap();
        match &result.outcome {
            CallOutcome::Ran(_) => ran += 1,
            CallOutcome::Refused(r) => assert_eq!(r.step, Step::Halt, "{r}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ran, echo.calls(), "every call that ran was reported as run");
    // Once the halt has committed, every call is refused.
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Halt, "halt").await;
    assert_eq!(echo.calls(), ran);
    h.check().await;
}

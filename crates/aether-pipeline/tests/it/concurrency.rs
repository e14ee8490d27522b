//! Many calls at once from several sessions: every call gets its receipt and its one audit
//! row, and the chain stays intact under group commit.

use std::collections::HashSet;
use std::sync::Arc;

use aether_pipeline::CallOutcome;
use aether_policy::config::Limits;
use aether_policy::{AgentProfile, Step, Tier};
use aether_tools::Tool;
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn two_hundred_concurrent_calls_are_all_receipted_and_audited() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let probe = Probe::new("probe", h.store.clone());
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), probe.clone()];
    let other = AgentProfile::with_groups("other", &["alpha"]);
    let p = h
        .pipeline(vec![worker(), other], Limits::default(), tools)
        .await;
    let sessions: Vec<_> = (0..6)
        .map(|i| {
            session(
                &p,
                if i % 2 == 0 { "worker" } else { "other" },
                &format!("session-{i}"),
            )
        })
        .collect();

    let mut tasks = Vec::new();
    for i in 0..200 {
        let (p, ctx) = (p.clone(), sessions[i % sessions.len()].clone());
        tasks.push(tokio::spawn(async move {
            // Every tenth call is invalid; every fourth runs the probe.
            let (tool, args) = match i {
                _ if i % 10 == 0 => ("echo", json!({"text": i})),
                _ if i % 4 == 0 => ("probe", json!({"text": format!("probe {i}")})),
                _ => ("echo", json!({"text": format!("call {i}"), "count": i + 1})),
            };
            let result = call(&p, &ctx, tool, args).await;
            (i, ctx.session_id.clone(), result)
        }));
    }

    let mut ids = HashSet::new();
    let (mut ran, mut refused_count) = (0, 0);
    for task in tasks {
        let (i, session, result) = task.await.unwrap();
        assert!(ids.insert(result.call_id.clone()), "call ids are unique");
        match &result.outcome {
            CallOutcome::Ran(out) => {
                assert!(!out.is_error, "call {i}: {out:?}");
                assert!(
                    h.store.receipt(&result.call_id).await.unwrap().is_some(),
                    "call {i} has no receipt"
                );
                ran += 1;
            }
            CallOutcome::Refused(r) => {
                assert_eq!((i % 10, r.step), (0, Step::Arguments), "call {i}: {r}");
                assert!(h.store.receipt(&result.call_id).await.unwrap().is_none());
                refused_count += 1;
            }
            other => panic!("call {i}: {other:?}"),
        }
        let row = row_of(&h.store, &result.call_id).await.event;
        assert_eq!(row.session, session);
        assert_eq!(
            row.outcome,
            if i % 10 == 0 { "refused" } else { "ok" },
            "call {i}"
        );
    }
    assert_eq!((ran, refused_count), (180, 20));
    let probes = probe.seen.lock().unwrap().clone();
    assert_eq!(echo.calls() + probes.len(), 180);
    assert!(
        probes.iter().all(|(_, _, receipt)| receipt.is_some()),
        "a probe ran before its receipt was durable"
    );

    let report = h.check().await;
    assert_eq!(report.rows, 200);
    assert_eq!((report.first_seq, report.last_seq), (Some(1), Some(200)));
    assert_eq!(h.receipt_ids().len(), 180);
}

//! Rate limits: calls per window and in flight, refused before the receipt with when to try
//! again, shared with the other processes on the store.

use std::sync::Arc;

use aether_pipeline::CallOutcome;
use aether_policy::agent::{Rate, RateLimits};
use aether_policy::{AgentProfile, Step, Tier};
use aether_tools::Tool;

use crate::support::*;

fn limited(limits: RateLimits) -> AgentProfile {
    AgentProfile {
        rates: limits,
        ..AgentProfile::with_groups("limited", &["alpha"])
    }
}

fn refused_at_rate(outcome: &CallOutcome) -> Option<(String, String)> {
    match outcome {
        CallOutcome::Refused(r) if r.step == Step::Rate => Some((r.rule.clone(), r.reason.clone())),
        _ => None,
    }
}

#[tokio::test]
async fn calls_past_an_agents_rate_or_a_tools_are_refused_before_the_receipt() {
    clear_of_midnight().await;
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let echo_b = Echo::new("echo_b", "alpha", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), echo_b.clone()];
    let agent = limited(RateLimits {
        // A day's window (and the test clear of midnight UTC): none ends while it runs.
        rate: Some(Rate::parse("5/day").unwrap()),
        per_tool: [("echo_b".to_string(), Rate::parse("2/day").unwrap())].into(),
        ..Default::default()
    });
    let p = h.pipeline_with(vec![agent], tools, |_| {}).await;
    let ctx = session(&p, "limited", "s1");
    for _ in 0..2 {
        let r = call(&p, &ctx, "echo_b", valid()).await;
        assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{:?}", r.outcome);
    }
    let r = call(&p, &ctx, "echo_b", valid()).await;
    let (rule, reason) = refused_at_rate(&r.outcome).expect("the tool's rate");
    assert_eq!(rule, "rate:tool");
    // When to try again, in seconds, for a client to wait on (the rest of the day at most).
    assert!(
        matches!(&r.outcome, CallOutcome::Refused(x) if x.retry_after_s.is_some_and(|s| (1..=86_400).contains(&s))),
        "{:?}",
        r.outcome
    );
    assert!(
        reason.contains("2/day") && reason.contains("try again in"),
        "{reason}"
    );
    // Refused before the receipt: the tool did not run, and the row says where it stopped.
    assert_eq!(echo_b.calls(), 2);
    let row = row_of(&h.store, &r.call_id).await;
    assert_eq!(row.event.step.as_deref(), Some("rate"));
    assert!(h.store.receipt(&r.call_id).await.unwrap().is_none());
    // The refused call counted nowhere: the agent has 3 of its 5 left.
    for _ in 0..3 {
        let r = call(&p, &ctx, "echo", valid()).await;
        assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{:?}", r.outcome);
    }
    let r = call(&p, &ctx, "echo", valid()).await;
    let (rule, _) = refused_at_rate(&r.outcome).expect("the agent's rate");
    assert_eq!(rule, "rate:agent");
    assert_eq!(echo.calls(), 3);
    // /metrics counts them by step and rule.
    let metrics = p.metrics_text().await.unwrap();
    for line in [
        "aether_refusals_total{step=\"rate\",rule=\"rate:tool\"} 1",
        "aether_refusals_total{step=\"rate\",rule=\"rate:agent\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    h.check().await;
}

#[tokio::test]
async fn each_caller_has_a_budget_of_its_own() {
    clear_of_midnight().await;
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone()];
    let agent = limited(RateLimits {
        per_caller: Some(Rate::parse("2/day").unwrap()),
        ..Default::default()
    });
    let p = h.pipeline_with(vec![agent], tools, |_| {}).await;
    let base = session(&p, "limited", "s1");
    let as_caller = |token: Option<&str>, subject: Option<&str>| aether_pipeline::SessionContext {
        token: token.map(str::to_string),
        subject: subject.map(str::to_string),
        ..base.clone()
    };
    // Two static tokens, two people, and the agent itself (no token): five budgets of two.
    for ctx in [
        as_caller(Some("t1"), None),
        as_caller(Some("t2"), None),
        as_caller(None, Some("alice")),
        as_caller(None, Some("bob")),
        as_caller(None, None),
    ] {
        for _ in 0..2 {
            let r = call(&p, &ctx, "echo", valid()).await;
            assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{:?}", r.outcome);
        }
        let r = call(&p, &ctx, "echo", valid()).await;
        let (rule, _) = refused_at_rate(&r.outcome).expect("the caller's rate");
        assert_eq!(rule, "rate:caller");
    }
    assert_eq!(echo.calls(), 10);
    h.check().await;
}

#[tokio::test]
async fn calls_in_flight_past_the_agents_limit_wait_for_none_and_are_refused() {
    let h = Harness::new();
    let sleeps = Sleeps::new("sleeps");
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let tools: Vec<Arc<dyn Tool>> = vec![sleeps.clone(), echo.clone()];
    let agent = limited(RateLimits {
        concurrent: Some(1),
        ..Default::default()
    });
    let p = Arc::new(h.pipeline_with(vec![agent], tools, |_| {}).await);
    let ctx = session(&p, "limited", "s1");
    let running = tokio::spawn({
        let (p, ctx) = (p.clone(), ctx.clone());
        async move { call(&p, &ctx, "sleeps", valid()).await }
    });
    sleeps.started.notified().await;
    let r = call(&p, &ctx, "echo", valid()).await;
    let (rule, reason) = refused_at_rate(&r.outcome).expect("the limit in flight");
    assert_eq!(rule, "rate:concurrent");
    assert!(reason.contains("1 at once"), "{reason}");
    // The call in flight ends; its place is given back.
    sleeps.token().cancel();
    running.await.unwrap();
    let r = call(&p, &ctx, "echo", valid()).await;
    assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{:?}", r.outcome);
    h.check().await;
}

#[test]
fn rates_are_calls_per_window() {
    assert_eq!(
        Rate::parse("120/min").unwrap(),
        Rate {
            calls: 120,
            window_us: 60_000_000
        }
    );
    assert_eq!(Rate::parse(" 3 / s ").unwrap().to_string(), "3/s");
    for bad in ["", "120", "0/min", "1/week", "x/min", "2000000/s", "-1/min"] {
        assert!(Rate::parse(bad).is_err(), "{bad}");
    }
}

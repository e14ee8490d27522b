//! The command envelope: an expired or malformed envelope is refused before anything runs; a
//! tool that needs confirmation runs only with the caller's explicit confirm; an idempotency
//! key runs a call once and hands a repeat the first result.

use std::sync::Arc;

use aether_pipeline::envelope::Envelope;
use aether_pipeline::{CallOutcome, CallResult, Pipeline, SessionContext};
use aether_policy::config::Limits;
use aether_policy::{Step, Tier, ToolDef};
use aether_tools::{CallContext, NoClient, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::*;

async fn call_env(
    p: &Pipeline,
    ctx: &SessionContext,
    tool: &str,
    args: Value,
    env: Value,
) -> CallResult {
    p.call_with(
        ctx,
        tool,
        args.as_object().cloned(),
        Envelope::from_meta(env.as_object().unwrap()),
        Arc::new(NoClient),
        CancellationToken::new(),
    )
    .await
}

/// A tool that needs the caller's confirmation (not Restricted: no person is asked).
struct Confirmed {
    def: ToolDef,
    inner: Arc<Echo>,
}

#[async_trait]
impl Tool for Confirmed {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.inner.call(cx, args).await
    }
}

#[tokio::test]
async fn an_envelope_decides_before_anything_runs() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let inner = Echo::new("inner", "alpha", Tier::Standard);
    let mut def = def("confirmed", "alpha", Tier::Standard, strict_schema());
    def.meta.needs_confirmation = true;
    let confirmed = Arc::new(Confirmed {
        def,
        inner: inner.clone(),
    });
    let p = h
        .pipeline(
            vec![worker()],
            Limits::default(),
            vec![echo.clone(), confirmed],
        )
        .await;
    let ctx = session(&p, "worker", "s1");

    // Expired, issued in the future, malformed: refused, nothing ran.
    for (env, rule) in [
        (
            json!({"aether/expiresAt": "2001-01-01T00:00:00Z"}),
            "envelope:expired",
        ),
        (
            json!({"aether/issuedAt": 4_102_444_800_000i64}),
            "envelope:future",
        ),
        (json!({"aether/confirm": "yes"}), "envelope:malformed"),
    ] {
        let r = call_env(&p, &ctx, "echo", valid(), env).await;
        refused(&h.store, &r, Step::Envelope, rule).await;
    }
    assert_eq!(echo.calls(), 0);
    // A future expiry lets it run.
    let r = call_env(
        &p,
        &ctx,
        "echo",
        valid(),
        json!({"aether/expiresAt": "2099-01-01T00:00:00Z"}),
    )
    .await;
    assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{r:?}");

    // Confirmation: without it, or with an explicit no, refused; with it, run.
    for env in [json!({}), json!({"aether/confirm": false})] {
        let r = call_env(&p, &ctx, "confirmed", valid(), env).await;
        let (reason, _) = refused(&h.store, &r, Step::Envelope, "envelope:unconfirmed").await;
        assert!(reason.contains("aether/confirm"), "{reason}");
    }
    assert_eq!(inner.calls(), 0);
    let r = call_env(
        &p,
        &ctx,
        "confirmed",
        valid(),
        json!({"aether/confirm": true}),
    )
    .await;
    assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{r:?}");
    assert_eq!(inner.calls(), 1);
    h.check().await;
}

#[tokio::test]
async fn an_idempotency_key_runs_a_call_once() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");
    let key = json!({"aether/idempotencyKey": "order-42"});
    let first = call_env(&p, &ctx, "echo", valid(), key.clone()).await;
    let CallOutcome::Ran(out) = &first.outcome else {
        panic!("{first:?}")
    };
    let again = call_env(&p, &ctx, "echo", valid(), key.clone()).await;
    let CallOutcome::Ran(replayed) = &again.outcome else {
        panic!("{again:?}")
    };
    assert_eq!(echo.calls(), 1, "the repeat did not run");
    assert_eq!(replayed.structured, out.structured);
    assert!(format!("{:?}", replayed.content).contains(&first.call_id));
    // Other arguments under the same key: refused.
    let other = call_env(&p, &ctx, "echo", json!({"text": "other"}), key.clone()).await;
    refused(
        &h.store,
        &other,
        Step::Envelope,
        "idempotency:other-arguments",
    )
    .await;
    assert_eq!(echo.calls(), 1);
    // Another agent's key space is its own.
    let ctx2 = session(&p, "worker", "s2");
    let same_agent_other_session = call_env(&p, &ctx2, "echo", valid(), key.clone()).await;
    assert!(matches!(
        same_agent_other_session.outcome,
        CallOutcome::Ran(_)
    ));
    assert_eq!(
        echo.calls(),
        1,
        "the key belongs to the agent, across its sessions"
    );
    // A call refused before it ran frees its key: the retry runs.
    let fresh = json!({"aether/idempotencyKey": "k2", "aether/expiresAt": "2001-01-01T00:00:00Z"});
    let r = call_env(&p, &ctx, "echo", valid(), fresh).await;
    refused(&h.store, &r, Step::Envelope, "envelope:expired").await;
    let r = call_env(
        &p,
        &ctx,
        "echo",
        valid(),
        json!({"aether/idempotencyKey": "k2"}),
    )
    .await;
    assert!(matches!(r.outcome, CallOutcome::Ran(_)), "{r:?}");
    assert_eq!(echo.calls(), 2);
    h.check().await;
}

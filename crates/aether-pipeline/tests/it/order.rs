//! The steps run in SPEC §2's order: a call that every step would refuse is refused by the
//! first, and as each reason is taken away, by the next one — the order of
//! `aether_pipeline::STEPS`, which is also the `Step` enum's and the crate doc's.

use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::envelope::Envelope;
use aether_pipeline::{CallOutcome, CallResult, Pipeline, Rules, STEPS, SessionContext};
use aether_policy::{AgentProfile, Step, Tier};
use aether_tools::{NoClient, Tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::*;

/// A Restricted tool that reaches the network (it never does: it echoes).
fn probe() -> Arc<Echo> {
    let mut def = def(
        "probe",
        "research",
        Tier::Restricted,
        json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
    );
    def.meta.reaches_network = true;
    def.meta.read_only = false;
    Echo::with_def(def)
}

async fn call_as(
    p: &Pipeline,
    ctx: &SessionContext,
    tool: &str,
    args: Value,
    env: &Value,
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

fn step_of(result: &CallResult) -> Option<Step> {
    match &result.outcome {
        CallOutcome::Refused(r) => Some(r.step),
        _ => None,
    }
}

#[tokio::test]
async fn each_reason_taken_away_lets_the_call_on_to_the_next_step_in_spec_order() {
    clear_of_midnight().await;
    let h = Harness::new();
    let dir = tempfile::tempdir().unwrap();
    let rules_path = dir.path().join("permissions.yaml");
    let deny = "rules:\n  - name: no-probe\n    match: { tool: probe, agent: full }\n    action: always_deny\n";
    std::fs::write(&rules_path, deny).unwrap();
    let tool = probe();
    // Three agents: one without the group, one whose list leaves the tool out, one with both.
    let outside = AgentProfile::with_groups("outside", &["alpha"]);
    let listless = AgentProfile {
        tools: Some(["other".to_string()].into()),
        ..AgentProfile::with_groups("listless", &["research"])
    };
    let full = AgentProfile {
        allowed_domains: vec!["docs.example.com".into()],
        ..AgentProfile::with_groups("full", &["research"])
    };
    // One call a day.
    let limited = AgentProfile {
        rates: aether_policy::agent::RateLimits {
            rate: Some(aether_policy::agent::Rate::parse("1/day").unwrap()),
            ..Default::default()
        },
        ..AgentProfile::with_groups("limited", &["research"])
    };
    let tools: Vec<Arc<dyn Tool>> = vec![tool.clone()];
    let p = h
        .pipeline_with(vec![outside, listless, full, limited], tools, |s| {
            s.rules = Rules::load(&rules_path, true).unwrap();
            s.approval_window = Duration::from_millis(200);
        })
        .await;
    let expired = json!({"aether/expiresAt": 1_000});
    let (outside, listless, full) = (
        session(&p, "outside", "s1"),
        session(&p, "listless", "s2"),
        session(&p, "full", "s3"),
    );
    let bad_args = json!({"url": 5});
    let denied_url = json!({"url": "https://elsewhere.example.net/"});
    let good_url = json!({"url": "https://docs.example.com/page"});

    let mut seen = Vec::new();
    // Halt, and every other reason too.
    p.set_halt(true, "test", "order").await.unwrap();
    seen.push(step_of(
        &call_as(&p, &outside, "nope", bad_args.clone(), &expired).await,
    ));
    p.set_halt(false, "test", "order").await.unwrap();
    // An unknown tool.
    seen.push(step_of(
        &call_as(&p, &outside, "nope", bad_args.clone(), &expired).await,
    ));
    // The tool, unapproved.
    h.edit_registry(&p, "probe", "state = 'unapproved'").await;
    seen.push(step_of(
        &call_as(&p, &outside, "probe", bad_args.clone(), &expired).await,
    ));
    h.edit_registry(&p, "probe", "state = 'approved'").await;
    // An agent without its group; one without it in its list.
    seen.push(step_of(
        &call_as(&p, &outside, "probe", bad_args.clone(), &expired).await,
    ));
    seen.push(step_of(
        &call_as(&p, &listless, "probe", bad_args.clone(), &expired).await,
    ));
    // An agent past its rate: its first call of the day is refused later, and counts.
    let limited = session(&p, "limited", "s4");
    call_as(&p, &limited, "probe", bad_args.clone(), &expired).await;
    seen.push(step_of(
        &call_as(&p, &limited, "probe", bad_args.clone(), &expired).await,
    ));
    // Arguments its schema refuses; then a rule that denies; then a destination the agent may
    // not reach.
    seen.push(step_of(
        &call_as(&p, &full, "probe", bad_args.clone(), &expired).await,
    ));
    seen.push(step_of(
        &call_as(&p, &full, "probe", denied_url.clone(), &expired).await,
    ));
    std::fs::write(&rules_path, "rules: []\n").unwrap();
    assert!(p.reload_rules().unwrap());
    seen.push(step_of(
        &call_as(&p, &full, "probe", denied_url.clone(), &expired).await,
    ));
    // A Restricted tool nobody approves within the window; then an `always_allow` rule and an
    // expired envelope.
    seen.push(step_of(
        &call_as(&p, &full, "probe", good_url.clone(), &expired).await,
    ));
    let allow = "rules:\n  - name: probe-ok\n    match: { tool: probe, agent: full }\n    action: always_allow\n";
    std::fs::write(&rules_path, allow).unwrap();
    assert!(p.reload_rules().unwrap());
    seen.push(step_of(
        &call_as(&p, &full, "probe", good_url.clone(), &expired).await,
    ));
    assert_eq!(tool.calls(), 0, "nothing ran while a step refused");
    // Nothing left to refuse: it runs.
    let ran = call_as(&p, &full, "probe", good_url, &json!({})).await;
    assert!(
        matches!(ran.outcome, CallOutcome::Ran(_)),
        "{:?}",
        ran.outcome
    );
    assert_eq!(tool.calls(), 1);

    let seen: Vec<Step> = seen.into_iter().map(|s| s.expect("a refusal")).collect();
    // Every step before the receipt (which only a store failure or a halt meeting it refuses).
    assert_eq!(seen, STEPS[..STEPS.len() - 1].to_vec());
    h.check().await;
}

/// The order the code runs the steps in is the one the `Step` enum declares and the crate's
/// module doc lists.
#[test]
fn the_step_enum_and_the_crate_doc_list_the_steps_in_the_same_order() {
    let decision = include_str!("../../../aether-vocab/src/decision.rs");
    let body = &decision[decision.find("pub enum Step {").unwrap()..];
    let body = &body[..body.find('}').unwrap()];
    let declared: Vec<&str> = body
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| l.trim_end_matches(','))
        .collect();
    let ran: Vec<String> = STEPS.iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(declared, ran, "the Step enum and STEPS disagree");
    // The crate doc: "2. Halt", "3. Registry", … in the same order, the unknown tool between
    // the halt and the registry.
    let lib = include_str!("../../src/lib.rs");
    let named = |needle: &str| {
        lib.find(needle)
            .unwrap_or_else(|| panic!("the crate doc names no {needle:?}"))
    };
    let places = [
        named("//! 2. Halt"),
        named("an unknown one is `mcp-tool-not-implemented`"),
        named("//! 3. Registry"),
        named("//! 4. Connection layer"),
        named("//! 5. Capability layer"),
        named("//!    Step 5b, rate limits"),
        named("//! 6. Arguments"),
        named("//! 7. Rules"),
        named("//! 8. Egress and DLP"),
        named("//! 9. Tier gate"),
        named("//! 10. Command envelope"),
        named("//! 11. Receipt"),
    ];
    assert_eq!(places.len(), STEPS.len());
    assert!(
        places.windows(2).all(|w| w[0] < w[1]),
        "the crate doc lists the steps out of order"
    );
    // And the sequence itself: `steps` calls one function per step, in this order (between
    // them, only the bookkeeping of the steps' spans: comments, `call.spans…`, `drop(…)`, the
    // egress span's `if` and its closing brace).
    let admission = include_str!("../../src/admission.rs");
    let body = &admission[admission.find("async fn steps(").unwrap()..];
    let body = &body[..body.find("\n    }\n").unwrap()];
    let calls: Vec<&str> = body
        .lines()
        .skip(1)
        .filter(|l| {
            let l = l.trim();
            !(l.starts_with("//")
                || l.contains("call.spans.")
                || l.starts_with("drop(")
                || l.starts_with("if entry.def().meta.reaches_network")
                || l == "}")
        })
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("let entry = ").unwrap_or(l);
            let l = l.strip_prefix("Ok(").unwrap_or(l);
            let l = l.strip_prefix("self.").unwrap_or(l);
            l.split('(').next().filter(|f| !f.is_empty())
        })
        .collect();
    assert_eq!(
        calls,
        [
            "halt",
            "look_up",
            "registry_step",
            "connection",
            "capability",
            "rate",
            "arguments",
            "rules_step",
            "egress",
            "tier_gate",
            "envelope",
            "receipt",
            "run"
        ],
        "admit_and_run's sequence changed: keep it, STEPS and the crate doc in SPEC order"
    );
}

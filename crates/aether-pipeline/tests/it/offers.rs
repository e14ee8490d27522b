//! Offered equals runnable: for several agent profiles, every tool the session is offered
//! passes the registry, connection and capability steps, and every tool it is not offered is
//! refused at one of them, for the reason `Pipeline::offer` gives.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::CallOutcome;
use aether_pipeline::SessionContext;
use aether_policy::{AgentProfile, Hidden, Offer, Step, Tier};
use aether_tools::Tool;

use crate::support::*;

fn step_of(hidden: &Hidden) -> (Step, String) {
    match hidden {
        Hidden::Unapproved => (Step::Registry, "registry:unapproved".into()),
        Hidden::Withdrawn => (Step::Registry, "registry:withdrawn".into()),
        Hidden::DefinitionChanged => (Step::Registry, "registry:definition-changed".into()),
        Hidden::GroupNotAllowed { .. } => (Step::Connection, "connection".into()),
        Hidden::NotInToolList => (Step::Capability, "capability".into()),
        Hidden::DeniedByRule { rule } => (Step::Rules, format!("rule:{rule}")),
        Hidden::Unavailable { .. } => (Step::Capability, "unavailable".into()),
        Hidden::OutOfScope { .. } => (Step::Capability, "scope".into()),
    }
}

fn names(list: &[&str]) -> Option<std::collections::BTreeSet<String>> {
    Some(list.iter().map(|s| s.to_string()).collect())
}

#[tokio::test]
async fn offered_equals_runnable_for_every_profile() {
    let h = Harness::new();
    let catalog: Vec<Arc<Echo>> = [
        ("echo", "alpha", Tier::Standard),
        ("echo_b", "beta", Tier::Standard),
        ("echo_c", "gamma", Tier::Standard),
        ("restricted", "alpha", Tier::Restricted),
        ("withdrawn", "alpha", Tier::Standard),
        ("changed", "gamma", Tier::Standard),
        ("delegate", "orchestration", Tier::Standard),
        ("reply", "orchestration", Tier::Standard),
    ]
    .into_iter()
    .map(|(name, group, tier)| Echo::new(name, group, tier))
    .collect();
    let tools: Vec<Arc<dyn Tool>> = catalog.iter().map(|t| t.clone() as Arc<dyn Tool>).collect();

    let groups_only = AgentProfile::with_groups("groups_only", &["alpha"]);
    let tools_list = AgentProfile {
        tools: names(&["echo", "echo_b"]),
        ..AgentProfile::with_groups("tools_list", &["alpha"])
    };
    let no_servers = AgentProfile {
        mcp_servers: None,
        tools: names(&["echo_c", "restricted", "withdrawn", "changed"]),
        ..AgentProfile::with_groups("no_servers", &[])
    };
    let supervisor = AgentProfile {
        supervisor: true,
        tools: names(&["echo_b"]),
        ..AgentProfile::with_groups("lead", &["beta"])
    };
    let nothing = AgentProfile::with_groups("nothing", &[]);
    let profiles = vec![groups_only, tools_list, no_servers, supervisor, nothing];
    // Restricted calls wait for a person; here nobody decides, so they end quickly, denied.
    let p = h
        .pipeline_with(profiles.clone(), tools, |s| {
            s.approval_window = Duration::from_millis(50)
        })
        .await;
    h.edit_registry(&p, "withdrawn", "state = 'withdrawn'")
        .await;
    h.edit_registry(
        &p,
        "changed",
        &format!(
            "approved_digest = '{}'",
            aether_policy::sha256(b"old definition")
        ),
    )
    .await;

    // What each profile is offered, in catalog order.
    let expected: BTreeMap<&str, Vec<&str>> = [
        ("groups_only", vec!["echo", "restricted"]),
        ("tools_list", vec!["echo", "echo_b"]),
        ("no_servers", vec!["echo_c", "restricted"]),
        ("lead", vec!["echo_b", "delegate", "reply"]),
        ("nothing", vec![]),
        // An OAuth token of groups_only whose scope grants one tool (another scope would
        // grant the rest of alpha).
        ("groups_only with scope", vec!["restricted"]),
    ]
    .into();

    let mut contexts: Vec<(&str, SessionContext)> = profiles
        .iter()
        .map(|profile| {
            let agent = profile.name.as_str();
            (agent, session(&p, agent, agent))
        })
        .collect();
    let grant = |scope: &str, tools: Option<&[&str]>| aether_policy::ScopeGrant {
        scope: scope.into(),
        groups: None,
        tools: tools.and_then(names),
    };
    let reach = aether_policy::ScopeReach {
        grants: vec![grant("only:restricted", Some(&["restricted"]))],
        others: vec![
            grant("only:restricted", Some(&["restricted"])),
            grant("all", None),
        ],
    };
    contexts.push((
        "groups_only with scope",
        SessionContext {
            scope: Some(Arc::new(reach)),
            ..session(&p, "groups_only", "scoped")
        },
    ));

    let mut runs: BTreeMap<String, usize> = BTreeMap::new();
    for (label, ctx) in &contexts {
        let (label, ctx) = (*label, ctx);
        let agent = ctx.agent.name.as_str();
        let entries = p.offered(ctx);
        let offered: Vec<&str> = entries.iter().map(|e| e.def().name.as_str()).collect();
        assert_eq!(offered, expected[label], "{label}'s catalog");

        for entry in p.catalog().iter() {
            let name = entry.def().name.as_str();
            let offer = p.offer(ctx, entry);
            assert_eq!(
                offer == Offer::Offered,
                offered.contains(&name),
                "{agent}/{name}: offer() and offered() disagree"
            );
            let result = call(&p, ctx, name, valid()).await;
            match (&offer, &result.outcome) {
                (Offer::Offered, CallOutcome::Ran(out)) => {
                    assert!(!out.is_error, "{agent}/{name}: {out:?}");
                    *runs.entry(name.to_string()).or_default() += 1;
                }
                // Offered, refused later than step 5: only the tier gate applies to these tools.
                (Offer::Offered, CallOutcome::Refused(r)) => {
                    assert_eq!(
                        (r.step, name),
                        (Step::Tier, "restricted"),
                        "{agent}/{name}: offered but refused: {r}"
                    )
                }
                (Offer::Hidden(hidden), CallOutcome::Refused(r)) => {
                    let (step, rule) = step_of(hidden);
                    assert_eq!(
                        (r.step, r.rule.as_str()),
                        (step, rule.as_str()),
                        "{agent}/{name}"
                    );
                    assert_eq!(
                        r.reason,
                        hidden.explain(name, agent),
                        "{agent}/{name}: offer() explains the refusal"
                    );
                    refused(&h.store, &result, step, &rule).await;
                }
                (offer, outcome) => {
                    panic!("{agent}/{name}: offer {offer:?} but outcome {outcome:?}")
                }
            }
        }
    }

    // Each tool ran exactly as often as it was offered to a profile that could run it.
    for t in &catalog {
        let name = t.def().name.as_str();
        let offered_to = expected
            .values()
            .filter(|list| list.contains(&name))
            .count();
        let expected_runs = if name == "restricted" { 0 } else { offered_to };
        assert_eq!(t.calls(), expected_runs, "{name}");
        assert_eq!(
            runs.get(name).copied().unwrap_or(0),
            expected_runs,
            "{name}"
        );
    }
    // The registry is consulted before the agent's layers: a withdrawn tool is explained as
    // withdrawn even to an agent that lists it.
    let ctx = session(&p, "no_servers", "again");
    let entry = p.catalog().get("withdrawn").unwrap().clone();
    assert_eq!(p.offer(&ctx, &entry), Offer::Hidden(Hidden::Withdrawn));
    let entry = p.catalog().get("changed").unwrap().clone();
    assert_eq!(
        p.offer(&ctx, &entry),
        Offer::Hidden(Hidden::DefinitionChanged)
    );
    let ctx = session(&p, "groups_only", "again");
    let entry = p.catalog().get("echo_b").unwrap().clone();
    assert_eq!(
        p.offer(&ctx, &entry),
        Offer::Hidden(Hidden::GroupNotAllowed {
            group: "beta".into()
        })
    );
    h.check().await;
}

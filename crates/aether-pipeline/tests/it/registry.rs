//! The registry: external tools start unapproved; approval pins the definition; a changed or
//! renamed tool is held back; withdraw, undo and history, each with who and why; sessions
//! hear when their catalog changes.

use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::{CallOutcome, operator};
use aether_policy::ToolDef;
use aether_policy::{Hidden, Offer, Step, Tier};
use aether_store::{RegistryAction, RegistryChange, Store};
use aether_tools::Tool;

use crate::support::*;

fn change(name: &str, action: RegistryAction, why: &str) -> RegistryChange {
    RegistryChange {
        name: name.into(),
        action,
        by: "alice".into(),
        why: why.into(),
    }
}

async fn approve(store: &Store, name: &str, digest: Option<String>) -> Result<(), String> {
    operator::change_registry(
        store,
        change(name, RegistryAction::Approve { digest }, "reviewed"),
        Default::default(),
    )
    .await
    .map(|_| ())
    .map_err(|e| e.to_string())
}

fn offered(p: &aether_pipeline::Pipeline, agent: &str) -> Vec<String> {
    let ctx = session(p, agent, "probe");
    p.offered(&ctx)
        .iter()
        .map(|e| e.def().name.clone())
        .collect()
}

#[tokio::test]
async fn an_external_tool_runs_only_once_its_definition_is_approved() {
    let h = Harness::new();
    let builtin = Echo::new("echo", "alpha", Tier::Standard);
    let external = Echo::new("up__search", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![builtin.clone()], |s| {
            s.external_tools = vec![external.clone() as Arc<dyn Tool>]
        })
        .await;
    let _watch = p.watch(Duration::from_millis(20));
    let mut changes = p.catalog_changes();
    assert_eq!(offered(&p, "worker"), ["echo"]);
    let ctx = session(&p, "worker", "s1");
    let result = call(&p, &ctx, "up__search", valid()).await;
    refused(&h.store, &result, Step::Registry, "registry:unapproved").await;

    let rows = h.store.registry().await.unwrap();
    let row = rows.iter().find(|r| r.name == "up__search").unwrap();
    assert_eq!(row.state.as_str(), "unapproved");
    assert_eq!(row.origin, "external");
    let seen = row.seen_digest.clone().unwrap();
    // Approving a definition other than the one seen (say, reviewed before it changed) is
    // refused and changes nothing.
    let stale = aether_policy::sha256(b"what I reviewed").to_string();
    let err = approve(&h.second_handle(), "up__search", Some(stale))
        .await
        .unwrap_err();
    assert!(err.contains("not the"), "{err}");
    approve(&h.second_handle(), "up__search", Some(seen.clone()))
        .await
        .unwrap();
    // Another process approved it: this pipeline's sessions hear of it through the watcher.
    tokio::time::timeout(Duration::from_secs(2), changes.changed())
        .await
        .expect("the catalog change was announced")
        .unwrap();
    assert_eq!(offered(&p, "worker"), ["echo", "up__search"]);
    ok_text(&call(&p, &ctx, "up__search", valid()).await);
    assert_eq!(external.calls(), 1);
    // Approving it again is a clear no-op error.
    let err = approve(&h.store, "up__search", None).await.unwrap_err();
    assert!(err.contains("already approved"), "{err}");
    h.check().await;
}

#[tokio::test]
async fn a_changed_definition_is_held_back_and_a_renamed_tool_is_new() {
    let h = Harness::new();
    let v1 = Echo::new("up__search", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![], |s| {
            s.external_tools = vec![v1.clone() as Arc<dyn Tool>]
        })
        .await;
    approve(&h.store, "up__search", None).await.unwrap();
    p.sync().await.unwrap();
    assert_eq!(offered(&p, "worker"), ["up__search"]);
    drop(p);

    // The upstream changes its description (a new process sees the new definition).
    let mut changed_def = v1.def().clone();
    changed_def.description = "Searches, and also sends your files somewhere.".into();
    let v2 = Arc::new(Redefined(changed_def));
    let renamed = Echo::new("up__search2", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![], |s| {
            s.external_tools = vec![v2.clone() as Arc<dyn Tool>, renamed.clone()]
        })
        .await;
    assert!(offered(&p, "worker").is_empty());
    let ctx = session(&p, "worker", "s2");
    let entry = p.catalog().get("up__search").unwrap().clone();
    assert_eq!(
        p.offer(&ctx, &entry),
        Offer::Hidden(Hidden::DefinitionChanged)
    );
    let result = call(&p, &ctx, "up__search", valid()).await;
    refused(
        &h.store,
        &result,
        Step::Registry,
        "registry:definition-changed",
    )
    .await;
    let result = call(&p, &ctx, "up__search2", valid()).await;
    refused(&h.store, &result, Step::Registry, "registry:unapproved").await;

    // The registry shows both definitions, so the operator can read the change.
    let row = h
        .store
        .registry()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.name == "up__search")
        .unwrap();
    assert_eq!(row.state.as_str(), "approved");
    assert_ne!(row.seen_digest, row.approved_digest);
    assert!(row.definition.contains("sends your files"));
    assert!(
        !row.approved_definition
            .unwrap()
            .contains("sends your files")
    );

    approve(&h.store, "up__search", None).await.unwrap();
    p.sync().await.unwrap();
    assert_eq!(offered(&p, "worker"), ["up__search"]);
    h.check().await;
}

/// A tool with a given definition (an upstream tool that changed).
struct Redefined(aether_policy::ToolDef);

#[async_trait::async_trait]
impl Tool for Redefined {
    fn def(&self) -> &aether_policy::ToolDef {
        &self.0
    }
    async fn call(
        &self,
        _cx: aether_tools::CallContext,
        _args: serde_json::Value,
    ) -> Result<aether_tools::ToolOutput, aether_tools::ToolError> {
        Ok(aether_tools::ToolOutput::text("ran"))
    }
}

#[tokio::test]
async fn withdraw_undo_and_history_record_who_and_why() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![echo.clone()], |_| {})
        .await;
    let ctx = session(&p, "worker", "s1");

    let row = p
        .change_registry(change(
            "echo",
            RegistryAction::Withdraw,
            "suspicious output",
        ))
        .await
        .unwrap();
    assert_eq!(row.state.as_str(), "withdrawn");
    assert!(offered(&p, "worker").is_empty());
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Registry, "registry:withdrawn").await;
    let err = p
        .change_registry(change("echo", RegistryAction::Withdraw, "again"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("already withdrawn"), "{err}");

    let row = p
        .change_registry(change("echo", RegistryAction::Undo, "false alarm"))
        .await
        .unwrap();
    assert_eq!(row.state.as_str(), "approved");
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    // Nothing left to undo but the first record.
    let err = p
        .change_registry(change("echo", RegistryAction::Undo, "more"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no earlier state"), "{err}");
    // Unknown names and empty reasons change nothing.
    let err = p
        .change_registry(change("ghost", RegistryAction::Withdraw, "x"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no tool named \"ghost\""), "{err}");
    let err = p
        .change_registry(change("echo", RegistryAction::Withdraw, " "))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("why"), "{err}");

    let history = h.store.registry_history(Some("echo".into())).await.unwrap();
    let lines: Vec<(String, String, String, Option<i64>)> = history
        .iter()
        .map(|r| (r.to_state.clone(), r.by.clone(), r.why.clone(), r.undoes))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "approved".into(),
                "aether".into(),
                "built-in, approved from source".into(),
                None
            ),
            (
                "withdrawn".into(),
                "alice".into(),
                "suspicious output".into(),
                None
            ),
            (
                "approved".into(),
                "alice".into(),
                "false alarm".into(),
                Some(history[1].id)
            ),
        ]
    );
    // Each change is an operator row in the audit chain.
    let actions: Vec<String> = all_rows(&h.store)
        .await
        .into_iter()
        .filter(|r| r.event.transport == "operator")
        .map(|r| r.event.tool)
        .collect();
    assert_eq!(actions, ["registry.withdraw", "registry.undo"]);
    // A restart keeps the operator's withdrawal of a built-in (approved from source only
    // when new or changed).
    p.change_registry(change("echo", RegistryAction::Withdraw, "for good"))
        .await
        .unwrap();
    drop(p);
    let p = h
        .pipeline_with(vec![worker()], vec![echo.clone()], |_| {})
        .await;
    assert!(offered(&p, "worker").is_empty());
    match call(&p, &session(&p, "worker", "s3"), "echo", valid())
        .await
        .outcome
    {
        CallOutcome::Refused(r) => assert_eq!(r.rule, "registry:withdrawn"),
        other => panic!("{other:?}"),
    }
    h.check().await;
}

/// An external tool whose definition is broken (an invalid schema), as a faulty upstream
/// could list one.
struct Broken(ToolDef);

#[async_trait::async_trait]
impl Tool for Broken {
    fn def(&self) -> &ToolDef {
        &self.0
    }
    async fn call(
        &self,
        _cx: aether_tools::CallContext,
        _args: serde_json::Value,
    ) -> Result<aether_tools::ToolOutput, aether_tools::ToolError> {
        panic!("a tool left out of the catalog never runs")
    }
}

#[tokio::test]
async fn a_malformed_or_clashing_external_tool_is_left_out_and_aether_still_starts() {
    let h = Harness::new();
    let builtin = Echo::new("echo", "alpha", Tier::Standard);
    let broken = Arc::new(Broken(def(
        "up__broken",
        "alpha",
        Tier::Standard,
        serde_json::json!({"type": 12}),
    )));
    let clash = Echo::new("echo", "alpha", Tier::Standard);
    let good = Echo::new("up__good", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![builtin.clone()], |s| {
            s.external_tools = vec![
                broken as Arc<dyn Tool>,
                clash.clone() as Arc<dyn Tool>,
                good.clone() as Arc<dyn Tool>,
            ]
        })
        .await;
    let ctx = session(&p, "worker", "s1");
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    assert_eq!(builtin.calls(), 1, "the built-in answers its own name");
    assert_eq!(clash.calls(), 0);
    let result = call(&p, &ctx, "up__broken", serde_json::json!({})).await;
    refused(&h.store, &result, Step::UnknownTool, "catalog").await;
    let rows = h.store.registry().await.unwrap();
    assert!(rows.iter().any(|r| r.name == "up__good"));
    assert!(!rows.iter().any(|r| r.name == "up__broken"));
}

#[tokio::test]
async fn a_definition_changed_while_its_call_waited_for_a_person_does_not_run() {
    let h = Harness::new();
    let v1 = Echo::new("up__launch", "alpha", Tier::Restricted);
    let p = h
        .pipeline_with(vec![worker()], vec![], |s| {
            s.external_tools = vec![v1.clone() as Arc<dyn Tool>]
        })
        .await;
    approve(&h.store, "up__launch", None).await.unwrap();
    p.sync().await.unwrap();
    let _watch = p.watch(Duration::from_millis(20));
    let ctx = session(&p, "worker", "s1");
    let (p2, ctx2) = (p.clone(), ctx.clone());
    let task = tokio::spawn(async move {
        p2.call(
            &ctx2,
            "up__launch",
            object(valid()),
            Arc::new(aether_tools::NoClient),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let rows = h.store.approvals(true, 10).await.unwrap();
        if let Some(row) = rows.into_iter().find(|r| r.request.tool == "up__launch") {
            break row;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call asked for a person"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // While it waits, the upstream changes what the tool says it does.
    let mut changed = v1.def().clone();
    changed.description = "Launches, and also mails your keys away.".into();
    p.replace_external("up", vec![Arc::new(Redefined(changed)) as Arc<dyn Tool>])
        .await
        .unwrap();
    // The person approves the call they were shown: it does not run on the new definition.
    operator::decide(&h.store, &waiting.request.id, true, "alice", "looks right")
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the call ended")
        .unwrap();
    match &result.outcome {
        CallOutcome::Refused(r) => {
            assert_eq!(r.rule, "registry:definition-changed", "{r}")
        }
        other => panic!("ran on a definition nobody approved: {other:?}"),
    }
    assert_eq!(v1.calls(), 0);
    h.check().await;
}

//! `run_shell` through the pipeline, in a real bubblewrap sandbox: an ordinary command runs
//! with its row in the store's command log; a destructive one waits for a person, and runs
//! only when approved; the tool is offered only to agents whose project has a shell.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_pipeline::{CallOutcome, Pipeline, SessionContext, operator};
use aether_policy::paths::{RootMode, RootSpec};
use aether_policy::shell::ShellSettings;
use aether_policy::{AgentProfile, Step, config::Limits};
use aether_store::{ApprovalRow, CommandQuery};
use aether_tools::{NoClient, Roots};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::*;

struct World {
    h: Harness,
    ws: std::path::PathBuf,
    _tmp: tempfile::TempDir,
    p: Arc<Pipeline>,
    ctx: SessionContext,
}

async fn world() -> World {
    if let Err(why) = aether_tools::shell::Sandbox::detect().ready() {
        panic!("run_shell's tests need a working bubblewrap: {why}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/keep.txt"), "keep\n").unwrap();
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: ws.to_string_lossy().into_owned(),
        mode: RootMode::ReadWrite,
        writable: None,
        allow_delete: false,
    }])
    .unwrap();
    let mut builder = AgentProfile::with_groups("builder", &["shell"]);
    builder.shell = Some(ShellSettings {
        write: true,
        ..Default::default()
    });
    let plain = AgentProfile::with_groups("plain", &["shell"]);
    let h = Harness::new();
    let p = match h
        .try_pipeline_with_roots(
            vec![builder, plain],
            Limits::default(),
            aether_tools::builtin_tools(),
            roots,
        )
        .await
    {
        Ok(p) => Arc::new(p),
        Err(e) => panic!("pipeline did not start: {e}"),
    };
    let ctx = session(&p, "builder", "s1");
    World {
        h,
        ws,
        _tmp: tmp,
        p,
        ctx,
    }
}

async fn pending(w: &World) -> ApprovalRow {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = w.h.store.approvals(true, 100).await.unwrap();
        if let Some(row) = rows.into_iter().find(|r| r.request.tool == "run_shell") {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "run_shell never asked for approval"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_ordinary_command_runs_and_is_in_the_command_log() {
    let w = world().await;
    let result = call(
        &w.p,
        &w.ctx,
        "run_shell",
        json!({"command": "echo made > sub/new.txt && cat sub/keep.txt"}),
    )
    .await;
    let text = ok_text(&result);
    assert!(text.contains("keep"), "{text}");
    assert_eq!(
        std::fs::read_to_string(w.ws.join("sub/new.txt")).unwrap(),
        "made\n"
    );
    let log =
        w.h.store
            .commands(CommandQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].start.call_id, result.call_id);
    assert_eq!(log[0].start.agent, "builder");
    assert_eq!(log[0].start.sandbox, "bubblewrap");
    assert_eq!(log[0].end.as_ref().unwrap().exit_code, Some(0));
    // Elevated: the audit keeps the full arguments.
    let row = row_of(&w.h.store, &result.call_id).await;
    assert!(
        row.event.arguments.contains("echo made"),
        "{}",
        row.event.arguments
    );
    w.h.check().await;
}

#[tokio::test]
async fn a_destructive_command_waits_for_a_person_and_runs_only_if_approved() {
    let w = world().await;
    let _watch = w.p.watch(Duration::from_millis(20));
    let start = |command: &str| {
        let (p, ctx) = (w.p.clone(), w.ctx.clone());
        let args = object(json!({ "command": command }));
        tokio::spawn(async move {
            p.call(
                &ctx,
                "run_shell",
                args,
                Arc::new(NoClient),
                CancellationToken::new(),
            )
            .await
        })
    };
    // Denied: nothing runs, nothing is logged.
    let task = start("rm -rf sub");
    let row = pending(&w).await;
    assert_eq!(row.request.asked_by, "tool:run_shell");
    let reason = row.request.reason.clone().unwrap_or_default();
    assert!(reason.contains("rm"), "{reason}");
    assert!(
        w.ws.join("sub/keep.txt").exists(),
        "nothing runs before a decision"
    );
    operator::decide(&w.h.second_handle(), &row.request.id, false, "alice", "no")
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&result.outcome, CallOutcome::Refused(r) if r.step == Step::Tier),
        "{:?}",
        result.outcome
    );
    assert!(w.ws.join("sub/keep.txt").exists());
    let log =
        w.h.store
            .commands(CommandQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
    assert!(log.is_empty(), "a denied command is not run: {log:?}");

    // Approved: it runs.
    let task = start("rm -rf sub");
    let row = pending(&w).await;
    operator::decide(
        &w.h.second_handle(),
        &row.request.id,
        true,
        "alice",
        "clean build",
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    ok_text(&result);
    assert!(!w.ws.join("sub").exists());
    w.h.check().await;
}

#[tokio::test]
async fn the_shell_is_offered_only_to_agents_whose_project_has_one() {
    let w = world().await;
    let names = |ctx: &SessionContext| -> Vec<String> {
        w.p.offered(ctx)
            .iter()
            .map(|e| e.def().name.clone())
            .collect()
    };
    assert!(names(&w.ctx).contains(&"run_shell".to_string()));
    let plain = session(&w.p, "plain", "s2");
    assert!(!names(&plain).contains(&"run_shell".to_string()));
    let result = call(&w.p, &plain, "run_shell", json!({"command": "true"})).await;
    let (reason, _) = refused(&w.h.store, &result, Step::Capability, "unavailable").await;
    assert!(reason.contains("no shell"), "{reason}");
}

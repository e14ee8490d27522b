//! The operator's rules (step 7): every action enforced, deny > ask > allow, the matched rule
//! named in the audit, tools denied outright hidden from the catalog, path rules that a
//! symlink or a spelling cannot walk around, and hot reload that keeps the last good rules.

use std::fs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_pipeline::{CallOutcome, Rules, operator};
use aether_policy::config::{Limits, default_agent_profile};
use aether_policy::paths::{RootMode, RootSpec};
use aether_policy::{Hidden, Offer, Step, Tier};
use aether_tools::{NoClient, Roots, Tool};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::*;

fn rules_file(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("permissions.yaml");
    fs::write(&path, text).unwrap();
    path
}

const RULES: &str = r#"
rules:
  - name: no-echo-for-intern
    match: { tool: echo, agent: intern }
    action: always_deny
    reason: interns do not echo
  - name: no-secrets-in-text
    match: { tool: "ec*", args: { text: "(?i)password" } }
    action: always_deny
  - name: ask-for-many
    match: { tool: echo, args: { /count: "^[0-9]{3,}$" } }
    action: ask_user
    reason: large batches need a look
  - name: allow-echo
    match: { tool: echo, team: core }
    action: always_allow
  - name: launch-is-fine-for-core
    match: { tool: launch, team: core, args: { text: "^dry-run$" } }
    action: always_allow
"#;

#[tokio::test]
async fn every_action_is_enforced_and_named_in_the_audit() {
    let h = Harness::new();
    let dir = tempfile::tempdir().unwrap();
    let path = rules_file(dir.path(), RULES);
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let launch = Echo::new("launch", "alpha", Tier::Restricted);
    let intern = aether_policy::AgentProfile::with_groups("intern", &["alpha"]);
    let tools: Vec<Arc<dyn Tool>> = vec![echo.clone(), launch.clone()];
    let p = h
        .pipeline_with(vec![worker(), intern], tools, |s| {
            s.rules = Rules::load(&path, true).unwrap();
            s.approval_window = Duration::from_millis(300);
        })
        .await;
    let _watch = p.watch(Duration::from_millis(20));
    let ctx = session(&p, "worker", "s1");

    // allow (and named in the audit).
    let result = call(&p, &ctx, "echo", json!({"text": "hello", "count": 2})).await;
    ok_text(&result);
    assert_eq!(
        row_of(&h.store, &result.call_id)
            .await
            .event
            .rule
            .as_deref(),
        Some("rule:allow-echo")
    );
    // deny beats allow, whatever the order in the file.
    let result = call(&p, &ctx, "echo", json!({"text": "my Password is x"})).await;
    refused(&h.store, &result, Step::Rules, "rule:no-secrets-in-text").await;
    // ask beats allow: the call waits, and runs once approved.
    let (p2, ctx2) = (p.clone(), ctx.clone());
    let waiting = tokio::spawn(async move {
        p2.call(
            &ctx2,
            "echo",
            object(json!({"text": "batch", "count": 1000})),
            Arc::new(NoClient),
            CancellationToken::new(),
        )
        .await
    });
    let request = loop {
        if let Some(r) = h.store.approvals(true, 10).await.unwrap().pop() {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(request.request.asked_by, "rule:ask-for-many");
    assert_eq!(
        request.request.reason.as_deref(),
        Some("large batches need a look")
    );
    operator::decide(&h.store, &request.request.id, true, "alice", "fine")
        .await
        .unwrap();
    let result = waiting.await.unwrap();
    ok_text(&result);
    let row = row_of(&h.store, &result.call_id).await;
    assert_eq!(row.event.rule.as_deref(), Some("rule:ask-for-many"));
    assert_eq!(row.event.reason.as_deref(), Some("approved by alice: fine"));

    // An operator's always_allow is a standing approval for a Restricted tool, for exactly
    // the calls it names; anything else still waits (and here, expires).
    let result = call(&p, &ctx, "launch", json!({"text": "dry-run"})).await;
    ok_text(&result);
    let receipt = h.store.receipt(&result.call_id).await.unwrap().unwrap();
    assert_eq!(receipt.decision, "allowed by rule:launch-is-fine-for-core");
    let result = call(&p, &ctx, "launch", json!({"text": "for real"})).await;
    refused(
        &h.store,
        &result,
        Step::Tier,
        "approval:expired (tier:restricted)",
    )
    .await;
    assert_eq!(launch.calls(), 1);

    // A tool denied outright to an agent is not offered to it, and its calls are refused
    // for the same reason.
    let intern = session(&p, "intern", "s2");
    let entry = p.catalog().get("echo").unwrap().clone();
    assert_eq!(
        p.offer(&intern, &entry),
        Offer::Hidden(Hidden::DeniedByRule {
            rule: "no-echo-for-intern".into()
        })
    );
    assert!(!p.offered(&intern).iter().any(|e| e.def().name == "echo"));
    let result = call(&p, &intern, "echo", valid()).await;
    let (reason, _) = refused(&h.store, &result, Step::Rules, "rule:no-echo-for-intern").await;
    assert_eq!(reason, "interns do not echo");
    // A rule with conditions on arguments never hides a tool: other calls may pass.
    assert!(p.offered(&ctx).iter().any(|e| e.def().name == "echo"));
    h.check().await;
}

/// A world with one root holding `secrets/key.txt`, a symlink `link -> secrets`, and a rule
/// denying `secrets/**`.
#[tokio::test]
async fn a_path_rule_holds_however_the_path_is_spelled() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(base.join("ws/secrets")).unwrap();
    fs::create_dir_all(base.join("ws/docs")).unwrap();
    fs::write(base.join("ws/secrets/key.txt"), "k\n").unwrap();
    fs::write(base.join("ws/docs/a.txt"), "a\n").unwrap();
    std::os::unix::fs::symlink(base.join("ws/secrets"), base.join("ws/link")).unwrap();
    let path = rules_file(
        &base,
        r#"
rules:
  - name: no-secrets
    match: { path: "secrets/**" }
    action: always_deny
"#,
    );
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.join("ws").to_string_lossy().into_owned(),
        mode: RootMode::ReadWrite,
        writable: None,
        allow_delete: false,
    }])
    .unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::load(&path, true).unwrap();
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    let abs = base
        .join("ws/secrets/key.txt")
        .to_string_lossy()
        .into_owned();
    for spelled in [
        json!({"path": "secrets/key.txt"}),
        json!({"path": "./secrets/key.txt"}),
        json!({"path": "docs/../secrets/key.txt"}),
        json!({"path": "secrets//key.txt"}),
        json!({"path": "Secrets/key.txt"}),
        json!({"path": "link/key.txt"}),
        json!({"path": abs}),
        json!({"root": "ws", "path": "secrets/key.txt"}),
    ] {
        let result = call(&p, &ctx, "read_file", spelled.clone()).await;
        match &result.outcome {
            CallOutcome::Refused(r) => assert_eq!(r.rule, "rule:no-secrets", "{spelled}"),
            // A spelling the tool itself refuses (no such file) never reaches the secret.
            CallOutcome::Ran(out) => assert!(
                out.is_error && !format!("{out:?}").contains("k\\n"),
                "{spelled} read the secret: {out:?}"
            ),
            other => panic!("{spelled}: {other:?}"),
        }
    }
    // Several paths in one call: one forbidden path is enough.
    let result = call(
        &p,
        &ctx,
        "read_multiple_files",
        json!({"paths": ["docs/a.txt", "link/key.txt"]}),
    )
    .await;
    assert!(
        matches!(&result.outcome, CallOutcome::Refused(r) if r.rule == "rule:no-secrets"),
        "{:?}",
        result.outcome
    );
    ok_text(&call(&p, &ctx, "read_file", json!({"path": "docs/a.txt"})).await);

    // Folders that hold the secret: a walk of the root or of the folder, or a move of it,
    // would reach what the rule denies.
    for (tool, args) in [
        ("search_files", json!({"query": "k", "regex": true})),
        ("search_files", json!({"path": "", "query": "k"})),
        ("search_files", json!({"path": "secrets", "query": "k"})),
        ("search_files", json!({"path": "link", "query": "k"})),
        ("list_files", json!({})),
        ("list_dir", json!({"path": "SECRETS"})),
        ("glob", json!({"pattern": "**/*.txt"})),
        (
            "move_file",
            json!({"source": "secrets", "destination": "docs/open"}),
        ),
    ] {
        let result = call(&p, &ctx, tool, args.clone()).await;
        match &result.outcome {
            CallOutcome::Refused(r) => assert_eq!(r.rule, "rule:no-secrets", "{tool} {args}"),
            CallOutcome::Ran(out) => assert!(
                out.is_error && !format!("{out:?}").contains("key.txt"),
                "{tool} {args} reached the secret: {out:?}"
            ),
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    assert!(base.join("ws/secrets/key.txt").exists(), "nothing moved");
    // A folder apart from it is searched as usual.
    let found = ok_text(
        &call(
            &p,
            &ctx,
            "search_files",
            json!({"path": "docs", "query": "a"}),
        )
        .await,
    );
    assert!(found.contains("a.txt"), "{found}");
    h.check().await;
}

#[tokio::test]
async fn no_tool_reads_or_writes_the_rules_file_even_inside_a_root() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let path = rules_file(&base, "rules: []\n");
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.to_string_lossy().into_owned(),
        mode: RootMode::ReadWrite,
        writable: None,
        allow_delete: true,
    }])
    .unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::load(&path, false).unwrap();
    settings.private = vec![base.join("aether.toml")];
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    let open_everything = "rules:\n  - match: { tool: '*' }\n    action: always_allow\n";
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "permissions.yaml", "content": open_everything}),
        ),
        (
            "edit_file",
            json!({"path": "permissions.yaml", "search": "rules: []", "replace": "x"}),
        ),
        ("delete_file", json!({"path": "permissions.yaml"})),
        (
            "move_file",
            json!({"source": "permissions.yaml", "destination": "old.yaml"}),
        ),
        ("read_file", json!({"path": "permissions.yaml"})),
        (
            "write_file",
            json!({"path": "aether.toml", "content": "[server]\nauth = \"none\"\n"}),
        ),
    ] {
        let result = call(&p, &ctx, tool, args.clone()).await;
        match &result.outcome {
            CallOutcome::Ran(out) => assert!(out.is_error, "{tool} {args}: {out:?}"),
            CallOutcome::Refused(_) => {}
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    assert_eq!(fs::read_to_string(&path).unwrap(), "rules: []\n");
    assert!(!base.join("aether.toml").exists());
    // The rules file does not exist yet in this second world: it cannot be created either.
    fs::remove_file(&path).unwrap();
    let result = call(
        &p,
        &ctx,
        "write_file",
        json!({"path": "permissions.yaml", "content": open_everything}),
    )
    .await;
    assert!(
        matches!(&result.outcome, CallOutcome::Ran(out) if out.is_error),
        "{:?}",
        result.outcome
    );
    assert!(!path.exists());
    h.check().await;
}

#[tokio::test]
async fn a_saved_rules_file_applies_and_a_broken_one_keeps_the_last_good_rules() {
    let h = Harness::new();
    let dir = tempfile::tempdir().unwrap();
    let path = rules_file(dir.path(), "rules: []\n");
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![echo.clone()], |s| {
            s.rules = Rules::load(&path, true).unwrap()
        })
        .await;
    let _watcher = p.watch_rules().expect("the rules file is watched");
    let mut changes = p.catalog_changes();
    let ctx = session(&p, "worker", "s1");
    ok_text(&call(&p, &ctx, "echo", valid()).await);

    fs::write(
        &path,
        "rules:\n  - name: stop-echo\n    match: { tool: echo }\n    action: always_deny\n",
    )
    .unwrap();
    let saved = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("the new rules were announced")
        .unwrap();
    assert!(
        saved.elapsed() < Duration::from_secs(2),
        "{:?}",
        saved.elapsed()
    );
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Rules, "rule:stop-echo").await;
    assert!(
        p.offered(&ctx).is_empty(),
        "a tool denied outright is hidden"
    );

    // A broken save: the last good rules stay in force and the error is kept.
    fs::write(&path, "rules:\n  - match: { tool: [ }\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.rules().last_error().is_none() {
        assert!(Instant::now() < deadline, "the broken file was never read");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let error = p.rules().last_error().unwrap();
    assert!(error.contains("previous rules stay"), "{error}");
    let result = call(&p, &ctx, "echo", valid()).await;
    refused(&h.store, &result, Step::Rules, "rule:stop-echo").await;

    // Fixed: the error clears and the new rules apply.
    fs::write(&path, "rules: []\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.rules().last_error().is_some() || !p.rules().current().is_empty() {
        assert!(Instant::now() < deadline, "the fixed file was never read");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ok_text(&call(&p, &ctx, "echo", valid()).await);
    assert_eq!(echo.calls(), 2);
    h.check().await;
}

#[test]
fn a_broken_rules_file_stops_the_start_and_a_missing_optional_one_is_no_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = rules_file(
        dir.path(),
        "rules:\n  - match: { tool: x }\n    action: sometimes\n",
    );
    let err = Rules::load(&path, true).unwrap_err();
    assert!(err.contains("rules[0].action"), "{err}");
    let missing = dir.path().join("nope.yaml");
    assert!(Rules::load(&missing, false).unwrap().current().is_empty());
    let err = Rules::load(&missing, true).unwrap_err();
    assert!(err.contains("cannot read"), "{err}");
}

/// The operator's files in a folder of a root, one of them a link: the folder cannot be moved
/// away, nor the link, nor can a folder named like them be made through a link.
#[tokio::test]
async fn the_folders_and_links_that_hold_the_operators_files_cannot_be_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(base.join("conf")).unwrap();
    fs::create_dir_all(base.join("elsewhere")).unwrap();
    fs::write(base.join("elsewhere/real-rules.yaml"), "rules: []\n").unwrap();
    std::os::unix::fs::symlink(
        base.join("elsewhere/real-rules.yaml"),
        base.join("conf/permissions.yaml"),
    )
    .unwrap();
    fs::write(base.join("conf/aether.toml"), "").unwrap();
    std::os::unix::fs::symlink(&base, base.join("here")).unwrap();
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.to_string_lossy().into_owned(),
        mode: RootMode::ReadWrite,
        writable: None,
        allow_delete: true,
    }])
    .unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::load(&base.join("conf/permissions.yaml"), true).unwrap();
    settings.private = vec![base.join("conf/aether.toml")];
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    for (tool, args) in [
        (
            "move_file",
            json!({"source": "conf", "destination": "conf.old"}),
        ),
        (
            "move_file",
            json!({"source": "conf/permissions.yaml", "destination": "x.yaml"}),
        ),
        (
            "move_file",
            json!({"source": "elsewhere/real-rules.yaml", "destination": "y.yaml"}),
        ),
        (
            "write_file",
            json!({"path": "elsewhere/real-rules.yaml", "content": "rules: []\n#"}),
        ),
        ("delete_file", json!({"path": "conf/permissions.yaml"})),
        ("delete_file", json!({"path": "conf/aether.toml"})),
        (
            "write_file",
            json!({"path": "here/conf/permissions.yaml/x", "content": "x"}),
        ),
        (
            "create_directory",
            json!({"path": "here/conf/aether.toml/sub"}),
        ),
    ] {
        let result = call(&p, &ctx, tool, args.clone()).await;
        match &result.outcome {
            CallOutcome::Ran(out) => assert!(out.is_error, "{tool} {args}: {out:?}"),
            CallOutcome::Refused(_) => {}
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    assert!(base.join("conf/permissions.yaml").is_symlink());
    assert_eq!(
        fs::read_to_string(base.join("elsewhere/real-rules.yaml")).unwrap(),
        "rules: []\n"
    );
    assert!(base.join("conf/aether.toml").is_file());
    // Other files beside them stay writable.
    let result = call(
        &p,
        &ctx,
        "write_file",
        json!({"path": "conf/notes.txt", "content": "ok"}),
    )
    .await;
    assert!(
        matches!(&result.outcome, CallOutcome::Ran(out) if !out.is_error),
        "{:?}",
        result.outcome
    );
    h.check().await;
}

/// Two roots, one inside the other: a rule written for paths of the inner root holds when the
/// same file is named through the outer one.
#[tokio::test]
async fn a_path_rule_holds_through_a_root_that_nests_another() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(base.join("src/secrets")).unwrap();
    fs::write(base.join("src/secrets/k.txt"), "k\n").unwrap();
    let path = rules_file(
        &base,
        "rules:\n  - name: no-secrets\n    match: { path: \"secrets/**\" }\n    action: always_deny\n",
    );
    let spec = |name: &str, dir: &std::path::Path| RootSpec {
        name: name.into(),
        path: dir.to_string_lossy().into_owned(),
        mode: RootMode::ReadOnly,
        writable: None,
        allow_delete: false,
    };
    let roots = Roots::open(&[spec("src", &base.join("src")), spec("repo", &base)]).unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::load(&path, true).unwrap();
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    for args in [
        json!({"root": "src", "path": "secrets/k.txt"}),
        json!({"root": "repo", "path": "src/secrets/k.txt"}),
    ] {
        let result = call(&p, &ctx, "read_file", args.clone()).await;
        assert!(
            matches!(&result.outcome, CallOutcome::Refused(r) if r.rule == "rule:no-secrets"),
            "{args}: {:?}",
            result.outcome
        );
    }
    h.check().await;
}

/// Control files by name (`aether.toml`, `permissions.yaml`), in any folder of any root and in
/// the spellings a case-insensitive or normalising filesystem takes for them, are out of every
/// workspace tool's reach — even for a process that knows neither (started without a
/// configuration, with no rules file of its own): they may be another Aether's.
#[tokio::test]
async fn control_files_of_any_aether_are_out_of_every_workspace_tools_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(base.join("proj/sub")).unwrap();
    fs::create_dir_all(base.join("other")).unwrap();
    let rules =
        "rules:\n  - name: no-shell\n    match: { tool: run_shell }\n    action: always_deny\n";
    for f in [
        "proj/permissions.yaml",
        "proj/sub/permissions.yaml",
        "permissions.yaml",
    ] {
        fs::write(base.join(f), rules).unwrap();
    }
    for f in ["proj/aether.toml", "aether.toml"] {
        fs::write(base.join(f), "[server]\nauth = \"token\"\n").unwrap();
    }
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.to_string_lossy().into_owned(),
        mode: RootMode::ReadWrite,
        writable: None,
        allow_delete: true,
    }])
    .unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::none();
    settings.private = Vec::new();
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    let open = "rules:\n  - match: { tool: '*' }\n    action: always_allow\n";
    let mut cases = Vec::new();
    for existing in [
        "proj/permissions.yaml",
        "proj/sub/permissions.yaml",
        "permissions.yaml",
        "proj/aether.toml",
        "aether.toml",
    ] {
        cases.extend([
            ("write_file", json!({"path": existing, "content": open})),
            (
                "write_file",
                json!({"path": format!("{base}/{existing}", base = base.display()), "content": open}),
            ),
            (
                "write_file",
                json!({"path": format!("proj/../{existing}"), "content": open}),
            ),
            (
                "edit_file",
                json!({"path": existing, "search": "always_deny", "replace": "always_allow"}),
            ),
            ("delete_file", json!({"path": existing})),
            (
                "move_file",
                json!({"source": existing, "destination": "moved.yaml"}),
            ),
            ("read_file", json!({"path": existing})),
            ("read_multiple_files", json!({"paths": [existing]})),
            ("get_file_info", json!({"path": existing})),
        ]);
    }
    for new in [
        "other/permissions.yaml",
        "other/aether.toml",
        "other/PERMISSIONS.YAML",
        "other/Aether.Toml",
        "other/permissions.yaml.",
        "other/aether.toml ",
        "other/permi\u{200B}ssions.yaml",
        "other/\u{FF41}ether.toml",
        "new/deep/permissions.yaml",
    ] {
        cases.extend([
            ("write_file", json!({"path": new, "content": open})),
            ("create_directory", json!({"path": new})),
            (
                "edit_file",
                json!({"path": new, "search": "", "replace": open}),
            ),
            (
                "move_file",
                json!({"source": "proj/sub/permissions.yaml", "destination": new}),
            ),
        ]);
    }
    // Folders that hold one: moving them moves the file.
    cases.extend([
        (
            "move_file",
            json!({"source": "proj", "destination": "proj2"}),
        ),
        (
            "move_file",
            json!({"source": "proj/sub", "destination": "sub2"}),
        ),
    ]);
    fs::write(base.join("other/notes.txt"), "x").unwrap();
    cases.push((
        "move_file",
        json!({"source": "other/notes.txt", "destination": "other/permissions.yaml"}),
    ));
    for (tool, args) in cases {
        let result = call(&p, &ctx, tool, args.clone()).await;
        match &result.outcome {
            // read_multiple_files answers per file.
            CallOutcome::Ran(out) if tool == "read_multiple_files" => {
                let error = out.structured.as_ref().unwrap()["files"][0]["error"].clone();
                assert!(
                    error.as_str().unwrap_or("").contains("Aether's own files"),
                    "{args}: {out:?}"
                );
            }
            CallOutcome::Ran(out) => assert!(out.is_error, "{tool} {args}: {out:?}"),
            CallOutcome::Refused(_) => {}
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    for f in [
        "proj/permissions.yaml",
        "proj/sub/permissions.yaml",
        "permissions.yaml",
    ] {
        assert_eq!(fs::read_to_string(base.join(f)).unwrap(), rules, "{f}");
    }
    let mut left: Vec<String> = fs::read_dir(base.join("other"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt"]);
    assert!(!base.join("new").exists() || !base.join("new/deep/permissions.yaml").exists());
    assert!(base.join("proj/sub").is_dir());
    // Listed by name like a credential file, nothing more; never found by a walk.
    let listed = ok_text(&call(&p, &ctx, "list_dir", json!({"path": "proj"})).await);
    assert!(!listed.contains("permissions.yaml  ("), "{listed}");
    assert!(!listed.contains("aether.toml  ("), "{listed}");
    let found = ok_text(&call(&p, &ctx, "glob", json!({"pattern": "**/*.yaml"})).await);
    assert!(!found.contains("permissions.yaml"), "{found}");
    h.check().await;
}

/// A rules file emptied, removed, cut short or caught while it is being written never loosens
/// the rules: the watcher reads it only once it holds still, and anything but a whole file
/// with its `rules:` list keeps the last good rules.
#[tokio::test]
async fn an_emptied_removed_or_half_written_rules_file_never_loosens_the_rules() {
    let h = Harness::new();
    let dir = tempfile::tempdir().unwrap();
    let full = "rules:\n  - name: a\n    match: { tool: a }\n    action: always_deny\n  - name: b\n    match: { tool: b }\n    action: always_deny\n  - name: c\n    match: { tool: c }\n    action: always_deny\n  - name: stop-echo\n    match: { tool: echo }\n    action: always_deny\n";
    let path = rules_file(dir.path(), full);
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline_with(vec![worker()], vec![echo.clone()], |s| {
            s.rules = Rules::load(&path, false).unwrap()
        })
        .await;
    let _watcher = p.watch_rules().expect("the rules file is watched");
    let ctx = session(&p, "worker", "s1");
    assert_eq!(p.rules().current().len(), 4);
    let wait_error = |what: &'static str| {
        let p = p.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            while p.rules().last_error().is_none() {
                assert!(Instant::now() < deadline, "{what}: never read");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            p.rules().last_error().unwrap()
        }
    };
    for (what, text) in [
        ("emptied", ""),
        ("blank", "\n\n"),
        ("comments only", "# rules\n"),
        ("cut after the key", "rules:\n"),
        ("null", "rules: ~\n"),
    ] {
        fs::write(&path, text).unwrap();
        let error = wait_error(what).await;
        assert!(error.contains("rules: []"), "{what}: {error}");
        assert_eq!(p.rules().current().len(), 4, "{what}");
        let result = call(&p, &ctx, "echo", valid()).await;
        refused(&h.store, &result, Step::Rules, "rule:stop-echo").await;
        // Back to whole (the error clears).
        fs::write(&path, full).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.rules().last_error().is_some() {
            assert!(
                Instant::now() < deadline,
                "{what}: the whole file was never read"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    fs::remove_file(&path).unwrap();
    let error = wait_error("removed").await;
    assert!(error.contains("gone"), "{error}");
    assert_eq!(p.rules().current().len(), 4);
    fs::write(&path, full).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.rules().last_error().is_some() {
        assert!(Instant::now() < deadline, "restored file never read");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Written in pieces, 120 ms apart (under the debounce): every prefix that ends on a rule
    // is a valid file with fewer rules, and none of them may be read.
    let pieces: Vec<&str> = full.split_inclusive("always_deny\n").collect();
    assert_eq!(pieces.len(), 4);
    let writer = {
        let path = path.clone();
        let pieces: Vec<String> = pieces.iter().map(|s| s.to_string()).collect();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = fs::File::create(&path).unwrap();
            for piece in pieces {
                f.write_all(piece.as_bytes()).unwrap();
                f.flush().unwrap();
                std::thread::sleep(Duration::from_millis(120));
            }
        })
    };
    let mut fewest = usize::MAX;
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        fewest = fewest.min(p.rules().current().len());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writer.join().unwrap();
    assert_eq!(fewest, 4, "a half-written file was read");
    assert!(p.rules().last_error().is_none());
    h.check().await;
}

/// A glob's literal part moves the folder walked (`../hr/*` from `docs`, an absolute pattern):
/// a path rule holds for that folder as for one the call names.
#[tokio::test]
async fn a_path_rule_holds_for_the_folder_a_glob_leads_to() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    fs::create_dir_all(base.join("ws/hr")).unwrap();
    fs::create_dir_all(base.join("ws/docs")).unwrap();
    fs::write(base.join("ws/hr/pay.txt"), "salary 1\n").unwrap();
    fs::write(base.join("ws/docs/a.txt"), "salary? no\n").unwrap();
    let path = rules_file(
        &base,
        "rules:\n  - name: no-hr\n    match: { path: \"hr/**\" }\n    action: always_deny\n",
    );
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.join("ws").to_string_lossy().into_owned(),
        mode: RootMode::ReadOnly,
        writable: None,
        allow_delete: false,
    }])
    .unwrap();
    let h = Harness::new();
    let mut settings = h.settings(
        vec![default_agent_profile()],
        Limits::default(),
        aether_tools::builtin_tools(),
        roots,
    );
    settings.rules = Rules::load(&path, true).unwrap();
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "default", "s1");
    let abs = format!("{}/ws/hr/*", base.display());
    for (tool, args) in [
        (
            "search_files",
            json!({"path": "docs", "glob": "../hr/*", "query": "salary"}),
        ),
        ("search_files", json!({"path": "docs", "glob": "../hr/*"})),
        ("glob", json!({"path": "docs", "pattern": "../hr/*"})),
        ("glob", json!({"path": "docs", "pattern": abs})),
        ("glob", json!({"pattern": "hr/*.txt"})),
    ] {
        let result = call(&p, &ctx, tool, args.clone()).await;
        assert!(
            matches!(&result.outcome, CallOutcome::Refused(r) if r.rule == "rule:no-hr"),
            "{tool} {args}: {:?}",
            result.outcome
        );
    }
    let found = ok_text(
        &call(
            &p,
            &ctx,
            "glob",
            json!({"path": "docs", "pattern": "*.txt"}),
        )
        .await,
    );
    assert!(found.contains("docs/a.txt"), "{found}");
    h.check().await;
}

/// A tool that, once admitted, swaps the folder its path names for a link to another folder
/// (as a racing process could between the pipeline's judgement and the tool's open), then
/// reads the path as `read_file` does.
struct SwapThenRead {
    def: aether_policy::ToolDef,
}

#[async_trait::async_trait]
impl Tool for SwapThenRead {
    fn def(&self) -> &aether_policy::ToolDef {
        &self.def
    }
    async fn call(
        &self,
        cx: aether_tools::CallContext,
        args: serde_json::Value,
    ) -> Result<aether_tools::ToolOutput, aether_tools::ToolError> {
        let path = args["path"].as_str().unwrap_or_default();
        let root = cx.roots.iter().next().unwrap();
        let folder = path.split('/').next().unwrap();
        fs::rename(
            root.path.join(folder),
            root.path.join(format!("{folder}.old")),
        )
        .unwrap();
        std::os::unix::fs::symlink("secrets", root.path.join(folder)).unwrap();
        let mut rel = String::new();
        let loc = cx.roots.locate(None, path, &mut rel)?;
        let (file, _) = loc.root.open_file(loc.rel, cx.opening())?;
        let text = std::io::read_to_string(file).unwrap_or_default();
        Ok(aether_tools::ToolOutput::text(text))
    }
}

/// The rules are held where the file is opened: a path judged allowed at admission, whose
/// folder becomes a link to a denied one before the open, is refused by the open.
#[tokio::test]
async fn a_path_swapped_after_admission_meets_the_rules_where_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    fs::create_dir_all(base.join("ws/secrets")).unwrap();
    fs::create_dir_all(base.join("ws/docs")).unwrap();
    fs::write(base.join("ws/secrets/a.txt"), "the secret").unwrap();
    fs::write(base.join("ws/docs/a.txt"), "public").unwrap();
    let path = rules_file(
        &base,
        "rules:\n  - name: no-secrets\n    match: { path: \"secrets/**\" }\n    action: always_deny\n",
    );
    let roots = Roots::open(&[RootSpec {
        name: "ws".into(),
        path: base.join("ws").to_string_lossy().into_owned(),
        mode: RootMode::ReadOnly,
        writable: None,
        allow_delete: false,
    }])
    .unwrap();
    let mut def = def(
        "swap_then_read",
        "alpha",
        Tier::Standard,
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    );
    def.arguments = aether_policy::ArgumentKinds::paths(&["path"]);
    let tool: Arc<dyn Tool> = Arc::new(SwapThenRead { def });
    let h = Harness::new();
    let mut settings = h.settings(vec![worker()], Limits::default(), vec![tool], roots);
    settings.rules = Rules::load(&path, true).unwrap();
    let p = aether_pipeline::Pipeline::new(settings).await.unwrap();
    let ctx = session(&p, "worker", "s1");
    let result = call(&p, &ctx, "swap_then_read", json!({"path": "docs/a.txt"})).await;
    match &result.outcome {
        CallOutcome::Ran(out) => {
            let text = format!("{out:?}");
            assert!(out.is_error, "{text}");
            assert!(text.contains("no-secrets"), "{text}");
            assert!(!text.contains("the secret"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // The audit names the rule that refused the open.
    assert_eq!(
        row_of(&h.store, &result.call_id)
            .await
            .event
            .rule
            .as_deref(),
        Some("rules")
    );
    h.check().await;
}

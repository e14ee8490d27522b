//! Agent runs: recorded, their transcripts kept in order, stopped from elsewhere, ended once.

use aether_store::RunStart;

use super::Backend;

both!(
    a_run_is_recorded_with_its_transcript_and_ends_once,
    a_stop_reaches_only_a_running_run,
    a_run_whose_lease_lapsed_shows_interrupted_and_a_stop_ends_it
);

fn start(id: &str) -> RunStart {
    RunStart {
        id: id.into(),
        parent: None,
        agent: "coder".into(),
        model: "local".into(),
        task: "read the README".into(),
        lease_ms: 60_000,
    }
}

async fn a_run_is_recorded_with_its_transcript_and_ends_once(b: Backend) {
    let (_db, store) = b.store();
    store.run_start(start("run-1")).await.unwrap();
    let mut child = start("run-2");
    child.parent = Some("run-1".into());
    store.run_start(child).await.unwrap();
    for (kind, body) in [
        ("request", "{\"round\":1}"),
        ("reply", "{}"),
        ("tool", "{\"name\":\"read_file\"}"),
    ] {
        store.run_event("run-1", kind, body.into()).await.unwrap();
    }
    assert_eq!(
        store
            .run_event("run-2", "request", "{}".into())
            .await
            .unwrap(),
        1
    );
    store.run_progress("run-1", 2, 300, 40).await.unwrap();
    assert!(
        store
            .run_finish("run-1", "done", Some("it says hello".into()), None)
            .await
            .unwrap()
    );
    // Ended once: a second end changes nothing.
    assert!(
        !store
            .run_finish("run-1", "failed", None, Some("late".into()))
            .await
            .unwrap()
    );

    let run = store.run("run-1").await.unwrap().unwrap();
    assert_eq!(
        (
            run.status.as_str(),
            run.rounds,
            run.prompt_tokens,
            run.completion_tokens
        ),
        ("done", 2, 300, 40)
    );
    assert_eq!(run.answer.as_deref(), Some("it says hello"));
    assert!(run.ended_us.is_some() && run.error.is_none());
    let events = store.run_events("run-1").await.unwrap();
    let kinds: Vec<(i64, &str)> = events.iter().map(|e| (e.seq, e.kind.as_str())).collect();
    assert_eq!(kinds, [(1, "request"), (2, "reply"), (3, "tool")]);
    let listed = store.runs(10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(
        listed
            .iter()
            .find(|r| r.id == "run-2")
            .unwrap()
            .parent
            .as_deref(),
        Some("run-1")
    );
    assert!(store.run("no-such-run").await.unwrap().is_none());
}

async fn a_stop_reaches_only_a_running_run(b: Backend) {
    let (_db, store) = b.store();
    store.run_start(start("run-1")).await.unwrap();
    assert!(!store.run_stop("no-such-run", "ops", "why").await.unwrap());
    assert!(store.run_stop("run-1", "ops", "runaway").await.unwrap());
    // The first stop stands.
    assert!(!store.run_stop("run-1", "other", "again").await.unwrap());
    let run = store.run("run-1").await.unwrap().unwrap();
    assert_eq!(
        (run.stop_by.as_deref(), run.stop_why.as_deref()),
        (Some("ops"), Some("runaway"))
    );
    assert_eq!(
        run.status, "running",
        "a stop is a request; the run ends itself"
    );
    store
        .run_finish("run-1", "stopped", None, Some("stopped by ops".into()))
        .await
        .unwrap();
    assert!(
        !store
            .run_stop("run-1", "ops", "after the end")
            .await
            .unwrap()
    );
}

async fn a_run_whose_lease_lapsed_shows_interrupted_and_a_stop_ends_it(b: Backend) {
    let (_db, store) = b.store();
    let mut dying = start("run-dying");
    dying.lease_ms = 100;
    store.run_start(dying).await.unwrap();
    store.run_start(start("run-alive")).await.unwrap();
    assert_eq!(
        store.run("run-dying").await.unwrap().unwrap().status,
        "running"
    );
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    // Its process said nothing for longer than its lease: interrupted, not running.
    assert_eq!(
        store.run("run-dying").await.unwrap().unwrap().status,
        "interrupted"
    );
    assert_eq!(
        store.run("run-alive").await.unwrap().unwrap().status,
        "running"
    );
    let listed = store.runs(10).await.unwrap();
    let status = |id: &str| listed.iter().find(|r| r.id == id).unwrap().status.clone();
    assert_eq!(
        (status("run-dying"), status("run-alive")),
        ("interrupted".into(), "running".into())
    );
    // A process that was only slow renews its lease and the run is running again.
    assert!(store.run_alive("run-dying").await.unwrap());
    assert_eq!(
        store.run("run-dying").await.unwrap().unwrap().status,
        "running"
    );
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    // A stop ends a run whose process is gone there and then...
    assert!(
        store
            .run_stop("run-dying", "ops", "its host was rebooted")
            .await
            .unwrap()
    );
    let ended = store.run("run-dying").await.unwrap().unwrap();
    assert_eq!(ended.status, "interrupted");
    assert!(ended.ended_us.is_some());
    assert_eq!(ended.stop_by.as_deref(), Some("ops"));
    // ...for good: its process cannot renew it or end it differently.
    assert!(!store.run_alive("run-dying").await.unwrap());
    assert!(
        !store
            .run_finish("run-dying", "done", Some("late".into()), None)
            .await
            .unwrap()
    );
    // A live run is only asked to stop.
    assert!(store.run_stop("run-alive", "ops", "enough").await.unwrap());
    let asked = store.run("run-alive").await.unwrap().unwrap();
    assert_eq!((asked.status.as_str(), asked.ended_us), ("running", None));
    assert_eq!(asked.stop_by.as_deref(), Some("ops"));
}

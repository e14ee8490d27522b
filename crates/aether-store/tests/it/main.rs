//! The store's integration tests. Each runs twice, on SQLite (a store in its own temporary
//! folder) and on PostgreSQL (a store in its own schema of the local server's database
//! `test`, or of `AETHER_TEST_POSTGRES`), through [`both!`].

#[macro_use]
mod db;
mod ledger;
mod retention;
mod runs;

use aether_store::{
    AdmissionReceipt, AuditEvent, AuditQuery, BuiltinDefinition, ReceiptOutcome, Store,
};
pub use db::{Backend, Db};

pub fn receipt(call_id: &str) -> AdmissionReceipt {
    AdmissionReceipt {
        call_id: call_id.into(),
        at_us: 1,
        session: "s1".into(),
        transport: "stdio".into(),
        agent: "default".into(),
        tool: "read_file".into(),
        definition: "sha256:d".into(),
        arguments: "sha256:a".into(),
        decision: "admitted".into(),
    }
}

pub fn event(call_id: &str, outcome: &str) -> AuditEvent {
    AuditEvent {
        at_us: 2,
        call_id: call_id.into(),
        session: "s1".into(),
        transport: "stdio".into(),
        agent: "default".into(),
        team: None,
        project: None,
        tool: "read_file".into(),
        tier: "standard".into(),
        outcome: outcome.into(),
        // A refused call's row: no receipt is expected for it (rows of admitted calls come
        // from `admitted_calls`, with their receipts).
        step: Some("rules".into()),
        rule: None,
        reason: None,
        definition: Some("sha256:d".into()),
        arguments_digest: "sha256:a".into(),
        arguments: "{}".into(),
        result: "ok".into(),
        duration_us: 5,
        single: false,
        trace: None,
        subject: None,
    }
}

async fn a_receipt_is_readable_once_admitted(b: Backend) {
    let (_dir, store) = b.store();
    assert_eq!(
        store.admit(receipt("c1")).await.unwrap(),
        ReceiptOutcome::Durable
    );
    assert_eq!(store.receipt("c1").await.unwrap(), Some(receipt("c1")));
    assert_eq!(store.receipt("nope").await.unwrap(), None);
}

async fn halt_stops_receipts_and_resume_lets_them_through(b: Backend) {
    let (_dir, store) = b.store();
    let state = store
        .set_halt(true, "ops", "incident 7", None)
        .await
        .unwrap();
    assert!(state.halted);
    match store.admit(receipt("c1")).await.unwrap() {
        ReceiptOutcome::Halted(h) => assert_eq!(h.why.as_deref(), Some("incident 7")),
        other => panic!("expected halted, got {other:?}"),
    }
    assert_eq!(
        store.receipt("c1").await.unwrap(),
        None,
        "nothing written while halted"
    );
    store
        .set_halt(false, "ops", "resolved", None)
        .await
        .unwrap();
    assert_eq!(
        store.admit(receipt("c2")).await.unwrap(),
        ReceiptOutcome::Durable
    );
}

async fn a_halt_from_another_process_is_seen_by_the_next_receipt(b: Backend) {
    let (dir, store) = b.store();
    let other = dir.open();
    other.set_halt(true, "cli", "stop", None).await.unwrap();
    assert!(matches!(
        store.admit(receipt("c1")).await.unwrap(),
        ReceiptOutcome::Halted(_)
    ));
}

async fn concurrent_appends_form_one_intact_chain(b: Backend) {
    let (dir, store) = b.store();
    let second = dir.open();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = if i % 2 == 0 {
            store.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            s.audit(event(&format!("c{i}"), "ok")).await.unwrap()
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows, 200);
}

async fn chain_of(b: Backend, n: usize) -> (Db, Store) {
    let (dir, store) = b.store();
    for i in 0..n {
        store.audit(event(&format!("c{i}"), "ok")).await.unwrap();
    }
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    (dir, store)
}

async fn verify_finds_an_edited_row(b: Backend) {
    let (dir, store) = chain_of(b, 5).await;
    dir.raw("UPDATE audit SET outcome = 'refused' WHERE seq = 3");
    let report = store.verify_audit(None).await.unwrap();
    assert_eq!(report.breaks.len(), 1, "{report:?}");
    assert_eq!(report.breaks[0].seq, 3);
    assert!(report.breaks[0].problem.contains("edited"));
}

/// A row's trace context and OAuth subject, kept only where a call had them and covered by
/// the row's hash: changed, added or removed, either breaks it.
async fn a_rows_trace_context_and_subject_are_kept_and_covered_by_its_hash(b: Backend) {
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for (column, value, other) in [
        (
            "trace",
            trace,
            "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01",
        ),
        ("subject", "alice", "mallory"),
    ] {
        let (dir, store) = b.store();
        store.audit(event("plain", "ok")).await.unwrap();
        let mut with = event("with", "ok");
        match column {
            "trace" => with.trace = Some(value.into()),
            _ => with.subject = Some(value.into()),
        }
        store.audit(with).await.unwrap();
        store.audit(event("after", "ok")).await.unwrap();
        let rows = store
            .audit_query(AuditQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        let by_call = |id: &str| rows.iter().find(|r| r.event.call_id == id).unwrap();
        let kept = |r: &aether_store::AuditRecord| match column {
            "trace" => r.event.trace.clone(),
            _ => r.event.subject.clone(),
        };
        assert_eq!(kept(by_call("with")).as_deref(), Some(value));
        assert_eq!(kept(by_call("plain")), None);
        assert!(store.verify_audit(None).await.unwrap().is_intact());
        let seq = by_call("with").seq;
        let plain = by_call("plain").seq;
        for edit in [
            format!("UPDATE audit SET {column} = '{other}' WHERE seq = {seq}"),
            format!("UPDATE audit SET {column} = NULL WHERE seq = {seq}"),
            format!("UPDATE audit SET {column} = '{value}' WHERE seq = {plain}"),
        ] {
            dir.raw(&edit);
            let report = store.verify_audit(None).await.unwrap();
            assert!(!report.is_intact(), "{edit}: {report:?}");
            dir.raw(&format!(
                "UPDATE audit SET {column} = NULL WHERE seq = {plain}"
            ));
            dir.raw(&format!(
                "UPDATE audit SET {column} = '{value}' WHERE seq = {seq}"
            ));
            assert!(
                store.verify_audit(None).await.unwrap().is_intact(),
                "{edit} undone"
            );
        }
    }
}

/// The first row with a row after it in its chain (a writer's chain; PostgreSQL's writer
/// lanes have one each), and that next row: sequence numbers.
async fn row_and_next(store: &Store) -> (i64, i64) {
    let rows = store
        .audit_query(AuditQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    rows.iter()
        .find_map(|row| {
            rows.iter()
                .find(|r| r.chain == row.chain && r.link == row.link + 1)
                .map(|next| (row.seq, next.seq))
        })
        .unwrap()
}

async fn verify_finds_a_deleted_row(b: Backend) {
    let (dir, store) = chain_of(b, 20).await;
    let (victim, next) = row_and_next(&store).await;
    dir.raw(&format!("DELETE FROM audit WHERE seq = {victim}"));
    let report = store.verify_audit(None).await.unwrap();
    assert_eq!(report.breaks[0].seq, next, "{report:?}");
    assert!(report.breaks[0].problem.contains("missing"));
}

async fn verify_finds_a_rehashed_forgery(b: Backend) {
    // An attacker who edits a row and recomputes its own hash still breaks the next link.
    let (dir, store) = chain_of(b, 20).await;
    let (forged, next) = row_and_next(&store).await;
    dir.raw(&format!(
        "UPDATE audit SET result = 'forged', hash = 'f00d' WHERE seq = {forged}"
    ));
    let report = store.verify_audit(None).await.unwrap();
    let seqs: Vec<i64> = report.breaks.iter().map(|b| b.seq).collect();
    assert_eq!(seqs, [forged, next], "{report:?}");
}

async fn verify_finds_reordered_rows_at_the_first_one_moved(b: Backend) {
    // Two neighbours of one chain swap places, each keeping its own hashes: the chain breaks
    // where the order does. (A chain's order is its links; numbers only merge the chains, and
    // a row PostgreSQL numbers as it inserts it has a hash that does not cover its number.)
    let (dir, store) = chain_of(b, 20).await;
    let (first, next) = row_and_next(&store).await;
    dir.raw(&format!(
        "UPDATE audit SET seq = -3 WHERE seq = {first};
         UPDATE audit SET seq = {first} WHERE seq = {next};
         UPDATE audit SET seq = {next} WHERE seq = -3;"
    ));
    let report = store.verify_audit(None).await.unwrap();
    assert!(!report.is_intact());
    assert_eq!(report.breaks[0].seq, first, "{report:?}");
}

async fn the_chain_continues_across_restarts(b: Backend) {
    let (dir, store) = chain_of(b, 3).await;
    drop(store);
    let store = dir.open();
    for i in 3..6 {
        store.audit(event(&format!("c{i}"), "ok")).await.unwrap();
    }
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows, 6);
}

async fn verify_finds_a_truncated_start(b: Backend) {
    // A chain's first row (its start) removed: the second no longer follows the start.
    let (dir, store) = chain_of(b, 20).await;
    let (first, next) = row_and_next(&store).await;
    dir.raw(&format!("DELETE FROM audit WHERE seq = {first}"));
    let report = store.verify_audit(None).await.unwrap();
    assert!(!report.is_intact());
    assert_eq!(report.breaks[0].seq, next);
}

async fn audit_queries_filter_and_page(b: Backend) {
    let (_dir, store) = b.store();
    for i in 0..6 {
        let mut e = event(&format!("c{i}"), if i % 2 == 0 { "ok" } else { "refused" });
        if i == 5 {
            e.agent = "other".into();
        }
        store.audit(e).await.unwrap();
    }
    let q = |f: fn(&mut AuditQuery)| {
        let mut q = AuditQuery {
            limit: 100,
            ..Default::default()
        };
        f(&mut q);
        q
    };
    let refused = store
        .audit_query(q(|q| q.outcome = Some("refused".into())))
        .await
        .unwrap();
    assert_eq!(refused.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 4, 6]);
    let tail = store
        .audit_query(q(|q| {
            q.newest_first = true;
            q.limit = 2
        }))
        .await
        .unwrap();
    assert_eq!(tail.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 5]);
    let page = store
        .audit_query(q(|q| {
            q.after = Some(4);
        }))
        .await
        .unwrap();
    assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [5, 6]);
    // Paging back from the newest: the page before row 5, newest first.
    let back = store
        .audit_query(q(|q| {
            q.newest_first = true;
            q.before = Some(5);
            q.limit = 2
        }))
        .await
        .unwrap();
    assert_eq!(back.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 3]);
    let other = store
        .audit_query(q(|q| q.agent = Some("other".into())))
        .await
        .unwrap();
    assert_eq!(other.len(), 1);
}

async fn builtins_are_approved_from_source_and_withdrawals_stick(b: Backend) {
    let (dir, store) = b.store();
    let b = |digest: &str| BuiltinDefinition {
        name: "read_file".into(),
        digest: digest.into(),
        definition: "{}".into(),
    };
    assert_eq!(
        store.sync_builtins(vec![b("sha256:1")]).await.unwrap(),
        ["read_file"]
    );
    assert!(
        store
            .sync_builtins(vec![b("sha256:1")])
            .await
            .unwrap()
            .is_empty(),
        "unchanged"
    );
    assert_eq!(
        store.sync_builtins(vec![b("sha256:2")]).await.unwrap(),
        ["read_file"]
    );
    let rows = store.registry().await.unwrap();
    assert_eq!(rows[0].approved_digest.as_deref(), Some("sha256:2"));
    assert_eq!(rows[0].state, aether_vocab::RegistryState::Approved);
    dir.raw("UPDATE registry SET state = 'withdrawn'");
    assert!(
        store
            .sync_builtins(vec![b("sha256:3")])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.registry().await.unwrap()[0].state,
        aether_vocab::RegistryState::Withdrawn
    );
    let history = dir.count("SELECT count(*) FROM registry_history WHERE name = 'read_file'");
    assert_eq!(history, 2, "each approval is recorded with who and why");
}

async fn a_store_from_a_newer_aether_is_refused(b: Backend) {
    let (dir, store) = b.store();
    drop(store);
    dir.set_schema_version(99);
    let err = dir.try_open().unwrap_err();
    assert!(err.to_string().contains("newer than this Aether"), "{err}");
}

#[tokio::test]
async fn the_store_folder_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, store) = Backend::Sqlite.store();
    let mode = std::fs::metadata(dir.path().join(".aether"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    store.admit(receipt("c1")).await.unwrap();
    for file in ["aether.db", "aether.db-wal", "aether.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(".aether").join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
}

#[test]
fn unsupported_urls_are_named() {
    let err = Store::open_url("mysql://root:hunter2@x/db").unwrap_err();
    assert!(err.to_string().contains("unsupported store URL"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn an_unreachable_postgres_is_a_clear_error() {
    // Nothing listens on port 9 of loopback.
    let err = Store::open_url("postgres://aether:pw@127.0.0.1:9/test").unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot be reached") && !msg.contains(":pw@"),
        "{msg}"
    );
}

both!(
    a_receipt_is_readable_once_admitted,
    halt_stops_receipts_and_resume_lets_them_through,
    a_halt_from_another_process_is_seen_by_the_next_receipt,
    concurrent_appends_form_one_intact_chain,
    verify_finds_an_edited_row,
    a_rows_trace_context_and_subject_are_kept_and_covered_by_its_hash,
    verify_finds_a_deleted_row,
    verify_finds_a_rehashed_forgery,
    verify_finds_reordered_rows_at_the_first_one_moved,
    the_chain_continues_across_restarts,
    verify_finds_a_truncated_start,
    audit_queries_filter_and_page,
    builtins_are_approved_from_source_and_withdrawals_stick,
    a_store_from_a_newer_aether_is_refused,
    direct_commits_are_as_durable_and_as_halted_as_grouped_ones,
    direct_and_grouped_writers_interleave_into_one_chain,
    verify_finds_an_admitted_call_whose_receipt_was_removed,
    verify_finds_rows_cut_from_the_end_through_their_receipts,
    verify_finds_a_rewritten_row_whose_receipt_disagrees,
    an_expected_head_catches_truncation_and_rewriting,
    a_call_still_running_is_not_reported_missing,
    direct_and_grouped_journal_writes_read_back_alike,
);

async fn direct_commits_are_as_durable_and_as_halted_as_grouped_ones(b: Backend) {
    let (_dir, store) = b.store();
    assert_eq!(
        store.admit_alone(receipt("c1")).await.unwrap(),
        ReceiptOutcome::Durable
    );
    assert_eq!(store.receipt("c1").await.unwrap(), Some(receipt("c1")));
    assert_eq!(store.audit_alone(event("c1", "ok")).await.unwrap().0, 1);
    store.set_halt(true, "ops", "drill", None).await.unwrap();
    assert!(matches!(
        store.admit_alone(receipt("c2")).await.unwrap(),
        ReceiptOutcome::Halted(_)
    ));
    assert_eq!(store.receipt("c2").await.unwrap(), None);
}

async fn direct_and_grouped_writers_interleave_into_one_chain(b: Backend) {
    let (_dir, store) = b.store();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("c{i}");
            if i % 3 == 0 {
                s.admit_alone(receipt(&id)).await.unwrap();
                s.audit_alone(event(&id, "ok")).await.unwrap().0
            } else {
                s.admit(receipt(&id)).await.unwrap();
                s.audit(event(&id, "ok")).await.unwrap()
            }
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    assert!(store.verify_audit(None).await.unwrap().is_intact());
}

async fn direct_and_grouped_journal_writes_read_back_alike(b: Backend) {
    use aether_vocab::journal::{
        JournalEntry, JournalOp, JournalQuery, JournalWrite, content_hash,
    };
    let (_dir, store) = b.store();
    let write = |i: usize| {
        let before = format!("version {i}\n").into_bytes();
        JournalWrite {
            entries: vec![JournalEntry {
                id: 0,
                at_us: i as i64,
                call_id: format!("c{i}"),
                session: "s1".into(),
                agent: "default".into(),
                tool: "edit_file".into(),
                op: JournalOp::Write,
                root: "ws".into(),
                path: "a.txt".into(),
                dest: None,
                before_hash: Some(content_hash(&before)),
                before_mode: Some(0o644),
                after_hash: Some(content_hash(format!("version {}\n", i + 1).as_bytes())),
                undoes: None,
                reverted_by: None,
            }],
            blobs: vec![(content_hash(&before), before)],
            reverts: Vec::new(),
            receipts: Vec::new(),
        }
    };
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (s, w) = (store.clone(), write(i));
        tasks.push(tokio::spawn(async move {
            match i % 2 {
                0 => s.journal_alone(w).await.unwrap(),
                _ => s.journal(w).await.unwrap(),
            }
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 60, "every entry got an id of its own");
    for i in [0, 1, 58, 59] {
        let entries = store
            .journal_entries(JournalQuery {
                call_id: Some(format!("c{i}")),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(entries.len(), 1, "call c{i}");
        let hash = entries[0].before_hash.clone().unwrap();
        assert_eq!(
            store.journal_blob(&hash).await.unwrap(),
            Some(format!("version {i}\n").into_bytes())
        );
    }
}

/// `n` admitted calls, each with its audit row.
pub async fn admitted_calls(b: Backend, n: usize) -> (Db, Store) {
    let (dir, store) = b.store();
    for i in 0..n {
        let id = format!("c{i}");
        store.admit(receipt(&id)).await.unwrap();
        let mut admitted = event(&id, "ok");
        admitted.step = None;
        store.audit(admitted).await.unwrap();
    }
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.receipts, n as u64);
    (dir, store)
}

async fn verify_finds_an_admitted_call_whose_receipt_was_removed(b: Backend) {
    let (dir, store) = admitted_calls(b, 4).await;
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    dir.raw("DELETE FROM receipts WHERE call_id = 'c2'");
    let report = store.verify_audit(None).await.unwrap();
    assert!(!report.is_intact());
    assert_eq!(report.mismatched.len(), 1, "{report:?}");
    assert!(
        report.mismatched[0]
            .problem
            .contains("call c2 is audited as admitted but has no receipt"),
        "{report:?}"
    );
}

async fn verify_finds_rows_cut_from_the_end_through_their_receipts(b: Backend) {
    let (dir, store) = admitted_calls(b, 5).await;
    dir.raw("DELETE FROM audit WHERE seq >= 4");
    // While its process runs, an admitted call without a row is running.
    let report = store.verify_audit(None).await.unwrap();
    assert_eq!((report.in_flight, report.unaudited.len()), (2, 0));
    // Once it stopped cleanly (it audits every call first), the rows were removed.
    store.writer_stopped().await.unwrap();
    let report = store.verify_audit(None).await.unwrap();
    assert!(
        report.breaks.is_empty(),
        "the rest of the chain is consistent"
    );
    assert!(!report.is_intact());
    assert_eq!(report.unaudited, ["c3", "c4"]);
    dir.raw("DELETE FROM audit");
    assert_eq!(store.verify_audit(None).await.unwrap().unaudited.len(), 5);
}

async fn verify_finds_a_rewritten_row_whose_receipt_disagrees(b: Backend) {
    let (dir, store) = admitted_calls(b, 3).await;
    // A forger who also recomputes every hash after the row still contradicts the receipt.
    dir.raw("UPDATE audit SET tool = 'list_roots' WHERE seq = 2");
    let report = store.verify_audit(None).await.unwrap();
    assert!(
        report.mismatched.iter().any(|m| m.problem.contains("c1")),
        "{report:?}"
    );
}

async fn an_expected_head_catches_truncation_and_rewriting(b: Backend) {
    let (dir, store) = admitted_calls(b, 3).await;
    let report = store.verify_audit(None).await.unwrap();
    let head = (report.last_seq.unwrap(), report.head.clone());
    assert!(
        store
            .verify_audit(Some(head.clone()))
            .await
            .unwrap()
            .is_intact()
    );
    dir.raw("UPDATE audit SET hash = 'rewritten' WHERE seq = 3");
    let report = store.verify_audit(Some(head.clone())).await.unwrap();
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.seq == 3 && b.problem.contains("rewritten")),
        "{report:?}"
    );
    // Another chain's retention passing the expected head excuses nothing while the row is
    // there.
    dir.raw(
        "INSERT INTO audit_checkpoints (seq, hash, at_us, pruned, by, signature, chain, link)
         VALUES (1000, 'h', 1, 1, 'test', 's', 'another writer', 1)",
    );
    let report = store.verify_audit(Some(head.clone())).await.unwrap();
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.seq == 3 && b.problem.contains("rewritten")),
        "{report:?}"
    );
    dir.raw("DELETE FROM audit_checkpoints WHERE chain = 'another writer'");
    dir.raw("DELETE FROM audit WHERE seq = 3");
    let report = store.verify_audit(Some(head)).await.unwrap();
    assert!(
        report.breaks.iter().any(|b| b.problem.contains("gone")),
        "{report:?}"
    );
}

/// Another writer in a transaction of its own, holding the writers' lock as a lane does
/// between its two flights: with `draw`, it has drawn a sequence number, and when let go it
/// commits a row there (a copy of the row of call `first`); without, it rolls back.
struct LockHolder {
    go: std::sync::mpsc::Sender<()>,
    drawn: Option<i64>,
    thread: std::thread::JoinHandle<()>,
}

impl LockHolder {
    fn start(url: String, draw: bool) -> LockHolder {
        let (go, gone) = std::sync::mpsc::channel::<()>();
        let (held, holding) = std::sync::mpsc::channel::<Option<i64>>();
        let thread = std::thread::spawn(move || {
            let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            let mut tx = c.transaction().unwrap();
            tx.batch_execute(
                "SELECT pg_advisory_xact_lock_shared(16741, hashtext(current_schema()))",
            )
            .unwrap();
            let seq: Option<i64> = draw.then(|| {
                tx.query_one("SELECT nextval('audit_seq')", &[])
                    .unwrap()
                    .get(0)
            });
            held.send(seq).unwrap();
            gone.recv().unwrap();
            let Some(seq) = seq else {
                return tx.rollback().unwrap();
            };
            tx.execute(
                "INSERT INTO audit (seq, at_us, call_id, session, transport, agent, team, project,
                     tool, tier, outcome, step, rule, reason, definition, arguments_digest,
                     arguments, result, duration_us, prev_hash, hash, single, chain, link, trace)
                 SELECT $1, at_us, 'late', session, transport, agent, team, project, tool, tier,
                     outcome, step, rule, reason, definition, arguments_digest, arguments, result,
                     duration_us, prev_hash, hash, single, 'another writer', 1, trace
                 FROM audit WHERE call_id = 'first'",
                &[&seq],
            )
            .unwrap();
            tx.commit().unwrap();
        });
        let drawn = holding.recv().unwrap();
        LockHolder { go, drawn, thread }
    }

    fn release(self) {
        self.go.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// PostgreSQL's commits run side by side and draw their numbers inside, so one can commit
/// after a row with a higher number. A reader paging on with a cursor must not step past it,
/// nor a first page (its newest row becomes the next cursor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paging_reader_never_steps_past_a_row_still_committing() {
    let (dir, store) = Backend::Postgres.store();
    let first = store.audit(event("first", "refused")).await.unwrap();
    let read_while = |after: Option<i64>| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .audit_query(AuditQuery {
                    after,
                    limit: 100,
                    ..Default::default()
                })
                .await
        })
    };
    let late = LockHolder::start(dir.url(), true);
    let held = late.drawn.unwrap();
    let after = store.audit(event("after", "refused")).await.unwrap();
    assert!(after > held, "{after} drawn after {held}");
    let reader = read_while(Some(first));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !reader.is_finished(),
        "a reader paging on answered while a lower number was still committing"
    );
    late.release();
    let page = reader.await.unwrap().unwrap();
    assert_eq!(
        page.iter()
            .map(|r| (r.seq, r.event.call_id.as_str()))
            .collect::<Vec<_>>(),
        [(held, "late"), (after, "after")]
    );
    let holder = LockHolder::start(dir.url(), false);
    let reader = read_while(None);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !reader.is_finished(),
        "a first page answered while a commit was in flight"
    );
    holder.release();
    assert_eq!(reader.await.unwrap().unwrap().len(), 3);
}

async fn a_call_still_running_is_not_reported_missing(b: Backend) {
    let (_dir, store) = b.store();
    let mut r = receipt("now");
    r.at_us = aether_store::now_us();
    store.admit(r).await.unwrap();
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.in_flight, 1);
}

mod vault {
    use std::os::unix::fs::PermissionsExt;

    use aether_store::Vault;

    use super::Backend;

    both!(credentials_are_sealed_and_open_only_with_their_key_and_name);

    async fn credentials_are_sealed_and_open_only_with_their_key_and_name(b: Backend) {
        let dir = tempfile::tempdir().unwrap();
        let (_db, store) = b.store();
        let key = dir.path().join("keys/vault.key");
        // Never created by a read.
        assert!(Vault::open(&key, false).is_err());
        let vault = Vault::open(&key, true).unwrap();
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(key.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let secret = "ghp_plaintext-that-must-not-be-stored";
        store
            .vault_put(vault.seal("github", secret).unwrap())
            .await
            .unwrap();
        let sealed = store.vault_get("github").await.unwrap().unwrap();
        assert!(!String::from_utf8_lossy(&sealed.ciphertext).contains("plaintext"));
        // The same key (read again from its file) opens it.
        let again = Vault::open(&key, false).unwrap();
        assert_eq!(again.open_secret(&sealed).unwrap(), secret);
        // Moved to another name: does not open.
        let mut moved = sealed.clone();
        moved.name = "other".into();
        assert!(again.open_secret(&moved).is_err());
        // Changed: does not open.
        let mut flipped = sealed.clone();
        flipped.ciphertext[0] ^= 1;
        assert!(again.open_secret(&flipped).is_err());
        // Another key: does not open.
        let other = Vault::open(&dir.path().join("other.key"), true).unwrap();
        assert!(other.open_secret(&sealed).is_err());
        // Names are listed, values never.
        let names = store.vault_names().await.unwrap();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].0, "github");
        assert!(store.vault_remove("github").await.unwrap());
        assert!(!store.vault_remove("github").await.unwrap());
        // Bad names are refused.
        for bad in ["", "a b", "../x", &"x".repeat(65)] {
            assert!(vault.seal(bad, "v").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_key_others_may_read_or_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("vault.key");
        Vault::open(&key, true).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Vault::open(&key, false).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::write(&key, b"short").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = Vault::open(&key, false).unwrap_err().to_string();
        assert!(e.contains("not 32"), "{e}");
    }
}

both!(rate_counts_are_shared_between_writers);

/// What one writer counts, the others read back (its calls per window and in flight); its own
/// are never counted twice.
async fn rate_counts_are_shared_between_writers(b: Backend) {
    let (dir, store) = b.store();
    let key = |k: &str| k.to_string();
    // Windows of now (older ones are let go).
    let now = aether_store::now_us();
    let (w, old) = (now - now % 60_000_000, now - now % 60_000_000 - 60_000_000);
    let seen = store
        .share_rate_counts(
            "a",
            vec![(key("agent:x"), w, 3), (key("agent:x"), old, 9)],
            vec![(key("flight:x"), 2)],
            vec![(key("agent:x"), w)],
            0,
            false,
        )
        .await
        .unwrap();
    // a's own counts are not the others'.
    assert_eq!(seen.windows[&(key("agent:x"), w)], 0);
    assert!(seen.in_flight.is_empty());
    store
        .share_rate_counts("a", vec![(key("agent:x"), w, 2)], vec![], vec![], 0, false)
        .await
        .unwrap();
    let seen = store
        .share_rate_counts(
            "b",
            vec![(key("agent:x"), w, 1)],
            vec![(key("flight:x"), 1)],
            vec![(key("agent:x"), w), (key("agent:y"), w)],
            0,
            false,
        )
        .await
        .unwrap();
    assert_eq!(seen.windows[&(key("agent:x"), w)], 5);
    assert_eq!(seen.windows[&(key("agent:y"), w)], 0);
    assert_eq!(seen.in_flight[&key("flight:x")], 2);
    // Calls in flight are replaced, not added; stale ones are not counted.
    let seen = store
        .share_rate_counts("a", vec![], vec![(key("flight:x"), 0)], vec![], 0, false)
        .await
        .unwrap();
    assert_eq!(seen.in_flight[&key("flight:x")], 1);
    let seen = store
        .share_rate_counts("a", vec![], vec![], vec![], i64::MAX - 1, false)
        .await
        .unwrap();
    assert!(seen.in_flight.is_empty());
    // The read-only read agrees.
    let read = store
        .rate_counts("b", vec![(key("agent:x"), w)])
        .await
        .unwrap();
    assert_eq!(read[&(key("agent:x"), w)], 5);
    // Rows of windows over for a day are let go when asked.
    let long_ago = w - 2 * 86_400_000_000;
    store
        .share_rate_counts(
            "a",
            vec![(key("agent:x"), long_ago, 1)],
            vec![],
            vec![],
            0,
            false,
        )
        .await
        .unwrap();
    let rows = |start: i64| {
        dir.count(&format!(
            "SELECT count(*) FROM rate_counts WHERE window_start = {start}"
        ))
    };
    assert_eq!(rows(long_ago), 1);
    store
        .share_rate_counts("a", vec![], vec![], vec![], 0, true)
        .await
        .unwrap();
    assert_eq!(rows(long_ago), 0);
    assert_eq!(rows(w), 2);
}

both!(calls_are_counted_by_minute_outcome_refusal_and_latency);

/// The per-minute counts of the audit: what the console's overview reads instead of scanning
/// the audit. Calls by outcome per span, refusals by step and rule, latency per tool (of calls
/// that ran); operator actions are not calls. Counted behind a mark, off the calls' commits:
/// each row once, however many processes count.
async fn calls_are_counted_by_minute_outcome_refusal_and_latency(b: Backend) {
    let (dir, store) = b.store();
    let minute = 60_000_000;
    let now = aether_store::now_us();
    let m = now - now % minute - 10 * minute;
    let call = |id: &str, at: i64, tool: &str, outcome: &str, rule: Option<&str>, us: i64| {
        let mut e = event(id, outcome);
        e.at_us = at;
        e.tool = tool.into();
        e.duration_us = us;
        e.step = rule.map(|_| "rules".to_string());
        e.rule = rule.map(String::from);
        e
    };
    for e in [
        call("a", m + 1, "read_file", "ok", None, 800),
        call("b", m + 2, "read_file", "ok", None, 30_000),
        call("c", m + 3, "read_file", "tool_error", None, 9_000_000),
        call("d", m + 4, "list_dir", "ok", None, 1_500),
        call("e", m + 5, "read_file", "refused", Some("no-secrets"), 10),
        call(
            "f",
            m + minute + 5,
            "read_file",
            "refused",
            Some("no-secrets"),
            10,
        ),
        call(
            "g",
            m + minute + 6,
            "web_fetch",
            "refused",
            Some("egress"),
            10,
        ),
    ] {
        store.audit(e).await.unwrap();
    }
    let mut operator = call("h", m + 7, "tokens.create", "ok", None, 0);
    operator.transport = "operator".into();
    store.audit(operator).await.unwrap();

    // Nothing counted until a count runs (the calls' commits do not count).
    let uncounted = store
        .call_overview(m - 60 * minute, m + 3 * minute, minute)
        .await
        .unwrap();
    assert!(uncounted.spans.is_empty(), "{uncounted:?}");
    // Two processes counting at once count each row once: all eight rows read by one of
    // them (the operator's action among them, not counted as a call), none by the other.
    let other = dir.open();
    let (one, two) = tokio::join!(store.count_calls(), other.count_calls());
    let mut read = [one.unwrap(), two.unwrap()];
    read.sort();
    assert_eq!(read, [0, 8]);
    assert_eq!(store.count_calls().await.unwrap(), 0, "nothing new");
    assert_eq!(other.count_calls().await.unwrap(), 0, "nothing new");

    let o = store
        .call_overview(m - 60 * minute, m + 3 * minute, minute)
        .await
        .unwrap();
    let spans: Vec<(i64, Vec<(String, i64)>)> = o
        .spans
        .iter()
        .map(|s| (s.start_us, s.by_outcome.clone().into_iter().collect()))
        .collect();
    assert_eq!(
        spans,
        vec![
            (
                m,
                vec![
                    ("ok".into(), 3),
                    ("refused".into(), 1),
                    ("tool_error".into(), 1)
                ]
            ),
            (m + minute, vec![("refused".into(), 2)]),
        ]
    );
    let refusals: Vec<(&str, &str, i64)> = o
        .refusals
        .iter()
        .map(|r| (r.step.as_str(), r.rule.as_str(), r.calls))
        .collect();
    assert_eq!(
        refusals,
        [("rules", "no-secrets", 2), ("rules", "egress", 1)]
    );
    let read = o.tools.iter().find(|t| t.tool == "read_file").unwrap();
    assert_eq!(
        (read.calls, read.p50_us, read.p95_us),
        (3, Some(50_000), None)
    );
    assert_eq!(read.mean_us, (800 + 30_000 + 9_000_000) / 3);
    let list = o.tools.iter().find(|t| t.tool == "list_dir").unwrap();
    assert_eq!((list.calls, list.p50_us), (1, Some(2_000)));
    assert!(
        o.tools
            .iter()
            .all(|t| t.tool != "tokens.create" && t.tool != "web_fetch")
    );
    // Spans of five minutes hold both minutes; a window that ends before them holds nothing.
    let wide = store
        .call_overview(m, m + 5 * minute, 5 * minute)
        .await
        .unwrap();
    assert_eq!(wide.spans.len(), 1);
    assert_eq!(wide.spans[0].by_outcome["refused"], 3);
    let before = store
        .call_overview(m - 5 * minute, m, minute)
        .await
        .unwrap();
    assert!(before.spans.is_empty() && before.tools.is_empty());

    // A window of whole hours (as the 7- and 30-day ones) reads the hours' counts: the same
    // calls, refusals and latency.
    let hour = 60 * minute;
    let start = m - m.rem_euclid(hour);
    let hours = store
        .call_overview(start - 24 * hour, start + 2 * hour, 2 * hour)
        .await
        .unwrap();
    let mut totals = std::collections::BTreeMap::new();
    for span in &hours.spans {
        assert_eq!(
            (span.start_us - hours.since_us) % (2 * hour),
            0,
            "{hours:?}"
        );
        for (outcome, n) in &span.by_outcome {
            *totals.entry(outcome.as_str()).or_insert(0) += n;
        }
    }
    assert_eq!(
        totals.into_iter().collect::<Vec<_>>(),
        [("ok", 3), ("refused", 3), ("tool_error", 1)]
    );
    assert_eq!(hours.refusals, o.refusals);
    assert_eq!(hours.tools, o.tools);

    // Retention: minutes past three days and hours past 400 go; what a window still reads
    // stays.
    let later = m + aether_store::MINUTES_KEPT_US + 2 * hour;
    assert_eq!(store.prune_call_stats(m).await.unwrap(), 0);
    assert!(store.prune_call_stats(later).await.unwrap() > 0);
    let minutes = store
        .call_overview(m - 60 * minute, m + 3 * minute, minute)
        .await
        .unwrap();
    assert!(minutes.spans.is_empty(), "{minutes:?}");
    let kept = store
        .call_overview(start - 24 * hour, start + 2 * hour, 2 * hour)
        .await
        .unwrap();
    assert_eq!(kept.tools, o.tools, "the hours stay");
    store
        .prune_call_stats(m + aether_store::HOURS_KEPT_US + 2 * hour)
        .await
        .unwrap();
    let gone = store
        .call_overview(start - 24 * hour, start + 2 * hour, 2 * hour)
        .await
        .unwrap();
    assert!(gone.spans.is_empty() && gone.tools.is_empty(), "{gone:?}");
}

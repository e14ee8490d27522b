//! The ledger: a keyed audit that whoever can write the database cannot rewrite, a witness
//! outside the store that shows rows cut from the end, crash recovery that tells an
//! interrupted call from a removed row, a side-effect-free call's single record, and a
//! read-only `verify`.

use aether_store::{
    Access, AuditKey, AuditQuery, AuditRecord, ReceiptOutcome, Store, VerifyOptions, Witness,
    record_hash,
};

use crate::{Backend, Db, event, receipt};

fn key() -> AuditKey {
    AuditKey::from_bytes(&[7u8; 32])
}

/// A keyed store with `n` admitted calls, each with its receipt and row.
async fn keyed(b: Backend, n: usize) -> (Db, Store) {
    let (dir, plain) = b.store();
    drop(plain);
    let store = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    for i in 0..n {
        let id = format!("c{i}");
        store.admit(receipt(&id)).await.unwrap();
        let mut admitted = event(&id, "ok");
        admitted.step = None;
        store.audit(admitted).await.unwrap();
    }
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.keyed, Some(0));
    (dir, store)
}

async fn verify(store: &Store, witness: Option<&std::path::Path>) -> aether_store::ChainReport {
    store
        .verify_audit_with(VerifyOptions {
            key: Some(key()),
            witness: witness.map(|w| w.to_path_buf()),
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn rows(store: &Store) -> Vec<AuditRecord> {
    store
        .audit_query(AuditQuery {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
}

/// What a forger without the key can do: recompute every hash of every chain with the
/// public (keyless) formula from the rows with sequence number `from` on, writing the rows
/// back in place (`rows` as they are in the table now).
fn rehash(dir: &Db, rows: &[AuditRecord], from: i64) {
    let mut rows = rows.to_vec();
    rows.sort_by_key(|r| (r.chain.clone(), r.link));
    let mut prev: std::collections::HashMap<String, String> = Default::default();
    for r in rows.iter_mut() {
        let before = prev
            .get(&r.chain)
            .cloned()
            .unwrap_or_else(|| aether_store::GENESIS.to_string());
        if r.seq >= from {
            r.prev_hash = before;
            r.hash = record_hash(None, r);
            dir.raw(&format!(
                "UPDATE audit SET prev_hash = '{}', hash = '{}' WHERE seq = {}",
                r.prev_hash, r.hash, r.seq
            ));
        }
        prev.insert(r.chain.clone(), r.hash.clone());
    }
}

/// The rows of `row`'s chain, by link.
fn chain_of<'a>(rows: &'a [AuditRecord], row: &AuditRecord) -> Vec<&'a AuditRecord> {
    let mut mine: Vec<_> = rows.iter().filter(|r| r.chain == row.chain).collect();
    mine.sort_by_key(|r| r.link);
    mine
}

async fn an_edited_row_rehashed_without_the_key_is_caught(b: Backend) {
    let (dir, store) = keyed(b, 5).await;
    dir.raw("UPDATE audit SET outcome = 'tool_error' WHERE seq = 3");
    let all = rows(&store).await;
    rehash(&dir, &all, 3);
    let report = verify(&store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.seq == 3 && b.problem.contains("keyed hash")),
        "{report:?}"
    );
}

async fn a_deleted_row_renumbered_and_rehashed_is_caught(b: Backend) {
    let (dir, store) = keyed(b, 20).await;
    let all = rows(&store).await;
    // A row with rows after it in its chain: those move down one link.
    let victim = all
        .iter()
        .find(|r| chain_of(&all, r).last().unwrap().link > r.link)
        .unwrap()
        .clone();
    dir.raw(&format!(
        "DELETE FROM audit WHERE seq = {}; DELETE FROM receipts WHERE call_id = '{}';
         UPDATE audit SET link = link + 1000 WHERE chain = '{chain}' AND link > {link};
         UPDATE audit SET link = link - 1001 WHERE chain = '{chain}' AND link > 1000;",
        victim.seq,
        victim.event.call_id,
        chain = victim.chain,
        link = victim.link
    ));
    let all = rows(&store).await;
    rehash(&dir, &all, victim.seq);
    let report = verify(&store, None).await;
    assert!(!report.breaks.is_empty(), "{report:?}");
}

async fn an_inserted_row_is_caught(b: Backend) {
    let (dir, store) = keyed(b, 3).await;
    let all = rows(&store).await;
    let last = all.iter().max_by_key(|r| r.seq).unwrap();
    let forged = forge_after(&dir, last, last.seq + 1);
    let report = verify(&store, None).await;
    assert!(report.breaks.iter().any(|b| b.seq == forged), "{report:?}");
}

/// What a forger without the key can add: a refusal after row `last` in its chain, numbered
/// `seq`, hashed the keyless way. Returns its number.
fn forge_after(dir: &Db, last: &AuditRecord, seq: i64) -> i64 {
    let mut forged = last.clone();
    forged.seq = seq;
    forged.link = last.link + 1;
    forged.prev_hash = last.hash.clone();
    forged.event.call_id = "forged".into();
    forged.event.outcome = "refused".into();
    forged.event.step = Some("rules".into());
    forged.event.arguments = String::new();
    forged.event.result = String::new();
    forged.event.duration_us = 0;
    let hash = record_hash(None, &forged);
    let e = &forged.event;
    dir.raw(&format!(
        "INSERT INTO audit (seq, at_us, call_id, session, transport, agent, tool, tier, outcome, step,
             arguments_digest, arguments, result, duration_us, prev_hash, hash, single, chain, link)
         VALUES ({}, {}, 'forged', '{}', '{}', '{}', '{}', '{}', 'refused', 'rules', '{}', '', '', 0, '{}', '{hash}', 0, '{}', {})",
        forged.seq, e.at_us, e.session, e.transport, e.agent, e.tool, e.tier, e.arguments_digest,
        last.hash, forged.chain, forged.link
    ));
    seq
}

async fn reordered_rows_are_caught(b: Backend) {
    let (dir, store) = keyed(b, 20).await;
    let all = rows(&store).await;
    // Two neighbours in one chain swap places (links and sequence numbers).
    let first = all
        .iter()
        .find(|r| chain_of(&all, r).last().unwrap().link > r.link)
        .unwrap();
    let second = chain_of(&all, first)
        .into_iter()
        .find(|r| r.link == first.link + 1)
        .unwrap();
    dir.raw(&format!(
        "UPDATE audit SET seq = -1, link = -1 WHERE seq = {a};
         UPDATE audit SET seq = {a}, link = {al} WHERE seq = {b};
         UPDATE audit SET seq = {b}, link = {bl} WHERE seq = -1;",
        a = first.seq,
        al = first.link,
        b = second.seq,
        bl = second.link
    ));
    let all_now = rows(&store).await;
    rehash(&dir, &all_now, first.seq);
    let report = verify(&store, None).await;
    assert!(
        report.breaks.iter().any(|b| b.seq == first.seq),
        "{report:?}"
    );
}

/// Appends a checkpoint of each of `store`'s chains to the witness at `path`.
async fn witness_all(store: &Store, path: &std::path::Path) {
    let store_id = store.keying().unwrap().store_id.clone();
    for head in store.audit_heads().await.unwrap() {
        Witness::at(path)
            .append(&key(), &store_id, &head, aether_store::now_us())
            .unwrap();
    }
}

async fn the_witness_catches_a_cut_tail_and_wiped_tables(b: Backend) {
    let (dir, store) = keyed(b, 5).await;
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("witness.log");
    witness_all(&store, &path).await;
    let report = verify(&store, Some(&path)).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.witnessed.map(|w| w.0), Some(5));
    // The last two rows cut, with their receipts (nothing else would show it): the end of
    // their chains, or the whole of a chain that had only them.
    dir.raw("DELETE FROM audit WHERE seq >= 4; DELETE FROM receipts WHERE call_id IN ('c3', 'c4')");
    let report = verify(&store, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("cut from the end") || b.problem.contains("rows wiped")),
        "{report:?}"
    );
    // Both tables wiped.
    dir.raw("DELETE FROM audit; DELETE FROM receipts");
    let report = verify(&store, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("rows wiped")),
        "{report:?}"
    );
}

async fn a_forged_or_removed_marker_is_caught(b: Backend) {
    let (dir, store) = keyed(b, 3).await;
    // Moving the keyed start past every row would let keyless rows pass: the marker is signed.
    dir.raw("UPDATE audit_keying SET keyed_after_seq = 3");
    let report = verify(&store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("keying marker")),
        "{report:?}"
    );
    dir.raw("UPDATE audit_keying SET keyed_after_seq = 0, receipts_checked_after_seq = 99");
    let report = verify(&store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("keying marker")),
        "{report:?}"
    );
    // Removed, with every row rehashed the keyless way: the witness still names the store.
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("witness.log");
    let keying = store.keying().unwrap().clone();
    witness_all(&store, &path).await;
    dir.raw("DELETE FROM audit_keying");
    let all = rows(&store).await;
    rehash(&dir, &all, 1);
    let report = verify(&store, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("no keying marker")),
        "{report:?}"
    );
    // And an edited witness line is not taken for a checkpoint.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"seq\":3", "\"seq\":2")).unwrap();
    dir.raw(&format!(
        "INSERT INTO audit_keying (id, key_id, store_id, keyed_after_seq, keyed_after_hash,
             receipts_checked_after_seq, at_us, heads, mac)
         VALUES (1, '{}', '{}', 0, '{}', 0, {}, '{}', '{}')",
        keying.key_id,
        keying.store_id,
        keying.keyed_after_hash,
        keying.at_us,
        aether_store::Keying::heads_text(keying.heads.as_deref().unwrap()),
        keying.mac
    ));
    let report = verify(&store, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("not signed")),
        "{report:?}"
    );
}

async fn a_store_keyed_under_one_key_refuses_another_and_keyless_writers(b: Backend) {
    let (dir, store) = keyed(b, 1).await;
    drop(store);
    let other = AuditKey::from_bytes(&[9u8; 32]);
    let err = Store::open(&dir.url(), Access::Write(Some(other))).unwrap_err();
    assert!(err.to_string().contains("another vault key"), "{err}");
    let keyless = dir.open();
    let err = keyless.audit(event("x", "ok")).await.unwrap_err();
    assert!(err.to_string().contains("keyed"), "{err}");
    let err = keyless.verify_audit(None).await.unwrap_err();
    assert!(err.to_string().contains("needs the vault key"), "{err}");
}

async fn a_crashed_writers_calls_are_interrupted_not_missing(b: Backend) {
    let (dir, store) = keyed(b, 2).await;
    store.admit(receipt("running")).await.unwrap();
    let report = verify(&store, None).await;
    assert_eq!((report.in_flight, report.interrupted), (1, 0), "{report:?}");
    assert!(report.is_intact());
    // Its process gone without stopping (on this host: another process's start time).
    dir.raw("UPDATE writers SET proc_start = -1");
    let report = verify(&store, None).await;
    assert_eq!((report.in_flight, report.interrupted), (0, 1), "{report:?}");
    assert!(report.is_intact(), "a crash is not tampering: {report:?}");
    let (unfinished, writers) = store.unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].receipt.call_id, "running");
    let mut row = event("running", "interrupted");
    row.step = None;
    assert_eq!(
        store.record_interrupted(vec![row], writers).await.unwrap(),
        1
    );
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.in_flight, report.interrupted), (0, 0));
    // Reaped: the next start finds nothing.
    assert!(store.unfinished().await.unwrap().0.is_empty());
    // A writer that stopped cleanly audited all its calls: a row missing then is removed.
    store.admit(receipt("later")).await.unwrap();
    let mut later = event("later", "ok");
    later.step = None;
    store.audit(later).await.unwrap();
    store.writer_stopped().await.unwrap();
    dir.raw("DELETE FROM audit WHERE call_id = 'later'");
    let report = verify(&store, None).await;
    assert_eq!(report.unaudited, ["later"], "{report:?}");
}

async fn a_single_record_meets_a_committed_halt(b: Backend) {
    let (dir, store) = keyed(b, 0).await;
    let mut read = event("r1", "ok");
    read.step = None;
    read.single = true;
    read.result = "the file's text".into();
    let (_, halt) = store.audit_call(read.clone()).await.unwrap();
    assert!(halt.is_none());
    let other = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    other.set_halt(true, "ops", "drill", None).await.unwrap();
    read.call_id = "r2".into();
    let (_, halt) = store.audit_call(read).await.unwrap();
    assert_eq!(halt.unwrap().why.as_deref(), Some("drill"));
    let row = rows(&store).await.pop().unwrap();
    assert_eq!(row.event.call_id, "r2");
    assert_eq!(
        (
            row.event.outcome.as_str(),
            row.event.step.as_deref(),
            row.event.result.as_str()
        ),
        ("refused", Some("halt"), "")
    );
    // Single records need no receipt; the flag is covered by the keyed hash.
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    dir.raw("UPDATE audit SET single = 0 WHERE call_id = 'r1'");
    assert!(!verify(&store, None).await.is_intact());
    assert!(matches!(
        store.admit(receipt("c9")).await.unwrap(),
        ReceiptOutcome::Halted(_)
    ));
}

/// The newest row `store` wrote, of its chains.
async fn head_of(store: &Store) -> aether_store::ChainHead {
    let heads = store.audit_heads().await.unwrap();
    heads.into_iter().max_by_key(|h| h.seq).unwrap()
}

/// One admitted call with its receipt and row, written by `store`.
async fn call(store: &Store, id: &str) {
    store.admit(receipt(id)).await.unwrap();
    let mut admitted = event(id, "ok");
    admitted.step = None;
    store.audit(admitted).await.unwrap();
}

async fn writers_keep_chains_of_their_own_and_one_removed_whole_is_caught(b: Backend) {
    let (dir, first) = keyed(b, 2).await;
    let second = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    call(&second, "s0").await;
    call(&first, "c2").await;
    call(&second, "s1").await;
    let all = rows(&first).await;
    let chains: std::collections::BTreeSet<&str> = all.iter().map(|r| r.chain.as_str()).collect();
    // A chain per writer connection (PostgreSQL gives each process a few), each a writer's:
    // two processes.
    let writers: std::collections::BTreeSet<&str> = chains
        .iter()
        .map(|c| c.split('/').next().unwrap())
        .collect();
    assert_eq!(writers.len(), 2, "{all:?}");
    // Each chain counts its own links from 1; sequence numbers are unique and rise along it.
    for chain in &chains {
        let mine: Vec<_> = all.iter().filter(|r| r.chain == *chain).collect();
        assert_eq!(
            mine.iter().map(|r| r.link).collect::<Vec<_>>(),
            (1..=mine.len() as i64).collect::<Vec<_>>()
        );
        assert!(mine.windows(2).all(|w| w[0].seq < w[1].seq));
    }
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("witness.log");
    witness_all(&first, &path).await;
    witness_all(&second, &path).await;
    let report = verify(&first, Some(&path)).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        (report.chains, report.rows, report.witness_lines),
        (chains.len() as u64, 5, chains.len() as u64)
    );
    // The second writer's chains removed whole, receipts too: only the witness can tell.
    let gone = head_of(&second).await.chain;
    let process = gone.split('/').next().unwrap();
    dir.raw(&format!(
        "DELETE FROM audit WHERE chain LIKE '{process}%'; DELETE FROM receipts WHERE call_id LIKE 's%'"
    ));
    let report = verify(&first, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains(&gone) && b.problem.contains("rows wiped")),
        "{report:?}"
    );
    // A row moved from one chain into the other breaks both.
    let (dir, first) = keyed(b, 2).await;
    let second = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    call(&second, "s0").await;
    let theirs = head_of(&second).await;
    let mine = head_of(&first).await;
    dir.raw(&format!(
        "UPDATE audit SET chain = '{}', link = {} WHERE seq = {}",
        mine.chain,
        mine.link + 1,
        theirs.seq
    ));
    assert!(!verify(&first, None).await.is_intact());
}

async fn writers_commit_side_by_side_and_each_meets_a_committed_halt(b: Backend) {
    let (dir, first) = keyed(b, 0).await;
    let second = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    // Both at once, many calls in flight each: their batches commit side by side.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..40 {
        for (store, prefix) in [(&first, "a"), (&second, "b")] {
            let store = store.clone();
            calls.spawn(async move { call(&store, &format!("{prefix}{i}")).await });
        }
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    let report = verify(&first, None).await;
    assert!(report.is_intact(), "{report:?}");
    let chains: std::collections::BTreeSet<String> =
        rows(&first).await.into_iter().map(|r| r.chain).collect();
    assert!(chains.len() >= 2);
    assert_eq!(
        (report.chains, report.rows, report.receipts),
        (chains.len() as u64, 80, 80)
    );
    // A halt committed by a third process: the next commit of each writer meets it.
    let ops = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    ops.set_halt(true, "ops", "drill", None).await.unwrap();
    for store in [&first, &second] {
        assert!(matches!(
            store.admit(receipt("after")).await.unwrap(),
            ReceiptOutcome::Halted(_)
        ));
    }
    assert!(verify(&first, None).await.is_intact());
}

/// A store of an earlier release: its rows are one chain (`""`), linked by sequence number and
/// hashed by the formula of then. New writers chain beside it, and every row still verifies.
async fn rows_from_before_chains_verify_beside_new_chains(b: Backend) {
    let (dir, store) = keyed(b, 3).await;
    let mut prev = aether_store::GENESIS.to_string();
    for mut r in rows(&store).await {
        r.chain = String::new();
        r.link = r.seq;
        r.prev_hash = prev.clone();
        let hash = record_hash(Some(&key()), &r);
        dir.raw(&format!(
            "UPDATE audit SET chain = '', link = seq, prev_hash = '{prev}', hash = '{hash}' WHERE seq = {}",
            r.seq
        ));
        prev = hash;
    }
    drop(store);
    let store = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    call(&store, "new").await;
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        (report.chains, report.rows, report.last_seq),
        (2, 4, Some(4))
    );
    // The old chain is checked as before: a row edited there is caught.
    dir.raw("UPDATE audit SET outcome = 'tool_error' WHERE seq = 2");
    let report = verify(&store, None).await;
    assert!(report.breaks.iter().any(|b| b.seq == 2), "{report:?}");
}

/// A commit that fails (a receipt for a call already admitted) writes nothing and leaves its
/// writer ready: every writer lane commits the calls after it.
async fn a_failed_commit_leaves_nothing_behind_and_the_next_ones_land(b: Backend) {
    let (_dir, store) = keyed(b, 0).await;
    call(&store, "once").await;
    for _ in 0..20 {
        assert!(store.admit(receipt("once")).await.is_err());
    }
    for i in 0..20 {
        call(&store, &format!("after{i}")).await;
    }
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.rows, report.receipts), (21, 21));
}

/// Another process reads a (crashed) writer's chains' heads by the writer's id: its own
/// chain and its lanes', and no other writer's.
async fn a_writers_chains_are_found_by_its_id(b: Backend) {
    let (dir, first) = keyed(b, 12).await;
    let other = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    call(&other, "o1").await;
    let mut mine = first.audit_heads().await.unwrap();
    let writer = mine[0].chain.split('/').next().unwrap().to_string();
    let mut found = other.audit_heads_of(vec![writer]).await.unwrap();
    mine.sort_by(|a, b| a.chain.cmp(&b.chain));
    found.sort_by(|a, b| a.chain.cmp(&b.chain));
    assert!(!found.is_empty());
    assert_eq!(found, mine);
}

/// A writer gone without stopping is listed as crashed (for its chains to be witnessed)
/// until a start puts it right; a live one, or one that stopped cleanly, is not.
async fn a_crashed_writer_is_listed_until_put_right(b: Backend) {
    let (dir, first) = keyed(b, 2).await;
    let other = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    assert!(other.crashed_writers().await.unwrap().is_empty());
    dir.raw("UPDATE writers SET proc_start = -1");
    let crashed = other.crashed_writers().await.unwrap();
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    let heads = other.audit_heads_of(crashed.clone()).await.unwrap();
    let mut mine = first.audit_heads().await.unwrap();
    mine.sort_by(|a, b| a.chain.cmp(&b.chain));
    let mut heads_sorted = heads;
    heads_sorted.sort_by(|a, b| a.chain.cmp(&b.chain));
    assert_eq!(heads_sorted, mine);
    other.record_interrupted(Vec::new(), crashed).await.unwrap();
    assert!(other.crashed_writers().await.unwrap().is_empty());
}

both!(
    a_crashed_writer_is_listed_until_put_right,
    a_writers_chains_are_found_by_its_id,
    a_failed_commit_leaves_nothing_behind_and_the_next_ones_land,
    rows_from_before_chains_verify_beside_new_chains,
    writers_keep_chains_of_their_own_and_one_removed_whole_is_caught,
    writers_commit_side_by_side_and_each_meets_a_committed_halt,
    an_edited_row_rehashed_without_the_key_is_caught,
    a_deleted_row_renumbered_and_rehashed_is_caught,
    an_inserted_row_is_caught,
    reordered_rows_are_caught,
    the_witness_catches_a_cut_tail_and_wiped_tables,
    a_forged_or_removed_marker_is_caught,
    a_store_keyed_under_one_key_refuses_another_and_keyless_writers,
    a_crashed_writers_calls_are_interrupted_not_missing,
    a_single_record_meets_a_committed_halt,
    keyless_chains_from_before_keying_are_pinned_by_the_signed_marker,
    a_marker_of_an_older_release_is_named_in_full_at_the_next_keyed_open,
);

/// `verify` takes no lock and writes nothing: it runs while another process holds the
/// writers' lock, and on a copy of the store whose folder it cannot write.
#[tokio::test]
async fn verify_reads_a_store_it_cannot_write() {
    let (dir, store) = keyed(Backend::Sqlite, 3).await;
    let Db::Sqlite(folder) = &dir else {
        unreachable!()
    };
    let db = folder.path().join(".aether/aether.db");
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let readonly = Store::open(&dir.url(), Access::ReadOnly).unwrap();
    let report = verify(&readonly, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert!(readonly.audit(event("x", "ok")).await.is_err());
    holder.execute_batch("ROLLBACK").unwrap();
    drop(store);
    // A copy made with SQLite's backup, in a folder made read-only.
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join("copy.db");
    holder
        .execute_batch(&format!("VACUUM INTO '{}'", copied.display()))
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copied, std::fs::Permissions::from_mode(0o400)).unwrap();
    std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    let url = format!("sqlite://{}", copied.display());
    let readonly = Store::open(&url, Access::ReadOnly).unwrap();
    let report = verify(&readonly, None).await;
    std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.rows, 3);
}

/// A journal write carrying its call's receipt commits both in one transaction, and meets the
/// halt there: halted, neither is written.
async fn a_receipt_rides_its_journal_write_and_meets_the_halt(b: Backend) {
    use aether_store::{JournalOp, content_hash};
    let (dir, store) = keyed(b, 0).await;
    let write = |call: &str| journal_write(call, "a.txt", JournalOp::Write, Some(b"old"), b"new");
    store.journal(write("e1")).await.unwrap();
    assert!(store.receipt("e1").await.unwrap().is_some());
    assert_eq!(
        store
            .journal_blob(&content_hash(b"new"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"new"[..]),
        "the new content is journalled (the redo log)"
    );
    let other = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    other.set_halt(true, "ops", "drill", None).await.unwrap();
    let err = store.journal(write("e2")).await.unwrap_err();
    assert!(matches!(err, aether_store::StoreError::Halted(_)), "{err}");
    assert!(store.receipt("e2").await.unwrap().is_none());
    let entries = store
        .journal_entries(aether_store::JournalQuery {
            call_id: Some("e2".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(entries.is_empty(), "nothing journalled while halted");
    // The alone path (a caller committing on its own thread) meets it alike.
    let err = store.journal_alone(write("e3")).await.unwrap_err();
    assert!(matches!(err, aether_store::StoreError::Halted(_)), "{err}");
}

both!(a_receipt_rides_its_journal_write_and_meets_the_halt);

/// Removing the writers' rows does not excuse rows cut from the chain: a receipt naming a
/// writer nobody recorded is a row removed, not a call still running.
async fn a_receipt_whose_writer_was_removed_is_missing_not_running(b: Backend) {
    let (dir, store) = keyed(b, 2).await;
    store.admit(receipt("cut")).await.unwrap();
    assert_eq!(verify(&store, None).await.in_flight, 1);
    dir.raw("DELETE FROM writers");
    let report = verify(&store, None).await;
    assert_eq!(report.unaudited, ["cut"], "{report:?}");
    assert!(!report.is_intact());
}

both!(a_receipt_whose_writer_was_removed_is_missing_not_running);

/// The redo log is replayed only for writes the caller was told succeeded (an authentic `ok`
/// row), and only for files nothing was journalled for since; a removed marker is a break
/// even without a witness.
async fn the_redo_takes_only_acknowledged_writes_and_a_removed_marker_shows(b: Backend) {
    use aether_store::JournalOp;
    let (dir, store) = keyed(b, 0).await;
    let write = |call: &str, path: &str, op: JournalOp| {
        journal_write(call, path, op, None, call.as_bytes())
    };
    for (call, path) in [("told", "a.txt"), ("untold", "b.txt"), ("deleted", "c.txt")] {
        store
            .journal(write(call, path, JournalOp::Write))
            .await
            .unwrap();
    }
    for call in ["told", "deleted"] {
        let mut row = event(call, "ok");
        row.step = None;
        store.audit(row).await.unwrap();
    }
    // c.txt was deleted since, by another call.
    let mut delete = write("remover", "c.txt", JournalOp::Delete);
    delete.receipts.clear();
    store.journal(delete).await.unwrap();
    dir.raw("UPDATE writers SET proc_start = -1");
    let (_, writers) = store.unfinished().await.unwrap();
    let redo = store.journal_to_redo(writers).await.unwrap();
    let files: Vec<&str> = redo.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(files, ["a.txt"], "{redo:?}");
    dir.raw("DELETE FROM audit_keying");
    let report = verify(&store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("no keying marker")),
        "{report:?}"
    );
}

both!(the_redo_takes_only_acknowledged_writes_and_a_removed_marker_shows);

/// A journal write by call `call` of `path` from `before` (`None`: no file) to `after`, with
/// both images and the call's receipt riding it.
fn journal_write(
    call: &str,
    path: &str,
    op: aether_store::JournalOp,
    before: Option<&[u8]>,
    after: &[u8],
) -> aether_store::JournalWrite {
    use aether_store::content_hash;
    let mut blobs = vec![(content_hash(after), after.to_vec())];
    blobs.extend(before.map(|b| (content_hash(b), b.to_vec())));
    aether_store::JournalWrite {
        entries: vec![aether_store::JournalEntry {
            id: 0,
            at_us: aether_store::now_us(),
            call_id: call.into(),
            session: "s1".into(),
            agent: "default".into(),
            tool: "write_file".into(),
            op,
            root: "ws".into(),
            path: path.into(),
            dest: None,
            before_hash: before.map(content_hash),
            before_mode: before.map(|_| 0o644),
            after_hash: Some(content_hash(after)),
            undoes: None,
            reverted_by: None,
        }],
        blobs,
        reverts: Vec::new(),
        receipts: vec![receipt(call)],
    }
}

/// A store written by two keyless writers and then keyed by a third Aether: the second
/// keyless writer never writes again, so only the keying marker's heads pin its chain.
/// Returns that chain's head.
async fn keyed_after_two_keyless_writers(b: Backend) -> (Db, Store, aether_store::ChainHead) {
    let (dir, first) = b.store();
    call(&first, "a0").await;
    let second = dir.open();
    call(&second, "b0").await;
    call(&second, "b1").await;
    let quiet = head_of(&second).await;
    call(&first, "a1").await;
    drop((first, second));
    let store = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    call(&store, "k0").await;
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    let heads = store.keying().unwrap().heads.clone().unwrap();
    assert!(heads.contains(&quiet), "{heads:?} lacks {quiet:?}");
    (dir, store, quiet)
}

/// Recomputes chain `chain`'s hashes the keyless way from its start, as a forger would.
fn rehash_chain(dir: &Db, rows: &[AuditRecord], chain: &str) {
    let mine: Vec<AuditRecord> = rows.iter().filter(|r| r.chain == chain).cloned().collect();
    rehash(dir, &mine, 0);
}

/// `verify` finds a break whose problem says every one of `texts`.
async fn breaks_with(store: &Store, texts: &[&str]) {
    let report = verify(store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| texts.iter().all(|t| b.problem.contains(t))),
        "no break says {texts:?}: {report:?}"
    );
}

async fn keyless_chains_from_before_keying_are_pinned_by_the_signed_marker(b: Backend) {
    // Rewritten: a row of the quiet chain edited, the chain rehashed the keyless way.
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    dir.raw(&format!(
        "UPDATE audit SET outcome = 'tool_error' WHERE chain = '{}' AND link = 1",
        quiet.chain
    ));
    rehash_chain(&dir, &rows(&store).await, &quiet.chain);
    breaks_with(&store, &["not the one its signed marker names"]).await;

    // Cut: its last row gone, with that call's receipt.
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    dir.raw(&format!(
        "DELETE FROM audit WHERE seq = {}; DELETE FROM receipts WHERE call_id = 'b1'",
        quiet.seq
    ));
    // (A chain of one row, as PostgreSQL's lanes may make, is then gone whole.)
    breaks_with(&store, &[&quiet.chain, "(signed marker)"]).await;

    // Removed whole, receipts too.
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    dir.raw(&format!(
        "DELETE FROM audit WHERE chain = '{}'; DELETE FROM receipts WHERE call_id LIKE 'b%'",
        quiet.chain
    ));
    let had = format!(
        "{} is gone: it had {} row(s) when the audit was keyed",
        quiet.chain, quiet.link
    );
    breaks_with(&store, &[&had]).await;

    // Extended: a keyless row after its head is a row written since keying without the key.
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    let all = rows(&store).await;
    let head = all.iter().find(|r| r.seq == quiet.seq).unwrap();
    let top = all.iter().map(|r| r.seq).max().unwrap();
    let forged = forge_after(&dir, head, top + 1);
    let report = verify(&store, None).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.seq == forged && b.problem.contains("keyed hash")),
        "{report:?}"
    );

    // The heads are signed: a marker naming the quiet chain's head elsewhere is caught.
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    let keying = store.keying().unwrap().clone();
    let mut heads = keying.heads.clone().unwrap();
    heads.retain(|h| h.chain != quiet.chain);
    dir.raw(&format!(
        "UPDATE audit_keying SET heads = '{}'",
        aether_store::Keying::heads_text(&heads)
    ));
    breaks_with(&store, &["keying marker is not signed"]).await;
}

async fn a_marker_of_an_older_release_is_named_in_full_at_the_next_keyed_open(b: Backend) {
    let (dir, store, quiet) = keyed_after_two_keyless_writers(b).await;
    // The marker as an older release wrote it: one row pinned by number, no heads.
    let mut old = store.keying().unwrap().clone();
    old.heads = None;
    old.mac = key().sign(&old.signed_text());
    dir.raw(&format!(
        "UPDATE audit_keying SET heads = NULL, mac = '{}'",
        old.mac
    ));
    drop(store);
    let reader = Store::open(&dir.url(), Access::ReadOnly).unwrap();
    assert_eq!(reader.keying().unwrap().heads, None);
    assert!(verify(&reader, None).await.is_intact());
    // A keyed open names every chain's head at the pinned row, and signs it again.
    let store = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    let upgraded = store.keying().unwrap().clone();
    let heads = upgraded.heads.clone().unwrap();
    assert!(heads.contains(&quiet), "{heads:?}");
    assert!(
        heads.iter().all(|h| h.seq <= old.keyed_after_seq),
        "{heads:?}"
    );
    assert_eq!(
        (&upgraded.store_id, upgraded.keyed_after_seq),
        (&old.store_id, old.keyed_after_seq)
    );
    assert!(key().verify(&upgraded.signed_text(), &upgraded.mac));
    assert!(verify(&store, None).await.is_intact());
    // The old marker put back from a backup (its signature is still good) is caught by the
    // witness, which saw the v2 marker.
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("witness.log");
    call(&store, "k1").await;
    witness_all(&store, &path).await;
    let v2_mac = upgraded.mac.clone();
    dir.raw(&format!(
        "UPDATE audit_keying SET heads = NULL, mac = '{}'",
        old.mac
    ));
    let report = verify(&store, Some(&path)).await;
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("an older marker was put back")),
        "{report:?}"
    );
    assert!(
        verify(&store, None).await.is_intact(),
        "without the witness it passes as v1"
    );
    dir.raw(&format!(
        "UPDATE audit_keying SET heads = '{}', mac = '{v2_mac}'",
        aether_store::Keying::heads_text(&heads)
    ));
    assert!(verify(&store, Some(&path)).await.is_intact());
    // From then on the quiet chain is pinned.
    dir.raw(&format!("DELETE FROM audit WHERE seq = {}", quiet.seq));
    dir.raw("DELETE FROM receipts WHERE call_id = 'b1'");
    breaks_with(&store, &[&quiet.chain, "(signed marker)"]).await;
}

both!(
    rows_committed_in_one_flight_are_hashed_without_their_numbers_and_renumbering_hides_nothing,
    a_lane_whose_chain_moved_under_it_commits_again_and_loses_no_call,
    a_keyed_row_renumbered_to_before_keying_and_rehashed_keyless_is_caught
);

/// The form of each row's keyed hash, by call.
fn forms(all: &[AuditRecord]) -> Vec<(String, aether_store::Form)> {
    all.iter()
        .map(|r| {
            let form = aether_store::hash_form(Some(&key()), r, aether_store::Form::Numbered)
                .unwrap_or_else(|| panic!("row {} holds no hash: {r:?}", r.seq));
            (r.event.call_id.clone(), form)
        })
        .collect()
}

/// PostgreSQL's lanes, once they know their chain's tip, send a batch in one round trip: the
/// rows go with BEGIN, their sequence numbers drawn by the INSERT, so their hashes cannot
/// cover them. SQLite's writer draws the number first and covers it. Either way a row moved
/// below the receipts' mark still needs its receipt, numbers still go up along a chain, and
/// a halt committed meanwhile still stops the next receipt of every lane.
async fn rows_committed_in_one_flight_are_hashed_without_their_numbers_and_renumbering_hides_nothing(
    b: Backend,
) {
    let (dir, store) = keyed(b, 0).await;
    // Many at once, then one by one: every lane commits more than once.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..32 {
        let store = store.clone();
        calls.spawn(async move { call(&store, &format!("c{i}")).await });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    for i in 32..48 {
        call(&store, &format!("c{i}")).await;
    }
    let all = rows(&store).await;
    assert_eq!(all.len(), 48);
    // Of the one-by-one calls, only a lane's first commit (four lanes) can go the two-flight
    // way; the rest go in one.
    let forms = forms(&all);
    let unnumbered = |calls: std::ops::Range<usize>| {
        forms
            .iter()
            .filter(|(id, form)| {
                calls.clone().any(|i| *id == format!("c{i}"))
                    && *form == aether_store::Form::Unnumbered
            })
            .count()
    };
    match b {
        Backend::Postgres => assert!(unnumbered(32..48) >= 12, "{forms:?}"),
        Backend::Sqlite => assert_eq!(unnumbered(0..48), 0),
    }
    let report = verify(&store, None).await;
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.rows, report.receipts), (48, 48));

    // A row's receipt removed, and the row renumbered below every mark.
    let newest = all.iter().max_by_key(|r| r.seq).unwrap();
    dir.raw(&format!(
        "DELETE FROM receipts WHERE call_id = '{id}';
         UPDATE audit SET seq = -7 WHERE seq = {seq};",
        id = newest.event.call_id,
        seq = newest.seq
    ));
    let report = verify(&store, None).await;
    assert!(
        report
            .mismatched
            .iter()
            .any(|m| m.problem.contains(&newest.event.call_id) && m.problem.contains("no receipt")),
        "{report:?}"
    );
    // And numbers must go up along a chain: swapping two neighbours' numbers shows.
    dir.raw(&format!(
        "UPDATE audit SET seq = {} WHERE seq = -7",
        newest.seq
    ));
    let chain = chain_of(&all, newest);
    let (a, c) = (chain[chain.len() - 2], chain[chain.len() - 1]);
    dir.raw(&format!(
        "UPDATE audit SET seq = -1 WHERE seq = {a};
         UPDATE audit SET seq = {a} WHERE seq = {c};
         UPDATE audit SET seq = {c} WHERE seq = -1;",
        a = a.seq,
        c = c.seq
    ));
    breaks_with(&store, &["sequence goes back"]).await;

    // A halt committed by another process stops the next receipt of every lane.
    let ops = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    ops.set_halt(true, "ops", "drill", None).await.unwrap();
    let mut after = tokio::task::JoinSet::new();
    for i in 0..8 {
        let store = store.clone();
        after.spawn(async move { store.admit(receipt(&format!("h{i}"))).await.unwrap() });
    }
    while let Some(outcome) = after.join_next().await {
        assert!(matches!(outcome.unwrap(), ReceiptOutcome::Halted(_)));
    }
    assert_eq!(rows(&store).await.len(), 48);
}

/// A lane keeps its chain's tip in memory between commits. A row written into the chain
/// behind its back (here a forger's) makes the lane's next one-flight commit collide; the
/// batch then commits the two-flight way after the row that is there, and no call fails.
async fn a_lane_whose_chain_moved_under_it_commits_again_and_loses_no_call(b: Backend) {
    let (dir, store) = keyed(b, 16).await;
    let heads = store.audit_heads().await.unwrap();
    for (i, head) in heads.iter().enumerate() {
        dir.raw(&format!(
            "INSERT INTO audit (seq, at_us, call_id, session, transport, agent, team, project, tool,
                 tier, outcome, step, rule, reason, definition, arguments_digest, arguments, result,
                 duration_us, prev_hash, hash, single, chain, link, trace, subject)
             SELECT 1000000 * ({i} + 1), at_us, 'forged{i}', session, transport, agent, team, project,
                 tool, tier, outcome, step, rule, reason, definition, arguments_digest, arguments,
                 result, duration_us, hash, '{forged}', single, chain, link + 1, trace, subject
             FROM audit WHERE chain = '{chain}' AND link = {link}",
            forged = "f".repeat(64),
            chain = head.chain,
            link = head.link
        ));
    }
    for i in 0..24 {
        call(&store, &format!("d{i}")).await;
    }
    let all = rows(&store).await;
    for i in 0..24 {
        assert!(all.iter().any(|r| r.event.call_id == format!("d{i}")));
    }
    // Each chain goes on from the forged row; verify names it.
    let report = verify(&store, None).await;
    assert_eq!(report.rows, 16 + heads.len() as u64 + 24);
    assert!(
        report
            .breaks
            .iter()
            .any(|b| b.problem.contains("do not match its keyed hash")),
        "{report:?}"
    );
    assert!(
        !report.breaks.iter().any(
            |b| b.problem.contains("prev_hash does not match") || b.problem.contains("missing")
        ),
        "{report:?}"
    );
}

/// Which rows of a keyed store are keyed is judged by link along a writer chain (every row's
/// hash covers it), not by sequence number: a forger who renumbers a keyed row to before the
/// keying and rehashes it the keyless way is caught.
async fn a_keyed_row_renumbered_to_before_keying_and_rehashed_keyless_is_caught(b: Backend) {
    let (dir, store) = keyed(b, 3).await;
    // A writer after keying, with one row: its chain's only row, so nothing after it needs
    // rehashing.
    let second = Store::open(&dir.url(), Access::Write(Some(key()))).unwrap();
    second.audit(event("late", "refused")).await.unwrap();
    assert!(verify(&store, None).await.is_intact());
    let mut late = rows(&store)
        .await
        .into_iter()
        .find(|r| r.event.call_id == "late")
        .unwrap();
    let seq = late.seq;
    late.seq = -3;
    late.event.reason = Some("nothing happened".into());
    late.hash = record_hash(None, &late);
    dir.raw(&format!(
        "UPDATE audit SET seq = -3, reason = 'nothing happened', hash = '{}' WHERE seq = {seq}",
        late.hash
    ));
    breaks_with(&store, &["do not match its keyed hash"]).await;
}

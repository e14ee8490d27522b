//! Audit retention: pruned rows leave a signed checkpoint, and the rest still verifies.

use std::sync::Arc;

use aether_store::Vault;

use super::{Backend, admitted_calls, event};

both!(
    pruning_leaves_a_signed_checkpoint_and_a_verifiable_chain,
    a_forged_checkpoint_is_caught,
);

/// The newest row the checkpoints `cuts` cut at, and the rows they pruned.
fn span(cuts: &[aether_store::Checkpoint]) -> (Option<i64>, i64) {
    (
        cuts.iter().map(|c| c.seq).max(),
        cuts.iter().map(|c| c.pruned).sum(),
    )
}

async fn pruning_leaves_a_signed_checkpoint_and_a_verifiable_chain(b: Backend) {
    let (db, store) = admitted_calls(b, 6).await;
    let keys = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::open(&keys.path().join("vault.key"), true).unwrap());
    // Nothing is older than the epoch: nothing goes.
    assert!(
        store
            .prune_audit(0, "ops", vault.clone())
            .await
            .unwrap()
            .is_empty()
    );
    let now = aether_store::now_us();
    let cuts = store.prune_audit(now, "ops", vault.clone()).await.unwrap();
    // The newest row stays, so the head stays in the table; each chain cut has a checkpoint.
    assert_eq!(span(&cuts), (Some(5), 5));
    let c = cuts.iter().max_by_key(|c| c.seq).unwrap().clone();
    let other = Vault::open(&keys.path().join("other.key"), true).unwrap();
    for c in &cuts {
        assert!(c.signature.len() == 64 && vault.verify(&c.signed_text(), &c.signature));
        assert!(!other.verify(&c.signed_text(), &c.signature));
    }
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!((report.rows, report.first_seq), (1, Some(6)));
    assert_eq!(report.checkpoint.as_ref(), Some(&c));
    // The pruned calls' receipts went with their rows; the kept call's stayed.
    assert_eq!(db.count("SELECT count(*) FROM receipts"), 1);
    // The chain goes on after the cut, and pruning again moves the checkpoint.
    for i in 0..3 {
        store.audit(event(&format!("n{i}"), "ok")).await.unwrap();
    }
    assert!(store.verify_audit(None).await.unwrap().is_intact());
    let again = store
        .prune_audit(aether_store::now_us(), "ops", vault.clone())
        .await
        .unwrap();
    assert_eq!(span(&again), (Some(8), 3));
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.first_seq, Some(9));
    // An expected head from before the cut is not reported gone.
    assert!(
        store
            .verify_audit(Some((3, "old".into())))
            .await
            .unwrap()
            .is_intact()
    );
}

async fn a_forged_checkpoint_is_caught(b: Backend) {
    let (db, store) = admitted_calls(b, 4).await;
    let keys = tempfile::tempdir().unwrap();
    let vault = Arc::new(Vault::open(&keys.path().join("vault.key"), true).unwrap());
    assert!(
        !store
            .prune_audit(aether_store::now_us(), "ops", vault.clone())
            .await
            .unwrap()
            .is_empty()
    );
    // Someone with the tables but not the key deletes another row and moves the checkpoint
    // over it: the signature no longer holds.
    db.raw(
        "UPDATE audit_checkpoints SET seq = 4, hash = (SELECT hash FROM audit WHERE seq = 4), pruned = 4
           WHERE seq = (SELECT max(seq) FROM audit_checkpoints);
         DELETE FROM audit WHERE seq = 4;",
    );
    let report = store.verify_audit(None).await.unwrap();
    let c = report.checkpoint.clone().unwrap();
    assert!(!vault.verify(&c.signed_text(), &c.signature));
    // A checkpoint edited to hide rows breaks the link to the first row kept.
    // Enough calls that the newest row's chain has rows before it, however many writer
    // lanes share them out.
    let (db, store) = admitted_calls(b, 40).await;
    let cuts = store
        .prune_audit(aether_store::now_us(), "ops", vault.clone())
        .await
        .unwrap();
    db.raw("UPDATE audit_checkpoints SET hash = 'rewritten'");
    let report = store.verify_audit(None).await.unwrap();
    // The first row kept after a cut no longer follows it.
    let kept = store
        .audit_query(aether_store::AuditQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let first_kept: Vec<i64> = cuts
        .iter()
        .filter_map(|c| {
            kept.iter()
                .filter(|r| r.chain == c.chain)
                .map(|r| r.seq)
                .min()
        })
        .collect();
    assert!(!first_kept.is_empty());
    assert!(!report.is_intact());
    assert!(
        report.breaks.iter().any(|b| first_kept.contains(&b.seq)),
        "{report:?}"
    );
}

//! The audit hash chain.
//!
//! Each row's hash covers its sequence number, every field of its event and the hash of the
//! row before it, so editing, deleting or inserting a row anywhere breaks every hash after it,
//! and a gap in sequence numbers is visible on its own.

use aether_vocab::sha256;
use serde::Serialize;
use serde_json::json;

use crate::{AuditEvent, AuditRecord};

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of the row with `seq` and `event`, following `prev`.
pub fn entry_hash(prev: &str, seq: i64, e: &AuditEvent) -> String {
    let body = json!([
        seq,
        e.at_us,
        e.call_id,
        e.session,
        e.transport,
        e.agent,
        e.team,
        e.project,
        e.tool,
        e.tier,
        e.outcome,
        e.step,
        e.rule,
        e.reason,
        e.definition,
        e.arguments_digest,
        e.arguments,
        e.result,
        e.duration_us,
    ]);
    sha256(format!("aether-audit-v1\n{prev}\n{body}").as_bytes()).to_hex()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    pub seq: i64,
    pub problem: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    pub rows: u64,
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    pub head: String,
    pub breaks: Vec<ChainBreak>,
    /// Receipts checked against the audit: every admitted call must have exactly one audit
    /// row, for the same tool, definition and arguments. This is what catches rows removed
    /// from the end of the chain, or a chain rewritten from some row on.
    pub receipts: u64,
    /// Admitted calls older than [`SETTLE_US`] with no audit row: a crash mid-call, or rows
    /// deleted. (Younger ones may still be running and are only counted in `in_flight`.)
    pub unaudited: Vec<String>,
    pub in_flight: u64,
    /// Admitted calls whose audit row names another tool, definition or arguments, or
    /// which have several rows.
    pub mismatched: Vec<ChainBreak>,
    /// Where retention cut the chain: rows up to it were pruned, the rows kept go on from it.
    pub checkpoint: Option<Checkpoint>,
}

/// A signed record of where retention cut the audit chain: the last pruned row's sequence
/// number and hash. The rows kept verify from it as from the chain's start; its signature,
/// keyed from the vault key (kept outside the store), shows that Aether, not someone with
/// only the store's files, made the cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    pub seq: i64,
    pub hash: String,
    pub at_us: i64,
    /// Rows this checkpoint pruned.
    pub pruned: i64,
    pub by: String,
    pub signature: String,
}

impl Checkpoint {
    /// What the signature covers.
    pub fn signed_text(&self) -> String {
        format!(
            "aether-audit-checkpoint-v1\n{}\n{}\n{}\n{}\n{}",
            self.seq, self.hash, self.at_us, self.pruned, self.by
        )
    }
}

/// How long an admitted call may go without its audit row before `verify` calls it missing.
pub const SETTLE_US: i64 = 10 * 60 * 1_000_000;

impl ChainReport {
    pub fn is_intact(&self) -> bool {
        self.breaks.is_empty() && self.unaudited.is_empty() && self.mismatched.is_empty()
    }
}

/// Checks rows given in sequence order; keeps at most 100 breaks.
#[derive(Debug)]
pub struct ChainVerifier {
    report: ChainReport,
    expected_prev: String,
    expected_seq: Option<i64>,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier {
            report: ChainReport {
                rows: 0,
                first_seq: None,
                last_seq: None,
                head: GENESIS.to_string(),
                breaks: Vec::new(),
                receipts: 0,
                unaudited: Vec::new(),
                in_flight: 0,
                mismatched: Vec::new(),
                checkpoint: None,
            },
            expected_prev: GENESIS.to_string(),
            expected_seq: Some(1),
        }
    }
}

impl ChainVerifier {
    /// A verifier for a chain whose rows up to `seq` (ending in `hash`) were pruned.
    pub fn after(seq: i64, hash: &str) -> ChainVerifier {
        let mut v = ChainVerifier::default();
        v.report.head = hash.to_string();
        v.expected_prev = hash.to_string();
        v.expected_seq = Some(seq + 1);
        v
    }

    pub fn push(&mut self, r: &AuditRecord) {
        let mut problems = Vec::new();
        if let Some(expected) = self.expected_seq
            && r.seq != expected
        {
            problems.push(if r.seq > expected {
                format!("rows {expected}..{} are missing", r.seq - 1)
            } else {
                format!("sequence goes back from {} to {}", expected - 1, r.seq)
            });
        }
        if r.prev_hash != self.expected_prev {
            problems.push("prev_hash does not match the hash of the row before".to_string());
        }
        if entry_hash(&r.prev_hash, r.seq, &r.event) != r.hash {
            problems.push("the row's contents do not match its hash (edited)".to_string());
        }
        if !problems.is_empty() && self.report.breaks.len() < 100 {
            self.report.breaks.push(ChainBreak {
                seq: r.seq,
                problem: problems.join("; "),
            });
        }
        self.report.rows += 1;
        self.report.first_seq.get_or_insert(r.seq);
        self.report.last_seq = Some(r.seq);
        self.report.head = r.hash.clone();
        self.expected_prev = r.hash.clone();
        self.expected_seq = Some(r.seq + 1);
    }

    pub fn finish(self) -> ChainReport {
        self.report
    }
}

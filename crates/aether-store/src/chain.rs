//! The audit hash chain.
//!
//! Each row's hash covers its sequence number, every field of its event and the hash of the
//! row before it, so editing, deleting or inserting a row anywhere breaks every hash after it,
//! and a gap in sequence numbers is visible on its own.
//!
//! A keyed store's rows (every row after its [`Keying`] marker) are hashed with an HMAC under
//! the [`AuditKey`], kept outside the store: whoever can write the database but lacks the key
//! cannot recompute the chain after changing it. Rows written before the store was keyed
//! keep their keyless hashes, pinned by the signed marker's hash of the last of them. The
//! witness ([`crate::witness`]) holds signed checkpoints of the head outside the store, which
//! is what shows rows cut from the end.

use std::collections::BTreeMap;

use aether_vocab::sha256;
use serde::Serialize;
use serde_json::{Value, json};

use crate::witness::WitnessLine;
use crate::{AuditEvent, AuditKey, AuditRecord};

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The keyless hash of the row with `seq` and `event`, following `prev` (rows of a store
/// before it was keyed).
pub fn entry_hash(prev: &str, seq: i64, e: &AuditEvent) -> String {
    let body = fields(seq, e);
    sha256(format!("aether-audit-v1\n{prev}\n{body}").as_bytes()).to_hex()
}

/// The keyed hash of the row with `seq` and `event`, following `prev`: an HMAC under `key`
/// that also covers whether the row is a side-effect-free call's only record.
pub fn keyed_hash(key: &AuditKey, prev: &str, seq: i64, e: &AuditEvent) -> String {
    let mut body = fields(seq, e);
    if let Value::Array(items) = &mut body {
        items.push(Value::Bool(e.single));
    }
    key.sign(&format!("aether-audit-v2\n{prev}\n{body}"))
}

/// How rows are hashed as they are appended.
#[derive(Clone, Debug)]
pub enum Hashing {
    /// A store never keyed: keyless hashes.
    Plain,
    Keyed(AuditKey),
}

impl Hashing {
    pub fn hash(&self, prev: &str, seq: i64, e: &AuditEvent) -> String {
        match self {
            Hashing::Plain => entry_hash(prev, seq, e),
            Hashing::Keyed(key) => keyed_hash(key, prev, seq, e),
        }
    }
}

/// A store's keying: its rows after `keyed_after_seq` are keyed under the key named
/// `key_id`, and `verify` checks receipts for rows after `receipts_checked_after_seq`. The
/// marker is signed under that key, so neither can be moved by whoever lacks it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Keying {
    pub key_id: String,
    /// Names the store in its witness's checkpoints.
    pub store_id: String,
    pub keyed_after_seq: i64,
    /// The hash of the row at `keyed_after_seq` (of the checkpoint it goes on from, or
    /// [`GENESIS`]): the keyless rows before keying cannot be rewritten either.
    pub keyed_after_hash: String,
    pub receipts_checked_after_seq: i64,
    pub at_us: i64,
    pub mac: String,
}

impl Keying {
    pub fn signed_text(&self) -> String {
        format!(
            "aether-audit-keying-v1\n{}\n{}\n{}\n{}\n{}\n{}",
            self.key_id,
            self.store_id,
            self.keyed_after_seq,
            self.keyed_after_hash,
            self.receipts_checked_after_seq,
            self.at_us
        )
    }
}

fn fields(seq: i64, e: &AuditEvent) -> Value {
    json!([
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
    ])
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
    /// Admitted calls with no audit row that are neither running nor known to be
    /// interrupted: receipts from before writers were recorded, older than [`SETTLE_US`].
    pub unaudited: Vec<String>,
    /// Admitted calls with no audit row whose process is alive: still running.
    pub in_flight: u64,
    /// Admitted calls with no audit row whose process is gone (a crash): the next start
    /// records each as `interrupted`. Not a break: a row deleted from the chain is a gap in
    /// it, and one cut from its end is below the witness's checkpoint.
    pub interrupted: u64,
    /// Whether the rows are keyed (see [`Keying`]); with the row they go on from.
    pub keyed: Option<i64>,
    /// The newest row the witness holds a checkpoint of, and when it was taken; `None`
    /// without a witness.
    pub witnessed: Option<(i64, i64)>,
    /// Checkpoints the witness holds.
    pub witness_lines: u64,
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
    /// Keyed rows come after this one (and it must hash to the marker's hash).
    keyed: Option<(i64, String, AuditKey)>,
    /// The witness's checkpoints not yet met: sequence → (head, time).
    witnessed: BTreeMap<i64, (String, i64)>,
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
                interrupted: 0,
                keyed: None,
                witnessed: None,
                witness_lines: 0,
            },
            expected_prev: GENESIS.to_string(),
            expected_seq: Some(1),
            keyed: None,
            witnessed: BTreeMap::new(),
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

    /// Rows after the marker's are checked as keyed under `key`.
    pub fn keyed(&mut self, keying: &Keying, key: AuditKey) {
        self.report.keyed = Some(keying.keyed_after_seq);
        if self
            .expected_seq
            .is_some_and(|next| next > keying.keyed_after_seq + 1)
        {
            // Pruned past the keying: the checkpoint pins where the kept rows go on from.
        } else if self.expected_seq == Some(keying.keyed_after_seq + 1)
            && self.expected_prev != keying.keyed_after_hash
        {
            self.problem(
                keying.keyed_after_seq,
                "the chain before the audit was keyed does not end where its signed marker says"
                    .into(),
            );
        }
        self.keyed = Some((keying.keyed_after_seq, keying.keyed_after_hash.clone(), key));
    }

    /// Checks the witness's checkpoints as the rows go by: each must name the hash of the row
    /// at its sequence number, and none may be beyond the chain's end. `after` is where the
    /// chain now starts (rows before it were pruned; their checkpoints cannot be checked
    /// except the one at the cut).
    pub fn witness(&mut self, lines: &[WitnessLine], after: Option<(i64, &str)>) {
        self.report.witness_lines = lines.len() as u64;
        for line in lines {
            if self.report.witnessed.is_none_or(|(seq, _)| line.seq >= seq) {
                self.report.witnessed = Some((line.seq, line.at_us));
            }
            match after {
                Some((cut, hash)) if line.seq == cut && line.head != hash => self.problem(
                    line.seq,
                    format!(
                        "the witness's checkpoint of row {} names another hash than the retention checkpoint",
                        line.seq
                    ),
                ),
                Some((cut, _)) if line.seq <= cut => {}
                _ if line.seq == 0 => {}
                _ => {
                    self.witnessed
                        .insert(line.seq, (line.head.clone(), line.at_us));
                }
            }
        }
    }

    fn problem(&mut self, seq: i64, problem: String) {
        if self.report.breaks.len() < 100 {
            self.report.breaks.push(ChainBreak { seq, problem });
        }
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
        let hash = match &self.keyed {
            Some((after, _, key)) if r.seq > *after => {
                keyed_hash(key, &r.prev_hash, r.seq, &r.event)
            }
            _ => entry_hash(&r.prev_hash, r.seq, &r.event),
        };
        if hash != r.hash {
            problems.push(match &self.keyed {
                Some((after, ..)) if r.seq > *after => {
                    "the row's contents do not match its keyed hash (edited, or written without the audit key)".to_string()
                }
                _ => "the row's contents do not match its hash (edited)".to_string(),
            });
        }
        if let Some((after, ..)) = &self.keyed
            && r.seq <= *after
            && r.event.single
        {
            // Rows from before keying were all receipted; the flag is not covered by their
            // keyless hash, so one set now would hide a removed receipt.
            problems.push(
                "a row from before the audit was keyed is marked as a call's only record"
                    .to_string(),
            );
        }
        if let Some((after, after_hash, _)) = &self.keyed
            && r.seq == *after
            && r.hash != *after_hash
        {
            problems.push(
                "the last row before the audit was keyed is not the one its signed marker names"
                    .to_string(),
            );
        }
        if let Some((head, at_us)) = self.witnessed.remove(&r.seq)
            && head != r.hash
        {
            problems.push(format!(
                "the witness's checkpoint of {} names another hash for this row (rewritten)",
                crate::time_text(at_us)
            ));
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

    pub fn finish(mut self) -> ChainReport {
        let last = self.report.last_seq.unwrap_or(0);
        if let Some((&seq, (_, at_us))) = self.witnessed.iter().next_back()
            && seq > last
        {
            let at = crate::time_text(*at_us);
            self.problem(
                seq,
                match self.report.last_seq {
                    Some(last) => format!(
                        "rows were cut from the end: the witness saw row {seq} at {at}, and the audit ends at row {last}"
                    ),
                    None => format!(
                        "the audit is empty, but the witness saw row {seq} at {at} (rows wiped)"
                    ),
                },
            );
        }
        self.report
    }
}

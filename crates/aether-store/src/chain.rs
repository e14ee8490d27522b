//! The audit hash chains.
//!
//! Every writer (a process writing to the store) appends to a chain of its own: each row's
//! hash covers its chain, its link (place in that chain), its sequence number (its place
//! among all rows), every field of its event and the hash of the link before it, so editing,
//! deleting or inserting a row anywhere breaks every hash after it in its chain, and a gap in
//! links is visible on its own. Writers never wait for each other's chain: replicas commit
//! side by side, and `verify` checks each chain and merges them by sequence number.
//!
//! Rows written before chains (a store of an earlier release) form the chain named `""`,
//! whose links are their sequence numbers, hashed as they always were.
//!
//! A keyed store's rows (every row after its [`Keying`] marker) are hashed with an HMAC under
//! the [`AuditKey`], kept outside the store: whoever can write the database but lacks the key
//! cannot recompute a chain after changing it. Rows written before the store was keyed
//! keep their keyless hashes, pinned by the signed marker's hash of the last of them. The
//! witness ([`crate::witness`]) holds signed checkpoints of each chain's head outside the
//! store, which is what shows rows cut from the end of a chain, or a chain removed whole.

use std::collections::BTreeMap;

use aether_vocab::sha256;
use serde::Serialize;
use serde_json::{Value, json};

use crate::witness::WitnessLine;
use crate::{AuditEvent, AuditKey, AuditRecord};

/// The `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The keyless hash of a row of the chain from before chains (`""`), with `seq` and `event`,
/// following `prev` (rows of a store before it was keyed).
pub fn entry_hash(prev: &str, seq: i64, e: &AuditEvent) -> String {
    let body = fields(seq, e);
    sha256(format!("aether-audit-v1\n{prev}\n{body}").as_bytes()).to_hex()
}

/// The keyed hash of a row of the chain from before chains (`""`): an HMAC under `key` that
/// also covers whether the row is a side-effect-free call's only record.
pub fn keyed_hash(key: &AuditKey, prev: &str, seq: i64, e: &AuditEvent) -> String {
    let mut body = fields(seq, e);
    if let Value::Array(items) = &mut body {
        items.push(Value::Bool(e.single));
    }
    key.sign(&format!("aether-audit-v2\n{prev}\n{body}"))
}

/// The hash of link `link` of writer chain `chain` (sequence number `seq`, `event`),
/// following `prev`: an HMAC under `key` in a keyed store, else a keyless SHA-256.
pub fn link_hash(
    key: Option<&AuditKey>,
    chain: &str,
    link: i64,
    seq: i64,
    prev: &str,
    e: &AuditEvent,
) -> String {
    let mut body = fields(seq, e);
    if let Value::Array(items) = &mut body {
        items.push(Value::Bool(e.single));
        items.push(Value::String(chain.to_string()));
        items.push(Value::from(link));
    }
    let text = format!("aether-audit-v3\n{prev}\n{body}");
    match key {
        Some(key) => key.sign(&text),
        None => sha256(text.as_bytes()).to_hex(),
    }
}

/// The hash row `r` should have: keyed under `key` (`None`: keyless), by its chain's formula.
pub fn record_hash(key: Option<&AuditKey>, r: &AuditRecord) -> String {
    match (r.chain.is_empty(), key) {
        (false, key) => link_hash(key, &r.chain, r.link, r.seq, &r.prev_hash, &r.event),
        (true, Some(key)) => keyed_hash(key, &r.prev_hash, r.seq, &r.event),
        (true, None) => entry_hash(&r.prev_hash, r.seq, &r.event),
    }
}

/// How rows are hashed as they are appended.
#[derive(Clone, Debug)]
pub enum Hashing {
    /// A store never keyed: keyless hashes.
    Plain,
    Keyed(AuditKey),
}

impl Hashing {
    pub fn key(&self) -> Option<&AuditKey> {
        match self {
            Hashing::Plain => None,
            Hashing::Keyed(key) => Some(key),
        }
    }
}

/// The newest row of one chain: what the witness checkpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainHead {
    pub chain: String,
    pub link: i64,
    pub seq: i64,
    pub hash: String,
}

/// A store's keying: rows written after it are keyed under the key named `key_id`, and
/// `verify` checks receipts for rows after `receipts_checked_after_seq`. The marker is signed
/// under that key, so none of it can be moved by whoever lacks the key.
///
/// `heads` (marker v2) names every chain's newest row at keying: a chain's rows up to its head
/// are the keyless ones (and the head must be there, or pruned behind a checkpoint that names
/// it), every later row and every chain not named is keyed. A marker of an older release
/// (`heads: None`) pinned only the row at `keyed_after_seq`; a keyed open names the heads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Keying {
    pub key_id: String,
    /// Names the store in its witness's checkpoints.
    pub store_id: String,
    /// The audit's newest row at keying (0: none).
    pub keyed_after_seq: i64,
    /// The hash of the row at `keyed_after_seq` (of the checkpoint it goes on from, or
    /// [`GENESIS`]).
    pub keyed_after_hash: String,
    pub receipts_checked_after_seq: i64,
    pub at_us: i64,
    pub heads: Option<Vec<ChainHead>>,
    pub mac: String,
}

impl Keying {
    pub fn signed_text(&self) -> String {
        let fields = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.key_id,
            self.store_id,
            self.keyed_after_seq,
            self.keyed_after_hash,
            self.receipts_checked_after_seq,
            self.at_us
        );
        match &self.heads {
            None => format!("aether-audit-keying-v1\n{fields}"),
            Some(heads) => format!(
                "aether-audit-keying-v2\n{fields}\n{}",
                Keying::heads_text(heads)
            ),
        }
    }

    /// The heads as stored and signed: JSON, one `[chain, link, seq, hash]` per chain in
    /// chain order (a chain's name may hold any character).
    pub fn heads_text(heads: &[ChainHead]) -> String {
        let mut heads: Vec<_> = heads.iter().collect();
        heads.sort_by(|a, b| a.chain.cmp(&b.chain));
        Value::Array(
            heads
                .iter()
                .map(|h| json!([h.chain, h.link, h.seq, h.hash]))
                .collect(),
        )
        .to_string()
    }

    /// Heads read back from [`Keying::heads_text`]; `None` if the text is not that shape.
    pub fn parse_heads(text: &str) -> Option<Vec<ChainHead>> {
        let rows: Vec<(String, i64, i64, String)> = serde_json::from_str(text).ok()?;
        Some(
            rows.into_iter()
                .map(|(chain, link, seq, hash)| ChainHead {
                    chain,
                    link,
                    seq,
                    hash,
                })
                .collect(),
        )
    }
}

/// A row's fields as its hash covers them. The trace context is appended only where a row has
/// one, so rows without it (all rows from before it existed) hash as they always did.
fn fields(seq: i64, e: &AuditEvent) -> Value {
    let mut fields = json!([
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
    if let (Some(trace), Value::Array(fields)) = (&e.trace, &mut fields) {
        fields.push(json!({ "trace": trace }));
    }
    if let (Some(subject), Value::Array(fields)) = (&e.subject, &mut fields) {
        fields.push(json!({ "subject": subject }));
    }
    fields
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
    /// Where retention last cut a chain: rows up to it were pruned, the rows kept go on
    /// from it (each chain from its own newest checkpoint).
    pub checkpoint: Option<Checkpoint>,
    /// Each chain's newest checkpoint (what its kept rows go on from): every one must carry
    /// the vault key's signature.
    pub checkpoints: Vec<Checkpoint>,
    /// Chains checked (one per writer that wrote rows, and the chain from before chains).
    pub chains: u64,
}

/// A signed record of where retention cut an audit chain: the last pruned row's chain, link,
/// sequence number and hash. The rows kept verify from it as from the chain's start; its signature,
/// keyed from the vault key (kept outside the store), shows that Aether, not someone with
/// only the store's files, made the cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    pub chain: String,
    pub link: i64,
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
        match self.chain.is_empty() {
            true => format!(
                "aether-audit-checkpoint-v1\n{}\n{}\n{}\n{}\n{}",
                self.seq, self.hash, self.at_us, self.pruned, self.by
            ),
            false => format!(
                "aether-audit-checkpoint-v2\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
                self.chain, self.link, self.seq, self.hash, self.at_us, self.pruned, self.by
            ),
        }
    }
}

/// How long an admitted call may go without its audit row before `verify` calls it missing.
pub const SETTLE_US: i64 = 10 * 60 * 1_000_000;

impl ChainReport {
    pub fn is_intact(&self) -> bool {
        self.breaks.is_empty() && self.unaudited.is_empty() && self.mismatched.is_empty()
    }
}

impl ChainReport {
    fn empty() -> ChainReport {
        ChainReport {
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
            checkpoints: Vec::new(),
            interrupted: 0,
            keyed: None,
            witnessed: None,
            witness_lines: 0,
            chains: 0,
        }
    }

    /// The report of all chains, from each one's.
    pub fn merge(reports: impl IntoIterator<Item = ChainReport>) -> ChainReport {
        let mut all = ChainReport::empty();
        for r in reports {
            all.chains += 1;
            all.rows += r.rows;
            all.first_seq = match (all.first_seq, r.first_seq) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if r.last_seq.is_some() && r.last_seq > all.last_seq {
                all.last_seq = r.last_seq;
                all.head = r.head;
            }
            let room = 100usize.saturating_sub(all.breaks.len());
            all.breaks.extend(r.breaks.into_iter().take(room));
            all.keyed = all.keyed.or(r.keyed);
            if r.witnessed
                .is_some_and(|(seq, _)| all.witnessed.is_none_or(|(s, _)| seq > s))
            {
                all.witnessed = r.witnessed;
            }
            all.witness_lines += r.witness_lines;
        }
        all.breaks.sort_by_key(|b| b.seq);
        all
    }
}

/// Where a chain's keyless rows end: those numbered up to `seq`, the row there hashing to
/// `hash`. Judged by sequence number, which every row's hash and every checkpoint's signature
/// cover (a legacy chain's links are not).
#[derive(Debug)]
struct KeyedAfter {
    seq: i64,
    hash: String,
    /// The row's link, for messages.
    link: i64,
    /// Marker v2, this chain's own head at keying: it must be met along the chain or be
    /// pruned past by the chain's end. (A v1 marker's row is checked across chains, by
    /// `keyed_row_problems`.)
    own_head: bool,
}

/// Checks one chain's rows given in link order; keeps at most 100 breaks.
#[derive(Debug)]
pub struct ChainVerifier {
    chain: String,
    report: ChainReport,
    expected_prev: String,
    /// The next link expected.
    expected_link: i64,
    /// The sequence number of the row before: rows go up along a chain.
    last_seq: i64,
    /// Which rows are keyed, under which key.
    keyed: Option<(KeyedAfter, AuditKey)>,
    /// Whether a row at the chain's head at keying was met (marker v2).
    met_head: bool,
    /// The witness's checkpoints of this chain not yet met: link → (head, time).
    witnessed: BTreeMap<i64, (String, i64)>,
}

impl ChainVerifier {
    /// A verifier for chain `chain` from its start.
    pub fn new(chain: &str) -> ChainVerifier {
        ChainVerifier {
            chain: chain.to_string(),
            report: ChainReport::empty(),
            expected_prev: GENESIS.to_string(),
            expected_link: 1,
            last_seq: 0,
            keyed: None,
            met_head: false,
            witnessed: BTreeMap::new(),
        }
    }

    /// A verifier for a chain whose rows up to `checkpoint` were pruned.
    pub fn after(checkpoint: &Checkpoint) -> ChainVerifier {
        let mut v = ChainVerifier::new(&checkpoint.chain);
        v.report.head = checkpoint.hash.clone();
        v.expected_prev = checkpoint.hash.clone();
        v.expected_link = checkpoint.link + 1;
        v.last_seq = checkpoint.seq;
        v.report.checkpoint = Some(checkpoint.clone());
        v
    }

    /// How this chain is named in problems.
    fn named(&self) -> String {
        match self.chain.is_empty() {
            true => "the audit".to_string(),
            false => format!("chain {}", self.chain),
        }
    }

    /// Rows written after `keying` are checked as keyed under `key`: those after this
    /// chain's head at keying (marker v2), or after the marker's row (v1).
    pub fn keyed(&mut self, keying: &Keying, key: AuditKey) {
        self.report.keyed = Some(keying.keyed_after_seq);
        let after = match &keying.heads {
            None => KeyedAfter {
                seq: keying.keyed_after_seq,
                hash: keying.keyed_after_hash.clone(),
                link: 0,
                own_head: false,
            },
            Some(heads) => match heads.iter().find(|h| h.chain == self.chain) {
                Some(h) => KeyedAfter {
                    seq: h.seq,
                    hash: h.hash.clone(),
                    link: h.link,
                    own_head: true,
                },
                // The chain had no rows at keying: every row of it is keyed.
                None => KeyedAfter {
                    seq: 0,
                    hash: GENESIS.to_string(),
                    link: 0,
                    own_head: false,
                },
            },
        };
        self.keyed = Some((after, key));
    }

    /// Whether row `r` was written before the store was keyed (its hash is keyless).
    fn before_keying(&self, r: &AuditRecord) -> bool {
        self.keyed.as_ref().is_none_or(|(k, _)| r.seq <= k.seq)
    }

    /// Checks the witness's checkpoints of this chain as the rows go by: each must name the
    /// hash of the row at its link, and none may be beyond the chain's end. Checkpoints of
    /// rows pruned since cannot be checked, except the one at the cut.
    pub fn witness(&mut self, lines: &[&WitnessLine]) {
        self.report.witness_lines = lines.len() as u64;
        let cut = self
            .report
            .checkpoint
            .as_ref()
            .map(|c| (c.link, c.hash.clone()));
        for line in lines {
            if self.report.witnessed.is_none_or(|(seq, _)| line.seq >= seq) {
                self.report.witnessed = Some((line.seq, line.at_us));
            }
            let link = line.link();
            match &cut {
                Some((at, hash)) if link == *at && line.head != *hash => self.problem(
                    line.seq,
                    format!(
                        "the witness's checkpoint of row {} names another hash than the retention checkpoint",
                        line.seq
                    ),
                ),
                Some((at, _)) if link <= *at => {}
                _ if link == 0 => {}
                _ => {
                    self.witnessed.insert(link, (line.head.clone(), line.at_us));
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
        if r.link != self.expected_link {
            problems.push(if r.link > self.expected_link {
                match self.chain.is_empty() {
                    true => format!("rows {}..{} are missing", self.expected_link, r.link - 1),
                    false => format!(
                        "links {}..{} of {} are missing",
                        self.expected_link,
                        r.link - 1,
                        self.named()
                    ),
                }
            } else {
                format!(
                    "{} goes back from {} to {}",
                    self.named(),
                    self.expected_link - 1,
                    r.link
                )
            });
        } else if r.seq <= self.last_seq {
            problems.push(format!(
                "sequence goes back from {} to {} along {}",
                self.last_seq,
                r.seq,
                self.named()
            ));
        }
        if r.prev_hash != self.expected_prev {
            problems.push("prev_hash does not match the hash of the row before".to_string());
        }
        let keyed = self
            .keyed
            .as_ref()
            .filter(|_| !self.before_keying(r))
            .map(|(_, key)| key);
        if record_hash(keyed, r) != r.hash {
            problems.push(match keyed {
                Some(_) => {
                    "the row's contents do not match its keyed hash (edited, or written without the audit key)".to_string()
                }
                None => "the row's contents do not match its hash (edited)".to_string(),
            });
        }
        if self.keyed.is_some() && self.before_keying(r) && r.event.single && r.chain.is_empty() {
            // Rows from before keying were all receipted; the flag is not covered by their
            // keyless hash, so one set now would hide a removed receipt.
            problems.push(
                "a row from before the audit was keyed is marked as a call's only record"
                    .to_string(),
            );
        }
        if let Some((k, _)) = &self.keyed
            && r.seq == k.seq
        {
            self.met_head = true;
            if r.hash != k.hash {
                problems.push(
                    "the last row before the audit was keyed is not the one its signed marker names"
                        .to_string(),
                );
            }
        }
        if let Some((head, at_us)) = self.witnessed.remove(&r.link)
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
        self.expected_link = r.link + 1;
        self.last_seq = r.seq;
    }

    pub fn finish(mut self) -> ChainReport {
        let last = self.expected_link - 1;
        // Marker v2: the chain's keyless rows end at its head at keying, which must be here
        // (met above) or pruned behind a checkpoint past it or naming it.
        if let Some((k, _)) = &self.keyed
            && k.own_head
            && k.seq > 0
            && !self.met_head
        {
            let (link, seq, named) = (k.link, k.seq, self.named());
            let problem = match &self.report.checkpoint {
                Some(c) if c.seq > seq => None,
                Some(c) if c.seq == seq && c.hash == k.hash => None,
                Some(c) if c.seq == seq => Some(format!(
                    "{named} was cut at its last row before the audit was keyed, but the cut names another hash than the signed marker"
                )),
                _ if self.report.rows == 0 && self.report.checkpoint.is_none() => Some(format!(
                    "{named} is gone: it had {link} row(s) when the audit was keyed (signed marker)"
                )),
                _ => Some(format!(
                    "{named} is cut: its link {link}, the last row before the audit was keyed, is gone (signed marker)"
                )),
            };
            if let Some(problem) = problem {
                self.problem(self.last_seq, problem);
            }
        }
        if let Some((&link, (_, at_us))) = self.witnessed.iter().next_back()
            && link > last
        {
            let at = crate::time_text(*at_us);
            let named = self.named();
            self.problem(
                self.last_seq,
                match (self.report.last_seq, self.chain.is_empty()) {
                    (Some(seq), true) => format!(
                        "rows were cut from the end: the witness saw row {link} at {at}, and the audit ends at row {seq}"
                    ),
                    (Some(_), false) => format!(
                        "rows were cut from the end of {named}: the witness saw its link {link} at {at}, and it ends at link {last}"
                    ),
                    (None, _) => format!(
                        "{named} has no rows, but the witness saw its link {link} at {at} (rows wiped)"
                    ),
                },
            );
        }
        self.report
    }
}

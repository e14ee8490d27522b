//! The audit hash chains.
//!
//! Every writer (a process writing to the store) appends to a chain of its own: each row's
//! hash covers its chain, its link (place in that chain), every field of its event and the
//! hash of the link before it, so editing, deleting or inserting a row anywhere breaks every
//! hash after it in its chain, and a gap in links is visible on its own. Writers never wait
//! for each other's chain: replicas commit side by side, and `verify` checks each chain and
//! merges them by sequence number (a row's place among all rows).
//!
//! A row's hash covers its sequence number too where the number was known before the row was
//! sent ([`Form::Numbered`]); PostgreSQL's one-round-trip commit lets the INSERT draw it, so
//! those rows' hashes leave it out ([`Form::Unnumbered`]). Nothing is therefore judged by a
//! writer-chain row's number: which rows are keyed goes by link, numbers must rise along a
//! chain, and every writer chain's admitted calls must have receipts whatever their numbers.
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

/// The hash of link `link` of writer chain `chain` (`event`), following `prev`: an HMAC
/// under `key` in a keyed store, else a keyless SHA-256. A row hashed with its sequence
/// number `seq` (`Some`) is of the form written where the number is known before the row is
/// sent; one hashed without (`None`) is of the form written where PostgreSQL draws the number
/// as it inserts the row (the one-round-trip commit): its chain and link order it among its
/// chain's rows, its time is covered, and its number only merges the chains.
pub fn link_hash(
    key: Option<&AuditKey>,
    chain: &str,
    link: i64,
    seq: Option<i64>,
    prev: &str,
    e: &AuditEvent,
) -> String {
    let mut body = fields(seq.unwrap_or(0), e);
    if let Value::Array(items) = &mut body {
        if seq.is_none() {
            items[0] = Value::Null;
        }
        items.push(Value::Bool(e.single));
        items.push(Value::String(chain.to_string()));
        items.push(Value::from(link));
    }
    let form = match seq {
        Some(_) => "aether-audit-v3",
        None => "aether-audit-v4",
    };
    let text = format!("{form}\n{prev}\n{body}");
    match key {
        Some(key) => key.sign(&text),
        None => sha256(text.as_bytes()).to_hex(),
    }
}

/// The hash row `r` should have: keyed under `key` (`None`: keyless), by its chain's formula
/// (a writer chain's row: the form covering its sequence number).
pub fn record_hash(key: Option<&AuditKey>, r: &AuditRecord) -> String {
    match (r.chain.is_empty(), key) {
        (false, key) => link_hash(key, &r.chain, r.link, Some(r.seq), &r.prev_hash, &r.event),
        (true, Some(key)) => keyed_hash(key, &r.prev_hash, r.seq, &r.event),
        (true, None) => entry_hash(&r.prev_hash, r.seq, &r.event),
    }
}

/// Which of [`link_hash`]'s forms a row's hash follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Covering the row's sequence number (and every row of the legacy chain).
    Numbered,
    /// Without it.
    Unnumbered,
}

/// The form in which row `r` holds the hash it should, keyed under `key` (`None`: keyless)
/// by its chain's formula; `None` if it holds none (edited, or written without the key). A
/// writer chain's row may be of either form, `first` tried first (a chain's rows mostly share
/// one).
pub fn hash_form(key: Option<&AuditKey>, r: &AuditRecord, first: Form) -> Option<Form> {
    if r.chain.is_empty() {
        return (record_hash(key, r) == r.hash).then_some(Form::Numbered);
    }
    let holds = |form| {
        let seq = (form == Form::Numbered).then_some(r.seq);
        link_hash(key, &r.chain, r.link, seq, &r.prev_hash, &r.event) == r.hash
    };
    let second = match first {
        Form::Numbered => Form::Unnumbered,
        Form::Unnumbered => Form::Numbered,
    };
    [first, second].into_iter().find(|form| holds(*form))
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

/// Where a chain's keyless rows end: those up to position `at`, the row there hashing to
/// `hash`. A writer chain named by a v2 marker is judged by link, which every row's hash covers
/// in both forms (a row hashed without its sequence number could be renumbered); the chain
/// from before chains, and every chain under a v1 marker, by sequence number, which their
/// rows' hashes cover (the legacy chain's links are not).
#[derive(Debug)]
struct KeyedAfter {
    /// A sequence number, or a link where `by_link`.
    at: i64,
    by_link: bool,
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
    /// The form of the row before (tried first).
    form: Form,
    /// Whether a row at the chain's head at keying was met (marker v2).
    met_head: bool,
    /// The witness's checkpoints of this chain not yet met: link → (head, time).
    witnessed: BTreeMap<i64, (String, i64)>,
}

impl KeyedAfter {
    /// Where the row or checkpoint numbered `seq` at `link` stands, as `at` is counted.
    fn position(&self, seq: i64, link: i64) -> i64 {
        match self.by_link {
            true => link,
            false => seq,
        }
    }
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
            form: Form::Numbered,
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
        let by_link = keying.heads.is_some() && !self.chain.is_empty();
        let after = match &keying.heads {
            None => KeyedAfter {
                at: keying.keyed_after_seq,
                by_link,
                hash: keying.keyed_after_hash.clone(),
                link: 0,
                own_head: false,
            },
            Some(heads) => match heads.iter().find(|h| h.chain == self.chain) {
                Some(h) => KeyedAfter {
                    at: if by_link { h.link } else { h.seq },
                    by_link,
                    hash: h.hash.clone(),
                    link: h.link,
                    own_head: true,
                },
                // The chain had no rows at keying: every row of it is keyed.
                None => KeyedAfter {
                    at: 0,
                    by_link,
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
        self.keyed
            .as_ref()
            .is_none_or(|(k, _)| k.position(r.seq, r.link) <= k.at)
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
        if let Some(form) = hash_form(keyed, r, self.form) {
            self.form = form;
        } else {
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
            && k.position(r.seq, r.link) == k.at
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
            && k.at > 0
            && !self.met_head
        {
            let (link, at, named) = (k.link, k.at, self.named());
            let cut = self
                .report
                .checkpoint
                .as_ref()
                .map(|c| (k.position(c.seq, c.link), c));
            let problem = match cut {
                Some((position, _)) if position > at => None,
                Some((position, c)) if position == at && c.hash == k.hash => None,
                Some((position, _)) if position == at => Some(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: i64, hash_form: Form) -> AuditRecord {
        let event = AuditEvent {
            at_us: 2,
            call_id: "c1".into(),
            session: "s1".into(),
            transport: "stdio".into(),
            agent: "default".into(),
            team: None,
            project: None,
            tool: "read_file".into(),
            tier: "standard".into(),
            outcome: "ok".into(),
            step: None,
            rule: None,
            reason: None,
            definition: None,
            arguments_digest: "sha256:a".into(),
            arguments: "{}".into(),
            result: "ok".into(),
            duration_us: 5,
            single: true,
            trace: None,
            subject: None,
        };
        let numbered = (hash_form == Form::Numbered).then_some(seq);
        let key = AuditKey::from_bytes(&[7u8; 32]);
        AuditRecord {
            seq,
            chain: "w/1".into(),
            link: 3,
            hash: link_hash(Some(&key), "w/1", 3, numbered, GENESIS, &event),
            event,
            prev_hash: GENESIS.into(),
        }
    }

    #[test]
    fn a_rows_hash_form_is_told_and_the_unnumbered_form_covers_all_but_the_number() {
        let key = AuditKey::from_bytes(&[7u8; 32]);
        for form in [Form::Numbered, Form::Unnumbered] {
            let r = row(10, form);
            for first in [Form::Numbered, Form::Unnumbered] {
                assert_eq!(hash_form(Some(&key), &r, first), Some(form));
            }
            // Without the key, or keyless, neither form holds.
            assert_eq!(hash_form(None, &r, form), None);
            let other = AuditKey::from_bytes(&[8u8; 32]);
            assert_eq!(hash_form(Some(&other), &r, form), None);
        }
        // Renumbered: the numbered form breaks, the unnumbered one does not cover it.
        let mut numbered = row(10, Form::Numbered);
        numbered.seq = 11;
        assert_eq!(hash_form(Some(&key), &numbered, Form::Numbered), None);
        let mut unnumbered = row(10, Form::Unnumbered);
        unnumbered.seq = 11;
        assert_eq!(
            hash_form(Some(&key), &unnumbered, Form::Numbered),
            Some(Form::Unnumbered)
        );
        // Everything else is covered: link, chain, the flag, the fields, the row before.
        let edits: [fn(&mut AuditRecord); 5] = [
            |r| r.link = 4,
            |r| r.chain = "w/2".into(),
            |r| r.event.single = false,
            |r| r.event.outcome = "tool_error".into(),
            |r| r.prev_hash = "1".repeat(64),
        ];
        for edit in edits {
            let mut r = row(10, Form::Unnumbered);
            edit(&mut r);
            assert_eq!(hash_form(Some(&key), &r, Form::Unnumbered), None, "{r:?}");
        }
    }
}

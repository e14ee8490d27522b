//! Aether's store: admission receipts, the hash-chained audit, the tool registry and the halt
//! flag. This is the only crate that knows SQL.
//!
//! Two databases, one store: SQLite (WAL) is the embedded default; PostgreSQL holds one store
//! for several replicas. The store's logic (`sql/`) is written once against the seam in
//! `db.rs`; each database has its own file there (connections, migrations, the few
//! statements written twice). Writes go through one writer per store, which commits whatever
//! is waiting as one transaction (group commit), so one fsync can make many receipts durable
//! while no single call ever runs before its own receipt is on disk.

mod chain;
mod db;
mod runs;
mod sources;
mod sql;
mod vault;
mod witness;

use std::path::Path;

use serde::Serialize;

pub use aether_vocab::journal::{
    AdmissionReceipt, CommandEnd, CommandQuery, CommandRecord, CommandStart, Document,
    JournalEntry, JournalOp, JournalQuery, JournalWrite, KnowledgeDoc, KnowledgeHit, Message,
    SealPin, SealRecord, content_hash,
};
pub use chain::{
    ChainBreak, ChainHead, ChainReport, Checkpoint, Form, GENESIS, Keying, SETTLE_US, hash_form,
    link_hash, record_hash,
};
pub use db::DbError;
pub use runs::{RunEvent, RunRecord, RunStart};
pub use sources::{
    Account, ConsoleSession, DATASET_ROWS, Dataset, DatasetSummary, IdempotencyClaim, Report,
    SealedSecret, UpstreamStatus,
};
pub use sql::Location;
pub use sql::ledger::{HEARTBEAT, Unfinished};
pub use sql::stats::{
    CallOverview, HOURS_KEPT_US, LATENCY_BOUNDS_US, MINUTES_KEPT_US, RefusalCount, SpanCounts,
    ToolLatency,
};
pub use vault::{AuditKey, Vault, valid_secret_name};
pub use witness::{Witness, WitnessLine};

/// What became of a receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// On disk; the call may run.
    Durable,
    /// The halt flag was set when the receipt was to be written; nothing was written.
    Halted(HaltState),
}

/// One outcome of one call, as the pipeline hands it to the audit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEvent {
    pub at_us: i64,
    pub call_id: String,
    pub session: String,
    pub transport: String,
    pub agent: String,
    pub team: Option<String>,
    pub project: Option<String>,
    pub tool: String,
    pub tier: String,
    /// `ok`, `tool_error`, `refused`, `cancelled`, `panicked`, `timed_out`, `failed`.
    pub outcome: String,
    pub step: Option<String>,
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub definition: Option<String>,
    pub arguments_digest: String,
    /// The arguments, whole or summarized according to the tool's tier.
    pub arguments: String,
    /// The result, whole or summarized according to the tool's tier.
    pub result: String,
    pub duration_us: i64,
    /// A side-effect-free call's only record: admission and outcome in one row, with no
    /// receipt before it (the call could change nothing, and its answer waited for this row).
    pub single: bool,
    /// The W3C trace context (`traceparent`) of the request that made the call, when its
    /// client sent one (MCP 2026-07-28's `_meta`); covered by the row's hash when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Who the call was made for, when its caller presented an OAuth access token: the token's
    /// subject (`sub`); the agent is whom it acted as. Covered by the row's hash when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// An audit row as stored: the event, its place in the chain and its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// Its place among all rows: unique, rising in each chain, not gapless across them.
    pub seq: i64,
    /// The chain it belongs to (its writer's id; `""` for rows from before chains).
    pub chain: String,
    /// Its place in its chain, from 1 (for `""`, its sequence number).
    pub link: i64,
    #[serde(flatten)]
    pub event: AuditEvent,
    pub prev_hash: String,
    pub hash: String,
}

/// What the other processes on the store counted (`Store::share_rate_counts`): per (key,
/// window start), their calls; per key, their calls in flight.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedCounts {
    pub windows: std::collections::HashMap<(String, i64), u64>,
    pub in_flight: std::collections::HashMap<String, u64>,
}

/// A client registered with Aether's own authorization server (RFC 7591), or read from its
/// client ID metadata document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub created_us: i64,
}

/// An authorization code as issued: to whom, for what, bound to which PKCE challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthCode {
    pub client_id: String,
    pub redirect_uri: String,
    /// The console account that consented.
    pub account: String,
    pub scope: String,
    pub resource: String,
    /// The S256 code challenge (base64url).
    pub challenge: String,
    pub expires_us: i64,
}

/// What a person consented to: one client acting for them with these scopes, until revoked
/// or expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthGrant {
    pub grant_id: String,
    pub client_id: String,
    pub account: String,
    pub scope: String,
    pub resource: String,
    pub created_us: i64,
    pub expires_us: i64,
}

/// What redeeming an authorization code did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redeemed {
    /// The grant was started (as the code says); the code as issued, for its checks.
    Started(OAuthCode),
    Unknown,
    /// Already redeemed: the grant its first redemption started is revoked.
    Reused,
}

/// What using a refresh token did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refreshed {
    /// Used up, and its grant given the new one.
    Rotated(OAuthGrant),
    Unknown,
    Expired,
    /// Its grant was revoked or has expired.
    Revoked,
    /// Used before: its grant is revoked now.
    Reused,
}

/// Which audit rows to read.
#[derive(Clone, Debug, Default)]
pub struct AuditQuery {
    /// Only rows after this sequence number.
    pub after: Option<i64>,
    /// Only rows before this sequence number (paging back from the newest).
    pub before: Option<i64>,
    /// Only rows written at or after this time (µs since the epoch).
    pub since_us: Option<i64>,
    pub agent: Option<String>,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    /// Only rows written before this time (µs since the epoch).
    pub until_us: Option<i64>,
    /// Only rows of this call.
    pub call_id: Option<String>,
    /// Only rows of calls made for this person (an OAuth token's subject).
    pub subject: Option<String>,
    /// Only rows of this MCP session.
    pub session: Option<String>,
    pub limit: usize,
    /// Newest first (for `tail`) instead of oldest first.
    pub newest_first: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HaltState {
    pub halted: bool,
    pub by: Option<String>,
    pub why: Option<String>,
    pub at_us: Option<i64>,
}

/// A registry row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegistryRow {
    pub name: String,
    pub state: aether_vocab::RegistryState,
    pub approved_digest: Option<String>,
    /// The definition (JSON) the row was last written with.
    pub definition: String,
    pub origin: String,
    pub updated_at_us: i64,
    pub updated_by: String,
    pub why: String,
    /// The digest of the definition last seen (what an approval now would bind).
    pub seen_digest: Option<String>,
    /// The definition the approval bound (for the diff against a changed one).
    pub approved_definition: Option<String>,
}

/// What an operator does to a registry row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryAction {
    /// Approve the definition last seen; with `digest`, only if that is still the one seen
    /// (the operator approves what they reviewed, not whatever is there now).
    Approve {
        digest: Option<String>,
    },
    Withdraw,
    /// Go back to the state before the newest change not already undone.
    Undo,
}

#[derive(Clone, Debug)]
pub struct RegistryChange {
    pub name: String,
    pub action: RegistryAction,
    pub by: String,
    pub why: String,
}

/// One change of the registry: the row's state after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegistryHistoryRow {
    pub id: i64,
    pub at_us: i64,
    pub name: String,
    pub from_state: Option<String>,
    pub to_state: String,
    /// The approved digest after the change.
    pub digest: Option<String>,
    pub by: String,
    pub why: String,
    /// For an undo: the change it reverted.
    pub undoes: Option<i64>,
}

/// One counter per kind of change, for processes sharing the store to notice changes cheaply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Revisions {
    pub halted: bool,
    pub registry: i64,
    pub approvals: i64,
    pub tokens: i64,
    pub seals: i64,
    /// Bumped by `aether sources refresh`: list every upstream again.
    pub sources: i64,
    /// Bumped by every change of a console account.
    pub accounts: i64,
}

/// A call waiting for a person, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalRequest {
    /// The call id.
    pub id: String,
    pub requested_at_us: i64,
    pub expires_at_us: i64,
    pub session: String,
    pub transport: String,
    pub agent: String,
    pub team: Option<String>,
    pub project: Option<String>,
    pub tool: String,
    pub tier: String,
    pub definition: String,
    /// The arguments (canonical JSON, bounded), for the person deciding.
    pub arguments: String,
    pub arguments_digest: String,
    /// What asked for a person: `tier:restricted`, `rule:NAME`, or `tool:NAME` (the tool
    /// judged these arguments, say a destructive shell command).
    pub asked_by: String,
    pub reason: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    Expired,
    Cancelled,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Expired => "expired",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<ApprovalState> {
        Some(match s {
            "pending" => ApprovalState::Pending,
            "approved" => ApprovalState::Approved,
            "denied" => ApprovalState::Denied,
            "expired" => ApprovalState::Expired,
            "cancelled" => ApprovalState::Cancelled,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalRow {
    #[serde(flatten)]
    pub request: ApprovalRequest,
    pub state: ApprovalState,
    pub decided_at_us: Option<i64>,
    pub decided_by: Option<String>,
    pub why: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    /// An MCP caller, acting as the agent named by `subject`.
    Agent,
    /// The admin API, as the operator named by `subject`.
    Operator,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Agent => "agent",
            TokenKind::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<TokenKind> {
        match s {
            "agent" => Some(TokenKind::Agent),
            "operator" => Some(TokenKind::Operator),
            _ => None,
        }
    }
}

/// A bearer token as recorded (never the token itself).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TokenRow {
    pub id: String,
    pub kind: TokenKind,
    pub subject: String,
    pub label: String,
    pub created_at_us: i64,
    pub created_by: String,
    pub revoked_at_us: Option<i64>,
    pub revoked_by: Option<String>,
}

/// A built-in tool as shipped: approved from source.
#[derive(Clone, Debug)]
pub struct BuiltinDefinition {
    pub name: String,
    pub digest: String,
    pub definition: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store at {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("store: {context}: {source}")]
    Sql {
        context: &'static str,
        source: DbError,
    },
    /// The database cannot be reached: nothing was written, nothing may run.
    #[error(
        "store at {location} cannot be reached ({detail}); no call is admitted until it is back"
    )]
    Unreachable { location: String, detail: String },
    #[error(
        "store at {path} has schema version {found}, newer than this Aether understands ({known}); upgrade Aether"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("store writer has stopped; Aether cannot write receipts or audit rows")]
    WriterGone,
    #[error("store write failed: {0}")]
    Write(String),
    /// A write carrying a call's receipt met a halt: nothing was written.
    #[error("Aether is halted by an operator{}; nothing was written", .0.why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default())]
    Halted(HaltState),
    #[error("store: {0}")]
    Invalid(String),
    /// A new document's name is taken (a document is written as version 1 only once).
    #[error("store: {kind} {name:?} already exists (version {version})")]
    DocumentExists {
        kind: String,
        name: String,
        version: i64,
    },
    /// A document changed since the version its new content was made from.
    #[error("store: {kind} {name:?} changed since it was read; read it again and retry")]
    DocumentChanged { kind: String, name: String },
}

impl StoreError {
    pub(crate) fn sql(context: &'static str) -> impl FnOnce(DbError) -> StoreError {
        move |source| StoreError::Sql { context, source }
    }

    /// Whether the store's database could not be reached (as opposed to refusing a write).
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } => true,
            StoreError::Sql { source, .. } => source.is_unreachable(),
            _ => false,
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A store, in whichever database holds it.
#[derive(Clone)]
pub struct Store(sql::SqlStore);

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.0.location())
    }
}

/// What `verify` checks beyond the chain and the receipts.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// A sequence number and hash recorded elsewhere earlier: the chain must still hold it.
    pub expect_head: Option<(i64, String)>,
    /// The audit key: a keyed store's rows, marker and witness are checked with it.
    pub key: Option<AuditKey>,
    /// The witness file to check the rows against.
    pub witness: Option<std::path::PathBuf>,
}

/// How a store is opened.
#[derive(Clone, Debug)]
pub enum Access {
    /// For writing; with a key, the audit is keyed under it (and keyed now if it is not yet).
    Write(Option<AuditKey>),
    /// For reading only: no migration, no writer, no lock; writes fail.
    ReadOnly,
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `path`, unkeyed (see [`Store::open`]).
    pub fn open_sqlite(path: &Path) -> Result<Store> {
        Store::open_sqlite_with(path, Access::Write(None))
    }

    pub fn open_sqlite_with(path: &Path, access: Access) -> Result<Store> {
        Ok(Store(match access {
            Access::Write(key) => sql::SqlStore::open_sqlite(path, key)?,
            Access::ReadOnly => sql::SqlStore::open_sqlite_readonly(path)?,
        }))
    }

    /// Opens a PostgreSQL store (`postgres://…` or `postgresql://…`), creating its tables in
    /// the connection's schema if they are missing; unkeyed.
    pub fn open_postgres(url: &str) -> Result<Store> {
        Store::open_postgres_with(url, Access::Write(None))
    }

    pub fn open_postgres_with(url: &str, access: Access) -> Result<Store> {
        Ok(Store(match access {
            Access::Write(key) => sql::SqlStore::open_postgres(url, key)?,
            Access::ReadOnly => sql::SqlStore::open_postgres_readonly(url)?,
        }))
    }

    /// Opens a store from a URL, unkeyed (see [`Store::open`]).
    pub fn open_url(url: &str) -> Result<Store> {
        Store::open(url, Access::Write(None))
    }

    /// Opens a store from a URL: `sqlite://PATH` (relative paths from the current folder) or
    /// `postgres://USER@HOST:PORT/DATABASE`. Aether's commands open stores keyed with the
    /// vault's audit key; a store opened without the key it is keyed under may not append
    /// audit rows.
    pub fn open(url: &str, access: Access) -> Result<Store> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Store::open_postgres_with(url, access);
        }
        match url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            Some(path) => Store::open_sqlite_with(Path::new(path), access),
            None => Err(StoreError::Invalid(format!(
                "unsupported store URL {:?}; use sqlite://PATH or postgres://USER@HOST:PORT/DATABASE",
                db::postgres::redact(url)
            ))),
        }
    }

    /// Where the store lives.
    pub fn location(&self) -> &Location {
        self.0.location()
    }

    /// The key this store's audit is keyed under (a store opened for writing with the vault's
    /// key); `None` for an unkeyed or read-only store.
    pub fn audit_key(&self) -> Option<&AuditKey> {
        self.0.audit_key()
    }

    /// A receiver bumped whenever another process changes the store, where the database
    /// says so at once (PostgreSQL's LISTEN/NOTIFY); `None` where only polling sees changes.
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.0.changes()
    }

    /// Prunes audit rows written before `before_us` behind a checkpoint per chain cut, each
    /// signed with `vault`'s key (see [`Checkpoint`]); empty when nothing was that old.
    pub async fn prune_audit(
        &self,
        before_us: i64,
        by: &str,
        vault: std::sync::Arc<Vault>,
    ) -> Result<Vec<Checkpoint>> {
        self.0.prune_audit(before_us, by.to_string(), vault).await
    }

    /// Records an MCP session (by id) with the client's initialize request, for any replica to
    /// resume.
    pub async fn put_mcp_session(&self, id: &str, state: String) -> Result<()> {
        self.0.put_mcp_session(id.to_string(), state).await
    }

    /// Binds MCP session `id` to `agent` if nobody holds it yet; returns the agent it is bound
    /// to (`None`: no such session on record).
    pub async fn bind_mcp_session(&self, id: &str, agent: &str) -> Result<Option<String>> {
        self.0
            .bind_mcp_session(id.to_string(), agent.to_string())
            .await
    }

    /// A recorded MCP session's initialize request.
    pub async fn mcp_session(&self, id: &str) -> Result<Option<String>> {
        self.0.mcp_session(id.to_string()).await
    }

    /// Forgets session `id` (a client ended it) and every session begun before `before_us`;
    /// returns how many went.
    pub async fn remove_mcp_sessions(&self, id: Option<&str>, before_us: i64) -> Result<u64> {
        self.0
            .remove_mcp_sessions(id.map(str::to_string), before_us)
            .await
    }

    /// Makes `receipt` durable, unless the halt flag is set at that moment.
    pub async fn admit(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        self.0.admit(receipt).await
    }

    /// [`Store::admit`] for a caller that is the only one writing right now: the commit may
    /// happen on the calling thread instead of being handed to the writer (less latency, no
    /// grouping). Blocks the calling thread for one commit.
    pub async fn admit_alone(&self, receipt: AdmissionReceipt) -> Result<ReceiptOutcome> {
        self.0.admit_alone(receipt).await
    }

    /// [`Store::audit`] for a caller that is the only one writing right now; see
    /// [`Store::admit_alone`].
    pub async fn audit_alone(&self, event: AuditEvent) -> Result<(i64, Option<HaltState>)> {
        self.0.audit_alone(event).await
    }

    /// Appends `event` to the audit chain, durably; returns its sequence number.
    pub async fn audit(&self, event: AuditEvent) -> Result<i64> {
        Ok(self.0.audit(event).await?.0)
    }

    /// Appends a call's row, durably. A side-effect-free call's only record (`single`) whose
    /// result would reach the caller meets the halt flag in the same transaction: when an
    /// operator halted Aether meanwhile (any process), the row is written as refused at the
    /// halt and its state returned, and the result must not be handed out.
    pub async fn audit_call(&self, event: AuditEvent) -> Result<(i64, Option<HaltState>)> {
        self.0.audit(event).await
    }

    pub async fn run_start(&self, run: RunStart) -> Result<()> {
        self.0.run_start(run).await
    }

    /// Appends one entry (`kind`, `body` as JSON) to a run's transcript.
    pub async fn run_event(&self, run_id: &str, kind: &str, body: String) -> Result<i64> {
        self.0
            .run_event(run_id.to_string(), kind.to_string(), body)
            .await
    }

    pub async fn run_progress(
        &self,
        id: &str,
        rounds: i64,
        prompt_tokens: i64,
        completion_tokens: i64,
    ) -> Result<()> {
        self.0
            .run_progress(id.to_string(), rounds, prompt_tokens, completion_tokens)
            .await
    }

    /// Ends a running run with `status`; false if it was not running.
    pub async fn run_finish(
        &self,
        id: &str,
        status: &str,
        answer: Option<String>,
        error: Option<String>,
    ) -> Result<bool> {
        self.0
            .run_finish(id.to_string(), status.to_string(), answer, error)
            .await
    }

    /// Renews a running run's lease (its process is alive); false if it no longer runs.
    pub async fn run_alive(&self, id: &str) -> Result<bool> {
        self.0.run_alive(id.to_string()).await
    }

    /// Asks a running run to stop; a run whose process is gone is ended as `interrupted`.
    /// False if no such run is running.
    pub async fn run_stop(&self, id: &str, by: &str, why: &str) -> Result<bool> {
        self.0
            .run_stop(id.to_string(), by.to_string(), why.to_string())
            .await
    }

    pub async fn run(&self, id: &str) -> Result<Option<RunRecord>> {
        self.0.run(id.to_string()).await
    }

    /// The newest runs first.
    pub async fn runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        self.0.runs(limit).await
    }

    pub async fn run_events(&self, id: &str) -> Result<Vec<RunEvent>> {
        self.0.run_events(id.to_string()).await
    }

    /// Keeps an audit row whose write met an unreachable database and writes it once the
    /// database answers again (needs a Tokio runtime).
    pub fn audit_when_back(&self, event: AuditEvent) {
        self.0.audit_when_back(event)
    }

    pub async fn audit_query(&self, query: AuditQuery) -> Result<Vec<AuditRecord>> {
        self.0.audit_query(query).await
    }

    /// Walks the whole chain and reports every row that does not follow from the one before
    /// it, checks every receipt against its audit row, and, given `expect_head` (a sequence
    /// number and hash recorded elsewhere earlier), that the chain still contains it.
    pub async fn verify_audit(&self, expect_head: Option<(i64, String)>) -> Result<ChainReport> {
        self.0
            .verify_audit(VerifyOptions {
                expect_head,
                ..Default::default()
            })
            .await
    }

    /// [`Store::verify_audit`] with the audit key (a keyed store needs it) and the witness.
    pub async fn verify_audit_with(&self, options: VerifyOptions) -> Result<ChainReport> {
        self.0.verify_audit(options).await
    }

    /// Renews this process's heartbeat as a writer (every [`HEARTBEAT`] while serving).
    pub async fn heartbeat(&self) -> Result<()> {
        self.0.heartbeat().await
    }

    /// Marks this process's writer stopped: a clean shutdown, its calls all ended.
    pub async fn writer_stopped(&self) -> Result<()> {
        self.0.writer_stopped().await
    }

    /// Calls a gone process admitted and never audited, and the gone writers looked through.
    pub async fn unfinished(&self) -> Result<(Vec<Unfinished>, Vec<String>)> {
        self.0.unfinished().await
    }

    /// Appends the `interrupted` rows of unfinished calls (skipping any audited by now) and
    /// marks `writers` reaped, in one transaction; returns the rows written.
    pub async fn record_interrupted(
        &self,
        events: Vec<AuditEvent>,
        writers: Vec<String>,
    ) -> Result<usize> {
        self.0.record_interrupted(events, writers).await
    }

    /// The journal writes of calls crashed `writers` admitted shortly before they stopped
    /// (see `aether_tools::workspace::redo`), oldest first.
    pub async fn journal_to_redo(&self, writers: Vec<String>) -> Result<Vec<JournalEntry>> {
        self.0.journal_to_redo(writers).await
    }

    /// The newest row of each of this process's own chains (what its witness checkpoints);
    /// one chain per writer connection (PostgreSQL has a few), none before it wrote a row.
    pub async fn audit_heads(&self) -> Result<Vec<ChainHead>> {
        self.0.audit_heads().await
    }

    /// The writers gone without stopping that no start has put right yet.
    pub async fn crashed_writers(&self) -> Result<Vec<String>> {
        self.0.crashed_writers().await
    }

    /// The newest row of each chain the processes `writers` wrote: what a start checkpoints
    /// for the writers it found crashed (their last rows may not have reached the witness).
    pub async fn audit_heads_of(&self, writers: Vec<String>) -> Result<Vec<ChainHead>> {
        self.0.audit_heads_of(writers).await
    }

    /// The audit's keying marker, as read at open; `None` for a store never keyed.
    pub fn keying(&self) -> Option<&Keying> {
        self.0.keying()
    }

    pub async fn receipt(&self, call_id: &str) -> Result<Option<AdmissionReceipt>> {
        self.0.receipt(call_id).await
    }

    pub async fn halt_state(&self) -> Result<HaltState> {
        self.0.halt_state().await
    }

    /// Sets or clears the halt flag (a halt also denies every pending approval); `audit`, if
    /// given, is appended to the audit chain in the same transaction.
    pub async fn set_halt(
        &self,
        halted: bool,
        by: &str,
        why: &str,
        audit: Option<AuditEvent>,
    ) -> Result<HaltState> {
        self.0.set_halt(halted, by, why, audit).await
    }

    pub async fn registry(&self) -> Result<Vec<RegistryRow>> {
        self.0.registry().await
    }

    /// Makes an operator's receipt durable on its own, whether or not Aether is halted.
    pub async fn admit_operator(&self, receipt: AdmissionReceipt) -> Result<()> {
        self.0.admit_operator(receipt).await
    }

    /// The store's own files, which no tool may open.
    pub fn private_paths(&self) -> Vec<std::path::PathBuf> {
        match self.0.location() {
            Location::Postgres(_) => Vec::new(),
            Location::Sqlite(db) => {
                let mut paths: Vec<std::path::PathBuf> = ["", "-wal", "-shm", "-journal"]
                    .iter()
                    .map(|suffix| {
                        let mut p = db.clone().into_os_string();
                        p.push(suffix);
                        p.into()
                    })
                    .collect();
                if let Some(dir) = db.parent()
                    && dir.file_name().is_some_and(|n| n == ".aether")
                {
                    paths.push(dir.to_path_buf());
                }
                paths
            }
        }
    }

    /// Makes journal entries (and the images they refer to) durable; returns their ids.
    pub async fn journal(&self, write: JournalWrite) -> Result<Vec<i64>> {
        self.0.journal(write).await
    }

    /// [`Store::journal`] committed on the calling thread when the write connection is free
    /// (SQLite; elsewhere, or while the writer is busy, it joins the writer's batch). Blocks
    /// the calling thread for one commit: for callers on a thread of their own.
    pub async fn journal_alone(&self, write: JournalWrite) -> Result<Vec<i64>> {
        self.0.journal_alone(write).await
    }

    pub async fn journal_entries(&self, query: JournalQuery) -> Result<Vec<JournalEntry>> {
        self.0.journal_entries(query).await
    }

    /// The bytes of a journalled image, by content hash.
    pub async fn journal_blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        self.0.journal_blob(hash).await
    }

    /// Drops journal entries older than `before_us`, then the oldest beyond `keep`, and the
    /// images nothing refers to any more. Returns how many entries went.
    pub async fn prune_journal(&self, before_us: i64, keep: usize) -> Result<usize> {
        self.0.prune_journal(before_us, keep).await
    }

    /// Records, durably, a command about to run; returns its row's id.
    pub async fn command_started(&self, start: CommandStart) -> Result<i64> {
        self.0.command_started(start).await
    }

    /// Records how the command of row `id` ended.
    pub async fn command_ended(&self, id: i64, end: CommandEnd) -> Result<()> {
        self.0.command_ended(id, end).await
    }

    /// The command log, newest first.
    pub async fn commands(&self, query: CommandQuery) -> Result<Vec<CommandRecord>> {
        self.0.commands(query).await
    }

    /// Pins `pins` as the sealed content of `root` (replacing any earlier seal).
    pub async fn seal(&self, seal: SealRecord, pins: Vec<SealPin>) -> Result<SealRecord> {
        self.0.seal(seal, pins).await
    }

    /// Records how an upstream is now.
    pub async fn put_upstream_status(&self, status: UpstreamStatus) -> Result<()> {
        self.0.put_upstream_status(status).await
    }

    /// Counts the audit rows written since the last count into the per-minute and per-hour
    /// call counts the overview reads (each row once, whatever crashes and however many
    /// processes count); returns how many rows it read. The watcher runs it every second, the
    /// overview before it reads.
    pub async fn count_calls(&self) -> Result<u64> {
        self.0.count_calls().await
    }

    /// Drops the call counts no overview window reads any more (minutes past three days,
    /// hours past 400); returns how many rows went.
    pub async fn prune_call_stats(&self, now_us: i64) -> Result<usize> {
        self.0.prune_call_stats(now_us).await
    }

    /// Calls in `[since_us, until_us)` from the per-minute and per-hour counts (never a scan
    /// of the audit; as of the last [`Store::count_calls`]): by outcome in spans of `span_us`, refusals by step and rule,
    /// latency per tool.
    pub async fn call_overview(
        &self,
        since_us: i64,
        until_us: i64,
        span_us: i64,
    ) -> Result<CallOverview> {
        self.0.call_overview(since_us, until_us, span_us).await
    }

    /// Every upstream's last recorded status, by name.
    pub async fn upstream_statuses(&self) -> Result<Vec<UpstreamStatus>> {
        self.0.upstream_statuses().await
    }

    /// Asks every process serving upstreams to list them again.
    pub async fn request_sources_refresh(&self) -> Result<()> {
        self.0.request_sources_refresh().await
    }

    /// Stores (or replaces) an encrypted credential.
    pub async fn vault_put(&self, secret: SealedSecret) -> Result<()> {
        self.0.vault_put(secret).await
    }

    /// An encrypted credential.
    pub async fn vault_get(&self, name: &str) -> Result<Option<SealedSecret>> {
        self.0.vault_get(name.to_string()).await
    }

    /// The credential `name`, opened with the vault key at `key_file`; `None` when the vault
    /// has no such credential (the caller says which setting named it). Errors say what could
    /// not be read.
    pub async fn open_credential(
        &self,
        name: &str,
        key_file: &Path,
    ) -> std::result::Result<Option<String>, String> {
        let Some(sealed) = self
            .vault_get(name)
            .await
            .map_err(|e| format!("cannot read the vault: {e}"))?
        else {
            return Ok(None);
        };
        let vault =
            Vault::open(key_file, false).map_err(|e| format!("cannot open the vault key: {e}"))?;
        vault
            .open_secret(&sealed)
            .map(Some)
            .map_err(|e| format!("cannot open the key: {e}"))
    }

    /// The vault's names and when each was set; never a value.
    pub async fn vault_names(&self) -> Result<Vec<(String, i64)>> {
        self.0.vault_names().await
    }

    /// Removes a credential; false if there was none.
    pub async fn vault_remove(&self, name: &str) -> Result<bool> {
        self.0.vault_remove(name.to_string()).await
    }

    /// Keeps a table a tool returned.
    pub async fn put_dataset(&self, dataset: Dataset) -> Result<()> {
        self.0.put_dataset(dataset).await
    }

    /// The table call `call_id` returned.
    pub async fn dataset(&self, call_id: &str) -> Result<Option<Dataset>> {
        self.0.dataset(call_id.to_string()).await
    }

    /// The newest data sets, without their rows.
    pub async fn datasets(&self, limit: usize) -> Result<Vec<DatasetSummary>> {
        self.0.datasets(limit).await
    }

    /// Drops data sets older than `before_us`, then the oldest beyond `keep`; returns how
    /// many went. (A report keeps its stored call; a run makes a new data set.)
    pub async fn prune_datasets(&self, before_us: i64, keep: usize) -> Result<usize> {
        self.0.prune_datasets(before_us, keep).await
    }

    /// Saves (or replaces) a report.
    pub async fn save_report(&self, report: Report) -> Result<()> {
        self.0.save_report(report).await
    }

    /// Every saved report, by name.
    pub async fn reports(&self) -> Result<Vec<Report>> {
        self.0.reports().await
    }

    /// Removes a report; false if there was none.
    pub async fn remove_report(&self, name: &str) -> Result<bool> {
        self.0.remove_report(name.to_string()).await
    }

    /// Records the call id of a report's latest run.
    pub async fn report_ran(&self, name: &str, call_id: &str) -> Result<()> {
        self.0
            .report_ran(name.to_string(), call_id.to_string())
            .await
    }

    /// Every console account, by name (password hashes included: never show them).
    pub async fn accounts(&self) -> Result<Vec<Account>> {
        self.0.accounts().await
    }

    /// One console account.
    pub async fn account(&self, name: &str) -> Result<Option<Account>> {
        self.0.account(name.to_string()).await
    }

    /// Creates an account (with a setup link's hash: the first admin, using the link up).
    pub async fn create_account(
        &self,
        account: Account,
        setup_token_hash: Option<String>,
        audit: Option<AuditEvent>,
    ) -> Result<()> {
        self.0
            .create_account(account, setup_token_hash, audit)
            .await
    }

    /// Changes an account's role or password; its sessions end.
    pub async fn update_account(
        &self,
        name: &str,
        role: Option<String>,
        password_hash: Option<String>,
        audit: Option<AuditEvent>,
    ) -> Result<()> {
        self.0
            .update_account(name.to_string(), role, password_hash, audit)
            .await
    }

    /// Removes an account and its sessions (never the last admin).
    pub async fn remove_account(&self, name: &str, audit: Option<AuditEvent>) -> Result<()> {
        self.0.remove_account(name.to_string(), audit).await
    }

    /// Records a signed-in session by the hash of its cookie.
    pub async fn create_console_session(
        &self,
        id_hash: &str,
        session: ConsoleSession,
    ) -> Result<()> {
        self.0
            .create_console_session(id_hash.to_string(), session)
            .await
    }

    /// The session of a cookie's hash.
    pub async fn console_session(&self, id_hash: &str) -> Result<Option<ConsoleSession>> {
        self.0.console_session(id_hash.to_string()).await
    }

    /// Ends a session (sign-out).
    pub async fn end_console_session(&self, id_hash: &str) -> Result<()> {
        self.0.end_console_session(id_hash.to_string()).await
    }

    /// Records a one-time setup link by its hash.
    pub async fn create_setup_link(&self, token_hash: &str, expires_us: i64) -> Result<()> {
        self.0
            .create_setup_link(token_hash.to_string(), expires_us)
            .await
    }

    /// Whether a setup link's hash is unused and unexpired (before the slow work of making an account).
    pub async fn setup_link_valid(&self, token_hash: &str) -> Result<bool> {
        self.0.setup_link_valid(token_hash.to_string()).await
    }

    /// A working tool's document.
    pub async fn document(&self, kind: &str, scope: &str, name: &str) -> Result<Option<Document>> {
        self.0
            .document(kind.to_string(), scope.to_string(), name.to_string())
            .await
    }

    /// Writes a document if nobody changed it since it was read (its version is one more).
    pub async fn put_document(&self, doc: Document) -> Result<()> {
        self.0.put_document(doc).await
    }

    /// Leaves a message in a team mailbox.
    pub async fn send_message(&self, message: Message) -> Result<i64> {
        self.0.send_message(message).await
    }

    /// Unread messages for an agent of a team, oldest first, marked read.
    pub async fn take_messages(&self, team: &str, to: &str, limit: usize) -> Result<Vec<Message>> {
        self.0
            .take_messages(team.to_string(), to.to_string(), limit)
            .await
    }

    /// Adds or replaces knowledge documents (by scope and source), in one transaction.
    pub async fn knowledge_put(&self, docs: Vec<KnowledgeDoc>) -> Result<usize> {
        self.0.knowledge_put(docs).await
    }

    /// Ranked full-text search over `scopes`, hits scoring below `floor` left out.
    pub async fn knowledge_search(
        &self,
        scopes: Vec<String>,
        text: &str,
        limit: usize,
        floor: f64,
    ) -> Result<Vec<KnowledgeHit>> {
        self.0
            .knowledge_search(scopes, text.to_string(), limit, floor)
            .await
    }

    pub async fn oauth_register_client(&self, client: OAuthClient) -> Result<()> {
        self.0.oauth_register_client(client).await
    }

    pub async fn oauth_client(&self, client_id: String) -> Result<Option<OAuthClient>> {
        self.0.oauth_client(client_id).await
    }

    /// Keeps an authorization code by its hash.
    pub async fn oauth_put_code(&self, code_hash: String, code: OAuthCode) -> Result<()> {
        self.0.oauth_put_code(code_hash, code).await
    }

    /// Redeems a code once, starting grant `grant_id` (its client, account, scope and
    /// resource the code's) with its first refresh token; a second redemption revokes it.
    pub async fn oauth_redeem_code(
        &self,
        code_hash: String,
        grant_id: String,
        expires_us: i64,
        refresh_hash: String,
    ) -> Result<Redeemed> {
        self.0
            .oauth_redeem_code(code_hash, grant_id, expires_us, refresh_hash)
            .await
    }

    /// Uses a refresh token once, giving its grant `next_hash` instead; a used one presented
    /// again revokes its grant.
    pub async fn oauth_refresh(
        &self,
        token_hash: String,
        next_hash: String,
        next_expires_us: i64,
    ) -> Result<Refreshed> {
        self.0
            .oauth_refresh(token_hash, next_hash, next_expires_us)
            .await
    }

    /// Revokes the grant of a refresh token; whether the token was known.
    pub async fn oauth_revoke_refresh(&self, token_hash: String) -> Result<bool> {
        self.0.oauth_revoke_refresh(token_hash).await
    }

    pub async fn oauth_revoke_grant(&self, grant_id: String) -> Result<()> {
        self.0.oauth_revoke_grant(grant_id).await
    }

    /// The built-in authorization server's grants (of `account`, if named), newest first, with
    /// when each was revoked.
    pub async fn oauth_grants(
        &self,
        account: Option<String>,
    ) -> Result<Vec<(OAuthGrant, Option<i64>)>> {
        self.0.oauth_grants(account).await
    }

    /// Revokes every grant `account` gave; how many were live.
    pub async fn oauth_revoke_account(&self, account: String) -> Result<u64> {
        self.0.oauth_revoke_account(account).await
    }

    /// The grant, unless revoked or expired.
    pub async fn oauth_live_grant(&self, grant_id: String) -> Result<Option<OAuthGrant>> {
        self.0.oauth_live_grant(grant_id).await
    }

    /// Adds `writer`'s rate limit counts and calls in flight, and reads the other writers'
    /// counts of `windows` and their calls in flight shared after `fresh_after_us`.
    pub async fn share_rate_counts(
        &self,
        writer: &str,
        adds: Vec<(String, i64, u64)>,
        in_flight: Vec<(String, u64)>,
        windows: Vec<(String, i64)>,
        fresh_after_us: i64,
        prune: bool,
    ) -> Result<SharedCounts> {
        self.0
            .share_rate_counts(
                writer.to_string(),
                adds,
                in_flight,
                windows,
                fresh_after_us,
                prune,
            )
            .await
    }

    /// The other writers' rate limit counts of `windows` (key, window start), read only.
    pub async fn rate_counts(
        &self,
        writer: &str,
        windows: Vec<(String, i64)>,
    ) -> Result<std::collections::HashMap<(String, i64), u64>> {
        self.0.rate_counts(writer.to_string(), windows).await
    }

    /// Claims an idempotency key for a call (keys older than `not_before_us` are free again).
    pub async fn claim_idempotency(
        &self,
        agent: &str,
        tool: &str,
        key: &str,
        arguments_digest: &str,
        call_id: &str,
        not_before_us: i64,
    ) -> Result<IdempotencyClaim> {
        self.0
            .claim_idempotency(
                agent.to_string(),
                tool.to_string(),
                key.to_string(),
                arguments_digest.to_string(),
                call_id.to_string(),
                not_before_us,
            )
            .await
    }

    /// Records the result under a key (or frees the key: the call did not run).
    pub async fn settle_idempotency(
        &self,
        agent: &str,
        tool: &str,
        key: &str,
        call_id: &str,
        result: Option<String>,
    ) -> Result<()> {
        self.0
            .settle_idempotency(
                agent.to_string(),
                tool.to_string(),
                key.to_string(),
                call_id.to_string(),
                result,
            )
            .await
    }

    /// Forgets keys older than `before_us`.
    pub async fn prune_idempotency(&self, before_us: i64) -> Result<usize> {
        self.0.prune_idempotency(before_us).await
    }

    /// The newest documents of a kind (say, agents' progress reports), across scopes.
    pub async fn documents_of_kind(&self, kind: &str, limit: usize) -> Result<Vec<Document>> {
        self.0.documents_of_kind(kind.to_string(), limit).await
    }

    /// Every seal on record (without pins).
    pub async fn seals(&self) -> Result<Vec<SealRecord>> {
        self.0.seals().await
    }

    /// The pins of one sealed root.
    pub async fn seal_pins(&self, root: &str) -> Result<Vec<SealPin>> {
        self.0.seal_pins(root).await
    }

    /// Applies an operator's change to one registry row (recorded in its history with who and
    /// why); returns the row after it. A change that cannot apply is a clear `Invalid` error
    /// and changes nothing.
    /// `audit`, if given, is appended to the audit chain in the same transaction: the change
    /// and its record commit together or not at all.
    pub async fn registry_change(
        &self,
        change: RegistryChange,
        audit: Option<AuditEvent>,
    ) -> Result<RegistryRow> {
        self.0.registry_change(change, audit).await
    }

    /// The registry's changes, oldest first; one tool's with `name`.
    pub async fn registry_history(&self, name: Option<String>) -> Result<Vec<RegistryHistoryRow>> {
        self.0.registry_history(name).await
    }

    /// Records the definitions of tools that are not approved from source (upstream tools):
    /// a new name starts `unapproved`; a known one has its seen definition updated (its
    /// approval, if any, still binds the old digest, so a changed tool is held back).
    pub async fn record_seen(&self, seen: Vec<BuiltinDefinition>, origin: &str) -> Result<()> {
        self.0.record_seen(seen, origin.to_string()).await
    }

    pub async fn revisions(&self) -> Result<Revisions> {
        self.0.revisions().await
    }

    /// Records a call as waiting for a person, unless Aether is halted (then nothing is
    /// written and the halt is returned).
    pub async fn request_approval(&self, request: ApprovalRequest) -> Result<Option<HaltState>> {
        self.0.request_approval(request).await
    }

    /// Moves a pending approval to `to` (see the SQLite backend for the rules); `audit`, if
    /// given, is appended to the audit chain in the same transaction, and only when the
    /// request moved.
    pub async fn settle_approval(
        &self,
        id: &str,
        to: ApprovalState,
        by: &str,
        why: &str,
        audit: Option<AuditEvent>,
    ) -> Result<ApprovalRow> {
        self.0
            .settle_approval(id.to_string(), to, by.to_string(), why.to_string(), audit)
            .await
    }

    pub async fn approval(&self, id: &str) -> Result<Option<ApprovalRow>> {
        self.0.approval(id.to_string()).await
    }

    pub async fn approvals(&self, pending: bool, limit: usize) -> Result<Vec<ApprovalRow>> {
        self.0.approvals(pending, limit).await
    }

    pub async fn expire_approvals(&self, now_us: i64) -> Result<usize> {
        self.0.expire_approvals(now_us).await
    }

    /// Records a token by the SHA-256 (hex) of its secret (and `audit` with it).
    pub async fn create_token(
        &self,
        row: TokenRow,
        hash: String,
        audit: Option<AuditEvent>,
    ) -> Result<TokenRow> {
        self.0.create_token(row, hash, audit).await
    }

    pub async fn revoke_token(
        &self,
        id: &str,
        by: &str,
        audit: Option<AuditEvent>,
    ) -> Result<TokenRow> {
        self.0
            .revoke_token(id.to_string(), by.to_string(), audit)
            .await
    }

    /// Every token and the hash of its secret.
    pub async fn tokens(&self) -> Result<Vec<(TokenRow, String)>> {
        self.0.tokens().await
    }

    /// Records the built-in tools as approved from source: new ones and changed definitions
    /// are approved with their shipped digest; one an operator withdrew stays withdrawn.
    /// Returns the names whose row changed.
    pub async fn sync_builtins(&self, builtins: Vec<BuiltinDefinition>) -> Result<Vec<String>> {
        self.0.sync_builtins(builtins).await
    }
}

/// A store URL fit to show: any password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    db::postgres::redact(url)
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "sqlite://{}", path.display()),
            Location::Postgres(shown) => f.write_str(shown),
        }
    }
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A time in microseconds since the epoch as RFC 3339 (UTC, to the second).
pub fn time_text(at_us: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at_us / 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{at_us} µs"))
}

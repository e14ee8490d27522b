//! Federation's records: upstream status, the vault's ciphertexts, data sets and saved reports.

use serde::Serialize;

/// How an upstream MCP server was last seen by the process serving it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    /// "stdio" or "http".
    pub transport: String,
    pub connected: bool,
    pub last_error: Option<String>,
    pub tool_count: i64,
    /// sha256 over the digests of its tools' definitions, in name order.
    pub fingerprint: String,
    /// Its tools, resources and prompts as listed (JSON).
    pub listing: String,
    pub updated_us: i64,
}

/// A credential as the store holds it: encrypted, never a plaintext.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSecret {
    pub name: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
    pub updated_us: i64,
}

/// A table an upstream tool returned, kept for export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dataset {
    pub call_id: String,
    pub at_us: i64,
    pub agent: String,
    pub tool: String,
    /// The call's arguments (JSON), so a report can run it again.
    pub arguments: String,
    pub columns: Vec<String>,
    /// The rows kept (JSON objects), at most [`crate::DATASET_ROWS`].
    pub rows: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Rows the tool returned beyond those kept.
    pub dropped: i64,
}

/// A data set without its rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DatasetSummary {
    pub call_id: String,
    pub at_us: i64,
    pub agent: String,
    pub tool: String,
    pub columns: Vec<String>,
    pub row_count: i64,
    pub dropped: i64,
}

/// The most rows a data set keeps.
pub const DATASET_ROWS: usize = 5_000;

/// A saved report: a stored call to run again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub name: String,
    pub tool: String,
    /// JSON.
    pub arguments: String,
    /// The agent it runs as (its catalog, rules and tiers apply).
    pub agent: String,
    pub saved_by: String,
    pub at_us: i64,
    /// The call id of its last run, whose data set holds its latest rows.
    pub last_call: Option<String>,
}

/// A console account as stored (the password only as its argon2id hash).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Account {
    pub name: String,
    #[serde(skip)]
    pub password_hash: String,
    pub role: String,
    pub created_us: i64,
    pub created_by: String,
    pub changed_us: i64,
}

/// A signed-in console session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConsoleSession {
    pub account: String,
    /// The SHA-256 of the session's second secret (sent by the page as a header).
    #[serde(skip)]
    pub key_hash: String,
    pub created_us: i64,
    pub expires_us: i64,
}

/// What an idempotency key is, for a call that names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// New: this call holds it now.
    Claimed,
    /// A call with this key and these arguments ended: its result (JSON).
    Done { call_id: String, result: String },
    /// A call with this key is still running.
    Running { call_id: String },
    /// The key was used for other arguments.
    OtherArguments { call_id: String },
}

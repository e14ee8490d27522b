//! Agent runs: a model loop under one agent's identity, and its transcript.

use serde::Serialize;

/// A run as it begins.
#[derive(Clone, Debug)]
pub struct RunStart {
    pub id: String,
    /// The run that started this one (`delegate`, `spawn_subagents`), if any.
    pub parent: Option<String>,
    pub agent: String,
    /// The model connection's name.
    pub model: String,
    pub task: String,
    /// How long the run counts as alive without word from its process (see
    /// [`crate::Store::run_alive`]).
    pub lease_ms: i64,
}

/// A run as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    pub id: String,
    pub parent: Option<String>,
    pub agent: String,
    pub model: String,
    pub task: String,
    /// `running`, `done`, `failed`, `stopped`, `halted`, `cost_cap`; `interrupted` for a run
    /// whose process ended without recording its end (its lease lapsed).
    pub status: String,
    pub started_us: i64,
    pub ended_us: Option<i64>,
    pub rounds: i64,
    /// Tokens as the model server counted them.
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// The final answer.
    pub answer: Option<String>,
    /// Why the run did not end with an answer.
    pub error: Option<String>,
    /// Who asked the run to stop, and why.
    pub stop_by: Option<String>,
    pub stop_why: Option<String>,
    /// When its process last vouched for it (µs), while it runs.
    pub alive_us: Option<i64>,
}

/// One entry of a run's transcript: a request to the model, its reply, a tool call, its
/// result (`kind`), as JSON (`body`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunEvent {
    pub seq: i64,
    pub at_us: i64,
    pub kind: String,
    pub body: String,
}

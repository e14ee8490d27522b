//! The agent runner: an OpenAI-compatible model loop over one agent's governed catalog.
//!
//! A run sends the task and the agent's catalog (the same view `tools/list` gives that agent,
//! as function schemas) to a model connection, and hands every tool call the model makes to
//! the pipeline under the agent's identity: admitted, receipted and audited exactly like an
//! MCP client's call. Before every model request and every tool call it checks the stop
//! flag, the emergency halt and the run's cost cap; arguments that are not a JSON object, a
//! reply cut off at the output limit, and tool-call markup that cannot be read run nothing,
//! and the model is told so. After the round limit, one last request without tools asks for
//! the final words. Runs and their transcripts are kept in the store.

pub mod dsml;
pub mod host;
pub mod model;
pub mod orchestration;
pub mod review;
pub mod run;

pub use host::{Budget, Host, Models};
pub use model::{Ask, ModelClient, ModelError, Reply, ToolCall, Usage};
pub use run::{RunOutcome, RunRequest, Runner, Status};

//! Aether's built-in tools: the workspace (files, under the roots' confinement), commands
//! and shells (`shell`), the calculator, planning, comms and knowledge tools, and the
//! conformance suite's fixtures.
//!
//! The interface they implement — [`Tool`], [`CallContext`], [`ClientLink`], [`Ledger`],
//! [`Roots`] — is `aether-tools-core`'s, re-exported here. This crate knows files and
//! processes. It knows nothing of MCP, HTTP or SQL.

pub mod calc;
pub mod comms;
pub mod fixtures;
pub mod knowledge;
pub mod planning;
pub mod shell;
pub mod workspace;

use std::sync::Arc;

pub use aether_tools_core::*;

/// Every built-in tool this build ships, in catalog order.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    let mut tools = workspace::tools();
    tools.extend(shell::tools());
    tools.push(Arc::new(workspace::CheckFinishing::new()));
    tools.push(Arc::new(workspace::RecordStyle::new()));
    tools.push(Arc::new(workspace::TtsRender::new()));
    tools.push(Arc::new(workspace::TtsStatus::new()));
    tools.push(Arc::new(calc::Calculate::new()));
    tools.extend(planning::tools());
    tools.extend(comms::tools());
    tools.extend(knowledge::tools());
    tools
}

//! The `shell` group: running programs. `run_command` runs an allowlisted executable with its
//! argv (no shell), confined to a root's folder, with a fixed environment, a time limit and
//! its whole process tree killed when it ends (`tree.rs`).

mod run_command;
mod tree;

use std::sync::Arc;

use crate::Tool;

pub use run_command::RunCommand;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(RunCommand::new())]
}

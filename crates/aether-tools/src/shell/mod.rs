//! The `shell` group: running programs and reading logs. `run_command` runs an allowlisted
//! executable with its argv (no shell), confined to a root's folder, with a fixed environment,
//! a time limit and its whole process tree killed when it ends (`tree.rs`); `read_logs` reads
//! the tail of a log file under a root, or of the journal.

mod read_logs;
mod run_command;
mod tree;

use std::sync::Arc;

use crate::Tool;

pub use read_logs::ReadLogs;
pub use run_command::RunCommand;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(RunCommand::new()), Arc::new(ReadLogs::new())]
}

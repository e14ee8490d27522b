//! The `shell` group: running programs and reading logs. `run_command` runs an allowlisted
//! executable with its argv (no shell), confined to a root's folder; `run_shell` runs shell
//! text inside a bubblewrap sandbox (`sandbox.rs`) that sees only the roots, with credentials
//! hidden. Both log every command before it starts and run it with a fixed environment, a time
//! limit and its whole process tree killed when it ends (`process.rs`, `tree.rs`). `read_logs`
//! reads the tail of a log file under a root, or of the journal. The quality tools
//! (`quality.rs`: `run_tests`, `analyze_code`) run their commands through `run_shell`.

mod guard;
mod process;
mod quality;
mod read_logs;
mod run_command;
mod run_shell;
mod sandbox;
mod tree;

use std::sync::Arc;

use crate::Tool;

pub use guard::{ControlGuard, set_aside_beneath};
pub(crate) use process::Home;
pub use quality::{AnalyzeCode, RunTests};
pub use read_logs::ReadLogs;
pub use run_command::RunCommand;
pub use run_shell::RunShell;
pub use sandbox::{
    ControlWatch, SET_ASIDE, Sandbox, control_files_in, covered_or_allowed, hiding, secrets_in,
};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    // One sandbox (and so one probe of it) for every tool that runs in it, `run_command`'s
    // too; probed from now, on a thread of its own, so the first listing seldom waits.
    let sandbox = Sandbox::shared().clone();
    sandbox.start_probe();
    vec![
        Arc::new(RunCommand::new()),
        Arc::new(RunShell::new(sandbox.clone())),
        Arc::new(ReadLogs::new()),
        Arc::new(RunTests::new(sandbox.clone())),
        Arc::new(AnalyzeCode::new(sandbox)),
    ]
}

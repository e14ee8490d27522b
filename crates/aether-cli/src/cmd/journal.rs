//! `aether journal list` and `aether undo CALL_ID`: what agents changed, and putting it back.

use std::process::ExitCode;

use aether_pipeline::CallOutcome;
use aether_store::JournalQuery;
use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// File changes, newest first.
    List(ListArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    /// Roots as `mcp-serve` takes them (only to find the store the same way).
    #[arg(long = "root")]
    roots: Vec<String>,
    /// Only this session's changes.
    #[arg(long)]
    session: Option<String>,
    /// Only this call's changes.
    #[arg(long)]
    call: Option<String>,
    /// Only changes to this path (root-relative).
    #[arg(long)]
    path: Option<String>,
    /// At most this many entries.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    let Command::List(args) = command;
    let loaded = setup::load(&args.common)?;
    let specs = setup::roots(&args.roots, &loaded, true)?;
    let (store, _) = setup::store_for_roots(&args.common, &loaded, &specs)?;
    let entries = store
        .journal_entries(JournalQuery {
            session: args.session,
            call_id: args.call,
            path: args.path,
            limit: args.limit,
            ..Default::default()
        })
        .await?;
    if args.json {
        crate::json_lines(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        say!("The journal is empty for this selection.");
    }
    let lines: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let target = match &e.dest {
                Some(dest) => format!("{}:{} -> {dest}", e.root, e.path),
                None => format!("{}:{}", e.root, e.path),
            };
            let state = match (&e.reverted_by, e.undoes) {
                (Some(by), _) => format!("undone by {by}"),
                (None, Some(id)) => format!("undoes #{id}"),
                _ => String::new(),
            };
            vec![
                format!("#{}", e.id),
                crate::cmd::audit::time_of(e.at_us),
                e.op.as_str().to_string(),
                target,
                format!(
                    "call {} ({} {}, session {})",
                    e.call_id, e.agent, e.tool, e.session
                ),
                state,
            ]
        })
        .collect();
    crate::columns::Columns::default().print(&lines);
    Ok(ExitCode::SUCCESS)
}

#[derive(ClapArgs, Debug)]
pub struct UndoArgs {
    /// The call whose file changes to undo (from `aether journal list` or the audit).
    call_id: String,
    /// Only the call's changes to this file, as ROOT:PATH (e.g. ws:src/main.rs); the rest of
    /// the call stays.
    #[arg(long, value_name = "ROOT:PATH")]
    file: Option<String>,
    #[command(flatten)]
    common: Common,
    /// Roots as `mcp-serve` takes them; default: aether.toml's, or the current folder.
    #[arg(long = "root")]
    roots: Vec<String>,
}

pub async fn undo(args: UndoArgs) -> Result<ExitCode> {
    let file = match &args.file {
        Some(f) => match f.split_once(':') {
            Some((root, path)) if !root.is_empty() && !path.is_empty() => Some((root, path)),
            _ => bail!(
                "--file takes ROOT:PATH (e.g. ws:src/main.rs), as aether journal list shows it; got {f:?}"
            ),
        },
        None => None,
    };
    let loaded = setup::load(&args.common)?;
    let specs = setup::roots(&args.roots, &loaded, true)?;
    let (store, _) = setup::store_for_roots(&args.common, &loaded, &specs)?;
    let pipeline = setup::pipeline(&loaded, &specs, store, false, Vec::new()).await?;
    let result = pipeline
        .operator_undo(&setup::operator(), &args.call_id, file)
        .await;
    // Its call ended: this process is marked stopped, so no later start takes it for crashed.
    aether_pipeline::Books::new(&pipeline, None)
        .close(true)
        .await;
    match result.outcome {
        CallOutcome::Ran(output) if !output.is_error => {
            for c in output.content {
                if let aether_tools::Content::Text(t) = c {
                    say!("{t}");
                }
            }
            say!(
                "(the undo is call {}; `aether undo {}` re-applies the change)",
                result.call_id,
                result.call_id
            );
            Ok(ExitCode::SUCCESS)
        }
        CallOutcome::Ran(output) => {
            let text: Vec<String> = output
                .content
                .into_iter()
                .filter_map(|c| match c {
                    aether_tools::Content::Text(t) => Some(t),
                    _ => None,
                })
                .collect();
            bail!("{}", text.join("\n"))
        }
        other => bail!("the undo did not run: {other:?}"),
    }
}

//! `aether commands`: the command log — every command `run_command` and `run_shell` ran.

use std::process::ExitCode;

use aether_store::CommandQuery;
use anyhow::Result;
use clap::Args as ClapArgs;

use crate::setup::{self, Common};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Roots as `mcp-serve` takes them (only to find the store the same way).
    #[arg(long = "root")]
    roots: Vec<String>,
    /// Only this agent's commands.
    #[arg(long)]
    agent: Option<String>,
    /// Only this call's command.
    #[arg(long)]
    call: Option<String>,
    /// At most this many, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let specs = setup::roots(&args.roots, &loaded, true)?;
    let (store, _) = setup::store_for_roots(&args.common, &loaded, &specs)?;
    let rows = store
        .commands(CommandQuery {
            agent: args.agent,
            call_id: args.call,
            limit: args.limit,
        })
        .await?;
    if args.json {
        crate::json_lines(&rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        say!("The command log is empty for this selection.");
    }
    for r in rows {
        let ended = match &r.end {
            None => "did not end (running, or Aether stopped)".to_string(),
            Some(e) if e.timed_out => "killed at its time limit".to_string(),
            Some(e) => match e.exit_code {
                Some(code) => format!("exit {code}"),
                None => "ended by a signal".to_string(),
            },
        };
        let s = &r.start;
        say!(
            "#{:<6} {}  {} {} ({}, {}) in {}:{}  [{ended}]\n        {}",
            r.id,
            crate::cmd::audit::time_of(s.at_us),
            s.agent,
            s.tool,
            s.sandbox,
            s.call_id,
            s.root,
            if s.cwd.is_empty() { "." } else { &s.cwd },
            s.command.replace('\n', "\n        ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

//! `aether approvals list|approve|deny`: calls waiting for a person. Only an operator decides:
//! this command (on the store the server shares) or the admin API with an operator token.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::cmd::audit::time_of;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Calls waiting for a decision, newest first (with --all, decided ones too).
    List(ListArgs),
    /// Let a waiting call run.
    Approve(DecideArgs),
    /// Refuse a waiting call.
    Deny(DecideArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    /// Decided, expired and cancelled requests too.
    #[arg(long)]
    all: bool,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct DecideArgs {
    #[command(flatten)]
    common: Common,
    /// The call id (from `list`).
    id: String,
    /// Why (recorded with the decision and in the audit).
    #[arg(long)]
    why: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => {
            let store = setup::existing_store(&args.common)?;
            // Requests whose window closed while no server was watching are expired first.
            store.expire_approvals(aether_store::now_us()).await?;
            let rows = store.approvals(!args.all, 500).await?;
            if args.json {
                crate::json_lines(&rows)?;
                return Ok(ExitCode::SUCCESS);
            }
            if rows.is_empty() {
                say!(
                    "{}",
                    if args.all {
                        "No call has asked for approval yet."
                    } else {
                        "No call is waiting for approval."
                    }
                );
            }
            let now = aether_store::now_us();
            for row in rows {
                let r = &row.request;
                let status = match row.state {
                    aether_store::ApprovalState::Pending => format!(
                        "pending, {} s left",
                        (r.expires_at_us - now).max(0) / 1_000_000
                    ),
                    other => format!(
                        "{} by {}: {}",
                        other.as_str(),
                        row.decided_by.as_deref().unwrap_or("?"),
                        row.why.as_deref().unwrap_or("")
                    ),
                };
                say!("{}  {}", r.id, status);
                say!(
                    "    {} asked {} by agent {} ({}; {})",
                    time_of(r.requested_at_us),
                    r.tool,
                    r.agent,
                    r.asked_by,
                    r.reason.as_deref().unwrap_or("no reason given")
                );
                // Whole with --json; here a head, marked when cut.
                say!(
                    "    arguments: {}",
                    aether_policy::truncate::bound_text(&r.arguments, 2_000)
                );
            }
        }
        Command::Approve(args) => decide(args, true).await?,
        Command::Deny(args) => decide(args, false).await?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn decide(args: DecideArgs, approve: bool) -> Result<()> {
    if args.why.trim().is_empty() {
        bail!("--why must say why");
    }
    let store = setup::existing_store(&args.common)?;
    let row =
        aether_pipeline::operator::decide(&store, &args.id, approve, &setup::operator(), &args.why)
            .await?;
    say!(
        "{} {} for agent {}: {}.",
        row.request.tool,
        row.state.as_str(),
        row.request.agent,
        if approve {
            "it runs now"
        } else {
            "it will not run"
        }
    );
    Ok(())
}

//! `aether audit tail` and `aether audit verify`.

use std::process::ExitCode;

use aether_store::{AuditQuery, AuditRecord};
use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The newest audit rows, oldest of them first.
    Tail(TailArgs),
    /// Walk the whole hash chain; exit 1 if any row was edited, removed or inserted.
    Verify(VerifyArgs),
}

#[derive(ClapArgs, Debug)]
pub struct TailArgs {
    #[command(flatten)]
    common: Common,
    /// How many rows.
    #[arg(short = 'n', long, default_value_t = 20)]
    lines: usize,
    /// Only this agent's rows.
    #[arg(long)]
    agent: Option<String>,
    /// Only this tool's rows.
    #[arg(long)]
    tool: Option<String>,
    /// Only rows with this outcome (ok, tool_error, refused, cancelled, timed_out, panicked, failed).
    #[arg(long)]
    outcome: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    common: Common,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Tail(args) => tail(args).await,
        Command::Verify(args) => verify(args).await,
    }
}

async fn tail(args: TailArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let store = setup::open_store(&setup::store_url(&args.common, &loaded, &loaded.base))?;
    let mut rows = store
        .audit_query(AuditQuery {
            agent: args.agent,
            tool: args.tool,
            outcome: args.outcome,
            limit: args.lines.max(1),
            newest_first: true,
            ..Default::default()
        })
        .await?;
    rows.reverse();
    for row in &rows {
        if args.json {
            println!("{}", serde_json::to_string(row)?);
        } else {
            println!("{}", line(row));
        }
    }
    if rows.is_empty() && !args.json {
        println!("(no audit rows yet)");
    }
    Ok(ExitCode::SUCCESS)
}

fn line(r: &AuditRecord) -> String {
    let e = &r.event;
    let at = OffsetDateTime::from_unix_timestamp_nanos(e.at_us as i128 * 1000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default();
    let mut s = format!(
        "{:>6}  {at}  {:<10} {:<20} {:<10}",
        r.seq, e.agent, e.tool, e.outcome
    );
    if let Some(step) = &e.step {
        s.push_str(&format!(" [{step}]"));
    }
    if let Some(reason) = &e.reason {
        let reason: String = reason.chars().take(120).collect();
        s.push_str(&format!(" {reason}"));
    }
    s.push_str(&format!("  ({} µs, call {})", e.duration_us, e.call_id));
    s
}

async fn verify(args: VerifyArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    let store = setup::open_store(&url)?;
    let report = store.verify_audit().await?;
    if report.is_intact() {
        match (report.first_seq, report.last_seq) {
            (Some(a), Some(b)) => println!(
                "audit chain intact: {} rows, {a}..{b}, head {}",
                report.rows, report.head
            ),
            _ => println!("audit chain intact: no rows yet"),
        }
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "audit chain BROKEN ({url}): {} problem(s) in {} rows",
            report.breaks.len(),
            report.rows
        );
        for b in &report.breaks {
            println!("  row {}: {}", b.seq, b.problem);
        }
        Ok(ExitCode::from(1))
    }
}

//! `aether registry list|show|approve|withdraw|undo|history`: which tool definitions may be
//! offered and run, every change recorded with who and why (and audited).

use std::process::ExitCode;

use aether_store::{RegistryAction, RegistryChange, RegistryRow};
use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::cmd::audit::time_of as when;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every tool the registry knows, its state, and whether its definition changed since it
    /// was approved.
    List(ListArgs),
    /// One tool: state, who changed it last and why, the definition, and the diff of a
    /// changed definition against the approved one.
    Show(NameArgs),
    /// Approve the definition the registry last saw (pass --digest to approve only the one you
    /// reviewed).
    Approve(ApproveArgs),
    /// Withdraw a tool: neither offered nor runnable until approved again or undone.
    Withdraw(ChangeArgs),
    /// Undo the newest change of a tool that is not already undone.
    Undo(ChangeArgs),
    /// The changes, oldest first (one tool's with NAME).
    History(HistoryArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct NameArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct ChangeArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    /// Why (recorded with the change).
    #[arg(long)]
    why: String,
}

#[derive(ClapArgs, Debug)]
pub struct ApproveArgs {
    #[command(flatten)]
    change: ChangeArgs,
    /// The definition digest you reviewed (from `show`); refused if the tool changed since.
    #[arg(long)]
    digest: Option<String>,
}

#[derive(ClapArgs, Debug)]
pub struct HistoryArgs {
    #[command(flatten)]
    common: Common,
    name: Option<String>,
    #[arg(long)]
    json: bool,
}

fn store(common: &Common) -> Result<aether_store::Store> {
    setup::existing_store(common)
}

/// `approved`, or `approved (definition changed: held back)` when the seen definition is not
/// the approved one.
fn state_of(row: &RegistryRow) -> String {
    let changed = row.state == aether_policy::RegistryState::Approved
        && row.seen_digest != row.approved_digest;
    if changed {
        "approved, but the definition changed since: held back".into()
    } else {
        row.state.as_str().to_string()
    }
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => {
            let rows = store(&args.common)?.registry().await?;
            if args.json {
                crate::json_lines(&rows)?;
                return Ok(ExitCode::SUCCESS);
            }
            if rows.is_empty() {
                say!("The registry is empty: no server has listed its tools into this store yet.");
            }
            let screen = aether_pipeline::screening::screen_for(&rows);
            let lines: Vec<Vec<String>> = rows
                .iter()
                .map(|row| {
                    let found = aether_pipeline::screening::screen_row(&screen, row)
                        .findings
                        .len();
                    vec![
                        row.name.clone(),
                        row.origin.clone(),
                        state_of(row),
                        format!("{} by {}", when(row.updated_at_us), row.updated_by),
                        if found > 0 {
                            format!(
                                "[{found} screen finding(s): aether registry show {}]",
                                row.name
                            )
                        } else {
                            String::new()
                        },
                    ]
                })
                .collect();
            crate::columns::Columns::default().print(&lines);
        }
        Command::Show(args) => {
            let rows = store(&args.common)?.registry().await?;
            let Some(row) = rows.iter().find(|r| r.name == args.name).cloned() else {
                bail!(
                    "the registry has no tool named {:?} (`aether registry list` shows them)",
                    args.name
                );
            };
            let screened = aether_pipeline::screening::screen_row(
                &aether_pipeline::screening::screen_for(&rows),
                &row,
            );
            if args.json {
                let mut v = serde_json::to_value(&row)?;
                v["findings"] = serde_json::to_value(&screened.findings)?;
                v["new_findings"] = serde_json::to_value(&screened.new_since_approval)?;
                crate::json_line(&v)?;
                return Ok(ExitCode::SUCCESS);
            }
            show(&row);
            if !screened.findings.is_empty() {
                say!("\nThe definition screen found (review before approving):");
                print_findings(&screened, "  ");
            }
        }
        Command::Approve(args) => {
            let c = args.change;
            change(
                &c,
                RegistryAction::Approve {
                    digest: args.digest,
                },
            )
            .await?;
        }
        Command::Withdraw(c) => change(&c, RegistryAction::Withdraw).await?,
        Command::Undo(c) => change(&c, RegistryAction::Undo).await?,
        Command::History(args) => {
            let rows = store(&args.common)?.registry_history(args.name).await?;
            if args.json {
                crate::json_lines(&rows)?;
                return Ok(ExitCode::SUCCESS);
            }
            let lines: Vec<Vec<String>> = rows
                .into_iter()
                .map(|h| {
                    let undoes = h
                        .undoes
                        .map(|u| format!(" (undoes #{u})"))
                        .unwrap_or_default();
                    vec![
                        format!("#{}", h.id),
                        when(h.at_us),
                        h.name,
                        format!(
                            "{} -> {}{undoes}",
                            h.from_state.as_deref().unwrap_or("(new)"),
                            h.to_state
                        ),
                        format!("by {}: {}", h.by, h.why),
                    ]
                })
                .collect();
            crate::columns::Columns::default().print(&lines);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn change(c: &ChangeArgs, action: RegistryAction) -> Result<()> {
    if c.why.trim().is_empty() {
        bail!("--why must say why");
    }
    let store = store(&c.common)?;
    let screen = setup::load(&c.common)?.raw.registry.screen;
    let row = aether_pipeline::operator::change_registry(
        &store,
        RegistryChange {
            name: c.name.clone(),
            action,
            by: setup::operator(),
            why: c.why.clone(),
        },
        screen,
    )
    .await?;
    say!(
        "{} is now {} (approved definition: {}). Running servers apply it within a second.",
        row.name,
        state_of(&row),
        row.approved_digest.as_deref().unwrap_or("none")
    );
    Ok(())
}

/// The definition screen's findings, one a line (with why each matters), those new since the
/// approved definition marked `new`.
pub fn print_findings(screened: &aether_pipeline::screening::Screened, indent: &str) {
    for f in &screened.findings {
        let new = screened
            .new_since_approval
            .iter()
            .any(|n| n.key() == f.key());
        say!(
            "{indent}{}{} at {}: {} — {}",
            if new { "new " } else { "" },
            f.rule.as_str(),
            f.place,
            f.excerpt,
            f.rule.explain()
        );
    }
}

fn show(row: &RegistryRow) {
    say!("tool:                {}", row.name);
    say!("origin:              {}", row.origin);
    say!("state:               {}", state_of(row));
    say!(
        "last change:         {} by {}: {}",
        when(row.updated_at_us),
        row.updated_by,
        row.why
    );
    say!(
        "approved definition: {}",
        row.approved_digest.as_deref().unwrap_or("none")
    );
    say!(
        "seen definition:     {}",
        row.seen_digest.as_deref().unwrap_or("none")
    );
    let pretty = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or_else(|_| text.to_string())
    };
    let seen = pretty(&row.definition);
    match row.approved_definition.as_deref().map(pretty) {
        Some(approved) if approved != seen => {
            say!("\nThe definition changed since it was approved (- approved, + seen now):");
            let diff = similar::TextDiff::from_lines(&approved, &seen);
            say_inline!(
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header("approved", "seen")
            );
        }
        _ => say!("\n{seen}"),
    }
}

//! `aether policy check [FILE]` and `aether policy replay NEW.yaml --since 24h`: read a rules
//! file the way the server does, and test a new one against what agents actually did before
//! it bites.

use std::process::ExitCode;

use aether_policy::rules::RuleSet;
use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;

use crate::cmd::audit::time_of;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse and check a rules file (default: the one the configuration names); exit 1 with
    /// every problem and where it is.
    Check(CheckArgs),
    /// Replay the audited calls of a recent window against NEW.yaml and print every decision
    /// that would differ from the rules in force.
    Replay(ReplayArgs),
}

#[derive(ClapArgs, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    common: Common,
    file: Option<std::path::PathBuf>,
}

#[derive(ClapArgs, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    common: Common,
    /// The draft rules file.
    file: std::path::PathBuf,
    /// How far back: e.g. 30m, 24h, 7d.
    #[arg(long, default_value = "24h")]
    since: String,
    #[arg(long)]
    json: bool,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Check(args) => check(args),
        Command::Replay(args) => replay(args).await,
    }
}

fn check(args: CheckArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let path = match args.file {
        Some(p) => p,
        None => setup::rules_path(&loaded).0,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            say!(
                "{}: no rules file; every call is decided by its tier.",
                path.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => bail!("cannot read {}: {e}", path.display()),
    };
    let rules = match RuleSet::parse(&text) {
        Ok(rules) => rules,
        Err(e) => {
            tell!("{}: {e}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    say!("{}: {} rule(s), all valid.", path.display(), rules.len());
    for r in rules.rules() {
        say!(
            "  {:>3}. {:<28} {:<12} {}{}",
            r.position,
            r.name,
            r.action.as_str(),
            r.matches,
            r.reason.map(|w| format!(" — {w}")).unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let draft = RuleSet::parse(&text).with_context(|| format!("in {}", args.file.display()))?;
    let current = setup::rules(&loaded)?.current();
    let since = aether_store::now_us() - setup::age_us("--since", &args.since)?;
    let store = setup::open_existing_store(
        &setup::store_url(&args.common, &loaded, &loaded.base),
        &loaded,
    )?;
    let roots: Vec<(String, String)> = setup::configured_roots(&loaded)
        .into_iter()
        .map(|r| (r.name, r.path))
        .collect();
    let agents = loaded.raw.agent_profiles();
    let report =
        aether_pipeline::replay::replay(&store, &current, &draft, since, &roots, &agents).await?;
    let (calls, incomplete, changed) = (report.calls, report.incomplete, report.changed.len());
    for c in &report.changed {
        if !args.json {
            say!(
                "{} {} {} {} (was {}): {} -> {}{}",
                time_of(c.at_us),
                c.call_id,
                c.agent,
                c.tool,
                c.outcome,
                c.before,
                c.after,
                if c.arguments_complete {
                    ""
                } else {
                    " [arguments cut in the audit]"
                }
            );
        }
    }
    let report: Vec<Value> = report
        .changed
        .iter()
        .map(|c| {
            serde_json::json!({
                "seq": c.seq, "call_id": c.call_id, "at": time_of(c.at_us), "agent": c.agent,
                "tool": c.tool, "outcome": c.outcome, "before": c.before, "after": c.after,
                "arguments_complete": c.arguments_complete,
            })
        })
        .collect();
    if calls == 0 {
        bail!(
            "no audited calls in the last {} (store {}); nothing to replay",
            args.since,
            setup::store_url(&args.common, &loaded, &loaded.base)
        );
    }
    if args.json {
        crate::json_line(&report)?;
    }
    tell!(
        "Replayed {calls} call(s) from the last {}: {changed} decision(s) would change.{}",
        args.since,
        if incomplete > 0 {
            format!(
                " {incomplete} call(s) had their arguments cut in the audit (Standard tools keep a summary), so rules on arguments, paths and hosts could not see them."
            )
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

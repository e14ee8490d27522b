//! `aether policy check [FILE]` and `aether policy replay NEW.yaml --since 24h`: read a rules
//! file the way the server does, and test a new one against what agents actually did before
//! it bites.

use std::process::ExitCode;

use aether_policy::rules::{CallFacts, RuleSet, Verdict};
use aether_store::{AuditQuery, AuditRecord};
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
            println!(
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
            eprintln!("{}: {e}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    println!("{}: {} rule(s), all valid.", path.display(), rules.len());
    for r in rules.rules() {
        println!(
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

/// A window such as `30m`, `24h`, `7d` in microseconds.
fn window(text: &str) -> Result<i64> {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: i64 = number
        .parse()
        .with_context(|| format!("--since {text:?}: a number and a unit, e.g. 30m, 24h, 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => bail!("--since {text:?}: the unit is s, m, h or d (e.g. 24h)"),
    };
    if n <= 0 || n > 3_650 * 86_400 / seconds {
        bail!("--since {text:?} must be positive and at most ten years");
    }
    Ok(n * seconds * 1_000_000)
}

fn describe(v: Option<Verdict<'_>>) -> String {
    match v {
        None => "no rule (the tier decides)".into(),
        Some(v) => format!("{} by rule {:?}", v.action.as_str(), v.rule),
    }
}

async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let draft = RuleSet::parse(&text).with_context(|| format!("in {}", args.file.display()))?;
    let current = setup::rules(&loaded)?.current();
    let since = aether_store::now_us() - window(&args.since)?;
    let store = setup::open_existing_store(&setup::store_url(&args.common, &loaded, &loaded.base))?;
    let roots = setup::configured_roots(&loaded);
    let agents = loaded.raw.agent_profiles();
    let mut after = None;
    let (mut calls, mut changed, mut incomplete) = (0usize, 0usize, 0usize);
    let mut report = Vec::new();
    loop {
        let rows = store
            .audit_query(AuditQuery {
                after,
                since_us: Some(since),
                limit: 5_000,
                ..Default::default()
            })
            .await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.seq);
        for row in &rows {
            if !replayable(row) {
                continue;
            }
            calls += 1;
            let e = &row.event;
            let arguments: Value = serde_json::from_str(&e.arguments).unwrap_or(Value::Null);
            if arguments.is_null() {
                incomplete += 1;
            }
            let paths = replay_paths(&arguments, &roots);
            let hosts = aether_policy::rules::url_hosts(&arguments);
            let team = e
                .team
                .clone()
                .or_else(|| agents.get(&e.agent).and_then(|a| a.team.clone()));
            let facts = CallFacts {
                tool: &e.tool,
                agent: &e.agent,
                team: team.as_deref(),
                arguments: &arguments,
                paths: &paths,
                // The files may have changed since; only what the call named is judged.
                dirs: &[],
                hosts: &hosts,
            };
            let (before, now) = (current.evaluate(&facts), draft.evaluate(&facts));
            let same = match (&before, &now) {
                (None, None) => true,
                (Some(a), Some(b)) => a.action == b.action && a.rule == b.rule,
                _ => false,
            };
            if same {
                continue;
            }
            changed += 1;
            if args.json {
                report.push(serde_json::json!({
                    "seq": row.seq, "call_id": e.call_id, "at": time_of(e.at_us), "agent": e.agent,
                    "tool": e.tool, "outcome": e.outcome, "before": describe(before), "after": describe(now),
                    "arguments_complete": !arguments.is_null(),
                }));
            } else {
                println!(
                    "{} {} {} {} (was {}): {} -> {}{}",
                    time_of(e.at_us),
                    e.call_id,
                    e.agent,
                    e.tool,
                    e.outcome,
                    describe(before),
                    describe(now),
                    if arguments.is_null() {
                        " [arguments cut in the audit]"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    if calls == 0 {
        bail!(
            "no audited calls in the last {} (store {}); nothing to replay",
            args.since,
            setup::store_url(&args.common, &loaded, &loaded.base)
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    }
    eprintln!(
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

/// Tool calls (not operator actions, not unknown tools) are what rules judge.
fn replayable(row: &AuditRecord) -> bool {
    let e = &row.event;
    e.transport != "operator"
        && e.definition.is_some()
        && e.step.as_deref() != Some("mcp-tool-not-implemented")
}

/// The paths of a replayed call, relative to their root (lexically: the files may have
/// changed since).
fn replay_paths(arguments: &Value, roots: &[aether_policy::paths::RootSpec]) -> Vec<String> {
    let (_, named) = aether_policy::rules::path_arguments(arguments);
    named
        .into_iter()
        .filter_map(|p| {
            if p.starts_with('/') {
                roots
                    .iter()
                    .find_map(|r| aether_policy::paths::strip_root(p, &r.path).map(str::to_string))
            } else {
                aether_policy::paths::clean_relative(p).ok()
            }
        })
        .collect()
}

//! `aether tokens create|list|revoke`: bearer tokens for HTTP callers (agents) and for the
//! admin API (operators). The store keeps only a hash; the token is printed once.

use std::process::ExitCode;

use aether_store::TokenKind;
use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::cmd::audit::time_of;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Make a token: for an agent (MCP over HTTP) or for an operator (the admin API).
    Create(CreateArgs),
    /// Every token (never the token itself).
    List(ListArgs),
    /// Revoke a token by its id; running servers refuse it within a second.
    Revoke(RevokeArgs),
}

#[derive(ClapArgs, Debug)]
#[group(required = true, multiple = false, id = "whom")]
pub struct CreateArgs {
    #[command(flatten)]
    common: Common,
    /// The agent (from aether.toml) whose calls this token makes.
    #[arg(long, group = "whom")]
    agent: Option<String>,
    /// The operator (a person's name) who uses the admin API with it.
    #[arg(long, group = "whom")]
    operator: Option<String>,
    /// What the token is for (shown by `list`).
    #[arg(long, default_value = "")]
    label: String,
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct RevokeArgs {
    #[command(flatten)]
    common: Common,
    id: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Create(args) => {
            let loaded = setup::load(&args.common)?;
            let (kind, subject) = match (&args.agent, &args.operator) {
                (Some(agent), None) => {
                    let agents = loaded.raw.agent_profiles();
                    if !agents.contains_key(agent) {
                        bail!(
                            "no agent is named {agent:?} in {}; configured agents: {}",
                            loaded.source,
                            agents.keys().cloned().collect::<Vec<_>>().join(", ")
                        );
                    }
                    (TokenKind::Agent, agent.clone())
                }
                (None, Some(operator)) => {
                    if operator.trim().is_empty() || operator.len() > 64 {
                        bail!("--operator must be a name of 1-64 characters");
                    }
                    (TokenKind::Operator, operator.clone())
                }
                _ => bail!("give exactly one of --agent NAME or --operator NAME"),
            };
            let store = setup::open_store(
                &setup::store_url(&args.common, &loaded, &loaded.base),
                &loaded,
            )?;
            let (row, token) = aether_pipeline::tokens::mint(
                &store,
                kind,
                &subject,
                &args.label,
                &setup::operator(),
            )
            .await?;
            tell!(
                "Token {} for {} {:?}. It is shown once; the store keeps only its hash.",
                row.id,
                kind.as_str(),
                subject
            );
            say!("{token}");
        }
        Command::List(args) => {
            let store = setup::existing_store(&args.common)?;
            let rows: Vec<_> = store
                .tokens()
                .await?
                .into_iter()
                .map(|(row, _)| row)
                .collect();
            if args.json {
                crate::json_lines(&rows)?;
                return Ok(ExitCode::SUCCESS);
            }
            if rows.is_empty() {
                say!("No tokens. `aether tokens create --agent NAME` makes one.");
            }
            let lines: Vec<Vec<String>> = rows
                .into_iter()
                .map(|t| {
                    let state = match t.revoked_at_us {
                        Some(at) => format!("revoked {}", time_of(at)),
                        None => "active".into(),
                    };
                    vec![
                        t.id,
                        t.kind.as_str().to_string(),
                        t.subject,
                        state,
                        format!("created {} by {}", time_of(t.created_at_us), t.created_by),
                        t.label,
                    ]
                })
                .collect();
            crate::columns::Columns::default().print(&lines);
        }
        Command::Revoke(args) => {
            let loaded = setup::load(&args.common)?;
            let store = setup::open_store(
                &setup::store_url(&args.common, &loaded, &loaded.base),
                &loaded,
            )?;
            let row = aether_pipeline::tokens::revoke(&store, &args.id, &setup::operator()).await?;
            say!(
                "Token {} ({} {:?}) is revoked.",
                row.id,
                row.kind.as_str(),
                row.subject
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `aether oauth grants|revoke`: what people let OAuth clients do through Aether's own
//! authorization server (`[auth] builtin`), and ending it — one grant, or everything a person
//! gave. Running servers refuse a revoked grant's tokens within a second.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;

use crate::cmd::audit::time_of;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The grants given, newest first: who, which client, which scopes, live or revoked.
    Grants(GrantsArgs),
    /// End a grant by its id, or every grant a person gave (`--account`).
    Revoke(RevokeArgs),
}

#[derive(ClapArgs, Debug)]
pub struct GrantsArgs {
    #[command(flatten)]
    common: Common,
    /// Only this console account's.
    #[arg(long)]
    account: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
#[group(required = true, multiple = false, id = "which")]
pub struct RevokeArgs {
    #[command(flatten)]
    common: Common,
    /// The grant's id (from `aether oauth grants`; one made before ids were hex may begin
    /// with "-", and is taken as the id all the same).
    #[arg(group = "which", allow_hyphen_values = true)]
    grant: Option<String>,
    /// Every grant this console account gave.
    #[arg(long, group = "which")]
    account: Option<String>,
    /// Why (kept in the audit).
    #[arg(long)]
    why: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Grants(args) => {
            let store = setup::existing_store(&args.common)?;
            let grants = store.oauth_grants(args.account.clone()).await?;
            let now = aether_store::now_us();
            let state = |expires: i64, revoked: Option<i64>| match revoked {
                Some(at) => format!("revoked {}", time_of(at)),
                None if expires <= now => "expired".to_string(),
                None => "live".to_string(),
            };
            if args.json {
                for (g, revoked) in &grants {
                    say!(
                        "{}",
                        json!({
                            "grant": g.grant_id, "account": g.account, "client_id": g.client_id,
                            "scope": g.scope, "resource": g.resource, "created_us": g.created_us,
                            "expires_us": g.expires_us, "revoked_us": revoked,
                            "state": state(g.expires_us, *revoked),
                        })
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            if grants.is_empty() {
                say!("No grants. People give them on the consent page of [auth] builtin.");
            }
            let lines: Vec<Vec<String>> = grants
                .into_iter()
                .map(|(g, revoked)| {
                    vec![
                        g.grant_id,
                        g.account,
                        g.scope,
                        state(g.expires_us, revoked),
                        format!("given {}", time_of(g.created_us)),
                        g.client_id,
                    ]
                })
                .collect();
            crate::columns::Columns::default().print(&lines);
        }
        Command::Revoke(args) => {
            if args.why.trim().is_empty() {
                bail!("--why must say why (it is kept in the audit)");
            }
            let store = setup::existing_store(&args.common)?;
            let (detail, said) = match (&args.grant, &args.account) {
                (Some(grant), None) => {
                    let known = store
                        .oauth_grants(None)
                        .await?
                        .into_iter()
                        .any(|(g, _)| g.grant_id == *grant);
                    if !known {
                        bail!("no grant has the id {grant:?} (see `aether oauth grants`)");
                    }
                    store.oauth_revoke_grant(grant.clone()).await?;
                    (json!({"grant": grant}), format!("Grant {grant} revoked."))
                }
                (None, Some(account)) => {
                    let n = store.oauth_revoke_account(account.clone()).await?;
                    (
                        json!({"account": account, "revoked": n}),
                        format!("{n} live grant(s) of {account} revoked."),
                    )
                }
                _ => bail!("give a grant id or --account NAME"),
            };
            let mut detail = detail;
            detail["why"] = json!(args.why);
            aether_pipeline::operator::note(&store, &setup::operator(), "oauth.revoke", detail)
                .await?;
            say!("{said}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `aether accounts create|list|role|password|remove|setup-link`: console accounts from the
//! command line (headless setup). Passwords are read from standard input, never arguments.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::cmd::audit::time_of as when;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create an account; its password is read from standard input.
    Create(CreateArgs),
    /// The accounts and their roles, and the roles with their permissions.
    List(CommonArgs),
    /// Change an account's role (its sessions end).
    Role(RoleArgs),
    /// Set an account's password from standard input (its sessions end).
    Password(NameArgs),
    /// Remove an account (never the last admin).
    Remove(NameArgs),
    /// Print a new one-time link that makes the first admin (only while no account exists).
    SetupLink(CommonArgs),
}

#[derive(ClapArgs, Debug)]
pub struct CommonArgs {
    #[command(flatten)]
    common: Common,
}

#[derive(ClapArgs, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    /// viewer, approver, operator or admin.
    #[arg(long)]
    role: String,
}

#[derive(ClapArgs, Debug)]
pub struct RoleArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    role: String,
}

#[derive(ClapArgs, Debug)]
pub struct NameArgs {
    #[command(flatten)]
    common: Common,
    name: String,
}

fn read_password() -> Result<String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the password from standard input")?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    Ok(text.to_string())
}

fn store(common: &Common) -> Result<aether_store::Store> {
    let loaded = setup::load(common)?;
    setup::open_store(&setup::store_url(common, &loaded, &loaded.base), &loaded)
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Create(args) => {
            let store = store(&args.common)?;
            let password = read_password()?;
            let account = aether_pipeline::accounts::create(
                &store,
                &args.name,
                &password,
                &args.role,
                &setup::operator(),
                None,
            )
            .await?;
            say!(
                "Account {} ({}) created; it signs in at the console (aether serve prints its address).",
                account.name,
                account.role
            );
        }
        Command::List(args) => {
            let store = setup::existing_store(&args.common)?;
            let accounts = store.accounts().await?;
            if accounts.is_empty() {
                say!(
                    "No accounts yet. Make the first admin: aether accounts create NAME --role admin < password.txt (or the setup link aether serve prints)."
                );
            }
            for a in accounts {
                say!(
                    "{:<24} {:<9} created {} by {}",
                    a.name,
                    a.role,
                    when(a.created_us),
                    a.created_by
                );
            }
            say!();
            for r in aether_policy::roles::ROLES {
                say!(
                    "role {:<9} {}: {}",
                    r.name,
                    r.about,
                    r.permissions
                        .iter()
                        .map(|p| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Command::Role(args) => {
            let store = setup::existing_store(&args.common)?;
            aether_pipeline::accounts::update(
                &store,
                &args.name,
                Some(&args.role),
                None,
                &setup::operator(),
            )
            .await?;
            say!(
                "{} is now {}; its sessions have ended.",
                args.name,
                args.role
            );
        }
        Command::Password(args) => {
            let store = setup::existing_store(&args.common)?;
            let password = read_password()?;
            aether_pipeline::accounts::update(
                &store,
                &args.name,
                None,
                Some(&password),
                &setup::operator(),
            )
            .await?;
            say!(
                "{}'s password is changed; its sessions have ended.",
                args.name
            );
        }
        Command::Remove(args) => {
            let store = setup::existing_store(&args.common)?;
            aether_pipeline::accounts::remove(&store, &args.name, &setup::operator()).await?;
            say!("Account {} removed.", args.name);
        }
        Command::SetupLink(args) => {
            let loaded = setup::load(&args.common)?;
            let store = store(&args.common)?;
            if !store.accounts().await?.is_empty() {
                bail!(
                    "the console already has accounts: an admin makes new ones (aether accounts create)"
                );
            }
            let token = aether_pipeline::accounts::mint_setup_link(&store).await?;
            say!(
                "http://{}/setup#{token}\n(one use, for 24 hours; with another address, keep the part from /setup on)",
                loaded.raw.server.listen
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

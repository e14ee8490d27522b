//! `aether credentials set|list|remove`: the vault of upstream credentials. A value is read
//! from standard input (never an argument: arguments end up in shell history and `ps`), stored
//! encrypted, and never printed again.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::cmd::audit::time_of as when;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Store a credential: its value is read from standard input (one line, or all of it).
    Set(NameArgs),
    /// The credentials' names and when each was set (never a value).
    List(ListArgs),
    /// Remove a credential.
    Remove(NameArgs),
}

#[derive(ClapArgs, Debug)]
pub struct NameArgs {
    #[command(flatten)]
    common: Common,
    name: String,
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Set(args) => {
            let loaded = setup::load(&args.common)?;
            let store = setup::open_store(
                &setup::store_url(&args.common, &loaded, &loaded.base),
                &loaded,
            )?;
            if !aether_store::valid_secret_name(&args.name) {
                bail!(
                    "{:?} is not a credential name (1-64 of letters, digits, -, _ and .)",
                    args.name
                );
            }
            let mut value = String::new();
            std::io::stdin()
                .read_to_string(&mut value)
                .context("cannot read the value from standard input")?;
            let value = value.strip_suffix('\n').unwrap_or(&value);
            let value = value.strip_suffix('\r').unwrap_or(value);
            if value.is_empty() {
                bail!(
                    "the value is empty: pipe it on standard input (e.g. aether credentials set {} < token.txt)",
                    args.name
                );
            }
            let key_file = setup::vault_key_file(&loaded);
            let vault = aether_store::Vault::open(&key_file, true)?;
            store.vault_put(vault.seal(&args.name, value)?).await?;
            say!(
                "Credential {} is stored, encrypted with the key in {}. Upstreams that use it pick it up when they next connect (aether sources refresh).",
                args.name,
                key_file.display()
            );
        }
        Command::List(args) => {
            let store = setup::existing_store(&args.common)?;
            let names = store.vault_names().await?;
            if names.is_empty() {
                say!(
                    "The vault is empty. Add a credential with: aether credentials set NAME < value.txt"
                );
            }
            for (name, at) in names {
                say!("{name:<32} set {}", when(at));
            }
        }
        Command::Remove(args) => {
            let store = setup::existing_store(&args.common)?;
            if !store.vault_remove(&args.name).await? {
                bail!("the vault has no credential {:?}", args.name);
            }
            say!("Credential {} is removed.", args.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `aether models list|check`: the model connections of `aether.toml`, and what a server
//! offers (`GET {base}/models`, which runs no model).

use std::process::ExitCode;

use aether_runner::ModelClient;
use anyhow::{Context, Result, anyhow};
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common, Loaded};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The configured connections: base URL, model, dialect, and whether a key is named.
    List(ListArgs),
    /// Ask a connection's server for its models (runs none).
    Check(CheckArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
}

#[derive(ClapArgs, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    common: Common,
    /// The connection (`[models.NAME]`).
    name: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => {
            let loaded = setup::load(&args.common)?;
            if loaded.raw.models.is_empty() {
                say!(
                    "no model connections in {}; add one, e.g.\n\n[models.local]\npreset = \"llama.cpp\"\nmodel = \"...\"",
                    loaded.source
                );
            }
            for name in loaded.raw.models.keys() {
                let m = loaded.raw.models[name]
                    .resolve(name)
                    .map_err(|p| anyhow!(p.join("; ")))?;
                say!(
                    "{name:<16} {:<40} {:<24} {:<8} {}",
                    m.base_url,
                    m.model,
                    m.dialect.as_str(),
                    m.key.map_or("no key".to_string(), |k| format!("key: {k}"))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => {
            let loaded = setup::load(&args.common)?;
            let client = client(&loaded, &args.common, &args.name, None).await?;
            let models = client.models().await.with_context(|| {
                format!(
                    "model connection {:?} ({})",
                    args.name,
                    client.spec().base_url
                )
            })?;
            let wanted = &client.spec().model;
            say!(
                "{} offers {} model(s):",
                client.spec().base_url,
                models.len()
            );
            for m in &models {
                say!("  {m}{}", if m == wanted { "   (configured)" } else { "" });
            }
            if !models.iter().any(|m| m == wanted) {
                say!("note: the configured model {wanted:?} is not among them");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The client for connection `name` (as `agent`, when one will run on it), its key opened
/// from the vault.
pub async fn client(
    loaded: &Loaded,
    common: &Common,
    name: &str,
    agent: Option<&str>,
) -> Result<ModelClient> {
    let models = setup::models(loaded);
    let store = setup::open_store(&setup::store_url(common, loaded, &loaded.base), loaded)?;
    models
        .client(&store, name, agent.unwrap_or_default())
        .await
        .map_err(|e| anyhow!(e))
}

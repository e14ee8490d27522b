//! `aether tools list|schemas`: the catalog as one agent sees it.

use std::process::ExitCode;

use aether_pipeline::Transport;
use aether_policy::Offer;
use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every tool, and whether this agent is offered it (and if not, why not).
    List(AgentArgs),
    /// The agent's catalog as OpenAI function schemas (`tools` of a chat completion).
    Schemas(AgentArgs),
}

#[derive(ClapArgs, Debug)]
pub struct AgentArgs {
    #[command(flatten)]
    common: Common,
    /// The agent (from aether.toml).
    #[arg(long, default_value = aether_policy::config::DEFAULT_AGENT)]
    agent: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    let (args, schemas) = match command {
        Command::List(a) => (a, false),
        Command::Schemas(a) => (a, true),
    };
    let loaded = setup::load(&args.common)?;
    let store = setup::open_store(&setup::store_url(&args.common, &loaded, &loaded.base))?;
    let roots = setup::configured_roots(&loaded);
    let pipeline = setup::pipeline(&loaded, &roots, store, false).await?;
    let ctx = pipeline.session(&args.agent, Transport::InProcess, "cli".into())?;
    if schemas {
        let functions = pipeline.openai_functions(&ctx);
        println!("{}", serde_json::to_string_pretty(&functions)?);
    } else {
        for entry in pipeline.catalog().iter() {
            let def = entry.def();
            match pipeline.offer(&ctx, entry) {
                Offer::Offered => println!(
                    "offered  {:<22} {:<10} {}",
                    def.name,
                    def.tier.as_str(),
                    def.group
                ),
                Offer::Hidden(h) => println!(
                    "hidden   {:<22} {}",
                    def.name,
                    h.explain(&def.name, &args.agent)
                ),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

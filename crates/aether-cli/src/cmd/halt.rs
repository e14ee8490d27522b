//! `aether halt` and `aether resume`: the emergency stop, recorded with who and why.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args as ClapArgs;

use crate::setup::{self, Common};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Why (recorded with the change).
    #[arg(long)]
    why: String,
}

pub async fn run(args: Args, halt: bool) -> Result<ExitCode> {
    if args.why.trim().is_empty() {
        bail!("--why must say why");
    }
    let loaded = setup::load(&args.common)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    let store = setup::open_store(&url, &loaded)?;
    let state =
        aether_pipeline::operator::set_halt(&store, halt, &setup::operator(), &args.why).await?;
    if state.halted {
        say!(
            "Halted: no new call is admitted until `aether resume --why ...`. ({})",
            store.location()
        );
    } else {
        say!("Resumed: calls are admitted again. ({})", store.location());
    }
    Ok(ExitCode::SUCCESS)
}

//! `aether roots list|seal`: the roots, their modes and seals; sealing pins a sealed root's
//! files by hash.

use std::process::ExitCode;

use aether_policy::paths::RootMode;
use aether_store::{SealPin, SealRecord, now_us};
use aether_tools::Roots;
use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand};

use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every root with its mode and, for sealed roots, its seal.
    List(RootArgs),
    /// Pin every file of a sealed root by hash. Reads of a file that changed since are refused
    /// until the root is sealed again.
    Seal(SealArgs),
}

#[derive(ClapArgs, Debug)]
pub struct RootArgs {
    #[command(flatten)]
    common: Common,
    /// Roots as `mcp-serve` takes them, NAME=PATH[:ro|rw|sealed]; default: aether.toml's, or
    /// the current folder.
    #[arg(long = "root")]
    roots: Vec<String>,
}

#[derive(ClapArgs, Debug)]
pub struct SealArgs {
    /// The root to seal (it must have mode "sealed").
    name: String,
    #[command(flatten)]
    roots: RootArgs,
    /// Why (recorded with the seal).
    #[arg(long, default_value = "sealed by the operator")]
    why: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => list(args).await,
        Command::Seal(args) => seal(args).await,
    }
}

async fn list(args: RootArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let specs = setup::roots(&args.roots, &loaded, true)?;
    let (store, _) = setup::store_for_roots(&args.common, &loaded, &specs)?;
    let seals = store.seals().await?;
    for spec in &specs {
        let seal = match spec.mode {
            RootMode::Sealed => match seals.iter().find(|s| s.root == spec.name) {
                Some(s) => format!(
                    "sealed {} files at {} by {} ({})",
                    s.files,
                    crate::cmd::audit::time_of(s.at_us),
                    s.by,
                    s.why
                ),
                None => "NOT SEALED: nothing in it is read until `aether roots seal`".into(),
            },
            _ => String::new(),
        };
        say!(
            "{:<16} {:<7} {}  {seal}",
            spec.name,
            spec.mode.as_str(),
            spec.path
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn seal(args: SealArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.roots.common)?;
    let specs = setup::roots(&args.roots.roots, &loaded, true)?;
    let Some(spec) = specs.iter().find(|s| s.name == args.name) else {
        bail!(
            "no root is named {:?}; roots: {}",
            args.name,
            specs
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    if spec.mode != RootMode::Sealed {
        bail!(
            "root {:?} has mode {:?}; only a root with mode \"sealed\" is sealed (set it in aether.toml, or NAME=PATH:sealed)",
            spec.name,
            spec.mode.as_str()
        );
    }
    let (store, _) = setup::store_for_roots(&args.roots.common, &loaded, &specs)?;
    let mut roots = Roots::open(std::slice::from_ref(spec)).context("cannot open the root")?;
    roots.set_private(store.private_paths());
    let root_path = roots.get(&spec.name).expect("just opened").path.clone();
    let (name, shown) = (spec.name.clone(), root_path.display().to_string());
    let working = crate::progress::spinner(&format!("reading and hashing every file of {shown}"));
    let pins = tokio::task::spawn_blocking(move || {
        let root = roots.get(&name).expect("just opened");
        root.pins(roots.credentials())
    })
    .await?
    .with_context(|| format!("cannot read every file of {shown}"))?;
    let pins: Vec<SealPin> = pins
        .into_iter()
        .map(|(path, hash, size)| SealPin {
            path,
            hash,
            size: size as i64,
        })
        .collect();
    let record = store
        .seal(
            SealRecord {
                root: spec.name.clone(),
                root_path: root_path.to_string_lossy().into_owned(),
                at_us: now_us(),
                by: setup::operator(),
                why: args.why.clone(),
                files: 0,
                generation: 0,
            },
            pins,
        )
        .await?;
    drop(working);
    say!(
        "Sealed root {:?} ({}): {} files pinned by sha256. A running Aether picks the seal up within a second. ({})",
        record.root,
        record.root_path,
        record.files,
        store.location()
    );
    Ok(ExitCode::SUCCESS)
}

//! `aether mcp-serve`: one MCP session over stdio, for a host that starts Aether itself.

use std::process::ExitCode;
use std::time::Duration;

use aether_pipeline::Transport;
use aether_server::{AetherMcp, Mode, serve_stdio};
use anyhow::{Context, Result};
use clap::Args as ClapArgs;

use crate::setup::{self, Common};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// A root to serve, NAME=PATH[:ro|rw|sealed] (default mode ro); repeat for several.
    #[arg(long = "root")]
    roots: Vec<String>,
    /// The agent this session acts as (an agent of aether.toml). Default: the default agent.
    #[arg(long, default_value = aether_policy::config::DEFAULT_AGENT)]
    agent: String,
    /// For running the official MCP conformance suite against Aether: also serve its fixture
    /// tools, resources, prompts and completions (every agent reaches them). Never in
    /// production: the fixtures exist only to be tested.
    #[arg(long)]
    conformance_fixtures: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    setup::init_logging("warn", &args.common);
    let mut loaded = setup::load(&args.common)?;
    let telemetry = crate::telemetry::start(&loaded.raw.telemetry)?;
    let roots = setup::roots(&args.roots, &loaded, false)?;
    // Without a configuration, the store and the rules file live beside the first root, as an
    // `aether serve` run there without one keeps them: hosts often start servers from `/` or
    // their own folder, which is no place for Aether's records.
    if !loaded.from_file {
        loaded.base = std::path::PathBuf::from(&roots[0].path);
    }
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    // A rules file that cannot be read stops the start before anything is made.
    setup::rules(&loaded)?;
    let store = setup::open_store(&url, &loaded)?;
    let stray = setup::unused_configurations(&loaded, &roots);
    let _controls = setup::guard_control_files(&loaded, &roots).await;
    let (upstreams, external) = setup::upstreams(&loaded, &store, &roots).await;
    let pipeline =
        setup::pipeline(&loaded, &roots, store, args.conformance_fixtures, external).await?;
    // A root that holds a configuration this process does not use: say loudly which one it
    // uses instead (on stderr, which hosts keep in their logs, and in the audit).
    for config in &stray {
        tell!(
            "aether: root folder {} holds {}, but this process runs with {} and the store {}; \
             that project's rules, agents and halt do not apply here. Start it with --config {} \
             (the entry `aether serve` prints) to share them.",
            config
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            config.display(),
            loaded.source,
            aether_store::redact_url(&url),
            config.display(),
        );
        if let Err(e) = aether_pipeline::operator::note(
            pipeline.store(),
            "aether",
            "start.unused_configuration",
            serde_json::json!({
                "found": config.display().to_string(),
                "configuration": loaded.source,
                "store": aether_store::redact_url(&url),
            }),
        )
        .await
        {
            tell!("aether: cannot record it in the audit: {e}");
        }
    }
    let _watch = pipeline.watch(Duration::from_millis(50));
    let _upstreams = upstreams.run(pipeline.clone());
    let _rules_watch = pipeline.watch_rules();
    pipeline.remove_write_leftovers();
    let books = setup::Books::open(&loaded, &url, &pipeline).await?;
    let session = pipeline
        .session(
            &args.agent,
            Transport::Stdio,
            // The process id alone repeats across runs; a session must not inherit an
            // earlier one's journal.
            format!("stdio-{}-{}", std::process::id(), aether_store::now_us()),
        )
        .context("cannot start the session")?;
    let mode = if args.conformance_fixtures {
        Mode::ConformanceFixtures
    } else {
        Mode::Shipped
    };
    let served =
        serve_stdio(AetherMcp::new(pipeline.clone(), session, mode).with_upstreams(upstreams))
            .await;
    // The client has gone: stop what still runs and let it write its audit rows.
    pipeline.shut_down(Duration::from_secs(10)).await;
    books.close(&pipeline).await;
    telemetry.close().await;
    served?;
    Ok(ExitCode::SUCCESS)
}

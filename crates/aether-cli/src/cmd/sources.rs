//! `aether sources …`: the upstream MCP servers (status, listing, refresh, approving their
//! tools), the tables their tools returned (data sets, exported as CSV or JSON) and saved
//! reports (a stored call run again).

use std::process::ExitCode;

use aether_pipeline::tables;
use aether_store::Report;
use anyhow::{Context, Result, bail};
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use serde_json::Value;

use crate::cmd::audit::time_of as when;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every upstream: transport, connected or not, last error, tool count, fingerprint.
    List(JsonArgs),
    /// One upstream: its status, and its tools (with registry state), resources and prompts.
    Show(NameArgs),
    /// Ask the running servers to list every upstream again (within a second or two).
    Refresh(CommonArgs),
    /// Approve every tool of an upstream that waits for approval (the definitions as last
    /// listed), recorded with who and why.
    Approve(ApproveArgs),
    /// The tables upstream tools returned, newest first.
    Datasets(DatasetsArgs),
    /// Export a data set (by the call id that returned it) as CSV or JSON on standard output.
    Export(ExportArgs),
    /// Saved reports: save a call as a report, list, run again, remove.
    #[command(subcommand)]
    Report(ReportCommand),
}

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Save the call that returned a data set as a report NAME.
    Save(SaveArgs),
    /// The saved reports.
    List(JsonArgs),
    /// Run a report again, as its agent, through the whole pipeline; prints the new data set.
    Run(ReportRunArgs),
    /// Remove a report.
    Remove(NameArgs),
}

#[derive(ClapArgs, Debug)]
pub struct CommonArgs {
    #[command(flatten)]
    common: Common,
}

#[derive(ClapArgs, Debug)]
pub struct JsonArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct NameArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct ApproveArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    /// Why (recorded with each approval).
    #[arg(long)]
    why: String,
    /// The fingerprint you reviewed (from `show`); refused if its tools changed since.
    #[arg(long)]
    fingerprint: Option<String>,
}

#[derive(ClapArgs, Debug)]
pub struct DatasetsArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, default_value_t = 50)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Csv,
    Json,
}

#[derive(ClapArgs, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    common: Common,
    /// The call id that returned the table (from `datasets`, or the note the model saw).
    call_id: String,
    #[arg(long, value_enum, default_value = "csv")]
    format: Format,
}

#[derive(ClapArgs, Debug)]
pub struct SaveArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    /// The call whose tool and arguments the report runs again.
    #[arg(long = "from")]
    call_id: String,
}

#[derive(ClapArgs, Debug)]
pub struct ReportRunArgs {
    #[command(flatten)]
    common: Common,
    name: String,
    #[arg(long, value_enum, default_value = "csv")]
    format: Format,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => list(args).await,
        Command::Show(args) => show(args).await,
        Command::Refresh(args) => refresh(args).await,
        Command::Approve(args) => approve(args).await,
        Command::Datasets(args) => datasets(args).await,
        Command::Export(args) => export(args).await,
        Command::Report(c) => {
            report(c).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Every upstream, configured or seen, with its status.
async fn list(args: JsonArgs) -> Result<ExitCode> {
    let loaded = setup::load(&args.common)?;
    let store = setup::existing_store(&args.common)?;
    let statuses = store.upstream_statuses().await?;
    if args.json {
        crate::json_lines(&statuses)?;
        return Ok(ExitCode::SUCCESS);
    }
    if loaded.raw.upstreams.is_empty() && statuses.is_empty() {
        say!(
            "No upstreams are configured. Add one to aether.toml as [upstreams.NAME] with command = \"...\" (stdio) or url = \"https://...\" (Streamable HTTP)."
        );
    }
    for name in loaded.raw.upstreams.keys() {
        if !statuses.iter().any(|s| &s.name == name) {
            say!("{name:<20} configured, not seen yet (no server has run with it)");
        }
    }
    for s in statuses {
        let configured = loaded.raw.upstreams.contains_key(&s.name);
        say!(
            "{:<20} {:<5} {:<12} {:>3} tools  fingerprint {}  as of {}{}{}",
            s.name,
            s.transport,
            if s.connected { "connected" } else { "down" },
            s.tool_count,
            &s.fingerprint[..s.fingerprint.len().min(16)],
            when(s.updated_us),
            s.last_error
                .map(|e| format!("\n{:<20} last error: {e}", ""))
                .unwrap_or_default(),
            if configured {
                ""
            } else {
                "  (no longer in the configuration)"
            }
        );
    }

    Ok(ExitCode::SUCCESS)
}

/// One upstream: its status, its tools with their registry state and screening findings, its resources and prompts.
async fn show(args: NameArgs) -> Result<ExitCode> {
    let store = setup::existing_store(&args.common)?;
    let status = store
        .upstream_statuses()
        .await?
        .into_iter()
        .find(|s| s.name == args.name)
        .with_context(|| {
            format!(
                "no upstream {:?} has been seen (`aether sources list` shows them)",
                args.name
            )
        })?;
    let listing: Value = serde_json::from_str(&status.listing).unwrap_or_default();
    let registry = store.registry().await?;
    let screen = aether_pipeline::screening::screen_for(&registry);
    let findings = |name: &str| {
        registry
            .iter()
            .find(|r| r.name == name)
            .map(|r| aether_pipeline::screening::screen_row(&screen, r))
            .unwrap_or_default()
    };
    if args.json {
        let mut v = serde_json::to_value(&status)?;
        v["findings"] = listing["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .map(|name| {
                (
                    name.to_string(),
                    serde_json::to_value(findings(name).findings).unwrap_or_default(),
                )
            })
            .collect::<serde_json::Map<String, Value>>()
            .into();
        v["listing"] = listing;
        crate::json_line(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    say!("upstream:     {}", status.name);
    say!("transport:    {}", status.transport);
    say!(
        "state:        {}",
        if status.connected {
            "connected"
        } else {
            "down"
        }
    );
    say!(
        "last error:   {}",
        status.last_error.as_deref().unwrap_or("none")
    );
    say!("fingerprint:  {}", status.fingerprint);
    say!("as of:        {}", when(status.updated_us));
    say!(
        "group:        {}   tier: {}   session: {}",
        listing["group"].as_str().unwrap_or("?"),
        listing["tier"].as_str().unwrap_or("?"),
        listing["session"].as_str().unwrap_or("?")
    );
    say!("tools ({}):", status.tool_count);
    for t in listing["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default();
        let state = registry
            .iter()
            .find(|r| r.name == name)
            .map(|r| {
                if r.state == aether_policy::RegistryState::Approved
                    && r.approved_digest != r.seen_digest
                {
                    "approved, but changed since: held back".to_string()
                } else {
                    r.state.as_str().to_string()
                }
            })
            .unwrap_or_else(|| "unknown".into());
        say!("  {name:<40} {state}");
        crate::cmd::registry::print_findings(&findings(name), "      ");
    }
    for (what, key) in [
        ("resources", "resources"),
        ("resource templates", "resource_templates"),
        ("prompts", "prompts"),
    ] {
        let items = listing[key].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            say!("{what} ({}):", items.len());
            for i in items {
                say!("  {}", i.as_str().unwrap_or_default());
            }
        }
    }

    Ok(ExitCode::SUCCESS)
}

/// Asks the running servers to list every upstream again.
async fn refresh(args: CommonArgs) -> Result<ExitCode> {
    let store = setup::existing_store(&args.common)?;
    store.request_sources_refresh().await?;
    say!(
        "Asked the running servers to list their upstreams again; `aether sources list` shows the result within a few seconds."
    );

    Ok(ExitCode::SUCCESS)
}

/// Approves every tool of an upstream that waits for approval.
async fn approve(args: ApproveArgs) -> Result<ExitCode> {
    if args.why.trim().is_empty() {
        bail!("--why must say why");
    }
    let store = setup::existing_store(&args.common)?;
    let approved = aether_pipeline::operator::approve_source(
        &store,
        &args.name,
        args.fingerprint.as_deref(),
        &setup::operator(),
        &args.why,
        setup::load(&args.common)?.raw.registry.screen,
    )
    .await?;
    if approved.is_empty() {
        say!(
            "No tool of upstream {} waits for approval (`aether sources show {}`).",
            args.name,
            args.name
        );
        return Ok(ExitCode::SUCCESS);
    }
    for row in approved {
        say!(
            "{} approved (definition {}).",
            row.name,
            row.approved_digest.as_deref().unwrap_or("?")
        );
    }
    say!("Running servers offer them within a second.");

    Ok(ExitCode::SUCCESS)
}

/// The data sets kept, newest first.
async fn datasets(args: DatasetsArgs) -> Result<ExitCode> {
    let store = setup::existing_store(&args.common)?;
    let sets = store.datasets(args.limit).await?;
    if args.json {
        crate::json_lines(&sets)?;
        return Ok(ExitCode::SUCCESS);
    }
    if sets.is_empty() {
        say!("No data sets yet: they are kept when an upstream tool returns a table.");
    }
    for d in sets {
        say!(
            "{}  {}  {} by {}: {} rows{} ({})",
            d.call_id,
            when(d.at_us),
            d.tool,
            d.agent,
            d.row_count,
            if d.dropped > 0 {
                format!(" (+{} not kept)", d.dropped)
            } else {
                String::new()
            },
            d.columns.join(", ")
        );
    }

    Ok(ExitCode::SUCCESS)
}

/// One data set as CSV or JSON.
async fn export(args: ExportArgs) -> Result<ExitCode> {
    let store = setup::existing_store(&args.common)?;
    let dataset = store.dataset(&args.call_id).await?.with_context(|| {
        format!(
            "no data set for call {:?} (`aether sources datasets` lists them)",
            args.call_id
        )
    })?;
    print_dataset(&dataset, args.format)?;

    Ok(ExitCode::SUCCESS)
}

fn print_dataset(dataset: &aether_store::Dataset, format: Format) -> Result<()> {
    match format {
        Format::Csv => say_inline!("{}", tables::to_csv(dataset).map_err(anyhow::Error::msg)?),
        Format::Json => say!(
            "{}",
            serde_json::to_string_pretty(&tables::to_json(dataset))?
        ),
    }
    Ok(())
}

async fn report(command: ReportCommand) -> Result<()> {
    match command {
        ReportCommand::Save(args) => {
            if !aether_policy::is_plain_name(&args.name) {
                bail!(
                    "{:?} is not a report name (1-64 of letters, digits, -, _ and .)",
                    args.name
                );
            }
            let store = setup::existing_store(&args.common)?;
            let dataset = store.dataset(&args.call_id).await?.with_context(|| {
                format!(
                    "no data set for call {:?}: a report runs again a call that returned a table",
                    args.call_id
                )
            })?;
            store
                .save_report(Report {
                    name: args.name.clone(),
                    tool: dataset.tool.clone(),
                    arguments: dataset.arguments.clone(),
                    agent: dataset.agent.clone(),
                    saved_by: setup::operator(),
                    at_us: aether_store::now_us(),
                    last_call: Some(dataset.call_id.clone()),
                })
                .await?;
            say!(
                "Report {} saved: {} as agent {} with {}.",
                args.name,
                dataset.tool,
                dataset.agent,
                dataset.arguments
            );
        }
        ReportCommand::List(args) => {
            let store = setup::existing_store(&args.common)?;
            let reports = store.reports().await?;
            if args.json {
                crate::json_lines(&reports)?;
                return Ok(());
            }
            if reports.is_empty() {
                say!(
                    "No saved reports. Save one from a data set: aether sources report save NAME --from CALL_ID"
                );
            }
            for r in reports {
                say!(
                    "{:<24} {} as {} {}  (saved {} by {}; last run {})",
                    r.name,
                    r.tool,
                    r.agent,
                    r.arguments,
                    when(r.at_us),
                    r.saved_by,
                    r.last_call.as_deref().unwrap_or("never")
                );
            }
        }
        ReportCommand::Run(args) => {
            let loaded = setup::load(&args.common)?;
            let store = setup::existing_store(&args.common)?;
            let report = store
                .reports()
                .await?
                .into_iter()
                .find(|r| r.name == args.name)
                .with_context(|| format!("no report named {:?}", args.name))?;
            let roots = setup::roots(&[], &loaded, true)?;
            let (upstreams, external) = setup::upstreams(&loaded, &store, &roots).await;
            let pipeline = setup::pipeline(&loaded, &roots, store.clone(), false, external).await?;
            let _upstreams = upstreams.run(pipeline.clone());
            let (call_id, outcome) = tables::run_report(&pipeline, &report, &setup::operator())
                .await
                .map_err(anyhow::Error::msg)?;
            store.report_ran(&report.name, &call_id).await?;
            let dataset = store.dataset(&call_id).await?.with_context(|| {
                format!(
                    "report {} ran (call {call_id}) but returned no table: {outcome}",
                    report.name
                )
            })?;
            tell!("report {} ran as call {call_id}", report.name);
            print_dataset(&dataset, args.format)?;
            pipeline.shut_down(std::time::Duration::from_secs(5)).await;
            aether_pipeline::Books::new(&pipeline, None)
                .close(pipeline.calls_in_flight() == 0)
                .await;
        }
        ReportCommand::Remove(args) => {
            let store = setup::existing_store(&args.common)?;
            if !store.remove_report(&args.name).await? {
                bail!("no report named {:?}", args.name);
            }
            say!("Report {} removed.", args.name);
        }
    }
    Ok(())
}

//! `aether serve`: MCP over Streamable HTTP at /mcp, bound to loopback by default.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use aether_server::{HttpOptions, Mode, router, serve_http};
use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::setup::{self, Common};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// Address to listen on. Default: server.listen in aether.toml, else 127.0.0.1:8484.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// A root to serve, NAME=PATH[:ro|rw|sealed]; repeat for several. Default: the configured
    /// roots, else the current folder as `workspace` (rw).
    #[arg(long = "root")]
    roots: Vec<String>,
    /// Test-only: also serve the MCP conformance suite's fixtures.
    #[arg(long, hide = true)]
    conformance_fixtures: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    setup::init_logging("warn,aether=info");
    let loaded = setup::load(&args.common)?;
    let roots = setup::roots(&args.roots, &loaded, true)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    let store = setup::open_store(&url)?;
    let pipeline = setup::pipeline(&loaded, &roots, store, args.conformance_fixtures).await?;
    let _halt_watch = pipeline.watch_halt(Duration::from_millis(500));
    let addr = match args.listen {
        Some(a) => a,
        None => loaded.raw.server.listen.parse().context("server.listen")?,
    };
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "refusing to listen on {addr}: beyond this machine, callers must authenticate with \
             per-agent bearer tokens, which this build does not have yet; listen on 127.0.0.1 or [::1]"
        );
    }
    // Bind first: the gate answers to the address actually bound (port 0 picks one).
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let opts = HttpOptions {
        addr,
        mode: if args.conformance_fixtures {
            Mode::ConformanceFixtures
        } else {
            Mode::Shipped
        },
        agent: loaded.raw.server.http_agent.clone(),
        session_idle: Duration::from_secs(30 * 60),
        sessions: loaded.raw.server.sessions,
        shutdown: shutdown.clone(),
    };
    let app = router(pipeline.clone(), &opts)?;
    print_banner(addr, &loaded.source, &url, &roots);
    let signal = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        signal.cancel();
    });
    let served = serve_http(listener, app, shutdown).await;
    pipeline.shut_down(Duration::from_secs(10)).await;
    served.context("the HTTP server stopped")?;
    Ok(ExitCode::SUCCESS)
}

fn print_banner(
    addr: SocketAddr,
    config: &str,
    store: &str,
    roots: &[aether_policy::paths::RootSpec],
) {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "aether".into());
    let mut root_args = Vec::new();
    println!("Aether {} is serving.", env!("CARGO_PKG_VERSION"));
    println!("  MCP (Streamable HTTP): http://{addr}/mcp");
    println!("  configuration:         {config}");
    println!("  store:                 {store}");
    for r in roots {
        println!(
            "  root {:<17} {} ({})",
            format!("{}:", r.name),
            r.path,
            r.mode.as_str()
        );
        root_args.push("--root".to_string());
        root_args.push(format!("{}={}:{}", r.name, r.path, r.mode.as_str()));
    }
    let http = json!({"mcpServers": {"aether": {"url": format!("http://{addr}/mcp")}}});
    let mut stdio_args = vec!["mcp-serve".to_string()];
    stdio_args.extend(root_args);
    let stdio = json!({"mcpServers": {"aether": {"command": exe, "args": stdio_args}}});
    println!();
    println!("For an MCP host that connects by URL (LM Studio's mcp.json, Cursor, ...):");
    println!(
        "{}",
        serde_json::to_string_pretty(&http).unwrap_or_default()
    );
    println!();
    println!(
        "For a host that starts Aether itself over stdio (Claude Desktop's claude_desktop_config.json):"
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&stdio).unwrap_or_default()
    );
    println!();
    println!("Stop with Ctrl-C. Halt every call with `aether halt --why \"...\"`.");
}

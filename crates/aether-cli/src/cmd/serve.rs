//! `aether serve`: MCP over Streamable HTTP at /mcp, bound to loopback by default.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use aether_policy::config::HttpAuth;
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
    /// Address to listen on, IP:PORT (or localhost:PORT). Default: server.listen in
    /// aether.toml, else 127.0.0.1:8484.
    #[arg(long, value_parser = aether_policy::config::listen_address)]
    listen: Option<SocketAddr>,
    /// A root to serve, NAME=PATH[:ro|rw|sealed]; repeat for several. Default: the configured
    /// roots, else the current folder as `workspace` (rw).
    #[arg(long = "root")]
    roots: Vec<String>,
    /// For running the official MCP conformance suite against Aether: also serve its fixture
    /// tools, resources, prompts and completions (every agent reaches them). Never in
    /// production: the fixtures exist only to be tested.
    #[arg(long)]
    conformance_fixtures: bool,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    setup::init_logging("warn,aether=info", &args.common);
    let loaded = setup::load(&args.common)?;
    let telemetry = crate::telemetry::start(&loaded.raw.telemetry)?;
    let roots = setup::roots(&args.roots, &loaded, true)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    // A rules file that cannot be read stops the start before anything is made.
    setup::rules(&loaded)?;
    let store = setup::open_store(&url, &loaded)?;
    let _controls = setup::guard_control_files(&loaded, &roots).await;
    let (upstreams, external) = setup::upstreams(&loaded, &store, &roots).await;
    let pipeline =
        setup::pipeline(&loaded, &roots, store, args.conformance_fixtures, external).await?;
    // A store that announces changes (PostgreSQL's NOTIFY) needs only a slow poll behind it.
    let every = if pipeline.store().changes().is_some() {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(50)
    };
    let _watch = pipeline.watch(every);
    let _upstreams = upstreams.run(pipeline.clone());
    let _rules_watch = pipeline.watch_rules();
    pipeline.remove_write_leftovers();
    let books = setup::Books::open(&loaded, &url, &pipeline).await?;
    let addr = match args.listen {
        Some(a) => a,
        None => aether_policy::config::listen_address(&loaded.raw.server.listen)
            .map_err(|e| anyhow::anyhow!("server.listen {e}"))?,
    };
    let auth = loaded.raw.server.auth;
    if !addr.ip().is_loopback() && auth == HttpAuth::None {
        anyhow::bail!(
            "refusing to listen on {addr} with server.auth = \"none\": anyone who can reach the port \
             would act as {:?}; use tokens (server.auth = \"token\") or listen on 127.0.0.1",
            loaded.raw.server.http_agent
        );
    }
    // Bind first: the gate answers to the address actually bound (port 0 picks one).
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    // Aether as its own authorization server: its tokens are checked with its own key.
    let authority =
        aether_server::authz::Authority::from_config(&loaded.raw.auth, pipeline.store())
            .map_err(anyhow::Error::msg)?
            .map(std::sync::Arc::new);
    let builtin = authority
        .as_ref()
        .map(|a| aether_server::oauth::Builtin::new(a.verifier(), pipeline.store().clone()));
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
        auth,
        shutdown: shutdown.clone(),
        upstreams,
        public_hosts: loaded.raw.server.public_hosts.clone(),
        max_sessions: loaded.raw.server.max_sessions,
        max_sessions_per_caller: loaded.raw.server.max_sessions_per_caller,
        session_sleep: match loaded.raw.server.session_sleep_seconds {
            0 => None,
            s => Some(Duration::from_secs(s)),
        },
        oauth: aether_server::oauth::OAuth::from_config(
            &loaded.raw.auth,
            &loaded.raw.server.http_agent,
            builtin,
        )
        .map(std::sync::Arc::new),
        authority,
        trace_url: loaded.raw.console.trace_url.clone(),
        console_sign_in: loaded.raw.console.oidc.clone().map(|config| {
            std::sync::Arc::new(aether_server::console_oidc::ConsoleSignIn::new(
                config,
                pipeline.store(),
            ))
        }),
    };
    let app = router(pipeline.clone(), &opts)?;
    let tokens = match auth {
        HttpAuth::Token | HttpAuth::OAuth => true,
        HttpAuth::None => false,
        HttpAuth::Auto => {
            loaded.raw.auth.enabled() || !addr.ip().is_loopback() || pipeline.agent_tokens() > 0
        }
    };
    // The console's first admin: a one-time link while no account exists.
    let setup_link = match pipeline.store().accounts().await {
        Ok(accounts) if accounts.is_empty() => {
            match aether_pipeline::accounts::mint_setup_link(pipeline.store()).await {
                // A listener on every address still answers to 127.0.0.1.
                Ok(token) => Some(if addr.ip().is_unspecified() {
                    format!("http://127.0.0.1:{}/setup#{token}", addr.port())
                } else {
                    format!("http://{addr}/setup#{token}")
                }),
                Err(e) => {
                    tell!("aether: cannot make the console's setup link: {e}");
                    None
                }
            }
        }
        _ => None,
    };
    let stdio = stdio_arguments(&args, &loaded, &url, &roots);
    print_banner(
        addr,
        &loaded.source,
        &aether_store::redact_url(&url),
        &roots,
        tokens,
        &opts.agent,
        setup_link.as_deref(),
        stdio,
    );
    let signal = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        signal.cancel();
    });
    let served = serve_http(listener, app, shutdown).await;
    pipeline.shut_down(Duration::from_secs(10)).await;
    books.close(&pipeline).await;
    telemetry.close().await;
    served.context("the HTTP server stopped")?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of the stdio entry a host starts: this server's configuration (by its
/// absolute path) and store, so the process the host starts — from whatever folder — runs by
/// the same rules, agents and halt; and the roots when they did not come from the
/// configuration.
fn stdio_arguments(
    args: &Args,
    loaded: &setup::Loaded,
    store_url: &str,
    roots: &[aether_policy::paths::RootSpec],
) -> Vec<String> {
    let mut out = vec!["mcp-serve".to_string()];
    if let Some(file) = &loaded.file {
        let file = std::fs::canonicalize(file)
            .or_else(|_| std::path::absolute(file))
            .unwrap_or_else(|_| file.clone());
        out.extend(["--config".to_string(), file.display().to_string()]);
    }
    // The store, unless the configuration names it (a URL with a password stays there).
    if loaded.file.is_none() || args.common.store.is_some() || loaded.raw.store.url.is_none() {
        // A password is not printed (the operator fills it in, or names the store in the
        // configuration instead).
        out.extend(["--store".to_string(), aether_store::redact_url(store_url)]);
    }
    let agent = &loaded.raw.server.http_agent;
    if agent != aether_policy::config::DEFAULT_AGENT {
        out.extend(["--agent".to_string(), agent.clone()]);
    }
    if !args.roots.is_empty() || loaded.raw.roots.is_empty() {
        for r in roots {
            out.push("--root".to_string());
            out.push(format!("{}={}:{}", r.name, r.path, r.mode.as_str()));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn print_banner(
    addr: SocketAddr,
    config: &str,
    store: &str,
    roots: &[aether_policy::paths::RootSpec],
    tokens: bool,
    agent: &str,
    setup_link: Option<&str>,
    stdio_args: Vec<String>,
) {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "aether".into());
    say!("Aether {} is serving.", env!("CARGO_PKG_VERSION"));
    say!("  MCP (Streamable HTTP): http://{addr}/mcp");
    say!("  configuration:         {config}");
    say!("  store:                 {store}");
    for r in roots {
        say!(
            "  root {:<17} {} ({})",
            format!("{}:", r.name),
            r.path,
            r.mode.as_str()
        );
    }
    if tokens {
        say!("  callers:               bearer token per agent (aether tokens create --agent NAME)");
    } else {
        say!(
            "  callers:               act as agent {agent:?} (no token until one is created: aether tokens create --agent NAME)"
        );
    }
    let mut http = json!({"mcpServers": {"aether": {"url": format!("http://{addr}/mcp")}}});
    if tokens {
        http["mcpServers"]["aether"]["headers"] =
            json!({"Authorization": "Bearer <token from aether tokens create --agent NAME>"});
    }
    let stdio = json!({"mcpServers": {"aether": {"command": exe, "args": stdio_args}}});
    say!();
    say!("For an MCP host that connects by URL (LM Studio's mcp.json, Cursor, ...):");
    say!(
        "{}",
        serde_json::to_string_pretty(&http).unwrap_or_default()
    );
    say!();
    say!(
        "For a host that starts Aether itself over stdio (Claude Desktop's claude_desktop_config.json):"
    );
    say!(
        "{}",
        serde_json::to_string_pretty(&stdio).unwrap_or_default()
    );
    say!();
    match setup_link {
        Some(link) => say!(
            "Console: http://{addr}/console — no account yet; make the first admin (one use, 24 h):\n  {link}\n"
        ),
        None => say!("Console: http://{addr}/console\n"),
    }
    say!("Stop with Ctrl-C. Halt every call with `aether halt --why \"...\"`.");
}

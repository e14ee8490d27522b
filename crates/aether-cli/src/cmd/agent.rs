//! `aether agent run`: a model loop under one agent's identity, every tool call through the
//! pipeline, with the rounds and calls shown as they happen.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use aether_runner::{RunRequest, Runner, Status};
use anyhow::{Result, anyhow};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;

use crate::cmd::runs::one_line;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a task: the model works through the agent's catalog until it answers.
    Run(RunArgs),
}

#[derive(ClapArgs, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// The agent (from aether.toml) whose identity and catalog the run has.
    #[arg(long, default_value = aether_policy::config::DEFAULT_AGENT)]
    agent: String,
    /// The model connection (`[models.NAME]`).
    #[arg(long)]
    model: String,
    /// A root to serve, NAME=PATH[:ro|rw|sealed]; repeat for several. Default: the
    /// configuration's roots, else the current folder read-only.
    #[arg(long = "root")]
    roots: Vec<String>,
    /// Rounds before the last request without tools (default: the connection's, 40).
    #[arg(long)]
    max_rounds: Option<u32>,
    /// Tokens (prompt and completion) the run may spend.
    #[arg(long)]
    cost_cap: Option<u64>,
    /// Print the outcome as JSON (the live view still goes to stderr).
    #[arg(long)]
    json: bool,
    /// No live view.
    #[arg(long, short)]
    quiet: bool,
    /// The task.
    task: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    let Command::Run(args) = command;
    if args.task.trim().is_empty() {
        return Err(anyhow!("the task is empty"));
    }
    if args.max_rounds.is_some_and(|n| !(1..=200).contains(&n)) {
        return Err(anyhow!("--max-rounds must be between 1 and 200"));
    }
    if args.cost_cap == Some(0) {
        return Err(anyhow!("--cost-cap must be at least 1 token"));
    }
    let loaded = setup::load(&args.common)?;
    let telemetry = crate::telemetry::start(&loaded.raw.telemetry)?;
    let client =
        crate::cmd::models::client(&loaded, &args.common, &args.model, Some(&args.agent)).await?;
    let roots = setup::roots(&args.roots, &loaded, true)?;
    let url = setup::store_url(&args.common, &loaded, &loaded.base);
    // A rules file that cannot be read stops the start before anything is made.
    setup::rules(&loaded)?;
    let store = setup::open_store(&url, &loaded)?;
    let _controls = setup::guard_control_files(&loaded, &roots).await;
    let (upstreams, external) = setup::upstreams(&loaded, &store, &roots).await;
    let (pipeline, host) =
        setup::pipeline_and_host(&loaded, &roots, store, false, external).await?;
    let _watch = pipeline.watch(Duration::from_millis(200));
    let _upstreams = upstreams.run(pipeline.clone());
    // A run writes as a server does: its heartbeat kept, its writes' roots flushed at the end.
    let books = setup::Books::open(&loaded, &url, &pipeline).await?;
    let mut runner = Runner::new(pipeline.clone(), client).in_host(host.clone());
    if !args.quiet {
        // While the model is asked: a spinner on a terminal, a heartbeat line in a log.
        let waiting = std::sync::Mutex::new(None);
        runner = runner.watch(Arc::new(move |kind: &str, body: &Value| {
            live_view(&waiting, kind, body)
        }));
    }
    // Ctrl-C stops the run as `aether runs stop` would: the call in flight is cancelled and
    // audited, and the run is recorded as stopped.
    let interrupted = tokio_util::sync::CancellationToken::new();
    let on_signal = interrupted.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            tell!("aether: stopping the run (Ctrl-C)");
            on_signal.cancel();
        }
    });
    let outcome = runner
        .run(RunRequest {
            agent: args.agent.clone(),
            task: args.task.clone(),
            parent: None,
            max_rounds: args.max_rounds,
            cost_cap_tokens: args.cost_cap,
            budget: None,
            depth: 0,
            cancel: Some(interrupted),
            subject: None,
            scope: None,
            trace: None,
        })
        .await
        .map_err(|e| anyhow!(e))?;
    // Runs its tools started end too (they see the parent's end within a poll) before the
    // process does, so none is left recorded as running.
    if !host.settle(Duration::from_secs(10)).await {
        tell!("aether: a run started by a tool did not end within 10 s");
    }
    pipeline.shut_down(Duration::from_secs(10)).await;
    books.close(&pipeline).await;
    telemetry.close().await;
    if args.json {
        say!(
            "{}",
            serde_json::json!({
                "id": outcome.id, "status": outcome.status.as_str(), "answer": outcome.answer,
                "error": outcome.error, "rounds": outcome.rounds,
                "prompt_tokens": outcome.usage.prompt, "completion_tokens": outcome.usage.completion,
                "model_ms": outcome.model_time.as_secs_f64() * 1e3,
                "tool_ms": outcome.tool_time.as_secs_f64() * 1e3,
                "total_ms": outcome.total_time.as_secs_f64() * 1e3,
            })
        );
    } else if let Some(answer) = &outcome.answer {
        say!("{answer}");
    }
    if outcome.status == Status::Done {
        Ok(ExitCode::SUCCESS)
    } else {
        tell!(
            "aether: run {} ended {}: {}",
            outcome.id,
            outcome.status.as_str(),
            outcome.error.unwrap_or_default()
        );
        Ok(ExitCode::FAILURE)
    }
}

/// One line on stderr per transcript entry worth seeing; between asking the model and its
/// answer, `waiting` holds the wait being shown.
fn live_view(
    waiting: &std::sync::Mutex<Option<crate::progress::ModelWait>>,
    kind: &str,
    body: &Value,
) {
    let s = |k: &str| body[k].as_str().unwrap_or_default().to_string();
    let line = match kind {
        "start" => format!(
            "run: agent {} on {} ({} tools, up to {} rounds)",
            s("agent"),
            s("model"),
            body["tools"],
            body["max_rounds"]
        ),
        "request" if body["final"] == true => "final request, without tools".to_string(),
        "request" => format!("round {}: asking the model", body["round"]),
        "reply" => {
            let calls = body["tool_calls"].as_array().map_or(0, Vec::len);
            format!(
                "round {}: reply in {} ms, {} tool call(s), {}+{} tokens",
                body["round"], body["ms"], calls, body["prompt_tokens"], body["completion_tokens"]
            )
        }
        "tool" => format!(
            "  {} {} -> {}{}",
            s("name"),
            one_line(&s("arguments"), 80),
            s("outcome"),
            body["ms"]
                .as_u64()
                .map_or(String::new(), |ms| format!(" ({ms} ms)"))
        ),
        "notice" => format!("  … {}", one_line(&body.to_string(), 120)),
        "quarantined" => format!(
            "round {}: tool-call markup quarantined: {}",
            body["round"],
            s("why")
        ),
        "cut_off" => format!(
            "round {}: reply cut off at the output limit; nothing ran",
            body["round"]
        ),
        "model_error" => format!("round {}: {}", body["round"], s("error")),
        "end" => format!(
            "run ended {} after {} round(s), {}+{} tokens",
            s("status"),
            body["rounds"],
            body["prompt_tokens"],
            body["completion_tokens"]
        ),
        _ => return,
    };
    let mut wait = waiting.lock().unwrap_or_else(|e| e.into_inner());
    // Whatever comes after the question (a reply, an error, the end) ends the wait.
    wait.take();
    let _ = writeln!(std::io::stderr(), "{}", crate::terminal_safe(&line));
    if kind == "request" {
        *wait = Some(crate::progress::ModelWait::start(
            &body["round"].to_string(),
        ));
    }
}

//! `aether runs list|show|stop`: agent runs as the store keeps them, with their transcripts;
//! a stop from here ends a run in another terminal before its next model request or call.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;

use crate::cmd::audit::time_of;
use crate::setup::{self, Common};

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The newest runs first.
    List(ListArgs),
    /// One run with its full transcript.
    Show(IdArgs),
    /// Ask a running run to stop.
    Stop(StopArgs),
}

#[derive(ClapArgs, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct IdArgs {
    #[command(flatten)]
    common: Common,
    id: String,
    #[arg(long)]
    json: bool,
}

#[derive(ClapArgs, Debug)]
pub struct StopArgs {
    #[command(flatten)]
    common: Common,
    id: String,
    /// Why (kept with the run).
    #[arg(long, default_value = "")]
    why: String,
}

pub async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::List(args) => {
            let store = setup::existing_store(&args.common)?;
            let runs = store.runs(args.limit).await?;
            if runs.is_empty() && !args.json {
                say!(
                    "No agent runs yet. Start one: aether agent run --agent NAME --model NAME \"task\""
                );
            }
            if args.json {
                crate::json_lines(&runs)?;
                return Ok(ExitCode::SUCCESS);
            }
            let lines: Vec<Vec<String>> = runs
                .iter()
                .map(|r| {
                    vec![
                        r.id.clone(),
                        time_of(r.started_us),
                        r.status.clone(),
                        r.agent.clone(),
                        r.model.clone(),
                        format!("rounds {}", r.rounds),
                        format!("tokens {}", r.prompt_tokens + r.completion_tokens),
                        one_line(&r.task, 60),
                    ]
                })
                .collect();
            crate::columns::Columns::default().print(&lines);
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let store = setup::existing_store(&args.common)?;
            let Some(run) = store.run(&args.id).await? else {
                bail!("no run {:?} (aether runs list shows them)", args.id);
            };
            let events = store.run_events(&args.id).await?;
            if args.json {
                let events: Vec<Value> = events
                    .iter()
                    .map(|e| {
                        serde_json::json!({"seq": e.seq, "at_us": e.at_us, "kind": e.kind,
                            "body": serde_json::from_str::<Value>(&e.body).unwrap_or(Value::Null)})
                    })
                    .collect();
                crate::json_line(&serde_json::json!({"run": run, "events": events}))?;
                return Ok(ExitCode::SUCCESS);
            }
            say!("run      {}", run.id);
            if let Some(parent) = &run.parent {
                say!("parent   {parent}");
            }
            say!("agent    {}  on model connection {}", run.agent, run.model);
            say!("status   {}", run.status);
            say!(
                "started  {}{}",
                time_of(run.started_us),
                run.ended_us
                    .map_or(String::new(), |e| format!(", ended {}", time_of(e)))
            );
            say!(
                "rounds   {}, tokens {} prompt + {} completion",
                run.rounds,
                run.prompt_tokens,
                run.completion_tokens
            );
            if let Some(by) = &run.stop_by {
                say!(
                    "stop     asked by {by}: {}",
                    run.stop_why.as_deref().unwrap_or("")
                );
            }
            say!("task     {}", run.task);
            for e in &events {
                say!("\n[{}] {} {}", e.seq, time_of(e.at_us), e.kind);
                let body: Value = serde_json::from_str(&e.body).unwrap_or(Value::Null);
                say!("{}", serde_json::to_string_pretty(&body)?);
            }
            if let Some(answer) = &run.answer {
                say!("\nanswer\n{answer}");
            }
            if let Some(error) = &run.error {
                say!("\nerror    {error}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Stop(args) => {
            let store = setup::existing_store(&args.common)?;
            let by = setup::operator();
            let lost = store
                .run(&args.id)
                .await?
                .is_some_and(|r| r.status == "interrupted" && r.ended_us.is_none());
            if store.run_stop(&args.id, &by, &args.why).await? {
                match lost {
                    true => say!(
                        "run {} had lost its process (its lease lapsed); it is recorded as interrupted",
                        args.id
                    ),
                    false => say!(
                        "asked run {} to stop; it stops before its next model request or tool call",
                        args.id
                    ),
                }
                return Ok(ExitCode::SUCCESS);
            }
            match store.run(&args.id).await? {
                None => bail!("no run {:?} (aether runs list shows them)", args.id),
                Some(r) if r.status != "running" => {
                    bail!("run {} is not running (it ended {})", r.id, r.status)
                }
                Some(r) => bail!(
                    "run {} was already asked to stop by {}",
                    r.id,
                    r.stop_by.unwrap_or_default()
                ),
            }
        }
    }
}

/// `text` on one line (whitespace runs as one space), cut at `max` characters with a `…`.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

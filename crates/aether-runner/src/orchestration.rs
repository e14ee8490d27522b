//! The orchestration tools: `delegate` (a task handed to a named worker agent: a run under
//! that agent's own profile, its answer returned), `reply` (the run's final answer) and
//! `spawn_subagents` (Elevated: parallel runs, a bounded number, one shared cost cap).
//!
//! They are catalog tools like any other: offered by the agent's profile (supervisors always
//! get `delegate` and `reply`), admitted, receipted and audited by the pipeline. The runs they
//! start are runs like any other, each under its own agent's profile, recorded with the
//! starting run as parent; they share the starting run's token budget, end when it is
//! stopped, and nest at most [`MAX_DEPTH`] deep.

use std::sync::Arc;

use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Tier, ToolDef, ToolMeta};
use aether_tools_core::{CallContext, Content, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::host::{Budget, Host, MAX_DEPTH};
use crate::run::{REPLY, RunOutcome, RunRequest, Runner, Status};

pub const DELEGATE: &str = "delegate";
pub const SPAWN_SUBAGENTS: &str = "spawn_subagents";

/// Subagents one `spawn_subagents` call may start.
pub const MAX_SUBAGENTS: usize = 4;

/// The three tools, bound to `host` (whose pipeline is set once it exists).
pub fn tools(host: Arc<Host>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Delegate {
            def: def(
                DELEGATE,
                "Delegate",
                Tier::Standard,
                "Hand a task to a named worker agent. It works on it with its own tools and \
                 permissions, and its final answer comes back as this call's result.",
                schema_of::<DelegateArgs>(),
                schema_of::<RunResult>(),
            ),
            host: host.clone(),
        }),
        Arc::new(Reply {
            def: def(
                REPLY,
                "Reply",
                Tier::Standard,
                "Give the final answer to the user. In an agent run this ends the run with this \
                 text as its answer.",
                schema_of::<ReplyArgs>(),
                schema_of::<Replied>(),
            ),
            host: host.clone(),
        }),
        Arc::new(SpawnSubagents {
            def: def(
                SPAWN_SUBAGENTS,
                "Spawn subagents",
                Tier::Elevated,
                "Run up to 4 research subagents in parallel, one per task, under your own \
                 profile (or a named worker agent's). They share your run's token budget; each \
                 one's answer comes back.",
                schema_of::<SpawnArgs>(),
                schema_of::<Spawned>(),
            ),
            host,
        }),
    ]
}

fn def(
    name: &str,
    title: &str,
    tier: Tier,
    description: &str,
    input: Value,
    output: Value,
) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: groups::ORCHESTRATION.into(),
        tier,
        description: description.into(),
        input_schema: input,
        output_schema: output,
        arguments: Default::default(),
        meta: ToolMeta::local_writer(),
    }
}

/// Offered only where a run can be started: a model connection is configured.
fn needs_models(host: &Host) -> Result<(), String> {
    if host.models.any() {
        Ok(())
    } else {
        Err("no model connection is configured ([models.NAME] in aether.toml)".into())
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    /// The worker agent (an agent of aether.toml, not yourself).
    #[schemars(length(min = 1, max = 64))]
    agent: String,
    /// What it should do; say what you want back.
    #[schemars(length(min = 1, max = 20000))]
    task: String,
}

#[derive(Serialize, JsonSchema)]
struct RunResult {
    /// The run's id (`aether runs show ID`).
    run: String,
    /// done, failed, stopped, halted or cost_cap.
    status: String,
    answer: Option<String>,
    error: Option<String>,
}

impl RunResult {
    fn of(o: &RunOutcome) -> RunResult {
        RunResult {
            run: o.id.clone(),
            status: o.status.as_str().into(),
            answer: o.answer.clone(),
            error: o.error.clone(),
        }
    }
}

struct Delegate {
    def: ToolDef,
    host: Arc<Host>,
}

#[async_trait]
impl Tool for Delegate {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, _agent: &AgentProfile) -> Result<(), String> {
        needs_models(&self.host)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: DelegateArgs = parse_args(args)?;
        if a.agent == cx.agent.name {
            return Err(ToolError::InvalidArguments(
                "an agent cannot delegate to itself; do the work, or name another agent".into(),
            ));
        }
        let outcome = start(&self.host, &cx, vec![(a.agent, a.task)])
            .await?
            .remove(0);
        // Stopped because the run that made this call (or one above it) was stopped, which the
        // delegated run may see before this call is cancelled: the call was cut short by that
        // stop, as every call of a stopped run is.
        if outcome.status == Status::Stopped
            && (cx.cancel.is_cancelled() || caller_stopped(&self.host, &cx.session).await)
        {
            return Err(ToolError::Cancelled);
        }
        let result = RunResult::of(&outcome);
        let text = match outcome.status {
            Status::Done => outcome.answer.clone().unwrap_or_default(),
            other => format!(
                "The delegated run {} ended {}: {}",
                outcome.id,
                other.as_str(),
                outcome.error.clone().unwrap_or_default()
            ),
        };
        Ok(ToolOutput {
            content: vec![Content::Text(text)],
            structured: serde_json::to_value(result).ok(),
            is_error: outcome.status != Status::Done,
        })
    }
}

/// Whether the run of `session` (`run:ID`), or one that started it, has been asked to stop.
async fn caller_stopped(host: &Host, session: &str) -> bool {
    let (Some(mut next), Some(pipeline)) = (
        session.strip_prefix("run:").map(String::from),
        host.pipeline(),
    ) else {
        return false;
    };
    for _ in 0..=MAX_DEPTH {
        match pipeline.store().run(&next).await {
            Ok(Some(run)) if run.stop_by.is_some() => return true,
            Ok(Some(run)) => match run.parent {
                Some(parent) => next = parent,
                None => return false,
            },
            _ => return false,
        }
    }
    false
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplyArgs {
    /// The final answer.
    #[schemars(length(min = 1, max = 100000))]
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Replied {
    replied: bool,
    /// The reply's length in characters.
    chars: usize,
}

struct Reply {
    def: ToolDef,
    host: Arc<Host>,
}

#[async_trait]
impl Tool for Reply {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, _agent: &AgentProfile) -> Result<(), String> {
        needs_models(&self.host)
    }

    /// The runner reads the answer from the call's arguments once the pipeline has let it
    /// run; the tool itself only acknowledges it.
    async fn call(&self, _cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: ReplyArgs = parse_args(args)?;
        Ok(ToolOutput {
            content: vec![Content::Text("Your reply is recorded.".into())],
            structured: Some(json!({"replied": true, "chars": a.text.chars().count()})),
            is_error: false,
        })
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    /// One task per subagent, 1 to 4.
    #[schemars(length(min = 1, max = 4))]
    tasks: Vec<String>,
    /// The agent they run as (default: yourself).
    #[schemars(length(min = 1, max = 64))]
    agent: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Spawned {
    runs: Vec<RunResult>,
}

struct SpawnSubagents {
    def: ToolDef,
    host: Arc<Host>,
}

#[async_trait]
impl Tool for SpawnSubagents {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, _agent: &AgentProfile) -> Result<(), String> {
        needs_models(&self.host)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: SpawnArgs = parse_args(args)?;
        if a.tasks.is_empty() || a.tasks.len() > MAX_SUBAGENTS {
            return Err(ToolError::InvalidArguments(format!(
                "give 1 to {MAX_SUBAGENTS} tasks (this was {})",
                a.tasks.len()
            )));
        }
        if let Some(t) = a
            .tasks
            .iter()
            .find(|t| t.trim().is_empty() || t.chars().count() > 20_000)
        {
            return Err(ToolError::InvalidArguments(format!(
                "every task needs 1 to 20000 characters ({} here)",
                t.chars().count()
            )));
        }
        let agent = a.agent.unwrap_or_else(|| cx.agent.name.clone());
        let jobs = a.tasks.into_iter().map(|t| (agent.clone(), t)).collect();
        let outcomes = start(&self.host, &cx, jobs).await?;
        let mut text = String::new();
        for (i, o) in outcomes.iter().enumerate() {
            let body = match o.status {
                Status::Done => o.answer.clone().unwrap_or_default(),
                other => format!(
                    "(ended {}: {})",
                    other.as_str(),
                    o.error.clone().unwrap_or_default()
                ),
            };
            text.push_str(&format!("## Subagent {} (run {})\n{body}\n\n", i + 1, o.id));
        }
        let runs = outcomes.iter().map(RunResult::of).collect();
        Ok(ToolOutput {
            content: vec![Content::Text(text.trim_end().to_string())],
            structured: serde_json::to_value(Spawned { runs }).ok(),
            is_error: outcomes.iter().all(|o| o.status != Status::Done),
        })
    }
}

/// Starts one run per `(agent, task)`, in parallel, as children of the caller's run (if the
/// caller is a run): its connection unless the agent may not use it, its budget, one level
/// deeper. Each run is a task of its own, so a caller that goes away (the call's time limit)
/// leaves no run half-recorded: the runs see the call's cancellation and stop.
async fn start(
    host: &Arc<Host>,
    cx: &CallContext,
    jobs: Vec<(String, String)>,
) -> Result<Vec<RunOutcome>, ToolError> {
    let pipeline = host
        .pipeline()
        .ok_or_else(|| ToolError::failed("the agent runner is not ready"))?;
    let parent = host.live(&cx.session);
    let depth = parent.as_ref().map_or(1, |(_, p)| p.depth + 1);
    if depth > MAX_DEPTH {
        return Err(ToolError::denied(
            "orchestration:depth",
            format!("runs nest at most {MAX_DEPTH} deep, and this one would be {depth} deep"),
        ));
    }
    // Every run is checked and its client made before any starts: all or none.
    let mut prepared = Vec::new();
    for (agent, task) in jobs {
        if pipeline
            .session(&agent, aether_pipeline::Transport::InProcess, String::new())
            .is_err()
        {
            return Err(ToolError::InvalidArguments(format!(
                "no agent is named {agent:?} (delegate to an agent of aether.toml)"
            )));
        }
        // The caller's identity is its own; another agent's profile is reached only where
        // the operator listed it as the caller's worker.
        if agent != cx.agent.name && !host.models.may_delegate(&cx.agent.name, &agent) {
            return Err(ToolError::denied(
                "orchestration:workers",
                format!(
                    "{agent:?} is not one of {:?}'s workers (agents.{}.workers in aether.toml)",
                    cx.agent.name, cx.agent.name
                ),
            ));
        }
        let model = host
            .models
            .choose(&agent, parent.as_ref().map(|(_, p)| p.model.as_str()))
            .map_err(ToolError::Failed)?;
        let client = host
            .models
            .client(pipeline.store(), &model, &agent)
            .await
            .map_err(ToolError::Failed)?;
        prepared.push((agent, task, client));
    }
    // A run started outside any run (an MCP client's call) gets its connection's cap.
    let budget = match &parent {
        Some((_, p)) => p.budget.clone(),
        None => Budget::new(
            prepared
                .first()
                .and_then(|(_, _, c)| c.spec().cost_cap_tokens),
        ),
    };
    let mut runs = Vec::new();
    for (agent, task, client) in prepared {
        let runner = Runner::new(pipeline.clone(), client).in_host(host.clone());
        let request = RunRequest {
            agent,
            task,
            parent: parent.as_ref().map(|(id, _)| id.clone()),
            max_rounds: None,
            cost_cap_tokens: None,
            budget: Some(budget.clone()),
            depth,
            cancel: Some(cx.cancel.clone()),
            subject: cx.subject.clone(),
            scope: cx.scope.clone(),
            trace: cx.trace.clone(),
        };
        runs.push(host.spawn(async move { runner.run(request).await }));
    }
    // Every run is waited for, even after one fails, so none is left running unwatched.
    let mut outcomes = Vec::new();
    let mut failure = None;
    for run in runs {
        match run.await {
            Ok(Ok(o)) => outcomes.push(o),
            Ok(Err(e)) => failure = Some(ToolError::Failed(e)),
            Err(e) => {
                failure = Some(ToolError::failed(format!(
                    "a run failed inside Aether: {e}"
                )))
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(outcomes)
}

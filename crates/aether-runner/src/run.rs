//! One run: the turn loop, its checks, and its transcript.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_pipeline::{CallOutcome, Pipeline, Transport};
use aether_store::{RunStart, Store};
use aether_tools_core::{ClientLink, Content, LogLevel};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::host::{Budget, Host, LiveRun, MAX_DEPTH};
use crate::model::{ModelClient, ModelError, Reply, Usage};

/// The tool whose call ends a run with its `text` as the run's answer (the tool itself is
/// `orchestration`'s).
pub const REPLY: &str = "reply";

/// Characters of a tool's result or a model's text a transcript entry keeps.
const TRANSCRIPT_CHARS: usize = 4_000;

/// How often a model request in flight looks for a stop or a halt.
const STOP_POLL: Duration = Duration::from_millis(250);

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The model gave its answer.
    Done,
    /// The model server failed, or the run could not go on.
    Failed,
    /// Someone asked it to stop.
    Stopped,
    /// An operator halted Aether.
    Halted,
    /// The run spent its token budget.
    CostCap,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::Failed => "failed",
            Status::Stopped => "stopped",
            Status::Halted => "halted",
            Status::CostCap => "cost_cap",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub agent: String,
    pub task: String,
    /// The run that started this one, if any.
    pub parent: Option<String>,
    /// Rounds before the last request without tools (from the connection unless set).
    pub max_rounds: Option<u32>,
    /// Tokens the run may spend (from the connection unless set). Ignored when `budget` is
    /// given.
    pub cost_cap_tokens: Option<u64>,
    /// A budget shared with the run that started this one.
    pub budget: Option<Arc<Budget>>,
    /// How many runs deep this one is (0: started by a person).
    pub depth: u32,
    /// Cancelled when whatever started the run goes away (the `delegate` call's time
    /// limit): the run then stops.
    pub cancel: Option<CancellationToken>,
    /// The person the run works for and what their OAuth token reaches, when a call with one
    /// started it: its calls are audited as theirs and reach no further.
    pub subject: Option<String>,
    pub scope: Option<Arc<aether_policy::ScopeReach>>,
    /// The W3C trace context of the call that started the run (`delegate`'s span): its model
    /// requests carry it as `traceparent`, and its tool calls continue it.
    pub trace: Option<String>,
}

#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub id: String,
    pub status: Status,
    pub answer: Option<String>,
    pub error: Option<String>,
    pub rounds: u32,
    pub usage: Usage,
    /// Time spent waiting for the model, and running tools (pipeline included).
    pub model_time: Duration,
    pub tool_time: Duration,
    pub total_time: Duration,
}

/// Sees each transcript entry as it is recorded (the terminal's live view).
pub type Watcher = Arc<dyn Fn(&str, &Value) + Send + Sync>;

pub struct Runner {
    pipeline: Arc<Pipeline>,
    model: Arc<ModelClient>,
    watcher: Option<Watcher>,
    host: Option<Arc<Host>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("model", &self.model)
            .finish()
    }
}

/// A run in progress.
struct Run<'a> {
    runner: &'a Runner,
    id: String,
    store: Store,
    usage: Usage,
    budget: Arc<Budget>,
    cancel: Option<CancellationToken>,
    model_time: Duration,
    tool_time: Duration,
    trace: Option<String>,
}

/// Why a run ends before its answer.
struct End {
    status: Status,
    error: String,
}

/// How long a run counts as alive without word from its process: 30 s, renewed every
/// 10 s; `AETHER_RUN_LEASE_MS` sets another (the tests' killed runs lapse in a second).
fn lease() -> Duration {
    std::env::var("AETHER_RUN_LEASE_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|ms| *ms >= 300)
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

impl Runner {
    pub fn new(pipeline: Arc<Pipeline>, model: ModelClient) -> Runner {
        Runner {
            pipeline,
            model: Arc::new(model),
            watcher: None,
            host: None,
        }
    }

    /// Registers this runner's runs with `host`, so the runs they start (`delegate`,
    /// `spawn_subagents`) find their parent.
    pub fn in_host(mut self, host: Arc<Host>) -> Runner {
        self.host = Some(host);
        self
    }

    pub fn watch(mut self, watcher: Watcher) -> Runner {
        self.watcher = Some(watcher);
        self
    }

    /// Runs `request` to its end; the run and its transcript are in the store under the
    /// returned id. `Err` only when the run could not be recorded at all.
    pub async fn run(&self, request: RunRequest) -> Result<RunOutcome, String> {
        let started = Instant::now();
        let spec = self.model.spec();
        let ctx = self
            .pipeline
            .session(&request.agent, Transport::InProcess, String::new())
            .map_err(|e| e.to_string())?;
        let id = uuid::Uuid::now_v7().to_string();
        let ctx = aether_pipeline::SessionContext {
            session_id: format!("run:{id}"),
            subject: request.subject.clone(),
            scope: request.scope.clone(),
            ..ctx
        };
        let store = self.pipeline.store().clone();
        store
            .run_start(RunStart {
                id: id.clone(),
                parent: request.parent.clone(),
                agent: request.agent.clone(),
                model: spec.name.clone(),
                task: request.task.clone(),
                lease_ms: lease().as_millis() as i64,
            })
            .await
            .map_err(|e| format!("the run could not be recorded, so it did not start: {e}"))?;
        let budget = request
            .budget
            .clone()
            .unwrap_or_else(|| Budget::new(request.cost_cap_tokens.or(spec.cost_cap_tokens)));
        let mut run = Run {
            runner: self,
            id,
            store,
            usage: Usage::default(),
            budget,
            cancel: request.cancel.clone(),
            model_time: Duration::ZERO,
            tool_time: Duration::ZERO,
            trace: request.trace.clone(),
        };
        if let Some(host) = &self.host {
            host.enter(
                &run.id,
                LiveRun {
                    model: spec.name.clone(),
                    depth: request.depth,
                    budget: run.budget.clone(),
                },
            );
        }
        let max_rounds = request.max_rounds.unwrap_or(spec.max_rounds).max(1);
        let tools = self.pipeline.openai_functions(&ctx);
        run.record(
            "start",
            json!({"agent": request.agent, "model": spec.name, "server_model": spec.model,
                   "task": request.task, "tools": tools.len(), "max_rounds": max_rounds,
                   "cost_cap_tokens": run.budget.cap, "parent": request.parent, "depth": request.depth}),
        )
        .await;
        let mut messages = vec![
            json!({"role": "system", "content": system_prompt(&request.agent)}),
            json!({"role": "user", "content": request.task}),
        ];
        let mut rounds = 0;
        // The run's lease is renewed while it turns: if this process dies, the lease lapses and
        // the run shows as interrupted instead of running for ever.
        let renew = {
            let (store, id) = (run.store.clone(), run.id.clone());
            async move {
                loop {
                    tokio::time::sleep(lease() / 3).await;
                    if let Err(e) = store.run_alive(&id).await {
                        tracing::warn!(run = %id, error = %e, "the run's lease could not be renewed");
                    }
                }
            }
        };
        let ended = tokio::select! {
            ended = run.turns(&ctx, &tools, &mut messages, max_rounds, &mut rounds) => ended,
            _ = renew => unreachable!("the lease is renewed until the run ends"),
        };
        let (status, answer, error) = match ended {
            Ok(answer) => (Status::Done, Some(answer), None),
            Err(end) => (end.status, None, Some(end.error)),
        };
        let _ = run
            .store
            .run_progress(
                &run.id,
                rounds as i64,
                run.usage.prompt as i64,
                run.usage.completion as i64,
            )
            .await;
        run.record(
            "end",
            json!({"status": status.as_str(), "answer": answer, "error": error, "rounds": rounds,
                   "prompt_tokens": run.usage.prompt, "completion_tokens": run.usage.completion}),
        )
        .await;
        if let Err(e) = run
            .store
            .run_finish(&run.id, status.as_str(), answer.clone(), error.clone())
            .await
        {
            tracing::error!(run = %run.id, error = %e, "the run's end could not be recorded");
        }
        if let Some(host) = &self.host {
            host.leave(&run.id);
        }
        Ok(RunOutcome {
            id: run.id,
            status,
            answer,
            error,
            rounds,
            usage: run.usage,
            model_time: run.model_time,
            tool_time: run.tool_time,
            total_time: started.elapsed(),
        })
    }
}

fn system_prompt(agent: &str) -> String {
    format!(
        "You are the agent {agent:?}. Use the tools you are given when they help; every call \
         is checked and recorded. When you have the answer, reply in plain text without calling \
         a tool."
    )
}

impl Run<'_> {
    /// The rounds: the answer, or why there is none.
    async fn turns(
        &mut self,
        ctx: &aether_pipeline::SessionContext,
        tools: &[Value],
        messages: &mut Vec<Value>,
        max_rounds: u32,
        rounds: &mut u32,
    ) -> Result<String, End> {
        while *rounds < max_rounds {
            *rounds += 1;
            let round = *rounds;
            self.check().await?;
            let reply = self.ask(round, messages, Some(tools)).await?;
            if let Some(why) = &reply.quarantined {
                messages.push(assistant_text(&reply));
                messages.push(json!({"role": "user", "content": format!(
                    "Your tool calls could not be read ({why}), so none of them ran. Write them again as standard tool calls with JSON arguments."
                )}));
                self.record("quarantined", json!({"round": round, "why": why}))
                    .await;
                continue;
            }
            if reply.finish_reason.as_deref() == Some("length") {
                messages.push(assistant_text(&reply));
                messages.push(json!({"role": "user", "content": format!(
                    "Your reply was cut off at the output limit ({} tokens), so nothing in it ran. Be shorter, or make one tool call at a time.",
                    self.runner.model.spec().max_tokens
                )}));
                self.record(
                    "cut_off",
                    json!({"round": round, "calls_dropped": reply.tool_calls.len()}),
                )
                .await;
                continue;
            }
            if reply.tool_calls.is_empty() {
                return Ok(reply.content.unwrap_or_default());
            }
            messages.push(json!({
                "role": "assistant",
                "content": reply.content.as_deref().map(kept),
                "tool_calls": reply.tool_calls.iter().map(|c| json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })).collect::<Vec<_>>(),
            }));
            for (i, call) in reply.tool_calls.iter().enumerate() {
                if let Err(end) = self.check().await {
                    // Every call the model made gets an answer, so the transcript reads whole.
                    for skipped in &reply.tool_calls[i..] {
                        messages.push(tool_message(
                            &skipped.id,
                            &format!("Not run: {}", end.error),
                        ));
                    }
                    return Err(end);
                }
                let (text, replied) = self.call(ctx, round, call).await;
                messages.push(tool_message(&call.id, &text));
                if let Some(answer) = replied {
                    return Ok(answer);
                }
            }
        }
        // The round limit: one last request, without tools, for the final words.
        self.check().await?;
        messages.push(json!({"role": "user", "content": format!(
            "You have used all {max_rounds} rounds, so no more tools can run. Answer now, in plain text, with what you have."
        )}));
        let reply = self.ask(max_rounds + 1, messages, None).await?;
        Ok(reply.content.unwrap_or_default())
    }

    /// Before every model request and tool call: the stop flag, the halt, the cost cap.
    async fn check(&self) -> Result<(), End> {
        self.stop_or_halt().await?;
        if self.budget.exhausted() {
            return Err(End {
                status: Status::CostCap,
                error: format!(
                    "the run spent {} tokens of its {}-token cap",
                    self.budget.spent(),
                    self.budget.cap.unwrap_or_default()
                ),
            });
        }
        Ok(())
    }

    /// The stop flag (this run's, or that of a run that started it) and the halt; also
    /// looked at while a model request is in flight.
    async fn stop_or_halt(&self) -> Result<(), End> {
        if self
            .cancel
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            return Err(End {
                status: Status::Stopped,
                error: "whatever started this run went away (Ctrl-C, the stop or time limit of the call that started it)".into(),
            });
        }
        let mut next = Some(self.id.clone());
        for _ in 0..=MAX_DEPTH {
            let Some(current) = next.take() else { break };
            match self.store.run(&current).await {
                Ok(Some(run)) if run.stop_by.is_some() => {
                    let whose = match current == self.id {
                        true => String::new(),
                        false => format!(" (the run {current}, which started this one)"),
                    };
                    return Err(End {
                        status: Status::Stopped,
                        error: format!(
                            "stopped by {}{whose} ({})",
                            run.stop_by.unwrap_or_default(),
                            run.stop_why.unwrap_or_default()
                        ),
                    });
                }
                Ok(Some(run)) => next = run.parent,
                Ok(None) => {}
                Err(e) => {
                    return Err(End {
                        status: Status::Failed,
                        error: format!("the run's record cannot be read: {e}"),
                    });
                }
            }
        }
        match self.store.halt_state().await {
            Ok(h) if h.halted => {
                return Err(End {
                    status: Status::Halted,
                    error: format!(
                        "Aether is halted by an operator ({})",
                        h.why.unwrap_or_default()
                    ),
                });
            }
            Ok(_) => {}
            Err(e) => {
                return Err(End {
                    status: Status::Failed,
                    error: format!("the halt flag cannot be read: {e}"),
                });
            }
        }
        Ok(())
    }

    /// One model request, given up if the run is stopped or Aether halted meanwhile.
    async fn ask(
        &mut self,
        round: u32,
        messages: &[Value],
        tools: Option<&[Value]>,
    ) -> Result<Reply, End> {
        self.record(
            "request",
            json!({"round": round, "messages": messages.len(), "tools": tools.map_or(0, <[Value]>::len),
                   "final": tools.is_none()}),
        )
        .await;
        let started = Instant::now();
        let model = self.runner.model.clone();
        let request = model.chat(messages, tools, self.trace.as_deref());
        tokio::pin!(request);
        let reply = loop {
            tokio::select! {
                reply = &mut request => break reply,
                _ = tokio::time::sleep(STOP_POLL) => self.stop_or_halt().await?,
            }
        };
        self.model_time += started.elapsed();
        let reply = reply.map_err(|e: ModelError| {
            let error = format!("round {round}: {e}");
            End {
                status: Status::Failed,
                error,
            }
        });
        let reply = match reply {
            Ok(r) => r,
            Err(end) => {
                self.record("model_error", json!({"round": round, "error": end.error}))
                    .await;
                return Err(end);
            }
        };
        self.usage.prompt = self.usage.prompt.saturating_add(reply.usage.prompt);
        self.usage.completion = self.usage.completion.saturating_add(reply.usage.completion);
        self.budget.spend(reply.usage.total());
        if self.budget.cap.is_some() && !reply.usage.reported {
            let error = format!(
                "round {round}: the model server reported no token usage, so the run's cost cap cannot be kept"
            );
            self.record("model_error", json!({"round": round, "error": error}))
                .await;
            return Err(End {
                status: Status::Failed,
                error,
            });
        }
        let _ = self
            .store
            .run_progress(
                &self.id,
                i64::from(round),
                self.usage.prompt as i64,
                self.usage.completion as i64,
            )
            .await;
        self.record(
            "reply",
            json!({"round": round, "ms": reply.elapsed.as_millis() as u64,
                   "content": reply.content.as_deref().map(clip),
                   "tool_calls": reply.tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": clip(&c.arguments)})).collect::<Vec<_>>(),
                   "finish_reason": reply.finish_reason,
                   "prompt_tokens": reply.usage.prompt, "completion_tokens": reply.usage.completion}),
        )
        .await;
        Ok(reply)
    }

    /// One tool call through the pipeline: the text the model reads back, and the run's
    /// answer when the call was a `reply` that ran.
    async fn call(
        &mut self,
        ctx: &aether_pipeline::SessionContext,
        round: u32,
        call: &crate::ToolCall,
    ) -> (String, Option<String>) {
        let arguments = match parse_arguments(&call.arguments) {
            Ok(a) => a,
            Err(why) => {
                let text = format!(
                    "Not run: the arguments of {} are not a JSON object ({why}). Call it again with a JSON object of its parameters.",
                    call.name
                );
                self.record(
                    "tool",
                    json!({"round": round, "name": call.name, "outcome": "not_run",
                                           "arguments": clip(&call.arguments), "text": text}),
                )
                .await;
                return (text, None);
            }
        };
        let reply_text = (call.name == REPLY)
            .then(|| {
                arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .flatten();
        let started = Instant::now();
        let link: Arc<dyn ClientLink> = Arc::new(RunLink {
            run: self.id.clone(),
            store: self.store.clone(),
            watcher: self.runner.watcher.clone(),
        });
        // A stop or a halt while the call runs (or waits for a person) cancels it: the
        // pipeline stops the tool and audits the call as cancelled.
        let cancel = match &self.cancel {
            Some(parent) => parent.child_token(),
            None => CancellationToken::new(),
        };
        let envelope = aether_pipeline::envelope::Envelope {
            trace: self.trace.clone(),
            ..Default::default()
        };
        let call_future = self.runner.pipeline.call_with(
            ctx,
            &call.name,
            Some(arguments),
            envelope,
            link,
            cancel.clone(),
        );
        tokio::pin!(call_future);
        let result = loop {
            tokio::select! {
                result = &mut call_future => break result,
                _ = tokio::time::sleep(STOP_POLL), if !cancel.is_cancelled() => {
                    if self.stop_or_halt().await.is_err() {
                        cancel.cancel();
                    }
                }
            }
        };
        let elapsed = started.elapsed();
        self.tool_time += elapsed;
        let (outcome, text) = outcome_text(result.outcome);
        self.record(
            "tool",
            json!({"round": round, "name": call.name, "call_id": result.call_id, "outcome": outcome,
                   "ms": elapsed.as_millis() as u64, "arguments": clip(&call.arguments), "text": clip(&text)}),
        )
        .await;
        (text, reply_text.filter(|_| outcome == "ok"))
    }

    /// Appends to the transcript (a transcript entry that cannot be written is logged; the
    /// audit, not the transcript, is the record of what ran).
    async fn record(&self, kind: &str, body: Value) {
        if let Some(w) = &self.runner.watcher {
            w(kind, &body);
        }
        if let Err(e) = self.store.run_event(&self.id, kind, body.to_string()).await {
            tracing::warn!(run = %self.id, error = %e, "a transcript entry could not be written");
        }
    }
}

/// A tool's way back to the run while it runs: progress and logs (a call waiting for a
/// person says so) go into the transcript.
struct RunLink {
    run: String,
    store: Store,
    watcher: Option<Watcher>,
}

impl RunLink {
    async fn note(&self, body: Value) {
        if let Some(w) = &self.watcher {
            w("notice", &body);
        }
        let _ = self
            .store
            .run_event(&self.run, "notice", body.to_string())
            .await;
    }
}

#[async_trait]
impl ClientLink for RunLink {
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.note(json!({"progress": progress, "total": total, "message": message}))
            .await;
    }

    async fn log(&self, level: LogLevel, data: Value) {
        self.note(json!({"level": format!("{level:?}").to_lowercase(), "data": data}))
            .await;
    }

    async fn create_message(&self, _: Value) -> Result<Value, String> {
        Err("an agent run cannot answer sampling requests".into())
    }

    async fn elicit(
        &self,
        _: aether_tools_core::Question,
    ) -> Result<aether_tools_core::Reply, String> {
        Err("an agent run has no user to ask".into())
    }
}

/// The model's arguments as a JSON object (an empty text is no arguments).
fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("they are a JSON {}", kind_of(&other))),
        Err(e) => Err(e.to_string()),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A call's outcome as the audit names it, and the text the model reads.
fn outcome_text(outcome: CallOutcome) -> (&'static str, String) {
    match outcome {
        CallOutcome::Ran(out) => {
            let text: Vec<String> = out
                .content
                .iter()
                .map(|c| match c {
                    Content::Text(t) => t.clone(),
                    other => format!("[{} content]", content_kind(other)),
                })
                .collect();
            let text = text.join("\n");
            if out.is_error {
                ("tool_error", format!("Error: {text}"))
            } else {
                ("ok", text)
            }
        }
        CallOutcome::Refused(r) => (
            "refused",
            format!("Refused by Aether ({}, {}): {}", r.step, r.rule, r.reason),
        ),
        CallOutcome::Cancelled { timed_out: true } => (
            "timed_out",
            "The call ran out of time and was stopped; try a narrower request".into(),
        ),
        CallOutcome::Cancelled { timed_out: false } => {
            ("cancelled", "The call was cancelled".into())
        }
        CallOutcome::Failed(message) => (
            "failed",
            format!("Aether could not complete the call: {message}"),
        ),
    }
}

fn content_kind(c: &Content) -> &'static str {
    match c {
        Content::Text(_) => "text",
        _ => "non-text",
    }
}

fn tool_message(id: &str, text: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": text})
}

/// The reply as plain assistant text (its tool calls, which did not run, left out).
fn assistant_text(reply: &Reply) -> Value {
    json!({"role": "assistant", "content": kept(reply.content.as_deref().unwrap_or_default())})
}

/// Characters of a reply's text the conversation keeps (a reply may be up to 8 MiB; the
/// conversation is sent again every round).
const KEPT_CHARS: usize = 32_000;

fn kept(text: &str) -> String {
    aether_policy::truncate::bound_text(text, KEPT_CHARS).into_owned()
}

fn clip(text: &str) -> String {
    aether_policy::truncate::bound_text(text, TRANSCRIPT_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments("").unwrap().len(), 0);
        assert_eq!(parse_arguments(" {\"path\": \"a\"} ").unwrap()["path"], "a");
        assert!(parse_arguments("[1]").unwrap_err().contains("array"));
        assert!(parse_arguments("\"path\"").unwrap_err().contains("string"));
        assert!(parse_arguments("{\"path\": ").is_err());
        assert!(parse_arguments("{'path': 'a'}").is_err());
    }
}

//! The planning tools: a team's plans (`create_plan`, `read_plan`, `update_plan`) and each
//! agent's own to-do list per run (`todo`), kept in the store as versioned documents.
//!
//! Whose plans a call sees comes from the caller's identity, never its arguments: an agent of
//! a team works on the team's plans (`team:NAME`), an agent without one on its own
//! (`agent:NAME`); a to-do list is always the agent's own, one per run (the session, unless
//! the call names a run), and never touches the team's plan.

use aether_policy::journal::Document;
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    CallContext, Content, LedgerError, Tool, ToolError, ToolOutput, parse_args, schema_of,
};

/// Steps a plan may have, and items a to-do list.
pub const MAX_STEPS: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Done,
    Blocked,
    Skipped,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Step {
    title: String,
    status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
struct Plan {
    goal: String,
    steps: Vec<Step>,
}

/// The plans a caller works on.
fn plan_scope(agent: &AgentProfile) -> String {
    match &agent.team {
        Some(team) => format!("team:{team}"),
        None => format!("agent:{}", agent.name),
    }
}

fn writer(name: &str, title: &str, description: &str, input: Value, output: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: groups::PLANNING.into(),
        tier: Tier::Standard,
        description: description.into(),
        input_schema: input,
        output_schema: output,
        arguments: Default::default(),
        meta: ToolMeta::local_writer(),
    }
}

async fn load_plan(cx: &CallContext, name: &str) -> Result<(Document, Plan), ToolError> {
    let scope = plan_scope(&cx.agent);
    let doc = cx
        .ledger
        .document("plan", &scope, name)
        .await?
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "no plan named {name:?} for {scope} (create_plan makes one)"
            ))
        })?;
    let plan: Plan = serde_json::from_str(&doc.body)
        .map_err(|e| ToolError::failed(format!("plan {name:?} is unreadable: {e}")))?;
    Ok((doc, plan))
}

fn plan_output(
    name: &str,
    plan: &Plan,
    version: i64,
    text: String,
) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput {
        content: vec![Content::Text(text)],
        structured: Some(json!({
            "name": name,
            "version": version,
            "goal": plan.goal,
            "steps": plan.steps.iter().enumerate().map(|(i, s)| json!({
                "step": i + 1, "title": s.title, "status": s.status, "result": s.result,
            })).collect::<Vec<_>>(),
        })),
        is_error: false,
    })
}

fn describe(plan: &Plan) -> String {
    plan.steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                "{}. [{}] {}{}",
                i + 1,
                serde_json::to_value(s.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                s.title,
                s.result
                    .as_ref()
                    .map(|r| format!(" — {r}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// The plan's name, unique in your team: 1-64 of letters, digits, '.', '-', '_'.
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    name: String,
    /// What the plan achieves.
    #[schemars(length(min = 1, max = 2000))]
    goal: String,
    /// The steps, in order (1-100).
    #[schemars(length(min = 1, max = 100))]
    steps: Vec<StepTitle>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(transparent)]
struct StepTitle(#[schemars(length(min = 1, max = 500))] String);

#[derive(Serialize, JsonSchema)]
struct PlanOut {
    name: String,
    version: i64,
    goal: String,
    steps: Vec<Value>,
}

pub struct CreatePlan(ToolDef);

#[async_trait]
impl Tool for CreatePlan {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: CreateArgs = parse_args(args)?;
        let plan = Plan {
            goal: a.goal,
            steps: a
                .steps
                .into_iter()
                .map(|t| Step {
                    title: t.0,
                    status: Status::Pending,
                    result: None,
                })
                .collect(),
        };
        let doc = Document {
            kind: "plan".into(),
            scope: plan_scope(&cx.agent),
            name: a.name.clone(),
            version: 1,
            body: serde_json::to_string(&plan).map_err(ToolError::failed)?,
            updated_us: crate::now_us(),
            updated_by: cx.agent.name.clone(),
        };
        cx.ledger.put_document(doc).await.map_err(|e| match e {
            LedgerError::AlreadyExists(_) => ToolError::InvalidArguments(format!(
                "a plan named {:?} already exists; read_plan shows it, update_plan changes it",
                a.name
            )),
            e => ToolError::from(e),
        })?;
        plan_output(
            &a.name,
            &plan,
            1,
            format!("Plan {} created:\n{}", a.name, describe(&plan)),
        )
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    name: String,
    /// Every step, instead of the next one to work on.
    #[serde(default)]
    all: bool,
}

pub struct ReadPlan(ToolDef);

#[async_trait]
impl Tool for ReadPlan {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: ReadArgs = parse_args(args)?;
        let (doc, plan) = load_plan(&cx, &a.name).await?;
        if a.all {
            return plan_output(
                &a.name,
                &plan,
                doc.version,
                format!("Plan {} ({}):\n{}", a.name, plan.goal, describe(&plan)),
            );
        }
        let next = plan
            .steps
            .iter()
            .position(|s| s.status == Status::InProgress)
            .or_else(|| plan.steps.iter().position(|s| s.status == Status::Pending));
        let text = match next {
            Some(i) => format!(
                "Next step of {} (step {} of {}): {}",
                a.name,
                i + 1,
                plan.steps.len(),
                plan.steps[i].title
            ),
            None if plan.steps.iter().any(|s| s.status == Status::Blocked) => format!(
                "Nothing in {} can be worked on: the steps left are blocked.\n{}",
                a.name,
                describe(&plan)
            ),
            None => format!("Every step of {} is done or skipped.", a.name),
        };
        let mut out = plan_output(&a.name, &plan, doc.version, text)?;
        if let Some(s) = out.structured.as_mut() {
            s["next_step"] = json!(next.map(|i| i + 1));
        }
        Ok(out)
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    name: String,
    /// The step's number (1 for the first).
    #[schemars(range(min = 1, max = 100))]
    step: usize,
    status: Status,
    /// What came of it.
    #[schemars(length(max = 4000))]
    result: Option<String>,
}

pub struct UpdatePlan(ToolDef);

#[async_trait]
impl Tool for UpdatePlan {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: UpdateArgs = parse_args(args)?;
        // A change made on a stale read is refused by the store; the step's change is read
        // again and made again (a few times), so two agents updating different steps both land.
        for _ in 0..5 {
            let (doc, mut plan) = load_plan(&cx, &a.name).await?;
            let Some(step) = plan.steps.get_mut(a.step - 1) else {
                return Err(ToolError::InvalidArguments(format!(
                    "plan {} has {} step(s); there is no step {}",
                    a.name,
                    plan.steps.len(),
                    a.step
                )));
            };
            step.status = a.status;
            if a.result.is_some() {
                step.result = a.result.clone();
            }
            let next = Document {
                version: doc.version + 1,
                body: serde_json::to_string(&plan).map_err(ToolError::failed)?,
                updated_us: crate::now_us(),
                updated_by: cx.agent.name.clone(),
                ..doc
            };
            let version = next.version;
            match cx.ledger.put_document(next).await {
                Ok(()) => {
                    return plan_output(
                        &a.name,
                        &plan,
                        version,
                        format!("Plan {} updated:\n{}", a.name, describe(&plan)),
                    );
                }
                Err(LedgerError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ToolError::failed(format!(
            "plan {} kept changing under this update; try again",
            a.name
        )))
    }
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum TodoAction {
    /// Replace the list with `items`.
    Write,
    /// Mark item `item` done.
    Check,
    /// Show the list.
    Read,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoArgs {
    action: TodoAction,
    /// For `write`: the items (at most 100).
    #[schemars(length(max = 100))]
    items: Option<Vec<StepTitle>>,
    /// For `check`: the item's number (1 for the first).
    #[schemars(range(min = 1, max = 100))]
    item: Option<usize>,
    /// Which run's list (default: this session's).
    #[schemars(regex(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    run: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct TodoItem {
    text: String,
    done: bool,
}

#[derive(Serialize, JsonSchema)]
struct TodoOut {
    /// The run this list belongs to.
    run: String,
    items: Vec<TodoOutItem>,
}

#[derive(Serialize, JsonSchema)]
struct TodoOutItem {
    item: usize,
    text: String,
    done: bool,
}

pub struct Todo(ToolDef);

#[async_trait]
impl Tool for Todo {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: TodoArgs = parse_args(args)?;
        let scope = format!("agent:{}", cx.agent.name);
        let run = a.run.clone().unwrap_or_else(|| cx.session.clone());
        let current = cx.ledger.document("todo", &scope, &run).await?;
        let mut items: Vec<TodoItem> = match &current {
            Some(doc) => serde_json::from_str(&doc.body)
                .map_err(|e| ToolError::failed(format!("the to-do list is unreadable: {e}")))?,
            None => Vec::new(),
        };
        let version = current.as_ref().map(|d| d.version).unwrap_or(0);
        match a.action {
            TodoAction::Read => {}
            TodoAction::Write => {
                let Some(new) = a.items else {
                    return Err(ToolError::InvalidArguments(
                        "write needs items (the whole new list)".into(),
                    ));
                };
                items = new
                    .into_iter()
                    .map(|t| TodoItem {
                        text: t.0,
                        done: false,
                    })
                    .collect();
            }
            TodoAction::Check => {
                let Some(n) = a.item else {
                    return Err(ToolError::InvalidArguments(
                        "check needs item (its number)".into(),
                    ));
                };
                let len = items.len();
                let Some(item) = items.get_mut(n - 1) else {
                    return Err(ToolError::InvalidArguments(format!(
                        "the list has {len} item(s); there is no item {n}"
                    )));
                };
                item.done = true;
            }
        }
        if a.action != TodoAction::Read {
            cx.ledger
                .put_document(Document {
                    kind: "todo".into(),
                    scope,
                    name: run.clone(),
                    version: version + 1,
                    body: serde_json::to_string(&items).map_err(ToolError::failed)?,
                    updated_us: crate::now_us(),
                    updated_by: cx.agent.name.clone(),
                })
                .await?;
        }
        let text = if items.is_empty() {
            "The to-do list is empty.".to_string()
        } else {
            items
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{}. [{}] {}", i + 1, if t.done { "x" } else { " " }, t.text))
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(ToolOutput {
            content: vec![Content::Text(text)],
            structured: Some(json!({
                "run": run,
                "items": items.iter().enumerate().map(|(i, t)| json!({"item": i + 1, "text": t.text, "done": t.done})).collect::<Vec<_>>(),
            })),
            is_error: false,
        })
    }
}

/// The planning tools.
pub fn tools() -> Vec<std::sync::Arc<dyn Tool>> {
    let plan_out = schema_of::<PlanOut>();
    let mut read = writer(
        "read_plan",
        "Read a plan",
        "Read one of your team's plans: the next step to work on (in progress, else the first pending), or every step with all=true.",
        schema_of::<ReadArgs>(),
        plan_out.clone(),
    );
    read.meta = ToolMeta::read_only();
    vec![
        std::sync::Arc::new(CreatePlan(writer(
            "create_plan",
            "Create a plan",
            "Create a plan for your team: a name, a goal and its steps in order (every step starts pending).",
            schema_of::<CreateArgs>(),
            plan_out.clone(),
        ))),
        std::sync::Arc::new(ReadPlan(read)),
        std::sync::Arc::new(UpdatePlan(writer(
            "update_plan",
            "Update a plan's step",
            "Set a step's status (pending, in_progress, done, blocked, skipped) and, optionally, what came of it.",
            schema_of::<UpdateArgs>(),
            plan_out,
        ))),
        std::sync::Arc::new(Todo(writer(
            "todo",
            "Your to-do list",
            "Your own to-do list for this run (never the team's plan): write replaces it, check marks an item done, read shows it.",
            schema_of::<TodoArgs>(),
            schema_of::<TodoOut>(),
        ))),
    ]
}

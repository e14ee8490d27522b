//! The comms and team tools: `notify_user` and `report_progress` (to the MCP client's user,
//! as MCP log and progress notifications), and `send_message_to` / `read_messages` (mailboxes
//! between the agents of one team, kept in the store). The sender and the mailbox read are the
//! caller's identity, never its arguments; a message reaches only an agent of the sender's
//! team.

use aether_policy::journal::Message;
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{CallContext, Content, LogLevel, Tool, ToolError, ToolOutput, parse_args, schema_of};

fn def(
    name: &str,
    title: &str,
    group: &str,
    description: &str,
    input: Value,
    output: Value,
) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: group.into(),
        tier: Tier::Standard,
        description: description.into(),
        input_schema: input,
        output_schema: output,
        arguments: Default::default(),
        meta: ToolMeta::local_writer(),
    }
}

fn text(t: String, structured: Value) -> ToolOutput {
    ToolOutput {
        content: vec![Content::Text(t)],
        structured: Some(structured),
        is_error: false,
    }
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Importance {
    Info,
    Notice,
    Warning,
    Error,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NotifyArgs {
    /// What the user should know.
    #[schemars(length(min = 1, max = 4000))]
    message: String,
    /// info (the default), notice, warning or error.
    importance: Option<Importance>,
}

#[derive(Serialize, JsonSchema)]
struct Delivered {
    /// Whether it was handed to the client (it may still not show it).
    delivered: bool,
}

pub struct NotifyUser(ToolDef);

#[async_trait]
impl Tool for NotifyUser {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: NotifyArgs = parse_args(args)?;
        let level = match a.importance.unwrap_or(Importance::Info) {
            Importance::Info => LogLevel::Info,
            Importance::Notice => LogLevel::Notice,
            Importance::Warning => LogLevel::Warning,
            Importance::Error => LogLevel::Error,
        };
        cx.client
            .log(level, json!({"from": cx.agent.name, "message": a.message}))
            .await;
        Ok(text(
            "The user was notified.".into(),
            json!({"delivered": true}),
        ))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ProgressArgs {
    /// How far along, 0-100.
    #[schemars(range(min = 0, max = 100))]
    percent: f64,
    /// What is happening now.
    #[schemars(length(max = 1000))]
    message: Option<String>,
}

pub struct ReportProgress(ToolDef);

#[async_trait]
impl Tool for ReportProgress {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: ProgressArgs = parse_args(args)?;
        if !(0.0..=100.0).contains(&a.percent) || !a.percent.is_finite() {
            return Err(ToolError::InvalidArguments(
                "percent is between 0 and 100".into(),
            ));
        }
        cx.client
            .progress(a.percent, Some(100.0), a.message.clone())
            .await;
        // The console shows it live too: the session's latest report, kept in the store (a
        // report that cannot be kept still reached the client).
        let (scope, name) = (format!("agent:{}", cx.agent.name), cx.session.clone());
        let version = cx
            .ledger
            .document("progress", &scope, &name)
            .await
            .ok()
            .flatten()
            .map(|d| d.version)
            .unwrap_or(0);
        let kept = cx
            .ledger
            .put_document(aether_policy::journal::Document {
                kind: "progress".into(),
                scope,
                name,
                version: version + 1,
                body: json!({"percent": a.percent, "message": a.message, "call_id": cx.call_id})
                    .to_string(),
                updated_us: crate::now_us(),
                updated_by: cx.agent.name.clone(),
            })
            .await;
        if let Err(e) = kept {
            tracing::debug!(error = %e, "a progress report was not kept for the console");
        }
        Ok(text(
            format!("Progress {}% reported.", a.percent),
            json!({"delivered": true}),
        ))
    }
}

fn team_of(agent: &AgentProfile) -> Result<&str, ToolError> {
    agent.team.as_deref().ok_or_else(|| {
        ToolError::InvalidArguments(format!(
            "agent {} is in no team, so it has no mailbox (set team in aether.toml)",
            agent.name
        ))
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    /// The agent of your team the message is for.
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    to: String,
    #[schemars(length(min = 1, max = 20000))]
    message: String,
}

#[derive(Serialize, JsonSchema)]
struct Sent {
    id: i64,
    to: String,
}

pub struct SendMessageTo(ToolDef);

#[async_trait]
impl Tool for SendMessageTo {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        team_of(agent).map(|_| ()).map_err(|e| e.to_string())
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: SendArgs = parse_args(args)?;
        let team = team_of(&cx.agent)?;
        let id = cx
            .ledger
            .send_message(Message {
                id: 0,
                team: team.to_string(),
                from_agent: cx.agent.name.clone(),
                to_agent: a.to.clone(),
                at_us: crate::now_us(),
                body: a.message,
            })
            .await
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(text(
            format!("Message {id} left for {}.", a.to),
            json!({"id": id, "to": a.to}),
        ))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// At most this many (default 50).
    #[schemars(range(min = 1, max = 500))]
    limit: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Inbox {
    messages: Vec<InboxMessage>,
}

#[derive(Serialize, JsonSchema)]
struct InboxMessage {
    id: i64,
    from: String,
    at_us: i64,
    message: String,
}

pub struct ReadMessages(ToolDef);

#[async_trait]
impl Tool for ReadMessages {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        team_of(agent).map(|_| ()).map_err(|e| e.to_string())
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: ReadArgs = parse_args(args)?;
        let team = team_of(&cx.agent)?;
        let messages = cx
            .ledger
            .take_messages(team, &cx.agent.name, a.limit.unwrap_or(50))
            .await
            .map_err(ToolError::failed)?;
        let shown = if messages.is_empty() {
            "No new messages.".to_string()
        } else {
            messages
                .iter()
                .map(|m| format!("#{} from {}: {}", m.id, m.from_agent, m.body))
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok(text(
            shown,
            json!({"messages": messages.iter().map(|m| json!({
                "id": m.id, "from": m.from_agent, "at_us": m.at_us, "message": m.body,
            })).collect::<Vec<_>>()}),
        ))
    }
}

/// The comms and team tools.
pub fn tools() -> Vec<std::sync::Arc<dyn Tool>> {
    vec![
        std::sync::Arc::new(NotifyUser(def(
            "notify_user",
            "Notify the user",
            groups::COMMS,
            "Tell the person using the MCP client something (an MCP log notification at the importance given).",
            schema_of::<NotifyArgs>(),
            schema_of::<Delivered>(),
        ))),
        std::sync::Arc::new(ReportProgress(def(
            "report_progress",
            "Report progress",
            groups::COMMS,
            "Report how far along the current work is (0-100, and what is happening): the MCP client gets a progress notification.",
            schema_of::<ProgressArgs>(),
            schema_of::<Delivered>(),
        ))),
        std::sync::Arc::new(SendMessageTo(def(
            "send_message_to",
            "Message a teammate",
            groups::TEAM,
            "Leave a message for another agent of your team; it reads it with read_messages.",
            schema_of::<SendArgs>(),
            schema_of::<Sent>(),
        ))),
        std::sync::Arc::new(ReadMessages(def(
            "read_messages",
            "Read your messages",
            groups::TEAM,
            "Read (and mark read) the messages your teammates left you, oldest first.",
            schema_of::<ReadArgs>(),
            schema_of::<Inbox>(),
        ))),
    ]
}

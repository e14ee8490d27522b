//! The way back to the MCP client during a call: progress, log messages, and requests for
//! sampling or elicitation, sent on the stream of the call that asked for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use aether_tools::{AnswerShape, ClientLink, FieldKind, LogLevel, Question, Reply};
use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{
    CustomRequest, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, ServerRequest,
};
use rmcp::service::Peer;
use serde_json::{Value, json};

/// The client's chosen log level, per session (`logging/setLevel`).
#[derive(Clone, Debug)]
pub struct SessionLogLevel(Arc<AtomicU8>);

impl Default for SessionLogLevel {
    fn default() -> Self {
        SessionLogLevel(Arc::new(AtomicU8::new(rank(LogLevel::Info))))
    }
}

impl SessionLogLevel {
    pub fn set(&self, level: LoggingLevel) {
        self.0.store(rank(from_mcp(level)), Ordering::Relaxed);
    }

    fn allows(&self, level: LogLevel) -> bool {
        rank(level) >= self.0.load(Ordering::Relaxed)
    }
}

fn rank(level: LogLevel) -> u8 {
    level as u8
}

fn from_mcp(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

fn to_mcp(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

pub struct McpClientLink {
    pub peer: Peer<RoleServer>,
    pub progress_token: Option<ProgressToken>,
    pub log_level: SessionLogLevel,
}

impl McpClientLink {
    /// Sends a server-to-client request with its params as given, and returns the client's
    /// answer as JSON. The params pass through untouched (no round trip through typed models
    /// that might drop fields the client relies on).
    async fn ask(&self, method: &str, params: Value) -> Result<Value, String> {
        let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let answer = self
            .peer
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::to_value(answer).map_err(|e| e.to_string())
    }
}

#[async_trait]
impl ClientLink for McpClientLink {
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(token) = self.progress_token.clone() else {
            return;
        };
        let mut param = ProgressNotificationParam::new(token, progress);
        param.total = total;
        param.message = message;
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not delivered");
        }
    }

    async fn log(&self, level: LogLevel, data: Value) {
        if !self.log_level.allows(level) {
            return;
        }
        let mut param = LoggingMessageNotificationParam::new(to_mcp(level), data);
        param.logger = Some("aether".into());
        if let Err(e) = self.peer.notify_logging_message(param).await {
            tracing::debug!(error = %e, "log notification not delivered");
        }
    }

    async fn create_message(&self, params: Value) -> Result<Value, String> {
        self.ask("sampling/createMessage", params).await
    }

    async fn elicit(&self, question: Question) -> Result<Reply, String> {
        let answer = self
            .ask("elicitation/create", elicitation_params(&question))
            .await?;
        reply_of(&answer)
    }
}

/// A question as MCP's `elicitation/create` params.
fn elicitation_params(question: &Question) -> Value {
    let schema = match &question.answer {
        AnswerShape::Schema(schema) => schema.clone(),
        AnswerShape::Fields(fields) => {
            let properties: serde_json::Map<String, Value> = fields
                .iter()
                .map(|f| {
                    let kind = match f.kind {
                        FieldKind::YesNo => "boolean",
                        FieldKind::Text => "string",
                    };
                    (f.name.clone(), json!({"type": kind, "title": f.title}))
                })
                .collect();
            let required: Vec<&str> = fields
                .iter()
                .filter(|f| f.required)
                .map(|f| f.name.as_str())
                .collect();
            json!({"type": "object", "properties": properties, "required": required})
        }
    };
    json!({"message": question.message, "requestedSchema": schema})
}

/// MCP's elicitation result as a reply: `accept` with its content, `decline`, `cancel`.
fn reply_of(answer: &Value) -> Result<Reply, String> {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => Ok(Reply::Accepted(
            answer
                .get("content")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        )),
        Some("decline") => Ok(Reply::Declined),
        Some("cancel") => Ok(Reply::Cancelled),
        other => Err(format!(
            "the client's answer to an elicitation has no known action ({other:?})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aether_tools::Field;

    #[test]
    fn questions_and_replies_translate_to_and_from_mcp() {
        let question = Question {
            message: "Approve?".into(),
            answer: AnswerShape::Fields(vec![
                Field {
                    name: "approve".into(),
                    title: "Approve this call".into(),
                    kind: FieldKind::YesNo,
                    required: true,
                },
                Field {
                    name: "why".into(),
                    title: "Why".into(),
                    kind: FieldKind::Text,
                    required: false,
                },
            ]),
        };
        assert_eq!(
            elicitation_params(&question),
            json!({"message": "Approve?", "requestedSchema": {"type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve this call"},
                               "why": {"type": "string", "title": "Why"}},
                "required": ["approve"]}})
        );
        let accepted =
            reply_of(&json!({"action": "accept", "content": {"approve": true}})).unwrap();
        assert_eq!(accepted.action(), "accept");
        assert!(matches!(accepted, Reply::Accepted(c) if c["approve"] == true));
        assert_eq!(
            reply_of(&json!({"action": "decline"})).unwrap(),
            Reply::Declined
        );
        assert_eq!(
            reply_of(&json!({"action": "cancel"})).unwrap(),
            Reply::Cancelled
        );
        assert!(reply_of(&json!({"action": "maybe"})).is_err());
    }
}

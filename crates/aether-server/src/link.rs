//! The way back to the MCP client during a call: progress, log messages, and requests for
//! sampling, elicitation or roots, sent on the stream of the call that asked for them; or,
//! for a 2026-07-28 client, asked in rounds ([`Rounds`]): the call ends with an
//! input-required result naming what it needs, and the client makes it again with its
//! answers and the state it was given.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aether_tools::{AnswerShape, ClientLink, FieldKind, LogLevel, Question, Reply};
use async_trait::async_trait;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, CustomRequest, InputRequests, InputRequiredResult, InputResponses,
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    RequestStateCodec, SealOptions, ServerRequest,
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
    /// A 2026-07-28 request's level: the one its `_meta` names, or none (no log messages).
    pub fn of_request(level: Option<LoggingLevel>) -> SessionLogLevel {
        let rank = level.map(|l| rank(from_mcp(l))).unwrap_or(u8::MAX);
        SessionLogLevel(Arc::new(AtomicU8::new(rank)))
    }

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
    /// A 2026-07-28 request's rounds; `None` in the handshake era (questions are requests
    /// sent to the client on the call's stream).
    pub rounds: Option<Arc<Rounds>>,
}

impl McpClientLink {
    /// Sends a server-to-client request with its params as given, and returns the client's
    /// answer as JSON. The params pass through untouched (no round trip through typed models
    /// that might drop fields the client relies on).
    async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
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
        self.ask("sampling", "sampling/createMessage", params).await
    }

    async fn elicit(&self, question: Question) -> Result<Reply, String> {
        self.elicit_as("elicitation", question).await
    }

    async fn ask(&self, key: &str, method: &str, params: Value) -> Result<Value, String> {
        match &self.rounds {
            Some(rounds) => rounds.ask(key, method, params),
            None => self.request(method, params).await,
        }
    }

    fn can_ask(&self, method: &str) -> bool {
        match &self.rounds {
            Some(rounds) => rounds.declares(method),
            // The handshake era's client said what it takes at initialize; rmcp sends the
            // request and the client answers or refuses.
            None => true,
        }
    }

    fn resumed(&self) -> bool {
        self.rounds.as_ref().is_some_and(|r| r.resumed)
    }

    fn in_rounds(&self) -> bool {
        self.rounds.is_some()
    }

    fn asking(&self) -> bool {
        self.rounds.as_ref().is_some_and(|r| {
            !r.asked.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
                || r.missing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some()
        })
    }

    async fn elicit_as(&self, key: &str, question: Question) -> Result<Reply, String> {
        let answer = self
            .ask(key, "elicitation/create", elicitation_params(&question))
            .await?;
        reply_of(&answer)
    }

    fn remember(&self, key: &str, value: Value) {
        if let Some(rounds) = &self.rounds {
            rounds
                .kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.to_string(), value);
        }
    }

    fn recall(&self, key: &str) -> Option<Value> {
        self.rounds.as_ref()?.notes.get(key).cloned()
    }
}

/// How long a client has to answer what a round asked.
pub const ROUND_TTL: Duration = Duration::from_secs(600);

/// The most bytes of state (earlier rounds' answers) a round hands its client.
pub const MAX_ROUND_STATE: usize = 256 << 10;

/// What a 2026-07-28 request's rounds carry from one to the next (SEP-2322): sealed under
/// the server's key and bound to the request, so a client can neither change it nor use it
/// for another call, agent or arguments.
#[derive(serde::Serialize, serde::Deserialize)]
struct RoundState {
    /// The keys the last round asked: the only answers taken from the next.
    asked: Vec<String>,
    /// Answers from the rounds before.
    answers: serde_json::Map<String, Value>,
    /// What the server kept for the next round ([`ClientLink::remember`]).
    #[serde(default)]
    notes: serde_json::Map<String, Value>,
}

/// One round of a 2026-07-28 request: the answers it came with, and what it asks.
pub struct Rounds {
    answers: serde_json::Map<String, Value>,
    /// What an earlier round kept (from the sealed state only).
    notes: serde_json::Map<String, Value>,
    /// What this round keeps for the next.
    kept: Mutex<serde_json::Map<String, Value>>,
    resumed: bool,
    capabilities: Option<ClientCapabilities>,
    asked: Mutex<BTreeMap<String, Value>>,
    /// A capability the call needed and the client did not declare.
    missing: Mutex<Option<&'static str>>,
}

impl Rounds {
    /// The round a request opens: its `requestState` (if any) must be one this server sealed
    /// for this same request (`binding`) and not expired; its `inputResponses` answer what
    /// the state says was asked (others are ignored). Without a state, the responses are
    /// taken as given (a tool asks by key, and finds only what it asks for), except answers
    /// to Aether's own questions (keys `aether/…`), which need the state that asked them.
    pub fn open(
        codec: &RequestStateCodec,
        binding: &[u8],
        state: Option<&str>,
        responses: Option<&InputResponses>,
        capabilities: Option<ClientCapabilities>,
    ) -> Result<Rounds, ErrorData> {
        let (mut answers, asked, notes) = match state {
            Some(sealed) => {
                let bytes = codec.open_with(sealed, binding).map_err(|e| {
                    ErrorData::invalid_params(
                        format!(
                            "requestState is not one this server gave for this request, or it expired ({e}); make the request again without it"
                        ),
                        None,
                    )
                })?;
                let state: RoundState = serde_json::from_slice(&bytes).map_err(|e| {
                    ErrorData::invalid_params(format!("requestState cannot be read: {e}"), None)
                })?;
                (state.answers, Some(state.asked), state.notes)
            }
            None => (serde_json::Map::new(), None, serde_json::Map::new()),
        };
        for (key, answer) in responses.into_iter().flatten() {
            // Aether's own questions (`aether/…`, an approval) are answered only with the
            // state of the round that asked them.
            let taken = match &asked {
                Some(asked) => asked.contains(key),
                None => !key.starts_with("aether/"),
            };
            if taken {
                answers.insert(key.clone(), answer.clone());
            }
        }
        Ok(Rounds {
            answers,
            kept: Mutex::new(notes.clone()),
            notes,
            resumed: state.is_some(),
            capabilities,
            asked: Mutex::default(),
            missing: Mutex::default(),
        })
    }

    /// The capability `method` needs, if it is one a round may ask for.
    fn capability(method: &str) -> Option<&'static str> {
        match method {
            "elicitation/create" => Some("elicitation"),
            "sampling/createMessage" => Some("sampling"),
            "roots/list" => Some("roots"),
            _ => None,
        }
    }

    fn declares(&self, method: &str) -> bool {
        let Some(caps) = &self.capabilities else {
            return false;
        };
        match Rounds::capability(method) {
            Some("elicitation") => caps.elicitation.is_some(),
            Some("sampling") => caps.sampling.is_some(),
            Some("roots") => caps.roots.is_some(),
            _ => false,
        }
    }

    /// The answer under `key`, or `Err` with the question recorded for [`Rounds::close`].
    pub fn ask(&self, key: &str, method: &str, params: Value) -> Result<Value, String> {
        // An answer not shaped like the method's result is no answer: the client is asked
        // again.
        if let Some(answer) = self.answers.get(key)
            && answers(method, answer)
        {
            return Ok(answer.clone());
        }
        let Some(capability) = Rounds::capability(method) else {
            return Err(format!("a client cannot be asked {method} in a round"));
        };
        if !self.declares(method) {
            *self.missing.lock().unwrap_or_else(|e| e.into_inner()) = Some(capability);
            return Err(format!(
                "the client did not declare the {capability} capability this call needs"
            ));
        }
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), json!({"method": method, "params": params}));
        Err(format!(
            "the client is asked for {method} ({key}); the call is made again with its answer"
        ))
    }

    /// How the request ends after its call: `Ok(None)` when nothing was asked (its own
    /// result stands); the input-required result naming what was asked, with the state for
    /// the next round; or the error for a capability the client did not declare.
    pub fn close(
        &self,
        codec: &RequestStateCodec,
        binding: &[u8],
    ) -> Result<Option<InputRequiredResult>, ErrorData> {
        if let Some(capability) = *self.missing.lock().unwrap_or_else(|e| e.into_inner()) {
            let needed: ClientCapabilities = serde_json::from_value(json!({ capability: {} }))
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            return Err(ErrorData::missing_required_client_capability(needed));
        }
        let asked = std::mem::take(&mut *self.asked.lock().unwrap_or_else(|e| e.into_inner()));
        if asked.is_empty() {
            return Ok(None);
        }
        let keys = asked.keys().cloned().collect();
        let requests: InputRequests =
            serde_json::from_value(Value::Object(asked.into_iter().collect())).map_err(|e| {
                ErrorData::internal_error(format!("a question is malformed: {e}"), None)
            })?;
        let state = serde_json::to_vec(&RoundState {
            asked: keys,
            answers: self.answers.clone(),
            notes: self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        })
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        if state.len() > MAX_ROUND_STATE {
            return Err(ErrorData::internal_error(
                format!(
                    "the answers so far are {} bytes; a request carries at most {MAX_ROUND_STATE} from round to round",
                    state.len()
                ),
                None,
            ));
        }
        let sealed = codec.seal_with(
            &state,
            &SealOptions::new().associated_data(binding).ttl(ROUND_TTL),
        );
        Ok(Some(InputRequiredResult::new(Some(requests), Some(sealed))))
    }
}

/// Whether `answer` has the shape of `method`'s result: an elicitation's action, a sampled
/// message's content, a list of roots.
fn answers(method: &str, answer: &Value) -> bool {
    match method {
        "elicitation/create" => answer["action"].is_string(),
        "sampling/createMessage" => answer["content"].is_object() || answer["content"].is_array(),
        "roots/list" => answer["roots"].is_array(),
        _ => false,
    }
}

/// The codec that seals rounds' state: under a key derived from the audit key (the vault's,
/// so every replica seals and opens alike), or, for a store without one, a key of this
/// process alone.
pub fn round_codec(store: &aether_store::Store) -> Arc<RequestStateCodec> {
    let key = match store.audit_key() {
        Some(key) => key.purpose_key("mcp request state v1"),
        None => {
            let mut key = vec![0u8; 32];
            getrandom::fill(&mut key).expect("the system gives random bytes");
            key
        }
    };
    Arc::new(RequestStateCodec::new(key))
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

    fn caps(value: Value) -> Option<ClientCapabilities> {
        Some(serde_json::from_value(value).unwrap())
    }

    fn name_question() -> Value {
        json!({"message": "Name?", "requestedSchema": {"type": "object",
            "properties": {"name": {"type": "string"}}, "required": ["name"]}})
    }

    #[test]
    fn rounds_carry_answers_forward_and_take_only_what_was_asked() {
        let codec = RequestStateCodec::new(vec![7u8; 32]);
        let binding = b"tools/call\nagent\ntool\nargs";
        // Round 1: nothing answered; the question is asked and a sealed state handed out.
        let one = Rounds::open(
            &codec,
            binding,
            None,
            None,
            caps(json!({"elicitation": {}})),
        )
        .unwrap();
        assert!(
            one.ask("step1", "elicitation/create", name_question())
                .is_err()
        );
        let asked = one.close(&codec, binding).unwrap().unwrap();
        let asked = serde_json::to_value(&asked).unwrap();
        assert_eq!(asked["resultType"], "input_required");
        assert_eq!(
            asked["inputRequests"]["step1"]["method"],
            "elicitation/create"
        );
        let state = asked["requestState"].as_str().unwrap().to_string();
        // Round 2: the answer to step1 (and one to a key never asked, which is dropped).
        let responses: InputResponses = serde_json::from_value(json!({
            "step1": {"action": "accept", "content": {"name": "Ada"}},
            "step2": {"action": "accept", "content": {"name": "forged early"}},
        }))
        .unwrap();
        let two = Rounds::open(
            &codec,
            binding,
            Some(&state),
            Some(&responses),
            caps(json!({"elicitation": {}})),
        )
        .unwrap();
        assert!(two.resumed);
        assert_eq!(
            two.ask("step1", "elicitation/create", name_question())
                .unwrap()["content"]["name"],
            "Ada"
        );
        assert!(
            two.ask("step2", "elicitation/create", name_question())
                .is_err()
        );
        let state = serde_json::to_value(two.close(&codec, binding).unwrap().unwrap()).unwrap()
            ["requestState"]
            .as_str()
            .unwrap()
            .to_string();
        // Round 3: step1 comes from the state, step2 from this request.
        let responses: InputResponses = serde_json::from_value(json!({
            "step2": {"action": "accept", "content": {"name": "blue"}},
        }))
        .unwrap();
        let three = Rounds::open(&codec, binding, Some(&state), Some(&responses), None).unwrap();
        assert_eq!(
            three
                .ask("step1", "elicitation/create", name_question())
                .unwrap()["content"]["name"],
            "Ada"
        );
        assert_eq!(
            three
                .ask("step2", "elicitation/create", name_question())
                .unwrap()["content"]["name"],
            "blue"
        );
        assert!(three.close(&codec, binding).unwrap().is_none());
        // The state opens for this request only, and not once changed.
        assert!(
            Rounds::open(
                &codec,
                b"tools/call\nother\ntool\nargs",
                Some(&state),
                None,
                None
            )
            .is_err()
        );
        let mut changed = state.into_bytes();
        changed[10] ^= 1;
        let changed = String::from_utf8(changed).unwrap();
        assert!(Rounds::open(&codec, binding, Some(&changed), None, None).is_err());
        assert!(
            Rounds::open(
                &RequestStateCodec::new(vec![8u8; 32]),
                binding,
                Some(&changed),
                None,
                None
            )
            .is_err()
        );
    }

    #[test]
    fn a_round_asks_only_what_the_client_declared_and_validates_answers() {
        let codec = RequestStateCodec::new(vec![7u8; 32]);
        let rounds = Rounds::open(&codec, b"b", None, None, caps(json!({"sampling": {}}))).unwrap();
        assert!(rounds.declares("sampling/createMessage"));
        assert!(!rounds.declares("elicitation/create"));
        let why = rounds
            .ask("n", "elicitation/create", name_question())
            .unwrap_err();
        assert!(why.contains("elicitation capability"), "{why}");
        let error = rounds.close(&codec, b"b").unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode(-32021));
        // An answer not shaped like the method's result is asked for again.
        let responses: InputResponses =
            serde_json::from_value(json!({"q": 42, "r": {"roots": []}})).unwrap();
        let rounds = Rounds::open(
            &codec,
            b"b",
            None,
            Some(&responses),
            caps(json!({"sampling": {}, "roots": {}})),
        )
        .unwrap();
        assert!(
            rounds
                .ask(
                    "q",
                    "sampling/createMessage",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                           "maxTokens": 5})
                )
                .is_err()
        );
        assert_eq!(
            rounds.ask("r", "roots/list", json!({})).unwrap(),
            json!({"roots": []})
        );
        assert!(rounds.close(&codec, b"b").unwrap().is_some());
    }

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

//! JSON-RPC errors as clients expect them, answered before rmcp sees a message.
//!
//! rmcp answers a body it cannot read with `415` and plain text over HTTP, drops a line that
//! is not JSON over stdio, and treats a known method whose parameters do not fit (say
//! `tools/call` with a numeric `name`) as an unknown one (`-32601`). Clients and the
//! conformance suite expect JSON-RPC's own codes instead, so every message is looked at here
//! first ([`check`]):
//!
//! | what | code | over HTTP |
//! | --- | --- | --- |
//! | not JSON | `-32700` parse error, `id` null | 400 |
//! | JSON but not one JSON-RPC 2.0 message (a batch, no `jsonrpc: "2.0"`, a `method` that is not a string, an `id` that is neither a string nor a number, a message that is neither a request, a notification nor a response) | `-32600` invalid request | 400 |
//! | a known method whose `params` do not fit it | `-32602` invalid params, with the request's `id` | 200, JSON |
//! | a 2026-07-28 request (by its `_meta` or its `MCP-Protocol-Version` header) to a method that version removed (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`) | `-32601` method not found | 404 |
//! | a handshake-era request before `initialize` (see [`Lifecycle`]) | `-32600` not initialized | 400 |
//!
//! Every message text is bounded; a message is never echoed back.

use aether_policy::truncate::bound_text;
use serde_json::{Value, json};

/// Methods rmcp reads into typed requests: parameters that do not fit one of these are the
/// caller's mistake (`-32602`), not an unknown method.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
];

/// Methods the 2026-07-28 protocol removed: a request of that version naming one is
/// answered "method not found", whatever its parameters.
const REMOVED_IN_2026: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Methods a client may send before a session begins (over stdio, or over HTTP without a
/// session): the handshake itself and the probes of both eras.
const BEFORE_A_SESSION: &[&str] = &["initialize", "ping", "server/discover"];

/// The `_meta` keys of the 2026-07-28 request context share this prefix.
const MODERN_META: &str = "io.modelcontextprotocol/";

/// A message that passed [`check`], as far as the lifecycle cares.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// The id its answer carries (null for a notification or a response).
    pub id: Value,
    /// A request's or notification's method.
    pub method: Option<String>,
    /// A request (it has an id) rather than a notification or a response.
    pub request: bool,
    /// It carries 2026-07-28 request context in `_meta` (complete or not).
    pub modern: bool,
    /// The tool a `tools/call` request names.
    pub tool: Option<String>,
}

impl Checked {
    /// A handshake-era request that needs a session begun: not one of the methods allowed
    /// before it, and no 2026-07-28 context (whose own checks name any field missing).
    pub fn needs_a_session(&self) -> bool {
        self.request
            && !self.modern
            && self
                .method
                .as_deref()
                .is_some_and(|m| !BEFORE_A_SESSION.contains(&m))
    }
}

/// Where a stdio connection is in its lifecycle: a handshake-era request before `initialize`
/// is answered "not initialized" here (rmcp would answer it with the 2026-07-28 metadata it
/// lacks, which tells a handshake-era client nothing it can use).
#[derive(Debug, Default)]
pub struct Lifecycle {
    begun: bool,
}

impl Lifecycle {
    /// Whether `message` may go on to rmcp, or the problem to answer it with.
    pub fn admit(&mut self, message: &Checked) -> Result<(), Problem> {
        if self.begun {
            return Ok(());
        }
        if message.request && (message.method.as_deref() == Some("initialize") || message.modern) {
            self.begun = true;
            return Ok(());
        }
        if message.needs_a_session() {
            return Err(Problem::NotInitialized {
                id: message.id.clone(),
                method: message.method.clone().unwrap_or_default(),
            });
        }
        Ok(())
    }
}

/// What is wrong with a message, as the JSON-RPC error a client gets.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// Not JSON at all.
    Parse(String),
    /// JSON, but not a JSON-RPC 2.0 message Aether takes.
    Invalid { id: Value, why: String },
    /// A known method with parameters that do not fit it.
    Params { id: Value, why: String },
    /// A 2026-07-28 request to a method that version removed.
    Removed { id: Value, method: String },
    /// A handshake-era request before the session began.
    NotInitialized { id: Value, method: String },
}

impl Problem {
    pub fn code(&self) -> i64 {
        match self {
            Problem::Parse(_) => -32700,
            Problem::Invalid { .. } | Problem::NotInitialized { .. } => -32600,
            Problem::Params { .. } => -32602,
            Problem::Removed { .. } => -32601,
        }
    }

    /// The JSON-RPC error response.
    pub fn to_json(&self) -> Value {
        let (id, message) = match self {
            Problem::Parse(why) => (Value::Null, format!("Parse error: {why}")),
            Problem::Invalid { id, why } => (id.clone(), format!("Invalid request: {why}")),
            Problem::Params { id, why } => (id.clone(), format!("Invalid params: {why}")),
            Problem::Removed { id, method } => (
                id.clone(),
                format!(
                    "Method not found: {method} is not part of protocol 2026-07-28 \
                     (use server/discover and subscriptions/listen; the handshake era keeps it)"
                ),
            ),
            Problem::NotInitialized { id, method } => (
                id.clone(),
                format!(
                    "Invalid request: not initialized: {method} needs a session; send initialize first \
                     (or speak 2026-07-28: every request carries its _meta)"
                ),
            ),
        };
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": self.code(), "message": bound_text(&message, 500)},
        })
    }

    /// The HTTP status its answer goes with: 400 for a message that is not one (or comes
    /// before its session), 404 for a method not served, 200 for a request answered with an
    /// error.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Problem::Params { .. } => http::StatusCode::OK,
            Problem::Removed { .. } => http::StatusCode::NOT_FOUND,
            _ => http::StatusCode::BAD_REQUEST,
        }
    }
}

/// `text` bounded for an error message (an id or a method echoed back).
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    bound_text(text, 100)
}

/// Checks one message (a line over stdio, a body over HTTP). `modern_header`: the HTTP
/// request declared protocol 2026-07-28 or later in its `MCP-Protocol-Version` header.
pub fn check(bytes: &[u8], modern_header: bool) -> Result<Checked, Problem> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| Problem::Parse(e.to_string()))?;
    let invalid = |id: &Value, why: &str| Problem::Invalid {
        id: id.clone(),
        why: why.into(),
    };
    let object = match &value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(invalid(
                &Value::Null,
                "batches are not supported; send one message at a time",
            ));
        }
        _ => return Err(invalid(&Value::Null, "a message is a JSON object")),
    };
    // The id to answer with: the request's own, when it is one an answer can carry.
    let id = match object.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        Some(Value::Null) | None => Value::Null,
        Some(_) => {
            return Err(invalid(&Value::Null, "an id is a string or a number"));
        }
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid(&id, "\"jsonrpc\" must be \"2.0\""));
    }
    match object.get("method") {
        Some(Value::String(method)) => {
            if object.get("id").is_some_and(Value::is_null) {
                return Err(invalid(&Value::Null, "a request's id is not null"));
            }
            let known = KNOWN_METHODS.contains(&method.as_str());
            let version = object
                .get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(Value::as_object);
            let modern =
                version.is_some_and(|meta| meta.keys().any(|k| k.starts_with(MODERN_META)));
            let declared = version
                .and_then(|meta| meta.get("io.modelcontextprotocol/protocolVersion"))
                .and_then(Value::as_str)
                .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
            let request = !id.is_null();
            if request && (declared || modern_header) && REMOVED_IN_2026.contains(&method.as_str())
            {
                return Err(Problem::Removed {
                    id,
                    method: method.clone(),
                });
            }
            let checked = Checked {
                id: id.clone(),
                method: Some(method.clone()),
                request,
                modern,
                tool: (method == "tools/call")
                    .then(|| {
                        object
                            .get("params")?
                            .get("name")?
                            .as_str()
                            .map(str::to_string)
                    })
                    .flatten(),
            };
            match object.get("params") {
                None | Some(Value::Object(_)) => {}
                Some(_) if known && !id.is_null() => {
                    return Err(Problem::Params {
                        id,
                        why: format!("{method}'s params are an object"),
                    });
                }
                Some(_) => return Err(invalid(&id, "params are an object or an array")),
            }
            // A request (it has an id) to a method rmcp knows: its parameters must fit the
            // method's, or rmcp would take it for an unknown method. Where Aether knows the
            // method's parameter type, only the parameters are read (the whole message read
            // as rmcp's request enum tries every variant, which costs more than the rest of
            // this check); otherwise the whole message is.
            if known && !id.is_null() {
                let why = match typed_problem(method, &value) {
                    Some(problem) => problem,
                    None => {
                        let typed = serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(
                            value.clone(),
                        );
                        let fits = matches!(
                            &typed,
                            Ok(rmcp::model::ClientJsonRpcMessage::Request(r))
                                if !matches!(r.request, rmcp::model::ClientRequest::CustomRequest(_))
                        );
                        match typed {
                            _ if fits => None,
                            Err(e) => Some(e.to_string()),
                            Ok(_) => Some(format!("they do not fit {method}'s")),
                        }
                    }
                };
                if let Some(why) = why {
                    return Err(Problem::Params {
                        id,
                        why: format!("{method}: {why}"),
                    });
                }
            }
            Ok(checked)
        }
        Some(_) => Err(invalid(&id, "\"method\" must be a string")),
        None if object.contains_key("result") || object.contains_key("error") => {
            if id.is_null() && !object.contains_key("error") {
                return Err(invalid(&Value::Null, "a response carries its request's id"));
            }
            Ok(Checked::default())
        }
        None => Err(invalid(
            &id,
            "a message is a request or notification (with a method) or a response (with a result or an error)",
        )),
    }
}

/// What serde says is wrong with the request `message` read as `method`'s own type (not as
/// rmcp's request enum, which tries every variant): `None` where Aether does not know the
/// method's type, `Some(None)` where it fits.
fn typed_problem(method: &str, message: &Value) -> Option<Option<String>> {
    use rmcp::model as m;
    use serde::Deserialize;
    fn why<'a, T: Deserialize<'a>>(value: &'a Value) -> Option<String> {
        T::deserialize(value).err().map(|e| e.to_string())
    }
    let params = message.get("params").unwrap_or(&Value::Null);
    Some(match method {
        // Methods with parameters of their own: only those are read.
        "tools/call" => why::<m::CallToolRequestParams>(params),
        "resources/read" => why::<m::ReadResourceRequestParams>(params),
        "resources/subscribe" => why::<m::SubscribeRequestParams>(params),
        "resources/unsubscribe" => why::<m::UnsubscribeRequestParams>(params),
        "prompts/get" => why::<m::GetPromptRequestParams>(params),
        "initialize" => why::<m::InitializeRequestParams>(params),
        "completion/complete" => why::<m::CompleteRequestParams>(params),
        "logging/setLevel" => why::<m::SetLevelRequestParams>(params),
        // Methods whose parameters are optional or only `_meta`: the whole request is read,
        // as rmcp reads it.
        "ping" => why::<m::PingRequest>(message),
        "server/discover" => why::<m::DiscoverRequest>(message),
        "subscriptions/listen" => why::<m::SubscriptionsListenRequest>(message),
        "tools/list" => why::<m::ListToolsRequest>(message),
        "resources/list" => why::<m::ListResourcesRequest>(message),
        "resources/templates/list" => why::<m::ListResourceTemplatesRequest>(message),
        "prompts/list" => why::<m::ListPromptsRequest>(message),
        _ => return None,
    })
}

/// One message over stdio: each line of the client's is checked before rmcp reads it, and a
/// line that is not a message Aether takes is answered here, on the same output as rmcp's own
/// answers (whole lines, never interleaved).
pub async fn serve_stdio_lines<R, W>(
    input: R,
    output: W,
    to_rmcp: tokio::io::DuplexStream,
    from_rmcp: tokio::io::DuplexStream,
) -> std::io::Result<()>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let reading = tokio::spawn(async move {
        let mut to_rmcp = to_rmcp;
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        let mut lifecycle = Lifecycle::default();
        loop {
            line.clear();
            let read = (&mut input)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await?;
            if read == 0 {
                break;
            }
            if line.len() > MAX_LINE && !line.ends_with(b"\n") {
                // The rest of an oversized line is read and dropped; the client hears why.
                let mut rest = Vec::new();
                loop {
                    rest.clear();
                    let n = (&mut input)
                        .take(1 << 20)
                        .read_until(b'\n', &mut rest)
                        .await?;
                    if n == 0 || rest.ends_with(b"\n") {
                        break;
                    }
                }
                let problem = Problem::Invalid {
                    id: Value::Null,
                    why: format!("a message is at most {MAX_LINE} bytes"),
                };
                let _ = answers.send(line_of(&problem.to_json()));
                continue;
            }
            let message = line.trim_ascii();
            if message.is_empty() {
                continue;
            }
            let admitted = check(message, false).and_then(|checked| lifecycle.admit(&checked));
            match admitted {
                Ok(()) => {
                    to_rmcp.write_all(message).await?;
                    to_rmcp.write_all(b"\n").await?;
                }
                Err(problem) => {
                    let _ = answers.send(line_of(&problem.to_json()));
                }
            }
        }
        // The client is gone: rmcp sees the end of its input and ends the session.
        to_rmcp.shutdown().await?;
        Ok::<(), std::io::Error>(())
    });
    // Answers rmcp has already written go out together: one system call (and one wake-up of
    // the client) for a burst of answers, not one each.
    let mut output = tokio::io::BufWriter::with_capacity(1 << 16, output);
    let mut from_rmcp = BufReader::with_capacity(1 << 16, from_rmcp);
    let mut line = Vec::new();
    let (mut rmcp_open, mut answers_open) = (true, true);
    while rmcp_open || answers_open {
        tokio::select! {
            read = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                if read? == 0 {
                    rmcp_open = false;
                } else {
                    output.write_all(&line).await?;
                    line.clear();
                    if !from_rmcp.buffer().contains(&b'\n') {
                        output.flush().await?;
                    }
                }
            }
            answer = answered.recv(), if answers_open => match answer {
                Some(answer) => {
                    output.write_all(&answer).await?;
                    output.flush().await?;
                }
                // The client's side is done; rmcp's answers still come until it ends.
                None => answers_open = false,
            },
        }
    }
    output.flush().await?;
    match reading.await {
        Ok(result) => result,
        Err(e) => Err(std::io::Error::other(e)),
    }
}

/// The longest line (message) read over stdio.
pub const MAX_LINE: usize = 16 << 20;

fn line_of(value: &Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(text: &str) -> Option<(i64, Value)> {
        check(text.as_bytes(), false)
            .err()
            .map(|p| (p.code(), p.to_json()["id"].clone()))
    }

    #[test]
    fn each_kind_of_bad_message_gets_its_json_rpc_code() {
        for (text, want) in [
            ("{not json", Some((-32700, Value::Null))),
            ("", Some((-32700, Value::Null))),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
                Some((-32700, Value::Null)),
            ),
            ("[]", Some((-32600, Value::Null))),
            (
                "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
                Some((-32600, Value::Null)),
            ),
            ("42", Some((-32600, Value::Null))),
            ("\"x\"", Some((-32600, Value::Null))),
            ("null", Some((-32600, Value::Null))),
            ("{}", Some((-32600, Value::Null))),
            (
                "{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"ping\"}",
                Some((-32600, json!(3))),
            ),
            ("{\"id\":3,\"method\":\"ping\"}", Some((-32600, json!(3)))),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":5}",
                Some((-32600, json!(4))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}",
                Some((-32600, Value::Null)),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                Some((-32600, Value::Null)),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":\"a\"}",
                Some((-32600, json!("a"))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"result\":{}}",
                Some((-32600, Value::Null)),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x/y\",\"params\":7}",
                Some((-32600, json!(5))),
            ),
            // Known methods with parameters that do not fit.
            (
                "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":\"x\"}",
                Some((-32602, json!(6))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
                Some((-32602, json!(7))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{}}",
                Some((-32602, json!(8))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":\"n\",\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"arguments\":[1]}}",
                Some((-32602, json!("n"))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{}}",
                Some((-32602, json!(9))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"prompts/get\",\"params\":{\"name\":[]}}",
                Some((-32602, json!(10))),
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"initialize\",\"params\":{}}",
                Some((-32602, json!(11))),
            ),
            // Fine.
            ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", None),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/list\"}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\"}}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                None,
            ),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"vendor/custom\",\"params\":{\"a\":1}}",
                None,
            ),
            ("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", None),
            (
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,\"message\":\"m\"}}",
                None,
            ),
            (
                "  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}  ",
                None,
            ),
        ] {
            assert_eq!(code(text), want, "{text}");
        }
    }

    const MODERN: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    #[test]
    fn methods_2026_07_28_removed_are_not_found_for_its_requests_only() {
        for method in REMOVED_IN_2026 {
            let modern =
                format!(r#"{{"jsonrpc":"2.0","id":5,"method":"{method}","params":{{{MODERN}}}}}"#);
            let problem = check(modern.as_bytes(), false).unwrap_err();
            assert_eq!(problem.code(), -32601, "{method}");
            assert_eq!(problem.status(), http::StatusCode::NOT_FOUND);
            assert_eq!(problem.to_json()["id"], 5);
            // The header alone makes a request 2026-07-28: an `initialize` under it too (it
            // would open a session that no count of sessions saw coming).
            let bare = format!(r#"{{"jsonrpc":"2.0","id":6,"method":"{method}","params":{{}}}}"#);
            let by_header = check(bare.as_bytes(), true);
            assert_eq!(by_header.unwrap_err().code(), -32601, "{method}");
        }
        // The handshake era keeps them.
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(check(ping.as_bytes(), false).is_ok());
        let level =
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}"#;
        assert!(check(level.as_bytes(), false).is_ok());
        // A notification is never answered.
        let note = format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{{MODERN}}}}}"#);
        assert!(check(note.as_bytes(), false).is_ok());
    }

    #[test]
    fn a_handshake_era_request_before_initialize_is_told_so() {
        let mut lifecycle = Lifecycle::default();
        let message = |text: &str| check(text.as_bytes(), false).unwrap();
        let list = message(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#);
        let problem = lifecycle.admit(&list).unwrap_err();
        assert_eq!(problem.code(), -32600);
        let answer = problem.to_json();
        assert_eq!(answer["id"], "a");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(
            text.contains("not initialized") && text.contains("initialize first"),
            "{text}"
        );
        assert!(!text.contains("clientCapabilities"), "{text}");
        // Probes and notifications pass; initialize begins the session, and then anything goes.
        for before in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ] {
            assert!(lifecycle.admit(&message(before)).is_ok(), "{before}");
        }
        let init = message(
            r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        assert!(lifecycle.admit(&init).is_ok());
        assert!(lifecycle.admit(&list).is_ok());
        // A 2026-07-28 request (complete or not) goes to rmcp, which names what is missing.
        let mut lifecycle = Lifecycle::default();
        let partial = message(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert!(lifecycle.admit(&partial).is_ok());
    }

    /// Bounded by `PROPTEST_CASES` (default 256) like the screens' property tests.
    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256)
    }

    /// Messages shaped like requests, notifications and near misses: a method from Aether's
    /// known ones, the removed ones and any text; an id of every JSON kind or none; `_meta`
    /// declaring a protocol version, another 2026-07-28 key, or nothing.
    fn message() -> impl proptest::strategy::Strategy<Value = (Value, bool)> {
        use proptest::prelude::*;
        let method = prop_oneof![
            proptest::sample::select(KNOWN_METHODS.to_vec()).prop_map(str::to_string),
            proptest::sample::select(REMOVED_IN_2026.to_vec()).prop_map(str::to_string),
            "[a-z/]{0,20}",
        ];
        let id = prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            any::<i64>().prop_map(|n| Some(json!(n))),
            "[ -~]{0,12}".prop_map(|s| Some(json!(s))),
            Just(Some(json!({}))),
        ];
        let version = prop_oneof![
            Just(None),
            Just(Some(json!("2026-07-28"))),
            Just(Some(json!("2025-11-25"))),
            Just(Some(json!("2099-01-01"))),
            "[ -~]{0,12}".prop_map(|s| Some(json!(s))),
            Just(Some(json!(7))),
        ];
        (
            method,
            id,
            version,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(method, id, version, other_key, with_params, header)| {
                let mut meta = serde_json::Map::new();
                if let Some(v) = version {
                    meta.insert("io.modelcontextprotocol/protocolVersion".into(), v);
                }
                if other_key {
                    meta.insert(
                        "io.modelcontextprotocol/clientCapabilities".into(),
                        json!({}),
                    );
                }
                let mut message = json!({"jsonrpc": "2.0", "method": method});
                if let Some(id) = id {
                    message["id"] = id;
                }
                if with_params || !meta.is_empty() {
                    message["params"] = json!({ "_meta": meta });
                }
                (message, header)
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: cases(),
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any bytes: no panic; an answer is JSON-RPC's, bounded, with a status of its kind.
        #[test]
        fn any_bytes_are_checked_without_panic_and_answered_briefly(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            header in proptest::prelude::any::<bool>(),
        ) {
            if let Err(problem) = check(&bytes, header) {
                let answer = problem.to_json();
                proptest::prop_assert!(answer.to_string().len() < 1_000);
                proptest::prop_assert!([-32700, -32600, -32601, -32602].contains(&problem.code()));
                proptest::prop_assert!([200, 400, 404].contains(&problem.status().as_u16()));
            }
        }

        /// A removed method is "not found" exactly for a request that declares 2026-07-28 or
        /// later (in `_meta` or the header), whatever else it carries; nothing else is.
        #[test]
        fn removed_methods_are_not_found_exactly_for_2026_07_28_requests(
            (message, header) in message(),
        ) {
            let text = message.to_string();
            let result = check(text.as_bytes(), header);
            let method = message["method"].as_str().unwrap_or_default();
            let request = matches!(message.get("id"), Some(Value::String(_) | Value::Number(_)));
            let declared = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
                .as_str()
                .is_some_and(|v| v >= "2026-07-28");
            let removed = matches!(result, Err(Problem::Removed { .. }));
            proptest::prop_assert_eq!(
                removed,
                request && (declared || header) && REMOVED_IN_2026.contains(&method),
                "{}", text
            );
            // A message that passes is one the lifecycle can judge, and a handshake-era
            // request before `initialize` is told so with its own id.
            if let Ok(checked) = result {
                let mut lifecycle = Lifecycle::default();
                match lifecycle.admit(&checked) {
                    Err(problem) => {
                        proptest::prop_assert!(checked.needs_a_session());
                        proptest::prop_assert_eq!(&problem.to_json()["id"], &message["id"]);
                    }
                    Ok(()) => proptest::prop_assert!(!checked.needs_a_session()),
                }
            }
        }

        /// A request read as its own method's type (the quick way) fits exactly when rmcp's
        /// reading of the whole message as any client request finds that method.
        #[test]
        fn a_request_read_as_its_own_type_fits_exactly_when_rmcp_takes_it(
            method in proptest::sample::select(vec![
                "ping", "server/discover", "subscriptions/listen", "tools/list",
                "resources/list", "resources/templates/list", "prompts/list",
            ]),
            params in proptest::prop_oneof![
                proptest::prelude::Just(None),
                proptest::prelude::Just(Some(Value::Null)),
                proptest::prelude::Just(Some(json!({}))),
                proptest::prelude::Just(Some(json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}))),
                proptest::prelude::Just(Some(json!({"_meta": 5}))),
                proptest::prelude::Just(Some(json!({"cursor": "c2"}))),
                proptest::prelude::Just(Some(json!({"cursor": 2}))),
                proptest::prelude::Just(Some(json!({"notifications": {"toolsListChanged": true}}))),
                proptest::prelude::Just(Some(json!({"notifications": 3}))),
                proptest::prelude::Just(Some(json!({"other": 1}))),
                proptest::prelude::Just(Some(json!([1]))),
            ],
        ) {
            let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": method});
            if let Some(params) = params {
                message["params"] = params;
            }
            let quick = typed_problem(method, &message);
            proptest::prop_assert!(quick.is_some(), "{} has a type of its own", method);
            let rmcp_takes = matches!(
                serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(message.clone()),
                Ok(rmcp::model::ClientJsonRpcMessage::Request(r))
                    if !matches!(r.request, rmcp::model::ClientRequest::CustomRequest(_))
            );
            proptest::prop_assert_eq!(quick == Some(None), rmcp_takes, "{}", message);
        }

        /// The tool a message names (what the HTTP layer's scope check judges) is exactly a
        /// `tools/call`'s string `params.name`: never another method's, never a name of another
        /// kind, never one from elsewhere in the message.
        #[test]
        fn the_tool_named_is_a_tools_calls_string_name_only(
            method in proptest::prop_oneof![
                proptest::prelude::Just("tools/call".to_string()),
                proptest::prelude::Just("tools/list".to_string()),
                proptest::prelude::Just("prompts/get".to_string()),
                "[a-z/]{0,12}",
            ],
            name in proptest::prop_oneof![
                proptest::prelude::Just(None),
                proptest::strategy::Strategy::prop_map("[ -~]{0,16}", |s| Some(json!(s))),
                proptest::strategy::Strategy::prop_map(
                    proptest::prelude::any::<i64>(),
                    |n| Some(json!(n))
                ),
                proptest::prelude::Just(Some(Value::Null)),
                proptest::prelude::Just(Some(json!({"name": "nested"}))),
            ],
            elsewhere in proptest::prelude::any::<bool>(),
        ) {
            let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}});
            if let Some(name) = &name {
                message["params"]["name"] = name.clone();
            }
            if elsewhere {
                message["name"] = json!("outside");
                message["params"]["arguments"] = json!({"name": "inside"});
            }
            if let Ok(checked) = check(message.to_string().as_bytes(), false) {
                let expected = (method == "tools/call")
                    .then(|| name.as_ref().and_then(Value::as_str).map(str::to_string))
                    .flatten();
                proptest::prop_assert_eq!(checked.tool, expected, "{}", message);
            }
        }
    }

    #[test]
    fn an_answer_never_echoes_the_message() {
        let huge = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":{}}}",
            "9".repeat(100_000)
        );
        let answer = check(huge.as_bytes(), false)
            .unwrap_err()
            .to_json()
            .to_string();
        assert!(answer.len() < 1_000, "{}", answer.len());
        let huge = format!("{{\"x\": \"{}", "a".repeat(100_000));
        let answer = check(huge.as_bytes(), false)
            .unwrap_err()
            .to_json()
            .to_string();
        assert!(answer.len() < 1_000, "{}", answer.len());
    }
}

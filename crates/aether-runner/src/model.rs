//! One model connection: `GET {base}/models` and `POST {base}/chat/completions` (not
//! streamed), with the key sent only over HTTPS or to this computer, no proxy, no redirects,
//! a time limit per request and a cap on the reply's size.

use std::time::{Duration, Instant};

use aether_policy::models::{Dialect, ModelSpec, key_may_go_to};
use serde_json::{Value, json};

use crate::dsml;

/// The largest reply read from a model server.
pub const REPLY_CAP: usize = 8 << 20;

/// What went wrong talking to the model server.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model server at {url} cannot be reached: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("the model server did not answer within {0} s")]
    Timeout(u64),
    #[error("the model server answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the model server's reply is larger than {} MiB; it was not read", REPLY_CAP >> 20)]
    TooLarge,
    #[error("the model server's reply is not JSON ({0})")]
    NotJson(String),
    #[error("the model server's reply is not a chat completion: {0}")]
    Malformed(String),
    #[error("{0}")]
    Refused(String),
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// As the model wrote them (JSON text, maybe not valid).
    pub arguments: String,
}

/// Tokens as the server counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    /// Whether the server reported its figures at all.
    pub reported: bool,
}

impl Usage {
    pub fn total(self) -> u64 {
        self.prompt.saturating_add(self.completion)
    }
}

/// One chat completion, read.
#[derive(Clone, Debug)]
pub struct Reply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    /// Tool-call markup that could not be read (DeepSeek's text form, or a malformed
    /// `tool_calls` entry): nothing in the reply may run.
    pub quarantined: Option<String>,
    /// The request's time, from sending to the last byte read.
    pub elapsed: Duration,
}

/// What one request asks beyond the connection's settings.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    /// At most this many tokens (and never more than the connection's `max_tokens`).
    pub max_tokens: Option<u32>,
    /// A name and a JSON Schema the answer must follow.
    pub schema: Option<(String, Value)>,
}

pub struct ModelClient {
    spec: ModelSpec,
    key: Option<String>,
    http: reqwest::Client,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelClient")
            .field("name", &self.spec.name)
            .field("base_url", &self.spec.base_url)
            .field("key", &self.key.as_ref().map(|_| "***"))
            .finish()
    }
}

impl ModelClient {
    /// A client for `spec`, sending `key` (the vault credential's value) as a bearer token.
    pub fn new(spec: ModelSpec, key: Option<String>) -> Result<ModelClient, ModelError> {
        let url = url::Url::parse(&spec.base_url)
            .map_err(|e| ModelError::Refused(format!("base_url {:?}: {e}", spec.base_url)))?;
        if key.is_some() && !key_may_go_to(&url) {
            return Err(ModelError::Refused(format!(
                "a key is sent only over HTTPS or to this computer, and {} is neither",
                spec.base_url
            )));
        }
        let http = aether_net::outbound(spec.timeout)
            .timeout(spec.timeout)
            .build()
            .map_err(|e| ModelError::Refused(format!("cannot build an HTTP client: {e}")))?;
        Ok(ModelClient { spec, key, http })
    }

    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The models the server offers (`GET {base}/models`); runs none.
    pub async fn models(&self) -> Result<Vec<String>, ModelError> {
        let body = self.send(self.http.get(self.url("models"))).await?.0;
        let ids = body["data"]
            .as_array()
            .ok_or_else(|| ModelError::Malformed("no \"data\" list in the models reply".into()))?
            .iter()
            .filter_map(|m| m["id"].as_str().map(String::from))
            .collect();
        Ok(ids)
    }

    /// One chat completion: `tools` offered (none for the last, tool-less request), sent
    /// with the run's W3C trace context (`traceparent`) when it has one.
    pub async fn chat(
        &self,
        messages: &[Value],
        tools: Option<&[Value]>,
        trace: Option<&str>,
    ) -> Result<Reply, ModelError> {
        self.chat_with(messages, tools, trace, Ask::default()).await
    }

    /// [`ModelClient::chat`] with `ask`: fewer tokens than the connection's `max_tokens`, and
    /// a JSON Schema the answer must follow (OpenAI's `response_format`, which llama.cpp's
    /// server enforces with a grammar).
    pub async fn chat_with(
        &self,
        messages: &[Value],
        tools: Option<&[Value]>,
        trace: Option<&str>,
        ask: Ask,
    ) -> Result<Reply, ModelError> {
        let max_tokens = ask
            .max_tokens
            .map_or(self.spec.max_tokens, |m| m.min(self.spec.max_tokens));
        let mut body = json!({
            "model": self.spec.model,
            "messages": messages,
            "stream": false,
            "max_tokens": max_tokens,
        });
        if let Some((name, schema)) = ask.schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": name, "strict": true, "schema": schema},
            });
        }
        if let Some(t) = self.spec.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(tools) = tools.filter(|t| !t.is_empty()) {
            body["tools"] = json!(tools);
        }
        let mut request = self
            .http
            .post(self.url("chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(trace) = trace {
            request = request.header("traceparent", trace);
        }
        let (reply, elapsed) = self.send(request).await?;
        parse_reply(&reply, self.spec.dialect, elapsed)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.spec.base_url)
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(Value, Duration), ModelError> {
        let started = Instant::now();
        let request = match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                ModelError::Timeout(self.spec.timeout.as_secs())
            } else {
                ModelError::Unreachable {
                    url: self.spec.base_url.clone(),
                    detail: without_url(&e),
                }
            }
        };
        let mut response = request.send().await.map_err(failed)?;
        if response
            .content_length()
            .is_some_and(|n| n > REPLY_CAP as u64)
        {
            return Err(ModelError::TooLarge);
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if bytes.len() + chunk.len() > REPLY_CAP {
                return Err(ModelError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        // A server (or a proxy before it) that echoes the request must not put the key into
        // the run's record or before the model: withheld from errors and replies alike.
        if let Some(key) = self.key.as_deref().filter(|k| !k.is_empty())
            && bytes.windows(key.len()).any(|w| w == key.as_bytes())
        {
            bytes = String::from_utf8_lossy(&bytes)
                .replace(key, "***")
                .into_bytes();
        }
        let status = response.status();
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            return Err(ModelError::Status {
                status: status.as_u16(),
                body: text.chars().take(500).collect(),
            });
        }
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            let start: String = String::from_utf8_lossy(&bytes).chars().take(120).collect();
            ModelError::NotJson(format!("{e}; it begins {start:?}"))
        })?;
        Ok((value, started.elapsed()))
    }
}

/// reqwest's message without the URL it names (a URL may carry a query the operator set).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A chat completion's first choice as a [`Reply`].
pub fn parse_reply(body: &Value, dialect: Dialect, elapsed: Duration) -> Result<Reply, ModelError> {
    if let Some(err) = body.get("error").filter(|e| !e.is_null()) {
        return Err(ModelError::Malformed(format!(
            "the server reported an error: {err}"
        )));
    }
    let choice = body["choices"]
        .get(0)
        .ok_or_else(|| ModelError::Malformed("no choices".into()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| ModelError::Malformed("the first choice has no message".into()))?;
    let mut content = match &message["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => {
            return Err(ModelError::Malformed(format!(
                "message content is not text: {other}"
            )));
        }
    };
    let usage = Usage {
        prompt: body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        completion: body["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        reported: body["usage"]["prompt_tokens"].is_u64()
            || body["usage"]["completion_tokens"].is_u64(),
    };
    let mut tool_calls = Vec::new();
    let mut quarantined = None;
    match &message["tool_calls"] {
        Value::Null => {}
        Value::Array(calls) => {
            for (i, call) in calls.iter().enumerate() {
                match read_call(call, i) {
                    Ok(c) => tool_calls.push(c),
                    Err(why) => {
                        quarantined = Some(format!("tool call {}: {why}", i + 1));
                        break;
                    }
                }
            }
        }
        other => quarantined = Some(format!("tool_calls is not a list: {other}")),
    }
    if dialect != Dialect::Openai
        && let Some(text) = &content
        && dsml::present(text)
    {
        match dsml::parse(text) {
            Ok((rest, calls)) => {
                let first = tool_calls.len();
                tool_calls.extend(calls.into_iter().enumerate().map(|(i, (name, args))| {
                    ToolCall {
                        id: format!("dsml_{}", first + i + 1),
                        name,
                        arguments: args.to_string(),
                    }
                }));
                content = Some(rest).filter(|r| !r.trim().is_empty());
            }
            Err(why) => quarantined = Some(format!("DeepSeek tool-call markup: {why}")),
        }
    }
    if quarantined.is_some() {
        tool_calls.clear();
    }
    Ok(Reply {
        content,
        tool_calls,
        finish_reason: choice["finish_reason"].as_str().map(String::from),
        usage,
        quarantined,
        elapsed,
    })
}

fn read_call(call: &Value, i: usize) -> Result<ToolCall, String> {
    let function = call
        .get("function")
        .filter(|f| f.is_object())
        .ok_or("it has no function")?;
    let name = function["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or("its function has no name")?;
    let arguments = match &function["arguments"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        // Some servers send the object itself.
        v @ Value::Object(_) => v.to_string(),
        other => {
            return Err(format!(
                "its arguments are neither text nor an object: {other}"
            ));
        }
    };
    let id = call["id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(String::from)
        .unwrap_or_else(|| format!("call_{}", i + 1));
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on this computer that answers every request with `status` and a chat reply
    /// whose text is the request's `Authorization` and `traceparent` headers, as an echoing
    /// proxy would.
    async fn echoing_server(status: u16) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let header = |name: &str| {
                    text.lines()
                        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                        .unwrap_or("")
                        .to_string()
                };
                let (auth, trace) = (header("authorization"), header("traceparent"));
                let body = json!({"choices": [{"message": {"role": "assistant",
                    "content": format!("you sent {auth}; trace {trace}")}, "finish_reason": "stop"}]})
                .to_string();
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            }
        });
        format!("http://{addr}/v1")
    }

    #[tokio::test]
    async fn a_key_echoed_back_is_withheld_from_replies_and_errors() {
        let key = "sk-test-0123456789abcdef";
        for status in [200, 500] {
            let spec = ModelSpec {
                name: "m".into(),
                base_url: echoing_server(status).await,
                model: "x".into(),
                dialect: Dialect::Openai,
                key: Some("k".into()),
                temperature: None,
                max_tokens: 16,
                timeout: Duration::from_secs(5),
                max_rounds: 1,
                cost_cap_tokens: None,
            };
            let client = ModelClient::new(spec, Some(key.into())).unwrap();
            let said = match client
                .chat(&[json!({"role": "user", "content": "hi"})], None, None)
                .await
            {
                Ok(reply) => reply.content.unwrap_or_default(),
                Err(e) => e.to_string(),
            };
            assert!(said.contains("Bearer ***"), "{status}: {said}");
            assert!(!said.contains(key), "{status}: {said}");
        }
    }

    /// A run's requests carry the trace context of the call that started it, and nothing
    /// without one.
    #[tokio::test]
    async fn a_chat_request_carries_the_runs_trace_context() {
        let spec = ModelSpec {
            name: "m".into(),
            base_url: echoing_server(200).await,
            model: "x".into(),
            dialect: Dialect::Openai,
            key: None,
            temperature: None,
            max_tokens: 16,
            timeout: Duration::from_secs(5),
            max_rounds: 1,
            cost_cap_tokens: None,
        };
        let client = ModelClient::new(spec, None).unwrap();
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let hi = [json!({"role": "user", "content": "hi"})];
        let said = client.chat(&hi, None, Some(trace)).await.unwrap().content;
        assert!(
            said.unwrap_or_default()
                .ends_with(&format!("trace {trace}"))
        );
        let said = client.chat(&hi, None, None).await.unwrap().content;
        assert!(said.unwrap_or_default().ends_with("trace "));
    }

    fn reply(message: Value) -> Value {
        json!({"choices": [{"message": message, "finish_reason": "tool_calls"}],
               "usage": {"prompt_tokens": 120, "completion_tokens": 30}})
    }

    #[test]
    fn standard_tool_calls_are_read() {
        let r = parse_reply(
            &reply(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}},
                {"type": "function", "function": {"name": "list_dir", "arguments": {"path": "."}}}
            ]})),
            Dialect::Openai,
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(
            (r.tool_calls[0].id.as_str(), r.tool_calls[0].name.as_str()),
            ("a", "read_file")
        );
        assert_eq!(
            (
                r.tool_calls[1].id.as_str(),
                r.tool_calls[1].arguments.as_str()
            ),
            ("call_2", "{\"path\":\".\"}")
        );
        assert_eq!((r.usage.prompt, r.usage.completion), (120, 30));
        assert!(r.quarantined.is_none());
    }

    #[test]
    fn a_malformed_call_quarantines_the_whole_reply() {
        let r = parse_reply(
            &reply(json!({"content": "", "tool_calls": [
                {"id": "a", "function": {"name": "read_file", "arguments": "{}"}},
                {"id": "b", "function": {"arguments": "{}"}}
            ]})),
            Dialect::Openai,
            Duration::ZERO,
        )
        .unwrap();
        assert!(r.tool_calls.is_empty(), "nothing runs");
        assert!(
            r.quarantined
                .unwrap()
                .contains("tool call 2: its function has no name")
        );
    }

    #[test]
    fn not_a_chat_completion_is_an_error() {
        for body in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"text": "hi"}]}),
            json!({"error": {"message": "model not loaded"}}),
            json!({"choices": [{"message": {"content": 5}}]}),
        ] {
            assert!(
                parse_reply(&body, Dialect::Openai, Duration::ZERO).is_err(),
                "{body}"
            );
        }
    }

    #[test]
    fn deepseek_text_calls_are_converted_only_for_that_dialect() {
        let text = "Let me look.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">README.md</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
        let body = reply(json!({"content": text}));
        let r = parse_reply(&body, Dialect::Deepseek, Duration::ZERO).unwrap();
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].arguments, "{\"path\":\"README.md\"}");
        assert_eq!(r.content.as_deref(), Some("Let me look.\n"));
        let r = parse_reply(&body, Dialect::Openai, Duration::ZERO).unwrap();
        assert!(
            r.tool_calls.is_empty() && r.quarantined.is_none(),
            "plain text to an openai connection"
        );
        let broken = reply(
            json!({"content": "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">"}),
        );
        let r = parse_reply(&broken, Dialect::Auto, Duration::ZERO).unwrap();
        assert!(r.tool_calls.is_empty() && r.quarantined.is_some());
    }
}

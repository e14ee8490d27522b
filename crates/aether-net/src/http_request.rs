//! `http_request`: one HTTP request (GET, POST, PUT, DELETE, PATCH, HEAD) to an allowed host,
//! through the egress gate; the answer's status, headers and body (capped).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::{AgentProfile, Risk, ToolDef};
use aether_tools_core::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Request, Resolve, fetch};

/// Bytes of an answer's body read at most.
const MAX_BODY: usize = 1 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The URL (http or https). Its host must be in the agent's allowed domains.
    url: String,
    /// GET (default), POST, PUT, DELETE, PATCH or HEAD.
    #[serde(default)]
    method: Option<HttpMethod>,
    /// Request headers (Host and connection headers are Aether's).
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    /// The request body, as text.
    #[serde(default)]
    body: Option<String>,
    /// Seconds for the whole exchange, redirects included (1-120, default 30).
    #[serde(default)]
    #[schemars(range(min = 1, max = 120))]
    timeout_seconds: Option<u64>,
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
enum HttpMethod {
    Get,
    Post,
    Put,
    Delete,
    Patch,
    Head,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    status: u16,
    /// Where the answer came from, after redirects.
    url: String,
    /// Every URL redirected to, in order.
    redirects: Vec<String>,
    content_type: Option<String>,
    /// The body as text (binary bodies are described, not included).
    body: String,
    /// The body was longer than 1 MiB and was cut.
    truncated: bool,
    elapsed_ms: u64,
}

pub struct HttpRequest {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
}

impl HttpRequest {
    pub fn new(resolver: Arc<dyn Resolve>) -> HttpRequest {
        HttpRequest {
            def: crate::research_def(
                "http_request",
                "HTTP request",
                "Send one HTTP request (GET, POST, PUT, DELETE, PATCH or HEAD) to a host the \
                     operator allowed, and get the status, final URL and body (text, up to 1 MiB). \
                     Private and loopback addresses are refused unless allowed; redirects are \
                     followed (at most 5), each checked again; credentials in the request are refused.",
                schema_of::<Args>(),
                schema_of::<Output>(),
                Risk::High,
                false,
            )
            .declaring(ArgumentKinds::urls(&["url"])),
            resolver,
        }
    }
}

#[async_trait]
impl Tool for HttpRequest {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let policy = crate::policy_for(&cx.agent)?;
        let method = match args.method.unwrap_or(HttpMethod::Get) {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Delete => reqwest::Method::DELETE,
            HttpMethod::Patch => reqwest::Method::PATCH,
            HttpMethod::Head => reqwest::Method::HEAD,
        };
        let timeout = Duration::from_secs(args.timeout_seconds.unwrap_or(30).clamp(1, 120));
        let response = fetch(
            &self.resolver,
            &policy,
            cx.destinations.as_ref(),
            Request {
                method,
                url: args.url,
                headers: args.headers.unwrap_or_default().into_iter().collect(),
                body: args.body.map(String::into_bytes),
                timeout,
                max_body: MAX_BODY,
            },
        )
        .await?;
        let content_type = response.content_type();
        let body = crate::body_text(&response.body, content_type.as_deref());
        let output = Output {
            status: response.status,
            url: response.url,
            redirects: response.redirects,
            content_type,
            body,
            truncated: response.truncated,
            elapsed_ms: response.elapsed.as_millis() as u64,
        };
        let text = format!(
            "HTTP {} from {}{}\n\n{}{}",
            output.status,
            output.url,
            if output.redirects.is_empty() {
                String::new()
            } else {
                format!(" (after {} redirect(s))", output.redirects.len())
            },
            output.body,
            if output.truncated {
                "\n[… the body was longer than 1 MiB and was cut here]"
            } else {
                ""
            }
        );
        let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(text, structured))
    }
}

//! `web_fetch`: a page as readable text. GET through the egress gate, HTML turned into plain
//! text (scripts, styles and markup gone, links kept as footnotes), cut to a length with a
//! visible marker.

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

/// Bytes of a page read at most.
const MAX_PAGE: usize = 4 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The page's URL (http or https). Its host must be in the agent's allowed domains.
    url: String,
    /// Characters of text to return at most (1000-100000, default 20000).
    #[serde(default)]
    #[schemars(range(min = 1000, max = 100000))]
    max_chars: Option<usize>,
    /// Seconds for the whole fetch, redirects included (1-60, default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    status: u16,
    /// Where the page came from, after redirects.
    url: String,
    content_type: Option<String>,
    /// The page as plain text.
    text: String,
    /// The text was longer than max_chars (or the page than 4 MiB) and was cut.
    truncated: bool,
}

pub struct WebFetch {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
}

impl WebFetch {
    pub fn new(resolver: Arc<dyn Resolve>) -> WebFetch {
        WebFetch {
            def: crate::research_def(
                "web_fetch",
                "Fetch a web page as text",
                "Fetch a web page from a host the operator allowed and get it as readable \
                     plain text: scripts, styles and markup removed, links listed as footnotes, cut at \
                     max_chars with a marker. Redirects are followed (at most 5), each checked again.",
                schema_of::<Args>(),
                schema_of::<Output>(),
                Risk::Medium,
                true,
            )
            .declaring(ArgumentKinds::urls(&["url"])),
            resolver,
        }
    }
}

#[async_trait]
impl Tool for WebFetch {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let policy = crate::policy_for(&cx.agent)?;
        let max_chars = args.max_chars.unwrap_or(20_000).clamp(1_000, 100_000);
        let response = fetch(
            &self.resolver,
            &policy,
            cx.destinations.as_ref(),
            Request {
                method: reqwest::Method::GET,
                url: args.url,
                headers: vec![(
                    "Accept".into(),
                    "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1".into(),
                )],
                body: None,
                timeout: Duration::from_secs(args.timeout_seconds.unwrap_or(20).clamp(1, 60)),
                max_body: MAX_PAGE,
            },
        )
        .await?;
        let content_type = response.content_type();
        let html = content_type
            .as_deref()
            .map(|t| t.contains("html"))
            .unwrap_or_else(|| response.body.trim_ascii_start().starts_with(b"<"));
        let text = if html {
            readable(&response.body)
        } else {
            crate::body_text(&response.body, content_type.as_deref())
        };
        let cut = text.chars().count() > max_chars;
        let text = aether_policy::truncate::bound_text(&text, max_chars).into_owned();
        let output = Output {
            status: response.status,
            url: response.url,
            content_type,
            text,
            truncated: cut || response.truncated,
        };
        let shown = format!("{} (HTTP {})\n\n{}", output.url, output.status, output.text);
        let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(shown, structured))
    }
}

/// HTML as plain text, lines wrapped at 100 characters.
fn readable(html: &[u8]) -> String {
    html2text::from_read(html, 100)
        .unwrap_or_else(|e| format!("[the page could not be read as HTML: {e}]"))
}

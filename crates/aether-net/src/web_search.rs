//! `web_search`: results from the operator's SearXNG instance (`research.searxng_url`), as
//! titles, URLs and snippets. Not offered when no instance is configured.
//!
//! The instance is the operator's own choice, so its host is allowed for this tool whatever
//! the agent's domains, and (as SearXNG usually runs beside Aether) it may be on a private
//! address; metadata and the other never-reachable classes stay refused. The query goes
//! through the same client: DLP scans it before anything leaves.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::egress::{DomainAllowlist, EgressPolicy};
use aether_policy::{AgentProfile, Risk, ToolDef};
use aether_tools_core::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{Request, Resolve, fetch};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// What to search for.
    query: String,
    /// Results to return at most (1-20, default 8).
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    max_results: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    results: Vec<Hit>,
}

pub struct WebSearch {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
    searxng: Option<url::Url>,
}

impl WebSearch {
    pub fn new(resolver: Arc<dyn Resolve>, searxng: Option<url::Url>) -> WebSearch {
        WebSearch {
            def: crate::research_def(
                "web_search",
                "Search the web",
                "Search the web through the operator's SearXNG instance and get titles, \
                     URLs and snippets. Fetch a result with web_fetch (its host must be allowed).",
                schema_of::<Args>(),
                schema_of::<Output>(),
                Risk::Medium,
                true,
            ),
            resolver,
            searxng,
        }
    }
}

#[async_trait]
impl Tool for WebSearch {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, _agent: &AgentProfile) -> Result<(), String> {
        match self.searxng {
            Some(_) => Ok(()),
            None => Err("no search engine is configured (research.searxng_url)".into()),
        }
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let Some(base) = &self.searxng else {
            return Err(ToolError::failed(
                "no search engine is configured (research.searxng_url)",
            ));
        };
        if args.query.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the query is empty".into()));
        }
        let mut url = base.join("search").map_err(|e| {
            ToolError::failed(format!("research.searxng_url cannot take a path: {e}"))
        })?;
        url.query_pairs_mut()
            .append_pair("q", &args.query)
            .append_pair("format", "json");
        let host = base.host_str().unwrap_or_default().to_string();
        let policy = EgressPolicy {
            domains: DomainAllowlist::new(std::slice::from_ref(&host))
                .map_err(|e| ToolError::failed(format!("research.searxng_url: {e}")))?,
            allow_private: true,
        };
        let response = fetch(
            &self.resolver,
            &policy,
            cx.destinations.as_ref(),
            Request {
                method: reqwest::Method::GET,
                url: url.to_string(),
                headers: vec![("Accept".into(), "application/json".into())],
                body: None,
                timeout: Duration::from_secs(20),
                max_body: 2 << 20,
            },
        )
        .await?;
        if response.status != 200 {
            return Err(ToolError::failed(format!(
                "the search engine answered HTTP {} (is its JSON format enabled?)",
                response.status
            )));
        }
        let answer: Value = serde_json::from_slice(&response.body).map_err(|e| {
            ToolError::failed(format!("the search engine's answer is not JSON: {e}"))
        })?;
        let want = args.max_results.unwrap_or(8).clamp(1, 20);
        let text = |v: &Value, key: &str| {
            v.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(500)
                .collect::<String>()
        };
        let results: Vec<Hit> = answer["results"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .take(want)
                    .map(|r| Hit {
                        title: text(r, "title"),
                        url: text(r, "url"),
                        snippet: text(r, "content"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let shown = if results.is_empty() {
            "No results.".to_string()
        } else {
            results
                .iter()
                .enumerate()
                .map(|(i, h)| format!("{}. {}\n   {}\n   {}", i + 1, h.title, h.url, h.snippet))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let structured = serde_json::to_value(Output { results }).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(shown, structured))
    }
}

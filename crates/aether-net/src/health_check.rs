//! `http_health_check`: is this URL up? Status and latency of a HEAD request (GET where HEAD
//! is not allowed), through the egress gate; no body is returned.

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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The URL (http or https). Its host must be in the agent's allowed domains.
    url: String,
    /// Seconds to wait (1-60, default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// A 2xx or 3xx status.
    healthy: bool,
    status: u16,
    url: String,
    latency_ms: u64,
}

pub struct HealthCheck {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
}

impl HealthCheck {
    pub fn new(resolver: Arc<dyn Resolve>) -> HealthCheck {
        HealthCheck {
            def: crate::research_def(
                "http_health_check",
                "HTTP health check",
                "Check whether a URL on an allowed host answers: the HTTP status and the \
                     latency of a HEAD request (GET if HEAD is not allowed), without the body.",
                schema_of::<Args>(),
                schema_of::<Output>(),
                Risk::Low,
                true,
            )
            .declaring(ArgumentKinds::urls(&["url"])),
            resolver,
        }
    }
}

#[async_trait]
impl Tool for HealthCheck {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let policy = crate::policy_for(&cx.agent)?;
        let timeout = Duration::from_secs(args.timeout_seconds.unwrap_or(10).clamp(1, 60));
        let started = std::time::Instant::now();
        let request = |method, timeout| Request {
            method,
            url: args.url.clone(),
            headers: Vec::new(),
            body: None,
            timeout,
            max_body: 0,
        };
        let hops = cx.destinations.as_ref();
        let mut response = fetch(
            &self.resolver,
            &policy,
            hops,
            request(reqwest::Method::HEAD, timeout),
        )
        .await?;
        if response.status == 405 || response.status == 501 {
            // The GET gets what is left of the time, not a new allowance.
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(ToolError::failed(format!(
                    "no answer within {} s",
                    timeout.as_secs()
                )));
            }
            response = fetch(
                &self.resolver,
                &policy,
                hops,
                request(reqwest::Method::GET, left),
            )
            .await?;
        }
        let output = Output {
            healthy: (200..400).contains(&response.status),
            status: response.status,
            url: response.url,
            latency_ms: response.elapsed.as_millis() as u64,
        };
        let text = format!(
            "{} {} in {} ms ({})",
            output.url,
            output.status,
            output.latency_ms,
            if output.healthy {
                "healthy"
            } else {
                "not healthy"
            }
        );
        let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
        Ok(ToolOutput::with_structured(text, structured))
    }
}

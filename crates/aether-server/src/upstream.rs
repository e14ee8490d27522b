//! Upstream MCP servers behind Aether (federation, first part: stdio upstreams).
//!
//! Each upstream in `aether.toml` is started when Aether starts, with only the environment the
//! operator gave it (plus `PATH`, `HOME` and `LANG`: no credentials of Aether's), and its tools
//! join the catalog as `SERVER__TOOL` — as external tools, so unapproved until an operator
//! approves their definition in the registry, and held back again when it changes. Every call
//! goes through the same pipeline as a built-in's (rules, egress and DLP when the tool may
//! reach the world, tiers, receipts, audit) and is forwarded with the upstream's time limit; a
//! reply larger than 4 MiB is refused. An upstream that dies is started again on a later call,
//! no sooner than its backoff allows (1 s, doubling to 30 s); a call is never retried (it may
//! have had effects). The client's own token never reaches an upstream: Aether is its client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_policy::{Risk, Tier, ToolDef, ToolMeta};
use aether_tools::{CallContext, Content, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};

/// The largest reply taken from an upstream.
pub const MAX_REPLY: usize = 4 << 20;

/// One upstream as the operator declared it.
#[derive(Clone, Debug)]
pub struct UpstreamSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub timeout: Duration,
    /// The group its tools are in (agents reach them through `mcp_servers`).
    pub group: String,
    pub tier: Tier,
    /// A new process for every call (stopped after it), instead of one kept running.
    pub fresh: bool,
}

/// A running upstream, or why it is not running.
pub struct Upstream {
    spec: UpstreamSpec,
    state: tokio::sync::Mutex<State>,
}

enum State {
    Up {
        service: Box<RunningService<RoleClient, ()>>,
        _child: tokio::process::Child,
    },
    Down {
        why: String,
        since: Instant,
        failures: u32,
    },
}

impl Upstream {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Starts the process and completes MCP's initialization, within the time limit.
    async fn start(spec: &UpstreamSpec) -> Result<State, String> {
        let mut command = tokio::process::Command::new(&spec.command);
        command
            .args(&spec.args)
            .env_clear()
            .envs(
                ["PATH", "HOME", "LANG"]
                    .iter()
                    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v))),
            )
            .envs(&spec.env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("{} did not start: {e}", spec.command))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let service = tokio::time::timeout(spec.timeout, ().serve((stdout, stdin)))
            .await
            .map_err(|_| {
                format!(
                    "it did not finish MCP's initialization within {} s",
                    spec.timeout.as_secs()
                )
            })?
            .map_err(|e| format!("MCP initialization failed: {e}"))?;
        Ok(State::Up {
            service: Box::new(service),
            _child: child,
        })
    }

    /// The upstream's peer, started again if it died and its backoff has passed.
    async fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let mut state = self.state.lock().await;
        if let State::Up { service, .. } = &*state {
            if !service.is_closed() {
                return Ok(service.peer().clone());
            }
            *state = State::Down {
                why: "it stopped".into(),
                since: Instant::now(),
                failures: 0,
            };
        }
        let State::Down {
            why,
            since,
            failures,
        } = &*state
        else {
            unreachable!("the state is Down here");
        };
        let wait = Duration::from_secs(1 << (*failures).min(5)).min(Duration::from_secs(30));
        if since.elapsed() < wait {
            return Err(format!(
                "upstream {} is down ({why}); Aether starts it again in {} s",
                self.spec.name,
                (wait - since.elapsed()).as_secs() + 1
            ));
        }
        let failures = *failures;
        match Upstream::start(&self.spec).await {
            Ok(up) => {
                tracing::info!(upstream = %self.spec.name, "upstream started again");
                *state = up;
                match &*state {
                    State::Up { service, .. } => Ok(service.peer().clone()),
                    State::Down { .. } => unreachable!("just started"),
                }
            }
            Err(why) => {
                *state = State::Down {
                    why: why.clone(),
                    since: Instant::now(),
                    failures: failures + 1,
                };
                Err(format!(
                    "upstream {} could not be started again: {why}",
                    self.spec.name
                ))
            }
        }
    }

    /// Marks the upstream down after a failure that leaves its state unknown (a call that
    /// timed out): the next call starts a fresh process.
    async fn reset(&self, why: String) {
        *self.state.lock().await = State::Down {
            why,
            since: Instant::now(),
            failures: 0,
        };
    }
}

/// Starts every upstream and lists its tools. An upstream that cannot start is reported (and
/// has no tools this run); the others serve.
pub async fn connect(specs: Vec<UpstreamSpec>) -> (Vec<Arc<dyn Tool>>, Vec<String>) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut problems = Vec::new();
    for spec in specs {
        let state = match Upstream::start(&spec).await {
            Ok(state) => state,
            Err(why) => {
                problems.push(format!("upstream {}: {why}", spec.name));
                continue;
            }
        };
        let listed = match &state {
            State::Up { service, .. } => {
                tokio::time::timeout(spec.timeout, service.peer().list_all_tools()).await
            }
            State::Down { .. } => unreachable!("just started"),
        };
        let listed = match listed {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                problems.push(format!(
                    "upstream {}: listing its tools failed: {e}",
                    spec.name
                ));
                continue;
            }
            Err(_) => {
                problems.push(format!(
                    "upstream {}: listing its tools took longer than {} s",
                    spec.name,
                    spec.timeout.as_secs()
                ));
                continue;
            }
        };
        // A fresh upstream keeps no process between calls: the one that listed its tools goes.
        let state = if spec.fresh {
            drop(state);
            State::Down {
                why: "it runs a process per call".into(),
                since: Instant::now(),
                failures: 0,
            }
        } else {
            state
        };
        let upstream = Arc::new(Upstream {
            spec: spec.clone(),
            state: tokio::sync::Mutex::new(state),
        });
        let mut names = std::collections::BTreeSet::new();
        for tool in listed {
            let raw = serde_json::to_value(&tool).unwrap_or(Value::Null);
            let Some(def) = definition(&spec, &raw) else {
                problems.push(format!(
                    "upstream {}: a tool without a usable name or schema was left out",
                    spec.name
                ));
                continue;
            };
            if !names.insert(def.name.clone()) {
                problems.push(format!(
                    "upstream {}: two tools map to {}; the second was left out",
                    spec.name, def.name
                ));
                continue;
            }
            tools.push(Arc::new(UpstreamTool {
                upstream: upstream.clone(),
                remote: tool.name.to_string(),
                def,
            }));
        }
    }
    (tools, problems)
}

/// `SERVER__TOOL`, in the characters and length clients accept (letters, digits, `_`, `-`;
/// at most 64). A name that had to change gets a short hash of the original, so two tools
/// can never share a name; upstream names cannot contain `__`, so the split is unambiguous.
pub fn catalog_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{server}__{clean}");
    if clean != tool || name.len() > 64 {
        let digest = aether_policy::sha256(tool.as_bytes());
        let suffix = &digest.to_hex()[..8];
        name.truncate(64 - 9);
        name = format!("{name}-{suffix}");
    }
    name
}

/// A catalog definition for an upstream's tool (its MCP `Tool` as JSON).
fn definition(spec: &UpstreamSpec, raw: &Value) -> Option<ToolDef> {
    let remote = raw.get("name")?.as_str()?;
    if remote.is_empty() {
        return None;
    }
    let input_schema = raw.get("inputSchema")?.clone();
    if !input_schema.is_object() {
        return None;
    }
    let hint = |key: &str| {
        raw.get("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    // MCP's defaults: not read-only, destructive, not idempotent, open world.
    let read_only = hint("readOnlyHint").unwrap_or(false);
    let destructive = !read_only && hint("destructiveHint").unwrap_or(true);
    Some(ToolDef {
        name: catalog_name(&spec.name, remote),
        title: raw
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or(remote)
            .to_string(),
        group: spec.group.clone(),
        tier: spec.tier,
        description: format!(
            "{} (from the upstream server {:?})",
            raw.get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim(),
            spec.name
        ),
        input_schema,
        output_schema: raw
            .get("outputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"})),
        meta: ToolMeta {
            risk: if read_only { Risk::Medium } else { Risk::High },
            read_only,
            reaches_network: hint("openWorldHint").unwrap_or(true),
            needs_confirmation: spec.tier == Tier::Restricted,
            idempotent: hint("idempotentHint").unwrap_or(false),
            destructive,
        },
    })
}

/// One upstream tool in Aether's catalog.
struct UpstreamTool {
    upstream: Arc<Upstream>,
    /// Its name at the upstream.
    remote: String,
    def: ToolDef,
}

#[async_trait]
impl Tool for UpstreamTool {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let name = self.upstream.name().to_string();
        // Fresh: a process of this call's own, killed when the call ends (however it ends).
        let fresh = if self.upstream.spec.fresh {
            Some(Upstream::start(&self.upstream.spec).await.map_err(|why| {
                ToolError::failed(format!("upstream {name} could not be started: {why}"))
            })?)
        } else {
            None
        };
        let peer = match &fresh {
            Some(State::Up { service, .. }) => service.peer().clone(),
            Some(State::Down { .. }) => unreachable!("just started"),
            None => self.upstream.peer().await.map_err(ToolError::failed)?,
        };
        let mut params = CallToolRequestParams::new(self.remote.clone());
        params.arguments = args.as_object().cloned();
        let timeout = self.upstream.spec.timeout;
        let result = tokio::select! {
            _ = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
            r = tokio::time::timeout(timeout, peer.call_tool(params)) => r,
        };
        let result = match result {
            Err(_) => {
                // Its state is unknown now: a fresh process serves the next call.
                if fresh.is_none() {
                    self.upstream
                        .reset(format!("a call took longer than {} s", timeout.as_secs()))
                        .await;
                }
                return Err(ToolError::failed(format!(
                    "upstream {name} did not answer within {} s; the call was not retried (it may have had effects)",
                    timeout.as_secs()
                )));
            }
            Ok(Err(e)) => {
                // Anything but an answer from the server (a JSON-RPC error) means the
                // connection is gone or broken: a fresh process serves the next call.
                let broken = !matches!(e, rmcp::service::ServiceError::McpError(_));
                if broken && fresh.is_none() {
                    self.upstream.reset(format!("{e}")).await;
                }
                return Err(ToolError::failed(format!(
                    "upstream {name} failed the call: {e}{}; it was not retried (it may have had effects)",
                    if broken {
                        " (Aether starts it again for a later call)"
                    } else {
                        ""
                    }
                )));
            }
            Ok(Ok(result)) => result,
        };
        let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
        let size = serde_json::to_vec(&raw).map(|v| v.len()).unwrap_or(0);
        if size > MAX_REPLY {
            return Err(ToolError::failed(format!(
                "upstream {name} replied with {size} bytes, more than Aether takes ({} MiB)",
                MAX_REPLY >> 20
            )));
        }
        Ok(output(&raw))
    }
}

/// An MCP `CallToolResult` (as JSON) as a tool's output.
fn output(raw: &Value) -> ToolOutput {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    let content = raw
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => Content::Text(text(b, "text").unwrap_or_default()),
                    Some("image") => Content::Image {
                        data_base64: text(b, "data").unwrap_or_default(),
                        mime_type: text(b, "mimeType").unwrap_or_default(),
                    },
                    Some("audio") => Content::Audio {
                        data_base64: text(b, "data").unwrap_or_default(),
                        mime_type: text(b, "mimeType").unwrap_or_default(),
                    },
                    Some("resource") => {
                        let r = b.get("resource").cloned().unwrap_or(Value::Null);
                        Content::Resource {
                            uri: text(&r, "uri").unwrap_or_default(),
                            mime_type: text(&r, "mimeType").unwrap_or_default(),
                            text: text(&r, "text"),
                            blob_base64: text(&r, "blob"),
                        }
                    }
                    _ => Content::Text(format!(
                        "[{} from the upstream]",
                        b.get("type").and_then(Value::as_str).unwrap_or("a block")
                    )),
                })
                .collect()
        })
        .unwrap_or_default();
    ToolOutput {
        content,
        structured: raw.get("structuredContent").cloned(),
        is_error: raw.get("isError").and_then(Value::as_bool).unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_are_what_clients_accept_and_never_collide() {
        assert_eq!(catalog_name("fs", "read_text_file"), "fs__read_text_file");
        let dotted = catalog_name("fs", "a.b");
        let underscored = catalog_name("fs", "a_b");
        assert_ne!(dotted, underscored);
        assert!(dotted.starts_with("fs__a_b-"), "{dotted}");
        let long = catalog_name("server", &"x".repeat(200));
        assert!(long.len() <= 64, "{long}");
        for name in [dotted, long, catalog_name("s", "ünï cødé/../x")] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{name}"
            );
        }
    }
}

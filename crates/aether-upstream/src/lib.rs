//! Upstream MCP servers behind Aether (federation).
//!
//! Each upstream in `aether.toml` is reached over stdio (a process Aether starts, with only the
//! environment the operator gave it plus `PATH`, `HOME` and `LANG`) or Streamable HTTP (a URL,
//! with no proxy, no redirects, and the operator's credential from the vault). Its tools join
//! the catalog as `SERVER__TOOL` — as external tools, so unapproved until an operator approves
//! their definition in the registry, and held back again when it changes. Every call goes
//! through the same pipeline as a built-in's (rules, egress and DLP when the tool may reach the
//! world, tiers, receipts, audit) and is forwarded with the upstream's time limit; a reply
//! larger than 4 MiB is refused. A call is never retried (it may have had effects).
//!
//! [`Upstreams::run`] keeps them current: an upstream that died is started again (backoff 1 s,
//! doubling to 30 s), and one that announces `list_changed`, was started again, or that an
//! operator refreshes (`aether sources refresh`) is listed again, its changed tools replaced in
//! the catalog (held back until approved). Each upstream's status (connected, last error, tool
//! count, fingerprint) is written to the store for `aether sources` and the admin API.
//!
//! Their resources and prompts are served too, to the agents that reach the upstream's group:
//! prompts as `SERVER__PROMPT`, resources under `aether://upstream/SERVER/<its URI, escaped>`.
//! The client's own token never reaches an upstream: Aether is its client.

// rmcp names the client's initialize parameters `ClientInfo` in the protocol versions Aether
// speaks to upstreams today; the alias is deprecated for the coming revision.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aether_pipeline::Pipeline;
use aether_policy::{Risk, Tier, ToolDef, ToolMeta};
use aether_store::{Store, UpstreamStatus};
use aether_tools::{CallContext, Content, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientInfo, GetPromptRequestParams, Implementation,
    ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The largest reply taken from an upstream.
pub const MAX_REPLY: usize = 4 << 20;

/// The longest line read from a stdio upstream: a reply past [`MAX_REPLY`] is refused
/// anyway, so a longer line is cut off here (see [`bounded_replies`]).
const MAX_STDIO_LINE: usize = MAX_REPLY + (64 << 10);

/// The error code of the answer [`bounded_replies`] puts in place of a reply too large.
const TOO_LARGE: i64 = -32099;

/// A stdio upstream's output as rmcp reads it, a line (message) at a time, each at most
/// [`MAX_STDIO_LINE`] bytes. rmcp itself drops a line over its own limit silently, and the
/// call it answered would wait for its time limit; here a line past the limit is answered at
/// once, in its place, with a JSON-RPC error for the request it answers ([`TOO_LARGE`]), its
/// id read from the line's head; where no id can be read, the connection is closed (every
/// call in flight fails at once and the upstream is started again). The rest of the line is
/// read and dropped.
fn bounded_replies(
    stdout: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::io::DuplexStream {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (rmcp_side, mut ours) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            let Ok(read) = (&mut stdout)
                .take(MAX_STDIO_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await
            else {
                return;
            };
            if read == 0 {
                return;
            }
            if line.len() <= MAX_STDIO_LINE || line.ends_with(b"\n") {
                if ours.write_all(&line).await.is_err() {
                    return;
                }
                continue;
            }
            // The id: a member of the message's own object near its head; else read on (and
            // drop) to the line's end, where a writer that puts it last put it.
            let mut id = top_level_id(&line[..line.len().min(64 << 10)]);
            let mut tail: Vec<u8> = line[line.len().saturating_sub(4096)..].to_vec();
            let mut ended = false;
            if id.is_none() {
                loop {
                    line.clear();
                    match (&mut stdout)
                        .take(1 << 20)
                        .read_until(b'\n', &mut line)
                        .await
                    {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {
                            tail.extend_from_slice(&line);
                            let keep = tail.len().saturating_sub(4096);
                            tail.drain(..keep);
                            if line.ends_with(b"\n") {
                                break;
                            }
                        }
                    }
                }
                ended = true;
                id = trailing_id(&tail);
            }
            let Some(id) = id else {
                tracing::warn!(
                    "an upstream sent a message over {MAX_STDIO_LINE} bytes without a readable id; closing its connection"
                );
                return;
            };
            let answer = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": TOO_LARGE,
                    "message": format!("the reply is over {MAX_STDIO_LINE} bytes"),
                    "data": {"aether/tooLarge": MAX_STDIO_LINE},
                },
            });
            let mut answer = answer.to_string().into_bytes();
            answer.push(b'\n');
            if ours.write_all(&answer).await.is_err() {
                return;
            }
            // The rest of the line, dropped.
            while !ended {
                line.clear();
                match (&mut stdout)
                    .take(1 << 20)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) => ended = line.ends_with(b"\n"),
                }
            }
        }
    });
    rmcp_side
}

/// The `id` member of a JSON-RPC message's own object, read from the head of its text: only a
/// member at the top level counts (an `"id"` inside the result is someone else's).
fn top_level_id(head: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < head.len() {
        match head[at] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let end = string_end(head, at)?;
                if depth == 1 && &head[at..=end] == b"\"id\"" {
                    let rest = skip_space(head, end + 1);
                    if head.get(rest) == Some(&b':') {
                        return json_scalar(&head[skip_space(head, rest + 1)..]);
                    }
                }
                at = end;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// The `id` member that ends a message (`…, "id": 7}`), read from the tail of its text.
fn trailing_id(tail: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(tail);
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    let at = body.rfind("\"id\"")?;
    let value = body[at + 4..].trim_start().strip_prefix(':')?.trim();
    if !(body[..at].trim_end().ends_with(',') || body[..at].trim_end().ends_with('{')) {
        return None;
    }
    serde_json::from_str::<Value>(value)
        .ok()
        .filter(|v| v.is_string() || v.is_number())
}

/// Where the JSON string starting at `start` (a quote) ends (its closing quote).
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Some(at),
            _ => at += 1,
        }
    }
    None
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// A number or a string at the start of `text`, as JSON.
fn json_scalar(text: &[u8]) -> Option<Value> {
    let end = match text.first()? {
        b'"' => string_end(text, 0)? + 1,
        _ => text
            .iter()
            .position(|b| !(b.is_ascii_digit() || *b == b'-'))
            .unwrap_or(text.len()),
    };
    serde_json::from_slice::<Value>(&text[..end])
        .ok()
        .filter(|v| v.is_string() || v.is_number())
}

/// A time limit as said to a caller: `4 s`, or `1.8 s` when it is not whole seconds.
fn seconds(limit: Duration) -> String {
    if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else {
        format!("{:.1} s", limit.as_secs_f64())
    }
}

/// Where resources of upstreams live in Aether's namespace.
pub const RESOURCE_PREFIX: &str = "aether://upstream/";

/// How Aether reaches an upstream.
#[derive(Clone, Debug)]
pub enum Endpoint {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Environment variables whose values come from the vault: variable -> credential.
        env_credentials: BTreeMap<String, String>,
        /// Started even where Aether's own files cannot be covered from it.
        uncovered: bool,
    },
    Http {
        url: String,
        /// Headers sent with every request (not secret).
        headers: BTreeMap<String, String>,
        /// A credential from the vault, sent as `Authorization: Bearer …`.
        credential: Option<String>,
    },
}

/// One upstream as the operator declared it.
#[derive(Clone, Debug)]
pub struct UpstreamSpec {
    pub name: String,
    pub endpoint: Endpoint,
    pub timeout: Duration,
    /// The group its tools are in (agents reach them through `mcp_servers`).
    pub group: String,
    pub tier: Tier,
    /// A new connection (and process) for every call, closed after it.
    pub fresh: bool,
    /// The operator's additions to what its tools' schemas say of their arguments, by remote
    /// tool name (`"*"`: every tool).
    pub arguments: std::collections::BTreeMap<String, aether_policy::ArgumentKinds>,
}

impl UpstreamSpec {
    fn transport(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Stdio { .. } => "stdio",
            Endpoint::Http { .. } => "http",
        }
    }
}

/// Where upstream credentials come from: the vault's ciphertexts in the store, opened with the
/// key file.
#[derive(Clone)]
pub struct Credentials {
    pub store: Store,
    pub key_file: PathBuf,
    /// Aether's own files (the vault key, the store, the configuration): a stdio upstream
    /// runs where it cannot read them (see [`Upstream::connect`]).
    pub hidden: Vec<PathBuf>,
}

impl Credentials {
    async fn get(&self, name: &str) -> Result<String, String> {
        self.store
            .open_credential(name, &self.key_file)
            .await?
            .ok_or_else(|| {
                format!("credential {name:?} is not in the vault (set it: aether credentials set {name})")
            })
    }
}

/// Aether as an upstream's MCP client: hears its `list_changed` notifications.
#[derive(Clone)]
struct Link {
    stale: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl Link {
    fn changed(&self) {
        self.stale.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }
}

impl rmcp::ClientHandler for Link {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed();
    }

    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::default(),
            Implementation::new("aether", env!("CARGO_PKG_VERSION")),
        )
    }
}

type Service = RunningService<RoleClient, Link>;

enum State {
    /// Never started: the first use starts it at once.
    Idle,
    Up {
        service: Box<Service>,
        _child: Option<tokio::process::Child>,
        /// Which connection this is: a failure resets only the connection it happened on.
        generation: u64,
    },
    Down {
        why: String,
        since: Instant,
        failures: u32,
    },
}

/// What an upstream offered when last listed.
#[derive(Default)]
struct Listing {
    tools: Vec<Arc<dyn Tool>>,
    resources: Vec<Value>,
    templates: Vec<Value>,
    prompts: Vec<Value>,
    /// Catalog prompt name -> its name at the upstream.
    prompt_names: BTreeMap<String, String>,
    /// The upstream URIs it listed, and its URI templates as patterns: only these are read.
    resource_uris: BTreeSet<String>,
    template_patterns: Vec<regex::Regex>,
}

/// What starts a command upstream: bubblewrap covering Aether's files (`Some`), the command
/// itself where the operator allowed it uncovered (`None`), or nothing, with why.
fn launcher(
    isolation: Result<PathBuf, String>,
    uncovered: bool,
    name: &str,
) -> Result<Option<PathBuf>, String> {
    aether_tools::shell::covered_or_allowed(isolation, uncovered, &format!("upstream {name}"))
        .map_err(|why| {
            format!(
                "Aether's own files (vault key, store, configuration) cannot be covered from it \
                 here ({why}), so it was not started; install bubblewrap, or set \
                 upstreams.{name}.uncovered = true to run it able to read them"
            )
        })
}

/// One upstream: its connection, and what it offered when last listed.
pub struct Upstream {
    spec: UpstreamSpec,
    credentials: Credentials,
    state: tokio::sync::Mutex<State>,
    listing: RwLock<Arc<Listing>>,
    /// Set when it must be listed again (a `list_changed`, a restart, an operator's refresh).
    stale: Arc<AtomicBool>,
    /// Wakes its keeper task (see [`Upstreams::run`]).
    wake: Arc<Notify>,
    /// Connections made so far (see `State::Up::generation`).
    connections: std::sync::atomic::AtomicU64,
    /// The last failure to list it (None once a listing succeeds).
    list_error: std::sync::Mutex<Option<String>>,
    /// Why and when its connection was last dropped to be started again (a call that broke
    /// it, a wedged upstream): its status says so even once it is back.
    dropped: std::sync::Mutex<Option<String>>,
    /// The credentials last sent to it: withheld from everything it replies.
    secrets: std::sync::Mutex<Vec<String>>,
}

impl Upstream {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The client side of a connection: a persistent connection's `list_changed` marks the
    /// upstream for listing; a per-call (fresh) connection's is ignored (each fresh call checks
    /// the definition it calls instead), so a chatty upstream cannot make Aether start
    /// processes in a loop.
    fn link(&self, persistent: bool) -> Link {
        Link {
            stale: if persistent {
                self.stale.clone()
            } else {
                Arc::new(AtomicBool::new(false))
            },
            wake: self.wake.clone(),
        }
    }

    /// Connects and completes MCP's initialization, within the time limit; errors are cleaned
    /// of credentials.
    async fn start(&self, persistent: bool) -> Result<State, String> {
        self.connect(persistent).await.map_err(|e| self.clean(e))
    }

    async fn connect(&self, persistent: bool) -> Result<State, String> {
        let spec = &self.spec;
        let limit = |what: &str| {
            format!(
                "it did not finish {what} within {} s",
                spec.timeout.as_secs()
            )
        };
        match &spec.endpoint {
            Endpoint::Stdio {
                command,
                args,
                env,
                env_credentials,
                uncovered,
            } => {
                let mut secret_env = BTreeMap::new();
                for (var, name) in env_credentials {
                    secret_env.insert(var.clone(), self.credentials.get(name).await?);
                }
                self.remember(secret_env.values().cloned().collect());
                // Run where Aether's own files are covered, when bubblewrap can make such a
                // place: an upstream is a process of Aether's user, which could otherwise read
                // the vault key and decrypt every credential in the store.
                let mut cmd = match launcher(
                    aether_tools::shell::Sandbox::shared()
                        .probed()
                        .await
                        .map(Path::to_path_buf),
                    *uncovered,
                    &spec.name,
                )? {
                    Some(bwrap) => {
                        let mut cmd = tokio::process::Command::new(bwrap);
                        cmd.args(aether_tools::shell::hiding(&self.credentials.hidden))
                            .arg("--")
                            .arg(command);
                        cmd
                    }
                    None => tokio::process::Command::new(command),
                };
                cmd.args(args)
                    .env_clear()
                    .envs(
                        ["PATH", "HOME", "LANG"]
                            .iter()
                            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v))),
                    )
                    .envs(env)
                    .envs(&secret_env)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::null())
                    .kill_on_drop(true);
                let mut child = cmd
                    .spawn()
                    .map_err(|e| format!("{command} did not start: {e}"))?;
                let stdout = child.stdout.take().ok_or("no stdout")?;
                let stdin = child.stdin.take().ok_or("no stdin")?;
                let stdout = bounded_replies(stdout);
                let service = tokio::time::timeout(
                    spec.timeout,
                    self.link(persistent).serve((stdout, stdin)),
                )
                .await
                .map_err(|_| limit("MCP's initialization"))?
                .map_err(|e| format!("MCP initialization failed: {e}"))?;
                Ok(State::Up {
                    service: Box::new(service),
                    _child: Some(child),
                    generation: self.connections.fetch_add(1, Ordering::SeqCst) + 1,
                })
            }
            Endpoint::Http {
                url,
                headers,
                credential,
            } => {
                use rmcp::transport::streamable_http_client::{
                    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
                };
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(name) = credential {
                    let secret = self.credentials.get(name).await?;
                    self.remember(vec![secret.clone()]);
                    config = config.auth_header(secret);
                }
                let mut extra = std::collections::HashMap::new();
                for (k, v) in headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| format!("header {k:?}: {e}"))?;
                    let value = http::HeaderValue::try_from(v.as_str())
                        .map_err(|e| format!("header {k:?}: {e}"))?;
                    extra.insert(name, value);
                }
                config = config.custom_headers(extra);
                config.max_json_response_size = MAX_REPLY + (64 << 10);
                let client = aether_net::outbound(spec.timeout)
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service =
                    tokio::time::timeout(spec.timeout, self.link(persistent).serve(transport))
                        .await
                        .map_err(|_| limit("MCP's initialization"))?
                        .map_err(|e| format!("MCP initialization failed: {e}"))?;
                Ok(State::Up {
                    service: Box::new(service),
                    _child: None,
                    generation: self.connections.fetch_add(1, Ordering::SeqCst) + 1,
                })
            }
        }
    }

    /// The credentials sent to this upstream so far.
    fn sent_secrets(&self) -> Vec<String> {
        self.secrets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn remember(&self, secrets: Vec<String>) {
        let mut kept = self.secrets.lock().unwrap_or_else(|e| e.into_inner());
        for secret in secrets {
            if !secret.is_empty() && !kept.contains(&secret) {
                kept.push(secret);
            }
        }
    }

    /// Text from or about the upstream (an error, which may quote its reply) with every
    /// credential withheld and its length bounded.
    fn clean(&self, mut text: String) -> String {
        let secrets = self.sent_secrets();
        withhold_text(&mut text, &secrets);
        if text.len() <= 1000 {
            return text;
        }
        let mut end = 1000;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    }

    /// A tool's output with every credential sent to this upstream withheld.
    fn withhold_output(&self, out: &mut ToolOutput) {
        let secrets = self.sent_secrets();
        if secrets.is_empty() {
            return;
        }
        let scrub = |text: &mut String| withhold_text(text, &secrets);
        for block in &mut out.content {
            match block {
                Content::Text(t) => scrub(t),
                Content::Image {
                    data_base64,
                    mime_type,
                }
                | Content::Audio {
                    data_base64,
                    mime_type,
                } => {
                    scrub(data_base64);
                    scrub(mime_type);
                }
                Content::Resource {
                    uri,
                    mime_type,
                    text,
                    blob_base64,
                } => {
                    scrub(uri);
                    scrub(mime_type);
                    if let Some(t) = text {
                        scrub(t);
                    }
                    if let Some(b) = blob_base64 {
                        scrub(b);
                    }
                }
            }
        }
        if let Some(structured) = &mut out.structured {
            withhold_in(structured, &secrets);
        }
    }

    /// One of this upstream's resource URIs as Aether serves it (credentials withheld first:
    /// the wrapped form escapes them).
    fn public_uri(&self, mut uri: String) -> String {
        withhold_text(&mut uri, &self.sent_secrets());
        wrap_uri(self.name(), &uri, false)
    }

    /// `value` with every credential sent to this upstream withheld, wherever a reply echoes
    /// it (a model never sees one).
    fn withhold(&self, mut value: Value) -> Value {
        let secrets = self.sent_secrets();
        if !secrets.is_empty() {
            withhold_in(&mut value, &secrets);
        }
        value
    }

    /// How long a down upstream waits before it is started again.
    fn backoff(failures: u32) -> Duration {
        Duration::from_secs(1 << failures.min(5)).min(Duration::from_secs(30))
    }

    /// The upstream's peer and its connection's generation, started again if it died and its
    /// backoff has passed. A call waits while another starts it.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), String> {
        let mut state = self.state.lock().await;
        if let State::Up {
            service,
            generation,
            ..
        } = &*state
        {
            if !service.is_closed() {
                return Ok((service.peer().clone(), *generation));
            }
            *state = State::Down {
                why: "it stopped".into(),
                since: Instant::now(),
                failures: 0,
            };
        }
        let failures = match &*state {
            State::Idle => 0,
            State::Down {
                why,
                since,
                failures,
            } => {
                let wait = Upstream::backoff(*failures);
                if since.elapsed() < wait {
                    return Err(format!(
                        "upstream {} is down ({why}); Aether starts it again in {} s",
                        self.spec.name,
                        (wait - since.elapsed()).as_secs() + 1
                    ));
                }
                *failures
            }
            State::Up { .. } => unreachable!("an open connection returned above"),
        };
        match self.start(true).await {
            Ok(up) => {
                tracing::info!(upstream = %self.spec.name, "upstream started");
                *state = up;
                // What it offers may have changed while it was down.
                self.stale.store(true, Ordering::SeqCst);
                self.wake.notify_one();
                match &*state {
                    State::Up {
                        service,
                        generation,
                        ..
                    } => Ok((service.peer().clone(), *generation)),
                    _ => unreachable!("just started"),
                }
            }
            Err(why) => {
                *state = State::Down {
                    why: why.clone(),
                    since: Instant::now(),
                    failures: failures + 1,
                };
                Err(format!(
                    "upstream {} could not be started: {why}",
                    self.spec.name
                ))
            }
        }
    }

    /// Marks the upstream down after a failure that leaves connection `generation` in an
    /// unknown state (a call that timed out, a broken connection): a fresh connection serves
    /// the next call. A newer connection (another call already started one) is left alone.
    async fn reset(&self, generation: u64, why: String) {
        let mut state = self.state.lock().await;
        if matches!(&*state, State::Up { generation: g, .. } if *g == generation) {
            *self.dropped.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("dropped and started again after: {why}"));
            *state = State::Down {
                why,
                since: Instant::now(),
                failures: 0,
            };
        }
    }

    /// Runs `f` on a peer (and its connection's generation, 0 for a per-call connection): a
    /// connection of its own for a fresh upstream (closed after), else the persistent one.
    async fn with_peer<T, E, F, Fut>(&self, f: F) -> Result<T, E>
    where
        E: From<String>,
        F: FnOnce(Peer<RoleClient>, u64) -> Fut,
        Fut: std::future::Future<Output = Result<T, E>>,
    {
        if self.spec.fresh {
            let state = self.start(false).await.map_err(|why| {
                E::from(format!(
                    "upstream {} could not be started: {why}",
                    self.spec.name
                ))
            })?;
            let State::Up { service, .. } = &state else {
                unreachable!("just started")
            };
            let peer = service.peer().clone();
            let out = f(peer, 0).await;
            drop(state);
            out
        } else {
            let (peer, generation) = self.peer().await.map_err(E::from)?;
            f(peer, generation).await
        }
    }

    /// One request to the upstream that is not a tool call (a resource read, a prompt): within
    /// its time limit, its answer as JSON under the reply cap, credentials withheld from the
    /// answer and from any error.
    async fn ask<T, F, Fut>(&self, what: &str, f: F) -> Result<Value, String>
    where
        T: serde::Serialize,
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: std::future::Future<Output = Result<T, rmcp::service::ServiceError>>,
    {
        let (server, timeout) = (self.spec.name.clone(), self.spec.timeout);
        self.with_peer(|peer, _| async move {
            tokio::time::timeout(timeout, f(peer))
                .await
                .map_err(|_| {
                    format!(
                        "upstream {server} did not answer within {} s",
                        timeout.as_secs()
                    )
                })?
                .map_err(|e| format!("upstream {server} failed the {what}: {e}"))
        })
        .await
        .and_then(|r| {
            capped(
                &self.spec.name,
                serde_json::to_value(&r).unwrap_or(Value::Null),
            )
        })
        .map(|v| self.withhold(v))
        .map_err(|e| self.clean(e))
    }

    /// Lists its tools, resources and prompts (errors cleaned of credentials).
    async fn list(self: &Arc<Self>) -> Result<Listing, String> {
        self.list_raw().await.map_err(|e| self.clean(e))
    }

    async fn list_raw(self: &Arc<Self>) -> Result<Listing, String> {
        let timeout = self.spec.timeout;
        let me = self.clone();
        let raw = self
            .with_peer(|peer, _| async move {
                let within = |what: &'static str| {
                    move |_| {
                        format!(
                            "listing its {what} took longer than {} s",
                            timeout.as_secs()
                        )
                    }
                };
                let info = peer
                    .peer_info()
                    .map(|i| serde_json::to_value(&*i).unwrap_or(Value::Null))
                    .unwrap_or(Value::Null);
                let offers = |what: &str| !info["capabilities"][what].is_null();
                let tools = tokio::time::timeout(timeout, peer.list_all_tools())
                    .await
                    .map_err(within("tools"))?
                    .map_err(|e| format!("listing its tools failed: {e}"))?;
                let tools: Vec<Value> = tools
                    .iter()
                    .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                    .collect();
                let (mut resources, mut templates, mut prompts) = (vec![], vec![], vec![]);
                if offers("resources") {
                    if let Ok(Ok(list)) =
                        tokio::time::timeout(timeout, peer.list_all_resources()).await
                    {
                        resources = list
                            .iter()
                            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                            .collect();
                    }
                    if let Ok(Ok(list)) =
                        tokio::time::timeout(timeout, peer.list_all_resource_templates()).await
                    {
                        templates = list
                            .iter()
                            .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                            .collect();
                    }
                }
                if offers("prompts")
                    && let Ok(Ok(list)) =
                        tokio::time::timeout(timeout, peer.list_all_prompts()).await
                {
                    prompts = list
                        .iter()
                        .map(|p| serde_json::to_value(p).unwrap_or(Value::Null))
                        .collect();
                }
                Ok::<_, String>((tools, resources, templates, prompts))
            })
            .await?;
        let (tools, resources, templates, prompts) = raw;
        // Nothing the upstream says (descriptions, names) carries a credential onwards.
        let clean = |v: Vec<Value>| v.into_iter().map(|v| self.withhold(v)).collect();
        Ok(me.listing_of(
            clean(tools),
            clean(resources),
            clean(templates),
            clean(prompts),
        ))
    }

    /// Its listing in Aether's namespace.
    fn listing_of(
        self: &Arc<Self>,
        tools: Vec<Value>,
        resources: Vec<Value>,
        templates: Vec<Value>,
        prompts: Vec<Value>,
    ) -> Listing {
        let server = &self.spec.name;
        let mut listing = Listing::default();
        let mut names = BTreeSet::new();
        for raw in tools {
            let Some(def) = definition(&self.spec, &raw) else {
                tracing::warn!(upstream = %server, "a tool without a usable name or schema was left out");
                continue;
            };
            if !names.insert(def.name.clone()) {
                tracing::warn!(upstream = %server, tool = %def.name, "two tools map to one name; the second was left out");
                continue;
            }
            let remote = raw["name"].as_str().unwrap_or_default().to_string();
            listing.tools.push(Arc::new(UpstreamTool {
                upstream: self.clone(),
                remote,
                def,
            }));
        }
        for mut r in resources {
            let Some(uri) = r["uri"].as_str().map(String::from) else {
                continue;
            };
            listing.resource_uris.insert(uri.clone());
            r["uri"] = json!(wrap_uri(server, &uri, false));
            if let Some(name) = r["name"].as_str() {
                r["name"] = json!(format!("{server}__{name}"));
            }
            listing.resources.push(r);
        }
        for mut t in templates {
            let Some(uri) = t["uriTemplate"].as_str().map(String::from) else {
                continue;
            };
            match template_pattern(&uri) {
                Some(pattern) => listing.template_patterns.push(pattern),
                None => continue,
            }
            t["uriTemplate"] = json!(wrap_uri(server, &uri, true));
            if let Some(name) = t["name"].as_str() {
                t["name"] = json!(format!("{server}__{name}"));
            }
            listing.templates.push(t);
        }
        for mut p in prompts {
            let Some(remote) = p["name"].as_str().map(String::from) else {
                continue;
            };
            let name = catalog_name(server, &remote);
            if listing.prompt_names.insert(name.clone(), remote).is_some() {
                continue;
            }
            p["name"] = json!(name);
            listing.prompts.push(p);
        }
        listing
    }

    fn listing(&self) -> Arc<Listing> {
        self.listing
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether it is connected now (a fresh upstream: whether its last listing worked).
    async fn connected(&self) -> (bool, Option<String>) {
        let list_error = self
            .list_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if self.spec.fresh {
            return (list_error.is_none(), list_error);
        }
        let dropped = self
            .dropped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match &*self.state.lock().await {
            State::Up { service, .. } if !service.is_closed() => (true, list_error.or(dropped)),
            State::Up { .. } => (false, Some("it stopped".into())),
            State::Down { why, .. } => (false, Some(why.clone())),
            State::Idle => (false, Some("not started yet".into())),
        }
    }

    async fn status(&self) -> UpstreamStatus {
        let listing = self.listing();
        let (connected, last_error) = self.connected().await;
        let mut tools: Vec<(String, String)> = listing
            .tools
            .iter()
            .map(|t| (t.def().name.clone(), t.def().digest().to_string()))
            .collect();
        tools.sort();
        let fingerprint = aether_policy::sha256(
            tools
                .iter()
                .map(|(n, d)| format!("{n} {d}\n"))
                .collect::<String>()
                .as_bytes(),
        )
        .to_string();
        UpstreamStatus {
            name: self.spec.name.clone(),
            transport: self.spec.transport().into(),
            connected,
            last_error,
            tool_count: tools.len() as i64,
            fingerprint,
            listing: json!({
                "group": self.spec.group,
                "tier": self.spec.tier.as_str(),
                "session": if self.spec.fresh { "fresh" } else { "persistent" },
                "tools": tools.iter().map(|(n, d)| json!({"name": n, "digest": d})).collect::<Vec<_>>(),
                "resources": listing.resources.iter().map(|r| r["uri"].clone()).collect::<Vec<_>>(),
                "resource_templates": listing.templates.iter().map(|r| r["uriTemplate"].clone()).collect::<Vec<_>>(),
                "prompts": listing.prompts.iter().map(|p| p["name"].clone()).collect::<Vec<_>>(),
            })
            .to_string(),
            updated_us: aether_store::now_us(),
        }
    }
}

/// How often a persistent upstream is listed again even if it never says it changed (a fresh
/// upstream's calls each check the definition they call).
const RELIST_EVERY: Duration = Duration::from_secs(60);

/// Every upstream of this process.
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    store: Option<Store>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|u| u.name()))
            .finish()
    }
}

impl Upstreams {
    /// No upstreams.
    pub fn none() -> Arc<Upstreams> {
        Arc::new(Upstreams {
            list: Vec::new(),
            store: None,
        })
    }

    /// Connects every upstream and lists it, all at once. An upstream that cannot be reached
    /// is reported (and has no tools until it can be listed); the others serve. Returns the
    /// upstreams and the tools for the first catalog.
    pub async fn connect(
        specs: Vec<UpstreamSpec>,
        credentials: Credentials,
    ) -> (Arc<Upstreams>, Vec<Arc<dyn Tool>>, Vec<String>) {
        let list: Vec<Arc<Upstream>> = specs
            .into_iter()
            .map(|spec| {
                Arc::new(Upstream {
                    spec,
                    credentials: credentials.clone(),
                    state: tokio::sync::Mutex::new(State::Idle),
                    listing: RwLock::default(),
                    stale: Arc::new(AtomicBool::new(false)),
                    wake: Arc::new(Notify::new()),
                    connections: std::sync::atomic::AtomicU64::new(0),
                    list_error: std::sync::Mutex::new(None),
                    dropped: std::sync::Mutex::new(None),
                    secrets: std::sync::Mutex::default(),
                })
            })
            .collect();
        let mut listings = tokio::task::JoinSet::new();
        for (i, upstream) in list.iter().enumerate() {
            let upstream = upstream.clone();
            listings.spawn(async move { (i, upstream.list().await) });
        }
        let mut results: Vec<Option<Result<Listing, String>>> = list.iter().map(|_| None).collect();
        while let Some(done) = listings.join_next().await {
            if let Ok((i, result)) = done {
                results[i] = Some(result);
            }
        }
        let mut tools = Vec::new();
        let mut problems = Vec::new();
        for (upstream, result) in list.iter().zip(results) {
            let result = result.unwrap_or_else(|| Err("listing it failed".into()));
            match result {
                Ok(listing) => {
                    tools.extend(listing.tools.iter().cloned());
                    *upstream.listing.write().unwrap_or_else(|e| e.into_inner()) =
                        Arc::new(listing);
                    // Starting it marked it for listing; it was just listed.
                    upstream.stale.store(false, Ordering::SeqCst);
                }
                Err(why) => {
                    problems.push(format!("upstream {}: {why}", upstream.name()));
                    *upstream
                        .list_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some(why);
                    // Listed again once it can be started.
                    upstream.stale.store(true, Ordering::SeqCst);
                }
            }
        }
        let upstreams = Arc::new(Upstreams {
            list,
            store: Some(credentials.store.clone()),
        });
        (upstreams, tools, problems)
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Keeps the upstreams current until the pipeline goes, one task per upstream (a hung one
    /// holds up no other): starts a dead one again (with backoff), lists again one that said
    /// it changed, was started again, was refreshed by an operator or was last listed a minute
    /// ago, and records its status in the store whenever it changes.
    pub fn run(self: &Arc<Self>, pipeline: Arc<Pipeline>) -> Vec<tokio::task::JoinHandle<()>> {
        self.list
            .iter()
            .map(|u| {
                let upstream = u.clone();
                let store = self.store.clone();
                let pipeline = Arc::downgrade(&pipeline);
                tokio::spawn(async move { keep(upstream, store, pipeline).await })
            })
            .collect()
    }

    /// Upstream resources for a session whose agent reaches `groups` (its `mcp_servers`).
    pub fn resources(&self, groups: &BTreeSet<String>) -> Vec<Value> {
        self.reachable(groups)
            .flat_map(|u| u.listing().resources.clone())
            .collect()
    }

    /// Upstream resource templates for a session whose agent reaches `groups`.
    pub fn resource_templates(&self, groups: &BTreeSet<String>) -> Vec<Value> {
        self.reachable(groups)
            .flat_map(|u| u.listing().templates.clone())
            .collect()
    }

    /// Upstream prompts for a session whose agent reaches `groups`.
    pub fn prompts(&self, groups: &BTreeSet<String>) -> Vec<Value> {
        self.reachable(groups)
            .flat_map(|u| u.listing().prompts.clone())
            .collect()
    }

    fn reachable<'a>(
        &'a self,
        groups: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = &'a Arc<Upstream>> + 'a {
        self.list.iter().filter(|u| groups.contains(&u.spec.group))
    }

    /// The upstream a resource URI of Aether's names, and its own URI there.
    pub fn resource_target(&self, uri: &str) -> Option<(&Arc<Upstream>, String)> {
        let rest = uri.strip_prefix(RESOURCE_PREFIX)?;
        let (server, escaped) = rest.split_once('/')?;
        let upstream = self.list.iter().find(|u| u.spec.name == server)?;
        let original = percent_encoding::percent_decode_str(escaped)
            .decode_utf8()
            .ok()?
            .into_owned();
        Some((upstream, original))
    }

    /// The upstream a catalog prompt name belongs to, and the prompt's name there: only a
    /// prompt it listed.
    pub fn prompt_target(&self, name: &str) -> Option<(&Arc<Upstream>, String)> {
        self.list.iter().find_map(|u| {
            let remote = u.listing().prompt_names.get(name)?.clone();
            Some((u, remote))
        })
    }

    /// Reads an upstream's resource for a session whose agent reaches `groups`: None when the
    /// URI is no upstream's, not one it listed (or matching a template it listed), or of an
    /// upstream the agent does not reach.
    pub async fn read_resource(
        &self,
        groups: &BTreeSet<String>,
        uri: &str,
    ) -> Option<Result<Value, String>> {
        let (upstream, original) = self.resource_target(uri)?;
        if !groups.contains(&upstream.spec.group) {
            return None;
        }
        let listing = upstream.listing();
        let listed = listing.resource_uris.contains(&original)
            || listing
                .template_patterns
                .iter()
                .any(|p| p.is_match(&original));
        if !listed {
            return None;
        }
        let result = upstream
            .ask("read", |peer| async move {
                peer.read_resource(ReadResourceRequestParams::new(original))
                    .await
            })
            .await;
        Some(result.map(|mut v| {
            if let Some(contents) = v["contents"].as_array_mut() {
                for c in contents {
                    if let Some(u) = c["uri"].as_str().map(String::from) {
                        c["uri"] = json!(wrap_uri(&upstream.spec.name, &u, false));
                    }
                }
            }
            v
        }))
    }

    /// Gets an upstream's prompt for a session whose agent reaches `groups`: None when the
    /// name is no upstream prompt (or not of an upstream the agent reaches).
    pub async fn get_prompt(
        &self,
        groups: &BTreeSet<String>,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> Option<Result<Value, String>> {
        let (upstream, remote) = self.prompt_target(name)?;
        if !groups.contains(&upstream.spec.group) {
            return None;
        }
        let result = upstream
            .ask("prompt", |peer| async move {
                let mut params = GetPromptRequestParams::new(remote);
                if let Some(arguments) = arguments {
                    params = params.with_arguments(arguments);
                }
                peer.get_prompt(params).await
            })
            .await;
        Some(result)
    }
}

/// One upstream's keeper (see [`Upstreams::run`]).
async fn keep(u: Arc<Upstream>, store: Option<Store>, pipeline: std::sync::Weak<Pipeline>) {
    let mut refresh = match pipeline.upgrade() {
        Some(p) => p.sources_refresh_requests(),
        None => return,
    };
    let mut written: Option<(bool, Option<String>, String)> = None;
    let mut listed_at = Instant::now();
    let relist_every = if u.spec.fresh {
        RELIST_EVERY * 5
    } else {
        RELIST_EVERY
    };
    loop {
        tokio::select! {
            _ = u.wake.notified() => {}
            r = refresh.changed() => {
                if r.is_err() {
                    return;
                }
                u.stale.store(true, Ordering::SeqCst);
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let Some(p) = pipeline.upgrade() else { return };
        // A persistent upstream that is down is started again once its backoff has passed
        // (starting marks it for listing).
        if !u.spec.fresh {
            let _ = u.peer().await;
        }
        if listed_at.elapsed() >= relist_every {
            u.stale.store(true, Ordering::SeqCst);
        }
        if u.stale.swap(false, Ordering::SeqCst) {
            listed_at = Instant::now();
            relist(&u, &p).await;
        }
        drop(p);
        let status = u.status().await;
        let key = (
            status.connected,
            status.last_error.clone(),
            status.listing.clone(),
        );
        if written.as_ref() != Some(&key)
            && let Some(store) = &store
        {
            match store.put_upstream_status(status).await {
                Ok(()) => written = Some(key),
                Err(e) => {
                    tracing::warn!(upstream = %u.name(), error = %e, "cannot record upstream status")
                }
            }
        }
    }
}

/// Lists an upstream again and, if its tools changed, swaps them in the catalog (changed
/// definitions held back until approved). The listing it is compared with next time is
/// replaced only once the catalog has been: a failed swap is tried again on the next tick.
async fn relist(u: &Arc<Upstream>, pipeline: &Pipeline) {
    let listing = match u.list().await {
        Ok(listing) => listing,
        Err(why) => {
            tracing::warn!(upstream = %u.name(), error = %why, "cannot list upstream");
            *u.list_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            return;
        }
    };
    *u.list_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
    let before = u.listing();
    let same = before.tools.len() == listing.tools.len()
        && before
            .tools
            .iter()
            .zip(&listing.tools)
            .all(|(a, b)| a.def().digest() == b.def().digest());
    if !same {
        let tools = listing.tools.clone();
        tracing::info!(upstream = %u.name(), tools = tools.len(), "upstream's tools changed; new definitions wait for approval");
        if let Err(e) = pipeline.replace_external(u.name(), tools).await {
            tracing::warn!(upstream = %u.name(), error = %e, "cannot update the catalog; trying again");
            u.stale.store(true, Ordering::SeqCst);
            return;
        }
    }
    *u.listing.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(listing);
}

/// An upstream's URI template as a pattern its expansions match: literal parts as they are,
/// `{+x}` and `{#x}` any text, other expressions any text without `/`, `?` or `#`.
fn template_pattern(template: &str) -> Option<regex::Regex> {
    let mut pattern = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pattern.push_str(&regex::escape(&rest[..open]));
        let close = rest[open..].find('}')? + open;
        let expression = &rest[open + 1..close];
        pattern.push_str(if expression.starts_with(['+', '#']) {
            ".*"
        } else {
            "[^/?#]*"
        });
        rest = &rest[close + 1..];
    }
    pattern.push_str(&regex::escape(rest));
    pattern.push('$');
    regex::Regex::new(&pattern).ok()
}

/// Replaces every occurrence of a secret in `text`.
fn withhold_text(text: &mut String, secrets: &[String]) {
    for secret in secrets {
        if text.contains(secret.as_str()) {
            *text = text.replace(secret.as_str(), "[credential withheld]");
        }
    }
}

/// Replaces every occurrence of a secret in the strings of `value`.
fn withhold_in(value: &mut Value, secrets: &[String]) {
    match value {
        Value::String(text) => withhold_text(text, secrets),
        Value::Array(items) => items.iter_mut().for_each(|v| withhold_in(v, secrets)),
        Value::Object(map) => {
            // Keys too: a reply can echo a credential as a field's name.
            if map
                .keys()
                .any(|k| secrets.iter().any(|s| k.contains(s.as_str())))
            {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(mut k, v)| {
                        withhold_text(&mut k, secrets);
                        (k, v)
                    })
                    .collect();
            }
            map.values_mut().for_each(|v| withhold_in(v, secrets))
        }
        _ => {}
    }
}

/// A reply as JSON, or an error if it is larger than Aether takes.
fn capped(server: &str, value: Value) -> Result<Value, String> {
    let size = serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0);
    if size > MAX_REPLY {
        return Err(format!(
            "upstream {server} replied with {size} bytes, more than Aether takes ({} MiB)",
            MAX_REPLY >> 20
        ));
    }
    Ok(value)
}

/// What is escaped in an upstream URI: everything but unreserved characters (and, in a
/// template, its `{variables}`).
const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An upstream's URI (or URI template) in Aether's namespace.
pub fn wrap_uri(server: &str, uri: &str, template: bool) -> String {
    let mut out = format!("{RESOURCE_PREFIX}{server}/");
    if !template {
        out.extend(percent_encoding::utf8_percent_encode(uri, ESCAPED));
        return out;
    }
    // Escape the literal parts; keep `{…}` expressions for the client to expand (what it puts
    // there is escaped by the client, and decoded again on the way back).
    let mut rest = uri;
    while let Some(open) = rest.find('{') {
        out.extend(percent_encoding::utf8_percent_encode(
            &rest[..open],
            ESCAPED,
        ));
        match rest[open..].find('}') {
            Some(close) => {
                out.push_str(&rest[open..open + close + 1]);
                rest = &rest[open + close + 1..];
            }
            None => {
                out.extend(percent_encoding::utf8_percent_encode(
                    &rest[open..],
                    ESCAPED,
                ));
                rest = "";
            }
        }
    }
    out.extend(percent_encoding::utf8_percent_encode(rest, ESCAPED));
    out
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
    // Which arguments are paths, URLs, hosts, commands: what the schema says, and what the
    // operator adds (for this tool, and for every tool of the upstream).
    let mut arguments = aether_policy::ArgumentKinds::from_schema(&input_schema);
    for key in [remote, "*"] {
        if let Some(more) = spec.arguments.get(key) {
            arguments = arguments.merged(more);
        }
    }
    let (arguments, dropped) = arguments.within(&input_schema);
    if !dropped.is_empty() && spec.arguments.contains_key(remote) {
        tracing::warn!(upstream = %spec.name, tool = remote, arguments = ?dropped, "the configuration declares arguments this tool does not take");
    }
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
        arguments,
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
        let upstream = &self.upstream;
        let name = upstream.name().to_string();
        let fresh = upstream.spec.fresh;
        let mut params = CallToolRequestParams::new(self.remote.clone());
        params.arguments = args.as_object().cloned();
        // The call's trace context, where MCP 2026-07-28 carries it (an older server ignores
        // what it does not know in `_meta`): the upstream's spans join the call's trace.
        if let Some(trace) = &cx.trace {
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.insert("traceparent".into(), Value::String(trace.clone()));
            params.meta = Some(meta);
        }
        // The shorter of the upstream's own limit and the pipeline's for any tool, ending a
        // little before the pipeline's: a call that runs out of either is this tool's timeout,
        // so a wedged upstream is dropped and started again (the pipeline's own limit would
        // only drop the call, and leave the upstream wedged for the next one).
        let ceiling =
            Duration::from_millis((cx.limits.tool_seconds * 1000).saturating_sub(250).max(500));
        let timeout = upstream.spec.timeout.min(ceiling);
        let (remote, approved) = (self.remote.clone(), self.def.digest());
        // Broken: the connection is gone or in an unknown state, and a fresh one serves the
        // next call.
        let call = upstream.with_peer(|peer, generation| async move {
            let work = async {
                // A fresh connection is a new session of the upstream: it must still define
                // the tool as it was approved, or nothing runs.
                if fresh {
                    let tools = peer.list_all_tools().await.map_err(|e| {
                        Failure::Broken(format!("upstream {name} could not list its tools: {e}"))
                    })?;
                    let now = tools
                        .iter()
                        .find(|t| t.name == remote.as_str())
                        .and_then(|t| serde_json::to_value(t).ok())
                        .and_then(|raw| definition(&upstream.spec, &raw))
                        .map(|def| def.digest());
                    if now != Some(approved) {
                        upstream.stale.store(true, Ordering::SeqCst);
                        upstream.wake.notify_one();
                        return Err(Failure::Answered(format!(
                            "upstream {name} no longer defines {remote} as it was approved, so it was not called; \
                             the new definition waits for an operator's approval"
                        )));
                    }
                }
                match peer.call_tool(params).await {
                    Err(rmcp::service::ServiceError::McpError(e))
                        if e.code.0 as i64 == TOO_LARGE
                            && e.data.as_ref().is_some_and(|d| d.get("aether/tooLarge").is_some()) =>
                    {
                        Err(Failure::Answered(format!(
                            "upstream {name} replied with more than {MAX_STDIO_LINE} bytes, more than Aether takes ({} MiB)",
                            MAX_REPLY >> 20
                        )))
                    }
                    Err(rmcp::service::ServiceError::McpError(e)) => Err(Failure::Answered(
                        format!("upstream {name} refused the call: {}", e.message),
                    )),
                    Err(e) => Err(Failure::Broken(format!(
                        "upstream {name} failed the call: {e}"
                    ))),
                    Ok(result) => Ok(result),
                }
            };
            tokio::select! {
                _ = cx.cancel.cancelled() => Err(Failure::Cancelled),
                r = tokio::time::timeout(timeout, work) => match r {
                    Err(_) => Err(Failure::Broken(format!(
                        "upstream {name} did not answer within {}",
                        seconds(timeout)
                    ))),
                    Ok(r) => r,
                },
            }
            .map_err(|f| f.at(generation))
        });
        let result = match call.await {
            Ok(result) => result,
            Err(failure) => {
                return Err(match failure {
                    Failure::Cancelled => ToolError::Cancelled,
                    Failure::Answered(why) => ToolError::failed(format!(
                        "{}; it was not retried (it may have had effects)",
                        upstream.clean(why)
                    )),
                    Failure::Broken(why) | Failure::BrokenAt(_, why) if fresh => {
                        ToolError::failed(format!(
                            "{}; it was not retried (it may have had effects)",
                            upstream.clean(why)
                        ))
                    }
                    Failure::Broken(why) => ToolError::failed(upstream.clean(why)),
                    Failure::BrokenAt(generation, why) => {
                        let why = upstream.clean(why);
                        upstream.reset(generation, why.clone()).await;
                        ToolError::failed(format!(
                            "{why}; it was not retried (it may have had effects); Aether starts the upstream again for later calls"
                        ))
                    }
                    Failure::Unreachable(why) => ToolError::failed(upstream.clean(why)),
                });
            }
        };
        let (mut out, size) = output(upstream, result);
        if size > MAX_REPLY {
            return Err(ToolError::failed(format!(
                "upstream {} replied with about {size} bytes, more than Aether takes ({} MiB)",
                upstream.name(),
                MAX_REPLY >> 20
            )));
        }
        upstream.withhold_output(&mut out);
        Ok(out)
    }
}

/// How a forwarded call failed.
enum Failure {
    Cancelled,
    /// The upstream answered with a JSON-RPC error: the connection is fine.
    Answered(String),
    /// No answer in time, or the connection broke.
    Broken(String),
    /// The same, on connection generation N (which is to be reset).
    BrokenAt(u64, String),
    /// No connection could be had.
    Unreachable(String),
}

impl Failure {
    /// Ties a broken connection to the connection it happened on.
    fn at(self, generation: u64) -> Failure {
        match self {
            Failure::Broken(why) => Failure::BrokenAt(generation, why),
            other => other,
        }
    }
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure::Unreachable(why)
    }
}

/// An MCP `CallToolResult` as a tool's output (its strings moved, not copied), and the
/// reply's size: its strings' bytes and its structured content's JSON. The upstream's
/// resources it names are put in Aether's namespace, as in its resource lists: a client
/// reading one asks Aether, which asks this upstream (an upstream's `file:///…` is never
/// taken for one of Aether's own files).
fn output(upstream: &Upstream, result: rmcp::model::CallToolResult) -> (ToolOutput, usize) {
    use rmcp::model::{ContentBlock, ResourceContents};
    let mut size = 0;
    let content = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(t) => {
                size += t.text.len();
                Content::Text(t.text)
            }
            ContentBlock::Image(i) => {
                size += i.data.len();
                Content::Image {
                    data_base64: i.data,
                    mime_type: i.mime_type,
                }
            }
            ContentBlock::Audio(a) => {
                size += a.data.len();
                Content::Audio {
                    data_base64: a.data,
                    mime_type: a.mime_type,
                }
            }
            ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text,
                    ..
                } => {
                    size += uri.len() + text.len();
                    Content::Resource {
                        uri: upstream.public_uri(uri),
                        mime_type: mime_type.unwrap_or_default(),
                        text: Some(text),
                        blob_base64: None,
                    }
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => {
                    size += uri.len() + blob.len();
                    Content::Resource {
                        uri: upstream.public_uri(uri),
                        mime_type: mime_type.unwrap_or_default(),
                        text: None,
                        blob_base64: Some(blob),
                    }
                }
                _ => Content::Text("[a resource from the upstream Aether does not pass on]".into()),
            },
            ContentBlock::ResourceLink(link) => {
                let text = format!(
                    "[a link to the upstream's resource {}]",
                    upstream.public_uri(link.uri)
                );
                size += text.len();
                Content::Text(text)
            }
            _ => Content::Text("[a block from the upstream Aether does not pass on]".into()),
        })
        .collect();
    if let Some(structured) = &result.structured_content {
        size += aether_policy::json_len(structured).unwrap_or(0);
    }
    (
        ToolOutput {
            content,
            structured: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
        },
        size,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_upstream_starts_covered_or_only_where_allowed_uncovered() {
        let bwrap = PathBuf::from("/usr/bin/bwrap");
        assert_eq!(launcher(Ok(bwrap.clone()), false, "fs"), Ok(Some(bwrap)));
        assert_eq!(launcher(Err("no userns".into()), true, "fs"), Ok(None));
        let refused = launcher(Err("no userns".into()), false, "fs").unwrap_err();
        assert!(
            refused.contains("upstreams.fs.uncovered") && refused.contains("no userns"),
            "{refused}"
        );
    }

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

    /// An upstream tool's declaration: what its schema says (`format: uri`, the usual names),
    /// plus what the operator adds for it and for every tool; a name it does not take is
    /// dropped.
    #[test]
    fn an_upstream_tools_arguments_are_its_schemas_and_the_operators() {
        let mut arguments = std::collections::BTreeMap::new();
        arguments.insert(
            "fetch".to_string(),
            aether_policy::ArgumentKinds::urls(&["where", "gone"]),
        );
        arguments.insert(
            "*".to_string(),
            aether_policy::ArgumentKinds::paths(&["file_path"]),
        );
        let spec = UpstreamSpec {
            name: "web".into(),
            endpoint: Endpoint::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                headers: Default::default(),
                credential: None,
            },
            timeout: std::time::Duration::from_secs(5),
            group: "web".into(),
            tier: Tier::Elevated,
            fresh: false,
            arguments,
        };
        let raw = json!({"name": "fetch", "inputSchema": {"type": "object", "properties": {
            "link": {"type": "string", "format": "uri"},
            "where": {"type": "string"},
            "file_path": {"type": "string"},
            "url": {"type": "string"},
            "n": {"type": "integer"}
        }}});
        let def = definition(&spec, &raw).unwrap();
        let mut urls = def.arguments.urls.clone();
        urls.sort();
        assert_eq!(urls, ["link", "url", "where"]);
        assert_eq!(def.arguments.paths, ["file_path"]);
        assert!(def.problems().is_empty(), "{:?}", def.problems());
        // The declaration is not the definition's digest: the operator's word changes no
        // approval.
        let mut bare = spec.clone();
        bare.arguments.clear();
        assert_eq!(definition(&bare, &raw).unwrap().digest(), def.digest());
    }

    #[test]
    fn upstream_uris_round_trip_and_cannot_name_another_server() {
        let ups = Upstreams::none();
        let wrapped = wrap_uri("fs", "file:///tmp/a b/../x?y=1#z", false);
        assert!(
            wrapped.starts_with("aether://upstream/fs/file%3A%2F%2F%2Ftmp"),
            "{wrapped}"
        );
        assert!(
            !wrapped["aether://upstream/fs/".len()..].contains('/'),
            "{wrapped}"
        );
        // No upstreams here: nothing resolves, whatever the URI says.
        assert!(ups.resource_target(&wrapped).is_none());
        let template = wrap_uri("ev", "demo://resource/dynamic/text/{resourceId}", true);
        assert_eq!(
            template,
            "aether://upstream/ev/demo%3A%2F%2Fresource%2Fdynamic%2Ftext%2F{resourceId}"
        );
    }
}

#[cfg(test)]
mod reply_id_tests {
    use super::*;

    #[test]
    fn only_the_messages_own_id_counts() {
        for (head, want) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"x":1}}"#,
                Some(json!(7)),
            ),
            (
                r#"{"id": "a-1" ,"jsonrpc":"2.0","result":"#,
                Some(json!("a-1")),
            ),
            (r#"{"result":{"structuredContent":{"id":42,"v":"#, None),
            (
                r#"{"result":{"content":[{"text":"\"id\":9"}]},"id":3}"#,
                Some(json!(3)),
            ),
            (
                r#"{"result":{"a":["}"],"id":1},"jsonrpc":"2.0","id":5}"#,
                Some(json!(5)),
            ),
            (r#"{"jsonrpc":"2.0","result":{"t":"x\"id\":8"#, None),
            (r#"[{"id":1}]"#, None),
        ] {
            assert_eq!(top_level_id(head.as_bytes()), want, "{head}");
        }
        for (tail, want) in [
            (r#"xxxxxxxx"}]},"jsonrpc":"2.0","id":12}"#, Some(json!(12))),
            ("xxxx\"}]}, \"id\" : \"q\" }\n", Some(json!("q"))),
            (r#"xxxx","id":4,"more":1}"#, None),
            (r#"xxxx"}]}}"#, None),
        ] {
            assert_eq!(trailing_id(tail.as_bytes()), want, "{tail}");
        }
    }
}

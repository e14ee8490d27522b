//! The MCP server handler: one per MCP session, bound to that session's context.
//!
//! `tools/list` is the session's filtered catalog and nothing else; `tools/call` goes through
//! [`Pipeline::call`]. Resources are Aether's own (`aether://capabilities`, the caller's audit
//! events) plus, in the test-only fixtures mode, the conformance suite's.

use std::borrow::Cow;
use std::sync::Arc;

use aether_pipeline::{
    CallOutcome, Entry, Pipeline, ReadError, ReadKind, SessionContext, capabilities,
};
use aether_policy::decision::Step;
use aether_tools::Content;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, ErrorData, GetPromptRequestParams, GetPromptResponse, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, RequestStateCodec, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::fixtures;
use crate::link::{McpClientLink, Rounds, SessionLogLevel};
use crate::upstream::Upstreams;

/// What the handler serves besides Aether's own tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The product as it ships.
    Shipped,
    /// Test-only: also the conformance suite's resources, prompts and completions. (Its
    /// fixture *tools* are ordinary catalog tools; see `aether_tools::fixtures`.)
    ConformanceFixtures,
}

/// The protocol versions Aether speaks, newest first: 2026-07-28 per request (no
/// `initialize`; `server/discover`, `subscriptions/listen`), the others over the
/// `initialize` handshake.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2024_11_05,
];

/// The agent an HTTP request authenticated as, put in the request's extensions by the
/// listener's auth layer (`http.rs`) before the MCP service sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub agent: String,
    /// The id of the static agent token it brought, if it brought one.
    pub token: Option<String>,
    /// The person an OAuth access token was issued to (recorded in the audit).
    pub subject: Option<String>,
    /// What the access token's scopes reach of the agent's tools.
    pub reach: Option<Arc<aether_policy::ScopeReach>>,
}

#[derive(Clone)]
pub struct AetherMcp {
    pipeline: Arc<Pipeline>,
    /// The session as the transport opened it: stdio's `--agent`; for HTTP, the listener's
    /// agent, replaced by the first request's authenticated [`Caller`] (see `session_for`).
    session: SessionContext,
    /// HTTP: the session bound to the agent of the first authenticated request. A request
    /// authenticated as another agent cannot use this MCP session.
    bound: Arc<std::sync::OnceLock<SessionContext>>,
    /// Whether this session outlives one request (then it is told when its catalog changes).
    lasting: bool,
    watching: Arc<std::sync::atomic::AtomicBool>,
    log_level: SessionLogLevel,
    mode: Mode,
    /// What `initialize` and `server/discover` answer; built once per process, since rmcp
    /// asks for it on many requests and a 2026-07-28 request makes a handler of its own.
    info: Arc<ServerConfig>,
    /// Upstream servers whose resources and prompts this session may reach.
    upstreams: Arc<Upstreams>,
    /// Seals the state a 2026-07-28 request's rounds hand their client ([`Rounds`]).
    rounds: Arc<RequestStateCodec>,
}

/// How long a 2026-07-28 client may reuse a list before asking again (SEP-2549 `ttlMs`). A
/// client listening for list changes hears of a change at once; one that does not sees a
/// newly approved tool at most this late (a revoked one is refused whatever its list says).
pub const LIST_TTL_MS: u64 = 30_000;

/// The server's description for `mode`, built once per process.
fn server_info(mode: Mode) -> Arc<ServerConfig> {
    static SHIPPED: std::sync::OnceLock<Arc<ServerConfig>> = std::sync::OnceLock::new();
    static FIXTURES: std::sync::OnceLock<Arc<ServerConfig>> = std::sync::OnceLock::new();
    let cell = match mode {
        Mode::Shipped => &SHIPPED,
        Mode::ConformanceFixtures => &FIXTURES,
    };
    cell.get_or_init(|| Arc::new(build_server_info(mode)))
        .clone()
}

fn build_server_info(mode: Mode) -> ServerConfig {
    let mut capabilities = json!({
        "tools": {"listChanged": true},
        "resources": {"listChanged": false},
        "prompts": {"listChanged": false},
        "logging": {},
    });
    if mode == Mode::ConformanceFixtures {
        capabilities["resources"] = json!({"subscribe": true, "listChanged": true});
        capabilities["prompts"] = json!({"listChanged": true});
        capabilities["completions"] = json!({});
    }
    let info = json!({
        "protocolVersion": ProtocolVersion::V_2025_11_25,
        "capabilities": capabilities,
        "serverInfo": {"name": "aether", "title": "Aether", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Aether serves governed tools: every call is checked, receipted before it runs and audited after. \
             Workspace tools take paths relative to a root; call list_roots first.",
    });
    serde_json::from_value::<InitializeResult>(info).expect("the server info is well-formed")
}

impl AetherMcp {
    pub fn new(pipeline: Arc<Pipeline>, session: SessionContext, mode: Mode) -> AetherMcp {
        let rounds = crate::link::round_codec(pipeline.store());
        AetherMcp::with_rounds(pipeline, session, mode, rounds)
    }

    /// As [`AetherMcp::new`], sealing rounds' state with `rounds` (made once per listener:
    /// every 2026-07-28 request makes a handler of its own).
    pub fn with_rounds(
        pipeline: Arc<Pipeline>,
        session: SessionContext,
        mode: Mode,
        rounds: Arc<RequestStateCodec>,
    ) -> AetherMcp {
        AetherMcp {
            pipeline,
            session,
            bound: Arc::default(),
            lasting: true,
            watching: Arc::default(),
            log_level: SessionLogLevel::default(),
            mode,
            info: server_info(mode),
            upstreams: Upstreams::none(),
            rounds,
        }
    }

    /// Also serves the resources and prompts of these upstreams (to the sessions that reach
    /// their groups).
    pub fn with_upstreams(mut self, upstreams: Arc<Upstreams>) -> AetherMcp {
        self.upstreams = upstreams;
        self
    }

    /// For a stateless HTTP listener: each request is a session of its own, so there is
    /// nobody to tell when the catalog changes.
    pub fn one_shot(mut self) -> AetherMcp {
        self.lasting = false;
        self
    }

    /// The session this request acts in: the transport's, or, for an HTTP request that
    /// authenticated, the one bound to its agent. A handshake-era HTTP session is named by
    /// its `Mcp-Session-Id`, so it stays one session (what `revert_file` undoes, what the
    /// audit groups) on whichever replica, or worker after a restart, answers it.
    fn session_for(
        &self,
        extensions: &rmcp::model::Extensions,
    ) -> Result<SessionContext, ErrorData> {
        let parts = extensions.get::<http::request::Parts>();
        let caller = parts.and_then(|parts| parts.extensions.get::<Caller>());
        let Some(caller) = caller else {
            return Ok(self.session.clone());
        };
        // A 2026-07-28 request stands alone (rmcp routes it to no session): any id it names
        // is the client's word only, and names nothing.
        let session_id = parts
            .filter(|p| self.lasting && !crate::http::modern_header(&p.headers))
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .filter(|id| !id.is_empty())
            .map(str::to_string);
        let named = |bound: &SessionContext| match &session_id {
            Some(id) => id.clone(),
            None => bound.session_id.clone(),
        };
        if let Some(bound) = self.bound.get() {
            if bound.agent.name == caller.agent && bound.subject == caller.subject {
                // The session's caller, with this request's token's reach (a refreshed token
                // may carry other scopes) and static token.
                return Ok(SessionContext {
                    session_id: named(bound),
                    scope: caller.reach.clone(),
                    token: caller.token.clone(),
                    ..bound.clone()
                });
            }
            return Err(ErrorData::invalid_request(
                format!(
                    "this MCP session belongs to another agent; a token for agent {:?} must open its own session",
                    caller.agent
                ),
                None,
            ));
        }
        let session = self
            .pipeline
            .session(
                &caller.agent,
                self.session.transport,
                self.session.session_id.clone(),
            )
            .map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
        let session = SessionContext {
            subject: caller.subject.clone(),
            ..session
        };
        let bound = self.bound.get_or_init(|| session);
        if bound.agent.name != caller.agent || bound.subject != caller.subject {
            return Err(ErrorData::invalid_request(
                "this MCP session belongs to another agent".to_string(),
                None,
            ));
        }
        Ok(SessionContext {
            session_id: named(bound),
            scope: caller.reach.clone(),
            token: caller.token.clone(),
            ..bound.clone()
        })
    }

    /// From the first `tools/list` of a handshake-era session on, tells the client whenever
    /// its catalog changes. (A 2026-07-28 client asks with `subscriptions/listen` instead:
    /// its requests stand alone, and a task per request would outlive them.) The task ends
    /// at the first change after the client has gone.
    fn watch_catalog(&self, session: &SessionContext, peer: rmcp::Peer<RoleServer>) {
        use std::sync::atomic::Ordering;
        if !self.lasting || self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut watch = CatalogWatch::new(&self.pipeline, session);
        tokio::spawn(async move {
            while watch.changed().await {
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        });
    }

    fn fixtures(&self) -> bool {
        self.mode == Mode::ConformanceFixtures
    }

    /// Only the fixtures' resources take subscriptions; Aether's own do not change under a
    /// client.
    fn subscribable(&self, uri: &str) -> Result<(), ErrorData> {
        if self.fixtures() && fixtures::read_resource(uri).is_some() {
            return Ok(());
        }
        Err(ErrorData::invalid_params(
            format!("{uri:?} cannot be subscribed to"),
            None,
        ))
    }
}

/// One session's catalog as its client sees it: the names and definition digests offered
/// to it. It changes when the registry or the rules change what it is offered, and only
/// then (the cause is not compared): a re-approved changed definition under the same name
/// is a change the client must hear of, since its schema changed.
struct CatalogWatch {
    pipeline: std::sync::Weak<Pipeline>,
    changes: tokio::sync::watch::Receiver<u64>,
    session: SessionContext,
    last: Vec<(String, aether_policy::Digest)>,
}

impl CatalogWatch {
    fn new(pipeline: &Arc<Pipeline>, session: &SessionContext) -> CatalogWatch {
        CatalogWatch {
            pipeline: Arc::downgrade(pipeline),
            changes: pipeline.catalog_changes(),
            last: Self::offered(pipeline, session),
            session: session.clone(),
        }
    }

    fn offered(
        pipeline: &Pipeline,
        session: &SessionContext,
    ) -> Vec<(String, aether_policy::Digest)> {
        pipeline
            .offered(session)
            .iter()
            .map(|e| (e.def().name.clone(), e.digest))
            .collect()
    }

    /// Waits until the offered catalog differs from the last one seen: `false` once the
    /// pipeline is gone (the server is stopping).
    async fn changed(&mut self) -> bool {
        while self.changes.changed().await.is_ok() {
            let Some(pipeline) = self.pipeline.upgrade() else {
                return false;
            };
            let now = Self::offered(&pipeline, &self.session);
            if now != self.last {
                self.last = now;
                return true;
            }
        }
        false
    }
}

/// Whether a request speaks 2026-07-28 or later: it stands alone (no session), carries its
/// own metadata, and hears of changes only through `subscriptions/listen`.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What a round's state is bound to: the method, the agent, what is called and its
/// arguments (canonical JSON), so a state given for one request opens for no other.
fn round_binding(
    method: &str,
    agent: &str,
    name: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Vec<u8> {
    let arguments = arguments.cloned().map(Value::Object).unwrap_or(Value::Null);
    let digest = aether_policy::sha256(aether_policy::canonical_json(&arguments).as_bytes());
    format!("{method}\n{agent}\n{name}\n{}", digest.to_hex()).into_bytes()
}

/// The log level a 2026-07-28 request names in its `_meta`, if any.
fn request_log_level(context: &RequestContext<RoleServer>) -> Option<rmcp::model::LoggingLevel> {
    context
        .meta
        .0
        .get("io.modelcontextprotocol/logLevel")
        .and_then(|level| serde_json::from_value(level.clone()).ok())
}

/// An MCP tool entry for a catalog entry.
pub fn mcp_tool(entry: &Entry) -> Tool {
    let def = entry.def();
    let object = |v: &Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut tool = Tool::new(
        def.name.clone(),
        def.description.clone(),
        object(&def.input_schema),
    )
    .with_title(def.title.clone());
    if def.output_schema.get("properties").is_some() {
        tool = tool.with_raw_output_schema(object(&def.output_schema));
    }
    let annotations = rmcp::model::ToolAnnotations::with_title(def.title.clone())
        .read_only(def.meta.read_only)
        .destructive(def.meta.destructive)
        .idempotent(def.meta.idempotent)
        .open_world(def.meta.reaches_network);
    // The governed-command metadata: what a call needs (the group is the permission an agent
    // needs), how risky it is, how it is confirmed, whether a repeat is safe, which envelope
    // keys are honoured, and how much of it the audit keeps.
    let confirmation = match (def.meta.needs_confirmation, def.tier) {
        (_, aether_policy::Tier::Restricted) => "person",
        (true, _) => "envelope",
        (false, _) => "none",
    };
    let meta = json!({
        "aether/group": def.group,
        "aether/permission": format!("group:{}", def.group),
        "aether/tier": def.tier,
        "aether/risk": def.meta.risk,
        "aether/needsConfirmation": def.meta.needs_confirmation,
        "aether/confirmation": confirmation,
        "aether/idempotent": def.meta.idempotent,
        "aether/idempotencyKey": "honoured: _meta aether/idempotencyKey returns the first call's result for 24 h",
        "aether/expiry": "honoured: _meta aether/expiresAt (RFC 3339 or epoch ms) refuses a call past it",
        "aether/audit": if def.tier == aether_policy::Tier::Standard { "summary" } else { "full" },
        "aether/definition": entry.digest.to_string(),
    });
    tool.with_annotations(annotations)
        .with_meta(serde_json::from_value(meta).unwrap_or_default())
}

fn blocks(content: Vec<Content>) -> Vec<ContentBlock> {
    content
        .into_iter()
        .map(|c| match c {
            Content::Text(t) => ContentBlock::text(t),
            Content::Image {
                data_base64,
                mime_type,
            } => ContentBlock::image(data_base64, mime_type),
            Content::Audio {
                data_base64,
                mime_type,
            } => ContentBlock::audio(data_base64, mime_type),
            Content::Resource {
                uri,
                mime_type,
                text,
                blob_base64,
            } => {
                let resource = match (text, blob_base64) {
                    (Some(text), _) => json!({"uri": uri, "mimeType": mime_type, "text": text}),
                    (None, blob) => {
                        json!({"uri": uri, "mimeType": mime_type, "blob": blob.unwrap_or_default()})
                    }
                };
                serde_json::from_value(json!({"type": "resource", "resource": resource}))
                    .unwrap_or_else(|_| ContentBlock::text(format!("[resource {uri}]")))
            }
        })
        .collect()
}

fn error_result(text: String, call_id: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.meta = serde_json::from_value(json!({"aether/callId": call_id})).ok();
    result
}

/// The `resources/read` answer for a URI of `aether://…`.
async fn read_aether(
    me: &AetherMcp,
    session: &SessionContext,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let text = if uri == "aether://capabilities" {
        capabilities(&me.pipeline.catalog()).to_string()
    } else if let Some(query) = uri.strip_prefix("aether://audit/events") {
        let query = query.strip_prefix('?').unwrap_or(query);
        let mut cursor = None;
        let mut limit = 50;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("cursor", v)) => {
                    cursor = Some(v.parse::<i64>().map_err(|_| {
                        ErrorData::invalid_params(format!("cursor {v:?} is not a number"), None)
                    })?)
                }
                Some(("limit", v)) => {
                    limit = v.parse::<usize>().map_err(|_| {
                        ErrorData::invalid_params(format!("limit {v:?} is not a number"), None)
                    })?
                }
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!("unknown query parameter in {uri:?}"),
                        None,
                    ));
                }
            }
        }
        let events = me
            .pipeline
            .audit_events(session, cursor, limit)
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("audit could not be read: {e}"), None)
            })?;
        let next = events.last().map(|e| e.seq);
        json!({"events": events, "next_cursor": next}).to_string()
    } else {
        return Err(ErrorData::resource_not_found(
            format!("no resource {uri:?}"),
            Some(json!({ "uri": uri })),
        ));
    };
    serde_json::from_value(json!({
        "contents": [{"uri": uri, "mimeType": "application/json", "text": text}],
        "resultType": "complete",
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The groups whose upstream resources and prompts a session reaches: its agent's
/// `mcp_servers` (a `tools` allowlist grants tools, not an upstream's data), and of those, for
/// an OAuth token, the ones its scopes grant whole.
fn reach(session: &SessionContext) -> std::collections::BTreeSet<String> {
    let groups = session.agent.mcp_servers.clone().unwrap_or_default();
    match session.scope.as_ref().and_then(|s| s.groups()) {
        Some(granted) => groups.intersection(&granted).cloned().collect(),
        None => groups,
    }
}

impl AetherMcp {
    /// The round a 2026-07-28 request of `method` for `name` opens (its state bound to the
    /// agent, `name` and `arguments`), and the binding its next state is sealed with.
    #[allow(clippy::too_many_arguments)]
    fn open_rounds(
        &self,
        method: &str,
        session: &SessionContext,
        name: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        state: Option<&str>,
        responses: Option<&rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<(Rounds, Vec<u8>), ErrorData> {
        let binding = round_binding(method, &session.agent.name, name, arguments);
        let rounds = Rounds::open(
            &self.rounds,
            &binding,
            state,
            responses,
            context.client_capabilities(),
        )?;
        Ok((rounds, binding))
    }

    /// The suite's prompt that asks its client first (SEP-2322 on `prompts/get`).
    fn asking_prompt(
        &self,
        request: &GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !modern(context) {
            return Err(ErrorData::invalid_params(
                format!(
                    "{} asks in rounds, which protocol 2026-07-28 has",
                    request.name
                ),
                None,
            ));
        }
        let session = self.session_for(&context.extensions)?;
        let (rounds, binding) = self.open_rounds(
            "prompts/get",
            &session,
            &request.name,
            request.arguments.as_ref(),
            request.request_state.as_deref(),
            request.input_responses.as_ref(),
            context,
        )?;
        let question = json!({
            "message": "What context should the prompt use?",
            "requestedSchema": {
                "type": "object",
                "properties": {"context": {"type": "string"}},
                "required": ["context"]
            }
        });
        let answered = rounds.ask("user_context", "elicitation/create", question);
        if let Some(asking) = rounds.close(&self.rounds, &binding)? {
            return Ok(GetPromptResponse::InputRequired(asking));
        }
        let answer = answered.map_err(|e| ErrorData::invalid_params(e, None))?;
        let said = answer["content"]["context"].as_str().unwrap_or_default();
        serde_json::from_value(json!({
            "messages": [{"role": "user", "content": {"type": "text",
                "text": format!("Use this context: {said}")}}],
            "resultType": "complete",
        }))
        .map(GetPromptResponse::Complete)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    /// An upstream's resource read or prompt, for this session, through the pipeline's read
    /// seam (halt, credential screen, audit): its answer or its error as MCP has them.
    async fn upstream_read<T, F>(
        &self,
        session: &SessionContext,
        kind: ReadKind,
        request: Value,
        read: F,
    ) -> Result<T, ErrorData>
    where
        F: std::future::Future<Output = Option<Result<Value, String>>>,
        T: serde::de::DeserializeOwned,
    {
        match self.pipeline.read(session, kind, request, read).await {
            Ok(mut value) => {
                // The upstream's final answer (rmcp drops the mark for a handshake-era client).
                if let Some(object) = value.as_object_mut() {
                    object.insert("resultType".into(), json!("complete"));
                }
                serde_json::from_value(value).map_err(|e| {
                    ErrorData::internal_error(
                        format!("the upstream's answer is malformed: {e}"),
                        None,
                    )
                })
            }
            Err(ReadError::Refused(why)) if kind == ReadKind::Prompt => {
                Err(ErrorData::invalid_params(why, None))
            }
            Err(ReadError::Refused(why)) => Err(ErrorData::resource_not_found(why, None)),
            Err(ReadError::Failed(why)) => Err(ErrorData::internal_error(why, None)),
        }
    }
}

impl ServerHandler for AetherMcp {
    fn get_info(&self) -> ServerConfig {
        (*self.info).clone()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    /// A tool's input schema, for rmcp to check a 2026-07-28 call's `Mcp-Param-*` headers
    /// against its arguments (SEP-2243: a parameter marked `x-mcp-header` travels in a header
    /// too). Whether the caller may call it is the pipeline's to say, as for any call.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let catalog = self.pipeline.catalog();
        let def = catalog.get(name)?.def();
        Some(Tool::new(
            def.name.clone(),
            String::new(),
            Arc::new(def.input_schema.as_object().cloned().unwrap_or_default()),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let session = self.session_for(&context.extensions)?;
        let modern = modern(&context);
        if !modern {
            self.watch_catalog(&session, context.peer.clone());
        }
        let tools = self
            .pipeline
            .offered(&session)
            .iter()
            .map(|e| mcp_tool(e))
            .collect();
        let mut result = ListToolsResult::with_all_items(tools);
        if modern {
            // The list is the agent's own (its allowlist, the rules for it).
            result.ttl_ms = Some(LIST_TTL_MS);
            result.cache_scope = Some(rmcp::model::CacheScope::Private);
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session_for(&context.extensions)?;
        // A 2026-07-28 request asks its client in rounds, and logs only at the level it names.
        let rounds = if modern(&context) {
            let (rounds, binding) = self.open_rounds(
                "tools/call",
                &session,
                &request.name,
                request.arguments.as_ref(),
                request.request_state.as_deref(),
                request.input_responses.as_ref(),
                &context,
            )?;
            Some((Arc::new(rounds), binding))
        } else {
            None
        };
        let link = Arc::new(McpClientLink {
            peer: context.peer.clone(),
            progress_token: context.meta.get_progress_token(),
            log_level: match rounds {
                Some(_) => SessionLogLevel::of_request(request_log_level(&context)),
                None => self.log_level.clone(),
            },
            rounds: rounds.as_ref().map(|(rounds, _)| rounds.clone()),
        });
        // The command envelope (confirmation, idempotency key, expiry) rides in `_meta`, never
        // in the tool's arguments.
        let mut envelope = aether_pipeline::envelope::Envelope::from_meta(&context.meta.0.0);
        // The trace context: `_meta`'s, else the HTTP request's own `traceparent` header.
        if envelope.trace.is_none() {
            envelope.trace = context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.headers.get("traceparent"))
                .and_then(|v| v.to_str().ok())
                .and_then(aether_pipeline::envelope::traceparent)
                .map(str::to_string);
        }
        let result = self
            .pipeline
            .call_with(
                &session,
                &request.name,
                request.arguments,
                envelope,
                link,
                context.ct.clone(),
            )
            .await;
        let call_id = result.call_id;
        // The call asked its client something: it ends asking (its own failure, that it could
        // not go on unanswered, is in the audit).
        if let Some((rounds, binding)) = &rounds
            && let Some(asking) = rounds.close(&self.rounds, binding)?
        {
            return Ok(CallToolResponse::InputRequired(asking));
        }
        let response = match result.outcome {
            CallOutcome::Ran(out) => {
                if self.fixtures()
                    && !out.is_error
                    && let Some(changed) = fixtures::Changed::by(&request.name)
                {
                    let _ = fixtures::changes().send(changed);
                }
                let mut r = if out.is_error {
                    CallToolResult::error(blocks(out.content))
                } else {
                    CallToolResult::success(blocks(out.content))
                };
                if !out.is_error {
                    r.structured_content = out.structured;
                }
                r.meta = serde_json::from_value(json!({"aether/callId": call_id})).ok();
                r
            }
            CallOutcome::Refused(r) if r.step == Step::UnknownTool => {
                return Err(ErrorData::invalid_params(
                    format!("mcp-tool-not-implemented: {}", r.reason),
                    Some(json!({"code": "mcp-tool-not-implemented", "callId": call_id})),
                ));
            }
            CallOutcome::Refused(r) => {
                let mut result = error_result(
                    format!("Refused by Aether ({}, {}): {}", r.step, r.rule, r.reason),
                    &call_id,
                );
                // A rate limit's refusal says when to try again, for a client to wait on.
                if let (Some(seconds), Some(meta)) = (r.retry_after_s, result.meta.as_mut()) {
                    meta.0
                        .insert("aether/retryAfterSeconds".into(), json!(seconds));
                }
                result
            }
            CallOutcome::Cancelled { timed_out: true } => error_result(
                "The call ran out of time and was stopped; try a narrower request".into(),
                &call_id,
            ),
            CallOutcome::Cancelled { timed_out: false } => {
                return Err(ErrorData::internal_error(
                    "the call was cancelled",
                    Some(json!({"callId": call_id})),
                ));
            }
            CallOutcome::Failed(message) => error_result(
                format!("Aether could not complete the call: {message}"),
                &call_id,
            ),
        };
        Ok(response.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_level.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources = vec![json!({
            "uri": "aether://capabilities",
            "name": "capabilities",
            "title": "Aether capabilities",
            "description": "Each capability with its status in this build and whether MCP clients can reach it.",
            "mimeType": "application/json"
        })];
        if self.fixtures() {
            resources.extend(fixtures::resources());
        }
        if !self.upstreams.is_empty() {
            let session = self.session_for(&context.extensions)?;
            resources.extend(self.upstreams.resources(&reach(&session)));
        }
        serde_json::from_value(json!({"resources": resources, "resultType": "complete"}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut templates = vec![json!({
            "uriTemplate": "aether://audit/events{?cursor,limit}",
            "name": "audit-events",
            "title": "Your audit events",
            "description": "Audit rows of your own calls, oldest first, after `cursor` (a sequence number).",
            "mimeType": "application/json"
        })];
        if self.fixtures() {
            templates.extend(fixtures::resource_templates());
        }
        if !self.upstreams.is_empty() {
            let session = self.session_for(&context.extensions)?;
            templates.extend(self.upstreams.resource_templates(&reach(&session)));
        }
        serde_json::from_value(json!({"resourceTemplates": templates, "resultType": "complete"}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if self.fixtures()
            && let Some(found) = fixtures::read_resource(&request.uri)
        {
            return found.map(Into::into);
        }
        let session = self.session_for(&context.extensions)?;
        if request.uri.starts_with(crate::upstream::RESOURCE_PREFIX) {
            return self
                .upstream_read::<ReadResourceResult, _>(
                    &session,
                    ReadKind::Resource,
                    json!({ "target": request.uri }),
                    async {
                        self.upstreams
                            .read_resource(&reach(&session), &request.uri)
                            .await
                    },
                )
                .await
                .map(Into::into);
        }
        read_aether(self, &session, &request.uri)
            .await
            .map(Into::into)
    }

    /// `subscriptions/listen` (2026-07-28): Aether's tool list is what changes under a
    /// client (the registry, the rules); its own resources and prompts do not. (With the
    /// fixtures, the suite's prompts and resources announce changes too.)
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let filter = SubscriptionFilter::builder().tools_list_changed();
        Some(if self.fixtures() {
            filter
                .prompts_list_changed()
                .resources_list_changed()
                .build()
        } else {
            filter.build()
        })
    }

    /// Tells the listening client each time its catalog changes, until it stops listening
    /// (or the server stops, which ends the stream with its final result).
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let tools = subscription.accepted().tools_list_changed == Some(true);
        let prompts = subscription.accepted().prompts_list_changed == Some(true);
        let session = self.session_for(&subscription.request_context().extensions)?;
        let mut catalog = tools.then(|| CatalogWatch::new(&self.pipeline, &session));
        let mut triggers = self.fixtures().then(|| fixtures::changes().subscribe());
        loop {
            let sent = tokio::select! {
                _ = subscription.cancelled() => return Ok(()),
                changed = async {
                    match &mut catalog {
                        Some(watch) => watch.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    if !changed {
                        return Ok(());
                    }
                    subscription.sink().notify_tool_list_changed().await
                }
                trigger = async {
                    match &mut triggers {
                        Some(triggers) => triggers.recv().await.ok(),
                        None => std::future::pending().await,
                    }
                } => match trigger {
                    Some(fixtures::Changed::Tools) if tools => {
                        subscription.sink().notify_tool_list_changed().await
                    }
                    Some(fixtures::Changed::Prompts) if prompts => {
                        subscription.sink().notify_prompt_list_changed().await
                    }
                    _ => Ok(()),
                },
            };
            if sent.is_err() {
                return Ok(());
            }
        }
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribable(&request.uri)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribable(&request.uri)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = Vec::new();
        if self.fixtures() {
            prompts.extend(fixtures::prompts());
        }
        if !self.upstreams.is_empty() {
            let session = self.session_for(&context.extensions)?;
            prompts.extend(self.upstreams.prompts(&reach(&session)));
        }
        serde_json::from_value(json!({"prompts": prompts, "resultType": "complete"}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if self.fixtures() && request.name == fixtures::ASKING_PROMPT {
            return self.asking_prompt(&request, &context);
        }
        if self.fixtures() && !request.name.contains("__") {
            return fixtures::get_prompt(&request.name, request.arguments.unwrap_or_default())
                .map(Into::into);
        }
        let session = self.session_for(&context.extensions)?;
        let arguments = request.arguments.clone();
        self.upstream_read::<rmcp::model::GetPromptResult, _>(
            &session,
            ReadKind::Prompt,
            json!({ "target": request.name, "arguments": request.arguments }),
            async {
                self.upstreams
                    .get_prompt(&reach(&session), &request.name, arguments)
                    .await
            },
        )
        .await
        .map(Into::into)
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        if self.fixtures() {
            return serde_json::from_value(
                json!({"completion": {"values": [], "total": 0, "hasMore": false}, "resultType": "complete"}),
            )
            .map_err(|e| ErrorData::internal_error(e.to_string(), None));
        }
        Err(ErrorData::method_not_found::<
            rmcp::model::CompleteRequestMethod,
        >())
    }
}

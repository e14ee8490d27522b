//! Test support: the test tools, a harness that gives each test its own temporary store and
//! pipeline, and `check()`, the invariants every test ends with.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aether_pipeline::{
    CallOutcome, CallResult, Pipeline, PipelineError, SessionContext, Settings, Transport,
};
use aether_policy::config::Limits;
use aether_policy::{AgentProfile, Risk, Step, Tier, ToolDef, ToolMeta, canonical_json};
use aether_store::{AdmissionReceipt, AuditQuery, AuditRecord, ChainReport, Store};
use aether_tools::{CallContext, Content, NoClient, Roots, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub const DESCRIPTION: &str = "A tool that exists only for the pipeline's integration tests.";

/// A well-formed definition of a tool with effects (its calls are receipted before they run;
/// see [`read_only_def`] for one whose row is its only record).
pub fn def(name: &str, group: &str, tier: Tier, input_schema: Value) -> ToolDef {
    let mut d = read_only_def(name, group, tier, input_schema);
    d.meta.read_only = false;
    d
}

/// A well-formed definition of a side-effect-free tool.
pub fn read_only_def(name: &str, group: &str, tier: Tier, input_schema: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: format!("Test tool {name}"),
        group: group.into(),
        tier,
        description: DESCRIPTION.into(),
        arguments: aether_policy::ArgumentKinds::from_schema(&input_schema),
        input_schema,
        output_schema: json!({"type": "object"}),
        meta: ToolMeta {
            risk: Risk::Low,
            ..ToolMeta::read_only()
        },
    }
}

/// Echo's input schema: strict, with a required string, an integer with a minimum and a
/// nested array, so argument errors have paths to name.
pub fn strict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "count": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["text"],
        "additionalProperties": false
    })
}

/// An input schema that takes anything (for tools whose arguments do not matter).
pub fn open_schema() -> Value {
    json!({"type": "object"})
}

/// Arguments that pass [`strict_schema`].
pub fn valid() -> Value {
    json!({"text": "hello", "count": 2})
}

/// Returns its arguments, canonical, as its text and as structured content.
pub struct Echo {
    def: ToolDef,
    calls: AtomicUsize,
    /// The arguments of every call, as the tool received them.
    pub seen: Mutex<Vec<Value>>,
}

impl Echo {
    pub fn new(name: &str, group: &str, tier: Tier) -> Arc<Echo> {
        Arc::new(Echo {
            def: def(name, group, tier, strict_schema()),
            calls: AtomicUsize::new(0),
            seen: Mutex::default(),
        })
    }

    /// An echo with a definition of the test's own.
    pub fn with_def(def: ToolDef) -> Arc<Echo> {
        Arc::new(Echo {
            def,
            calls: AtomicUsize::new(0),
            seen: Mutex::default(),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn last(&self) -> Value {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("echo never ran")
    }
}

#[async_trait]
impl Tool for Echo {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, _cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(args.clone());
        Ok(ToolOutput::with_structured(canonical_json(&args), args))
    }
}

/// Panics, on the async thread or (if `blocking`) inside `aether_tools::blocking`.
pub struct Panics {
    def: ToolDef,
    blocking: bool,
    calls: AtomicUsize,
}

impl Panics {
    pub fn new(name: &str, blocking: bool) -> Arc<Panics> {
        Arc::new(Panics {
            def: def(name, "alpha", Tier::Standard, open_schema()),
            blocking,
            calls: AtomicUsize::new(0),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Panics {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, _cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.blocking {
            aether_tools::blocking(|| -> ToolOutput { panic!("boom in a blocking task") }).await;
        }
        panic!("boom on the async thread");
    }
}

/// Sleeps until its call is cancelled (or for an hour), after saying it started.
pub struct Sleeps {
    def: ToolDef,
    calls: AtomicUsize,
    pub started: Notify,
    /// The cancellation token the pipeline handed the last call.
    pub token: Mutex<Option<CancellationToken>>,
}

impl Sleeps {
    pub fn new(name: &str) -> Arc<Sleeps> {
        Arc::new(Sleeps {
            def: def(name, "alpha", Tier::Standard, open_schema()),
            calls: AtomicUsize::new(0),
            started: Notify::new(),
            token: Mutex::default(),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn token(&self) -> CancellationToken {
        self.token
            .lock()
            .unwrap()
            .clone()
            .expect("sleeper never ran")
    }
}

#[async_trait]
impl Tool for Sleeps {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.token.lock().unwrap() = Some(cx.cancel.clone());
        self.started.notify_one();
        tokio::select! {
            _ = cx.cancel.cancelled() => Err(ToolError::Cancelled),
            _ = tokio::time::sleep(Duration::from_secs(3600)) => Ok(ToolOutput::text("woke up")),
        }
    }
}

/// Returns the given text blocks.
pub struct Big {
    def: ToolDef,
    blocks: Vec<String>,
    calls: AtomicUsize,
}

impl Big {
    pub fn new(name: &str, tier: Tier, blocks: Vec<String>) -> Arc<Big> {
        Arc::new(Big {
            def: def(name, "alpha", tier, open_schema()),
            blocks,
            calls: AtomicUsize::new(0),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Big {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, _cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput {
            content: self.blocks.iter().cloned().map(Content::Text).collect(),
            ..Default::default()
        })
    }
}

/// Fails with the given error.
pub struct Fails {
    def: ToolDef,
    error: ToolError,
    calls: AtomicUsize,
}

impl Fails {
    pub fn new(name: &str, error: ToolError) -> Arc<Fails> {
        Arc::new(Fails {
            def: def(name, "alpha", Tier::Standard, open_schema()),
            error,
            calls: AtomicUsize::new(0),
        })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Fails {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, _cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(self.error.clone())
    }
}

/// While it runs, reads its own receipt through a store handle it captured, and records what
/// it found: the receipt-before-run invariant seen from inside the tool.
pub struct Probe {
    def: ToolDef,
    store: Store,
    /// (call id, arguments as received, the receipt found while running).
    pub seen: Mutex<Vec<(String, Value, Option<AdmissionReceipt>)>>,
}

impl Probe {
    pub fn new(name: &str, store: Store) -> Arc<Probe> {
        Arc::new(Probe {
            def: def(name, "alpha", Tier::Standard, strict_schema()),
            store,
            seen: Mutex::default(),
        })
    }
}

#[async_trait]
impl Tool for Probe {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let receipt = self
            .store
            .receipt(&cx.call_id)
            .await
            .map_err(ToolError::failed)?;
        self.seen
            .lock()
            .unwrap()
            .push((cx.call_id.clone(), args, receipt));
        Ok(ToolOutput::text("probed"))
    }
}

/// The agent most tests call as: reaches the `alpha` group, with a team and a project.
pub fn worker() -> AgentProfile {
    AgentProfile {
        team: Some("core".into()),
        project: Some("aether".into()),
        ..AgentProfile::with_groups("worker", &["alpha"])
    }
}

pub fn agents(list: Vec<AgentProfile>) -> BTreeMap<String, AgentProfile> {
    list.into_iter().map(|a| (a.name.clone(), a)).collect()
}

/// One test's world: a temporary folder holding its store.
pub struct Harness {
    /// Removed (with the store) when the test ends.
    _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub store: Store,
}

impl Harness {
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(".aether/aether.db");
        let store = Store::open_sqlite(&db).unwrap();
        Harness {
            _dir: dir,
            db,
            store,
        }
    }

    pub async fn try_pipeline(
        &self,
        agents: Vec<AgentProfile>,
        limits: Limits,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<Pipeline, PipelineError> {
        self.try_pipeline_with_roots(agents, limits, tools, Roots::open(&[]).unwrap())
            .await
    }

    /// As [`Harness::try_pipeline`], with the given roots (for the workspace tools).
    pub async fn try_pipeline_with_roots(
        &self,
        agents: Vec<AgentProfile>,
        limits: Limits,
        tools: Vec<Arc<dyn Tool>>,
        roots: Roots,
    ) -> Result<Pipeline, PipelineError> {
        Pipeline::new(self.settings(agents, limits, tools, roots)).await
    }

    /// The settings most tests use: no external tools, no rules, a 5-minute approval window.
    pub fn settings(
        &self,
        agents: Vec<AgentProfile>,
        limits: Limits,
        tools: Vec<Arc<dyn Tool>>,
        roots: Roots,
    ) -> Settings {
        Settings {
            agents: self::agents(agents),
            roots,
            limits,
            store: self.store.clone(),
            tools,
            external_tools: Vec::new(),
            journal: Default::default(),
            approval_window: Duration::from_secs(300),
            rules: aether_pipeline::Rules::none(),
            screen: Default::default(),
            private: Vec::new(),
            undo: Arc::new(aether_tools::workspace::UndoCall::new()),
            tracer: None,
        }
    }

    /// A pipeline from [`Harness::settings`] as changed by `change`.
    pub async fn pipeline_with(
        &self,
        agents: Vec<AgentProfile>,
        tools: Vec<Arc<dyn Tool>>,
        change: impl FnOnce(&mut Settings),
    ) -> Arc<Pipeline> {
        let mut settings =
            self.settings(agents, Limits::default(), tools, Roots::open(&[]).unwrap());
        change(&mut settings);
        match Pipeline::new(settings).await {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("pipeline did not start: {e}"),
        }
    }

    pub async fn pipeline(
        &self,
        agents: Vec<AgentProfile>,
        limits: Limits,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Arc<Pipeline> {
        match self.try_pipeline(agents, limits, tools).await {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("pipeline did not start: {e}"),
        }
    }

    /// A second handle on the same file, as another Aether process (or the CLI) would open.
    pub fn second_handle(&self) -> Store {
        Store::open_sqlite(&self.db).unwrap()
    }

    /// The database file opened directly, as an operator editing it would.
    pub fn sql(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn
    }

    /// Edits one registry row and has the pipeline re-read the registry.
    pub async fn edit_registry(&self, pipeline: &Pipeline, tool: &str, set: &str) {
        let changed = self
            .sql()
            .execute(
                &format!("UPDATE registry SET {set} WHERE name = ?1"),
                [tool],
            )
            .unwrap();
        assert_eq!(changed, 1, "no registry row for {tool}");
        pipeline.reload_registry().await.unwrap();
    }

    pub fn receipt_ids(&self) -> HashSet<String> {
        let conn = self.sql();
        let mut stmt = conn.prepare("SELECT call_id FROM receipts").unwrap();
        stmt.query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// The invariants every test ends with: the audit chain verifies; no call has two audit
    /// rows; a call has a receipt exactly when no pipeline step refused it, and every receipt
    /// has its audit row.
    pub async fn check(&self) -> ChainReport {
        let report = self.store.verify_audit(None).await.unwrap();
        assert!(
            report.is_intact(),
            "audit chain broken: {:?}",
            report.breaks
        );
        let rows = all_rows(&self.store).await;
        assert_eq!(report.rows as usize, rows.len());
        let mut by_call = HashMap::new();
        for r in &rows {
            assert!(
                by_call.insert(r.event.call_id.clone(), r).is_none(),
                "two audit rows for call {}",
                r.event.call_id
            );
        }
        let receipts = self.receipt_ids();
        // Operator actions (halt, registry changes, decisions) are rows without a call.
        for r in rows.iter().filter(|r| r.event.transport != "operator") {
            let receipted = receipts.contains(&r.event.call_id);
            match &r.event.step {
                Some(step) => assert!(
                    !receipted,
                    "call {} was refused at {step} but has a receipt",
                    r.event.call_id
                ),
                // A side-effect-free call's row is its only record.
                None => assert!(
                    receipted != r.event.single,
                    "call {} ({}): receipt {receipted}, single record {}",
                    r.event.call_id,
                    r.event.outcome,
                    r.event.single
                ),
            }
        }
        for id in &receipts {
            assert!(by_call.contains_key(id), "receipt {id} has no audit row");
        }
        report
    }
}

pub fn session(pipeline: &Pipeline, agent: &str, id: &str) -> SessionContext {
    pipeline
        .session(agent, Transport::InProcess, id.to_string())
        .unwrap()
}

pub fn object(args: Value) -> Option<Map<String, Value>> {
    match args {
        Value::Object(map) => Some(map),
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// Calls with no client and a fresh cancellation token.
pub async fn call(
    pipeline: &Pipeline,
    ctx: &SessionContext,
    tool: &str,
    args: Value,
) -> CallResult {
    pipeline
        .call(
            ctx,
            tool,
            object(args),
            Arc::new(NoClient),
            CancellationToken::new(),
        )
        .await
}

pub async fn all_rows(store: &Store) -> Vec<AuditRecord> {
    store
        .audit_query(AuditQuery {
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap()
}

/// The one audit row of `call_id`.
pub async fn row_of(store: &Store, call_id: &str) -> AuditRecord {
    let mut rows: Vec<AuditRecord> = all_rows(store)
        .await
        .into_iter()
        .filter(|r| r.event.call_id == call_id)
        .collect();
    assert_eq!(
        rows.len(),
        1,
        "call {call_id} has {} audit rows",
        rows.len()
    );
    rows.remove(0)
}

/// The text of a call that ran; panics on any other outcome.
pub fn text(result: &CallResult) -> String {
    match &result.outcome {
        CallOutcome::Ran(out) => out
            .content
            .iter()
            .map(|c| match c {
                Content::Text(t) => t.as_str(),
                other => panic!("unexpected content {other:?}"),
            })
            .collect(),
        other => panic!("expected the call to run, got {other:?}"),
    }
}

/// Asserts the call ran and the tool reported success; returns its text.
pub fn ok_text(result: &CallResult) -> String {
    match &result.outcome {
        CallOutcome::Ran(out) => assert!(!out.is_error, "tool reported an error: {out:?}"),
        other => panic!("expected the call to run, got {other:?}"),
    }
    text(result)
}

/// Asserts `result` was refused at `step` by `rule`, that no receipt was written, and that
/// its one audit row says the same; returns the refusal's reason and the row.
pub async fn refused(
    store: &Store,
    result: &CallResult,
    step: Step,
    rule: &str,
) -> (String, AuditRecord) {
    let reason = match &result.outcome {
        CallOutcome::Refused(r) => {
            assert_eq!(
                (r.step, r.rule.as_str()),
                (step, rule),
                "refused, but by another step: {r}"
            );
            r.reason.clone()
        }
        other => panic!("expected a refusal at {step}, got {other:?}"),
    };
    assert_eq!(
        store.receipt(&result.call_id).await.unwrap(),
        None,
        "a refused call has a receipt"
    );
    let row = row_of(store, &result.call_id).await;
    assert_eq!(row.event.outcome, "refused");
    assert_eq!(row.event.step.as_deref(), Some(step.as_str()));
    assert_eq!(row.event.rule.as_deref(), Some(rule));
    assert_eq!(row.event.reason.as_deref(), Some(reason.as_str()));
    (reason, row)
}

/// Waits out the last seconds of a UTC day: a test counting calls in a day's window must not
/// see the window end half way.
pub async fn clear_of_midnight() {
    let now = aether_store::now_us();
    let left = 86_400_000_000 - now.rem_euclid(86_400_000_000);
    if left < 30_000_000 {
        tokio::time::sleep(Duration::from_micros(left as u64 + 100_000)).await;
    }
}

/// Names answered from a table (for network tools against servers on loopback).
pub struct Loopback(pub HashMap<String, std::net::IpAddr>);

impl Loopback {
    /// Each of `names` answered with 127.0.0.1.
    pub fn names(names: &[&str]) -> Loopback {
        Loopback(
            names
                .iter()
                .map(|n| (n.to_string(), std::net::Ipv4Addr::LOCALHOST.into()))
                .collect(),
        )
    }
}

#[async_trait]
impl aether_net::Resolve for Loopback {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<std::net::IpAddr>> {
        let host = host.strip_suffix('.').unwrap_or(host);
        self.0.get(host).map(|ip| vec![*ip]).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such host (test resolver)")
        })
    }
}

/// `app` served on 127.0.0.1; its port.
pub async fn serve(app: axum::Router) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// A pipeline with the built-in tools and the network tools (saving into the workspace) over
/// the roots `roots` (folders of a fresh temporary folder, named and opened as given; `ws`
/// among them), whose default agent uses the tool groups `servers` and may reach `allowed`
/// of the loopback `names` (the others resolve, and are refused by egress).
pub struct NetWorld {
    pub h: Harness,
    _tmp: tempfile::TempDir,
    /// The `ws` root's real path.
    pub ws: PathBuf,
    pub p: Arc<Pipeline>,
    /// The default agent's session `s1`.
    pub ctx: SessionContext,
}

impl NetWorld {
    pub async fn new(
        roots: &[(&str, aether_policy::paths::RootMode)],
        names: &[&str],
        servers: &[&str],
        allowed: &[&str],
    ) -> NetWorld {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let specs: Vec<_> = roots
            .iter()
            .map(|&(name, mode)| {
                std::fs::create_dir_all(base.join(name)).unwrap();
                aether_policy::paths::RootSpec {
                    name: name.into(),
                    path: base.join(name).to_string_lossy().into_owned(),
                    mode,
                    writable: None,
                    allow_delete: false,
                }
            })
            .collect();
        let resolver = Arc::new(Loopback::names(names));
        let mut tools = aether_tools::builtin_tools();
        tools.extend(aether_net::saving_tools(
            resolver,
            aether_tools::workspace::saver(),
        ));
        let agent = AgentProfile {
            mcp_servers: Some(servers.iter().map(|s| s.to_string()).collect()),
            allowed_domains: allowed.iter().map(|d| d.to_string()).collect(),
            allow_private_network: true,
            ..aether_policy::config::default_agent_profile()
        };
        let h = Harness::new();
        let p = match h
            .try_pipeline_with_roots(
                vec![agent],
                Limits::default(),
                tools,
                Roots::open(&specs).unwrap(),
            )
            .await
        {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("pipeline did not start: {e}"),
        };
        let ctx = session(&p, aether_policy::config::DEFAULT_AGENT, "s1");
        NetWorld {
            h,
            ws: base.join("ws"),
            _tmp: tmp,
            p,
            ctx,
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> CallResult {
        call(&self.p, &self.ctx, tool, args).await
    }
}

/// The structured output of a call that ran and succeeded.
pub fn structured(result: &CallResult) -> Value {
    ok_text(result);
    match &result.outcome {
        CallOutcome::Ran(out) => out.structured.clone().unwrap(),
        _ => unreachable!(),
    }
}

/// What a call that did not succeed says: its refusal's reason, or the tool's error.
pub fn failure(result: &CallResult) -> String {
    match &result.outcome {
        CallOutcome::Refused(refusal) => format!("refused: {}", refusal.reason),
        CallOutcome::Ran(out) if out.is_error => text(result),
        other => panic!("expected a failure, got {other:?}"),
    }
}

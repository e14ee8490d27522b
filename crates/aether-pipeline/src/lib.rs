//! Aether's admission pipeline: the one code path every tool call takes, whatever transport it
//! arrived on, from the caller's session to the audit row.
//!
//! The steps, in order (SPEC §2), each a function of `admission.rs` unless named otherwise:
//!
//! 1. Session context: built by the transport from its authenticated identity, never from
//!    arguments (`session.rs`, [`Pipeline::session`]).
//! 2. Halt: refused while an operator has halted Aether.
//!    (Then the tool is looked up: an unknown one is `mcp-tool-not-implemented`.)
//! 3. Registry: approved, the definition digest unchanged.
//! 4. Connection layer: the agent reaches the tool's group.
//! 5. Capability layer: the agent's tool list names it, and it is of use to the agent (and,
//!    for an OAuth token, its scopes grant it).
//!    Step 5b, rate limits: the agent's calls per window (all its callers, each caller, this
//!    tool) and in flight, counted with the other processes on the store (`rates.rs`).
//! 6. Arguments: the operator's defaults, the shared limits (`limits.rs`), a network tool's
//!    credential scan, the JSON Schema.
//! 7. Rules: the operator's `permissions.yaml` (`rules.rs`; the paths and hosts judged are
//!    `destinations.rs`').
//! 8. Egress and DLP: no credential leaves, every URL one the agent may reach.
//! 9. Tier gate: a Restricted tool or an `ask_user` rule waits for a person (`approval.rs`).
//! 10. Command envelope: well-formed, unexpired, confirmed; an idempotency key's repeat gets
//!     the first result (`envelope.rs`).
//! 11. Receipt: durable before the tool runs (`execution.rs`). A side-effect-free built-in has
//!     none: its audit row is its one record. A tool whose only effects are file writes it
//!     journals first has its receipt ride its first journal commit (`PendingReceipt`).
//! 12. Run: with the call's cancellation, a time limit, panics caught, the result bounded
//!     (`execution.rs`).
//! 13. Audit: the row, durable before the caller hears the outcome, for every outcome,
//!     refusals included (`audit.rs`); keyed, witnessed, and for a crash's unfinished calls
//!     written as `interrupted` at the next start (`recovery.rs`).
//!
//! Each call is also an OpenTelemetry span with a child per step that does work, when
//! telemetry is on (`spans.rs`).
//!
//! Beside the steps: what each session is offered (`offers.rs`: offered equals runnable),
//! reads of an upstream's resources and prompts (`reads.rs`), keeping in step with the store
//! and the rules file (`watcher.rs`), and the operator's actions (`operator/`: halt,
//! decisions, registry changes, undo), which the CLI and the admin API share.
//!
//! This crate knows no MCP, HTTP or SQL: transports call [`Pipeline::call`] and
//! [`Pipeline::offered`]; the store is behind `aether-store`.

pub mod accounts;
mod admission;
mod approval;
mod audit;
mod capabilities;
mod catalog;
mod destinations;
pub mod envelope;
mod execution;
mod ledger;
mod limits;
pub mod metrics;
mod offers;
pub mod operator;
mod rates;
mod reads;
mod recovery;
pub mod replay;
pub mod rules;
pub mod screening;
mod session;
pub mod spans;
pub mod tables;
pub mod tokens;
mod watcher;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aether_policy::AgentProfile;
use aether_policy::RegistryView;
use aether_policy::config::{JournalSection, Limits};
use aether_policy::decision::Refusal;
use aether_store::{AuditQuery, AuditRecord, BuiltinDefinition, Revisions, Store};
use aether_tools_core::{Ledger, Roots, Tool, ToolOutput};
use tokio_util::sync::CancellationToken;

pub use admission::STEPS;
pub use capabilities::capabilities;
pub use catalog::{Catalog, CatalogError, Entry};
pub use ledger::StoreLedger;
pub use limits::{MAX_HEADER_BYTES, MAX_HEADERS, MAX_URL_BYTES};
pub use reads::{ReadError, ReadKind};
pub use recovery::{Books, Recovered, Redo, WitnessSpec};
pub use rules::Rules;
pub use session::{SessionContext, Transport, owner};
pub use tokens::{Principal, TokenIndex};

/// Everything the pipeline is built from.
pub struct Settings {
    pub agents: BTreeMap<String, AgentProfile>,
    pub roots: Roots,
    pub limits: Limits,
    pub store: Store,
    pub tools: Vec<Arc<dyn Tool>>,
    /// Tools not approved from source (upstream servers'): recorded as seen, offered once an
    /// operator approves their definition.
    pub external_tools: Vec<Arc<dyn Tool>>,
    pub journal: JournalSection,
    /// How long a call waits for a person before it is denied.
    pub approval_window: Duration,
    pub rules: Rules,
    /// Whether a finding of the definition screen blocks an approval (`[registry] screen`).
    pub screen: aether_policy::definition_screen::ScreenMode,
    /// Files of the operator's (the configuration) that no tool may read or write, whatever
    /// root they lie in. The rules file and the store are added to these.
    pub private: Vec<std::path::PathBuf>,
    /// The tool the operator's undo runs (`aether_tools::workspace::UndoCall`): served to no
    /// agent, run only by [`Pipeline::operator_undo`].
    pub undo: Arc<dyn Tool>,
    /// The tracer of each call's spans (`spans.rs`); `None`: telemetry is off.
    pub tracer: spans::SharedTracer,
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] aether_store::StoreError),
    #[error("no agent is named {name:?}; configured agents: {known}")]
    UnknownAgent { name: String, known: String },
}

/// How a call ended, as the transport needs to know it.
#[derive(Debug)]
pub enum CallOutcome {
    /// The tool ran. `output.is_error` says whether it reported failure.
    Ran(ToolOutput),
    /// A pipeline step refused the call; the tool did not run.
    Refused(Refusal),
    /// The caller cancelled, or the call ran out of time; the tool was stopped.
    Cancelled { timed_out: bool },
    /// Aether itself failed (store unavailable, tool panicked); the message says what.
    Failed(String),
}

#[derive(Debug)]
pub struct CallResult {
    pub call_id: String,
    pub outcome: CallOutcome,
}

/// The admission pipeline. Cheap to share: wrap it in an `Arc`.
pub struct Pipeline {
    /// The operator's undo tool (see [`Settings::undo`]).
    undo: Arc<dyn Tool>,
    /// Replaced, never changed in place, when an upstream's tools change.
    catalog: RwLock<Arc<Catalog>>,
    registry: RwLock<Arc<RegistryView>>,
    agents: BTreeMap<String, Arc<AgentProfile>>,
    roots: Arc<Roots>,
    limits: Arc<Limits>,
    store: Store,
    ledger: Arc<dyn Ledger>,
    journal: JournalSection,
    /// The seal generation last loaded into the roots.
    seal_generation: std::sync::atomic::AtomicI64,
    halted: Arc<AtomicBool>,
    /// Calls inside [`Pipeline::call`] right now. A call that is alone commits its receipt and
    /// audit row on its own thread; calls in company hand them to the store's group commit.
    in_flight: AtomicUsize,
    /// Cancelled by [`Pipeline::shut_down`]: stops running tools, refuses new calls.
    shutdown: CancellationToken,
    rules: Rules,
    screen: aether_policy::definition_screen::ScreenMode,
    approval_window: Duration,
    /// Bumped whenever the store's approvals change (a call waiting for a person re-reads).
    approvals_changed: tokio::sync::watch::Sender<i64>,
    /// Bumped whenever what some agent is offered may have changed (registry, rules).
    catalog_changed: tokio::sync::watch::Sender<u64>,
    /// Bumped when an operator asks for the upstreams to be listed again.
    sources_refresh: tokio::sync::watch::Sender<i64>,
    tokens: RwLock<Arc<TokenIndex>>,
    /// The store's revisions as last seen by [`Pipeline::watch`].
    seen: std::sync::Mutex<Revisions>,
    metrics: metrics::Metrics,
    /// What each agent's recent network calls sent, by agent: the pieces a credential split
    /// over several calls (and sessions) is looked for in (`aether_policy::dlp`). Bounded per
    /// agent, forgotten after its window.
    fragments: std::sync::Mutex<
        HashMap<String, Arc<std::sync::Mutex<aether_policy::dlp::SessionFragments>>>,
    >,
    /// Rate limits' counts, shared with the other processes on the store.
    rates: Arc<rates::Rates>,
    /// Stops their sharing (at shutdown, or when the pipeline is dropped).
    rates_stop: CancellationToken,
    /// Each call's spans are made with it, when telemetry is on.
    tracer: spans::SharedTracer,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.rates_stop.cancel();
    }
}

impl Pipeline {
    /// Builds the pipeline: checks the catalog, records the built-ins as approved from source,
    /// loads the registry and the halt flag.
    pub async fn new(settings: Settings) -> Result<Pipeline, PipelineError> {
        let catalog = Catalog::with_external(settings.tools, settings.external_tools)?;
        let definition = |t: &Arc<catalog::Entry>| BuiltinDefinition {
            name: t.def().name.clone(),
            digest: t.digest.to_string(),
            definition: serde_json::to_string(t.def()).unwrap_or_default(),
        };
        let builtins: Vec<_> = catalog
            .iter()
            .filter(|t| !t.external)
            .map(definition)
            .collect();
        let seen: Vec<_> = catalog
            .iter()
            .filter(|t| t.external)
            .map(definition)
            .collect();
        settings.store.sync_builtins(builtins).await?;
        if !seen.is_empty() {
            settings.store.record_seen(seen, "external").await?;
        }
        let tokens = TokenIndex::load(&settings.store).await?;
        let revisions = settings.store.revisions().await?;
        let halted = settings.store.halt_state().await?.halted;
        let mut roots = settings.roots;
        let mut private = settings.store.private_paths();
        private.extend(settings.private.iter().cloned());
        // The rules file, even before it exists: an agent that could write it would write
        // its own permissions.
        private.extend(settings.rules.path().map(std::path::Path::to_path_buf));
        roots.set_private(private);
        let teams = settings
            .agents
            .iter()
            .map(|(name, a)| (name.clone(), a.team.clone()))
            .collect();
        let pipeline = Pipeline {
            catalog: RwLock::new(Arc::new(catalog)),
            registry: RwLock::new(Arc::new(RegistryView::default())),
            agents: settings
                .agents
                .into_iter()
                .map(|(k, v)| (k, Arc::new(v)))
                .collect(),
            roots: Arc::new(roots),
            limits: Arc::new(settings.limits),
            ledger: Arc::new(StoreLedger::with_teams(settings.store.clone(), teams)),
            journal: settings.journal,
            seal_generation: std::sync::atomic::AtomicI64::new(-1),
            rates: rates::Rates::new(settings.store.clone()),
            rates_stop: CancellationToken::new(),
            store: settings.store,
            halted: Arc::new(AtomicBool::new(halted)),
            in_flight: AtomicUsize::new(0),
            shutdown: CancellationToken::new(),
            rules: settings.rules,
            screen: settings.screen,
            approval_window: settings.approval_window,
            approvals_changed: tokio::sync::watch::channel(revisions.approvals).0,
            catalog_changed: tokio::sync::watch::channel(0).0,
            sources_refresh: tokio::sync::watch::channel(revisions.sources).0,
            tokens: RwLock::new(Arc::new(tokens)),
            seen: std::sync::Mutex::new(revisions),
            metrics: metrics::Metrics::default(),
            fragments: std::sync::Mutex::default(),
            undo: settings.undo,
            tracer: settings.tracer,
        };
        pipeline.reload_registry().await?;
        pipeline.reload_seals().await?;
        pipeline.prune_journal().await?;
        // Counts are shared through the store only where some agent has limits; until the
        // pipeline shuts down or is dropped.
        if pipeline.agents.values().any(|a| !a.rates.is_empty()) {
            for (agent, tool) in pipeline
                .agents
                .values()
                .flat_map(|a| a.rates.per_tool.keys().map(move |tool| (&a.name, tool)))
            {
                if pipeline.catalog().get(tool).is_none() {
                    tracing::warn!(%agent, %tool, "agents.{agent}.rates names a tool this server does not have: that limit applies to nothing");
                }
            }
            pipeline.rates.clone().run(pipeline.rates_stop.clone());
        }
        Ok(pipeline)
    }

    /// Removes, in the background, the temporary files of writes a crash interrupted (older
    /// than a minute: another process's write in progress keeps its own). Tools never list or
    /// read them meanwhile.
    pub fn remove_write_leftovers(&self) {
        let roots = self.roots.clone();
        tokio::task::spawn_blocking(move || roots.remove_write_leftovers(Duration::from_secs(60)));
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// Whether an operator has halted Aether (as last seen).
    pub fn is_halted(&self) -> bool {
        self.halted.load(Ordering::Relaxed)
    }

    /// The catalog as it is now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn agents(&self) -> impl Iterator<Item = &AgentProfile> {
        self.agents.values().map(|a| a.as_ref())
    }

    /// Stops every running call (each is audited as cancelled), refuses new ones, and waits up
    /// to `wait` for the calls in flight to write their audit rows. Transports call this when
    /// they stop, so that a client leaving, or Ctrl-C, does not leave an admitted call without
    /// its audit row.
    pub async fn shut_down(&self, wait: Duration) {
        self.shutdown.cancel();
        self.rates_stop.cancel();
        let deadline = Instant::now() + wait;
        while self.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Calls running now (admitted or on their way).
    pub fn calls_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the current call is the only one in flight. Yields first, so that requests
    /// already read but not yet started (on a single-threaded runtime they wait for this task
    /// to yield) are counted.
    async fn alone(&self) -> bool {
        tokio::task::yield_now().await;
        self.in_flight.load(Ordering::Relaxed) <= 1
    }

    fn registry(&self) -> Arc<RegistryView> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Changes whenever what an agent is offered may have changed; sessions compare their
    /// catalog and tell their client (`notifications/tools/list_changed`).
    pub fn catalog_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.catalog_changed.subscribe()
    }

    /// Changes whenever an operator asks (`aether sources refresh`) for every upstream to be
    /// listed again.
    pub fn sources_refresh_requests(&self) -> tokio::sync::watch::Receiver<i64> {
        self.sources_refresh.subscribe()
    }

    /// Who a bearer token speaks for, if anyone.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .lookup(token)
            .cloned()
    }

    /// How many agent tokens were ever made, revoked ones included (HTTP's `auth = "auto"`
    /// requires tokens from the first one on, for good).
    pub fn agent_tokens(&self) -> usize {
        self.tokens
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .agent_tokens()
    }

    /// Whether a finding of the definition screen blocks an approval here.
    pub fn screen(&self) -> aether_policy::definition_screen::ScreenMode {
        self.screen
    }

    pub fn has_agent(&self, name: &str) -> bool {
        self.agents.contains_key(name)
    }

    /// The caller's own audit rows, oldest first, after `cursor`: its agent's, and of those,
    /// for a caller with an OAuth token, only its person's.
    pub async fn audit_events(
        &self,
        ctx: &SessionContext,
        cursor: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, PipelineError> {
        Ok(self
            .store
            .audit_query(AuditQuery {
                after: cursor,
                agent: Some(ctx.agent.name.clone()),
                subject: ctx.subject.clone(),
                limit: limit.clamp(1, 500),
                ..Default::default()
            })
            .await?)
    }

    /// Records a call of `tool` refused before the pipeline's steps saw it, as the pipeline
    /// records a refusal of its own: the HTTP layer's scope check, whose answer is a 403
    /// asking the client for another scope. Returns the call's id.
    pub async fn audit_refused(
        &self,
        ctx: &SessionContext,
        tool: &str,
        refusal: Refusal,
    ) -> String {
        let call_id = uuid::Uuid::now_v7().to_string();
        audit::Draft::new(&call_id, ctx, tool)
            .finish(
                &self.store,
                CallOutcome::Refused(refusal),
                Duration::ZERO,
                false,
            )
            .await;
        call_id
    }

    /// `/metrics` in Prometheus' text format.
    pub async fn metrics_text(&self) -> Result<String, PipelineError> {
        let pending = self.store.approvals(true, 100_000).await?.len();
        let halted = self.store.halt_state().await?.halted;
        Ok(self.metrics.render(pending, halted))
    }
}

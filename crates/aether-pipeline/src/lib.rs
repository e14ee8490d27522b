//! Aether's admission pipeline: the one code path every tool call takes, whatever transport it
//! arrived on, from the caller's session to the audit row.
//!
//! The steps, in order (SPEC §2): session context (built by the transport from its
//! authenticated identity, never from arguments) → halt → registry (approved, definition digest
//! unchanged) → connection layer (the agent's groups) → capability layer (the agent's tool list)
//! → argument validation (JSON Schema) → tier gate → admission receipt, durable before the tool
//! runs → run (with the call's cancellation, a time limit, panics caught) → result bounded →
//! audit row, durable before the caller hears the outcome. Every outcome, refusals included,
//! gets its audit row.
//!
//! This crate knows no MCP, HTTP or SQL: transports call [`Pipeline::call`] and
//! [`Pipeline::offered`]; the store is behind `aether-store`.

pub mod accounts;
mod approval;
mod audit;
mod capabilities;
mod catalog;
pub mod envelope;
mod ledger;
pub mod metrics;
pub mod operator;
pub mod replay;
pub mod rules;
pub mod screening;
mod session;
pub mod tables;
pub mod tokens;

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use aether_policy::config::{JournalSection, Limits};
use aether_policy::decision::{Refusal, Step};
use aether_policy::registry::RegistryEntry;
use aether_policy::{AgentProfile, Digest, Hidden, Offer, RegistryState, RegistryView, Tier};
use aether_store::{
    AdmissionReceipt, ApprovalRow, AuditQuery, AuditRecord, BuiltinDefinition, HaltState,
    ReceiptOutcome, RegistryChange, RegistryRow, Revisions, Store,
};
use aether_tools::{
    CallContext, ClientLink, Content, Ledger, Roots, SealManifest, Tool, ToolError, ToolOutput,
};

use futures::FutureExt;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use capabilities::capabilities;
pub use catalog::{Catalog, CatalogError, Entry};
pub use ledger::StoreLedger;
pub use rules::Rules;
pub use session::{SessionContext, Transport};
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
        };
        pipeline.reload_registry().await?;
        pipeline.reload_seals().await?;
        pipeline.prune_journal().await?;
        Ok(pipeline)
    }

    /// Loads the seals of the sealed roots from the store, if any seal changed since the last
    /// load. A root sealed at another path, or never sealed, gets no manifest: its files are
    /// refused.
    pub async fn reload_seals(&self) -> Result<(), PipelineError> {
        let seals = self.store.seals().await?;
        let newest = seals.iter().map(|s| s.generation).max().unwrap_or(0);
        if self.seal_generation.load(Ordering::Relaxed) == newest {
            return Ok(());
        }
        for root in self.roots.iter() {
            if root.mode != aether_policy::paths::RootMode::Sealed {
                continue;
            }
            let manifest = match seals.iter().find(|s| s.root == root.name) {
                Some(seal) => {
                    let pins = self.store.seal_pins(&root.name).await?;
                    Some(SealManifest {
                        generation: seal.generation,
                        root_path: seal.root_path.clone(),
                        at_us: seal.at_us,
                        pins: pins
                            .into_iter()
                            .map(|p| (p.path, (p.hash, p.size as u64)))
                            .collect(),
                        folders: Default::default(),
                    })
                }
                None => None,
            };
            root.set_seal(manifest);
        }
        self.seal_generation.store(newest, Ordering::Relaxed);
        Ok(())
    }

    /// Removes, in the background, the temporary files of writes a crash interrupted (older
    /// than a minute: another process's write in progress keeps its own). Tools never list or
    /// read them meanwhile.
    pub fn remove_write_leftovers(&self) {
        let roots = self.roots.clone();
        tokio::task::spawn_blocking(move || roots.remove_write_leftovers(Duration::from_secs(60)));
    }

    /// Drops journal entries past the configured retention.
    pub async fn prune_journal(&self) -> Result<usize, PipelineError> {
        let days = self.journal.keep_days.min(100_000) as i64;
        let before = aether_store::now_us() - days * 86_400 * 1_000_000;
        Ok(self
            .store
            .prune_journal(before, self.journal.keep_entries)
            .await?)
    }

    /// Undoes every file change of `call_id`, as the operator `by`: a call of its own, with a
    /// receipt (written even while Aether is halted: an undo is how an operator repairs what a
    /// halted agent did), journal entries and an audit row.
    pub async fn operator_undo(&self, by: &str, call_id: &str) -> CallResult {
        let tool: Arc<dyn Tool> = Arc::new(aether_tools::workspace::UndoCall::new());
        let agent = AgentProfile::with_groups(&format!("operator:{by}"), &[]);
        let ctx = SessionContext {
            session_id: format!("operator:{by}"),
            transport: Transport::InProcess,
            agent: Arc::new(agent),
            groups: Arc::new(Default::default()),
        };
        let started = Instant::now();
        let id = uuid::Uuid::now_v7().to_string();
        let mut draft = audit::Draft::new(&id, &ctx, "undo_call");
        let digest = aether_policy::sha256(
            aether_policy::canonical_json(&serde_json::to_value(tool.def()).unwrap_or_default())
                .as_bytes(),
        );
        draft.tool_known(tool.def(), digest);
        let args = serde_json::json!({ "call_id": call_id });
        draft.arguments(&args, tool.def().tier);
        let receipt = AdmissionReceipt {
            call_id: id.clone(),
            at_us: aether_store::now_us(),
            session: ctx.session_id.clone(),
            transport: ctx.transport.as_str().into(),
            agent: ctx.agent.name.clone(),
            tool: tool.def().name.clone(),
            definition: digest.to_string(),
            arguments: draft.arguments_digest().to_string(),
            decision: "operator".into(),
        };
        let outcome = match self.store.admit_operator(receipt).await {
            Err(e) => CallOutcome::Failed(format!(
                "the admission receipt could not be written, so nothing was undone: {e}"
            )),
            Ok(()) => {
                draft.admitted();
                let cx = CallContext {
                    call_id: id.clone(),
                    session: ctx.session_id.clone(),
                    agent: ctx.agent.clone(),
                    roots: self.roots.clone(),
                    limits: self.limits.clone(),
                    cancel: CancellationToken::new(),
                    client: Arc::new(aether_tools::NoClient),
                    ledger: self.ledger.clone(),
                    destinations: Arc::new(aether_tools::AnyDestination),
                };
                match tool.call(cx, args).await {
                    Ok(output) => CallOutcome::Ran(bound(output, self.limits.result_chars)),
                    Err(e) => {
                        draft.tool_error(&e);
                        CallOutcome::Ran(ToolOutput {
                            content: vec![Content::Text(e.to_string())],
                            structured: None,
                            is_error: true,
                        })
                    }
                }
            }
        };
        let outcome = draft
            .finish(&self.store, outcome, started.elapsed(), false)
            .await;
        CallResult {
            call_id: id,
            outcome,
        }
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

    /// Records, durably, a read that is not a tool call (an upstream's resource or prompt,
    /// `what` being the MCP method): who read what, and how it ended (`ok`, `refused`,
    /// `failed`), `arguments` being the request as JSON (or why it is withheld). It has no
    /// receipt (it runs nothing), so its row names its step: `read`.
    pub async fn audit_read(
        &self,
        ctx: &SessionContext,
        what: &str,
        arguments: &str,
        outcome: &str,
        detail: &str,
        elapsed: Duration,
    ) -> Result<(), PipelineError> {
        let event = aether_store::AuditEvent {
            at_us: aether_store::now_us(),
            call_id: uuid::Uuid::now_v7().to_string(),
            session: ctx.session_id.clone(),
            transport: ctx.transport.as_str().into(),
            agent: ctx.agent.name.clone(),
            team: ctx.agent.team.clone(),
            project: ctx.agent.project.clone(),
            tool: what.chars().take(128).collect(),
            tier: "standard".into(),
            outcome: outcome.into(),
            step: Some("read".into()),
            rule: None,
            reason: (outcome != "ok").then(|| detail.chars().take(1024).collect()),
            definition: None,
            arguments_digest: aether_policy::sha256(arguments.as_bytes()).to_string(),
            arguments: arguments.chars().take(2048).collect(),
            result: if outcome == "ok" {
                detail.into()
            } else {
                String::new()
            },
            duration_us: elapsed.as_micros() as i64,
        };
        self.store.audit(event).await?;
        Ok(())
    }

    /// The catalog as it is now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces upstream `source`'s tools (those named `SOURCE__…`) with `tools`, as listed
    /// again after its `tools/list_changed`, a restart or an operator's refresh: a new or
    /// changed definition is recorded as seen (held back until an operator approves it), one
    /// that went is no longer served, and every session is told its catalog changed.
    pub async fn replace_external(
        &self,
        source: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Result<(), PipelineError> {
        let prefix = format!("{source}__");
        let seen: Vec<_> = tools
            .iter()
            .map(|t| BuiltinDefinition {
                name: t.def().name.clone(),
                digest: t.def().digest().to_string(),
                definition: serde_json::to_string(t.def()).unwrap_or_default(),
            })
            .collect();
        if !seen.is_empty() {
            self.store.record_seen(seen, "external").await?;
            self.warn_of_findings(source).await;
        }
        {
            let mut catalog = self.catalog.write().unwrap_or_else(|e| e.into_inner());
            let next = catalog.replacing(&prefix, tools);
            *catalog = Arc::new(next);
        }
        self.reload_registry().await?;
        self.catalog_changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Says in the log which of `source`'s tools waiting for approval the definition screen
    /// found something in (the operator sees the findings in `aether registry show`, the
    /// registry diff and the console).
    async fn warn_of_findings(&self, source: &str) {
        let Ok(rows) = self.store.registry().await else {
            return;
        };
        let screen = screening::screen_for(&rows);
        let prefix = format!("{source}__");
        for row in rows.iter().filter(|r| r.name.starts_with(&prefix)) {
            if row.approved_digest.is_some() && row.approved_digest == row.seen_digest {
                continue;
            }
            let found = screening::screen_row(&screen, row).findings;
            if !found.is_empty() {
                let rules: Vec<&str> = found.iter().map(|f| f.rule.as_str()).collect();
                tracing::warn!(
                    tool = %row.name,
                    findings = %rules.join(", "),
                    "the definition screen found something in a tool waiting for approval; review it with `aether registry show`"
                );
            }
        }
    }

    pub fn agents(&self) -> impl Iterator<Item = &AgentProfile> {
        self.agents.values().map(|a| a.as_ref())
    }

    /// Re-reads the registry from the store.
    pub async fn reload_registry(&self) -> Result<(), PipelineError> {
        let rows = self.store.registry().await?;
        let view = RegistryView::new(rows.into_iter().filter_map(|r| {
            let state = RegistryState::parse(&r.state)?;
            let approved = r.approved_digest.as_deref().and_then(Digest::parse);
            Some((r.name, RegistryEntry { state, approved }))
        }));
        *self.registry.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
        Ok(())
    }

    /// Stops every running call (each is audited as cancelled), refuses new ones, and waits up
    /// to `wait` for the calls in flight to write their audit rows. Transports call this when
    /// they stop, so that a client leaving, or Ctrl-C, does not leave an admitted call without
    /// its audit row.
    pub async fn shut_down(&self, wait: Duration) {
        self.shutdown.cancel();
        let deadline = Instant::now() + wait;
        while self.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
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

    /// Keeps this process in step with the store, which other processes (`aether halt`,
    /// `aether registry`, `aether approvals`, another replica) change: one small read of the
    /// store's revision counters every `every`, and on a change, the halt flag, the registry,
    /// the seals, the tokens, and a wake-up for calls waiting for a person. Also runs the
    /// journal's retention about hourly and closes approval windows left open by a process
    /// that stopped. The halt flag in the store stays authoritative: it is read again inside
    /// every receipt's transaction. Where the store announces changes (PostgreSQL), an
    /// announcement wakes the watch at once, and `every` only bounds a missed one.
    pub fn watch(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let me = Arc::downgrade(self);
        let mut changes = self.store.changes();
        tokio::spawn(async move {
            let mut last_prune = Instant::now();
            let mut last_sweep = Instant::now();
            loop {
                match changes.as_mut() {
                    Some(rx) => tokio::select! {
                        () = tokio::time::sleep(every) => {}
                        changed = rx.changed() => {
                            if changed.is_err() {
                                changes = None;
                            }
                        }
                    },
                    None => tokio::time::sleep(every).await,
                }
                let Some(p) = me.upgrade() else { return };
                if let Err(e) = p.sync().await {
                    tracing::warn!(error = %e, "cannot re-read the store's state");
                }
                if last_sweep.elapsed() >= Duration::from_secs(5) {
                    last_sweep = Instant::now();
                    if let Err(e) = p.store.expire_approvals(aether_store::now_us()).await {
                        tracing::warn!(error = %e, "cannot close expired approval windows");
                    }
                }
                if last_prune.elapsed() >= Duration::from_secs(3600) {
                    last_prune = Instant::now();
                    if let Err(e) = p.prune_journal().await {
                        tracing::warn!(error = %e, "journal retention failed");
                    }
                    let keys = aether_store::now_us() - envelope::IDEMPOTENCY_RETENTION_US;
                    if let Err(e) = p.store.prune_idempotency(keys).await {
                        tracing::warn!(error = %e, "idempotency key retention failed");
                    }
                    let before = aether_store::now_us() - tables::DATASET_DAYS * 86_400 * 1_000_000;
                    if let Err(e) = p.store.prune_datasets(before, tables::DATASETS_KEPT).await {
                        tracing::warn!(error = %e, "data set retention failed");
                    }
                }
            }
        })
    }

    /// One step of [`Pipeline::watch`]: reads the store's revisions and reloads what changed.
    pub async fn sync(&self) -> Result<(), PipelineError> {
        let now = self.store.revisions().await?;
        let before = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        self.halted.store(now.halted, Ordering::Relaxed);
        // Each counter is recorded only once its reload has succeeded, so a failed reload is
        // tried again on the next tick (a revoked token must not stay live).
        let record = |f: &dyn Fn(&mut Revisions)| {
            f(&mut self.seen.lock().unwrap_or_else(|e| e.into_inner()));
        };
        if now.registry != before.registry {
            self.reload_registry().await?;
            record(&|r| r.registry = now.registry);
            self.catalog_changed.send_modify(|n| *n += 1);
        }
        if now.seals != before.seals {
            self.reload_seals().await?;
            record(&|r| r.seals = now.seals);
        }
        if now.tokens != before.tokens {
            let tokens = TokenIndex::load(&self.store).await?;
            *self.tokens.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(tokens);
            record(&|r| r.tokens = now.tokens);
        }
        if now.sources != before.sources {
            record(&|r| r.sources = now.sources);
            self.sources_refresh.send_replace(now.sources);
        }
        if now.approvals != before.approvals {
            record(&|r| r.approvals = now.approvals);
            self.approvals_changed.send_replace(now.approvals);
        }
        Ok(())
    }

    /// Watches the rules file and reloads it (debounced) when it changes. A broken file keeps
    /// the last good rules; the error is logged and kept for [`Rules::last_error`]. Returns
    /// `None` when there is no rules file to watch; drop the watcher to stop watching.
    pub fn watch_rules(self: &Arc<Self>) -> Option<notify::RecommendedWatcher> {
        use notify::Watcher;
        let path = self.rules.path()?.to_path_buf();
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())?
            .to_path_buf();
        let name = path.file_name()?.to_os_string();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(
            move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event
                    && event
                        .paths
                        .iter()
                        .any(|p| p.file_name() == Some(name.as_os_str()))
                {
                    let _ = tx.send(());
                }
            },
        )
        .map_err(
            |e| tracing::warn!(error = %e, "cannot watch the rules file; changes need a restart"),
        )
        .ok()?;
        if let Err(e) = watcher.watch(&folder, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(error = %e, folder = %folder.display(), "cannot watch the rules file's folder; changes need a restart");
            return None;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                // Debounce: an editor's save is several events, and a file being written is
                // read only once it holds still for a whole debounce.
                loop {
                    let before = rules::stamp(&path);
                    tokio::time::sleep(rules::DEBOUNCE).await;
                    while rx.try_recv().is_ok() {}
                    if rules::stamp(&path) == before {
                        break;
                    }
                }
                let Some(p) = me.upgrade() else { return };
                match p.reload_rules() {
                    Ok(true) => tracing::info!(rules = p.rules.current().len(), "rules reloaded"),
                    Ok(false) => {}
                    Err(e) => tracing::error!(error = %e, "rules file rejected"),
                }
            }
        });
        Some(watcher)
    }

    /// Reads the rules file again now (see [`Rules::reload`]).
    pub fn reload_rules(&self) -> Result<bool, String> {
        let changed = self.rules.reload()?;
        if changed {
            self.catalog_changed.send_modify(|n| *n += 1);
        }
        Ok(changed)
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

    /// Halts or resumes, as the operator `by` (see [`operator::set_halt`]), and brings this
    /// process in step at once.
    pub async fn set_halt(
        &self,
        halted: bool,
        by: &str,
        why: &str,
    ) -> Result<HaltState, PipelineError> {
        let state = operator::set_halt(&self.store, halted, by, why).await?;
        self.sync().await?;
        Ok(state)
    }

    /// An operator's decision on a call waiting for a person (see [`operator::decide`]).
    pub async fn decide(
        &self,
        call_id: &str,
        approve: bool,
        by: &str,
        why: &str,
    ) -> Result<ApprovalRow, PipelineError> {
        let row = operator::decide(&self.store, call_id, approve, by, why).await?;
        self.sync().await?;
        Ok(row)
    }

    /// An operator's change to the registry (see [`operator::change_registry`]).
    pub async fn change_registry(
        &self,
        change: RegistryChange,
    ) -> Result<RegistryRow, PipelineError> {
        let row = operator::change_registry(&self.store, change, self.screen).await?;
        self.sync().await?;
        Ok(row)
    }

    /// Whether a finding of the definition screen blocks an approval here.
    pub fn screen(&self) -> aether_policy::definition_screen::ScreenMode {
        self.screen
    }

    pub fn has_agent(&self, name: &str) -> bool {
        self.agents.contains_key(name)
    }

    /// The session context for `agent` on `transport`.
    pub fn session(
        &self,
        agent: &str,
        transport: Transport,
        session_id: String,
    ) -> Result<SessionContext, PipelineError> {
        let profile =
            self.agents
                .get(agent)
                .cloned()
                .ok_or_else(|| PipelineError::UnknownAgent {
                    name: agent.to_string(),
                    known: self.agents.keys().cloned().collect::<Vec<_>>().join(", "),
                })?;
        let catalog = self.catalog();
        let groups = profile.groups(|name| catalog.get(name).map(|t| t.def().group.as_str()));
        Ok(SessionContext {
            session_id,
            transport,
            agent: profile,
            groups: Arc::new(groups),
        })
    }

    /// Whether `def` is offered to this session, and if not, why not. The same checks, in the
    /// same order, as a call's steps 3–5: offered equals runnable.
    pub fn offer(&self, ctx: &SessionContext, entry: &Entry) -> Offer {
        if let Err(hidden) = self.registry().admits(&entry.def().name, entry.digest) {
            return Offer::Hidden(hidden);
        }
        match ctx.agent.offer(entry.def(), &ctx.groups) {
            Offer::Offered => {}
            hidden => return hidden,
        }
        if let Err(why) = entry.tool.available_to(&ctx.agent) {
            return Offer::Hidden(Hidden::Unavailable { why });
        }
        let rules = self.rules.current();
        if let Some(v) = rules.denies_outright(
            &entry.def().name,
            &ctx.agent.name,
            ctx.agent.team.as_deref(),
        ) {
            return Offer::Hidden(Hidden::DeniedByRule {
                rule: v.rule.to_string(),
            });
        }
        Offer::Offered
    }

    /// The session's catalog: every tool it may call, in catalog order.
    pub fn offered(&self, ctx: &SessionContext) -> Vec<Arc<Entry>> {
        self.catalog()
            .iter()
            .filter(|e| self.offer(ctx, e) == Offer::Offered)
            .cloned()
            .collect()
    }

    /// The session's catalog as OpenAI function schemas (the `tools` of a chat completion):
    /// the same view `tools/list` gives it.
    pub fn openai_functions(&self, ctx: &SessionContext) -> Vec<Value> {
        self.offered(ctx)
            .into_iter()
            .map(|e| {
                let def = e.def();
                serde_json::json!({
                    "type": "function",
                    "function": {
                        "name": def.name,
                        "description": def.description,
                        "parameters": def.input_schema,
                    }
                })
            })
            .collect()
    }

    /// The caller's own audit rows, oldest first, after `cursor`.
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
                limit: limit.clamp(1, 500),
                ..Default::default()
            })
            .await?)
    }

    /// Runs one call through every step. Never panics; every outcome is audited.
    pub async fn call(
        &self,
        ctx: &SessionContext,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> CallResult {
        self.call_with(
            ctx,
            tool_name,
            arguments,
            envelope::Envelope::default(),
            client,
            cancel,
        )
        .await
    }

    /// [`Pipeline::call`] with the caller's command envelope (confirmation, idempotency key,
    /// issue and expiry times: [`envelope::Envelope`]).
    pub async fn call_with(
        &self,
        ctx: &SessionContext,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        envelope: envelope::Envelope,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
    ) -> CallResult {
        let started = Instant::now();
        let _in_flight = InFlight::enter(&self.in_flight);
        let call_id = uuid::Uuid::now_v7().to_string();
        let mut pending = PendingAudit {
            store: self.store.clone(),
            draft: Some(audit::Draft::new(&call_id, ctx, tool_name)),
            started,
        };
        let draft = pending
            .draft
            .as_mut()
            .expect("the draft is taken only below");
        let mut claimed = None;
        let outcome = self
            .admit_and_run(
                ctx,
                tool_name,
                arguments,
                &envelope,
                &mut claimed,
                client,
                cancel,
                draft,
            )
            .await;
        // A key this call claimed keeps its result (a repeat gets it), or is let go if the
        // call did not run (a retry may run it).
        if let Some(key) = claimed {
            let result = match &outcome {
                CallOutcome::Ran(out) => serde_json::to_string(out).ok(),
                _ => None,
            };
            if let Err(e) = self
                .store
                .settle_idempotency(&ctx.agent.name, tool_name, &key, &call_id, result)
                .await
            {
                tracing::warn!(call = %call_id, error = %e, "cannot settle an idempotency key");
            }
        }
        let draft = pending.draft.take().expect("the draft is taken only here");
        let alone = self.alone().await;
        let outcome = draft
            .finish(&self.store, outcome, started.elapsed(), alone)
            .await;
        // Only tools of the catalog get their own label: an unknown name is the caller's text.
        let label = if self.catalog().get(tool_name).is_some() {
            tool_name
        } else {
            "(unknown)"
        };
        self.metrics
            .record(label, &outcome, started.elapsed().as_secs_f64());
        CallResult { call_id, outcome }
    }

    /// `/metrics` in Prometheus' text format.
    pub async fn metrics_text(&self) -> Result<String, PipelineError> {
        let pending = self.store.approvals(true, 100_000).await?.len();
        let halted = self.store.halt_state().await?.halted;
        Ok(self.metrics.render(pending, halted))
    }

    #[allow(clippy::too_many_arguments)]
    async fn admit_and_run(
        &self,
        ctx: &SessionContext,
        tool_name: &str,
        arguments: Option<Map<String, Value>>,
        envelope: &envelope::Envelope,
        claimed: &mut Option<String>,
        client: Arc<dyn ClientLink>,
        cancel: CancellationToken,
        draft: &mut audit::Draft,
    ) -> CallOutcome {
        if self.shutdown.is_cancelled() {
            return refuse(
                Step::Halt,
                "shutdown",
                "Aether is shutting down; no calls are admitted",
            );
        }
        // 2. Halt (the fast check; the receipt transaction makes it exact).
        if self.halted.load(Ordering::Relaxed) {
            // The flag may be stale: a receipt that meets a halt sets it, and only `watch_halt`
            // clears it, so a pipeline nobody watches would refuse every call forever after a
            // resume. The store is authoritative: ask it before refusing (one read, and only
            // while the flag is up).
            match self.store.halt_state().await {
                Ok(state) if !state.halted => self.halted.store(false, Ordering::Relaxed),
                Ok(state) => {
                    // The same words as the receipt's refusal, whichever check meets the halt.
                    let why = state.why.unwrap_or_default();
                    return refuse(
                        Step::Halt,
                        "halt",
                        format!(
                            "Aether is halted by an operator ({why}); no calls are admitted until it is resumed"
                        ),
                    );
                }
                Err(_) => {
                    return refuse(
                        Step::Halt,
                        "halt",
                        "Aether is halted by an operator; no calls are admitted until it is resumed",
                    );
                }
            }
        }
        // Unknown tool: refused before anything else is looked at.
        let catalog = self.catalog();
        let Some(entry) = catalog.get(tool_name) else {
            return refuse(
                Step::UnknownTool,
                "catalog",
                format!(
                    "no tool named {:?}",
                    tool_name.chars().take(128).collect::<String>()
                ),
            );
        };
        let def = entry.def();
        draft.tool_known(def, entry.digest);
        // 3. Registry.
        if let Err(hidden) = self.registry().admits(&def.name, entry.digest) {
            return refuse(
                Step::Registry,
                format!("registry:{}", registry_rule(&hidden)),
                hidden.explain(&def.name, &ctx.agent.name),
            );
        }
        // 4, 5. Connection and capability layers.
        if let Offer::Hidden(hidden) = ctx.agent.offer(def, &ctx.groups) {
            let step = match hidden {
                Hidden::GroupNotAllowed { .. } => Step::Connection,
                _ => Step::Capability,
            };
            return refuse(
                step,
                step.as_str(),
                hidden.explain(&def.name, &ctx.agent.name),
            );
        }
        // The tool itself: some are of no use to some agents (and are not offered to them).
        if let Err(why) = entry.tool.available_to(&ctx.agent) {
            let hidden = Hidden::Unavailable { why };
            return refuse(
                Step::Capability,
                "unavailable",
                hidden.explain(&def.name, &ctx.agent.name),
            );
        }
        // 6. Arguments: operator defaults fill what the caller left out; then the schema.
        let mut args = arguments.unwrap_or_default();
        if let Some(defaults) = ctx.agent.arg_defaults.get(&def.name) {
            for (k, v) in defaults {
                args.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let args = Value::Object(args);
        let size = draft.arguments(&args, def.tier);
        // Limits before anything reads the arguments further (and before the receipt). A call
        // refused here is not scanned for credentials, so its arguments are not kept either
        // (the row keeps their digest).
        if size as u64 > self.limits.argument_bytes {
            draft.withhold_arguments("limits:arguments");
            return refuse(
                Step::Arguments,
                "limits:arguments",
                format!(
                    "the arguments are {size} bytes, more than the {} a call may carry (limits.argument_bytes)",
                    self.limits.argument_bytes
                ),
            );
        }
        if let Some((rule, why)) = arguments_out_of_bounds(&args) {
            draft.withhold_arguments(rule);
            return refuse(Step::Arguments, rule, why);
        }
        // A network tool's arguments are scanned for credentials once, here: if they carry
        // one they are never kept in the audit, whichever step refuses the call (step 8 does,
        // if none before it does).
        // Together with the pieces the agent sent in its recent calls (any session of its):
        // a credential sent a piece per call is found when its last piece would leave.
        let leak = if def.meta.reaches_network {
            // One agent's pieces at a time (its calls take turns; other agents' do not wait).
            let agent = self
                .fragments
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(ctx.agent.name.clone())
                .or_default()
                .clone();
            let mut fragments = agent.lock().unwrap_or_else(|e| e.into_inner());
            fragments.scan_json(aether_policy::dlp::Scanner::shared(), Instant::now(), &args)
        } else {
            None
        };
        if let Some(finding) = &leak {
            draft.withhold_arguments(finding.rule);
        }
        if let Err(problems) = catalog.validate(&def.name, &args) {
            return refuse(
                Step::Arguments,
                "schema",
                format!(
                    "the arguments do not match {}'s input schema: {problems}",
                    def.name
                ),
            );
        }
        // The command envelope: well-formed, not expired, confirmed where the tool needs it.
        if let Some(problem) = &envelope.problem {
            return refuse(
                Step::Envelope,
                "envelope:malformed",
                format!("the call's envelope (_meta) is malformed: {problem}"),
            );
        }
        let now = aether_store::now_us();
        if let Some(expires) = envelope.expires_at_us
            && expires <= now
        {
            return refuse(
                Step::Envelope,
                "envelope:expired",
                format!(
                    "the call's envelope expired {} s ago (aether/expiresAt); nothing ran",
                    (now - expires) / 1_000_000
                ),
            );
        }
        if let Some(issued) = envelope.issued_at_us
            && issued > now + envelope::ISSUED_SKEW_US
        {
            return refuse(
                Step::Envelope,
                "envelope:future",
                "the call's envelope says it was issued in the future (aether/issuedAt); check the caller's clock",
            );
        }
        if def.meta.needs_confirmation {
            // A Restricted tool waits for a person: that is its explicit confirmation. Any
            // other tool that needs one gets it from the caller's envelope. An explicit "no"
            // stops either.
            let confirmed = match envelope.confirm {
                Some(c) => c,
                None => def.tier == Tier::Restricted,
            };
            if !confirmed {
                return refuse(
                    Step::Envelope,
                    "envelope:unconfirmed",
                    format!(
                        "{} needs an explicit confirmation: send the call with _meta {{\"aether/confirm\": true}}",
                        def.name
                    ),
                );
            }
        }
        // An idempotency key: a repeat gets the first call's result instead of running again.
        if let Some(key) = &envelope.idempotency_key {
            let digest = draft.arguments_digest().to_string();
            let claim = self
                .store
                .claim_idempotency(
                    &ctx.agent.name,
                    &def.name,
                    key,
                    &digest,
                    draft.call_id(),
                    now - envelope::IDEMPOTENCY_RETENTION_US,
                )
                .await;
            match claim {
                Ok(aether_store::IdempotencyClaim::Claimed) => *claimed = Some(key.clone()),
                Ok(aether_store::IdempotencyClaim::Done { call_id, result }) => {
                    return match serde_json::from_str::<ToolOutput>(&result) {
                        Ok(mut out) => {
                            draft.stopped_at(Step::Envelope, "idempotency:replayed");
                            out.content.push(Content::Text(format!(
                                "[the result of call {call_id}, which had this idempotency key; nothing ran again]"
                            )));
                            CallOutcome::Ran(out)
                        }
                        Err(e) => CallOutcome::Failed(format!(
                            "the result kept for idempotency key {key:?} is unreadable: {e}"
                        )),
                    };
                }
                Ok(aether_store::IdempotencyClaim::Running { call_id }) => {
                    return refuse(
                        Step::Envelope,
                        "idempotency:running",
                        format!(
                            "call {call_id} with this idempotency key is still running; ask again when it has ended"
                        ),
                    );
                }
                Ok(aether_store::IdempotencyClaim::OtherArguments { call_id }) => {
                    return refuse(
                        Step::Envelope,
                        "idempotency:other-arguments",
                        format!(
                            "this idempotency key was used by call {call_id} with other arguments; use a new key"
                        ),
                    );
                }
                Err(e) => {
                    return CallOutcome::Failed(format!(
                        "the idempotency key could not be checked, so the call did not run: {e}"
                    ));
                }
            }
        }
        // 7. The operator's rules.
        let rules = self.rules.current();
        let mut ask = None;
        let mut allowed_by_rule = false;
        let mut decision = String::from("admitted");
        if let Some(v) = self.verdict(&rules, ctx, def, &args) {
            let rule = format!("rule:{}", v.rule);
            draft.matched_rule(&rule);
            match v.action {
                aether_policy::rules::Action::AlwaysDeny => {
                    return CallOutcome::Refused(denial(&v, def));
                }
                aether_policy::rules::Action::AskUser => {
                    ask = Some(approval::Ask {
                        asked_by: rule,
                        reason: v.reason.map(String::from),
                    });
                }
                aether_policy::rules::Action::AlwaysAllow => {
                    allowed_by_rule = true;
                    decision = format!("allowed by {rule}");
                }
            }
        }
        // 8. Egress and DLP, for every tool that can reach the network: no credential leaves
        // in its arguments (raw or encoded), and every URL it names is one this agent may
        // reach. (The tool's client checks each hop again, resolves once and connects only to
        // the vetted address.)
        if def.meta.reaches_network
            && let Err(refusal) = egress_check(ctx, &args, leak)
        {
            // What was refused may be a secret: the audit keeps the rule, not the arguments.
            draft.withhold_arguments(&refusal.rule);
            return CallOutcome::Refused(refusal);
        }
        // 9. Tier gate: a Restricted tool waits for a person, unless an operator's
        // `always_allow` rule approved it in advance. (Egress, step 8, arrives with the tools
        // that reach the network.)
        if def.tier == Tier::Restricted && !allowed_by_rule && ask.is_none() {
            ask = Some(approval::Ask {
                asked_by: "tier:restricted".into(),
                reason: None,
            });
        }
        // The tool's own judgement of these arguments (a destructive shell command).
        if !allowed_by_rule
            && ask.is_none()
            && let Some(why) = entry.tool.needs_person(&args)
        {
            ask = Some(approval::Ask {
                asked_by: format!("tool:{}", def.name),
                reason: Some(why),
            });
        }
        if let Some(ask) = ask {
            let digest = draft.arguments_digest().to_string();
            let call_id = draft.call_id().to_string();
            match self
                .wait_for_person(
                    ctx,
                    entry,
                    &call_id,
                    &args,
                    &digest,
                    ask,
                    client.as_ref(),
                    &cancel,
                )
                .await
            {
                Ok(note) => {
                    // The wait may have been long: what was true when the call asked may
                    // not be now. The registry and the rules are asked again, on fresh facts.
                    // The definition too: an upstream that changed its tool while the call
                    // waited has the new one in the catalog, held back until approved, and
                    // the call (approved for the old one) does not run on it.
                    let current = self.catalog().get(&def.name).map(|e| e.digest);
                    let admitted = match current {
                        Some(digest) if digest != entry.digest => Err(Hidden::DefinitionChanged),
                        Some(_) => self.registry().admits(&def.name, entry.digest),
                        None => Err(Hidden::Withdrawn),
                    };
                    if let Err(hidden) = admitted {
                        return refuse(
                            Step::Registry,
                            format!("registry:{}", registry_rule(&hidden)),
                            hidden.explain(&def.name, &ctx.agent.name),
                        );
                    }
                    if let Some(refusal) = self.denied_now(ctx, def, &args) {
                        return CallOutcome::Refused(refusal);
                    }
                    draft.approved(&note);
                    decision = note;
                }
                Err(outcome) => {
                    match &outcome {
                        CallOutcome::Cancelled { .. } => {
                            draft.stopped_at(Step::Tier, "approval:cancelled")
                        }
                        CallOutcome::Failed(_) => draft.stopped_at(Step::Tier, "approval:failed"),
                        _ => {}
                    }
                    return outcome;
                }
            }
        }
        // 11. The receipt, durable before the tool runs.
        let receipt = AdmissionReceipt {
            call_id: draft.call_id().to_string(),
            at_us: aether_store::now_us(),
            session: ctx.session_id.clone(),
            transport: ctx.transport.as_str().into(),
            agent: ctx.agent.name.clone(),
            tool: def.name.clone(),
            definition: entry.digest.to_string(),
            arguments: draft.arguments_digest().to_string(),
            decision,
        };
        let admitted = if self.alone().await {
            self.store.admit_alone(receipt).await
        } else {
            self.store.admit(receipt).await
        };
        match admitted {
            Ok(ReceiptOutcome::Durable) => {}
            Ok(ReceiptOutcome::Halted(state)) => {
                self.halted.store(true, Ordering::Relaxed);
                let why = state.why.unwrap_or_default();
                return refuse(
                    Step::Halt,
                    "halt",
                    format!(
                        "Aether is halted by an operator ({why}); no calls are admitted until it is resumed"
                    ),
                );
            }
            Err(e) => {
                return CallOutcome::Failed(format!(
                    "the admission receipt could not be written, so the call did not run: {e}"
                ));
            }
        }
        draft.admitted();
        // 12. Run, with the call's cancellation, a time limit, and panics caught.
        // The tool gets its own token: the time limit stops this call, never the caller's
        // other calls that may share the caller's token.
        let tool_cancel = cancel.child_token();
        let cx = CallContext {
            call_id: draft.call_id().to_string(),
            session: ctx.session_id.clone(),
            agent: ctx.agent.clone(),
            roots: self.roots.clone(),
            limits: self.limits.clone(),
            cancel: tool_cancel.clone(),
            client,
            ledger: self.ledger.clone(),
            destinations: Arc::new(RuledDestinations::new(
                self.rules.current(),
                &def.name,
                &ctx.agent,
                &args,
            )),
        };
        let limit = Duration::from_secs(self.limits.tool_seconds);
        // An upstream's table is kept as a data set; its arguments go with it (for reports).
        let table_args = entry.external.then(|| args.clone());
        let run = AssertUnwindSafe(entry.tool.call(cx, args)).catch_unwind();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => CallOutcome::Cancelled { timed_out: false },
            _ = self.shutdown.cancelled() => {
                tool_cancel.cancel();
                CallOutcome::Cancelled { timed_out: false }
            }
            _ = tokio::time::sleep(limit) => {
                tool_cancel.cancel();
                CallOutcome::Cancelled { timed_out: true }
            }
            result = run => match result {
                Ok(Ok(output)) => {
                    let output = match &table_args {
                        Some(args) => self.keep_table(draft.call_id(), &ctx.agent.name, &def.name, args, output).await,
                        None => output,
                    };
                    CallOutcome::Ran(bound(output, self.limits.result_chars))
                }
                Ok(Err(ToolError::Cancelled)) => CallOutcome::Cancelled { timed_out: false },
                Ok(Err(e)) => {
                    draft.tool_error(&e);
                    // A tool's error text is bounded like its results (it may quote input).
                    CallOutcome::Ran(bound(
                        ToolOutput { content: vec![Content::Text(e.to_string())], structured: None, is_error: true },
                        self.limits.result_chars,
                    ))
                }
                Err(panic) => {
                    draft.panicked();
                    CallOutcome::Failed(format!(
                        "the tool failed inside Aether ({}); the failure is recorded in the audit",
                        panic_message(&panic)
                    ))
                }
            },
        }
    }
}

impl Pipeline {
    /// Keeps the table in an upstream tool's output as a data set and returns what the model
    /// sees (at most 50 rows and a reference). If the data set cannot be kept, the model sees
    /// the rows it would have seen and is told the rest was not kept.
    async fn keep_table(
        &self,
        call_id: &str,
        agent: &str,
        tool: &str,
        args: &Value,
        output: ToolOutput,
    ) -> ToolOutput {
        let Some((dataset, shown)) = tables::take(&output, call_id, agent, tool, args) else {
            return output;
        };
        let Err(e) = self.store.put_dataset(dataset).await else {
            return shown.unwrap_or(output);
        };
        tracing::warn!(call = call_id, error = %e, "cannot keep a data set");
        let mut shown = match shown {
            Some(mut cut) => {
                cut.content.pop(); // the note naming a data set that was not kept
                cut
            }
            None => output,
        };
        shown.content.push(Content::Text(format!(
            "[Aether could not keep this table as a data set ({e}): only the rows shown here are available]"
        )));
        shown
    }

    /// The rules' verdict on this call (none without rules, or when no rule matches).
    fn verdict<'r>(
        &self,
        rules: &'r aether_policy::rules::RuleSet,
        ctx: &SessionContext,
        def: &aether_policy::ToolDef,
        args: &Value,
    ) -> Option<aether_policy::rules::Verdict<'r>> {
        if rules.is_empty() {
            return None;
        }
        let known = self.facts(rules, ctx, def, args);
        rules.evaluate(&aether_policy::rules::CallFacts {
            tool: &def.name,
            agent: &ctx.agent.name,
            team: ctx.agent.team.as_deref(),
            arguments: args,
            paths: &known.paths,
            dirs: &known.dirs,
            hosts: &known.hosts,
        })
    }

    /// Whether the rules in force now deny this call (asked again after a wait).
    fn denied_now(
        &self,
        ctx: &SessionContext,
        def: &aether_policy::ToolDef,
        args: &Value,
    ) -> Option<Refusal> {
        let rules = self.rules.current();
        let v = self.verdict(&rules, ctx, def, args)?;
        (v.action == aether_policy::rules::Action::AlwaysDeny).then(|| denial(&v, def))
    }

    /// What the rules judge a call on: every path it names, relative to its root, as written
    /// (cleaned) and, where it differs, as it really is after symlinks (so a link cannot walk
    /// a call around a path rule); which of them are folders, plus the root itself when the
    /// tool takes a `path` and the call left it out (it then walks the whole root); each
    /// URL's host.
    fn facts(
        &self,
        rules: &aether_policy::rules::RuleSet,
        ctx: &SessionContext,
        def: &aether_policy::ToolDef,
        args: &Value,
    ) -> Facts {
        let mut facts = Facts {
            hosts: aether_policy::rules::url_hosts(args),
            ..Facts::default()
        };
        if !rules.looks_at_paths(&def.name, &ctx.agent.name, ctx.agent.team.as_deref()) {
            return facts;
        }
        let (root, named) = aether_policy::rules::path_arguments(args);
        for path in &named {
            let mut rel = String::new();
            match self.roots.locate(root, path, &mut rel) {
                Ok(loc) => {
                    let rel = loc.rel.to_string();
                    let (real, is_dir) = real_relative(loc.root, &rel);
                    let mut forms = vec![rel.clone()];
                    if let Some(real) = real
                        && real != rel
                    {
                        forms.push(real);
                    }
                    // Roots may nest: the same file is also judged relative to every other
                    // root that holds it, so a rule written for one cannot be walked around
                    // through the other.
                    let absolute: Vec<std::path::PathBuf> =
                        forms.iter().map(|f| loc.root.path.join(f)).collect();
                    for other in self.roots.iter().filter(|r| r.name != loc.root.name) {
                        for abs in &absolute {
                            if let Some(inner) = other.relative_of(abs) {
                                let inner = inner.trim_start_matches('/').to_string();
                                if !forms.contains(&inner) {
                                    forms.push(inner);
                                }
                            }
                        }
                    }
                    if is_dir {
                        facts.dirs.extend(forms.iter().cloned());
                    }
                    facts.paths.extend(forms);
                }
                // The tool refuses it anyway; the rules still see what was asked for.
                Err(_) => facts.paths.push(path.trim_start_matches("./").to_string()),
            }
        }
        let takes_path = def.input_schema["properties"].get("path").is_some();
        if named.is_empty() && takes_path {
            facts.dirs.push(String::new());
        }
        // A glob's literal part can move the folder walked (`../hr/*` from `docs` walks `hr`;
        // an absolute pattern names its own): that folder is judged as one the call names.
        let base = args.get("path").and_then(Value::as_str).unwrap_or("");
        for key in ["pattern", "glob"] {
            let Some(pattern) = args.get(key).and_then(Value::as_str) else {
                continue;
            };
            let mut rel = String::new();
            let Ok(loc) = self.roots.locate(root, base, &mut rel) else {
                continue;
            };
            if let Ok(place) = aether_policy::paths::confine_glob(
                loc.rel,
                pattern,
                &loc.root.path.to_string_lossy(),
            ) && place.folder != loc.rel
            {
                let (real, _) = real_relative(loc.root, &place.folder);
                for folder in [Some(place.folder), real].into_iter().flatten() {
                    facts.paths.push(folder.clone());
                    facts.dirs.push(folder);
                }
            }
        }
        facts
    }
}

/// See [`Pipeline::facts`].
#[derive(Default)]
struct Facts {
    paths: Vec<String>,
    dirs: Vec<String>,
    hosts: Vec<String>,
}

/// `rel` under `root` as it really is: `None` when no component of it is a symbolic link (the
/// common case, found with one `lstat` per component below the root, whose own path is
/// already real), else its real path relative to the root (`None` if that leaves the root,
/// where the tool refuses it anyway). Also says whether it is a folder.
fn real_relative(root: &aether_tools::Root, rel: &str) -> (Option<String>, bool) {
    let mut full = root.path.clone();
    let mut is_dir = rel.is_empty();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        full.push(part);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => return resolved(root, rel),
            Ok(m) => is_dir = m.is_dir(),
            // Not there (yet): nothing below it can be a link.
            Err(_) => return (None, false),
        }
    }
    (None, is_dir)
}

/// The slow path of [`real_relative`]: the real path of the deepest existing ancestor, plus
/// the rest.
fn resolved(root: &aether_tools::Root, rel: &str) -> (Option<String>, bool) {
    let mut existing = root.path.join(rel);
    let mut rest = Vec::new();
    let real = loop {
        match std::fs::canonicalize(&existing) {
            Ok(real) => break real,
            Err(_) => {
                let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
                    return (None, false);
                };
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
        }
    };
    let is_dir = rest.is_empty() && real.is_dir();
    let mut full = real;
    for part in rest.into_iter().rev() {
        full.push(part);
    }
    (root.relative_of(&full), is_dir)
}

/// The audit row of a call whose future the transport dropped midway (a client that went
/// away without a cancellation, a server shutting down): written as cancelled, from a task of
/// its own, so that no admitted call is left with a receipt and no audit row.
struct PendingAudit {
    store: Store,
    draft: Option<audit::Draft>,
    started: Instant,
}

impl Drop for PendingAudit {
    fn drop(&mut self) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                call = draft.call_id(),
                "call dropped outside a runtime; its audit row is lost"
            );
            return;
        };
        let (store, elapsed) = (self.store.clone(), self.started.elapsed());
        runtime.spawn(async move {
            draft
                .finish(
                    &store,
                    CallOutcome::Cancelled { timed_out: false },
                    elapsed,
                    false,
                )
                .await;
        });
    }
}

/// Counts a call in [`Pipeline::in_flight`] while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> InFlight<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The operator's rules applied to a destination a tool reaches mid-call: a hop to a host a
/// rule denies, or would ask a person about, stops the call (a person cannot be asked in the
/// middle of a request).
struct RuledDestinations {
    rules: Arc<aether_policy::rules::RuleSet>,
    tool: String,
    agent: Arc<AgentProfile>,
    /// The call's arguments (kept only when there are rules to judge them): a hop is judged
    /// as the same call sent to the hop's URL, so a rule on its method, body or any other
    /// argument holds on every hop as on the first.
    arguments: Value,
}

impl RuledDestinations {
    fn new(
        rules: Arc<aether_policy::rules::RuleSet>,
        tool: &str,
        agent: &Arc<AgentProfile>,
        arguments: &Value,
    ) -> RuledDestinations {
        let arguments = match rules.is_empty() {
            true => Value::Null,
            false => arguments.clone(),
        };
        RuledDestinations {
            rules,
            tool: tool.to_string(),
            agent: agent.clone(),
            arguments,
        }
    }
}

impl aether_tools::DestinationCheck for RuledDestinations {
    fn check(&self, url: &str, host: &str) -> Result<(), ToolError> {
        if self.rules.is_empty() {
            return Ok(());
        }
        // The call as it would be to this hop: its own URL in place of the ones asked for.
        let mut arguments = match &self.arguments {
            Value::Object(map) => map.clone(),
            _ => serde_json::Map::new(),
        };
        for key in aether_policy::rules::URL_KEYS {
            arguments.remove(key);
        }
        arguments.insert("url".into(), Value::String(url.to_string()));
        let arguments = Value::Object(arguments);
        // Spelled as the first hop's hosts are (IPv6 in brackets), so a host rule means the
        // same on every hop.
        let mut hosts = aether_policy::rules::url_hosts(&arguments);
        if hosts.is_empty() {
            hosts.push(host.to_string());
        }
        let facts = aether_policy::rules::CallFacts {
            tool: &self.tool,
            agent: &self.agent.name,
            team: self.agent.team.as_deref(),
            arguments: &arguments,
            paths: &[],
            dirs: &[],
            hosts: &hosts,
        };
        match self.rules.evaluate(&facts) {
            Some(v) if v.action != aether_policy::rules::Action::AlwaysAllow => {
                Err(ToolError::denied(
                    "rules",
                    format!(
                        "a redirect to {host} meets the operator's rule {:?} ({}); the request stopped there",
                        v.rule,
                        v.action.as_str()
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// Step 8 for one call: the arguments' credential scan (`leak`, from when they were
/// recorded), then each URL argument against the agent's egress policy. A refusal names the
/// rule, never the secret.
fn egress_check(
    ctx: &SessionContext,
    args: &Value,
    leak: Option<aether_policy::dlp::Finding>,
) -> Result<(), Refusal> {
    if let Some(finding) = leak {
        return Err(Refusal::new(
            Step::Egress,
            finding.rule,
            format!("the call carries {finding}; nothing was sent"),
        ));
    }
    let policy = aether_policy::egress::EgressPolicy::for_agent(&ctx.agent)
        .map_err(|why| Refusal::new(Step::Egress, "egress:configuration", why))?;
    for url in aether_policy::rules::url_arguments(args) {
        let destination = aether_policy::egress::parse_destination(url).map_err(Refusal::from)?;
        policy
            .check_destination(&destination)
            .map_err(Refusal::from)?;
    }
    Ok(())
}

/// The refusal of an `always_deny` verdict: its rule, and its reason or a plain one.
fn denial(v: &aether_policy::rules::Verdict<'_>, def: &aether_policy::ToolDef) -> Refusal {
    Refusal::new(
        Step::Rules,
        format!("rule:{}", v.rule),
        v.reason
            .map(String::from)
            .unwrap_or_else(|| format!("the operator's rules deny {} here", def.name)),
    )
}

/// The longest URL an argument may hold.
pub const MAX_URL_BYTES: usize = 8 << 10;
/// The most request headers a call may send, and the most bytes of one (name and value).
pub const MAX_HEADERS: usize = 64;
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// What in a call's arguments breaks the limits every tool shares, before anything reads them:
/// a URL argument longer than [`MAX_URL_BYTES`]; request headers (a `headers` object, which
/// network tools send as they are) too many, too long, or not what HTTP allows — a name
/// that is not a token, a value with a control character (CR, LF and NUL inject headers).
/// Returns the rule and why, bounded.
fn arguments_out_of_bounds(args: &Value) -> Option<(&'static str, String)> {
    for url in aether_policy::rules::url_arguments(args) {
        if url.len() > MAX_URL_BYTES {
            return Some((
                "limits:url",
                format!(
                    "a URL argument is {} bytes; at most {MAX_URL_BYTES} are sent",
                    url.len()
                ),
            ));
        }
    }
    // Anything but an object is not headers as network tools take them: the schema judges it.
    let headers = args.get("headers")?.as_object()?;
    if headers.len() > MAX_HEADERS {
        return Some((
            "limits:headers",
            format!(
                "{} request headers; at most {MAX_HEADERS} are sent",
                headers.len()
            ),
        ));
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    for (name, value) in headers {
        let shown: String = name.escape_debug().take(64).collect();
        if name.is_empty() || !name.bytes().all(token) {
            return Some((
                "headers:name",
                format!(
                    "header name \"{shown}\" is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
                ),
            ));
        }
        let Some(value) = value.as_str() else {
            continue;
        };
        if name.len() + value.len() > MAX_HEADER_BYTES {
            return Some((
                "limits:headers",
                format!(
                    "header \"{shown}\" is {} bytes; at most {MAX_HEADER_BYTES} are sent",
                    name.len() + value.len()
                ),
            ));
        }
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Some((
                "headers:value",
                format!(
                    "header \"{shown}\" holds a control character (CR, LF, NUL, …), which HTTP does not allow in a value"
                ),
            ));
        }
    }
    None
}

fn refuse(step: Step, rule: impl Into<String>, reason: impl Into<String>) -> CallOutcome {
    CallOutcome::Refused(Refusal::new(step, rule, reason))
}

fn registry_rule(hidden: &Hidden) -> &'static str {
    match hidden {
        Hidden::Unapproved => "unapproved",
        Hidden::Withdrawn => "withdrawn",
        Hidden::DefinitionChanged => "definition-changed",
        _ => "hidden",
    }
}

/// Characters held back for the marker of a cut (the marker itself is about 100).
const MARKER_ROOM: usize = 200;

/// Cuts the text blocks of `output` so that together they fit in `max_chars`.
fn bound(mut output: ToolOutput, max_chars: usize) -> ToolOutput {
    let text_chars = |c: &Content| {
        if let Content::Text(t) = c {
            t.chars().count()
        } else {
            0
        }
    };
    if output.content.iter().map(text_chars).sum::<usize>() <= max_chars {
        return output;
    }
    // Too long together. Blocks are kept whole while a marker still fits after them; the first
    // one that does not is cut, marker included, and the text blocks after it are emptied.
    // (Bounding each block by what was left but never below 200 characters let every block
    // after the budget ran out add 200 more.)
    let mut left = max_chars.max(MARKER_ROOM);
    let mut cut = false;
    for block in &mut output.content {
        let Content::Text(text) = block else { continue };
        let n = text.chars().count();
        if cut {
            text.clear();
        } else if n + MARKER_ROOM <= left {
            left -= n;
        } else {
            // This block may fit, but then what follows does not: cut it so the marker shows.
            let keep = if n > left { left } else { left - MARKER_ROOM };
            *text = aether_policy::truncate::bound_text(text, keep).into_owned();
            cut = true;
        }
    }
    output
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

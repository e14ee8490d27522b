//! Keeping in step: the store's revision counters read every tick (and on an announcement),
//! and what another process changed — the halt flag, the registry, the seals, the tokens, the
//! approvals — reloaded; the rules file watched and reloaded once it holds still; journal,
//! idempotency and data-set retention.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aether_policy::registry::RegistryEntry;
use aether_policy::{Digest, RegistryView};
use aether_store::Revisions;
use aether_tools_core::SealManifest;

use crate::{Pipeline, PipelineError, TokenIndex, envelope, rules, tables};

impl Pipeline {
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

    /// Drops journal entries past the configured retention.
    pub async fn prune_journal(&self) -> Result<usize, PipelineError> {
        let days = self.journal.keep_days.min(100_000) as i64;
        let before = aether_store::now_us() - days * 86_400 * 1_000_000;
        Ok(self
            .store
            .prune_journal(before, self.journal.keep_entries)
            .await?)
    }

    /// Re-reads the registry from the store.
    pub async fn reload_registry(&self) -> Result<(), PipelineError> {
        let rows = self.store.registry().await?;
        let view = RegistryView::new(rows.into_iter().map(|r| {
            let approved = r.approved_digest.as_deref().and_then(Digest::parse);
            let state = r.state;
            (r.name, RegistryEntry { state, approved })
        }));
        *self.registry.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
        Ok(())
    }

    /// Keeps this process in step with the store, which other processes (`aether halt`,
    /// `aether registry`, `aether approvals`, another replica) change: one small read of the
    /// store's revision counters every `every`, and on a change, the halt flag, the registry,
    /// the seals, the tokens, and a wake-up for calls waiting for a person. Also runs the
    /// retention of the journal, idempotency keys, data sets and call counts about hourly, counts
    /// the calls the overview shows about every second, and closes approval windows left open
    /// by a process that stopped. The halt flag in the store
    /// stays authoritative: it is read again inside every receipt's transaction. Where the store announces changes (PostgreSQL), an
    /// announcement wakes the watch at once, and `every` only bounds a missed one.
    pub fn watch(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let me = Arc::downgrade(self);
        let mut changes = self.store.changes();
        tokio::spawn(async move {
            let mut last_prune = Instant::now();
            let mut last_sweep = Instant::now();
            let mut last_count = Instant::now();
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
                // The overview's call counts, about every second (off the calls' commits).
                if last_count.elapsed() >= Duration::from_secs(1) {
                    last_count = Instant::now();
                    if let Err(e) = p.store.count_calls().await {
                        tracing::warn!(error = %e, "cannot count the calls for the overview");
                    }
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
                    if let Err(e) = p.store.prune_call_stats(aether_store::now_us()).await {
                        tracing::warn!(error = %e, "call count retention failed");
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
}

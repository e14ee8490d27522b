//! What runs share: the pipeline, the model connections (opened on demand, keys from the
//! vault), and the runs alive in this process (so a run started by a tool call knows its
//! parent's connection, its depth and the budget it shares).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use aether_pipeline::Pipeline;
use aether_policy::models::ModelSpec;

use crate::model::ModelClient;

/// How deep runs may start runs (`delegate`, `spawn_subagents`): a run started by a run
/// started by a run, and no further.
pub const MAX_DEPTH: u32 = 3;

/// The model connections of the configuration, and who may use which.
#[derive(Clone, Debug, Default)]
pub struct Models {
    /// Each connection, resolved (or what is wrong with it).
    pub specs: BTreeMap<String, Result<ModelSpec, String>>,
    /// Per agent, the connections it may use (`agents.NAME.models`); absent: any.
    pub allowed: BTreeMap<String, Vec<String>>,
    /// The vault's key file, for connections that name a key.
    pub key_file: PathBuf,
    /// Per agent, the agents it may hand work to (`agents.NAME.workers`); absent: none.
    pub workers: BTreeMap<String, Vec<String>>,
}

impl Models {
    /// Whether any connection is configured.
    pub fn any(&self) -> bool {
        !self.specs.is_empty()
    }

    /// Whether `agent` may start a run of `worker` (`delegate`, `spawn_subagents`).
    pub fn may_delegate(&self, agent: &str, worker: &str) -> bool {
        self.workers
            .get(agent)
            .is_some_and(|list| list.iter().any(|w| w == worker))
    }

    /// Whether `agent` may run on connection `name`.
    pub fn allows(&self, agent: &str, name: &str) -> bool {
        self.allowed
            .get(agent)
            .is_none_or(|list| list.iter().any(|m| m == name))
    }

    /// The connection a run of `agent` uses when none is named: `preferred` (its parent's)
    /// if the agent may use it, else the agent's first allowed, else the only one there is.
    pub fn choose(&self, agent: &str, preferred: Option<&str>) -> Result<String, String> {
        if let Some(p) = preferred
            && self.allows(agent, p)
        {
            return Ok(p.to_string());
        }
        if let Some(first) = self.allowed.get(agent).and_then(|l| l.first()) {
            return Ok(first.clone());
        }
        match self.specs.keys().collect::<Vec<_>>().as_slice() {
            [only] => Ok((*only).clone()),
            [] => Err("no model connection is configured ([models.NAME] in aether.toml)".into()),
            _ => Err(format!(
                "agent {agent:?} has no model connection of its own (set agents.{agent}.models)"
            )),
        }
    }

    /// The client for connection `name`, for a run of `agent`; its key opened from the vault.
    pub async fn client(
        &self,
        store: &aether_store::Store,
        name: &str,
        agent: &str,
    ) -> Result<ModelClient, String> {
        let spec = match self.specs.get(name) {
            None => {
                let known: Vec<&str> = self.specs.keys().map(String::as_str).collect();
                return Err(if known.is_empty() {
                    format!(
                        "no model connection {name:?}: none is configured ([models.{name}] in aether.toml)"
                    )
                } else {
                    format!(
                        "no model connection {name:?}; configured: {}",
                        known.join(", ")
                    )
                });
            }
            Some(Err(problem)) => return Err(problem.clone()),
            Some(Ok(spec)) => spec.clone(),
        };
        if !agent.is_empty() && !self.allows(agent, name) {
            return Err(format!(
                "agent {agent:?} may not run on model connection {name:?} (agents.{agent}.models allows: {})",
                self.allowed
                    .get(agent)
                    .map(|l| l.join(", "))
                    .unwrap_or_default()
            ));
        }
        let key = match &spec.key {
            None => None,
            Some(credential) => Some(
                store
                    .open_credential(credential, &self.key_file)
                    .await?
                    .ok_or_else(|| {
                        format!(
                            "model connection {name:?} names the key {credential:?}, which is not in the vault (set it: aether credentials set {credential} < key.txt)"
                        )
                    })?,
            ),
        };
        ModelClient::new(spec, key).map_err(|e| e.to_string())
    }
}

/// Tokens a run and the runs it started may spend together.
#[derive(Debug, Default)]
pub struct Budget {
    pub cap: Option<u64>,
    spent: AtomicU64,
}

impl Budget {
    pub fn new(cap: Option<u64>) -> Arc<Budget> {
        Arc::new(Budget {
            cap,
            spent: AtomicU64::new(0),
        })
    }

    pub fn spend(&self, tokens: u64) {
        self.spent.fetch_add(tokens, Ordering::Relaxed);
    }

    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Whether the cap is reached.
    pub fn exhausted(&self) -> bool {
        self.cap.is_some_and(|cap| self.spent() >= cap)
    }
}

/// A run alive in this process.
#[derive(Clone, Debug)]
pub struct LiveRun {
    pub model: String,
    pub depth: u32,
    pub budget: Arc<Budget>,
}

/// Set once the pipeline exists (its tools are made before it).
#[derive(Default)]
pub struct Host {
    pipeline: OnceLock<Weak<Pipeline>>,
    pub models: Models,
    live: Mutex<HashMap<String, LiveRun>>,
    /// The runs tools started, each a task of its own.
    tasks: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("models", &self.models)
            .finish()
    }
}

impl Host {
    pub fn new(models: Models) -> Arc<Host> {
        Arc::new(Host {
            models,
            ..Host::default()
        })
    }

    /// Binds the pipeline whose catalog holds this host's tools.
    pub fn bind(&self, pipeline: &Arc<Pipeline>) {
        let _ = self.pipeline.set(Arc::downgrade(pipeline));
    }

    /// Starts a run a tool asked for as a task of its own, tracked for [`Host::settle`].
    pub(crate) fn spawn<F>(&self, run: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(run)
    }

    /// Waits, up to `limit`, for the runs tools started to end (a stopped parent's children
    /// see the stop within a poll and record how they ended). True if they all did.
    pub async fn settle(&self, limit: std::time::Duration) -> bool {
        self.tasks.close();
        let settled = tokio::time::timeout(limit, self.tasks.wait()).await.is_ok();
        self.tasks.reopen();
        settled
    }

    pub fn pipeline(&self) -> Option<Arc<Pipeline>> {
        self.pipeline.get().and_then(Weak::upgrade)
    }

    pub(crate) fn enter(&self, id: &str, run: LiveRun) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), run);
    }

    pub(crate) fn leave(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The live run a session belongs to (`run:ID`), if any.
    pub fn live(&self, session: &str) -> Option<(String, LiveRun)> {
        let id = session.strip_prefix("run:")?;
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get(id).map(|r| (id.to_string(), r.clone()))
    }
}

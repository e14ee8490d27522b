//! What a crash leaves, put right at the next start, and the books kept while serving.
//!
//! A call admitted (its receipt durable) whose process died before its audit row was
//! written is recorded as `interrupted` before Aether serves again: a chained row naming the
//! crash and what the call had journalled, each change found applied, not applied, or
//! changed since. So `aether audit verify` is green after any crash, and red only for
//! tampering.
//!
//! While serving, [`Books`] renews this process's heartbeat as a writer (how other processes
//! tell a running call from an interrupted one) and appends a signed checkpoint of the
//! audit's head to the witness whenever it moved; at shutdown, a last checkpoint and the
//! writer marked stopped.

use std::path::PathBuf;
use std::sync::Arc;

use aether_policy::journal::{JournalEntry, JournalOp, content_hash};
use aether_store::{AuditEvent, AuditKey, Store, Unfinished, Witness};
use tokio_util::sync::CancellationToken;

use crate::{Pipeline, PipelineError};

/// Bytes of a file hashed to tell whether an interrupted write landed; a larger file is
/// reported as not checked.
const CHECK_BYTES: u64 = 64 << 20;

/// Writes again the journalled contents a crash lost (`aether_tools::workspace::redo`, handed
/// in by whoever builds the pipeline): the roots, the journal entries to look at (oldest
/// first) and the images by hash; returns what it found per file (`root:path`, what).
pub type Redo = Arc<
    dyn Fn(
            &aether_tools_core::Roots,
            &[JournalEntry],
            &dyn Fn(&str) -> Option<Vec<u8>>,
        ) -> Vec<(String, String)>
        + Send
        + Sync,
>;

/// What a start put right.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Calls recorded as interrupted.
    pub interrupted: usize,
    /// Files whose lost content was written again (`root:path`).
    pub rewritten: Vec<String>,
    /// Files that could not be put right, and why.
    pub problems: Vec<String>,
    /// The crashed processes (writers) put right: [`Books::witness_writers`] checkpoints
    /// their chains.
    pub writers: Vec<String>,
}

impl Pipeline {
    /// Puts right what crashed processes left, before serving: every journalled write of
    /// theirs whose file lost it is written again (with `redo`), then every call they
    /// admitted and never audited is recorded as `interrupted`.
    pub async fn recover_interrupted(
        &self,
        redo: Option<Redo>,
    ) -> Result<Recovered, PipelineError> {
        let (unfinished, writers) = self.store.unfinished().await?;
        let mut recovered = Recovered::default();
        if unfinished.is_empty() && writers.is_empty() {
            return Ok(recovered);
        }
        if let Some(redo) = redo {
            let entries = self.store.journal_to_redo(writers.clone()).await?;
            let mut images = std::collections::HashMap::new();
            for e in entries.iter().rev() {
                if let Some(after) = &e.after_hash
                    && !images.contains_key(after)
                    && let Some(bytes) = self.store.journal_blob(after).await?
                {
                    images.insert(after.clone(), bytes);
                }
            }
            let roots = self.roots.clone();
            // A redo that fails outright stops the start: the crashed writers stay unreaped, so
            // the next start looks at their writes again.
            let found = tokio::task::spawn_blocking(move || {
                redo(&roots, &entries, &|hash: &str| images.get(hash).cloned())
            })
            .await
            .map_err(|e| {
                PipelineError::Store(aether_store::StoreError::Invalid(format!(
                    "writing again what a crash lost failed: {e}"
                )))
            })?;
            for (file, what) in found {
                match what.as_str() {
                    "held" => {}
                    "written" => recovered.rewritten.push(file),
                    _ => recovered.problems.push(format!("{file}: {what}")),
                }
            }
            if !recovered.rewritten.is_empty() {
                tracing::warn!(files = ?recovered.rewritten, "journalled writes a crash lost were written again");
            }
            for p in &recovered.problems {
                tracing::warn!(problem = %p, "a journalled write could not be checked or redone");
            }
        }
        let roots = self.roots.clone();
        let events = tokio::task::spawn_blocking(move || {
            unfinished
                .iter()
                .map(|u| interrupted_row(u, &roots))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        recovered.writers = writers.clone();
        let written = self.store.record_interrupted(events, writers).await?;
        if written > 0 {
            tracing::warn!(
                calls = written,
                "calls interrupted by an earlier crash are recorded in the audit as interrupted"
            );
        }
        recovered.interrupted = written;
        Ok(recovered)
    }
}

/// The audit row of a call a crash interrupted.
fn interrupted_row(u: &Unfinished, roots: &aether_tools_core::Roots) -> AuditEvent {
    let r = &u.receipt;
    let mut reason = String::from(
        "Aether stopped while the call ran (a crash, or the process was killed); its outcome is unknown",
    );
    if !u.journal.is_empty() {
        let changes: Vec<String> = u
            .journal
            .iter()
            .map(|e| {
                format!(
                    "{} {}:{} ({})",
                    e.op.as_str(),
                    e.root,
                    e.path,
                    landed(e, roots)
                )
            })
            .collect();
        reason.push_str(&format!(
            "; it journalled {} change(s), which undo can take back: {}",
            changes.len(),
            changes.join("; ")
        ));
    }
    AuditEvent {
        at_us: aether_store::now_us(),
        call_id: r.call_id.clone(),
        session: r.session.clone(),
        transport: r.transport.clone(),
        agent: r.agent.clone(),
        team: None,
        project: None,
        tool: r.tool.clone(),
        tier: "unknown".into(),
        outcome: "interrupted".into(),
        step: None,
        rule: None,
        reason: Some(aether_policy::truncate::bound_text(&reason, 4096).into_owned()),
        definition: Some(r.definition.clone()),
        arguments_digest: r.arguments.clone(),
        arguments: "[not kept: the call was interrupted before its audit row]".into(),
        result: String::new(),
        duration_us: aether_store::now_us().saturating_sub(r.at_us),
        single: false,
        trace: None,
        subject: None,
    }
}

/// Whether a journalled write landed: the file holds the new content, the old, or neither.
fn landed(e: &JournalEntry, roots: &aether_tools_core::Roots) -> &'static str {
    if e.op != JournalOp::Write {
        return "journalled";
    }
    let Some(root) = roots.get(&e.root) else {
        return "its root is no longer served";
    };
    let path = root.path.join(&e.path);
    let bytes = match std::fs::metadata(&path) {
        Ok(m) if m.len() > CHECK_BYTES => return "not checked: too large",
        Ok(_) => std::fs::read(&path).ok(),
        Err(_) => None,
    };
    let now = bytes.as_deref().map(content_hash);
    match (now, &e.after_hash, &e.before_hash) {
        (Some(h), Some(after), _) if &h == after => "applied",
        (Some(h), _, Some(before)) if &h == before => "not applied: the file holds its old content",
        (None, _, None) => "not applied: the file does not exist",
        _ => "the file has changed since",
    }
}

/// Where the witness lives and what signs it.
#[derive(Clone, Debug)]
pub struct WitnessSpec {
    pub path: PathBuf,
    pub key: AuditKey,
}

/// A serving process's books: heartbeat and witness checkpoints.
#[derive(Clone)]
pub struct Books {
    store: Store,
    roots: Arc<aether_tools_core::Roots>,
    witness: Option<(Arc<Witness>, AuditKey, String)>,
    /// Each chain's link last checkpointed.
    last: Arc<std::sync::Mutex<std::collections::HashMap<String, i64>>>,
}

impl Books {
    /// Books for `pipeline`'s store; the witness only for a keyed store.
    pub fn new(pipeline: &Pipeline, witness: Option<WitnessSpec>) -> Books {
        let store = pipeline.store.clone();
        let witness = match (witness, store.keying()) {
            (Some(spec), Some(keying)) => Some((
                Arc::new(Witness::at(&spec.path)),
                spec.key,
                keying.store_id.clone(),
            )),
            _ => None,
        };
        Books {
            store,
            roots: pipeline.roots.clone(),
            witness,
            last: Arc::default(),
        }
    }

    /// Renews the heartbeat and checkpoints the head every [`aether_store::HEARTBEAT`] until
    /// `stop`.
    pub fn run(&self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let books = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(aether_store::HEARTBEAT);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                if let Err(e) = books.store.heartbeat().await {
                    tracing::warn!(error = %e, "cannot renew this process's heartbeat in the store");
                }
                books.checkpoint().await;
                // Another process that crashed (a replica that is not coming back) left rows
                // its own witness may never have seen: they are checkpointed here.
                if books.witness.is_some() {
                    match books.store.crashed_writers().await {
                        Ok(writers) => books.witness_writers(&writers).await,
                        Err(e) => tracing::warn!(error = %e, "cannot read crashed writers"),
                    }
                }
            }
        })
    }

    /// Appends a checkpoint of each of this process's chains whose head moved since its last one.
    pub async fn checkpoint(&self) {
        if self.witness.is_none() {
            return;
        }
        match self.store.audit_heads().await {
            Ok(heads) => self.append(heads).await,
            Err(e) => tracing::warn!(error = %e, "cannot read the audit's heads for the witness"),
        }
    }

    /// Checkpoints the chains of crashed processes `writers` (found at start): rows they
    /// committed after their own last checkpoint are then witnessed too.
    pub async fn witness_writers(&self, writers: &[String]) {
        if self.witness.is_none() || writers.is_empty() {
            return;
        }
        match self.store.audit_heads_of(writers.to_vec()).await {
            Ok(heads) => self.append(heads).await,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read crashed writers' heads for the witness")
            }
        }
    }

    /// Appends a line for each of `heads` that moved since its last one.
    async fn append(&self, heads: Vec<aether_store::ChainHead>) {
        let Some((witness, key, store_id)) = &self.witness else {
            return;
        };
        for head in heads {
            {
                let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                if last.get(&head.chain) == Some(&head.link) {
                    continue;
                }
            }
            let (witness, key, store_id) = (witness.clone(), key.clone(), store_id.clone());
            let (chain, link) = (head.chain.clone(), head.link);
            let appended = tokio::task::spawn_blocking(move || {
                witness.append(&key, &store_id, &head, aether_store::now_us())
            })
            .await;
            match appended {
                Ok(Ok(())) => {
                    self.last
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(chain, link);
                }
                Ok(Err(e)) => tracing::error!(error = %e, "cannot append to the audit's witness"),
                Err(e) => tracing::error!(error = %e, "the witness task failed"),
            }
        }
    }

    /// The last checkpoint, and, when every call has ended (`all_ended`), this process's
    /// writer marked stopped. (A call still running keeps its writer alive to the others
    /// until the process is gone.)
    pub async fn close(&self, all_ended: bool) {
        self.checkpoint().await;
        if !all_ended {
            return;
        }
        // Writes are made durable by the journal, not by fsyncs of their own: before this
        // process says it stopped cleanly (its writes are then never looked at again), the
        // roots' file systems are flushed.
        let roots = self.roots.clone();
        let synced = tokio::task::spawn_blocking(move || {
            roots.iter().try_for_each(|r| {
                std::fs::File::open(&r.path)
                    .and_then(|f| rustix::fs::syncfs(&f).map_err(Into::into))
            })
        })
        .await;
        if !matches!(synced, Ok(Ok(()))) {
            tracing::warn!(
                "cannot flush the roots' file systems; this process is not marked stopped, so the next start checks its writes"
            );
            return;
        }
        if let Err(e) = self.store.writer_stopped().await {
            tracing::warn!(error = %e, "cannot mark this process stopped in the store");
        }
    }
}

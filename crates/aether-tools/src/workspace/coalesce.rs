//! Edits to one file, coalesced. Writes to a file are serialized (its stripe lock), and each
//! costs two rounds of fsyncs (the journal with the new content's temporary file, then the
//! rename's folder), so one file takes only so many writes a second however many callers wait.
//! Instead, callers queue their edit; one task takes the lock, reads the file once, applies
//! every queued edit to it in order (each to the previous one's result, exactly as if they had
//! run one after another), records them all in one journal write, each with its own call's
//! entry and pre-image, and replaces the file once. Each caller then gets its own outcome:
//! an edit that fails leaves the text as it was for the next one.
//!
//! The batch runs in a task of its own, on a thread of its own ([`batcher`]), so a caller that
//! goes away (cancelled) cannot tear it down halfway; an edit whose caller has gone before its
//! turn is skipped.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use aether_policy::journal::{JournalEntry, JournalWrite, PendingReceipt, content_hash};
use cap_std::fs::Dir;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::edit::Edited;
use super::write::{self, Before, LOCKS, Target, stripe};
use crate::{Ledger, Roots, ToolError};

/// One caller's edit.
pub(super) struct Change {
    /// This call's journal entry for the change; the before and after fields are filled in.
    pub entry: JournalEntry,
    pub cancel: CancellationToken,
    pub edit: EditFn,
    /// The call's receipt, if it rides the journal write ([`PendingReceipt`]).
    pub receipt: Option<Arc<PendingReceipt>>,
}

/// An edit: the new text from the file's current bytes (`None`: no file).
pub(super) type EditFn = Box<dyn FnOnce(Option<&[u8]>) -> Result<Edited, ToolError> + Send>;

/// What a change did: the text it started from and its result.
pub(super) struct Applied {
    pub before: Option<String>,
    pub edited: Edited,
    /// Whether the file was written (false when the edit changed nothing).
    pub written: bool,
}

/// Where the change lands: an open target's parts, owned so that the batch task can use them.
pub(super) struct Place {
    pub roots: Arc<Roots>,
    pub root: String,
    pub rel: String,
    pub dir: Dir,
    pub name: String,
    pub real: PathBuf,
    pub ledger: Arc<dyn Ledger>,
    /// The most bytes the file may have before (for the journal).
    pub max_bytes: u64,
}

impl Place {
    pub fn of(t: Target<'_>, roots: &Arc<Roots>, ledger: &Arc<dyn Ledger>, max: u64) -> Place {
        Place {
            roots: roots.clone(),
            root: t.root.name.clone(),
            rel: t.rel,
            dir: t.dir,
            name: t.name,
            real: t.real,
            ledger: ledger.clone(),
            max_bytes: max,
        }
    }
}

struct Pending {
    place: Place,
    change: Change,
    done: oneshot::Sender<Result<Applied, ToolError>>,
}

/// Per lock stripe: the changes waiting, and whether a task is draining them.
#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    draining: bool,
}

static QUEUES: [std::sync::Mutex<Queue>; 256] = [const {
    std::sync::Mutex::new(Queue {
        pending: Vec::new(),
        draining: false,
    })
}; 256];

/// Applies `change` at `place`, in a batch with whatever else waits for the same file.
pub(super) async fn apply(place: Place, change: Change) -> Result<Applied, ToolError> {
    let s = stripe(&place.real);
    let (done, outcome) = oneshot::channel();
    let start = {
        let mut q = QUEUES[s].lock().unwrap_or_else(|e| e.into_inner());
        q.pending.push(Pending {
            place,
            change,
            done,
        });
        !std::mem::replace(&mut q.draining, true)
    };
    if start {
        batcher().spawn(drain(s));
    }
    outcome.await.unwrap_or_else(|_| {
        Err(ToolError::failed(
            "the edit failed inside Aether before it was answered; `aether journal list` \
             shows whether it was made",
        ))
    })
}

/// The runtime batches run on, on a thread of its own: a batch never belongs to a caller's
/// runtime, so it is not dropped halfway when that runtime stops, and the edits' CPU work
/// leaves the callers' threads.
fn batcher() -> &'static tokio::runtime::Handle {
    static HANDLE: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the edit batcher's runtime starts");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("aether-edits".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("the edit batcher's thread starts");
        handle
    })
}

/// Runs batches for stripe `s` until its queue is empty.
async fn drain(s: usize) {
    loop {
        let _lock = LOCKS[s].lock().await;
        let pending = {
            let mut q = QUEUES[s].lock().unwrap_or_else(|e| e.into_inner());
            if q.pending.is_empty() {
                q.draining = false;
                return;
            }
            std::mem::take(&mut q.pending)
        };
        // One batch per file, in the order the changes came.
        let mut batches: Vec<Vec<Pending>> = Vec::new();
        for p in pending {
            match batches.iter_mut().find(|b| b[0].place.real == p.place.real) {
                Some(b) => b.push(p),
                None => batches.push(vec![p]),
            }
        }
        // Each batch in a task of its own: a panic fails that batch's callers (their answers
        // are dropped), never the queue.
        for batch in batches {
            let _ = tokio::spawn(run(batch)).await;
        }
    }
}

/// Applies one file's batch and answers each caller.
async fn run(batch: Vec<Pending>) {
    let batch: Vec<Pending> = batch
        .into_iter()
        .filter(|p| !p.done.is_closed() && !p.change.cancel.is_cancelled())
        .collect();
    // The first caller's open folder serves the batch: every change in it names the same real
    // file.
    let Some(first) = batch.first() else { return };
    let (roots, ledger, max_bytes) = (
        first.place.roots.clone(),
        first.place.ledger.clone(),
        first.place.max_bytes,
    );
    let opened = roots.get(&first.place.root).map(|root| {
        first.place.dir.try_clone().map(|dir| Target {
            root,
            rel: first.place.rel.clone(),
            dir,
            name: first.place.name.clone(),
            real: first.place.real.clone(),
            created: Vec::new(),
        })
    });
    let t = match opened {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            let e = ToolError::failed(format!("cannot open {}: {e}", first.place.rel));
            for p in batch {
                let _ = p.done.send(Err(e.clone()));
            }
            return;
        }
        None => return,
    };
    let before = match write::read_before(&t, max_bytes) {
        Ok(b) => b,
        Err(e) => {
            for p in batch {
                let _ = p.done.send(Err(e.clone()));
            }
            return;
        }
    };
    let mode = before.mode();
    // The mode each change finds: the file's, or a new file's once one was created.
    let mut current_mode = mode;
    let (mut current, mut current_hash) = match before {
        Before::Absent => (None, None),
        Before::File { bytes, hash, .. } => (Some(bytes), Some(hash)),
    };
    let mut entries = Vec::new();
    let mut riders: Vec<Arc<PendingReceipt>> = Vec::new();
    let mut blobs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut answers: Vec<(oneshot::Sender<_>, Result<Applied, ToolError>)> = Vec::new();
    let mut changed = Vec::new();
    for p in batch {
        let edited = match (p.change.edit)(current.as_deref()) {
            Ok(edited) => edited,
            Err(e) => {
                answers.push((p.done, Err(e)));
                continue;
            }
        };
        let before_text = current
            .as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned());
        if current.as_deref() == Some(edited.text.as_bytes()) {
            answers.push((
                p.done,
                Ok(Applied {
                    before: before_text,
                    edited,
                    written: false,
                }),
            ));
            continue;
        }
        let after = content_hash(edited.text.as_bytes());
        riders.extend(p.change.receipt.clone());
        let mut entry = p.change.entry;
        entry.before_hash = current_hash.clone();
        entry.before_mode = current_mode;
        entry.after_hash = Some(after.clone());
        entries.push(entry);
        if let (Some(bytes), Some(hash)) = (current.take(), current_hash.take())
            && !blobs.iter().any(|(h, _)| *h == hash)
        {
            blobs.push((hash, bytes));
        }
        current = Some(edited.text.clone().into_bytes());
        current_mode = current_mode.or(Some(0o644));
        current_hash = Some(after);
        changed.push(answers.len());
        answers.push((
            p.done,
            Ok(Applied {
                before: before_text,
                edited,
                written: true,
            }),
        ));
    }
    if !entries.is_empty() {
        let write = JournalWrite {
            entries,
            blobs,
            reverts: Vec::new(),
            receipts: Vec::new(),
        };
        let bytes = current.unwrap_or_default();
        // This task runs on the batcher's own thread (`batcher`).
        let replaced = write::record_and_replace(
            ledger.as_ref(),
            &t,
            write,
            bytes,
            mode,
            write::Runner::Own,
            &riders.iter().collect::<Vec<_>>(),
        )
        .await;
        if let Err(e) = replaced {
            for i in changed {
                answers[i].1 = Err(e.clone());
            }
        }
    }
    for (done, answer) in answers {
        let _ = done.send(answer);
    }
}

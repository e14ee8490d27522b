//! The journal and the seals: what the workspace tools record and the store keeps.
//!
//! The journal holds, for every file change a tool made, the file's content before and after
//! (by hash; the bytes are kept once per distinct content), so that the change can be undone.
//! Seals pin the content of every file of a sealed root by hash.

use serde::{Deserialize, Serialize};

/// What a journal entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalOp {
    /// A file was created or its content replaced.
    Write,
    /// A file was deleted.
    Delete,
    /// A file or folder was renamed from `path` to `dest`.
    Move,
    /// A folder was created.
    Mkdir,
    /// An empty folder was removed (undoing a `Mkdir`).
    Rmdir,
}

impl JournalOp {
    pub fn as_str(self) -> &'static str {
        match self {
            JournalOp::Write => "write",
            JournalOp::Delete => "delete",
            JournalOp::Move => "move",
            JournalOp::Mkdir => "mkdir",
            JournalOp::Rmdir => "rmdir",
        }
    }

    pub fn parse(s: &str) -> Option<JournalOp> {
        match s {
            "write" => Some(JournalOp::Write),
            "delete" => Some(JournalOp::Delete),
            "move" => Some(JournalOp::Move),
            "mkdir" => Some(JournalOp::Mkdir),
            "rmdir" => Some(JournalOp::Rmdir),
            _ => None,
        }
    }
}

/// One change to one file (a move: to two names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JournalEntry {
    /// Assigned by the store; ignored on write.
    pub id: i64,
    pub at_us: i64,
    pub call_id: String,
    pub session: String,
    pub agent: String,
    pub tool: String,
    pub op: JournalOp,
    pub root: String,
    pub path: String,
    pub dest: Option<String>,
    /// Content hash before the change; `None`: no file was there.
    pub before_hash: Option<String>,
    pub before_mode: Option<u32>,
    /// Content hash after the change; `None`: no file is there.
    pub after_hash: Option<String>,
    /// For an undo's entries: the entry it undid.
    pub undoes: Option<i64>,
    /// The call that undid this entry, once one has.
    pub reverted_by: Option<String>,
}

/// One durable journal write: entries, the images they name, and earlier entries that these
/// entries undo (marked reverted by the entries' call).
#[derive(Clone, Debug, Default)]
pub struct JournalWrite {
    pub entries: Vec<JournalEntry>,
    /// `(content hash, bytes)`; an image already stored is not stored again.
    pub blobs: Vec<(String, Vec<u8>)>,
    pub reverts: Vec<i64>,
    /// The admission receipts of the calls whose first durable write this is (see
    /// [`PendingReceipt`]): committed in the same transaction, after the same halt check.
    pub receipts: Vec<AdmissionReceipt>,
}

/// An admission receipt: written, durably, before the admitted call can change anything.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AdmissionReceipt {
    pub call_id: String,
    pub at_us: i64,
    pub session: String,
    pub transport: String,
    pub agent: String,
    pub tool: String,
    /// Digest of the tool definition that was admitted.
    pub definition: String,
    /// Digest of the arguments as admitted.
    pub arguments: String,
    pub decision: String,
}

/// The receipt of a call whose only effects are file changes it journals before making them
/// (`write_file`, `edit_file`): it rides the call's first journal commit instead of a commit
/// of its own, so a receipt and the journal entry holding the old and new content take one
/// flush. Nothing the call does can be seen before that commit, which is what the receipt
/// protects; a call that never journals anything changed nothing, and its audit row is its
/// only record.
#[derive(Debug)]
pub struct PendingReceipt(std::sync::Mutex<Riding>);

/// Where a pending receipt is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Riding {
    /// Not yet written: the call has journalled nothing.
    Waiting(AdmissionReceipt),
    /// Not written: the write it rode failed (the store could not be reached, say), so the
    /// call changed nothing. It rides the call's next write, if any.
    Missed(AdmissionReceipt),
    /// Handed to a journal write not yet committed.
    InFlight(AdmissionReceipt),
    /// Committed with the call's first journal write.
    Committed,
    /// The write it rode met a halt: nothing was written.
    Halted(String),
}

impl PendingReceipt {
    pub fn new(receipt: AdmissionReceipt) -> PendingReceipt {
        PendingReceipt(std::sync::Mutex::new(Riding::Waiting(receipt)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Riding> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The receipt, for the journal write about to be committed, if it is still waiting.
    pub fn board(&self) -> Option<AdmissionReceipt> {
        let mut state = self.lock();
        match &*state {
            Riding::Waiting(r) | Riding::Missed(r) => {
                let r = r.clone();
                *state = Riding::InFlight(r.clone());
                Some(r)
            }
            _ => None,
        }
    }

    /// How the write it boarded ended: committed, halted (`Some(why)` in `Err`), or failed
    /// (`Err(None)`: it waits for the call's next write).
    pub fn landed(&self, outcome: Result<(), Option<String>>) {
        let mut state = self.lock();
        let Riding::InFlight(r) = &*state else { return };
        *state = match outcome {
            Ok(()) => Riding::Committed,
            Err(Some(why)) => Riding::Halted(why),
            Err(None) => Riding::Missed(r.clone()),
        };
    }

    pub fn state(&self) -> Riding {
        self.lock().clone()
    }
}

/// Which journal entries to read (newest first).
#[derive(Clone, Debug, Default)]
pub struct JournalQuery {
    pub session: Option<String>,
    pub call_id: Option<String>,
    pub root: Option<String>,
    pub path: Option<String>,
    /// Only entries no call has undone.
    pub live_only: bool,
    pub limit: usize,
}

/// A sealed root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealRecord {
    pub root: String,
    pub root_path: String,
    pub at_us: i64,
    pub by: String,
    pub why: String,
    pub files: i64,
    /// Assigned by the store: one more than the last seal of any root.
    pub generation: i64,
}

/// One sealed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SealPin {
    pub path: String,
    pub hash: String,
    pub size: i64,
}

/// The content hash the journal and seals use: sha256, lowercase hex.
pub fn content_hash(bytes: &[u8]) -> String {
    crate::canon::sha256(bytes).to_hex()
}

/// A command `run_command` or `run_shell` is about to run, as the command log records it
/// (durably, before the command starts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandStart {
    pub at_us: i64,
    pub call_id: String,
    pub session: String,
    pub agent: String,
    pub tool: String,
    pub root: String,
    /// The working folder, relative to the root.
    pub cwd: String,
    /// The shell text, or the program and its arguments as a JSON array; a command that
    /// carries a credential is recorded as the rule that found it, never the credential.
    pub command: String,
    /// How it was confined: "bubblewrap" for `run_shell`, "none" for `run_command`.
    pub sandbox: String,
}

/// How a logged command ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandEnd {
    pub at_us: i64,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
}

/// One row of the command log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandRecord {
    pub id: i64,
    #[serde(flatten)]
    pub start: CommandStart,
    /// `None` while it runs, or when Aether stopped before it ended.
    pub end: Option<CommandEnd>,
}

/// Which command-log rows to read, newest first.
#[derive(Clone, Debug, Default)]
pub struct CommandQuery {
    pub agent: Option<String>,
    pub call_id: Option<String>,
    pub limit: usize,
}

/// A versioned JSON document the working tools keep (a plan, a to-do list).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// `plan`, `todo`, …
    pub kind: String,
    /// Whose: `team:NAME` or `agent:NAME` (from the caller's identity, never its arguments).
    pub scope: String,
    pub name: String,
    /// 1 for a new document, one more at every change.
    pub version: i64,
    /// JSON.
    pub body: String,
    pub updated_us: i64,
    pub updated_by: String,
}

/// A message one agent of a team left for another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub id: i64,
    pub team: String,
    pub from_agent: String,
    pub to_agent: String,
    pub at_us: i64,
    pub body: String,
}

/// A document for the knowledge index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnowledgeDoc {
    /// `pack:NAME`, `team:NAME`, `project:NAME` or `agent:NAME`.
    pub scope: String,
    /// Where it came from (a path), unique within its scope.
    pub source: String,
    pub title: String,
    pub body: String,
}

/// One search hit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeHit {
    pub scope: String,
    pub source: String,
    pub title: String,
    /// The best matching passage, the matches in [brackets].
    pub snippet: String,
    /// Higher is better (the negated BM25 rank).
    pub score: f64,
    /// The line of the first match in the document (1-based), if found.
    pub line: Option<usize>,
}

//! The audit's witness: signed checkpoints of a chain's head (chain, link, sequence number,
//! hash, time), appended by each writer for its own chain every few seconds and at shutdown
//! to a file outside the store. Whoever can write
//! the database cannot also take back what the witness saw: `verify` checks every checkpoint
//! against the rows, so rows cut from the end, or both tables wiped, show.
//!
//! One line per checkpoint, JSON, signed with the [`AuditKey`]; the file is opened for
//! appending only and synced after each line.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::AuditKey;
use crate::chain::ChainHead;

/// One checkpoint as the witness holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessLine {
    /// The store's id (its keying marker's).
    pub store: String,
    /// The writer's chain (`""`: the chain from before chains, of an earlier release).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chain: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub link: i64,
    pub seq: i64,
    pub head: String,
    pub at_us: i64,
    /// The keying marker's version the writer held (0: a line of a release before versions
    /// were witnessed). `verify` refuses a store whose marker is older than one its witness
    /// saw: an old marker's signature, kept from a backup, cannot be put back unseen.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub marker: u8,
    pub sig: String,
}

/// The keying marker's version this release writes (see [`crate::Keying`]).
pub const MARKER_VERSION: u8 = 2;

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn is_zero_u8(n: &u8) -> bool {
    *n == 0
}

impl WitnessLine {
    pub fn signed_text(&self) -> String {
        let text = match self.chain.is_empty() {
            true => format!(
                "aether-audit-witness-v1\n{}\n{}\n{}\n{}",
                self.store, self.seq, self.head, self.at_us
            ),
            false => format!(
                "aether-audit-witness-v2\n{}\n{}\n{}\n{}\n{}\n{}",
                self.store, self.chain, self.link, self.seq, self.head, self.at_us
            ),
        };
        match self.marker {
            0 => text,
            m => format!("{text}\nmarker {m}"),
        }
    }

    /// The row's place in its chain (the chain from before chains counts by sequence number).
    pub fn link(&self) -> i64 {
        match self.chain.is_empty() {
            true => self.seq,
            false => self.link,
        }
    }
}

/// An append-only witness file.
#[derive(Debug)]
pub struct Witness {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl Witness {
    pub fn at(path: &Path) -> Witness {
        Witness {
            path: path.to_path_buf(),
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a signed checkpoint of a chain's `head`, and syncs it.
    pub fn append(
        &self,
        key: &AuditKey,
        store: &str,
        head: &ChainHead,
        at_us: i64,
    ) -> std::io::Result<()> {
        let mut line = WitnessLine {
            store: store.to_string(),
            chain: head.chain.clone(),
            link: head.link,
            seq: head.seq,
            head: head.hash.clone(),
            at_us,
            marker: MARKER_VERSION,
            sig: String::new(),
        };
        line.sig = key.sign(&line.signed_text());
        let mut text = serde_json::to_string(&line).map_err(std::io::Error::other)?;
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            *file = Some(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(&self.path)?,
            );
        }
        let f = file.as_mut().expect("opened above");
        // One write of the whole line: appends from several processes do not interleave.
        f.write_all(text.as_bytes())?;
        f.sync_data()
    }

    /// The checkpoints in the file at `path`, signature-checked with `key` and for `store`:
    /// `None` when there is no file; lines that fail either check are returned as problems.
    pub fn read(
        path: &Path,
        key: &AuditKey,
        store: &str,
    ) -> std::io::Result<Option<(Vec<WitnessLine>, Vec<String>)>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut lines = Vec::new();
        let mut problems = Vec::new();
        let count = text.lines().count();
        for (n, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let Ok(line) = serde_json::from_str::<WitnessLine>(raw) else {
                // A line cut short by a crash while it was written is the last one.
                if n + 1 < count {
                    problems.push(format!("witness line {} is not a checkpoint", n + 1));
                }
                continue;
            };
            if !key.verify(&line.signed_text(), &line.sig) {
                problems.push(format!(
                    "witness line {} is not signed by the audit key (the witness was edited)",
                    n + 1
                ));
            } else if line.store != store {
                problems.push(format!(
                    "witness line {} is a checkpoint of store {}, and this store is {store} (its keying was replaced, or the witness is another store's)",
                    n + 1,
                    line.store
                ));
            } else {
                lines.push(line);
            }
        }
        Ok(Some((lines, problems)))
    }
}

//! The journal as a redo log. A write's journal entry holds the old content's hash and the new
//! content (a content-addressed image), committed before the file is replaced; the file and its
//! folder are then not fsynced (`write::Sync::Journalled`). So a crash can lose a rename the
//! caller was told about. At the next start, before anything is served, every journalled write
//! since the last settled point is looked at: a file that does not hold its newest journalled
//! content, but holds content the journal says came before it (or is absent where the journal
//! says it was created), gets the newest content again; a file someone else changed since is
//! left alone and reported.

use std::collections::BTreeMap;

use aether_policy::journal::{JournalEntry, JournalOp, content_hash};

use super::write::{self, Target};
use crate::{AnyPath, Roots};

/// The largest file the start reads to tell whether it lost a write.
const REDO_MAX_BYTES: u64 = 256 << 20;

/// What the start found of one file's journalled writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redo {
    /// The file holds its newest journalled content.
    Held,
    /// The file had lost it (a crash before the rename reached the disk): written again.
    Written,
    /// The file holds content the journal does not know: someone changed it since; left alone.
    ChangedSince,
    /// It could not be checked or written (the root is not served, the image is gone, an IO
    /// error): the reason.
    Failed(String),
}

/// Looks at every file `entries` (journal entries, oldest first) wrote and writes again the
/// newest content of each that lost it; `image` gives an image by its hash. Returns, per
/// file (`root:path`), what was found.
pub fn redo(
    roots: &Roots,
    entries: &[JournalEntry],
    image: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Vec<(String, Redo)> {
    let mut by_file: BTreeMap<(String, String), Vec<&JournalEntry>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.op == JournalOp::Write) {
        by_file
            .entry((e.root.clone(), e.path.clone()))
            .or_default()
            .push(e);
    }
    by_file
        .into_iter()
        .map(|((root, path), chain)| {
            let found = redo_file(roots, &root, &path, &chain, image);
            (format!("{root}:{path}"), found)
        })
        .collect()
}

fn redo_file(
    roots: &Roots,
    root: &str,
    path: &str,
    chain: &[&JournalEntry],
    image: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Redo {
    let newest = chain.last().expect("a file with entries");
    let Some(after) = &newest.after_hash else {
        return Redo::Held;
    };
    let Some(r) = roots.get(root) else {
        return Redo::Failed(format!("root {root} is not served"));
    };
    // As the root is served now: a root made read-only or sealed since is not written.
    if let Err(e) = r.check_writable(path, "write") {
        return Redo::Failed(e.to_string());
    }
    // Recovery writes what was admitted and journalled: the path rules were judged then.
    let opened = r.open_parent(roots, &AnyPath, path, true);
    let (dir, real_parent, name, created) = match opened {
        Ok(opened) => opened,
        Err(e) => return Redo::Failed(e.to_string()),
    };
    let t = Target {
        root: r,
        real: real_parent.join(&name),
        rel: path.to_string(),
        dir,
        name,
        created,
    };
    let now = match write::read_before(&t, REDO_MAX_BYTES) {
        Ok(write::Before::File { hash, .. }) => Some(hash),
        Ok(write::Before::Absent) => None,
        Err(e) => return Redo::Failed(e.to_string()),
    };
    if now.as_deref() == Some(after.as_str()) {
        return Redo::Held;
    }
    // Content the journal says came before the newest write: ours, lost in a crash.
    let ours = chain.iter().any(|e| e.before_hash == now)
        || chain
            .iter()
            .any(|e| e.after_hash.is_some() && e.after_hash == now);
    if !ours {
        return Redo::ChangedSince;
    }
    let Some(bytes) = image(after) else {
        return Redo::Failed(format!("the journal's image {after} is gone"));
    };
    if content_hash(&bytes) != *after {
        return Redo::Failed(format!(
            "the journal's image {after} does not match its hash"
        ));
    }
    let mode = newest.before_mode.or(Some(0o644));
    match write::replace(&t, &bytes, mode) {
        Ok(()) => Redo::Written,
        Err(e) => Redo::Failed(e.to_string()),
    }
}

//! The tree walk shared by `glob` and `search_files`: ripgrep's `ignore` walker, in parallel,
//! honouring `.gitignore`/`.ignore` by default, never following symlinks, never entering `.git`
//! or `.aether`, and never yielding credential files.

use std::path::Path;
use std::sync::Arc;

use aether_policy::paths::CredentialFilter;
use ignore::{DirEntry, WalkBuilder};

/// Walk options a caller may set.
#[derive(Clone, Copy, Debug)]
pub(super) struct WalkOptions {
    pub include_hidden: bool,
    pub respect_ignore: bool,
}

pub(super) fn yes() -> bool {
    true
}

/// Folders no walk enters, hidden or not.
const NEVER_ENTER: [&str; 2] = [".git", ".aether"];

/// A parallel walker over `base` (a real path under `root_path`).
pub(super) fn builder(
    base: &Path,
    root_path: &Path,
    opts: WalkOptions,
    credentials: Arc<CredentialFilter>,
) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.hidden(!opts.include_hidden)
        .git_ignore(opts.respect_ignore)
        .git_exclude(opts.respect_ignore)
        .ignore(opts.respect_ignore)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)));
    let root_path = root_path.to_path_buf();
    b.filter_entry(move |entry| {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir && NEVER_ENTER.iter().any(|n| entry.file_name() == *n) {
            return false;
        }
        // Credential folders (.ssh, .aws, ...) are not entered either.
        !is_dir
            || relative(entry.path(), &root_path).is_none_or(|rel| !credentials.is_credential(&rel))
    });
    b
}

/// A regular file from the walk, as (absolute path, root-relative path), unless it is a
/// credential file. Symlinks are not followed, so they are not yielded.
pub(super) fn regular_file(
    entry: Result<DirEntry, ignore::Error>,
    root_path: &Path,
    credentials: &CredentialFilter,
) -> Option<(std::path::PathBuf, String)> {
    let entry = entry.ok()?;
    if !entry.file_type()?.is_file() {
        return None;
    }
    let rel = relative(entry.path(), root_path)?;
    if credentials.is_credential(&rel) {
        return None;
    }
    Some((entry.into_path(), rel))
}

fn relative(path: &Path, root: &Path) -> Option<String> {
    path.strip_prefix(root)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

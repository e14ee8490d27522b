//! The tree walk shared by `glob` and `search_files`: ripgrep's `ignore` walker, in parallel,
//! honouring `.gitignore`/`.ignore` by default, never following symlinks, never entering `.git`
//! or `.aether`, and never yielding credential files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aether_policy::paths::CredentialFilter;
use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder};

use crate::{CallContext, ToolError};

/// Where a walk runs, checked: the folder opened beneath its root (so it cannot lead out),
/// and what the walk's threads need, owned.
pub(super) struct Walk {
    pub root_name: String,
    /// The real path of the folder walked.
    pub base: PathBuf,
    pub root_path: PathBuf,
    /// The root's handle, for opening found files beneath it.
    pub root_dir: cap_std::fs::Dir,
    pub credentials: Arc<CredentialFilter>,
    pub opts: WalkOptions,
    /// Results returned at most: the caller's wish within the operator's limit.
    pub max: usize,
}

impl Walk {
    pub fn prepare(
        cx: &CallContext,
        root: Option<&str>,
        path: &str,
        opts: WalkOptions,
        max_results: Option<usize>,
    ) -> Result<Walk, ToolError> {
        let mut rel = String::new();
        let loc = cx.roots.locate(root, path, &mut rel)?;
        let (_folder, base) = loc.root.open_folder(loc.rel, cx.roots.credentials())?;
        let root_dir = loc
            .root
            .dir()
            .try_clone()
            .map_err(|e| loc.root.io_error("", e))?;
        Ok(Walk {
            root_name: loc.root.name.clone(),
            base,
            root_path: loc.root.path.clone(),
            root_dir,
            credentials: Arc::new(cx.roots.credentials().clone()),
            opts,
            max: max_results
                .unwrap_or(usize::MAX)
                .min(cx.limits.search_results),
        })
    }

    /// A parallel walker over the folder.
    pub fn builder(&self) -> WalkBuilder {
        builder(
            &self.base,
            &self.root_path,
            self.opts,
            self.credentials.clone(),
        )
    }
}

/// A glob as the workspace tools read it: without a "/", it matches file names anywhere;
/// with one, paths relative to the folder walked.
pub(super) struct NameGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl NameGlob {
    pub fn new(pattern: &str) -> Result<NameGlob, ToolError> {
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("bad glob {pattern:?}: {e}")))?
            .compile_matcher();
        Ok(NameGlob {
            matcher,
            by_name: !pattern.contains('/'),
        })
    }

    /// Whether `abs`, found walking `base`, matches.
    pub fn matches(&self, abs: &Path, base: &Path) -> bool {
        if self.by_name {
            abs.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else {
            abs.strip_prefix(base)
                .is_ok_and(|p| self.matcher.is_match(p))
        }
    }
}

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

//! The tree walk shared by `glob` and `search_files`: ripgrep's `ignore` walker, in parallel,
//! honouring `.gitignore`/`.ignore` by default, never following symlinks, never entering `.git`
//! or `.aether`, and never yielding credential files.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use aether_policy::paths::CredentialFilter;
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use globset::{GlobBuilder, GlobMatcher};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{DirEntry, Match, WalkBuilder};

use tokio_util::sync::CancellationToken;

use crate::{CallContext, ToolError};

/// Tree walks running at once, across all calls: each takes a worker per core, so more would
/// only queue threads. A call waits its turn (and stops waiting when cancelled).
static WALKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// Waits for a turn to walk.
pub(super) async fn turn(
    cx: &CallContext,
) -> Result<tokio::sync::SemaphorePermit<'static>, ToolError> {
    tokio::select! {
        permit = WALKS.acquire() => permit.map_err(|_| ToolError::failed("tree walks are shut down")),
        _ = cx.cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

/// Where a walk runs, checked: the folder opened beneath its root (so it cannot lead out),
/// and what the walk's threads need, owned.
pub(super) struct Walk {
    pub root_name: String,
    /// The real path of the folder walked.
    pub base: PathBuf,
    pub root_path: PathBuf,
    /// The root's handle, for opening found files beneath it.
    pub root_dir: cap_std::fs::Dir,
    /// The folder walked, opened beneath the root.
    pub folder: cap_std::fs::Dir,
    pub credentials: Arc<CredentialFilter>,
    /// The call's path rules, for a file whose open is checked where it landed.
    pub paths: Arc<dyn crate::PathCheck>,
    pub opts: WalkOptions,
    /// Results returned at most: the caller's wish within the operator's limit.
    pub max: usize,
    /// The seal in force when the root is sealed: only what it pinned is walked into view.
    pub seal: Option<Arc<crate::SealManifest>>,
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
        let seal = loc.root.seal_in_force()?;
        let (folder, base) = loc.root.open_folder(loc.rel, cx.opening())?;
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
            folder,
            credentials: Arc::new(cx.roots.credentials().clone()),
            paths: cx.paths.clone(),
            opts,
            max: max_results
                .unwrap_or(usize::MAX)
                .min(cx.limits.search_results),
            seal,
        })
    }

    /// A parallel walker over the folder.
    pub fn builder(&self) -> WalkBuilder {
        builder(
            &self.base,
            &self.root_path,
            &self.root_dir,
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
    /// `pattern` as given with `path` under `root`, confined like a path
    /// (`aether_policy::paths::confine_glob`): the root's name, the folder to walk (clean,
    /// root-relative) and the glob to match there.
    pub fn confined(
        cx: &CallContext,
        root: Option<&str>,
        path: &str,
        pattern: &str,
    ) -> Result<(String, String, NameGlob), ToolError> {
        let mut rel = String::new();
        let loc = cx.roots.locate(root, path, &mut rel)?;
        let place =
            aether_policy::paths::confine_glob(loc.rel, pattern, &loc.root.path.to_string_lossy())
                .map_err(|r| ToolError::denied("confinement", r))?;
        // Walks never enter `.git` or `.aether`; a pattern that leads into one is refused, not
        // answered with nothing.
        if aether_policy::paths::protected_component(&place.folder).is_some()
            && aether_policy::paths::protected_component(loc.rel).is_none()
        {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "the pattern {pattern:?} looks inside a folder no walk enters (.git, .aether)"
                ),
            ));
        }
        let matcher = GlobBuilder::new(&place.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("bad glob {pattern:?}: {e}")))?
            .compile_matcher();
        Ok((
            loc.root.name.clone(),
            place.folder,
            NameGlob {
                matcher,
                by_name: place.by_name,
            },
        ))
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
    /// Folders by name (below the one walked) the walk does not enter either, beside those no
    /// walk enters.
    pub skip_folders: &'static [&'static str],
}

pub(super) fn yes() -> bool {
    true
}

/// Folders no walk enters, hidden or not.
const NEVER_ENTER: [&str; 2] = [".git", ".aether"];

/// Whether the folder `name` at `path` is one no walk enters or shows: `.git`, `.aether`, or
/// a credential folder (`.ssh`, `.aws`, ...).
fn closed_folder(name: &std::ffi::OsStr, path: &Path, credentials: &CredentialFilter) -> bool {
    NEVER_ENTER.iter().any(|n| name == *n) || credentials.is_credential(&path.to_string_lossy())
}

/// The most bytes of one ignore file Aether reads.
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// A parallel walker over `base` (a real path under `root_path`). Ignore files are read by
/// [`IgnoreRules`], beneath the root's handle, never by the walker itself: the walker opens
/// them by name and would follow a `.gitignore` symlinked out of the root, or block on one
/// that is a FIFO.
pub(super) fn builder(
    base: &Path,
    root_path: &Path,
    root_dir: &cap_std::fs::Dir,
    opts: WalkOptions,
    credentials: Arc<CredentialFilter>,
) -> WalkBuilder {
    let mut b = WalkBuilder::new(base);
    b.hidden(!opts.include_hidden)
        .git_ignore(false)
        .git_exclude(false)
        .ignore(false)
        .git_global(false)
        .parents(false)
        .follow_links(false)
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get().min(8)));
    let root_path = root_path.to_path_buf();
    let rules = opts.respect_ignore.then(|| {
        root_dir.try_clone().ok().map(|dir| IgnoreRules {
            root_dir: dir,
            root_path: root_path.clone(),
            base: base.to_path_buf(),
            chains: Mutex::default(),
        })
    });
    let rules = rules.flatten();
    b.filter_entry(move |entry| {
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir && closed_folder(entry.file_name(), entry.path(), &credentials) {
            return false;
        }
        if is_dir
            && entry.depth() > 0
            && opts
                .skip_folders
                .contains(&entry.file_name().to_string_lossy().as_ref())
        {
            return false;
        }
        rules
            .as_ref()
            .is_none_or(|r| !r.ignored(entry.path(), is_dir))
    });
    b
}

/// `.gitignore` and `.ignore` rules of the folders of one walk (`.ignore` wins where both
/// speak). Each file is opened beneath the root without following symlinks and is read only
/// if it is a regular file with one link and at most [`MAX_IGNORE_FILE`] bytes; anything else
/// is passed over as if absent.
struct IgnoreRules {
    root_dir: cap_std::fs::Dir,
    root_path: PathBuf,
    base: PathBuf,
    /// For each folder seen, the rules that apply inside it, shallowest first.
    chains: Mutex<HashMap<PathBuf, Arc<Vec<Gitignore>>>>,
}

impl IgnoreRules {
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let Some(parent) = path.parent() else {
            return false;
        };
        ignored(&self.chain(parent), path, is_dir)
    }

    fn chain(&self, dir: &Path) -> Arc<Vec<Gitignore>> {
        if let Some(found) = self.chains.lock().expect("ignore rules lock").get(dir) {
            return found.clone();
        }
        let mut chain = match dir.parent() {
            Some(parent) if dir != self.base && dir.starts_with(&self.base) => {
                (*self.chain(parent)).clone()
            }
            _ => Vec::new(),
        };
        if let Some(own) = self.load(dir) {
            chain.push(own);
        }
        let chain = Arc::new(chain);
        self.chains
            .lock()
            .expect("ignore rules lock")
            .insert(dir.to_path_buf(), chain.clone());
        chain
    }

    fn load(&self, dir: &Path) -> Option<Gitignore> {
        let rel = dir.strip_prefix(&self.root_path).ok()?;
        read_rules(&self.root_dir, rel, dir)
    }
}

/// The `.gitignore` and `.ignore` rules of the folder `within` (a relative path) beneath
/// `handle`, whose real path is `abs`.
fn read_rules(handle: &cap_std::fs::Dir, within: &Path, abs: &Path) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(abs);
    let mut found = false;
    let mut options = crate::roots::read_options();
    options.follow(FollowSymlinks::No);
    for name in [".gitignore", ".ignore"] {
        let Ok(file) = handle.open_with(within.join(name), &options) else {
            continue;
        };
        let file = file.into_std();
        let Ok(meta) = file.metadata() else { continue };
        if !meta.is_file() || meta.nlink() > 1 || meta.len() > MAX_IGNORE_FILE {
            continue;
        }
        let mut text = String::new();
        if (&file)
            .take(MAX_IGNORE_FILE)
            .read_to_string(&mut text)
            .is_err()
        {
            continue;
        }
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
        found = true;
    }
    found.then(|| builder.build().ok()).flatten()
}

/// What [`tree`] found: each entry's path relative to the folder walked, its components
/// joined by NUL (so that a plain byte sort orders the tree folder by folder), and its kind.
pub(super) struct Tree {
    pub entries: Vec<(Vec<u8>, Kind)>,
    /// Whether the walk stopped at `max` entries.
    pub capped: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Folder,
    Symlink,
}

/// Every entry under the walk's folder to `depth` levels (1: the folder's own entries), at
/// most `max`, by the same rules as the parallel walk (hidden, ignore files, never `.git`,
/// `.aether` or credential folders, never following symlinks).
///
/// The walk goes by handles, not names: each folder is read through a handle opened from its
/// parent's handle without following symlinks, so nothing it lists can come from outside the
/// root, even if a folder is swapped for a symlink while it runs. (A walk by path, like the
/// parallel one, would follow such a swap and list the names it leads to.)
pub(super) fn tree(walk: &Walk, depth: usize, max: usize, cancel: &CancellationToken) -> Tree {
    let mut tw = TreeWalk {
        walk,
        depth,
        max,
        cancel,
        tree: Tree {
            entries: Vec::new(),
            capped: false,
        },
    };
    let mut key = Vec::new();
    tw.visit(&walk.folder, &walk.base, &mut key, 1, &Arc::new(Vec::new()));
    tw.tree
}

struct TreeWalk<'a> {
    walk: &'a Walk,
    depth: usize,
    max: usize,
    cancel: &'a CancellationToken,
    tree: Tree,
}

impl TreeWalk<'_> {
    /// Lists `dir` (real path `abs`, key `key`), whose entries are at `level`, under the
    /// ignore rules `outer` of the folders above it. Returns false once the walk must stop.
    fn visit(
        &mut self,
        dir: &cap_std::fs::Dir,
        abs: &Path,
        key: &mut Vec<u8>,
        level: usize,
        outer: &Arc<Vec<Gitignore>>,
    ) -> bool {
        use cap_fs_ext::DirExt;
        use std::os::unix::ffi::OsStrExt;
        let opts = self.walk.opts;
        let rules = match opts
            .respect_ignore
            .then(|| read_rules(dir, Path::new(""), abs))
        {
            Some(Some(own)) => {
                let mut chain = (**outer).clone();
                chain.push(own);
                Arc::new(chain)
            }
            _ => outer.clone(),
        };
        let Ok(entries) = dir.entries() else {
            return true;
        };
        for entry in entries {
            if self.cancel.is_cancelled() {
                return false;
            }
            let Ok(entry) = entry else { continue };
            let Ok(ft) = entry.file_type() else { continue };
            let name = entry.file_name();
            let bytes = name.as_bytes();
            if !opts.include_hidden && bytes.starts_with(b".") {
                continue;
            }
            let is_dir = ft.is_dir();
            let child = abs.join(&name);
            if is_dir && closed_folder(&name, &child, &self.walk.credentials) {
                continue;
            }
            if let Some(seal) = &self.walk.seal
                && !relative(&child, &self.walk.root_path)
                    .is_some_and(|rel| seal.shows(&rel, is_dir))
            {
                continue;
            }
            // Credential files are left out too (folders were judged just above).
            if (!is_dir
                && self
                    .walk
                    .credentials
                    .is_credential(&child.to_string_lossy()))
                || ignored(&rules, &child, is_dir)
            {
                continue;
            }
            if self.tree.entries.len() >= self.max {
                self.tree.capped = true;
                return false;
            }
            let len = key.len();
            if len > 0 {
                key.push(0);
            }
            key.extend_from_slice(bytes);
            let kind = if is_dir {
                Kind::Folder
            } else if ft.is_symlink() {
                Kind::Symlink
            } else {
                Kind::File
            };
            self.tree.entries.push((key.clone(), kind));
            if is_dir
                && level < self.depth
                && let Ok(sub) = dir.open_dir_nofollow(&name)
                && !self.visit(&sub, &child, key, level + 1, &rules)
            {
                return false;
            }
            key.truncate(len);
        }
        true
    }
}

/// Whether the innermost rule of `chain` that speaks of `path` ignores it.
fn ignored(chain: &[Gitignore], path: &Path, is_dir: bool) -> bool {
    for rules in chain.iter().rev() {
        match rules.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// A regular file from the walk, as (absolute path, root-relative path), unless it is a
/// credential file or, in a sealed root, a file the seal did not pin. Symlinks are not
/// followed, so they are not yielded.
pub(super) fn regular_file(
    entry: Result<DirEntry, ignore::Error>,
    walk: &Walk,
) -> Option<(std::path::PathBuf, String)> {
    let entry = entry.ok()?;
    if !entry.file_type()?.is_file() {
        return None;
    }
    if walk
        .credentials
        .is_credential(&entry.path().to_string_lossy())
    {
        return None;
    }
    let rel = relative(entry.path(), &walk.root_path)?;
    if walk.seal.as_ref().is_some_and(|s| !s.shows(&rel, false)) {
        return None;
    }
    Some((entry.into_path(), rel))
}

fn relative(path: &Path, root: &Path) -> Option<String> {
    path.strip_prefix(root)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

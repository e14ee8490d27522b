//! Named roots, and confinement beneath them.
//!
//! Each root is opened once as a directory handle. Every file a tool touches is opened
//! *beneath that handle* (cap-std: `openat2` with `RESOLVE_BENEATH` where the kernel has it),
//! never by checking a path and then opening it by name, so `..`, absolute paths, symlinks
//! that point out, and a directory swapped for a symlink between check and use all fail
//! inside the kernel. On top of that:
//! - a requested path is cleaned lexically first (`aether_policy::paths`): no `..`, and an
//!   absolute path must lie under the root on a component boundary (`/ws_evil` is not `/ws`);
//! - after opening, the file's real path (from `/proc/self/fd`) is checked against the
//!   credential patterns, so a harmless-looking symlink to `.env` does not read `.env`;
//! - a regular file with more than one hard link is refused: its other name may lie outside
//!   every root, and no path check can tell;
//! - a root whose folder was removed or replaced since start-up is reported as gone instead
//!   of quietly serving the old, unlinked directory;
//! - Aether's own files (the store, given by [`Roots::set_private`]) are never opened;
//! - in a sealed root, a file is read only if its content still has the hash pinned when the
//!   operator sealed the root.
//!
//! Writes add: the root must be read-write, the path must match the operator's write
//! manifest, and no component (requested or real) may be a protected name (`.git`,
//! `.aether`, and their look-alikes).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use aether_policy::paths::{
    CredentialFilter, PathRefusal, RootMode, RootSpec, WriteGate, clean_relative,
    protected_component, strip_root,
};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::Digest as _;

use crate::{Opening, PathCheck, ToolError};

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("root {name:?} at {path}: {source}")]
    Open {
        name: String,
        path: String,
        source: io::Error,
    },
    #[error("root {name:?} at {path} is not a folder")]
    NotAFolder { name: String, path: String },
    #[error("root name {0:?} is used twice")]
    Duplicate(String),
    #[error("root {name:?}: {message}")]
    Invalid { name: String, message: String },
    #[error(
        "root {inner:?} ({inner_path}) lies inside root {outer:?} ({outer_path}), which {why}: \
         through {outer:?} the tools would reach past {inner:?}'s own limits; configure the two \
         folders side by side, or give {inner:?} no stricter settings than {outer:?}"
    )]
    Nested {
        inner: String,
        inner_path: String,
        outer: String,
        outer_path: String,
        why: String,
    },
}

/// Why a root nested in `outer` would be reachable through `outer` with less protection than
/// its own settings give it, if it would.
fn laxer_around(inner: &Root, outer: &Root) -> Option<String> {
    let rank = |m: RootMode| match m {
        RootMode::ReadWrite => 0,
        RootMode::ReadOnly => 1,
        RootMode::Sealed => 2,
    };
    let mode = |m: RootMode| match m {
        RootMode::ReadWrite => "rw",
        RootMode::ReadOnly => "ro",
        RootMode::Sealed => "sealed",
    };
    if rank(inner.mode) > rank(outer.mode) {
        return Some(format!(
            "is {} where it is {}",
            mode(outer.mode),
            mode(inner.mode)
        ));
    }
    if outer.mode == RootMode::ReadWrite && inner.gate.globs().is_some() {
        return Some("takes writes anywhere where it takes them only where its globs allow".into());
    }
    if outer.mode == RootMode::ReadWrite && outer.allow_delete && !inner.allow_delete {
        return Some("allows deletes where it does not".into());
    }
    None
}

/// The files of a sealed root as pinned when the operator sealed it.
#[derive(Debug, Default)]
pub struct SealManifest {
    /// Which seal this is (the store counts them); a re-seal has a higher one.
    pub generation: i64,
    /// The root's path when sealed: a seal of another folder does not count.
    pub root_path: String,
    /// When, in microseconds since the epoch.
    pub at_us: i64,
    /// Root-relative path → (sha256 hex, size).
    pub pins: HashMap<String, (String, u64)>,
    /// The folders that hold a pin, worked out on first use ([`SealManifest::shows`]).
    pub folders: std::sync::OnceLock<std::collections::HashSet<String>>,
}

impl SealManifest {
    /// Whether a sealed root shows `rel` (root-relative, clean) at all — its name, size, time,
    /// a match in a search: a pinned file, or a folder that holds one. What was added since
    /// the seal is not there for the tools.
    pub fn shows(&self, rel: &str, is_dir: bool) -> bool {
        if !is_dir {
            return self.pins.contains_key(rel);
        }
        rel.is_empty()
            || self
                .folders
                .get_or_init(|| {
                    self.pins
                        .keys()
                        .flat_map(|k| k.match_indices('/').map(|(at, _)| k[..at].to_string()))
                        .collect()
                })
                .contains(rel)
    }
}

/// A named folder the tools may work in.
#[derive(Debug)]
pub struct Root {
    pub name: String,
    /// The canonical path, symlinks resolved.
    pub path: PathBuf,
    pub mode: RootMode,
    /// Where writes may land (the operator's manifest).
    pub gate: WriteGate,
    /// Whether `delete_file` may delete here.
    pub allow_delete: bool,
    dir: Dir,
    identity: (u64, u64),
    seal: RwLock<Option<Arc<SealManifest>>>,
}

/// A path that passed the lexical checks: a root and a clean path relative to it.
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    pub root: &'a Root,
    pub rel: &'a str,
}

#[derive(Debug)]
pub struct Roots {
    roots: Vec<Root>,
    /// Credential patterns, and Aether's own files (never opened by a tool).
    credentials: CredentialFilter,
}

impl Roots {
    pub fn open(specs: &[RootSpec]) -> Result<Roots, RootError> {
        let mut roots: Vec<Root> = Vec::new();
        for spec in specs {
            if roots.iter().any(|r| r.name == spec.name) {
                return Err(RootError::Duplicate(spec.name.clone()));
            }
            let open_err = |source| RootError::Open {
                name: spec.name.clone(),
                path: spec.path.clone(),
                source,
            };
            let path = std::fs::canonicalize(&spec.path).map_err(open_err)?;
            let meta = std::fs::metadata(&path).map_err(open_err)?;
            if !meta.is_dir() {
                return Err(RootError::NotAFolder {
                    name: spec.name.clone(),
                    path: spec.path.clone(),
                });
            }
            let gate =
                WriteGate::new(spec.writable.as_deref()).map_err(|message| RootError::Invalid {
                    name: spec.name.clone(),
                    message,
                })?;
            let dir = Dir::open_ambient_dir(&path, ambient_authority()).map_err(open_err)?;
            roots.push(Root {
                name: spec.name.clone(),
                path,
                mode: spec.mode,
                gate,
                allow_delete: spec.allow_delete,
                dir,
                identity: (meta.dev(), meta.ino()),
                seal: RwLock::new(None),
            });
        }
        // The file tools judge a path by the root it was asked through: a stricter root inside
        // a laxer one would be open through the laxer one.
        for inner in &roots {
            for outer in &roots {
                // (The same folder under two names counts as nested both ways.)
                if inner.name != outer.name
                    && inner.path.starts_with(&outer.path)
                    && let Some(why) = laxer_around(inner, outer)
                {
                    return Err(RootError::Nested {
                        inner: inner.name.clone(),
                        inner_path: inner.path.display().to_string(),
                        outer: outer.name.clone(),
                        outer_path: outer.path.display().to_string(),
                        why,
                    });
                }
            }
        }
        Ok(Roots {
            roots,
            credentials: CredentialFilter::default(),
        })
    }

    /// Marks paths (Aether's store and its folder, the configuration, the rules file) that no
    /// tool may open, read or write, whichever root they lie in, whether or not they exist.
    pub fn set_private(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        // Each path in two forms: its real path (what a write through a link reaches), and its
        // real folder with its own name (the name a link itself has, and a file that does not
        // exist yet).
        let mut private = Vec::new();
        let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        for p in paths {
            // Absolute, whatever the caller gave: a relative path would match no real path.
            let p = if p.is_absolute() { p } else { here.join(p) };
            let named = match (p.parent(), p.file_name()) {
                (Some(dir), Some(name)) => real_as_far_as_it_exists(dir).join(name),
                _ => p.clone(),
            };
            if let Ok(real) = std::fs::canonicalize(&p)
                && real != named
            {
                private.push(real);
            }
            private.push(named);
        }
        self.credentials = self.credentials.clone().with_private(private);
    }

    /// Whether `real` (a real path) is one of Aether's own files or inside one of its folders.
    pub fn is_private(&self, real: &Path) -> bool {
        self.credentials.is_private(&real.to_string_lossy())
    }

    /// Whether `real` is private or a folder that holds a private path.
    pub fn holds_private(&self, real: &Path) -> bool {
        self.credentials.holds_private(&real.to_string_lossy())
    }

    pub fn iter(&self) -> impl Iterator<Item = &Root> {
        self.roots.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Root> {
        self.roots.iter().find(|r| r.name == name)
    }

    pub fn credentials(&self) -> &CredentialFilter {
        &self.credentials
    }

    /// Removes the temporary files of writes a crash interrupted (`.aether-tmp-…`, see
    /// `aether_policy::paths::is_write_temp`) from the read-write roots: regular files older
    /// than `older_than`, so that a write another process is making right now keeps its own.
    /// Walked without following links, never into `.git`; blocking. Returns how many.
    pub fn remove_write_leftovers(&self, older_than: std::time::Duration) -> usize {
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for root in self.roots.iter().filter(|r| r.mode == RootMode::ReadWrite) {
            let mut it = walkdir::WalkDir::new(&root.path)
                .follow_links(false)
                .min_depth(1)
                .into_iter();
            while let Some(entry) = it.next() {
                let Ok(entry) = entry else { continue };
                if entry.file_type().is_dir() && entry.file_name() == ".git" {
                    it.skip_current_dir();
                    continue;
                }
                let old = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| now.duration_since(t).ok())
                    .is_some_and(|age| age >= older_than);
                if entry.file_type().is_file()
                    && entry
                        .file_name()
                        .to_str()
                        .is_some_and(aether_policy::paths::is_write_temp)
                    && old
                    && std::fs::remove_file(entry.path()).is_ok()
                {
                    tracing::info!(path = %entry.path().display(), "removed the temporary file of an interrupted write");
                    removed += 1;
                }
            }
        }
        removed
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.roots.iter().map(|r| r.name.as_str()).collect();
        if names.is_empty() {
            "none are configured".into()
        } else {
            names.join(", ")
        }
    }

    /// Finds the root and the clean relative path for a request. `root` names a root; without
    /// it, a relative path is taken from the first root and an absolute one from whichever
    /// root contains it. `rel` receives the cleaned path.
    pub fn locate<'a>(
        &'a self,
        root: Option<&str>,
        path: &str,
        rel: &'a mut String,
    ) -> Result<Located<'a>, ToolError> {
        let deny = |r: PathRefusal| ToolError::denied("confinement", r);
        let chosen = match root {
            Some(name) => Some(self.get(name).ok_or_else(|| {
                ToolError::InvalidArguments(format!(
                    "no root is named {name:?}; roots: {}",
                    self.names()
                ))
            })?),
            None => None,
        };
        let (found, relative) = if path.starts_with('/') {
            match chosen {
                Some(r) => (
                    r,
                    strip_root(path, &r.path.to_string_lossy())
                        .ok_or_else(|| {
                            deny(PathRefusal::NotUnderRoot {
                                path: path.into(),
                                root: r.name.clone(),
                            })
                        })?
                        .to_string(),
                ),
                None => self
                    .roots
                    .iter()
                    .find_map(|r| {
                        strip_root(path, &r.path.to_string_lossy())
                            .map(|rest| (r, rest.to_string()))
                    })
                    .ok_or_else(|| deny(PathRefusal::OutsideRoots(path.into())))?,
            }
        } else {
            let r = match chosen {
                Some(r) => r,
                None => self.roots.first().ok_or_else(|| {
                    ToolError::failed("no roots are configured, so there are no files to work with")
                })?,
            };
            (r, path.to_string())
        };
        *rel = clean_relative(&relative).map_err(deny)?;
        if found.is_credential(&self.credentials, rel) {
            if self.is_private(&found.path.join(rel.as_str())) {
                return Err(private(&found.display(rel)));
            }
            return Err(deny(PathRefusal::Credential(found.display(rel))));
        }
        found.check_present()?;
        found.seal_in_force()?;
        Ok(Located { root: found, rel })
    }
}

impl Root {
    /// Whether `rel`, under this root, is a credential file or inside a credential folder,
    /// judged on its whole path (so a root opened at `~/.aws` is all credentials).
    pub fn is_credential(&self, credentials: &CredentialFilter, rel: &str) -> bool {
        let full = if rel.is_empty() {
            self.path.clone()
        } else {
            self.path.join(rel)
        };
        credentials.is_credential(&full.to_string_lossy())
    }

    /// `root:rel` as shown to callers.
    pub fn display(&self, rel: &str) -> String {
        if rel.is_empty() {
            format!("{}:/", self.name)
        } else {
            format!("{}:{rel}", self.name)
        }
    }

    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// Fails if the root's folder was removed or replaced since it was opened.
    pub fn check_present(&self) -> Result<(), ToolError> {
        match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.identity => Ok(()),
            _ => Err(ToolError::failed(format!(
                "root {:?} ({}) is no longer available: its folder was removed or replaced; \
                 the operator must restore it or restart Aether",
                self.name,
                self.path.display()
            ))),
        }
    }

    /// The seal in force, if the root is sealed and a seal is on record.
    pub fn seal(&self) -> Option<Arc<SealManifest>> {
        self.seal.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Installs the seal read from the store (a re-seal replaces it).
    pub fn set_seal(&self, manifest: Option<SealManifest>) {
        *self.seal.write().unwrap_or_else(|e| e.into_inner()) = manifest.map(Arc::new);
    }

    /// For a sealed root, the seal in force; a sealed root without one on record (or sealed
    /// at another folder) serves nothing at all — no name, size, time, match or count — and
    /// is refused. `None` for a root that is not sealed.
    pub fn seal_in_force(&self) -> Result<Option<Arc<SealManifest>>, ToolError> {
        if self.mode != RootMode::Sealed {
            return Ok(None);
        }
        let reseal = format!(
            "the operator seals it with `aether roots seal {}`",
            self.name
        );
        let Some(seal) = self.seal() else {
            return Err(ToolError::denied(
                "sealed",
                format!(
                    "root {:?} is sealed but no seal is on record; nothing in it is served (and nothing can be changed) until {reseal}",
                    self.name
                ),
            ));
        };
        if seal.root_path != self.path.to_string_lossy() {
            return Err(ToolError::denied(
                "sealed",
                format!(
                    "root {:?} was sealed at {}, not {}; nothing in it is served (and nothing can be changed) until {reseal}",
                    self.name,
                    seal.root_path,
                    self.path.display()
                ),
            ));
        }
        Ok(Some(seal))
    }

    /// In a sealed root, refuses a file whose content no longer has its pinned hash, and
    /// otherwise returns the content that was hashed: a copy taken while hashing (an anonymous
    /// in-memory file), so what is then read is exactly what was checked, however the file on
    /// disk changes meanwhile. `real_rel` is the file's real root-relative path. Outside a
    /// sealed root, `file` itself.
    pub fn verified(&self, real_rel: &str, file: File) -> Result<File, ToolError> {
        let Some(seal) = self.seal_in_force()? else {
            return Ok(file);
        };
        let shown = self.display(real_rel);
        let reseal = format!(
            "the operator re-seals it with `aether roots seal {}`",
            self.name
        );
        let Some((pinned, size)) = seal.pins.get(real_rel) else {
            return Err(ToolError::denied(
                "sealed",
                format!(
                    "{shown} was added after root {:?} was sealed; it is not read until {reseal}",
                    self.name
                ),
            ));
        };
        let changed = || {
            ToolError::denied(
                "sealed",
                format!(
                    "{shown} changed on disk since root {:?} was sealed; it is not read until {reseal}",
                    self.name
                ),
            )
        };
        let meta = file.metadata().map_err(|e| self.io_error(real_rel, e))?;
        if meta.len() != *size {
            return Err(changed());
        }
        let (copy, hash) = hashed_copy(&file, *size).map_err(|e| self.io_error(real_rel, e))?;
        if &hash != pinned {
            return Err(changed());
        }
        Ok(copy)
    }

    /// Every regular file under the root with its content hash and size, for sealing: walked
    /// without following symlinks, each file opened beneath the root without following one.
    /// Aether's own files and credential files are left out (no tool reads them anyway).
    pub fn pins(&self, credentials: &CredentialFilter) -> io::Result<Vec<(String, String, u64)>> {
        use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
        let mut options = read_options();
        options.follow(FollowSymlinks::No);
        let mut pins = Vec::new();
        let walk = ignore::WalkBuilder::new(&self.path)
            .standard_filters(false)
            .follow_links(false)
            .build();
        for entry in walk {
            let entry = entry.map_err(io::Error::other)?;
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if credentials.is_credential(&entry.path().to_string_lossy()) {
                continue;
            }
            let Some(rel) = self.relative_of(entry.path()) else {
                continue;
            };
            let file = self.dir.open_with(&rel, &options)?.into_std();
            let meta = file.metadata()?;
            if !meta.is_file() {
                continue;
            }
            pins.push((rel, hash_file(&file)?, meta.len()));
        }
        pins.sort();
        Ok(pins)
    }

    /// Checks that a write may land on `rel` (a clean path under this root): the root is
    /// read-write, the operator's manifest allows the path, and no component is protected.
    pub fn check_writable(&self, rel: &str, action: &str) -> Result<(), ToolError> {
        let shown = self.display(rel);
        if self.mode != RootMode::ReadWrite {
            return Err(ToolError::denied(
                "root-mode",
                format!(
                    "root {:?} is {}: nothing under it can be changed ({action} {shown} refused); \
                     list_roots shows which roots are read-write",
                    self.name,
                    match self.mode {
                        RootMode::Sealed => "sealed (read-only and pinned)",
                        _ => "read-only",
                    }
                ),
            ));
        }
        if rel.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "{shown} is the root itself; give a path inside it"
            )));
        }
        if let Some((component, name)) = protected_component(rel) {
            return Err(protected(&shown, component, name));
        }
        if !self.gate.allows(rel) {
            return Err(ToolError::denied(
                "write-manifest",
                format!(
                    "{shown} is outside the paths the operator made writable in root {:?} ({}); \
                     write somewhere those globs match",
                    self.name,
                    self.gate.globs().unwrap_or_default().join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Opens the folder that will hold `rel` (a path that passed [`Root::check_writable`])
    /// beneath the root, creating missing folders when `create` is set, and checks where it
    /// really is: still under the root, not protected, not a credential folder, not private.
    /// Returns the folder, its real path, the file name, and the folders it created
    /// (root-relative, outermost first).
    pub fn open_parent(
        &self,
        roots: &Roots,
        paths: &dyn PathCheck,
        rel: &str,
        create: bool,
    ) -> Result<(Dir, PathBuf, String, Vec<String>), ToolError> {
        let mut created = Vec::new();
        let opened = self.open_parent_in(roots, paths, rel, create, &mut created);
        if opened.is_err() {
            // A refused write leaves no folder behind (one could be named like a private file
            // that a link let it reach).
            for folder in created.iter().rev() {
                let _ = self.dir.remove_dir(folder);
            }
        }
        opened.map(|(dir, real, name)| (dir, real, name, created))
    }

    fn open_parent_in(
        &self,
        roots: &Roots,
        paths: &dyn PathCheck,
        rel: &str,
        create: bool,
        created: &mut Vec<String>,
    ) -> Result<(Dir, PathBuf, String), ToolError> {
        let (parent, name) = match rel.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => ("", rel),
        };
        if create && !parent.is_empty() {
            let mut at = String::new();
            for component in parent.split('/') {
                if !at.is_empty() {
                    at.push('/');
                }
                let above = at.trim_end_matches('/').to_string();
                at.push_str(component);
                match land_git_piece(&self.dir, &above, component, || self.dir.create_dir(&at)) {
                    Ok(()) => created.push(at.clone()),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(self.io_error(&at, e)),
                }
            }
        }
        let dir = if parent.is_empty() {
            self.dir.try_clone().map_err(|e| self.io_error(parent, e))?
        } else {
            self.dir.open_dir(parent).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => ToolError::failed(format!(
                    "{}: the folder does not exist; create it first (create_directory), or pass create_parents",
                    self.display(parent)
                )),
                _ => self.io_error(parent, e),
            })?
        };
        // The folder is checked for confinement; the rules judge where the write lands (below).
        let real =
            self.check_real_path(parent, &dir, Opening::unruled(&roots.credentials), true)?;
        if roots.is_private(&real) {
            return Err(private(&self.display(rel)));
        }
        if let Some(real_rel) = self.relative_of(&real) {
            if let Some((component, protected_as)) = protected_component(&real_rel) {
                return Err(protected(&self.display(rel), component, protected_as));
            }
            // The operator's write globs, on where the write really lands: a folder link
            // inside an allowed path must not carry it elsewhere in the root.
            let real_rel = real_rel.trim_start_matches('/');
            let landing = if real_rel.is_empty() {
                name.to_string()
            } else {
                format!("{real_rel}/{name}")
            };
            if !self.gate.allows(&landing) {
                return Err(ToolError::denied(
                    "write-manifest",
                    format!(
                        "{} lands on {} (through a link), outside the paths the operator made \
                         writable in root {:?} ({})",
                        self.display(rel),
                        self.display(&landing),
                        self.name,
                        self.gate.globs().unwrap_or_default().join(", ")
                    ),
                ));
            }
        }
        if let Some(why) = git_folder_write(&self.path, &real, name) {
            return Err(ToolError::denied(
                "protected-path",
                format!("{} is not written: {why}; refused", self.display(rel)),
            ));
        }
        let full = real.join(name);
        if roots.credentials.is_credential(&full.to_string_lossy()) {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} resolves to {}, a credential file; Aether does not let tools write credentials",
                    self.display(rel),
                    full.display()
                ),
            ));
        }
        if roots.is_private(&full) || roots.holds_private(&full) {
            return Err(private(&self.display(rel)));
        }
        // The operator's path rules, on where the write really lands.
        if let Some(landing) = self.relative_of(&full) {
            let is_dir = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir());
            paths.check(self, landing.trim_start_matches('/'), is_dir)?;
        }
        Ok((dir, real, name.to_string()))
    }

    /// Maps an IO error on `rel` to a message for the caller.
    pub fn io_error(&self, rel: &str, e: io::Error) -> ToolError {
        let shown = self.display(rel);
        if let Some(piece) = e.get_ref().and_then(|i| i.downcast_ref::<GitPiece>()) {
            return ToolError::denied(
                "protected-path",
                format!("{shown} is not written: {piece}; refused"),
            );
        }
        match e.kind() {
            _ if is_escape(&e) => ToolError::denied(
                "confinement",
                format!(
                    "{shown} leads outside root {:?} (through a symlink or '..'); refused",
                    self.name
                ),
            ),
            io::ErrorKind::NotFound => {
                ToolError::failed(format!("{shown}: no such file or folder"))
            }
            io::ErrorKind::NotADirectory => {
                ToolError::failed(format!("{shown}: a part of the path is not a folder"))
            }
            io::ErrorKind::IsADirectory => {
                ToolError::failed(format!("{shown} is a folder, not a file"))
            }
            io::ErrorKind::PermissionDenied => {
                ToolError::failed(format!("{shown}: permission denied"))
            }
            _ => ToolError::failed(format!("{shown}: {e}")),
        }
    }

    /// Opens a regular file beneath the root, with every check in the module docs.
    pub fn open_file(
        &self,
        rel: &str,
        opening: Opening<'_>,
    ) -> Result<(File, std::fs::Metadata), ToolError> {
        if rel.is_empty() {
            return Err(ToolError::failed(format!(
                "{} is a folder, not a file",
                self.display(rel)
            )));
        }
        let file = self
            .dir
            .open_with(rel, &read_options())
            .map_err(|e| self.io_error(rel, e))?
            .into_std();
        let meta = file.metadata().map_err(|e| self.io_error(rel, e))?;
        if meta.is_dir() {
            return Err(ToolError::failed(format!(
                "{} is a folder, not a file",
                self.display(rel)
            )));
        }
        if !meta.is_file() {
            return Err(ToolError::failed(format!(
                "{} is not a regular file",
                self.display(rel)
            )));
        }
        if meta.nlink() > 1 {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} has {} hard links; another of its names may lie outside every root, so Aether refuses it",
                    self.display(rel),
                    meta.nlink()
                ),
            ));
        }
        let real = self.check_real_path(rel, &file, opening, false)?;
        let real_rel = self.relative_of(&real).unwrap_or_default();
        let file = self.verified(&real_rel, file)?;
        Ok((file, meta))
    }

    /// Opens a folder beneath the root and returns it with its real path.
    pub fn open_folder(
        &self,
        rel: &str,
        opening: Opening<'_>,
    ) -> Result<(Dir, PathBuf), ToolError> {
        let dir = if rel.is_empty() {
            self.dir.try_clone().map_err(|e| self.io_error(rel, e))?
        } else {
            self.dir.open_dir(rel).map_err(|e| self.io_error(rel, e))?
        };
        let real = self.check_real_path(rel, &dir, opening, true)?;
        Ok((dir, real))
    }

    /// Opens `rel` for reading (with [`read_options`]' flags) exactly where it is: beneath the
    /// root and through no symlink in any component (`openat2` with `RESOLVE_BENEATH` and
    /// `RESOLVE_NO_SYMLINKS`). What it opens is the file at `root/rel`, so where it landed needs
    /// no check. `None` where the kernel has no `openat2` (before 5.6): open the usual way and
    /// check the landing with [`Root::check_real_path`].
    pub fn open_exact(&self, rel: &Path) -> Option<io::Result<File>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use std::sync::atomic::{AtomicBool, Ordering};
        static MISSING: AtomicBool = AtomicBool::new(false);
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let opened = rustix::fs::openat2(
            &self.dir,
            rel,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        );
        match opened {
            Ok(fd) => Some(Ok(File::from(fd))),
            Err(rustix::io::Errno::NOSYS) => {
                MISSING.store(true, Ordering::Relaxed);
                None
            }
            Err(e) => Some(Err(e.into())),
        }
    }

    /// The real path of an open handle must still lie under the root, must not be a
    /// credential or private file, and must pass the call's path rules (`is_dir`: the handle
    /// is a folder's).
    pub fn check_real_path(
        &self,
        rel: &str,
        fd: &impl AsRawFd,
        opening: Opening<'_>,
        is_dir: bool,
    ) -> Result<PathBuf, ToolError> {
        let credentials = opening.credentials;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| self.io_error(rel, e))?;
        let real_rel = real
            .strip_prefix(&self.path)
            .map_err(|_| self.io_error(rel, escape_error()))?
            .to_string_lossy()
            .into_owned();
        if credentials.is_private(&real.to_string_lossy()) {
            return Err(private(&self.display(rel)));
        }
        if credentials.is_credential(&real.to_string_lossy()) {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "{} resolves to {}, a credential file; refused",
                    self.display(rel),
                    self.display(&real_rel)
                ),
            ));
        }
        opening
            .paths
            .check(self, real_rel.trim_start_matches('/'), is_dir)?;
        Ok(real)
    }

    /// A path found under `real_dir` (a real path inside this root), as root-relative text.
    pub fn relative_of(&self, path: &Path) -> Option<String> {
        path.strip_prefix(&self.path)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }
}

/// A folder git may take for a repository when run inside it, judged as loosely as git
/// judges it: a `HEAD` of any kind (a file, or a link, even dangling), and `objects` and
/// `refs` of any kind, or a `commondir` file naming where they are.
pub fn is_bare(dir: &Path) -> bool {
    makes_repository(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
}

/// The names whose presence makes a folder one git takes for a repository.
const GIT_PIECES: [&str; 4] = ["HEAD", "objects", "refs", "commondir"];

/// Whether `name` is one of [`GIT_PIECES`] (without case: a filesystem may fold it).
pub fn is_git_piece(name: &str) -> bool {
    GIT_PIECES.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// Whether a folder where `there` holds is one git takes for a repository: a `HEAD`, and
/// `objects` and `refs` or a `commondir`.
pub fn makes_repository(there: impl Fn(&str) -> bool) -> bool {
    there("HEAD") && ((there("objects") && there("refs")) || there("commondir"))
}

/// Why this text is refused for a folder git takes for a repository.
pub const GIT_FOLDER: &str = "a git repository's own folder, whose config and hooks run programs";

/// Why a write of `name` in the real folder `parent` (inside the root at `top`) would change a
/// git repository's own files, if it would: `parent` or a folder above it (up to the root)
/// is one git would take for a repository (a bare one, or the folder a `gitdir:` file names,
/// whatever it is called), or the write would make `parent` one.
pub fn git_folder_write(top: &Path, parent: &Path, name: &str) -> Option<String> {
    let mut at = Some(parent);
    while let Some(folder) = at.filter(|f| f.starts_with(top)) {
        if is_bare(folder) {
            return Some(format!(
                "{} is a git repository's own folder (it has HEAD, objects and refs), whose \
                 config and hooks run programs",
                folder.display()
            ));
        }
        at = folder.parent();
    }
    let there =
        |n: &str| n.eq_ignore_ascii_case(name) || std::fs::symlink_metadata(parent.join(n)).is_ok();
    (is_git_piece(name) && makes_repository(there)).then(|| {
        format!(
            "writing {name} would make {} a git repository's own folder, whose config and \
             hooks would run programs",
            parent.display()
        )
    })
}

/// Serializes the arrival of the names that can make a folder one git takes for a repository
/// ([`land_git_piece`]).
static ARRIVALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Makes `name` arrive in the folder `parent` (relative to `dir`; "" for `dir` itself) by
/// `land` (a rename or a mkdir) — unless, with it, that folder would be one git takes for a
/// repository (`HEAD`, and `objects` and `refs` or `commondir`). For those names the check is
/// made again under a lock every such arrival takes, so two writes made at once cannot each
/// find the other's piece missing. Names are compared without case (a filesystem may fold it).
pub fn land_git_piece<T>(
    dir: &Dir,
    parent: &str,
    name: &str,
    land: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    if !is_git_piece(name) {
        return land();
    }
    let _held = ARRIVALS.lock().unwrap_or_else(|e| e.into_inner());
    let there = |n: &str| {
        n.eq_ignore_ascii_case(name)
            || dir
                .symlink_metadata(if parent.is_empty() {
                    n.to_string()
                } else {
                    format!("{parent}/{n}")
                })
                .is_ok()
    };
    if makes_repository(there) {
        return Err(io::Error::other(GitPiece(name.to_string())));
    }
    land()
}

/// [`land_git_piece`]'s refusal, carried in an `io::Error` to [`Root::io_error`].
#[derive(Debug)]
struct GitPiece(String);

impl std::fmt::Display for GitPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "with {} there, the folder would be {GIT_FOLDER}", self.0)
    }
}

impl std::error::Error for GitPiece {}

/// `path` with its deepest existing folder resolved to its real path and the rest (folders
/// that do not exist yet) appended as written.
pub fn real_as_far_as_it_exists(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A copy of `file`'s content in an anonymous in-memory file (read from its start, at most
/// `size` bytes and one more, so a file that grew does not match), with the content's hash.
fn hashed_copy(file: &File, size: u64) -> io::Result<(File, String)> {
    use std::io::{Seek, Write};
    let mut copy = File::from(rustix::fs::memfd_create(
        "aether-sealed",
        rustix::fs::MemfdFlags::CLOEXEC,
    )?);
    let hash = hash_reading(file, Some(size + 1), |chunk| copy.write_all(chunk))?;
    copy.rewind()?;
    Ok((copy, hash))
}

/// sha256 (hex) of everything in `file`, read from the start by position (the handle's offset
/// is left alone).
pub fn hash_file(file: &File) -> io::Result<String> {
    hash_reading(file, None, |_| Ok(()))
}

/// sha256 (hex) of `file` from its start, read by position, stopping once at least `limit`
/// bytes are read (or at the end); each chunk read is also handed to `each`.
fn hash_reading(
    file: &File,
    limit: Option<u64>,
    mut each: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<String> {
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    while limit.is_none_or(|limit| at < limit) {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        each(&buf[..n])?;
        at += n as u64;
    }
    Ok(hex::encode(hasher.finalize()))
}

fn protected(shown: &str, component: &str, name: &str) -> ToolError {
    let why = if name == ".git" {
        "git's config and hooks run programs, so agents may not change anything in it"
    } else {
        "it holds Aether's own store"
    };
    let spelled = if component == name {
        String::new()
    } else {
        format!(" ({component:?} is treated as {name})")
    };
    ToolError::denied(
        "protected-path",
        format!("{shown} is inside {name}{spelled}: {why}; refused"),
    )
}

fn private(shown: &str) -> ToolError {
    ToolError::denied(
        "protected-path",
        format!(
            "{shown} is, or holds, one of Aether's own files (a store, a configuration \
             (aether.toml), the operator's rules (permissions.yaml)); tools cannot touch it"
        ),
    )
}

/// How every file a tool reads is opened: read-only, non-blocking (a FIFO or a device named
/// like a file must not hang the open; regular files read the same either way) and never as a
/// controlling terminal. The type is checked right after the open.
pub fn read_options() -> cap_std::fs::OpenOptions {
    use cap_std::fs::OpenOptionsExt;
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    options
}

fn escape_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a path led outside of the filesystem",
    )
}

/// cap-std reports an attempt to leave the directory as this error (and the kernel's
/// `RESOLVE_BENEATH` as EXDEV).
fn is_escape(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc_exdev()) || e.to_string().contains("outside of the filesystem")
}

const fn libc_exdev() -> i32 {
    18 // EXDEV on Linux
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_piece_of_a_repository_never_lands() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        dir.create_dir("r").unwrap();
        dir.write("r/HEAD", "ref: refs/heads/main\n").unwrap();
        dir.create_dir("r/objects").unwrap();
        // Judged at the landing itself, whatever an earlier check found.
        let e = land_git_piece(&dir, "r", "refs", || dir.create_dir("r/refs")).unwrap_err();
        assert!(e.to_string().contains("git repository"), "{e}");
        assert!(!tmp.path().join("r/refs").exists());
        // In any case, and as a commondir.
        assert!(land_git_piece(&dir, "r", "REFS", || dir.create_dir("r/REFS")).is_err());
        assert!(land_git_piece(&dir, "r", "commondir", || dir.write("r/commondir", "..")).is_err());
        // Other names, and the pieces where they make no repository, land.
        land_git_piece(&dir, "r", "notes", || dir.create_dir("r/notes")).unwrap();
        dir.create_dir("s").unwrap();
        land_git_piece(&dir, "s", "refs", || dir.create_dir("s/refs")).unwrap();
        assert!(tmp.path().join("s/refs").is_dir());
    }
}

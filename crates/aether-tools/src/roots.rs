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
//!   of quietly serving the old, unlinked directory.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use aether_policy::paths::{
    CredentialFilter, PathRefusal, RootMode, RootSpec, clean_relative, strip_root,
};
use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::ToolError;

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
}

/// A named folder the tools may work in.
#[derive(Debug)]
pub struct Root {
    pub name: String,
    /// The canonical path, symlinks resolved.
    pub path: PathBuf,
    pub mode: RootMode,
    dir: Dir,
    identity: (u64, u64),
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
            let dir = Dir::open_ambient_dir(&path, ambient_authority()).map_err(open_err)?;
            roots.push(Root {
                name: spec.name.clone(),
                path,
                mode: spec.mode,
                dir,
                identity: (meta.dev(), meta.ino()),
            });
        }
        Ok(Roots {
            roots,
            credentials: CredentialFilter::default(),
        })
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
            return Err(deny(PathRefusal::Credential(found.display(rel))));
        }
        found.check_present()?;
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

    /// Maps an IO error on `rel` to a message for the caller.
    pub fn io_error(&self, rel: &str, e: io::Error) -> ToolError {
        let shown = self.display(rel);
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
        credentials: &CredentialFilter,
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
        self.check_real_path(rel, &file, credentials)?;
        Ok((file, meta))
    }

    /// Opens a folder beneath the root and returns it with its real path.
    pub fn open_folder(
        &self,
        rel: &str,
        credentials: &CredentialFilter,
    ) -> Result<(Dir, PathBuf), ToolError> {
        let dir = if rel.is_empty() {
            self.dir.try_clone().map_err(|e| self.io_error(rel, e))?
        } else {
            self.dir.open_dir(rel).map_err(|e| self.io_error(rel, e))?
        };
        let real = self.check_real_path(rel, &dir, credentials)?;
        Ok((dir, real))
    }

    /// The real path of an open handle must still lie under the root and must not be a
    /// credential file.
    pub(crate) fn check_real_path(
        &self,
        rel: &str,
        fd: &impl AsRawFd,
        credentials: &CredentialFilter,
    ) -> Result<PathBuf, ToolError> {
        let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| self.io_error(rel, e))?;
        let real_rel = real
            .strip_prefix(&self.path)
            .map_err(|_| self.io_error(rel, escape_error()))?
            .to_string_lossy()
            .into_owned();
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
        Ok(real)
    }

    /// A path found under `real_dir` (a real path inside this root), as root-relative text.
    pub fn relative_of(&self, path: &Path) -> Option<String> {
        path.strip_prefix(&self.path)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }
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

//! Paths as agents write them, checked before anything touches the disk.
//!
//! This is the lexical half of confinement: a requested path becomes a clean path relative to
//! one named root, or a refusal. (The other half, opening beneath the root's directory handle
//! so that symlinks and races cannot lead out, belongs to the tools crate.) It also holds the
//! list of credential files that no tool reads by default.

use std::fmt;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// What may be done under a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RootMode {
    /// Read and write.
    #[serde(rename = "rw")]
    ReadWrite,
    /// Read only.
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read only and tamper-evident: files are pinned by hash when the operator seals the root.
    #[serde(rename = "sealed")]
    Sealed,
}

impl RootMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RootMode::ReadWrite => "rw",
            RootMode::ReadOnly => "ro",
            RootMode::Sealed => "sealed",
        }
    }

    pub fn parse(s: &str) -> Option<RootMode> {
        match s {
            "rw" => Some(RootMode::ReadWrite),
            "ro" => Some(RootMode::ReadOnly),
            "sealed" => Some(RootMode::Sealed),
            _ => None,
        }
    }
}

/// A root as given on the command line (`NAME=PATH[:ro|rw|sealed]`) or in `aether.toml`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootSpec {
    pub name: String,
    pub path: String,
    pub mode: RootMode,
    /// The operator's write manifest: globs (relative to the root) where writes are allowed.
    /// `None`: anywhere in a read-write root.
    pub writable: Option<Vec<String>>,
    /// Whether `delete_file` may delete here (off unless the operator opts in).
    pub allow_delete: bool,
}

impl RootSpec {
    pub fn parse(arg: &str, default_mode: RootMode) -> Result<RootSpec, String> {
        let (name, rest) = arg
            .split_once('=')
            .ok_or_else(|| format!("root {arg:?} must be NAME=PATH[:ro|rw|sealed]"))?;
        if !is_root_name(name) {
            return Err(format!(
                "root name {name:?} must be 1-64 characters of A-Z a-z 0-9 _ -"
            ));
        }
        let (path, mode) = match rest.rsplit_once(':') {
            Some((path, mode)) if RootMode::parse(mode).is_some() => {
                (path, RootMode::parse(mode).unwrap_or(default_mode))
            }
            _ => (rest, default_mode),
        };
        if path.is_empty() {
            return Err(format!("root {name:?} has an empty path"));
        }
        Ok(RootSpec {
            name: name.to_string(),
            path: path.to_string(),
            mode,
            writable: None,
            allow_delete: false,
        })
    }
}

pub fn is_root_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Names no tool writes under, whatever their case or Unicode spelling: `.git` (its config
/// and hooks run programs) and `.aether` (Aether's own store). Also the look-alikes a
/// case-insensitive or normalising filesystem would treat as the same folder (`.GIT`, `.git.`,
/// `.gi\u{200B}t`, fullwidth letters, `GIT~1`).
pub const PROTECTED_NAMES: [&str; 2] = [".git", ".aether"];

/// The protected name `component` stands for, if any (see [`PROTECTED_NAMES`]).
pub fn protected_name(component: &str) -> Option<&'static str> {
    use unicode_normalization::UnicodeNormalization;
    // Compatibility forms decomposed (fullwidth letters become ASCII, accented letters a base
    // letter and a combining mark), then everything that is neither a letter, a digit nor
    // punctuation dropped (zero-width characters and combining marks), then
    // case folded, then the trailing dots and spaces Windows filesystems ignore.
    let folded: String = component
        .nfkd()
        .filter(|c| c.is_alphanumeric() || c.is_ascii_punctuation())
        .flat_map(char::to_lowercase)
        .collect();
    let folded = folded.trim_end_matches(['.', ' ']);
    if folded == "git~1" {
        return Some(".git");
    }
    PROTECTED_NAMES.into_iter().find(|n| folded == *n)
}

/// Aether's own control files, known by name wherever they are: a configuration
/// (`aether.toml`, read by an `aether` started in its folder) and a rules file
/// (`permissions.yaml`, hot-reloaded by a running Aether). An agent that could create, change,
/// move or delete one could configure Aether or drop an operator's rules — for this process or
/// another sharing the folder — so no tool reads or writes them under any root, in any
/// spelling a case-insensitive or normalising filesystem would take for the same file.
pub const CONTROL_NAMES: [&str; 2] = ["aether.toml", "permissions.yaml"];

/// The control file name `component` stands for, if any (see [`CONTROL_NAMES`]). Cheap for
/// ASCII names (every walk asks it of every entry).
pub fn control_name(component: &str) -> Option<&'static str> {
    let matches = |folded: &str| {
        let folded = folded.trim_end_matches(['.', ' ']);
        // Windows' 8.3 short names, which some filesystems also answer to.
        match folded {
            "aether~1.tom" => return Some("aether.toml"),
            "permis~1.yam" => return Some("permissions.yaml"),
            _ => {}
        }
        CONTROL_NAMES.into_iter().find(|n| folded == *n)
    };
    if component.is_ascii() {
        // Shorter than the shortest name, or longer than the longest with room for trailing
        // dots and spaces: not one (no allocation for the common case).
        if component.len() < 11 || component.len() > 64 {
            return None;
        }
        return matches(&component.to_ascii_lowercase());
    }
    use unicode_normalization::UnicodeNormalization;
    let folded: String = component
        .nfkd()
        .filter(|c| c.is_alphanumeric() || c.is_ascii_punctuation())
        .flat_map(char::to_lowercase)
        .collect();
    matches(&folded)
}

/// How the temporary file of a write in progress is named (`.aether-tmp-` and 16 hex digits):
/// never listed or read by a tool, and removed at start if a crash left one.
pub const WRITE_TEMP_PREFIX: &str = ".aether-tmp-";

/// Whether `name` (a file name) is a write's temporary file.
pub fn is_write_temp(name: &str) -> bool {
    name.strip_prefix(WRITE_TEMP_PREFIX)
        .is_some_and(|rest| rest.len() == 16 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What Aether puts after a control file's name when it sets one aside (one a program made):
/// `permissions.yaml.set-aside-by-aether-<time>`. Such a file is private like a control file
/// (an agent must not read or change what an operator may want back), but no Aether loads it.
pub const SET_ASIDE: &str = ".set-aside-by-aether";

/// Whether `name` is a control file Aether set aside (see [`SET_ASIDE`]).
pub fn is_set_aside(name: &str) -> bool {
    name.find(SET_ASIDE)
        .is_some_and(|at| control_name(&name[..at]).is_some())
}

/// Whether the last component of `path` names a control file (see [`CONTROL_NAMES`]).
pub fn is_control_file(path: &str) -> bool {
    let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    control_name(name).is_some()
}

/// The first protected component of a relative path, if any.
pub fn protected_component(rel: &str) -> Option<(&str, &'static str)> {
    rel.split('/')
        .find_map(|c| protected_name(c).map(|name| (c, name)))
}

/// The operator's write manifest for one root, compiled.
#[derive(Clone, Debug)]
pub struct WriteGate {
    globs: Option<(GlobSet, Vec<String>)>,
}

impl WriteGate {
    pub fn new(writable: Option<&[String]>) -> Result<WriteGate, String> {
        let globs = match writable {
            None => None,
            Some(list) => {
                let mut set = GlobSetBuilder::new();
                for g in list {
                    set.add(
                        GlobBuilder::new(g)
                            .literal_separator(true)
                            .build()
                            .map_err(|e| format!("write glob {g:?}: {e}"))?,
                    );
                }
                Some((set.build().map_err(|e| e.to_string())?, list.to_vec()))
            }
        };
        Ok(WriteGate { globs })
    }

    /// Whether the manifest lets a write land on `rel`.
    pub fn allows(&self, rel: &str) -> bool {
        self.globs.as_ref().is_none_or(|(set, _)| set.is_match(rel))
    }

    /// The globs, for error messages; `None` when every path is writable.
    pub fn globs(&self) -> Option<&[String]> {
        self.globs.as_ref().map(|(_, list)| list.as_slice())
    }
}

/// Why a requested path (or glob) was refused before any IO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathRefusal {
    Empty,
    Nul,
    /// A `..` that climbs above the root.
    ParentComponent,
    OutsideRoots(String),
    NotUnderRoot {
        path: String,
        root: String,
    },
    Credential(String),
    TooLong,
    /// An absolute glob outside the root searched.
    GlobOutside(String),
    /// A `..` after a wildcard: where it leads depends on what the wildcard matched.
    GlobClimbs(String),
    /// A glob whose last part is `.` or `..`: it names a folder, not files.
    GlobFolder(String),
}

impl fmt::Display for PathRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathRefusal::Empty => f.write_str("the path is empty"),
            PathRefusal::Nul => f.write_str("the path contains a NUL byte"),
            PathRefusal::ParentComponent => f.write_str(
                "the path climbs out of its root with '..'; give a path inside the root (list_roots shows them)",
            ),
            PathRefusal::GlobOutside(p) => write!(
                f,
                "the pattern {p:?} is outside the root searched; give a pattern relative to `path`, or an absolute one inside the root"
            ),
            PathRefusal::GlobClimbs(p) => write!(
                f,
                "the pattern {p:?} has '..' after a wildcard, which cannot be confined; put the folder in `path` instead"
            ),
            PathRefusal::GlobFolder(p) => write!(
                f,
                "the pattern {p:?} names a folder, not files; add a name pattern (e.g. {:?})",
                format!("{}/*", p.trim_end_matches('/'))
            ),
            PathRefusal::OutsideRoots(p) => {
                write!(
                    f,
                    "{p:?} is outside every root; list_roots shows what is served"
                )
            }
            PathRefusal::NotUnderRoot { path, root } => {
                write!(f, "{path:?} is not under root {root:?}")
            }
            PathRefusal::Credential(p) => write!(
                f,
                "{p:?} looks like a credential file; Aether does not let tools read credentials"
            ),
            PathRefusal::TooLong => f.write_str("the path is longer than 4096 bytes"),
        }
    }
}

/// A clean path relative to a root: no leading `/`, no `.` or `..`, no empty components.
/// The empty string is the root itself.
///
/// A `..` takes away the component before it, lexically (`src/../README.md` is
/// `README.md`), as URLs and Go's `path.Clean` read it; one that would climb above the root is
/// refused. Lexically, not through symlinks: `link/..` is the folder holding `link`, whatever
/// `link` points at, and what is judged is exactly what is then opened — beneath the root's
/// handle, so no link can lead out either.
pub fn clean_relative(requested: &str) -> Result<String, PathRefusal> {
    if requested.len() > 4096 {
        return Err(PathRefusal::TooLong);
    }
    if requested.contains('\0') {
        return Err(PathRefusal::Nul);
    }
    let mut parts = Vec::new();
    for part in requested.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathRefusal::ParentComponent);
                }
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

/// Where a glob over a root looks, and what it matches there (see [`confine_glob`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobPlace {
    /// The folder walked, relative to the root and clean.
    pub folder: String,
    /// The pattern matched under it.
    pub pattern: String,
    /// Whether the pattern matches file names anywhere below (it had no `/`), rather than
    /// paths relative to `folder`.
    pub by_name: bool,
}

/// Whether a path component holds a glob's special characters.
fn is_wild(component: &str) -> bool {
    component.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// A glob confined like a path: `pattern`, given with the (clean, root-relative) folder
/// `folder` to search under a root at `root_path`, becomes the folder really searched and the
/// pattern matched there. The leading literal components are folded into the folder (a `..`
/// among them taking one away, as in [`clean_relative`]), so `../docs/*.md` from `src` looks
/// in `docs`; an absolute pattern must lie under the root (`folder` is then ignored). A `..`
/// that climbs above the root, an absolute pattern outside it, a `..` after a wildcard
/// (`*/../x`: where it leads depends on what matched) and a pattern that names a folder are
/// refused — a glob never silently matches against nothing outside.
pub fn confine_glob(
    folder: &str,
    pattern: &str,
    root_path: &str,
) -> Result<GlobPlace, PathRefusal> {
    if pattern.len() > 4096 {
        return Err(PathRefusal::TooLong);
    }
    if pattern.contains('\0') {
        return Err(PathRefusal::Nul);
    }
    if pattern.trim().is_empty() {
        return Err(PathRefusal::Empty);
    }
    let (base, rest) = if pattern.starts_with('/') {
        let rest = strip_root(pattern, root_path)
            .ok_or_else(|| PathRefusal::GlobOutside(pattern.to_string()))?;
        (String::new(), rest)
    } else {
        (clean_relative(folder)?, pattern)
    };
    if !pattern.starts_with('/') && !pattern.contains('/') {
        if matches!(pattern, "." | "..") {
            return Err(PathRefusal::GlobFolder(pattern.to_string()));
        }
        return Ok(GlobPlace {
            folder: base,
            pattern: pattern.to_string(),
            by_name: true,
        });
    }
    let components: Vec<&str> = rest.split('/').collect();
    let mut parts: Vec<&str> = base.split('/').filter(|c| !c.is_empty()).collect();
    let mut at = 0;
    while at + 1 < components.len() && !is_wild(components[at]) {
        match components[at] {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathRefusal::ParentComponent);
                }
            }
            literal => parts.push(literal),
        }
        at += 1;
    }
    let remaining: Vec<&str> = components[at..]
        .iter()
        .copied()
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if components[at..].contains(&"..") {
        return Err(
            if components.last() == Some(&"..") && at + 1 == components.len() {
                PathRefusal::GlobFolder(pattern.to_string())
            } else {
                PathRefusal::GlobClimbs(pattern.to_string())
            },
        );
    }
    if remaining.is_empty() {
        return Err(PathRefusal::GlobFolder(pattern.to_string()));
    }
    Ok(GlobPlace {
        folder: parts.join("/"),
        pattern: remaining.join("/"),
        by_name: false,
    })
}

/// Maps an absolute `requested` path onto `root_path` (itself absolute and canonical): the
/// relative rest if it lies under the root on a component boundary, else `None`.
/// `/srv/ws_evil/x` is not under `/srv/ws`.
pub fn strip_root<'a>(requested: &'a str, root_path: &str) -> Option<&'a str> {
    let root = root_path.trim_end_matches('/');
    let rest = requested.strip_prefix(root)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/')
    }
}

/// Credential files no tool reads, lists for search, or (later) writes, unless the operator
/// says otherwise. Matched case-insensitively against the path relative to its root.
pub const CREDENTIAL_GLOBS: &[&str] = &[
    "**/.aether",
    "**/.aether/**",
    "**/.env",
    "**/.env.*",
    "**/*.env",
    "**/.ssh",
    "**/.ssh/**",
    "**/.aws",
    "**/.aws/**",
    "**/.azure",
    "**/.azure/**",
    "**/.gnupg",
    "**/.gnupg/**",
    "**/.config/gcloud",
    "**/.config/gcloud/**",
    "**/.config/gh/hosts.yml",
    "**/.kube/config",
    "**/.docker/config.json",
    "**/.git/config",
    "**/.aether",
    "**/.aether/**",
    "**/.git/**/config",
    "**/.envrc",
    "**/.cargo/credentials",
    "**/.cargo/credentials.toml",
    "**/.vault-token",
    "**/*.ppk",
    "**/.terraformrc",
    "**/credentials.tfrc.json",
    "**/.gem/credentials",
    "**/.config/hub",
    "**/.git-credentials",
    "**/.netrc",
    "**/_netrc",
    "**/.npmrc",
    "**/.pypirc",
    "**/.pgpass",
    "**/.my.cnf",
    "**/.htpasswd",
    "**/id_rsa",
    "**/id_rsa_*",
    "**/id_dsa",
    "**/id_ecdsa",
    "**/id_ecdsa_*",
    "**/id_ed25519",
    "**/id_ed25519_*",
    "**/*.pem",
    "**/*.key",
    "**/*.p12",
    "**/*.pfx",
    "**/*.jks",
    "**/*.keystore",
    "**/*.kdbx",
    "**/*.tfstate",
    "**/*.tfstate.backup",
    "**/credentials.json",
    "**/*service-account*.json",
    "**/secrets.toml",
];

/// Look-alikes that are documentation, not secrets.
pub const CREDENTIAL_EXCEPTIONS: &[&str] = &[
    "**/.env.example",
    "**/.env.sample",
    "**/.env.template",
    "**/.env.dist",
    "**/*.pub",
];

/// The compiled credential patterns.
#[derive(Clone, Debug)]
pub struct CredentialFilter {
    deny: GlobSet,
    except: GlobSet,
    /// Aether's own files and folders (its store), refused like credentials.
    /// Absolute paths as text, without a trailing `/`, sorted and without repeats: compared
    /// as text on every entry a walk meets, so this must be cheap.
    private: Vec<String>,
}

impl Default for CredentialFilter {
    fn default() -> Self {
        CredentialFilter::new(CREDENTIAL_GLOBS, CREDENTIAL_EXCEPTIONS)
            .expect("the built-in credential globs compile")
    }
}

/// Whether `path` is `base` or lies under it, compared as text by whole components
/// (`/a/bc` is not under `/a/b`).
fn at_or_under(path: &str, base: &str) -> bool {
    if base == "/" {
        return path.starts_with('/');
    }
    match path.strip_prefix(base) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

impl CredentialFilter {
    pub fn new(deny: &[&str], except: &[&str]) -> Result<CredentialFilter, globset::Error> {
        Ok(CredentialFilter {
            deny: compile(deny)?,
            except: compile(except)?,
            private: Vec::new(),
        })
    }

    /// Also refuses everything at or under `paths` (absolute, real paths).
    pub fn with_private(mut self, paths: Vec<std::path::PathBuf>) -> CredentialFilter {
        let mut private: Vec<String> = paths
            .into_iter()
            .map(|p| {
                let text = p.to_string_lossy().into_owned();
                match text.trim_end_matches('/') {
                    "" => "/".to_string(),
                    trimmed => trimmed.to_string(),
                }
            })
            .collect();
        private.sort();
        private.dedup();
        self.private = private;
        self
    }

    /// The private paths (absolute, real).
    pub fn private_paths(&self) -> &[String] {
        &self.private
    }

    /// Whether `path` is at or under one of the private paths, or names a control file
    /// ([`CONTROL_NAMES`]) or a write's temporary file ([`is_write_temp`]).
    pub fn is_private(&self, path: &str) -> bool {
        let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        is_control_file(path)
            || is_write_temp(name)
            || is_set_aside(name)
            || self.private.iter().any(|p| at_or_under(path, p))
    }

    /// Whether `path` is a private path or a folder holding one: moving, deleting or replacing
    /// it would move, delete or replace the private path with it.
    pub fn holds_private(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        self.private.iter().any(|p| at_or_under(p, path))
    }

    /// Whether `path` names a credential file or lies inside a credential folder. Give the
    /// absolute path where there is one: a root that is itself a credential folder (say
    /// `~/.aws`) has nothing credential-looking in its relative paths.
    pub fn is_credential(&self, path: &str) -> bool {
        !path.is_empty()
            && ((self.deny.is_match(path) && !self.except.is_match(path)) || self.is_private(path))
    }
}

fn compile(globs: &[&str]) -> Result<GlobSet, globset::Error> {
    let mut set = GlobSetBuilder::new();
    for g in globs {
        set.add(
            GlobBuilder::new(g)
                .case_insensitive(true)
                .literal_separator(true)
                .build()?,
        );
    }
    set.build()
}

#[cfg(test)]
mod tests {

    #[test]
    fn private_paths_compare_by_whole_components() {
        let f = CredentialFilter::default().with_private(vec![
            "/srv/p/.aether".into(),
            "/srv/p/conf/aether.toml".into(),
            "/srv/p/.aether/".into(),
        ]);
        assert!(f.is_private("/srv/p/.aether"));
        assert!(f.is_private("/srv/p/.aether/aether.db"));
        assert!(!f.is_private("/srv/p/.aetherx"));
        assert!(!f.is_private("/srv/p"));
        assert!(f.holds_private("/srv/p/conf"));
        assert!(f.holds_private("/srv/p/conf/"));
        assert!(f.holds_private("/srv/p"));
        assert!(!f.holds_private("/srv/p/con"));
        assert!(!f.holds_private("/srv/q"));
    }

    use super::*;

    #[test]
    fn protected_names_cover_their_look_alikes() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".gi\u{200B}t",
            ".g\u{0307}it",
            "\u{FF0E}\u{FF47}\u{FF49}\u{FF54}",
            "GIT~1",
            ".aether",
            ".AETHER",
            "\u{FEFF}.aether",
        ] {
            assert!(protected_name(name).is_some(), "{name:?}");
        }
        for name in [
            "git",
            ".github",
            ".gitignore",
            "x.git",
            "aether",
            ".gitmodules",
        ] {
            assert_eq!(protected_name(name), None, "{name:?}");
        }
        assert_eq!(
            protected_component("a/.GIT/hooks/pre-commit"),
            Some((".GIT", ".git"))
        );
        assert_eq!(protected_component("src/main.rs"), None);
    }

    #[test]
    fn control_files_are_known_in_every_spelling_and_place() {
        for name in [
            "aether.toml",
            "AETHER.TOML",
            "Aether.Toml",
            "aether.toml.",
            "aether.toml ",
            "permissions.yaml",
            "Permissions.YAML",
            "permissions.yaml..",
            "aether\u{200B}.toml",
            "\u{FF41}ether.toml",
            "permi\u{0301}ssions.yaml",
            "AETHER~1.TOM",
            "PERMIS~1.YAM",
        ] {
            assert!(control_name(name).is_some(), "{name:?}");
            for place in [
                name.to_string(),
                format!("a/b/{name}"),
                format!("/srv/p/{name}"),
            ] {
                assert!(is_control_file(&place), "{place:?}");
                assert!(CredentialFilter::default().is_private(&place), "{place:?}");
                assert!(
                    CredentialFilter::default().is_credential(&place),
                    "{place:?}"
                );
            }
        }
        for name in [
            "aether.toml.bak",
            "aether.tom",
            "my-aether.toml",
            "permissions.yml",
            "permissions.yaml.example",
            "aether",
            "Cargo.toml",
            "",
        ] {
            assert_eq!(control_name(name), None, "{name:?}");
            assert!(!CredentialFilter::default().is_private(&format!("/srv/p/{name}")));
        }
        // A folder above is not the file.
        assert!(!is_control_file("/srv/aether.toml/x"));
        // One set aside is private, but not a control file (no Aether loads it).
        let aside = "permissions.yaml.set-aside-by-aether-1764640000000000000";
        assert!(!is_control_file(aside));
        assert!(is_set_aside(aside));
        assert!(CredentialFilter::default().is_private(&format!("/srv/p/{aside}")));
        assert!(!is_set_aside("notes.set-aside-by-aether-1"));
    }

    #[test]
    fn write_gate_matches_the_manifest() {
        let open = WriteGate::new(None).unwrap();
        assert!(open.allows("anything/at/all"));
        let gate = WriteGate::new(Some(&["src/**".into(), "*.md".into()])).unwrap();
        assert!(gate.allows("src/a/b.rs"));
        assert!(gate.allows("README.md"));
        assert!(!gate.allows("docs/x.md"));
        assert!(!gate.allows("build.rs"));
        assert!(WriteGate::new(Some(&["[".into()])).is_err());
    }

    #[test]
    fn clean_relative_folds_dots_and_refuses_only_escapes() {
        for (path, clean) in [
            ("a/./b//c/", "a/b/c"),
            ("", ""),
            (".", ""),
            ("./", ""),
            ("a/../b", "b"),
            ("src/../README.md", "README.md"),
            ("a/b/../../c", "c"),
            ("a/b/../c/./d/..", "a/c"),
            ("a/..", ""),
            ("a/b/c/../../../", ""),
            ("./a/.././b", "b"),
            ("/a/../b", "b"),
            ("a//..//b", "b"),
            ("...", "..."),
            ("..a/b..", "..a/b.."),
        ] {
            assert_eq!(clean_relative(path).unwrap(), clean, "{path:?}");
        }
        for path in [
            "..",
            "../",
            "../a",
            "a/../..",
            "a/../../b",
            "a/b/../../../c",
            "./../a",
            "a/./../../a",
            "x/y/z/../../../../x/y",
        ] {
            assert_eq!(
                clean_relative(path),
                Err(PathRefusal::ParentComponent),
                "{path:?}"
            );
        }
        assert_eq!(clean_relative("a\0b"), Err(PathRefusal::Nul));
        assert_eq!(clean_relative(&"a".repeat(5000)), Err(PathRefusal::TooLong));
    }

    #[test]
    fn globs_are_confined_like_paths() {
        let place = |folder: &str, pattern: &str| confine_glob(folder, pattern, "/srv/ws");
        let ok = |folder: &str, pattern: &str, want: (&str, &str, bool)| {
            let got = place(folder, pattern).unwrap_or_else(|e| panic!("{pattern:?}: {e}"));
            assert_eq!(
                (got.folder.as_str(), got.pattern.as_str(), got.by_name),
                want,
                "{folder:?} {pattern:?}"
            );
        };
        ok("", "*.rs", ("", "*.rs", true));
        ok("src", "*.rs", ("src", "*.rs", true));
        ok("", "**/*.rs", ("", "**/*.rs", false));
        ok("", "src/**/mod.rs", ("src", "**/mod.rs", false));
        ok("src", "../docs/*.md", ("docs", "*.md", false));
        ok("src/a", "../../README.md", ("", "README.md", false));
        ok("", "./src/*.rs", ("src", "*.rs", false));
        ok("", "src/../docs/*.md", ("docs", "*.md", false));
        ok("", "/srv/ws/docs/*.md", ("docs", "*.md", false));
        ok("src", "/srv/ws/**/*.md", ("", "**/*.md", false));
        ok("", "src/*/mod.rs", ("src", "*/mod.rs", false));
        ok("", "{a,b}/*.rs", ("", "{a,b}/*.rs", false));
        for (folder, pattern) in [
            ("", "../*"),
            ("", "../**/*.rs"),
            ("src", "../../etc/*"),
            ("", "a/../../*"),
            ("", "./../x/*"),
        ] {
            assert_eq!(
                place(folder, pattern),
                Err(PathRefusal::ParentComponent),
                "{folder:?} {pattern:?}"
            );
        }
        for pattern in ["/etc/*", "/srv/wsx/*", "/srv/*", "/", "/srv/ws_evil/**"] {
            assert_eq!(
                place("", pattern),
                Err(PathRefusal::GlobOutside(pattern.into())),
                "{pattern:?}"
            );
        }
        for pattern in ["*/../x", "**/../../etc/*", "a/*/../../../b", "[a]/../*"] {
            assert_eq!(
                place("", pattern),
                Err(PathRefusal::GlobClimbs(pattern.into())),
                "{pattern:?}"
            );
        }
        for pattern in ["..", ".", "src/..", "src/.", "src/", "*/.."] {
            assert!(
                matches!(
                    place("", pattern),
                    Err(PathRefusal::GlobFolder(_) | PathRefusal::GlobClimbs(_))
                ),
                "{pattern:?}: {:?}",
                place("", pattern)
            );
        }
        assert_eq!(place("", ""), Err(PathRefusal::Empty));
        assert_eq!(place("", "a\0*"), Err(PathRefusal::Nul));
        // The message says what to do.
        let e = place("", "/etc/*").unwrap_err().to_string();
        assert!(e.contains("outside the root"), "{e}");
    }

    #[test]
    fn strip_root_respects_component_boundaries() {
        assert_eq!(strip_root("/srv/ws/a/b", "/srv/ws"), Some("a/b"));
        assert_eq!(strip_root("/srv/ws", "/srv/ws"), Some(""));
        assert_eq!(strip_root("/srv/ws/", "/srv/ws"), Some(""));
        assert_eq!(strip_root("/srv/ws_evil/a", "/srv/ws"), None);
        assert_eq!(strip_root("/srv/wsa", "/srv/ws"), None);
        assert_eq!(strip_root("/etc/passwd", "/srv/ws"), None);
    }

    #[test]
    fn root_specs() {
        let r = RootSpec::parse("docs=/home/me/docs:ro", RootMode::ReadWrite).unwrap();
        assert_eq!(
            (r.name.as_str(), r.path.as_str(), r.mode),
            ("docs", "/home/me/docs", RootMode::ReadOnly)
        );
        let r = RootSpec::parse("w=/a:b/c", RootMode::ReadOnly).unwrap();
        assert_eq!((r.path.as_str(), r.mode), ("/a:b/c", RootMode::ReadOnly));
        assert!(RootSpec::parse("/no/name", RootMode::ReadOnly).is_err());
        assert!(RootSpec::parse("bad name=/x", RootMode::ReadOnly).is_err());
        assert!(RootSpec::parse("x=", RootMode::ReadOnly).is_err());
    }

    #[test]
    fn credential_files() {
        let f = CredentialFilter::default();
        for p in [
            ".env",
            "app/.env",
            ".env.production",
            "deploy/prod.env",
            ".ssh/id_rsa",
            "home/.ssh",
            ".aws/credentials",
            ".aws",
            "x/.gnupg",
            ".git/config",
            "a/.git-credentials",
            "certs/server.PEM",
            "k/id_ed25519",
            ".aether/aether.db",
            ".aether",
            ".config/gcloud/adc.json",
            "x/.netrc",
            "infra/terraform.tfstate",
            "/home/u/.aws/credentials",
            "/home/u/.config/gh/hosts.yml",
            ".git/modules/lib/config",
            "proj/.envrc",
            "/home/u/.cargo/credentials.toml",
            "/home/u/.vault-token",
            "keys/server.ppk",
        ] {
            assert!(f.is_credential(p), "{p} should be refused");
        }
        for p in [
            "",
            ".env.example",
            "src/main.rs",
            "keys.md",
            ".ssh_notes.txt",
            "id_rsa.pub",
            ".git/HEAD",
            "docs/environment.md",
            "monkey.txt",
        ] {
            assert!(!f.is_credential(p), "{p} should be allowed");
        }
    }
}

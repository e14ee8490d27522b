//! The sandbox `run_shell` runs in: bubblewrap.
//!
//! A command sees a new root built for it: `/usr` and the system's library folders read-only,
//! a handful of `/etc` files (no `/etc/shadow`, no host user list), its own `/proc`, `/dev`
//! and `/tmp`, the operator's extra read-only folders, and the roots — read-only unless the
//! project allows shell writes, and then only `rw` roots without write globs. Nothing else of
//! the machine is there: no home folders, no Aether store, no sockets but its own. Inside the
//! roots, every credential file and folder (the same list the file tools refuse) and every
//! Aether file is covered by an empty read-only one, and every `.git` is read-only (a hook
//! written there would run later, outside the sandbox). The command runs in new user, PID,
//! IPC, UTS, cgroup and (unless the project allows the network) network namespaces, with no
//! capabilities, no way to make further user namespaces, a new session (no terminal to
//! inject into), and dies with Aether.
//!
//! What it does not do: filter system calls (no seccomp profile), or limit memory and process
//! count beyond what the machine's cgroups give (see `tree.rs`). Credential files that appear
//! after the sandbox was built, during the command, are not hidden from it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aether_policy::paths::{CredentialFilter, RootMode};
use aether_policy::shell::ShellSettings;
use aether_tools_core::BWRAP_PATHS;

use crate::{Roots, ToolError};

/// `/etc` entries a shell's programs commonly need; none holds a secret.
const ETC: &[&str] = &[
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "os-release",
    "debian_version",
    "protocols",
    "services",
    "magic",
    "magic.mime",
    "terminfo",
    "inputrc",
    "python3",
];

/// `/etc` entries for name lookups, only when the sandbox shares the network.
const ETC_NETWORK: &[&str] = &["resolv.conf", "hosts", "host.conf", "gai.conf"];

/// How far into an extra read-only folder credentials are looked for.
const EXTRA_DEPTH: usize = 4;

/// More hidden paths than this and the shell refuses (the sandbox's arguments would be huge).
const MAX_MASKS: usize = 20_000;

/// Size of the sandbox's own `/tmp`.
const TMP_BYTES: u64 = 512 << 20;

/// Bubblewrap on this machine, and whether a sandbox could be made with it (asked once).
#[derive(Clone)]
pub struct Sandbox {
    bwrap: Option<PathBuf>,
    probe: Arc<Probe>,
}

/// The one probe of a [`Sandbox`] (shared by its clones): started once, on a thread of its
/// own, which waits for bubblewrap while no async thread does; its answer is kept.
struct Probe {
    started: std::sync::Once,
    answer: OnceLock<Result<(), String>>,
}

impl Default for Probe {
    fn default() -> Probe {
        Probe {
            started: std::sync::Once::new(),
            answer: OnceLock::new(),
        }
    }
}

impl Sandbox {
    /// Bubblewrap where Debian and others install it.
    pub fn detect() -> Sandbox {
        let found = BWRAP_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.metadata().is_ok_and(|m| m.is_file()));
        Sandbox {
            bwrap: found,
            probe: Arc::default(),
        }
    }

    /// The one [`Sandbox::detect`] of this process, for callers without their own (its probe
    /// runs once).
    pub fn shared() -> &'static Sandbox {
        static SHARED: OnceLock<Sandbox> = OnceLock::new();
        SHARED.get_or_init(Sandbox::detect)
    }

    /// Bubblewrap at `path` (tests; a path that is not there gives no sandbox).
    pub fn at(path: impl Into<PathBuf>) -> Sandbox {
        Sandbox {
            bwrap: Some(path.into()),
            probe: Arc::default(),
        }
    }

    /// Starts the probe on its thread, if it has not started; returns at once. Whoever asks
    /// [`Sandbox::ready`] later finds the answer there, or waits less for it.
    pub fn start_probe(&self) {
        let Some(bwrap) = self.bwrap.clone() else {
            return;
        };
        let probe = self.probe.clone();
        self.probe.started.call_once(move || {
            // The folders of processes that ended mid-command are swept once per process.
            std::thread::spawn(super::process::sweep_orphans);
            let answer = probe.clone();
            let spawned = std::thread::Builder::new()
                .name("aether-sandbox-probe".into())
                .spawn(move || {
                    // Always answered, so no one waits for ever.
                    let found =
                        std::panic::catch_unwind(|| self::probe(&bwrap)).unwrap_or_else(|_| {
                            Err("no sandbox is available: its probe panicked".into())
                        });
                    let _ = answer.answer.set(found);
                });
            if let Err(e) = spawned {
                let _ = probe.answer.set(Err(format!(
                    "no sandbox is available: its probe could not start a thread: {e}"
                )));
            }
        });
    }

    /// Whether a sandbox can be made here: bubblewrap is installed and a probe sandbox ran.
    /// Asked once; the answer is kept. Until the probe's thread has answered, this waits for
    /// it (parked, not polling): an async caller asks [`Sandbox::probed`] instead.
    pub fn ready(&self) -> Result<&Path, String> {
        let bwrap = self.installed()?;
        self.start_probe();
        self.probe.answer.wait().clone().map(|()| bwrap)
    }

    /// [`Sandbox::ready`] for an async caller: the probe's answer is awaited on the blocking
    /// pool, never on a runtime thread.
    pub async fn probed(&self) -> Result<&Path, String> {
        let bwrap = self.installed()?;
        if let Some(answer) = self.probe.answer.get() {
            return answer.clone().map(|()| bwrap);
        }
        self.start_probe();
        let probe = self.probe.clone();
        tokio::task::spawn_blocking(move || probe.answer.wait().clone())
            .await
            .unwrap_or_else(|e| Err(format!("no sandbox is available: its probe failed: {e}")))
            .map(|()| bwrap)
    }

    fn installed(&self) -> Result<&Path, String> {
        self.bwrap.as_deref().ok_or_else(|| {
            "no sandbox is available: bubblewrap is not installed (apt-get install bubblewrap)"
                .to_string()
        })
    }
}

/// Where a program that must not read Aether's own files runs: in the sandbox (`Some`, when
/// `ready` says it can be made), as itself where it cannot and the operator allowed `what` to
/// run `uncovered` (`None`, with a warning in the log), or not at all (`Err`: why the sandbox
/// cannot be made, for the caller's refusal).
pub fn covered_or_allowed<P>(
    ready: Result<P, String>,
    uncovered: bool,
    what: &str,
) -> Result<Option<P>, String> {
    match ready {
        Ok(sandbox) => Ok(Some(sandbox)),
        Err(why) if uncovered => {
            tracing::warn!(what, %why, "runs uncovered: it can read Aether's own files");
            Ok(None)
        }
        Err(why) => Err(why),
    }
}

/// The covers to make of `masks` (path, whether a folder): sorted, once each, and none inside
/// a covered folder — it is gone with the folder, and could not be covered again (the empty
/// folder has no such path).
fn outermost(mut masks: Vec<(PathBuf, bool)>) -> Vec<(PathBuf, bool)> {
    masks.sort();
    masks.dedup();
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (path, is_dir) in masks {
        if !kept
            .iter()
            .any(|(k, dir)| *dir && path.starts_with(k) && path != *k)
        {
            kept.push((path, is_dir));
        }
    }
    kept
}

/// Bubblewrap's arguments (before `--` and the program) that run a program on the whole
/// filesystem as it is — same files, network and devices — except `hidden`, each covered where
/// it exists (a file by an empty one, a folder by an empty one in memory), without
/// capabilities: for a process that must not read Aether's own files (its store, its vault
/// key, its configuration) but should otherwise run as it would. It dies with Aether.
pub fn hiding(hidden: &[PathBuf]) -> Vec<OsString> {
    // No capabilities (a program run by root could otherwise lift the covers, or reach the
    // files through `/proc/PID/root` of Aether's process, which is not dumpable); a session of
    // its own (no terminal to type into).
    let mut args: Vec<OsString> = [
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--dev-bind",
        "/",
        "/",
    ]
    .map(OsString::from)
    .into();
    // Each path by its real place, made absolute and with links resolved: bubblewrap follows
    // a link at a cover's destination (a dangling one would make it create the target), and
    // a relative path would be read from `/`. What does not exist is not covered.
    let covers: Vec<(PathBuf, bool)> = hidden
        .iter()
        .filter_map(|path| std::path::absolute(path).ok())
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .filter_map(|real| std::fs::metadata(&real).ok().map(|m| (real, m.is_dir())))
        .collect();
    let covers = outermost(covers);
    // Every folder above a cover is bound onto itself first, so it is a mount point in the
    // sandbox: the kernel refuses to rename or remove one (EBUSY), so a program cannot move a
    // covered file's folder away and put a folder of its own with a file of its own in its
    // place; what is inside stays writable as before. (Bound before the covers, which would
    // otherwise be hidden under the binds.)
    let mut above: Vec<PathBuf> = covers
        .iter()
        .flat_map(|(path, _)| path.ancestors().skip(1).map(Path::to_path_buf))
        .filter(|a| a.parent().is_some())
        .collect();
    above.sort_by_key(|a| (a.components().count(), a.clone()));
    above.dedup();
    for folder in &above {
        args.extend([
            OsString::from("--bind"),
            folder.as_os_str().to_owned(),
            folder.as_os_str().to_owned(),
        ]);
    }
    for (path, is_dir) in &covers {
        if *is_dir {
            args.extend([OsString::from("--tmpfs"), path.as_os_str().to_owned()]);
        } else {
            args.extend([
                OsString::from("--ro-bind"),
                OsString::from("/dev/null"),
                path.as_os_str().to_owned(),
            ]);
        }
    }
    args
}

/// What a program run on the whole filesystem (see [`hiding`]) must not read while it walks
/// the roots: Aether's own files wherever they are, and under every root (links not followed)
/// each credential file or folder and each file with a second name, and the configs of
/// `.git` folders unless the program is `git` itself. More than the sandbox takes is refused, and so is a tree that could not be
/// walked whole.
pub fn secrets_in(roots: &Roots, git: bool) -> Result<Vec<PathBuf>, ToolError> {
    let credentials = roots.credentials();
    let mut found: Vec<PathBuf> = credentials
        .private_paths()
        .iter()
        .map(PathBuf::from)
        .collect();
    for root in roots.iter() {
        let mut it = walkdir::WalkDir::new(&root.path)
            .follow_links(false)
            .min_depth(1)
            .into_iter();
        while let Some(entry) = it.next() {
            let entry = match entry {
                Ok(entry) => entry,
                // A folder that cannot be read cannot be read by the program either.
                Err(e)
                    if e.io_error()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied) =>
                {
                    continue;
                }
                // Anything else was not seen, so not checked: nothing runs.
                Err(e) => {
                    return Err(ToolError::failed(format!(
                        "{} could not be checked for credential files ({e}), so nothing ran",
                        e.path().unwrap_or(&root.path).display()
                    )));
                }
            };
            let (ft, path) = (entry.file_type(), entry.path());
            if ft.is_dir() && entry.file_name() == ".git" {
                // git reads its own folder (its config was judged before it runs); for any
                // other program, the configs are covered (remote URLs can carry tokens).
                if !git {
                    for name in ["config", "config.worktree"] {
                        found.push(path.join(name));
                    }
                }
                it.skip_current_dir();
                continue;
            }
            let text = path.to_string_lossy();
            // A file with a second name may be another name of a credential outside the roots
            // (covered as in run_shell's sandbox).
            let linked = ft.is_file()
                && entry
                    .metadata()
                    .is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1);
            if credentials.is_private(&text) || credentials.is_credential(&text) || linked {
                found.push(path.to_path_buf());
                if ft.is_dir() {
                    it.skip_current_dir();
                }
                if found.len() > MAX_MASKS {
                    return Err(ToolError::failed(format!(
                        "the roots hold more than {MAX_MASKS} credential files and folders to cover"
                    )));
                }
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// Every control file (`aether.toml`, `permissions.yaml` in any spelling:
/// `aether_policy::paths::CONTROL_NAMES`) under `folders`, links not followed, `.git` folders
/// not entered, at most [`MAX_MASKS`]: for a program run on the whole filesystem that must not
/// change another Aether's configuration or rules (see [`hiding`]).
pub fn control_files_in(folders: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for top in folders {
        let mut it = walkdir::WalkDir::new(top)
            .follow_links(false)
            .min_depth(1)
            .into_iter();
        while let Some(entry) = it.next() {
            let Ok(entry) = entry else { continue };
            if entry.file_type().is_dir() && entry.file_name() == ".git" {
                it.skip_current_dir();
                continue;
            }
            if aether_policy::paths::is_control_file(&entry.path().to_string_lossy()) {
                found.push(entry.path().to_path_buf());
                if found.len() >= MAX_MASKS {
                    tracing::error!(
                        "the roots hold {MAX_MASKS} Aether control files or more; those past it are not covered"
                    );
                    return found;
                }
            }
        }
    }
    found
}

/// The control files under `folders` now, each with its device and inode.
pub fn control_identities(folders: &[PathBuf]) -> BTreeMap<PathBuf, (u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    control_files_in(folders)
        .into_iter()
        .filter_map(|p| {
            let m = std::fs::symlink_metadata(&p).ok()?;
            Some((p, (m.dev(), m.ino())))
        })
        .collect()
}

/// Renames aside (see [`SET_ASIDE`], beneath its root: [`super::set_aside_beneath`]) every
/// control file under `folders` that `before` does not hold as it is now (the same path, the
/// same device and inode): one a program made while it ran — or put in place of one that was
/// there — which no Aether must read. Returns their paths.
pub fn set_aside_new_controls(
    folders: &[PathBuf],
    before: &BTreeMap<PathBuf, (u64, u64)>,
) -> Vec<PathBuf> {
    control_identities(folders)
        .into_iter()
        .filter(|(path, id)| before.get(path) != Some(id))
        .map(|(path, _)| path)
        .filter(|path| super::set_aside_beneath(folders, path))
        .collect()
}

/// The control files under some folders before a program ran, so that any it makes is set
/// aside when it ends ([`ControlWatch::finish`]) — or, if the call is dropped first, from a
/// thread of its own once the program has had a moment to die.
pub struct ControlWatch {
    folders: Vec<PathBuf>,
    before: BTreeMap<PathBuf, (u64, u64)>,
    done: bool,
}

impl ControlWatch {
    /// Walks `folders` now (blocking).
    pub fn start(folders: Vec<PathBuf>) -> ControlWatch {
        let before = control_identities(&folders);
        ControlWatch {
            folders,
            before,
            done: false,
        }
    }

    /// Sets aside what the program made (blocking); returns their paths.
    pub fn finish(mut self) -> Vec<PathBuf> {
        self.done = true;
        set_aside_new_controls(&self.folders, &self.before)
    }
}

impl Drop for ControlWatch {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (folders, before) = (
            std::mem::take(&mut self.folders),
            std::mem::take(&mut self.before),
        );
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            set_aside_new_controls(&folders, &before);
        });
    }
}

/// The shell programs run: bash where there is one.
pub fn shell() -> &'static str {
    if Path::new("/usr/bin/bash").is_file() || Path::new("/bin/bash").is_file() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

/// Runs `true` in a sandbox built like a real one (without roots). It polls the child and
/// blocks: it runs on the probe's own thread ([`Sandbox::start_probe`]).
fn probe(bwrap: &Path) -> Result<(), String> {
    // A fresh private folder (never one that already exists: someone else could have put
    // links in it for these writes to follow).
    let home = super::process::Home::new("probe").map_err(|e| e.to_string())?;
    let scratch = home.dir.clone();
    let result = (|| {
        let mut args = base(&scratch, false).map_err(|e| e.to_string())?;
        args.extend(["--chdir", "/", "--", "/bin/sh", "-c", "exit 0"].map(String::from));
        let mut child = std::process::Command::new(bwrap)
            .args(&args)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "no sandbox is available: bubblewrap ({}) did not start: {e}",
                    bwrap.display()
                )
            })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    return Err(format!(
                        "no sandbox is available: bubblewrap cannot make one here ({status}: {})",
                        err.trim()
                    ));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err("no sandbox is available: bubblewrap did not answer".into());
                }
            }
        }
    })();
    drop(home);
    result
}

/// The namespaces, the system folders and the scratch files, without roots.
fn base(scratch: &Path, network: bool) -> std::io::Result<Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // Root outside stays root's files outside, but is an ordinary user inside.
    let (inner_uid, inner_gid) = if uid == 0 { (1000, 1000) } else { (uid, gid) };
    let passwd = scratch.join("passwd");
    std::fs::write(
        &passwd,
        format!(
            "root:x:0:0:root:/root:/usr/sbin/nologin\naether:x:{inner_uid}:{inner_gid}:aether:/tmp/home:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
    )?;
    let group = scratch.join("group");
    std::fs::write(
        &group,
        format!("root:x:0:\naether:x:{inner_gid}:\nnogroup:x:65534:\n"),
    )?;
    let empty = scratch.join("empty");
    std::fs::write(&empty, b"")?;
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o444))?;
    let empty_dir = scratch.join("empty.d");
    std::fs::create_dir_all(&empty_dir)?;
    std::fs::set_permissions(&empty_dir, std::fs::Permissions::from_mode(0o555))?;

    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    push(aether_tools_core::BWRAP_ISOLATION);
    push(&["--hostname", "aether-sandbox"]);
    if network {
        push(&["--share-net"]);
    }
    let (u, g) = (inner_uid.to_string(), inner_gid.to_string());
    push(&["--uid", &u, "--gid", &g]);
    let system = aether_tools_core::system_folders()?;
    push(&system.iter().map(String::as_str).collect::<Vec<_>>());
    for name in ETC.iter().chain(if network { ETC_NETWORK } else { &[] }) {
        let path = format!("/etc/{name}");
        push(&["--ro-bind-try", &path, &path]);
    }
    push(&[
        "--ro-bind",
        &passwd.to_string_lossy(),
        "/etc/passwd",
        "--ro-bind",
        &group.to_string_lossy(),
        "/etc/group",
    ]);
    push(&["--proc", "/proc", "--dev", "/dev"]);
    push(&[
        "--size",
        &TMP_BYTES.to_string(),
        "--tmpfs",
        "/tmp",
        "--dir",
        "/tmp/home",
    ]);
    Ok(a)
}

/// What one `run_shell` sandbox holds.
pub struct Layout<'a> {
    /// A private folder of this command's, outside the sandbox, for its scratch files.
    pub scratch: &'a Path,
    pub roots: &'a Roots,
    pub settings: &'a ShellSettings,
    /// The working folder (a real path inside a root).
    pub cwd: &'a Path,
    pub shell: &'a str,
    pub command: &'a str,
}

/// A sandbox ready to start: bubblewrap's arguments, and what to check after the command.
pub struct Plan {
    pub args: Vec<OsString>,
    /// Roots the command may write.
    pub writable: Vec<PathBuf>,
    /// The device and inode of every git repository (`.git` entries and bare repositories)
    /// in the writable roots before the command: one that appears during it is removed
    /// afterwards.
    pub repositories: BTreeSet<Identity>,
    /// The control files in the writable roots before the command (the walk that decides
    /// writability does not enter covered folders, so some may be there): left as they are.
    pub controls: BTreeMap<PathBuf, (u64, u64)>,
}

/// Where [`after_writable_run`] puts a control file a command created: beside it, renamed so
/// that no Aether reads it (and nothing is lost).
pub const SET_ASIDE: &str = aether_policy::paths::SET_ASIDE;

impl Plan {
    /// What [`after_writable_run`] needs, without the arguments.
    pub fn clone_for_after(&self) -> Plan {
        Plan {
            args: Vec::new(),
            writable: self.writable.clone(),
            repositories: self.repositories.clone(),
            controls: self.controls.clone(),
        }
    }
}

/// Bubblewrap's arguments for `layout`.
pub fn arguments(layout: &Layout<'_>) -> Result<Plan, ToolError> {
    let cant = |e: std::io::Error| ToolError::failed(format!("cannot build the sandbox: {e}"));
    let mut args: Vec<OsString> = base(layout.scratch, layout.settings.network)
        .map_err(cant)?
        .into_iter()
        .map(OsString::from)
        .collect();
    let credentials = layout.roots.credentials();
    let mut hide = Hide {
        masks: Vec::new(),
        git: Vec::new(),
        credentials,
        repositories: BTreeMap::new(),
        controls: 0,
    };
    let bind = |args: &mut Vec<OsString>, how: &str, path: &Path| {
        args.push(how.into());
        args.push(path.as_os_str().to_owned());
        args.push(path.as_os_str().to_owned());
    };
    // The folders bound into the sandbox: only paths inside them need covering. The roots
    // first, outer before inner (a root inside another is bound over it, with its own mode),
    // then the extra read-only folders (so that one inside a writable root stays read-only).
    let mut bound: Vec<PathBuf> = Vec::new();
    let mut writable: Vec<PathBuf> = Vec::new();
    let mut roots: Vec<_> = layout.roots.iter().collect();
    roots.sort_by_key(|r| r.path.components().count());
    for root in roots {
        if hide.covers(&root.path) {
            // A root that is itself a credential folder, or Aether's own, is not shown.
            continue;
        }
        if root.mode == RootMode::Sealed {
            // A sealed root serves a file only after checking it against its seal, which a
            // program reading the folder directly would skip: it is not in the sandbox.
            continue;
        }
        // A root that holds Aether's own files (its configuration, rules, store) or any
        // Aether's control files (by name) is never writable in a shell: a file written
        // there, or a folder renamed around one, would change what an Aether runs by.
        let controls = hide.controls;
        hide.walk(&root.path, None)?;
        let write = layout.settings.write
            && root.mode == RootMode::ReadWrite
            && root.gate.globs().is_none()
            && !credentials.holds_private(&root.path.to_string_lossy())
            && hide.controls == controls;
        bind(
            &mut args,
            if write { "--bind" } else { "--ro-bind" },
            &root.path,
        );
        bound.push(root.path.clone());
        if write {
            writable.push(root.path.clone());
        }
    }
    for extra in &layout.settings.read_only {
        let Ok(real) = std::fs::canonicalize(extra) else {
            continue;
        };
        if !real.is_dir() || hide.covers(&real) {
            continue;
        }
        bind(&mut args, "--ro-bind", &real);
        hide.walk(&real, Some(EXTRA_DEPTH))?;
        bound.push(real);
    }
    // Aether's own files, wherever a bound folder holds them.
    for private in credentials.private_paths() {
        let path = Path::new(private);
        if !bound.iter().any(|b| path.starts_with(b)) {
            continue;
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            hide.masks.push((path.to_path_buf(), meta.is_dir()));
        }
    }
    if hide.masks.len() > MAX_MASKS {
        return Err(ToolError::failed(format!(
            "the roots hold {} credential files and folders to hide, more than the sandbox takes ({MAX_MASKS})",
            hide.masks.len()
        )));
    }
    hide.git.sort();
    hide.git.dedup();
    for git in &hide.git {
        if bound.iter().any(|b| git.starts_with(b)) {
            bind(&mut args, "--ro-bind", git);
        }
    }
    let empty = layout.scratch.join("empty");
    let empty_dir = layout.scratch.join("empty.d");
    for (path, is_dir) in &outermost(std::mem::take(&mut hide.masks)) {
        let source = if *is_dir { &empty_dir } else { &empty };
        args.push("--ro-bind".into());
        args.push(source.as_os_str().to_owned());
        args.push(path.as_os_str().to_owned());
    }
    args.push("--chdir".into());
    args.push(layout.cwd.as_os_str().to_owned());
    args.extend(["--", layout.shell, "-c", layout.command].map(OsString::from));
    // What the walk met, in the roots the command may write: what it must not remove after.
    let repositories = hide
        .repositories
        .into_iter()
        .filter(|(path, _)| writable.iter().any(|w| path.starts_with(w)))
        .map(|(_, id)| id)
        .collect();
    let controls = control_identities(&writable);
    Ok(Plan {
        args,
        writable,
        repositories,
        controls,
    })
}

/// Puts the writable roots back in order after a command: removes every git repository it
/// created (a `.git` folder, file or link, or a bare repository, whose file was not there
/// before — judged by device and inode, so a repository moved or renamed is kept and one
/// planted at an old path is not): its config or hooks would run programs outside the sandbox
/// the next time someone runs git there. When Aether runs as root, also clears the setuid and
/// setgid bits the command may have set (files it owns inside are root's outside). Returns
/// what it removed.
pub fn after_writable_run(plan: &Plan, credentials: &CredentialFilter) -> Vec<PathBuf> {
    let mut now = BTreeMap::new();
    let as_root = rustix::process::geteuid().is_root();
    // A writable root held no control file when the command started (else it was bound
    // read-only): any there now was made by the command.
    let mut removed = set_aside_new_controls(&plan.writable, &plan.controls);
    for root in &plan.writable {
        repositories_in(root, credentials, &mut now, as_root);
    }
    for (path, id) in now {
        if plan.repositories.contains(&id) {
            continue;
        }
        let gone = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => continue,
        };
        if gone.is_ok() {
            removed.push(path);
        } else {
            tracing::warn!(path = %path.display(), "could not remove a repository a shell made");
        }
    }
    removed
}

/// Every `.git` entry and bare repository under `top` (not following links, not inside
/// covered folders), by path with its device and inode. With `clear_setid`, also clears the
/// setuid and setgid bits of every file met.
fn repositories_in(
    top: &Path,
    credentials: &CredentialFilter,
    found: &mut BTreeMap<PathBuf, Identity>,
    clear_setid: bool,
) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut it = walkdir::WalkDir::new(top)
        .follow_links(false)
        .min_depth(1)
        .into_iter();
    while let Some(entry) = it.next() {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        let text = path.to_string_lossy();
        if credentials.is_private(&text) || credentials.is_credential(&text) {
            if entry.file_type().is_dir() {
                it.skip_current_dir();
            }
            continue;
        }
        let ft = entry.file_type();
        if entry.file_name() == ".git" || (ft.is_dir() && is_bare(path)) {
            if let Ok(m) = std::fs::symlink_metadata(path) {
                found.insert(path.to_path_buf(), identity(&m));
            }
            if ft.is_dir() {
                it.skip_current_dir();
            }
            continue;
        }
        if clear_setid
            && ft.is_file()
            && let Ok(m) = entry.metadata()
            && m.mode() & 0o6000 != 0
        {
            let _ =
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(m.mode() & 0o1777));
        }
    }
}

/// Which file an entry is, across renames: its device and inode, and (since an inode number
/// freed by a deletion is soon reused) its type and change time.
pub type Identity = (u64, u64, u32, i64, i64);

fn identity(m: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    (
        m.dev(),
        m.ino(),
        m.mode() & 0o170000,
        m.ctime(),
        m.ctime_nsec(),
    )
}

use crate::roots::is_bare;

/// What the walk of the bound folders found to cover or make read-only.
struct Hide<'a> {
    /// Paths covered by an empty file or folder (`true`: a folder).
    masks: Vec<(PathBuf, bool)>,
    /// Git folders (`.git` folders and files, the folders `.git` links and `gitdir:` files
    /// point to, bare repositories), bound read-only.
    git: Vec<PathBuf>,
    credentials: &'a CredentialFilter,
    /// Every `.git` entry and bare repository met, by path, as [`repositories_in`] finds them.
    repositories: BTreeMap<PathBuf, Identity>,
    /// How many control files (by name) the walk met.
    controls: usize,
}

impl Hide<'_> {
    fn note_repository(&mut self, path: &Path) {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            self.repositories.insert(path.to_path_buf(), identity(&m));
        }
    }

    /// Whether `real` is a credential, Aether's own, or inside one.
    fn covers(&self, real: &Path) -> bool {
        let text = real.to_string_lossy();
        self.credentials.is_private(&text) || self.credentials.is_credential(&text)
    }

    /// Walks `top`, noting what to cover and what to make read-only. A folder that cannot be
    /// read is covered whole; any other failure refuses the sandbox (what was not seen could
    /// not be checked).
    fn walk(&mut self, top: &Path, depth: Option<usize>) -> Result<(), ToolError> {
        let mut walk = walkdir::WalkDir::new(top).follow_links(false).min_depth(1);
        if let Some(depth) = depth {
            walk = walk.max_depth(depth);
        }
        let mut it = walk.into_iter();
        while let Some(entry) = it.next() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    let denied = e
                        .io_error()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied);
                    match e.path() {
                        Some(path) if denied => {
                            self.masks.push((path.to_path_buf(), true));
                            continue;
                        }
                        _ => {
                            return Err(ToolError::failed(format!(
                                "cannot build the sandbox: {} could not be checked for credentials ({e})",
                                e.path().unwrap_or(top).display()
                            )));
                        }
                    }
                }
            };
            let ft = entry.file_type();
            let path = entry.path();
            if entry.file_name() == ".git" {
                self.note_repository(path);
                if ft.is_dir() {
                    self.git_folder(path);
                    it.skip_current_dir();
                } else {
                    // A link, or a `gitdir:` file: the repository it names is made read-only
                    // too (when it is inside a bound folder), and so is the entry itself.
                    if !ft.is_symlink() {
                        self.git.push(path.to_path_buf());
                    }
                    if let Some(target) = git_target(path, ft.is_symlink()) {
                        self.git_folder(&target);
                    }
                }
                continue;
            }
            if ft.is_symlink() {
                // Not followed: its target is either outside the sandbox (absent there) or
                // inside a bound folder, where this walk judges it on its own path.
                continue;
            }
            // A file with more than one name may be another name of a file outside every root
            // (a credential, say): covered, as the file tools refuse it.
            let hard_linked = ft.is_file()
                && std::fs::symlink_metadata(path)
                    .is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) > 1);
            if aether_policy::paths::is_control_file(&path.to_string_lossy()) {
                self.controls += 1;
            }
            if self.covers(path) || ft.is_socket() || hard_linked {
                // A socket could reach a daemon outside the sandbox: covered like a secret.
                self.masks.push((path.to_path_buf(), ft.is_dir()));
                if ft.is_dir() {
                    it.skip_current_dir();
                }
                continue;
            }
            if ft.is_dir() && is_bare(path) {
                self.note_repository(path);
                self.git_folder(path);
                it.skip_current_dir();
            }
        }
        Ok(())
    }

    /// A git folder: read-only, its config files covered (they can hold credentials in
    /// remote URLs), and any socket in it covered.
    fn git_folder(&mut self, git: &Path) {
        self.git.push(git.to_path_buf());
        for entry in walkdir::WalkDir::new(git)
            .follow_links(false)
            .into_iter()
            .flatten()
        {
            let ft = entry.file_type();
            let name = entry.file_name();
            if ft.is_socket() || (!ft.is_dir() && (name == "config" || name == "config.worktree")) {
                self.masks.push((entry.path().to_path_buf(), false));
            }
        }
    }
}

/// The repository a `.git` link or `gitdir:` file points to, as a real folder.
fn git_target(entry: &Path, is_link: bool) -> Option<PathBuf> {
    let target = if is_link {
        std::fs::canonicalize(entry).ok()?
    } else {
        let text = std::fs::read_to_string(entry).ok()?;
        let dir = text.strip_prefix("gitdir:")?.trim();
        std::fs::canonicalize(entry.parent()?.join(dir)).ok()?
    };
    target.is_dir().then_some(target)
}

#[cfg(test)]
mod hiding_tests {
    use super::*;

    #[test]
    fn covers_are_real_absolute_existing_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::write(base.join("key"), "k").unwrap();
        std::fs::create_dir(base.join("store")).unwrap();
        std::fs::write(base.join("store/db"), "d").unwrap();
        // A link pointing nowhere: bubblewrap would create its target.
        std::os::unix::fs::symlink(base.join("nowhere/x"), base.join("dangling")).unwrap();
        std::os::unix::fs::symlink(base.join("key"), base.join("alias")).unwrap();
        let args = hiding(&[
            base.join("dangling"),
            base.join("alias"),
            base.join("store"),
            base.join("store/db"),
            base.join("missing"),
        ]);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let covered: Vec<&str> = shown
            .windows(2)
            .filter(|w| w[0] == "--tmpfs" || w[0] == "/dev/null")
            .map(|w| w[1].as_str())
            .collect();
        let key = base.join("key").to_string_lossy().into_owned();
        let store = base.join("store").to_string_lossy().into_owned();
        assert_eq!(covered, [key.as_str(), store.as_str()], "{shown:?}");
        assert!(!base.join("nowhere").exists());
        assert!(shown.contains(&"--cap-drop".to_string()));
    }
}

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

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use aether_policy::paths::{CredentialFilter, RootMode};
use aether_policy::shell::ShellSettings;

use crate::{Roots, ToolError};

/// Where bubblewrap is looked for (absolute paths only: no PATH lookup a caller could steer).
const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// `/etc` entries a shell's programs commonly need; none holds a secret.
const ETC: &[&str] = &[
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "ssl",
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
    ready: Arc<OnceLock<Result<(), String>>>,
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
            ready: Arc::default(),
        }
    }

    /// Bubblewrap at `path` (tests; a path that is not there gives no sandbox).
    pub fn at(path: impl Into<PathBuf>) -> Sandbox {
        Sandbox {
            bwrap: Some(path.into()),
            ready: Arc::default(),
        }
    }

    /// Whether a sandbox can be made here: bubblewrap is installed and a probe sandbox ran.
    /// Asked once; the answer is kept.
    pub fn ready(&self) -> Result<&Path, String> {
        let Some(bwrap) = &self.bwrap else {
            return Err(
                "no sandbox is available: bubblewrap is not installed (apt-get install bubblewrap)"
                    .into(),
            );
        };
        self.ready
            .get_or_init(|| probe(bwrap))
            .clone()
            .map(|()| bwrap.as_path())
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

/// Runs `true` in a sandbox built like a real one (without roots).
fn probe(bwrap: &Path) -> Result<(), String> {
    let scratch = std::env::temp_dir().join(format!("aether-probe-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&scratch);
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
    let _ = std::fs::remove_dir_all(&scratch);
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
    push(&[
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--hostname",
        "aether-sandbox",
    ]);
    if network {
        push(&["--share-net"]);
    }
    let (u, g) = (inner_uid.to_string(), inner_gid.to_string());
    push(&["--uid", &u, "--gid", &g]);
    push(&["--ro-bind", "/usr", "/usr"]);
    for dir in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(dir)?;
                push(&["--symlink", &target.to_string_lossy(), dir]);
            }
            Ok(m) if m.is_dir() => push(&["--ro-bind", dir, dir]),
            _ => {}
        }
    }
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

/// Bubblewrap's arguments for `layout`.
pub fn arguments(layout: &Layout<'_>) -> Result<Vec<String>, ToolError> {
    let cant = |e: std::io::Error| ToolError::failed(format!("cannot build the sandbox: {e}"));
    let mut args = base(layout.scratch, layout.settings.network).map_err(cant)?;
    let credentials = layout.roots.credentials();
    let mut hide = Hide {
        masks: Vec::new(),
        read_only: Vec::new(),
        credentials,
    };
    // The folders bound into the sandbox: only paths inside them need covering.
    let mut bound: Vec<PathBuf> = Vec::new();
    // Extra read-only folders first, then the roots, outer before inner (a root inside
    // another is bound over it, with its own mode).
    for extra in &layout.settings.read_only {
        let Ok(real) = std::fs::canonicalize(extra) else {
            continue;
        };
        if !real.is_dir() || hide.covers(&real) {
            continue;
        }
        let p = real.to_string_lossy().into_owned();
        args.extend(["--ro-bind".into(), p.clone(), p]);
        hide.walk(&real, Some(EXTRA_DEPTH));
        bound.push(real);
    }
    let mut roots: Vec<_> = layout.roots.iter().collect();
    roots.sort_by_key(|r| r.path.components().count());
    for root in roots {
        if hide.covers(&root.path) {
            // A root that is itself a credential folder, or Aether's own, is not shown.
            continue;
        }
        let writable = layout.settings.write
            && root.mode == RootMode::ReadWrite
            && root.gate.globs().is_none();
        let p = root.path.to_string_lossy().into_owned();
        let how = if writable { "--bind" } else { "--ro-bind" };
        args.extend([how.into(), p.clone(), p]);
        hide.walk(&root.path, None);
        bound.push(root.path.clone());
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
    for git in &hide.read_only {
        let p = git.to_string_lossy().into_owned();
        args.extend(["--ro-bind".into(), p.clone(), p]);
    }
    let empty = layout.scratch.join("empty").to_string_lossy().into_owned();
    let empty_dir = layout
        .scratch
        .join("empty.d")
        .to_string_lossy()
        .into_owned();
    hide.masks.sort();
    hide.masks.dedup();
    // A path inside a covered folder is gone with it (and could not be covered again: the
    // empty folder is read-only).
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (path, is_dir) in std::mem::take(&mut hide.masks) {
        if !kept
            .iter()
            .any(|(k, dir)| *dir && path.starts_with(k) && path != *k)
        {
            kept.push((path, is_dir));
        }
    }
    for (path, is_dir) in &kept {
        let source = if *is_dir { &empty_dir } else { &empty };
        // `-try`: a path that went away since the walk needs no cover.
        args.extend([
            "--ro-bind-try".into(),
            source.clone(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    args.extend([
        "--chdir".into(),
        layout.cwd.to_string_lossy().into_owned(),
        "--".into(),
        layout.shell.into(),
        "-c".into(),
        layout.command.into(),
    ]);
    Ok(args)
}

/// What the walk of the bound folders found to cover or make read-only.
struct Hide<'a> {
    /// Paths covered by an empty file or folder (`true`: a folder).
    masks: Vec<(PathBuf, bool)>,
    /// `.git` folders and files, bound read-only.
    read_only: Vec<PathBuf>,
    credentials: &'a CredentialFilter,
}

impl Hide<'_> {
    /// Whether `real` is a credential, Aether's own, or inside one.
    fn covers(&self, real: &Path) -> bool {
        let text = real.to_string_lossy();
        self.credentials.is_private(&text) || self.credentials.is_credential(&text)
    }

    fn walk(&mut self, top: &Path, depth: Option<usize>) {
        let mut walk = walkdir::WalkDir::new(top).follow_links(false).min_depth(1);
        if let Some(depth) = depth {
            walk = walk.max_depth(depth);
        }
        let mut it = walk.into_iter();
        while let Some(entry) = it.next() {
            let Ok(entry) = entry else { continue };
            let ft = entry.file_type();
            if ft.is_symlink() {
                // Not followed: its target is either outside the sandbox (absent there) or
                // inside a bound folder, where this walk judges it on its own path.
                continue;
            }
            let path = entry.path();
            if entry.file_name() == ".git" {
                self.read_only.push(path.to_path_buf());
                if ft.is_dir() {
                    self.git_configs(path);
                    it.skip_current_dir();
                }
                continue;
            }
            if self.covers(path) || ft.is_socket() {
                // A socket could reach a daemon outside the sandbox: covered like a secret.
                self.masks.push((path.to_path_buf(), ft.is_dir()));
                if ft.is_dir() {
                    it.skip_current_dir();
                }
            }
        }
    }

    /// The config files in a `.git` folder (they can hold credentials in remote URLs).
    fn git_configs(&mut self, git: &Path) {
        for name in ["config", "config.worktree"] {
            let p = git.join(name);
            if p.is_file() {
                self.masks.push((p, false));
            }
        }
        for entry in walkdir::WalkDir::new(git.join("modules"))
            .follow_links(false)
            .into_iter()
            .flatten()
        {
            if entry.file_type().is_file() && entry.file_name() == "config" {
                self.masks.push((entry.path().to_path_buf(), false));
            }
        }
    }
}

//! The control-file guard: while programs Aether starts may write where Aether's user can
//! (stdio upstreams, `run_command`), the roots are watched for an Aether control file
//! (`aether.toml`, `permissions.yaml`, any spelling: `aether_policy::paths::CONTROL_NAMES`)
//! that was not there when Aether started, and each is set aside at once
//! (`NAME.set-aside-by-aether-…`), before the Aether it would configure reads it (a rules file
//! is read only once it held still for 200 ms, and a removed one keeps the last good rules).
//!
//! The files existing at start are a baseline, by device and inode: they stay (an operator's
//! edit in place keeps its inode; programs cannot write them, they are covered), and one whose
//! identity changed — replaced by a rename — is set aside like a new one. This process's own
//! configuration and rules file are left to the operator whatever happens to them. A new
//! folder is looked through at once and twice more (after 200 ms and 2 s): the watch on a new
//! folder is added only after its event is handed on, so a file made in it (or in a folder
//! made in it) before then raises no event of its own. An overflow of the watch's queue walks
//! every root again. Folders are walked on one thread of their own, so a big one delays no
//! file event. Renames happen beneath the root, through no
//! symlink ([`set_aside_beneath`]): a folder swapped for a link meanwhile cannot turn one
//! onto a file elsewhere.
//!
//! Not done: a root that cannot be watched (no inotify watches left) is logged and left to
//! `run_command`'s own check after each run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aether_policy::paths::is_control_file;

use super::sandbox::control_files_in;

/// A file's identity across renames: device and inode.
type Identity = (u64, u64);

fn identity(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The running guard; it stops when dropped (the sweeper ends with the watcher's sender).
pub struct ControlGuard {
    _watcher: notify::RecommendedWatcher,
}

/// When a new folder is looked through again after its first look.
const SWEEP_AGAIN: [std::time::Duration; 2] = [
    std::time::Duration::from_millis(200),
    std::time::Duration::from_secs(2),
];

/// Walks the folders it is sent (now, then after each of [`SWEEP_AGAIN`]) until its sender
/// is gone.
fn sweeper(watched: Arc<Watched>, folders: std::sync::mpsc::Receiver<PathBuf>) {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Instant;
    // One queue per delay: each is in the order of its due times.
    let mut again: [std::collections::VecDeque<(Instant, PathBuf)>; 2] = Default::default();
    loop {
        let next = again
            .iter()
            .filter_map(|q| q.front().map(|(at, _)| *at))
            .min();
        let wait = next.map(|at| at.saturating_duration_since(Instant::now()));
        let got = match wait {
            Some(wait) => folders.recv_timeout(wait),
            None => folders.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(folder) => {
                watched.sweep(&folder);
                let now = Instant::now();
                for (queue, delay) in again.iter_mut().zip(SWEEP_AGAIN) {
                    queue.push_back((now + delay, folder.clone()));
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        for queue in &mut again {
            while queue.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, folder)) = queue.pop_front() {
                    watched.sweep(&folder);
                }
            }
        }
    }
}

struct Watched {
    roots: Vec<PathBuf>,
    /// This process's own configuration and rules file: never set aside.
    own: Vec<PathBuf>,
    /// The control files at start, by identity.
    baseline: HashMap<PathBuf, Identity>,
}

impl Watched {
    /// Sets `path` aside unless it is this process's own or unchanged since start.
    fn judge(&self, path: &Path) {
        if !is_control_file(&path.to_string_lossy()) {
            return;
        }
        // Judged where it really is (an event may name it through a link to its folder).
        let real = match (path.parent().map(std::fs::canonicalize), path.file_name()) {
            (Some(Ok(folder)), Some(name)) => folder.join(name),
            _ => return,
        };
        let path = real.as_path();
        if self.own.iter().any(|o| o == path) {
            return;
        }
        let now = identity(path);
        if now.is_none() || self.baseline.get(path).copied() == now {
            return;
        }
        set_aside_beneath(&self.roots, path);
    }

    /// Looks through a folder (a new one, or a root again after the queue overflowed).
    fn sweep(&self, folder: &Path) {
        for path in control_files_in(std::slice::from_ref(&folder.to_path_buf())) {
            self.judge(&path);
        }
    }
}

impl ControlGuard {
    /// Starts watching `roots` (real paths); `own`: this process's configuration and rules
    /// file. Walks the roots once (blocking) for the baseline. `None` where no watch could be
    /// made (the log says why).
    pub fn start(roots: Vec<PathBuf>, own: Vec<PathBuf>) -> Option<ControlGuard> {
        use notify::Watcher;
        let baseline = control_files_in(&roots)
            .into_iter()
            .filter_map(|p| identity(&p).map(|id| (p, id)))
            .collect();
        let own = own
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .chain(own.iter().cloned())
            .collect();
        let watched = Arc::new(Watched {
            roots: roots.clone(),
            own,
            baseline,
        });
        let handler = watched.clone();
        let (to_sweep, folders) = std::sync::mpsc::channel::<PathBuf>();
        let swept = watched.clone();
        std::thread::Builder::new()
            .name("aether-control-sweeper".into())
            .spawn(move || sweeper(swept, folders))
            .map_err(|e| tracing::warn!(error = %e, "cannot start the control-file sweeper"))
            .ok()?;
        let mut watcher = notify::RecommendedWatcher::new(
            move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                if event.need_rescan() {
                    for root in &handler.roots {
                        let _ = to_sweep.send(root.clone());
                    }
                    return;
                }
                if !matches!(
                    event.kind,
                    notify::EventKind::Create(_)
                        | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
                ) {
                    return;
                }
                for path in event.paths {
                    // A file event is judged here, at once; a new folder (never a link to one)
                    // goes to the sweeper.
                    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                        let _ = to_sweep.send(path);
                    } else {
                        handler.judge(&path);
                    }
                }
            },
            // A link to a folder is not followed (its folder is watched where it really is).
            notify::Config::default().with_follow_symlinks(false),
        )
        .map_err(|e| tracing::warn!(error = %e, "cannot watch the roots for control files"))
        .ok()?;
        for root in &roots {
            if let Err(e) = watcher.watch(root, notify::RecursiveMode::Recursive) {
                tracing::warn!(error = %e, root = %root.display(), "cannot watch a root for control files");
            }
        }
        Some(ControlGuard { _watcher: watcher })
    }
}

/// Renames `path`, a control file under one of `roots`, aside (`NAME` + `SET_ASIDE` + a
/// stamp): its folder opened beneath the root through no symlink, the entry itself checked
/// (no folder) and renamed in that folder. Whether it is gone from its name.
pub fn set_aside_beneath(roots: &[PathBuf], path: &Path) -> bool {
    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
    let Some(root) = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
    else {
        return false;
    };
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let (Some(name), parent) = (rel.file_name(), rel.parent().unwrap_or(Path::new(""))) else {
        return false;
    };
    let shown = name.to_string_lossy().into_owned();
    if !is_control_file(&shown) {
        return false;
    }
    let opened = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .and_then(|root_fd| {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        rustix::fs::openat2(
            &root_fd,
            parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
    });
    let Ok(folder) = opened else {
        tracing::warn!(path = %path.display(), "a control file's folder could not be opened beneath its root; not set aside");
        return false;
    };
    match rustix::fs::statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st)
            if rustix::fs::FileType::from_raw_mode(st.st_mode)
                != rustix::fs::FileType::Directory => {}
        _ => return false,
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let aside = format!("{shown}{}-{stamp}", super::SET_ASIDE);
    match rustix::fs::renameat(&folder, name, &folder, aside.as_str()) {
        Ok(()) => {
            tracing::warn!(path = %path.display(), "an Aether control file appeared in a root; set aside");
            true
        }
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "an Aether control file appeared in a root and could not be set aside");
            false
        }
    }
}

//! Keeping a command's whole process tree, so that all of it can be killed.
//!
//! A process group alone is not enough: a child can `setsid` (or `setpgid`) and double-fork,
//! and is then in no group of ours. Where the kernel lets us, each command runs in a cgroup
//! of its own (cgroup v2, created under Aether's own cgroup): the child moves itself there
//! between `fork` and `exec`, so everything it ever starts is in it, whatever session or group
//! it makes, and `cgroup.kill` ends them all at once. Where no cgroup can be made (no cgroup v2,
//! or no write access to Aether's cgroup), the command gets its own process group and session,
//! and the group is killed: a process that leaves the group escapes, and the call says which
//! containment it had. (A process that can write to other cgroups — root, say — can leave a
//! cgroup too; run Aether as an ordinary user.)

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a command's tree is held.
pub enum Containment {
    /// A cgroup v2 directory of its own, and the open `cgroup.procs` the child writes to.
    Cgroup { dir: PathBuf, procs: File },
    /// Its own process group and session only.
    ProcessGroup,
}

impl Containment {
    /// A cgroup for one command, if this machine lets Aether make one.
    pub fn new(id: &str) -> Containment {
        match cgroup_dir(id) {
            Some(dir) => match std::fs::create_dir(&dir)
                .and_then(|()| File::options().write(true).open(dir.join("cgroup.procs")))
            {
                Ok(procs) => Containment::Cgroup { dir, procs },
                Err(_) => {
                    let _ = std::fs::remove_dir(&dir);
                    Containment::ProcessGroup
                }
            },
            None => Containment::ProcessGroup,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Containment::Cgroup { .. } => "cgroup",
            Containment::ProcessGroup => "process-group",
        }
    }

    /// Prepares `command` so that its child enters the containment before it runs anything.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        // A session of its own (and so a process group): no terminal, and a group to kill.
        let procs_fd = match self {
            Containment::Cgroup { procs, .. } => Some(procs.as_raw_fd()),
            Containment::ProcessGroup => None,
        };
        #[allow(unsafe_code)]
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe calls are allowed: `setsid` and `write` are, and nothing here
        // allocates or takes a lock. The fd stays open in the parent until the child is
        // reaped.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = procs_fd {
                    // "0" moves the writing process itself into the cgroup.
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }

    /// Kills everything in the tree (the child's group, and with a cgroup every process that
    /// ever descended from it), and waits a little for the cgroup to empty. It blocks: call
    /// it off the async threads.
    pub fn kill_all(&mut self, leader: Option<u32>) {
        self.signal_all(leader);
        self.wait_empty();
    }

    /// Sends every process in the tree SIGKILL, without waiting for any to go: a few system
    /// calls, safe on any thread. The tree is dead once they are delivered; what is left is
    /// the kernel reaping it ([`Containment::wait_empty`]).
    pub fn signal_all(&mut self, leader: Option<u32>) {
        if let Some(pid) = leader
            && let Some(pid) = rustix::process::Pid::from_raw(pid as i32)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        if let Containment::Cgroup { dir, .. } = self {
            if let Ok(mut kill) = File::options().write(true).open(dir.join("cgroup.kill")) {
                let _ = kill.write_all(b"1");
            } else {
                // Kernels before 5.14: kill each process listed.
                kill_listed(dir);
            }
        }
    }

    /// Waits (at most 2 s, polling) for a killed cgroup to empty, so that it can be removed
    /// when the containment is dropped. Blocks: call it off the async threads.
    pub fn wait_empty(&mut self) {
        if let Containment::Cgroup { dir, .. } = self {
            let deadline = Instant::now() + Duration::from_secs(2);
            while populated(dir) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

impl Drop for Containment {
    fn drop(&mut self) {
        if let Containment::Cgroup { dir, .. } = self {
            let _ = std::fs::remove_dir(&*dir);
        }
    }
}

fn kill_listed(dir: &Path) {
    let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| !t.trim().is_empty())
        .unwrap_or(false)
}

/// Where this process's cgroup v2 is, and a new directory under it for `id`.
fn cgroup_dir(id: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // mountinfo: ... mountpoint ... - fstype source options
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4))?
    })?;
    let base = Path::new(mount).join(path.trim_start_matches('/'));
    Some(base.join(format!("aether-run-{id}")))
}

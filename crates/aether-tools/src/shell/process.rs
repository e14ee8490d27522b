//! Running one command for a tool: logged before it starts, a clean environment, no stdin, a
//! time limit, its whole process tree killed however the call ends, and its output captured
//! with head and tail kept — up to a cap: a command that writes more than [`OUTPUT_CAP`]
//! bytes (both streams together) is killed with its whole tree as soon as it does, not read
//! until it stops. `run_command` and `run_shell` differ only in what they run.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use aether_policy::journal::{CommandEnd, CommandStart};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::tree::Containment;
use crate::{CallContext, ToolError, ToolOutput, now_us};

/// Bytes kept from the start and from the end of each stream.
const KEEP: usize = 32 << 10;

/// Bytes a command may write to stdout and stderr together. Past this its output is a flood
/// no caller reads whole: the command and everything it started are killed at once.
pub(crate) const OUTPUT_CAP: u64 = 16 << 20;

/// What both command tools return.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Output {
    /// The exit code, when the command exited by itself.
    pub exit_code: Option<i32>,
    /// It ran out of time and was killed, with everything it started.
    pub timed_out: bool,
    /// Its output reached the cap (16 MiB, stdout and stderr together) and it was killed
    /// there, with everything it started; the text keeps the head and the tail read by then.
    pub output_capped: bool,
    pub stdout: String,
    pub stderr: String,
    /// Bytes the command wrote to each stream (the text keeps the head and tail).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: u64,
    /// How its process tree was held: "cgroup" or "process-group".
    pub containment: String,
    /// The sandbox it ran in: "bubblewrap" (`run_shell`), "secrets-covered" (`run_command`
    /// under bubblewrap), or "none" (`run_command` where its entry allows it uncovered).
    pub sandbox: String,
}

/// The seven variables a command gets, and nothing else.
pub(crate) fn environment(home: &str, tmp: &str) -> [(&'static str, String); 7] {
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME", home.into()),
        ("TMPDIR", tmp.into()),
        ("LANG", "C.UTF-8".into()),
        ("LC_ALL", "C.UTF-8".into()),
        ("TERM", "dumb".into()),
        ("TZ", "UTC".into()),
    ]
}

/// A command's working folder: `cwd` in the root named `root` (the first by default), judged
/// on its real path, and never one of Aether's own folders.
pub(crate) struct Folder<'a> {
    pub root: &'a crate::Root,
    /// Relative to the root, as the caller named it.
    pub rel: String,
    /// The real path.
    pub path: std::path::PathBuf,
}

pub(crate) fn working_folder<'a>(
    cx: &'a CallContext,
    root: Option<&str>,
    cwd: Option<&str>,
) -> Result<Folder<'a>, ToolError> {
    let mut buffer = String::new();
    let loc = cx.roots.locate(root, cwd.unwrap_or(""), &mut buffer)?;
    let (name, rel) = (loc.root.name.clone(), loc.rel.to_string());
    let root = cx
        .roots
        .get(&name)
        .expect("a root that was just located is among the roots");
    let (_dir, path) = root.open_folder(&rel, cx.opening())?;
    if cx.roots.is_private(&path) {
        return Err(ToolError::denied(
            "protected-path",
            format!("{} is Aether's own folder", root.display(&rel)),
        ));
    }
    Ok(Folder { root, rel, path })
}

/// What to run, and what the command log says about it.
pub(crate) struct Spawn<'a, A: AsRef<std::ffi::OsStr>> {
    pub exe: &'a str,
    pub argv: &'a [A],
    pub cwd: &'a Path,
    pub env: &'a [(&'static str, String)],
    pub timeout: Duration,
    /// How the result names the command ("/usr/bin/git", "the shell").
    pub label: &'a str,
    pub home: &'a Home,
    /// The command log's row, written before the command starts.
    pub log: CommandStart,
}

/// A command as the command log keeps it: the text, or the rule that found a credential in
/// it (the log, like the audit, never holds a secret).
pub(crate) fn logged_text(command: &str) -> String {
    match aether_policy::dlp::Scanner::shared().scan_text("command", command) {
        Some(finding) => format!(
            "[withheld: the command carries a credential ({})]",
            finding.rule
        ),
        None => command.to_string(),
    }
}

/// Logs the command (durably), runs it, records how it ended.
pub(crate) async fn run<A: AsRef<std::ffi::OsStr>>(
    cx: &CallContext,
    spawn: Spawn<'_, A>,
) -> Result<ToolOutput, ToolError> {
    let sandbox = spawn.log.sandbox.clone();
    let mut log = spawn.log.clone();
    log.at_us = now_us();
    let logged = cx.ledger.command_started(log).await.map_err(|e| {
        ToolError::failed(format!(
            "the command log could not be written, so the command did not run: {e}"
        ))
    })?;
    let ran = execute(&spawn).await;
    let end = CommandEnd {
        at_us: now_us(),
        exit_code: ran.as_ref().ok().and_then(|o| o.exit_code),
        timed_out: ran.as_ref().is_ok_and(|o| o.timed_out),
    };
    // The command has run: a log that cannot take its end does not turn the result into an
    // error (the row stays open, which says "did not see it end").
    if let Err(e) = cx.ledger.command_ended(logged, end).await {
        tracing::warn!(error = %e, "command log: could not record a command's end");
    }
    let mut output = ran?;
    output.sandbox = sandbox;
    let status = if output.timed_out {
        format!(
            "killed after {} s (with everything it started)",
            spawn.timeout.as_secs()
        )
    } else if output.output_capped {
        format!(
            "killed when its output reached {} MiB (with everything it started)",
            OUTPUT_CAP >> 20
        )
    } else {
        match output.exit_code {
            Some(code) => format!("exit code {code}"),
            None => "ended by a signal".into(),
        }
    };
    let text = format!(
        "{}: {status}\n--- stdout ({} bytes) ---\n{}\n--- stderr ({} bytes) ---\n{}",
        spawn.label, output.stdout_bytes, output.stdout, output.stderr_bytes, output.stderr
    );
    let failed = output.timed_out || output.output_capped || output.exit_code != Some(0);
    let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
    let mut result = ToolOutput::with_structured(text, structured);
    result.is_error = failed;
    Ok(result)
}

async fn execute<A: AsRef<std::ffi::OsStr>>(spawn: &Spawn<'_, A>) -> Result<Output, ToolError> {
    let exe = spawn.exe;
    // No other process of this user reads Aether's memory or environment through /proc
    // (a command could otherwise find Aether's keys in /proc/PID/environ).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let command = |containment: &Containment| {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(spawn.argv)
            .current_dir(spawn.cwd)
            .env_clear()
            .envs(spawn.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        containment.apply(&mut command);
        command
    };
    let started = Instant::now();
    let mut containment = Containment::new(&spawn.home.id);
    let mut child = match command(&containment).spawn() {
        Ok(child) => child,
        // Entering the cgroup can fail where making it did not (no write access to the
        // parent's cgroup.procs): the command still runs, in a process group.
        Err(_) if containment.name() == "cgroup" => {
            containment = Containment::ProcessGroup;
            command(&containment)
                .spawn()
                .map_err(|e| ToolError::failed(format!("{exe} did not start: {e}")))?
        }
        Err(e) => return Err(ToolError::failed(format!("{exe} did not start: {e}"))),
    };
    // From here, however this call ends (finished, out of time, or dropped by the pipeline),
    // the whole tree is killed.
    let mut tree = Tree {
        containment: Some(containment),
        leader: child.id(),
    };
    let flood = std::sync::Arc::new(Flood::default());
    let out = tokio::spawn(capture(child.stdout.take().expect("piped"), flood.clone()));
    let err = tokio::spawn(capture(child.stderr.take().expect("piped"), flood.clone()));
    // Whichever comes first: the command ends, its time runs out, its output reaches the cap.
    let (timed_out, exit_code) = tokio::select! {
        status = child.wait() => (false, status.ok().and_then(|s| s.code())),
        () = tokio::time::sleep(spawn.timeout) => (true, None),
        () = flood.capped.notified() => (false, None),
    };
    // Cut at the cap whichever was seen first: a command the cap's closed pipe killed
    // (SIGPIPE) may be seen ending before the cap's notice.
    let output_capped =
        !timed_out && flood.written.load(std::sync::atomic::Ordering::Relaxed) >= OUTPUT_CAP;
    let exit_code = exit_code.filter(|_| !output_capped);
    let name = tree.kill().await;
    let _ = child.kill().await;
    // The pipes close once everything holding them is dead; what was read is kept.
    let collect = |task: tokio::task::JoinHandle<(String, u64)>| async move {
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    let ((stdout, stdout_bytes), (stderr, stderr_bytes)) = (collect(out).await, collect(err).await);
    Ok(Output {
        exit_code,
        timed_out,
        output_capped,
        stdout,
        stderr,
        stdout_bytes,
        stderr_bytes,
        duration_ms: started.elapsed().as_millis() as u64,
        containment: name.into(),
        sandbox: String::new(),
    })
}

/// A running command's tree: killed by [`Tree::kill`], or on drop if the call ends any other
/// way.
struct Tree {
    containment: Option<Containment>,
    leader: Option<u32>,
}

impl Tree {
    /// Kills everything (off the async threads) and says how the tree was held.
    async fn kill(&mut self) -> &'static str {
        let Some(mut containment) = self.containment.take() else {
            return "process-group";
        };
        let leader = self.leader;
        let name = containment.name();
        let _ = tokio::task::spawn_blocking(move || containment.kill_all(leader)).await;
        name
    }
}

impl Drop for Tree {
    /// The call ended some other way (dropped by the pipeline, a panic): the whole tree is
    /// killed here and now, and the wait for the kernel to empty its cgroup (and the cgroup's
    /// removal) goes to the blocking pool, never a runtime thread. Without a runtime this is
    /// no async thread, and it waits where it is.
    fn drop(&mut self) {
        let Some(mut containment) = self.containment.take() else {
            return;
        };
        containment.signal_all(self.leader);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || containment.wait_empty());
            }
            Err(_) => containment.wait_empty(),
        }
    }
}

/// The bytes a command's streams have written, together, and the signal that they reached
/// [`OUTPUT_CAP`].
#[derive(Default)]
struct Flood {
    written: std::sync::atomic::AtomicU64,
    capped: tokio::sync::Notify,
}

/// Reads a stream to its end, keeping its first and last [`KEEP`] bytes — or until the
/// command's streams together reach [`OUTPUT_CAP`]: then it says so (the command is killed)
/// and stops reading, so that a writer the kill missed meets a closed pipe.
async fn capture<R: tokio::io::AsyncRead + Unpin>(
    mut stream: R,
    flood: std::sync::Arc<Flood>,
) -> (String, u64) {
    use std::sync::atomic::Ordering;
    let mut head = Vec::new();
    let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut total = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n as u64;
        let mut chunk = &buf[..n];
        if head.len() < KEEP {
            let take = (KEEP - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        tail.extend(chunk);
        while tail.len() > KEEP {
            tail.pop_front();
        }
        if flood.written.fetch_add(n as u64, Ordering::Relaxed) + n as u64 >= OUTPUT_CAP {
            // A permit is kept if the command's waiter is not listening yet.
            flood.capped.notify_one();
            break;
        }
    }
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let shown = if tail.is_empty() {
        text(&head)
    } else {
        let tail: Vec<u8> = tail.into_iter().collect();
        let skipped = total - head.len() as u64 - tail.len() as u64;
        if skipped == 0 {
            format!("{}{}", text(&head), text(&tail))
        } else {
            format!(
                "{}\n[… {skipped} bytes left out …]\n{}",
                text(&head),
                text(&tail)
            )
        }
    };
    (shown, total)
}

/// A fresh, private, empty folder for one command (its HOME and TMPDIR, or the sandbox's
/// scratch files), removed afterwards; and the command's id, unique in this process.
pub(crate) struct Home {
    pub dir: PathBuf,
    pub id: String,
}

impl Home {
    pub fn new(call_id: &str) -> Result<Home, ToolError> {
        use std::os::unix::fs::DirBuilderExt;
        // Unique per run in this process (a call id alone is not, in tests or after a retry).
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call: String = call_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(64)
            .collect();
        // Unpredictable too: the folder is made with `create` (never reused), so a name
        // someone else took first would only fail the command.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let id = format!("{call}-{}-{n}-{nanos:x}", std::process::id());
        let dir = std::env::temp_dir().join(format!("aether-run-{id}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ToolError::failed(format!("cannot make a home for the command: {e}")))?;
        Ok(Home { dir, id })
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the folders of processes that ended without removing their own: a command's home
/// (`aether-run-CALL-PID-N-NANOS`, left when a process exits or is killed mid-command, as a
/// short-lived `aether` command does while its sandbox probe still runs) and a process's
/// pinned names (`aether-pins-PID`). Only this user's folders whose process is gone; run as the
/// sandbox's probe starts, so every process that runs commands sweeps once. Returns how many
/// went.
pub(crate) fn sweep_orphans() -> usize {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = orphan_pid(&name) else {
            continue;
        };
        // Untouched for a day: longer than any command may run, so not the home of a live
        // command of a process this one cannot see (another PID namespace sharing /tmp); a
        // live process's pinned names' folder swept so is made again at its next run.
        let ours = entry.metadata().is_ok_and(|m| {
            m.is_dir()
                && m.uid() == me
                && m.modified()
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= ORPHAN_AGE))
        });
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if ours && !alive && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// How long a folder of a process that is gone stays before it is swept.
const ORPHAN_AGE: Duration = Duration::from_secs(24 * 3600);

/// The process id in the name of a folder [`Home`] or the pinned names make.
fn orphan_pid(name: &str) -> Option<u32> {
    if let Some(pid) = name.strip_prefix("aether-pins-") {
        return pid.parse().ok();
    }
    // aether-run-CALL-PID-N-NANOS, CALL itself possibly holding dashes.
    let rest = name.strip_prefix("aether-run-")?;
    let mut parts = rest.rsplitn(4, '-');
    let (_nanos, _n, pid) = (parts.next()?, parts.next()?, parts.next()?);
    parts.next()?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::orphan_pid;

    #[test]
    fn orphan_folders_name_their_process() {
        assert_eq!(orphan_pid("aether-pins-4242"), Some(4242));
        assert_eq!(orphan_pid("aether-run-probe-1024-0-1f247a74"), Some(1024));
        assert_eq!(
            orphan_pid("aether-run-0193a5b2-77aa-7c1d-9e3f-0a1b2c3d4e5f-77-3-ff"),
            Some(77)
        );
        for not in [
            "aether-run-x",
            "aether-pins-",
            "aether-run-1-2",
            "other-123",
            "aether-run-probe-x-0-1",
        ] {
            assert_eq!(orphan_pid(not), None, "{not}");
        }
    }
}

//! `run_command`: an absolute executable and its argv, from the agent's project allowlist,
//! without a shell.
//!
//! The argv must start with an allowlisted prefix, and every option after it must be one the
//! entry lists (`aether_policy::commands`). The child gets exactly seven environment
//! variables (no credentials, a fresh empty HOME), no stdin, a working folder inside a root
//! (judged on its real path), a time limit of 1–300 s, and its whole process tree is killed
//! when the command ends or runs out of time. Output is captured and capped, keeping its head
//! and its tail. `git` runs with overrides that switch off repository-defined programs, and is
//! refused in a repository whose config defines any.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use aether_policy::commands::{
    CommandRule, GIT_OVERRIDES, forced_arguments, git_config_programs, program_name,
};
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Risk, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::tree::Containment;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// Bytes kept from the start and from the end of each stream.
const KEEP: usize = 32 << 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The executable, an absolute path from the project's allowlist (e.g. "/usr/bin/git").
    command: String,
    /// Its arguments; they must start with an allowed prefix (e.g. ["status"]).
    #[serde(default)]
    args: Vec<String>,
    /// The working folder, relative to the root. Defaults to the root itself.
    #[serde(default)]
    cwd: Option<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// Seconds before the command and everything it started are killed (1-300, default 60).
    #[serde(default)]
    #[schemars(range(min = 1, max = 300))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The exit code, when the command exited by itself.
    exit_code: Option<i32>,
    /// It ran out of time and was killed, with everything it started.
    timed_out: bool,
    stdout: String,
    stderr: String,
    /// Bytes the command wrote to each stream (the text keeps the head and tail).
    stdout_bytes: u64,
    stderr_bytes: u64,
    duration_ms: u64,
    /// How its process tree was held: "cgroup" or "process-group".
    containment: String,
}

pub struct RunCommand {
    def: ToolDef,
}

impl RunCommand {
    pub fn new() -> RunCommand {
        RunCommand {
            def: ToolDef {
                name: "run_command".into(),
                title: "Run a command".into(),
                group: groups::SHELL.into(),
                tier: Tier::Standard,
                description: "Run an allowed program (absolute path) with arguments, without a shell: no \
                     pipes, no redirection, no globbing. Only the executables and argument prefixes the \
                     operator allowed for this project run, with only the options listed for them. Runs \
                     in a folder of a root with a clean environment; stdout and stderr come back \
                     (long output keeps its head and tail); it is killed, with everything it started, \
                     after timeout_seconds."
                    .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Output>(),
                meta: ToolMeta {
                    risk: Risk::High,
                    read_only: false,
                    reaches_network: false,
                    needs_confirmation: false,
                    idempotent: false,
                    destructive: true,
                },
            },
        }
    }
}

impl Default for RunCommand {
    fn default() -> Self {
        RunCommand::new()
    }
}

#[async_trait]
impl Tool for RunCommand {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        if agent.commands.is_empty() {
            return Err(format!(
                "agent {:?}'s project allows no commands (projects.NAME.commands in aether.toml)",
                agent.name
            ));
        }
        Ok(())
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let rule = allowed(&cx.agent.commands, &args.command, &args.args)?;
        // Within the pipeline's own limit for a call, so that this tool, not the pipeline
        // dropping it, is what stops the command (a drop kills the tree too, but says less).
        let ceiling = cx.limits.tool_seconds.saturating_sub(1).max(1);
        let timeout = Duration::from_secs(
            args.timeout_seconds
                .unwrap_or(60)
                .clamp(1, 300)
                .min(ceiling),
        );
        // The working folder: inside a root, judged on its real path.
        let mut rel = String::new();
        let loc = cx.roots.locate(
            args.root.as_deref(),
            args.cwd.as_deref().unwrap_or(""),
            &mut rel,
        )?;
        let (root, rel) = (loc.root, loc.rel.to_string());
        let (_dir, cwd) = root.open_folder(&rel, cx.roots.credentials())?;
        if cx.roots.is_private(&cwd) {
            return Err(ToolError::denied(
                "protected-path",
                format!("{} is Aether's own folder", root.display(&rel)),
            ));
        }
        let mut argv: Vec<String> = forced_arguments(&rule.exe)
            .iter()
            .map(|a| a.to_string())
            .collect();
        if program_name(&rule.exe) == "git" {
            // The repository git uses is the one Aether checked, inside the root: git would
            // otherwise keep looking upward, out of it.
            let git_dir = refuse_git_programs(&cwd, &root.path)?;
            argv.push(format!("--git-dir={}", git_dir.display()));
            argv.push(format!(
                "--work-tree={}",
                git_dir.parent().unwrap_or(&cwd).display()
            ));
            for o in GIT_OVERRIDES {
                argv.push("-c".to_string());
                argv.push(o.to_string());
            }
        }
        argv.extend(args.args.iter().cloned());
        run(&rule.exe, &argv, &cwd, timeout, &cx.call_id).await
    }
}

/// The entry that allows this command, or why none does.
fn allowed<'a>(
    rules: &'a [CommandRule],
    exe: &str,
    args: &[String],
) -> Result<&'a CommandRule, ToolError> {
    if !exe.starts_with('/') {
        return Err(ToolError::InvalidArguments(format!(
            "command {exe:?} must be an absolute path (there is no PATH lookup)"
        )));
    }
    let Some(rule) = rules.iter().find(|r| r.covers(exe, args)) else {
        let allowed: Vec<String> = rules
            .iter()
            .map(|r| {
                std::iter::once(r.exe.as_str())
                    .chain(r.prefix.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        return Err(ToolError::denied(
            "command-allowlist",
            format!(
                "{exe} with these arguments is not allowed for this project; allowed: {}",
                allowed.join("; ")
            ),
        ));
    };
    rule.check_rest(args)
        .map_err(|why| ToolError::denied("command-flags", why))?;
    // Judged on the file itself: the path must be the program, not a link to another.
    let meta =
        std::fs::symlink_metadata(exe).map_err(|e| ToolError::failed(format!("{exe}: {e}")))?;
    if !meta.is_file() {
        return Err(ToolError::failed(format!(
            "{exe} is not a regular file (a link or folder); allow the program's real path"
        )));
    }
    Ok(rule)
}

/// The repository for `cwd`: the nearest `.git` folder from `cwd` up to the root, whose
/// config (and worktree config) names no program. A `.git` file (a link to a repository
/// elsewhere) or no repository inside the root is refused.
fn refuse_git_programs(cwd: &Path, root: &Path) -> Result<PathBuf, ToolError> {
    let mut at = Some(cwd);
    while let Some(dir) = at {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() => {
                for name in ["config", "config.worktree"] {
                    let config = git.join(name);
                    let Ok(text) = std::fs::read_to_string(&config) else {
                        continue;
                    };
                    let found = git_config_programs(&text);
                    if !found.is_empty() {
                        return Err(ToolError::denied(
                            "git-config",
                            format!(
                                "the repository's config names programs git would run ({}); Aether \
                                 does not run git there (an operator can remove them from {})",
                                found.join(", "),
                                config.display()
                            ),
                        ));
                    }
                }
                return Ok(git);
            }
            Ok(_) => {
                return Err(ToolError::denied(
                    "git-config",
                    format!(
                        "{} is not a folder (it points at a repository elsewhere); Aether runs git only \
                         on a repository inside the root",
                        git.display()
                    ),
                ));
            }
            Err(_) => {}
        }
        if dir == root {
            break;
        }
        at = dir.parent();
    }
    Err(ToolError::failed(
        "no git repository (a .git folder) inside the root holds the working folder",
    ))
}

/// The seven variables a command gets, and nothing else.
fn environment(home: &Path) -> [(&'static str, String); 7] {
    let home = home.to_string_lossy().into_owned();
    [
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME", home.clone()),
        ("TMPDIR", home),
        ("LANG", "C.UTF-8".into()),
        ("LC_ALL", "C.UTF-8".into()),
        ("TERM", "dumb".into()),
        ("TZ", "UTC".into()),
    ]
}

async fn run(
    exe: &str,
    argv: &[String],
    cwd: &Path,
    timeout: Duration,
    call_id: &str,
) -> Result<ToolOutput, ToolError> {
    // No other process of this user reads Aether's memory or environment through /proc
    // (a command could otherwise find Aether's keys in /proc/PID/environ).
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // Unique per run in this process (a call id alone is not, in tests or after a retry).
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let call: String = call_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    let id = format!("{call}-{}-{n}", std::process::id());
    let home = Home::new(&id)?;
    let command = |containment: &Containment| {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(argv)
            .current_dir(cwd)
            .env_clear()
            .envs(environment(&home.0))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        containment.apply(&mut command);
        command
    };
    let started = Instant::now();
    let mut containment = Containment::new(&id);
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
    let out = tokio::spawn(capture(child.stdout.take().expect("piped")));
    let err = tokio::spawn(capture(child.stderr.take().expect("piped")));
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    let (timed_out, exit_code) = match waited {
        Ok(status) => (false, status.ok().and_then(|s| s.code())),
        Err(_) => (true, None),
    };
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
    let output = Output {
        exit_code,
        timed_out,
        stdout,
        stderr,
        stdout_bytes,
        stderr_bytes,
        duration_ms: started.elapsed().as_millis() as u64,
        containment: name.into(),
    };
    let status = if timed_out {
        format!(
            "killed after {} s (with everything it started)",
            timeout.as_secs()
        )
    } else {
        match exit_code {
            Some(code) => format!("exit code {code}"),
            None => "ended by a signal".into(),
        }
    };
    let text = format!(
        "{exe}: {status}\n--- stdout ({} bytes) ---\n{}\n--- stderr ({} bytes) ---\n{}",
        output.stdout_bytes, output.stdout, output.stderr_bytes, output.stderr
    );
    let structured = serde_json::to_value(&output).unwrap_or(Value::Null);
    let mut result = ToolOutput::with_structured(text, structured);
    result.is_error = timed_out || exit_code != Some(0);
    Ok(result)
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
    fn drop(&mut self) {
        if let Some(mut containment) = self.containment.take() {
            containment.kill_all(self.leader);
        }
    }
}

/// Reads a stream to its end, keeping its first and last [`KEEP`] bytes.
async fn capture<R: tokio::io::AsyncRead + Unpin>(mut stream: R) -> (String, u64) {
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

/// A fresh, private, empty folder for the command's HOME and TMPDIR, removed afterwards.
struct Home(PathBuf);

impl Home {
    fn new(id: &str) -> Result<Home, ToolError> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("aether-run-{id}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ToolError::failed(format!("cannot make a home for the command: {e}")))?;
        Ok(Home(dir))
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

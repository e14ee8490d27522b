//! `run_shell`: a shell command, only inside a bubblewrap sandbox (`sandbox.rs`).
//!
//! Offered only where a sandbox can be made and to agents whose project has shell settings.
//! A command that `aether_policy::shell::review` finds destructive, or cannot read, waits for
//! a person first (the pipeline asks through [`Tool::needs_person`]). Every command is written
//! to the command log before it starts.

use std::sync::Arc;
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::journal::CommandStart;
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Risk, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::process::{self, Home, Output, Spawn};
use super::sandbox::{self, Layout, Sandbox};
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// Longest shell text taken, in bytes.
const MAX_COMMAND: usize = 64 << 10;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The shell command (bash, or sh where there is no bash), e.g. "cargo test 2>&1 | tail -20".
    command: String,
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

pub struct RunShell {
    def: ToolDef,
    sandbox: Sandbox,
}

impl RunShell {
    pub fn new(sandbox: Sandbox) -> RunShell {
        RunShell {
            def: ToolDef {
                name: "run_shell".into(),
                title: "Run a shell command in a sandbox".into(),
                group: groups::SHELL.into(),
                tier: Tier::Elevated,
                description: "Run a shell command (pipes, redirection and globs work) inside a sandbox \
                     that sees only the roots, with credential files hidden and .git read-only; the \
                     roots are read-only unless the operator allows shell writes, /tmp is the \
                     sandbox's own, and there is no network unless the operator allows it. Commands \
                     that destroy or hide what they run (rm -rf, chmod, sudo, dd, forced pushes, \
                     sh -c of computed text, ...) wait for a person's approval. Prefer read_file, \
                     search_files and edit_file for files, and run_command for allowlisted programs. \
                     Killed, with everything it started, after timeout_seconds or once its output \
                     reaches 16 MiB."
                    .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Output>(),
                arguments: ArgumentKinds::paths(&["cwd"]).and_commands(&["command"]),
                meta: ToolMeta {
                    risk: Risk::High,
                    read_only: false,
                    reaches_network: false,
                    needs_confirmation: false,
                    idempotent: false,
                    destructive: true,
                },
            },
            sandbox,
        }
    }
}

#[async_trait]
impl Tool for RunShell {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        if agent.shell.is_none() {
            return Err(format!(
                "agent {:?}'s project has no shell (projects.NAME.shell in aether.toml)",
                agent.name
            ));
        }
        self.sandbox.ready().map(|_| ())
    }

    fn needs_person(&self, args: &Value) -> Option<String> {
        let command = args.get("command")?.as_str()?;
        aether_policy::shell::review(command).map(|e| e.to_string())
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let started = std::time::Instant::now();
        let args: Args = parse_args(args)?;
        let Some(settings) = cx.agent.shell.clone() else {
            return Err(ToolError::denied(
                "shell",
                "this agent's project has no shell (projects.NAME.shell in aether.toml)",
            ));
        };
        let bwrap = self
            .sandbox
            .probed()
            .await
            .map_err(|why| ToolError::denied("sandbox", why))?;
        if args.command.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the command is empty".into()));
        }
        if args.command.len() > MAX_COMMAND || args.command.contains('\0') {
            return Err(ToolError::InvalidArguments(format!(
                "the command must be text of at most {MAX_COMMAND} bytes"
            )));
        }
        // The working folder: inside a root, judged on its real path.
        let folder = process::working_folder(&cx, args.root.as_deref(), args.cwd.as_deref())?;
        let (root, rel, cwd) = (folder.root, folder.rel, folder.path);
        let home = Home::new(&cx.call_id)?;
        let shell = sandbox::shell();
        let roots = cx.roots.clone();
        let (scratch, cwd2, command) = (home.dir.clone(), cwd.clone(), args.command.clone());
        // A shell that may write runs alone: no other shell command is being set up (its
        // credential walk done, its covers not yet mounted) while one could rename folders
        // around them. Read-only shells run side by side.
        let may_write = settings.write;
        let turn = if may_write {
            Turn::Alone(SHELLS.clone().write_owned().await)
        } else {
            Turn::Shared(SHELLS.clone().read_owned().await)
        };
        // Walking the roots for credentials to hide is file work: off the async threads.
        let plan = crate::blocking(move || {
            sandbox::arguments(&Layout {
                scratch: &scratch,
                roots: &roots,
                settings: &settings,
                cwd: &cwd2,
                shell,
                command: &command,
            })
        })
        .await?;
        // After a writable run, however the call ends (finished, or dropped: cancelled, out
        // of the pipeline's time), the roots are put back in order, still holding the turn.
        let mut after = After {
            plan: (!plan.writable.is_empty()).then(|| Arc::new(plan.clone_for_after())),
            credentials: Arc::new(cx.roots.credentials().clone()),
            turn: Some(turn),
        };
        // The command gets the time the pipeline leaves it, less what waiting for the turn
        // and building the sandbox took, so that this tool, not the pipeline, stops it.
        let left = Duration::from_secs(cx.limits.tool_seconds)
            .saturating_sub(started.elapsed())
            .saturating_sub(Duration::from_secs(1));
        let timeout = Duration::from_secs(args.timeout_seconds.unwrap_or(60).clamp(1, 300))
            .min(left)
            .max(Duration::from_millis(100));
        let env = process::environment("/tmp/home", "/tmp");
        let log = CommandStart {
            at_us: 0,
            call_id: cx.call_id.clone(),
            session: cx.session.clone(),
            agent: cx.agent.name.clone(),
            tool: "run_shell".into(),
            root: root.name.clone(),
            cwd: rel,
            command: process::logged_text(&args.command),
            sandbox: "bubblewrap".into(),
        };
        let bwrap = bwrap.to_string_lossy().into_owned();
        let mut output = process::run(
            &cx,
            Spawn {
                exe: &bwrap,
                argv: &plan.args,
                cwd: &cwd,
                env: &env,
                timeout,
                label: "the shell",
                home: &home,
                log,
            },
        )
        .await?;
        if let Some(removed) = after.now().await
            && !removed.is_empty()
        {
            let names: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
            output.content.push(crate::Content::Text(format!(
                "Aether removed the git repositories this command created ({}): git run there \
                 later, outside the sandbox, would run what their config and hooks name. Use \
                 run_command with an allowlisted git instead.",
                names.join(", ")
            )));
            output.is_error = true;
        }
        Ok(output)
    }
}

/// Shell commands being set up or running: shared by read-only shells, taken alone by one
/// that may write.
static SHELLS: std::sync::LazyLock<Arc<tokio::sync::RwLock<()>>> =
    std::sync::LazyLock::new(Arc::default);

#[allow(dead_code)] // held for its lifetime only
enum Turn {
    Alone(tokio::sync::OwnedRwLockWriteGuard<()>),
    Shared(tokio::sync::OwnedRwLockReadGuard<()>),
}

/// What follows a writable run, done once: now (awaited), or on drop (in the background).
struct After {
    plan: Option<Arc<sandbox::Plan>>,
    credentials: Arc<aether_policy::paths::CredentialFilter>,
    turn: Option<Turn>,
}

impl After {
    /// Puts the roots back in order; `None` for a read-only run.
    async fn now(&mut self) -> Option<Vec<std::path::PathBuf>> {
        let plan = self.plan.take()?;
        let credentials = self.credentials.clone();
        let turn = self.turn.take();
        Some(
            crate::blocking(move || {
                let removed = sandbox::after_writable_run(&plan, &credentials);
                drop(turn);
                removed
            })
            .await,
        )
    }
}

impl Drop for After {
    fn drop(&mut self) {
        if let Some(plan) = self.plan.take() {
            let credentials = self.credentials.clone();
            let turn = self.turn.take();
            std::thread::spawn(move || {
                // The dropped call's command is being killed with it (its tree's own drop):
                // give that a moment, so nothing it does lands after the scan.
                std::thread::sleep(Duration::from_millis(500));
                sandbox::after_writable_run(&plan, &credentials);
                drop(turn);
            });
        }
    }
}

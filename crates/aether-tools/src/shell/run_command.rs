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
use std::time::Duration;

use aether_policy::commands::{
    CommandRule, GIT_OVERRIDES, forced_arguments, git_config_programs, program_name,
};
use aether_policy::journal::CommandStart;
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Risk, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::process::{self, Home, Output, Spawn};
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};

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
        let folder = process::working_folder(&cx, args.root.as_deref(), args.cwd.as_deref())?;
        let (root, rel, cwd) = (folder.root, folder.rel, folder.path);
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
        confine_arguments(
            &cx,
            &cwd,
            &args.args[rule.prefix.len().min(args.args.len())..],
        )?;
        argv.extend(args.args.iter().cloned());
        let home = Home::new(&cx.call_id)?;
        let home_dir = home.dir.to_string_lossy().into_owned();
        let env = process::environment(&home_dir, &home_dir);
        let shown: Vec<&str> = std::iter::once(rule.exe.as_str())
            .chain(args.args.iter().map(String::as_str))
            .collect();
        let log = CommandStart {
            at_us: 0,
            call_id: cx.call_id.clone(),
            session: cx.session.clone(),
            agent: cx.agent.name.clone(),
            tool: "run_command".into(),
            root: root.name.clone(),
            cwd: rel,
            command: process::logged_text(&serde_json::to_string(&shown).unwrap_or_default()),
            sandbox: "none".into(),
        };
        process::run(
            &cx,
            Spawn {
                exe: &rule.exe,
                argv: &argv,
                cwd: &cwd,
                env: &env,
                timeout,
                label: &rule.exe,
                home: &home,
                log,
            },
        )
        .await
    }
}

/// Refuses a caller's argument that names a path outside every root, a credential file or
/// one of Aether's own files: the program runs without a sandbox, so an allowed `rg` or `cat`
/// would otherwise read whatever it is pointed at. An argument counts as a path when it is
/// absolute, climbs with `..`, or names something that exists (relative to the working
/// folder); an option's value (`--file=PATH`) counts too. Other arguments (patterns, words,
/// URLs) pass. Programs that take paths in other forms (git's `REV:PATH`) are the operator's
/// to allow or not.
fn confine_arguments(cx: &CallContext, cwd: &Path, args: &[String]) -> Result<(), ToolError> {
    for arg in args {
        let value = match arg.strip_prefix('-') {
            Some(option) => match option.split_once('=') {
                Some((_, value)) => value,
                None => continue,
            },
            None => arg.as_str(),
        };
        if value.is_empty() {
            continue;
        }
        let written = Path::new(value);
        let full = cwd.join(written);
        let climbs = written
            .components()
            .any(|c| c == std::path::Component::ParentDir);
        if !(written.is_absolute() || climbs || std::fs::symlink_metadata(&full).is_ok()) {
            continue;
        }
        let real = std::fs::canonicalize(&full).unwrap_or_else(|_| {
            let mut lexical = PathBuf::new();
            for c in full.components() {
                match c {
                    std::path::Component::ParentDir => {
                        lexical.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => lexical.push(other),
                }
            }
            crate::roots::real_as_far_as_it_exists(&lexical)
        });
        let text = real.to_string_lossy();
        let roots: Vec<_> = cx
            .roots
            .iter()
            .filter(|r| real.starts_with(&r.path))
            .collect();
        let linked = std::fs::symlink_metadata(&real)
            .is_ok_and(|m| m.is_file() && std::os::unix::fs::MetadataExt::nlink(&m) > 1);
        let why = if roots.is_empty() {
            "lies outside every root"
        } else if roots
            .iter()
            .any(|r| r.mode == aether_policy::paths::RootMode::Sealed)
        {
            "is in a sealed root, whose files are read only through the seal's check"
        } else if linked {
            "has more than one name (another may lie outside every root)"
        } else if cx.roots.is_private(&real) || cx.roots.holds_private(&real) {
            "is one of Aether's own files"
        } else if cx.roots.credentials().is_credential(&text) {
            "is a credential file"
        } else {
            continue;
        };
        return Err(ToolError::denied(
            "confinement",
            format!(
                "argument {arg:?} names {}, which {why}; run_command passes only paths inside the roots",
                real.display()
            ),
        ));
    }
    Ok(())
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

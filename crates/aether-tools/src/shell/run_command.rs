//! `run_command`: an absolute executable and its argv, from the agent's project allowlist,
//! without a shell.
//!
//! The argv must start with an allowlisted prefix, and is read as the program reads it:
//! every option after the prefix must be one the entry lists, a sed or awk script must do
//! nothing but read its input and write its output (`aether_policy::commands`, `argv`,
//! `scripts`). The child gets exactly seven environment variables (no credentials, a fresh
//! empty HOME), no stdin, a working folder inside a root (judged on its real path), a time
//! limit of 1–300 s, and its whole process tree is killed when the command ends, runs out of
//! time or floods its output past the cap. Output is captured and capped, keeping its head
//! and its tail. `git` runs with overrides that switch off repository-defined programs, and
//! is refused in a repository whose config defines any. Arguments that are paths or URLs to
//! the program — operands and option values by the reading, not patterns or scripts — are
//! judged (`judged_pieces`, `confine_arguments`, `confine_urls`). The program runs under
//! bubblewrap, which shows it the filesystem with Aether's files and the roots' credential
//! files covered (`hiding`) and the names of its URL arguments held to their vetted addresses
//! (`pin_names`); where bubblewrap cannot, only a command whose entry says `uncovered` runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::argv::{Kind, Reading, Role};
use aether_policy::commands::{
    CommandRule, GIT_OVERRIDES, forced_arguments, git_config_programs, git_program_key,
    program_name,
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
                     after timeout_seconds or once its output reaches 16 MiB."
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
        // Offered equals runnable: without a sandbox only `uncovered` entries run.
        if let Err(why) = super::Sandbox::shared().ready()
            && !agent.commands.iter().any(|r| r.uncovered)
        {
            return Err(format!(
                "no command of agent {:?}'s project can run here: {why}, and none of its entries \
                 says uncovered = true",
                agent.name
            ));
        }
        Ok(())
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let (rule, reading) = allowed(&cx.agent.commands, &args.command, &args.args)?;
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
        if root.mode == aether_policy::paths::RootMode::Sealed
            || repository_folder(&root.path, &cwd).is_some()
        {
            return Err(ToolError::denied(
                "confinement",
                format!(
                    "run_command does not run in {}: {}",
                    root.display(&rel),
                    if root.mode == aether_policy::paths::RootMode::Sealed {
                        "a sealed root's files are read only through the seal's check"
                    } else {
                        "it is a git repository's own folder or Aether's"
                    }
                ),
            ));
        }
        let mut argv: Vec<String> = forced_arguments(&rule.exe)
            .iter()
            .map(|a| a.to_string())
            .collect();
        let git = program_name(&rule.exe) == "git";
        if git {
            // The repository git uses is the one Aether checked, inside the root: git would
            // otherwise keep looking upward, out of it.
            let git_dir = refuse_git_programs(&rule.exe, &cwd, &root.path).await?;
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
        let judged = judged_pieces(&args.args, &reading, rule.prefix.len());
        confine_arguments(&cx, &cwd, &judged)?;
        let pins = confine_urls(&cx, &cwd, &judged).await?;
        argv.extend(args.args.iter().cloned());
        // The program runs on the filesystem as it is, but where bubblewrap can, with Aether's
        // own files and the credential files under the roots covered: a program that walks
        // folders (`grep -r`, `tar c .`) reads what no argument named.
        let sandbox = cover(super::Sandbox::shared().probed().await, rule)?;
        let home = Home::new(&cx.call_id)?;
        // Kept until the program has ended (see `pin_names`).
        let mut pin_files = None;
        let (exe, argv, covered): (String, Vec<std::ffi::OsString>, bool) = match sandbox {
            Some(bwrap) => {
                let roots = cx.roots.clone();
                let secrets = tokio::task::spawn_blocking(move || super::secrets_in(&roots, git))
                    .await
                    .map_err(|e| ToolError::failed(format!("checking the roots failed: {e}")))??;
                let mut wrapped = super::hiding(&secrets);
                let pins_folder = pins_folder()?;
                if !pins.is_empty() {
                    let files = PinFiles::new(&pins_folder)?;
                    wrapped.extend(pin_names(&pins, &files.0)?);
                    pin_files = Some(files);
                }
                // Every run's pinned-name files out of sight (this run's are bound already).
                wrapped.extend(["--tmpfs".into(), pins_folder.into_os_string()]);
                wrapped.extend([
                    "--chdir".into(),
                    cwd.as_os_str().to_owned(),
                    "--".into(),
                    rule.exe.clone().into(),
                ]);
                wrapped.extend(argv.into_iter().map(Into::into));
                (bwrap.to_string_lossy().into_owned(), wrapped, true)
            }
            None => (
                rule.exe.clone(),
                argv.into_iter().map(Into::into).collect(),
                false,
            ),
        };
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
            sandbox: if covered { "secrets-covered" } else { "none" }.into(),
        };
        // The program can write wherever Aether's user can: a control file it makes under a
        // root (another Aether's rules, say) is set aside when it ends.
        let folders: Vec<PathBuf> = cx.roots.iter().map(|r| r.path.clone()).collect();
        let watch = tokio::task::spawn_blocking(move || super::ControlWatch::start(folders))
            .await
            .map_err(|e| ToolError::failed(format!("checking the roots failed: {e}")))?;
        let ran = process::run(
            &cx,
            Spawn {
                exe: &exe,
                argv: &argv,
                cwd: &cwd,
                env: &env,
                timeout,
                label: &rule.exe,
                home: &home,
                log,
            },
        )
        .await;
        drop(pin_files);
        let set_aside = crate::blocking(move || watch.finish()).await;
        if !set_aside.is_empty() {
            let shown: Vec<String> = set_aside.iter().map(|p| p.display().to_string()).collect();
            return Err(ToolError::denied(
                "protected-path",
                format!(
                    "the command made Aether control files ({}); each was renamed to \
                     NAME{}-…, since no tool may create aether.toml or permissions.yaml",
                    aether_policy::truncate::bound_text(&shown.join(", "), 500),
                    super::SET_ASIDE
                ),
            ));
        }
        ran
    }
}

/// The addresses the names in a call's URL arguments were vetted at, by name (lowercase,
/// without a final dot).
type Pins = std::collections::BTreeMap<String, Vec<std::net::IpAddr>>;

/// Where the pinned names' files of every run live: one folder per run in a folder of this
/// process's, which every sandbox covers (no program sees or changes another's, or its own
/// once bound). Made private (0700) if missing; a folder of that name that is not this user's
/// own private folder (made first by someone else) is refused.
fn pins_folder() -> Result<PathBuf, ToolError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let folder = std::env::temp_dir().join(format!("aether-pins-{}", std::process::id()));
    let refused = |why: String| {
        ToolError::failed(format!(
            "cannot use {} for the pinned names: {why}",
            folder.display()
        ))
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&folder) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(refused(e.to_string()));
        }
        _ => {}
    }
    let meta = std::fs::symlink_metadata(&folder).map_err(|e| refused(e.to_string()))?;
    if !meta.is_dir()
        || meta.uid() != rustix::process::geteuid().as_raw()
        || meta.mode() & 0o077 != 0
    {
        return Err(refused("it is not this user's private folder".into()));
    }
    Ok(folder)
}

/// A run's own folder in [`pins_folder`], removed with it.
struct PinFiles(PathBuf);

impl PinFiles {
    fn new(parent: &Path) -> Result<PinFiles, ToolError> {
        use std::os::unix::fs::DirBuilderExt;
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(n.to_string());
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| ToolError::failed(format!("cannot make the pinned names' folder: {e}")))?;
        Ok(PinFiles(dir))
    }
}

impl Drop for PinFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The sandbox's arguments that make the program find each name of `pins` at the addresses it
/// was vetted at (against DNS rebinding: a name that answered with a public address when
/// Aether looked could answer with a private one when the program looks):
/// - a hosts file in place of `/etc/hosts` that names them, at those addresses only (an
///   address family that had none gets an address that leads nowhere, so the program does not
///   ask DNS for it), beside the machine's lines that do not name them;
/// - an `/etc/nsswitch.conf` whose hosts line is `files dns`, so that file is read first;
/// - nscd's socket folder covered (glibc asks nscd before any of that).
///
/// The files are written in `files`' folder; [`pins_folder`] is covered afterwards in every
/// sandbox. Nothing where there is nothing to pin; refused where `/etc/hosts` or
/// `/etc/nsswitch.conf` is not a plain file that can be covered.
fn pin_names(pins: &Pins, files: &Path) -> Result<Vec<std::ffi::OsString>, ToolError> {
    if pins.is_empty() {
        return Ok(Vec::new());
    }
    let (hosts, nsswitch) = (Path::new("/etc/hosts"), Path::new("/etc/nsswitch.conf"));
    for system in [hosts, nsswitch] {
        if !std::fs::symlink_metadata(system).is_ok_and(|m| m.is_file()) {
            return Err(ToolError::denied(
                "egress:rebinding",
                format!(
                    "a URL argument's name cannot be held to the address it was vetted at here ({} \
                     is not a plain file to cover); nothing ran",
                    system.display()
                ),
            ));
        }
    }
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| ToolError::failed(format!("cannot read {}: {e}", p.display())))
    };
    let write = |name: &str, bytes: Vec<u8>| {
        let path = files.join(name);
        std::fs::write(&path, bytes)
            .map(|()| path)
            .map_err(|e| ToolError::failed(format!("cannot write the sandbox's {name}: {e}")))
    };
    let hosts_file = write("hosts", hosts_text(pins, &read(hosts)?))?;
    let nsswitch_file = write("nsswitch.conf", files_first(&read(nsswitch)?))?;
    let mut args: Vec<std::ffi::OsString> = vec![
        "--ro-bind".into(),
        hosts_file.into_os_string(),
        hosts.as_os_str().to_owned(),
        "--ro-bind".into(),
        nsswitch_file.into_os_string(),
        nsswitch.as_os_str().to_owned(),
    ];
    if let Ok(nscd) = std::fs::canonicalize("/var/run/nscd")
        && nscd.is_dir()
    {
        args.extend(["--tmpfs".into(), nscd.into_os_string()]);
    }
    Ok(args)
}

/// A hosts file naming each pinned name (also with a final dot) at its vetted addresses, with
/// an address that leads nowhere for a family it had none of, then `machine`'s lines that name
/// none of them.
fn hosts_text(pins: &Pins, machine: &[u8]) -> Vec<u8> {
    let mut text = String::from("# run_command: names held to the addresses Aether vetted\n");
    for (name, addresses) in pins {
        let mut seen = std::collections::BTreeSet::new();
        let mut listed: Vec<std::net::IpAddr> = addresses
            .iter()
            .copied()
            .filter(|a| seen.insert(*a))
            .collect();
        // 240.0.0.0/4 is reserved and 100::/64 discards: neither is reached.
        if !listed.iter().any(std::net::IpAddr::is_ipv4) {
            listed.push(std::net::Ipv4Addr::new(240, 0, 0, 1).into());
        }
        if !listed.iter().any(std::net::IpAddr::is_ipv6) {
            listed.push(std::net::Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 1).into());
        }
        for address in listed {
            text.push_str(&format!("{address} {name} {name}.\n"));
        }
    }
    let mut out = text.into_bytes();
    for line in machine.split(|&b| b == b'\n') {
        let data = line.split(|&b| b == b'#').next().unwrap_or_default();
        let names_pinned = String::from_utf8_lossy(data)
            .split_whitespace()
            .skip(1)
            .any(|n| pins.contains_key(&n.trim_end_matches('.').to_ascii_lowercase()));
        if !names_pinned && !line.is_empty() {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out
}

/// `nsswitch` with its hosts line made `files dns` (added if it had none).
fn files_first(nsswitch: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut replaced = false;
    for line in nsswitch.split(|&b| b == b'\n') {
        if line.trim_ascii_start().starts_with(b"hosts:") {
            if !replaced {
                out.extend_from_slice(b"hosts: files dns\n");
            }
            replaced = true;
        } else if !line.is_empty() {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    if !replaced {
        out.extend_from_slice(b"hosts: files dns\n");
    }
    out
}

/// The sandbox a command runs in (`Some`: bubblewrap, covering Aether's own files and the
/// roots' credential files), none where its rule allows it uncovered, or a refusal.
fn cover<'a>(
    sandbox: Result<&'a Path, String>,
    rule: &CommandRule,
) -> Result<Option<&'a Path>, ToolError> {
    super::covered_or_allowed(sandbox, rule.uncovered, &rule.exe).map_err(|why| {
        ToolError::denied(
            "sandbox",
            format!(
                "{} was not run: Aether's own files and the roots' credential files cannot be \
                 covered from it here ({why}). The operator can install bubblewrap, or set \
                 uncovered = true on its rule in projects.NAME.commands to run it able to read them",
                rule.exe
            ),
        )
    })
}

/// The arguments after the prefix that could name a path or a URL, each with those pieces
/// of it, by what it is to the program (`argv::read`): an operand or a value that is a path
/// (whole, also when it starts with `-`: after `--` it is a file), an option's glued value
/// unless it is text, and — where the program was read carefully — an option word whole
/// too (it may be an operand there). Text the program never opens (a pattern, a format) and
/// scripts (judged by `check_rest`) are not paths.
fn judged_pieces<'a>(
    args: &'a [String],
    reading: &Reading,
    prefix: usize,
) -> Vec<(&'a str, Vec<&'a str>)> {
    let mut out = Vec::new();
    for (at, arg) in args.iter().enumerate().skip(prefix) {
        let careful = reading.careful_at(at);
        let mut pieces = match &reading.roles[at] {
            Role::Operand(Kind::Path) | Role::Value(Kind::Path) => {
                let mut p = path_candidates(arg);
                if arg.starts_with('-') {
                    p.insert(0, arg.as_str());
                }
                p
            }
            Role::Option {
                glued: Some(Kind::Text | Kind::Script(_)),
                ..
            } if !careful => Vec::new(),
            Role::Option { .. } => {
                let mut p = path_candidates(arg);
                if careful && arg != "--" {
                    p.insert(0, arg.as_str());
                }
                p
            }
            Role::Operand(_) | Role::Value(_) | Role::End => Vec::new(),
        };
        pieces.dedup();
        if !pieces.is_empty() {
            out.push((arg.as_str(), pieces));
        }
    }
    out
}

/// Refuses a caller's argument that names a path outside every root, a credential file, one
/// of Aether's own files, or a place inside a git repository's own folder: the program runs
/// without a sandbox, so an allowed `rg` or `cp` would otherwise read or write whatever it is
/// pointed at. What counts as a path: a piece (see [`judged_pieces`]) that is absolute,
/// climbs with `..`, has a `/` in it or names something that exists (relative to the working
/// folder); for an operand, the value after its first `=` (dd's `of=PATH`), after a leading
/// `@` (`@FILE`) and after a short option's letter (a value glued on: `-o/abs`) too. Other
/// pieces (words) pass. Programs that take paths in other forms (git's `REV:PATH`) are the
/// operator's to allow or not.
fn confine_arguments(
    cx: &CallContext,
    cwd: &Path,
    judged: &[(&str, Vec<&str>)],
) -> Result<(), ToolError> {
    for (arg, pieces) in judged {
        for value in pieces {
            if let Some((real, why)) = judge_path(cx, cwd, value) {
                return Err(path_refusal(arg, &real, &why));
            }
        }
    }
    Ok(())
}

/// The pieces of `arg` that could name a path (see [`confine_arguments`]).
fn path_candidates(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if !arg.starts_with('-') {
        out.push(arg);
    }
    // `@FILE`: many programs read arguments or data from the file so named.
    if let Some(file) = arg.strip_prefix('@') {
        out.push(file);
    }
    if let Some((_, value)) = arg.split_once('=') {
        out.push(value);
    }
    // A value glued to a short option (`-o/abs`): what follows the option's letter.
    if arg.starts_with('-') && !arg.starts_with("--") {
        out.extend(arg.char_indices().nth(2).map(|(i, _)| &arg[i..]));
    }
    out.retain(|v| !v.is_empty());
    out
}

/// Refuses a URL argument the agent may not reach: the program reaches it itself, past the
/// egress step that judges network tools' `url` arguments. An `http`/`https` URL (the
/// argument, or the value after its first `=`, a leading `@` or a short option's letter) must
/// pass the agent's egress policy — its allowed domains, and no private, loopback or metadata
/// address, the name resolved here and every address it has vetted; returns those addresses
/// by name, which the sandbox holds the program to (`pin_names`). A `file` URL is judged as
/// the path it names; any other scheme is refused. Names given otherwise (`git@host:repo`, a
/// bare host) are not judged.
async fn confine_urls(
    cx: &CallContext,
    cwd: &Path,
    judged: &[(&str, Vec<&str>)],
) -> Result<Pins, ToolError> {
    use aether_policy::egress::{Host, parse_destination};
    let mut pins = Pins::new();
    let refused = |r: aether_policy::egress::EgressRefusal| ToolError::denied(r.rule(), r);
    for (arg, pieces) in judged {
        // As for paths: the argument, the value after `=`, after a leading `@`, and after a
        // short option's letter (`-Uhttp://…`).
        for value in pieces.iter().copied() {
            // `scheme:/…`: programs take one, two or three slashes (`http:/host/x` is a URL
            // to curl).
            let Some((scheme, rest)) = value.split_once(':').filter(|(s, rest)| {
                s.starts_with(|c: char| c.is_ascii_alphabetic())
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                    && rest.starts_with('/')
            }) else {
                continue;
            };
            let scheme = scheme.to_ascii_lowercase();
            if scheme != "file"
                && value
                    .chars()
                    .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
            {
                // Parsers differ on these (`http://a.example\@10.0.0.1/`: a `\` ends the
                // host for one and is in the user name for another).
                return Err(ToolError::denied(
                    "egress:malformed-url",
                    format!(
                        "argument {arg:?} is a URL with a backslash, a space or a control \
                         character, which programs read differently; write it plainly"
                    ),
                ));
            }
            match scheme.as_str() {
                "http" | "https" => {
                    // The URL leaves: no credential in it (the pipeline scans only network
                    // tools' arguments).
                    if let Some(finding) =
                        aether_policy::dlp::Scanner::shared().scan_text("argument", value)
                    {
                        return Err(ToolError::denied(
                            finding.rule,
                            format!("an argument carries {finding}; nothing ran"),
                        ));
                    }
                    let policy = cx
                        .agent
                        .egress()
                        .map_err(|why| ToolError::denied("egress:configuration", why))?;
                    let destination = parse_destination(value).map_err(refused)?;
                    // The host as written must be the host judged: `//` then the host, no
                    // user info, no other spelling of an address.
                    let authority = rest
                        .strip_prefix("//")
                        .filter(|r| !r.starts_with('/'))
                        .map(|r| r.split(['/', '?', '#']).next().unwrap_or(""))
                        .unwrap_or("");
                    let written_host = match authority.rsplit_once(':') {
                        Some((host, port))
                            if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) =>
                        {
                            host
                        }
                        _ => authority,
                    };
                    let judged_host = destination.url.host_str().unwrap_or("");
                    if authority.contains('@')
                        || !written_host
                            .trim_end_matches('.')
                            .eq_ignore_ascii_case(judged_host)
                    {
                        return Err(ToolError::denied(
                            "egress:malformed-url",
                            format!(
                                "argument {arg:?}: write the URL as {scheme}://HOST/… with its host \
                                 as it is ({judged_host}), without a user name"
                            ),
                        ));
                    }
                    policy.check_destination(&destination).map_err(refused)?;
                    if let Host::Domain(name) = &destination.host {
                        // As the program will look it up (search domains and the hosts file
                        // alike), within 5 s.
                        let lookup = tokio::net::lookup_host((name.as_str(), destination.port));
                        let addresses: Vec<std::net::IpAddr> =
                            tokio::time::timeout(Duration::from_secs(5), lookup)
                                .await
                                .ok()
                                .and_then(Result::ok)
                                .map(|found| found.map(|a| a.ip()).collect())
                                .unwrap_or_default();
                        policy.vet_addresses(name, &addresses).map_err(refused)?;
                        pins.entry(name.trim_end_matches('.').to_ascii_lowercase())
                            .or_default()
                            .extend(addresses);
                    }
                }
                "file" => {
                    let path = url::Url::parse(value)
                        .ok()
                        .and_then(|u| u.to_file_path().ok())
                        .ok_or_else(|| {
                            ToolError::denied(
                                "confinement",
                                format!("argument {arg:?} is a file URL of another computer"),
                            )
                        })?;
                    if let Some((real, why)) = judge_path(cx, cwd, &path.to_string_lossy()) {
                        return Err(path_refusal(arg, &real, &why));
                    }
                }
                other => {
                    return Err(ToolError::denied(
                        "egress:scheme",
                        format!(
                            "argument {arg:?} is a {other}:// URL; run_command passes http and https \
                             URLs (judged by the agent's egress policy) and file URLs inside the roots"
                        ),
                    ));
                }
            }
        }
    }
    Ok(pins)
}

/// The refusal of a path argument.
fn path_refusal(arg: &str, real: &Path, why: &str) -> ToolError {
    ToolError::denied(
        "confinement",
        format!(
            "argument {arg:?} names {}, which {why}; run_command passes only paths inside the roots",
            real.display()
        ),
    )
}

/// Where `value` leads from `cwd`, if it reads as a path, and why it may not be passed.
fn judge_path(cx: &CallContext, cwd: &Path, value: &str) -> Option<(PathBuf, String)> {
    let written = Path::new(value);
    let climbs = written
        .components()
        .any(|c| c == std::path::Component::ParentDir);
    // A name git takes for a repository's folder is judged even before it exists (a `cp -r
    // tmpl .git` would make one).
    let git_name = written
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| {
            aether_policy::paths::protected_name(n).is_some() || crate::roots::is_git_piece(n)
        });
    let pathlike = written.is_absolute()
        || climbs
        || git_name
        || value.contains('/')
        || std::fs::symlink_metadata(cwd.join(written)).is_ok();
    if !pathlike {
        return None;
    }
    let real = match resolve(cwd, written) {
        Ok(real) => real,
        Err(at) => return Some((at, "is a link whose target cannot be resolved".into())),
    };
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
    } else if cx
        .roots
        .credentials()
        .is_credential(&real.to_string_lossy())
    {
        "is a credential file"
    } else if let Some(why) = roots.iter().find_map(|r| repository_folder(&r.path, &real)) {
        return Some((real, why));
    } else {
        return None;
    };
    Some((real, why.into()))
}

/// `written` resolved from `cwd` as the kernel would, one component at a time: each prefix
/// that exists is replaced by its real path (links followed, then `..` taken from there); the
/// part that does not exist yet is kept as written. A link that cannot be resolved (dangling,
/// or a loop) is an error naming it: writing through it would create its target.
fn resolve(cwd: &Path, written: &Path) -> Result<PathBuf, PathBuf> {
    use std::path::Component;
    let mut at = if written.is_absolute() {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    };
    for c in written.components() {
        match c {
            Component::ParentDir => {
                at.pop();
            }
            Component::Normal(name) => {
                at.push(name);
                match std::fs::canonicalize(&at) {
                    Ok(real) => at = real,
                    Err(_) if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_symlink()) => {
                        return Err(at);
                    }
                    Err(_) => {}
                }
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(at)
}

/// Why `real` (inside the root at `top`) may not be touched, if it may not: it is a `.git`
/// or `.aether` folder or inside one (however spelled), a folder git would take for a bare
/// repository or inside one, or its arrival would make its folder one.
fn repository_folder(top: &Path, real: &Path) -> Option<String> {
    let rel = real.strip_prefix(top).ok()?;
    if let Some((component, name)) =
        aether_policy::paths::protected_component(&rel.to_string_lossy())
    {
        return Some(if name == ".git" {
            format!("is in {component}, {}", crate::roots::GIT_FOLDER)
        } else {
            format!("is in {component}, Aether's own folder")
        });
    }
    if crate::roots::is_bare(real) {
        return Some(format!("is {}", crate::roots::GIT_FOLDER));
    }
    let (parent, name) = (real.parent()?, real.file_name()?.to_str()?);
    crate::roots::git_folder_write(top, parent, name).map(|why| format!("would change {why}"))
}

/// The entry that allows this command, or why none does.
fn allowed<'a>(
    rules: &'a [CommandRule],
    exe: &str,
    args: &[String],
) -> Result<(&'a CommandRule, Reading), ToolError> {
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
    let reading = rule
        .check_rest(args)
        .map_err(|why| ToolError::denied("command-flags", why))?;
    // Judged on the file itself: the path must be the program, not a link to another.
    let meta =
        std::fs::symlink_metadata(exe).map_err(|e| ToolError::failed(format!("{exe}: {e}")))?;
    if !meta.is_file() {
        return Err(ToolError::failed(format!(
            "{exe} is not a regular file (a link or folder); allow the program's real path"
        )));
    }
    Ok((rule, reading))
}

/// The repository for `cwd`: the nearest `.git` folder from `cwd` up to the root, whose
/// config (and worktree config) names no program — by git's own reading of it and by
/// Aether's (a config git cannot read is refused too). A `.git` file (a link to a repository
/// elsewhere) or no repository inside the root is refused.
async fn refuse_git_programs(git_exe: &str, cwd: &Path, root: &Path) -> Result<PathBuf, ToolError> {
    let mut at = Some(cwd);
    while let Some(dir) = at {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() => {
                // Config and objects git would read from elsewhere (a linked worktree's
                // common folder, alternate object stores): not judged, so not run.
                for elsewhere in ["commondir", "objects/info/alternates"] {
                    if std::fs::symlink_metadata(git.join(elsewhere)).is_ok() {
                        return Err(ToolError::denied(
                            "git-config",
                            format!(
                                "{} names a folder outside the repository git would read from; \
                                 Aether runs git only on a repository whole inside the root",
                                git.join(elsewhere).display()
                            ),
                        ));
                    }
                }
                for name in ["config", "config.worktree"] {
                    let config = git.join(name);
                    let Ok(text) = std::fs::read(&config) else {
                        continue;
                    };
                    let mut found = git_config_programs(&text);
                    for key in git_config_keys(git_exe, &config).await? {
                        if let Some(pattern) = git_program_key(&key)
                            && !found.contains(&pattern)
                        {
                            found.push(pattern);
                        }
                    }
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

/// Every key a config file sets, as git itself reads it (`git config --file F --no-includes
/// --name-only --list`), run with no environment but a locale, in `/`. A file git cannot
/// read is refused: what git would make of it when it runs is unknown.
async fn git_config_keys(git_exe: &str, config: &Path) -> Result<Vec<String>, ToolError> {
    let listed = tokio::process::Command::new(git_exe)
        .args(["config", "--file"])
        .arg(config)
        .args(["--no-includes", "--null", "--name-only", "--list"])
        .env_clear()
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), listed)
        .await
        .map_err(|_| ToolError::failed("git took more than 10 s to read the repository's config"))?
        .map_err(|e| ToolError::failed(format!("{git_exe} config: {e}")))?;
    if !out.status.success() {
        return Err(ToolError::denied(
            "git-config",
            format!(
                "git cannot read {} ({}); Aether does not run git on a config it cannot judge",
                config.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|k| !k.is_empty())
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_names_are_the_only_lines_naming_them_in_the_sandboxs_hosts_file() {
        let mut pins = Pins::new();
        pins.insert(
            "repo.example".into(),
            vec![
                "93.184.216.34".parse().unwrap(),
                "93.184.216.34".parse().unwrap(),
            ],
        );
        pins.insert(
            "v6.example".into(),
            vec!["2606:2800:220:1::1".parse().unwrap()],
        );
        let machine = b"127.0.0.1 localhost\n10.0.0.5 Repo.Example. other # x\n\xff\xfe raw\n::1 ip6-localhost";
        let text = String::from_utf8_lossy(&hosts_text(&pins, machine)).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1..],
            [
                "93.184.216.34 repo.example repo.example.",
                // No IPv6 address was vetted: the family leads nowhere rather than to DNS.
                "100::1 repo.example repo.example.",
                "2606:2800:220:1::1 v6.example v6.example.",
                "240.0.0.1 v6.example v6.example.",
                "127.0.0.1 localhost",
                // The machine's line for a pinned name is dropped; other bytes are kept as
                // they are.
                "\u{fffd}\u{fffd} raw",
                "::1 ip6-localhost",
            ]
        );
        assert_eq!(
            files_first(
                b"passwd: files\nhosts:  resolve [!UNAVAIL=return] files dns\nhosts: dns\n"
            ),
            b"passwd: files\nhosts: files dns\n"
        );
        assert_eq!(
            files_first(b"passwd: files"),
            b"passwd: files\nhosts: files dns\n"
        );
        // The files are written into the run's folder and bound over the system's.
        let files = tempfile::tempdir().unwrap();
        let args = pin_names(&pins, files.path()).unwrap();
        assert_eq!(args[0], "--ro-bind");
        assert_eq!(args[2], "/etc/hosts");
        assert_eq!(args[5], "/etc/nsswitch.conf");
        assert!(
            std::fs::read_to_string(&args[1])
                .unwrap()
                .contains("93.184.216.34 repo.example")
        );
        assert!(
            std::fs::read_to_string(&args[4])
                .unwrap()
                .contains("hosts: files dns")
        );
        assert!(pin_names(&Pins::new(), files.path()).unwrap().is_empty());
    }

    #[test]
    fn the_pins_folder_is_this_users_private_folder_or_refused() {
        use std::os::unix::fs::PermissionsExt;
        let folder = pins_folder().unwrap();
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Made by someone else first (here: opened to others): not used.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let refused = pins_folder().unwrap_err().to_string();
        assert!(
            refused.contains("not this user's private folder"),
            "{refused}"
        );
        std::fs::remove_dir(&folder).unwrap();
    }

    #[test]
    fn a_command_runs_covered_or_only_where_its_rule_allows_it_uncovered() {
        let bwrap = Path::new("/usr/bin/bwrap");
        let mut rule = CommandRule {
            exe: "/usr/bin/rg".into(),
            prefix: Vec::new(),
            flags: None,
            uncovered: false,
        };
        assert_eq!(cover(Ok(bwrap), &rule).unwrap(), Some(bwrap));
        match cover(Err("no userns".into()), &rule) {
            Err(ToolError::Denied {
                rule: "sandbox",
                message,
            }) => assert!(
                message.contains("/usr/bin/rg")
                    && message.contains("no userns")
                    && message.contains("uncovered = true"),
                "{message}"
            ),
            other => panic!("expected a refusal, got {other:?}"),
        }
        rule.uncovered = true;
        assert_eq!(cover(Err("no userns".into()), &rule).unwrap(), None);
        assert_eq!(
            cover(Ok(bwrap), &rule).unwrap(),
            Some(bwrap),
            "covered wherever it can be"
        );
    }
}

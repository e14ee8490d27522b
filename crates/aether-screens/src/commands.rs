//! What `run_command` may run: the project's allowlist of executables and argv prefixes, the
//! options each may take after its prefix, and the options no allowlist can open.
//!
//! An entry names an absolute executable and the argv it must start with (`/usr/bin/git` with
//! `["status"]`). After that prefix the argv is read as the program reads it (`argv.rs`):
//! an option must be listed in the entry's `flags` (judged by its name before any `=`, or each
//! option of a cluster by name); with no `flags`, no option is allowed. After the `--` the
//! program itself honours, arguments are operands, never options; a program Aether has no
//! reading of honours none, and every argument of it that starts with `-` is an option. Some
//! options run code or write where they like whatever the prefix (`git -c core.fsmonitor=…`,
//! `git --output=…`, `rg --pre`, `find -exec`, `tar --to-command`, an interpreter's
//! `-c`/`-e`, `--files0-from`): they are refused even when an entry lists them (such an entry
//! is a configuration error), and so is any argument spelled as one, whatever its role.
//! Shells and launchers (`sh`, `env`, `xargs`, `sudo`, …) cannot be entries at all:
//! `run_shell` is the tool for a shell, inside a sandbox. The scripts of `sed` and `awk` are
//! read at admission (`scripts.rs`) and refused when they run a program, write or read a file,
//! or cannot be read for certain; behind that, `sed` and `gawk` run with `--sandbox`. Known
//! limit: a program that reads code from files in the root (`make` and its Makefile, `cargo`
//! and `.cargo/config.toml`, an interpreter and a script) runs that code; allow such programs
//! only in modes that don't.
//!
//! Git also reads programs from the repository's own configuration (hooks, `core.fsmonitor`,
//! `core.pager`, diff drivers, filters…). The runner passes overrides that switch these off
//! ([`GIT_OVERRIDES`]) and refuses a repository whose config defines any program-valued key
//! ([`git_config_programs`]), since an override list can never be complete.

use serde::{Deserialize, Serialize};

/// One allowed command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRule {
    /// The executable, an absolute path.
    pub exe: String,
    /// The arguments every call starts with.
    #[serde(default)]
    pub prefix: Vec<String>,
    /// Options allowed after the prefix (`--short`, `-n`, `--format`); none when unset.
    #[serde(default)]
    pub flags: Option<Vec<String>>,
    /// Run this command even where bubblewrap cannot cover Aether's own files (vault key,
    /// store, configuration) and the roots' credential files from it: the program then reads
    /// whatever Aether's user can, whatever its arguments name. Off (the default), such a call
    /// is refused.
    #[serde(default)]
    pub uncovered: bool,
}

/// Programs that run other programs: never an entry.
const LAUNCHERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "ksh",
    "csh",
    "tcsh",
    "busybox",
    "env",
    "xargs",
    "sudo",
    "su",
    "doas",
    "pkexec",
    "nohup",
    "setsid",
    "nice",
    "ionice",
    "chroot",
    "unshare",
    "nsenter",
    "timeout",
    "watch",
    "script",
    "strace",
    "ltrace",
    "gdb",
    "parallel",
    "flock",
    "stdbuf",
    "mksh",
    "rbash",
    "yash",
    "pwsh",
    "systemd-run",
    "bwrap",
    "chrt",
    "taskset",
    "expect",
    "vim",
    "vi",
    "nvim",
    "emacs",
    "ed",
    "ex",
    "at",
    "batch",
    "crontab",
    "socat",
    "nc",
    "ncat",
    "telnet",
    "sqlite",
    "xdg-open",
    "run-parts",
    "firejail",
    "capsh",
    "setpriv",
    "runuser",
    "sg",
    "newgrp",
    "time",
    "valgrind",
    "perf",
];

/// Network clients: they reach hosts (and follow redirects) where the egress policy cannot
/// follow them; `http_request` and `web_fetch` are the tools for that. Never an entry.
const NETWORK_CLIENTS: &[&str] = &[
    "curl", "wget", "aria2c", "http", "https", "xh", "lynx", "links", "w3m", "ftp", "lftp", "tftp",
    "ssh", "scp", "sftp", "rsync",
];

/// Git subcommands that run programs named in their arguments or configuration whatever the
/// overrides (`filter-branch --tree-filter`, `send-email --sendmail-cmd`, `instaweb --httpd`,
/// `difftool --extcmd`, the foreign-VCS bridges), and the pairs that do (`bisect run`,
/// `submodule foreach`). Never run.
const GIT_PROGRAM_SUBCOMMANDS: &[&str] = &[
    "filter-branch",
    "send-email",
    "instaweb",
    "difftool",
    "mergetool",
    "daemon",
    "web--browse",
    "archimport",
    "cvsimport",
    "cvsserver",
    "cvsexportcommit",
    "svn",
    "p4",
    "quiltimport",
    "credential",
    "credential-store",
    "credential-cache",
    "upload-pack",
    "receive-pack",
    "upload-archive",
    "shell",
    "http-backend",
    "remote-ext",
    "remote-fd",
];
const GIT_PROGRAM_PAIRS: &[(&str, &str)] = &[("bisect", "run"), ("submodule", "foreach")];

/// Why git's subcommand in `args` (the first argument that is not an option) runs programs
/// of the caller's choosing, if it does.
fn git_program_subcommand(args: &[String]) -> Option<String> {
    let at = args.iter().position(|a| !a.starts_with('-'))?;
    let sub = args[at].as_str();
    if GIT_PROGRAM_SUBCOMMANDS.contains(&sub) {
        return Some(format!("git {sub}"));
    }
    let next = args.get(at + 1).map(String::as_str);
    GIT_PROGRAM_PAIRS
        .iter()
        .find(|(a, b)| *a == sub && next == Some(*b))
        .map(|(a, b)| format!("git {a} {b}"))
}

/// Programs that make links: a relative link is resolved from its own folder, not the one
/// its target was judged from, and later programs follow it out of the roots. Never an entry.
const LINKERS: &[&str] = &["ln", "link"];

/// Options that run code or write where they like, per executable (by file name); an option
/// ending in `=` is matched as a prefix. The first row naming an executable is its row.
const DANGEROUS_OPTIONS: &[(&[&str], &[&str])] = &[
    (
        &["git"],
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--output",
            "-o",
            "--upload-pack",
            "-u",
            "--receive-pack",
            "--ext-diff",
            "--textconv",
            "-O",
            "--open-files-in-pager",
            "--template",
            "--exec",
            "-x",
            "--run",
            "--extcmd",
            "--tool",
            "-t",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "-C",
        ],
    ),
    (
        &["rg"],
        &[
            "--pre",
            "--pre-glob",
            "-z",
            "--search-zip",
            "--hostname-bin",
        ],
    ),
    (&["grep", "egrep", "fgrep"], &[]),
    // `-files0-from`: starting points read from a file, which no argument names.
    (
        &["find"],
        &[
            "-exec",
            "-execdir",
            "-ok",
            "-okdir",
            "-delete",
            "-fprint",
            "-fprint0",
            "-fprintf",
            "-fls",
            "-files0-from",
        ],
    ),
    // `-C`: each relative `-C` is taken from the one before, so `-C .. -C ..` climbs
    // from where the arguments were judged; `-P` extracts to absolute paths.
    (
        &["tar", "gtar", "bsdtar"],
        &[
            "-C",
            "--directory",
            "-P",
            "--absolute-names",
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
            "--rmt-command",
            "--index-file",
            // The names of the files to archive, read from a file: never judged.
            "-T",
            "--files-from",
        ],
    ),
    // `-f`: a script in a file, not read at admission (and changeable until sed reads it).
    // `-i` is allowed where listed: its files are operands, judged as paths, and its
    // backup suffix is judged by `check_sed`.
    (&["sed", "gsed"], &["-f", "--file", "-s", "--separate"]),
    // Programs from files (`-f`, `-E`, `-i`/`--include`, `@include`), extensions
    // (`-l`), and files written by the program itself (a profile, a dump, a pretty
    // print); mawk's `-W` takes a program file too (`-W exec`).
    (
        &["awk", "gawk", "mawk", "nawk"],
        &[
            "-f",
            "--file",
            "-E",
            "--exec",
            "-i",
            "--include",
            "-l",
            "--load",
            "-o",
            "--pretty-print",
            "-p",
            "--profile",
            "-d",
            "--dump-variables",
            "-D",
            "--debug",
            "-W",
        ],
    ),
    // `--files0-from`: the names of the files to read, from a file no argument names.
    (&["sort"], &["--compress-program", "--files0-from"]),
    (&["wc", "du"], &["--files0-from"]),
    // A log file written, a key file read; `+cmd` operands are judged by `check_rest`.
    (
        &["less", "more"],
        &[
            "-o",
            "-O",
            "--log-file",
            "--LOG-FILE",
            "-k",
            "--lesskey-file",
            "--lesskey-src",
            "--lesskey-content",
        ],
    ),
    (&["fd", "fdfind"], &["-x", "--exec", "-X", "--exec-batch"]),
    (&["zip"], &["-TT", "--unzip-command"]),
    (&["man"], &["-P", "--pager", "-H", "--html"]),
    (&["psql"], &["-c", "--command", "-f", "--file"]),
    (&["mysql", "mariadb"], &["-e", "--execute"]),
    (&["python", "pypy"], &["-c", "-m"]),
    // Besides inline code: perl's `-M`/`-m` (the module text is code: `-M'x;system…'`),
    // node's preloaded modules.
    (
        &[
            "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "tclsh",
        ],
        &[
            "-e",
            "-E",
            "-r",
            "--eval",
            "-p",
            "--print",
            "-c",
            "-n",
            "-i",
            "-M",
            "-m",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
        ],
    ),
    (&["cargo"], &["--config", "-Z"]),
    (
        &["npm", "npx", "pnpm", "yarn"],
        &["--node-options", "--script-shell", "-c", "--call"],
    ),
    (
        &["make", "gmake"],
        &[
            "--eval",
            "-E",
            "-f",
            "--file",
            "--makefile",
            "-C",
            "--directory",
        ],
    ),
    // Links made by the program: a relative one is resolved from its own folder, which
    // the arguments are not judged from.
    (&["cp"], &["-s", "--symbolic-link", "-l", "--link"]),
];

/// Options that run code or write where they like for the executable `exe_name` (by file
/// name), from `DANGEROUS_OPTIONS`; none for one it does not list.
fn dangerous_options(exe_name: &str) -> &'static [&'static str] {
    DANGEROUS_OPTIONS
        .iter()
        .find(|(names, _)| names.contains(&exe_name))
        .map_or(&[], |(_, options)| options)
}

/// The program-valued git keys an override cannot be trusted to cover. Lower-case section
/// (and key) names; `*` stands for a subsection.
const GIT_PROGRAM_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.askpass",
    "core.gitproxy",
    "diff.external",
    "diff.*.command",
    "diff.*.textconv",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "merge.*.driver",
    "sequence.editor",
    "gpg.*",
    "trailer.*",
    "credential.helper",
    "credential.*.helper",
    "uploadpack.packobjectshook",
    "pager.*",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",
    "include.path",
    "includeif.*.path",
    "alias.*",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "web.browser",
    "browser.*.cmd",
    "sendemail.*",
    "protocol.allow",
    "core.worktree",
    "tar.*.command",
    "submodule.*.update",
    "interactive.difffilter",
    "core.alternaterefscommand",
    "receive.procreceiverefs",
];

/// Overrides the runner passes to every `git` call (`-c KEY=VALUE` before the subcommand):
/// no hooks, no fsmonitor, no pager or editor, no external diff, no credential helper, no
/// `ext::` transport.
pub const GIT_OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "core.sshCommand=false",
    "core.askPass=",
    "credential.helper=",
    "diff.external=",
    "sequence.editor=false",
    "protocol.ext.allow=never",
    "protocol.file.allow=user",
    // A host the URL's judge allowed cannot send git on to another (the metadata address).
    "http.followRedirects=false",
    "safe.directory=*",
];

/// The program's name as the lists know it: the file name without a version suffix
/// (`python3.12` is `python`, `ruby3.1` is `ruby`, `lua5.4` is `lua`).
pub fn program_name(exe: &str) -> &str {
    let file = exe.rsplit('/').next().unwrap_or(exe);
    let base = file.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if base.is_empty() { file } else { base }
}

use crate::argv::{self, Kind, Language, Reading, Role, option_name};
use crate::scripts;

/// Whether `arg` is (or, read as an option, holds) an option that runs programs or writes
/// anywhere. `as_option`: the argument is read as an option, so a cluster of short options
/// (`-xvO`) or one with a value glued on (`-ofile`) counts; an operand or a value only
/// counts when it is spelled as such an option (`--pre=x`, `-exec`).
fn is_dangerous(exe: &str, arg: &str, as_option: bool) -> bool {
    let name = option_name(arg);
    let exe = program_name(exe);
    let list = dangerous_options(exe);
    // Programs that take single-dash long options (`-exec`) have no short-option clusters.
    let clusters = as_option && !matches!(exe, "find");
    list.iter().any(|d| {
        name == *d
            // An abbreviated long option (getopt_long and git accept any unambiguous prefix:
            // `--out=` is `--output=`).
            || (name.starts_with("--") && name.len() > 3 && d.starts_with("--") && d.starts_with(name))
            // A short option with its value glued on (`-cfoo`, `-ofile`), or inside a cluster
            // of short options (`-xvO`).
            || (clusters
                && d.len() == 2
                && !d.starts_with("--")
                && !arg.starts_with("--")
                && arg.starts_with('-')
                && arg[1..].contains(&d[1..]))
    })
}

impl CommandRule {
    /// Problems with the entry as the operator wrote it.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.exe.starts_with('/') {
            problems.push(format!(
                "exe {:?} must be an absolute path (no PATH lookup)",
                self.exe
            ));
        }
        if self.exe.split('/').any(|c| c == "..") {
            problems.push(format!("exe {:?} must not contain ..", self.exe));
        }
        let name = program_name(&self.exe);
        if LAUNCHERS.contains(&name) {
            problems.push(format!(
                "{name} runs other programs; it cannot be allowed (run_shell is the tool for a shell)"
            ));
        }
        if NETWORK_CLIENTS.contains(&name) {
            problems.push(format!(
                "{name} reaches the network where the egress policy cannot follow it; it cannot be \
                 allowed (http_request and web_fetch are the tools for that)"
            ));
        }
        if LINKERS.contains(&name) {
            problems.push(format!(
                "{name} makes links, which later programs follow out of the roots; it cannot be allowed"
            ));
        }
        if name == "git"
            && let Some(what) = git_program_subcommand(&self.prefix)
        {
            problems.push(format!(
                "{what} runs programs named in its arguments; it cannot be allowed"
            ));
        }
        let prefix = self
            .prefix
            .iter()
            .enumerate()
            .map(|(at, arg)| as_option(&self.exe, at, arg));
        let flags = self.flags.iter().flatten().map(|f| f.as_str().into());
        for arg in prefix.chain(flags) {
            if arg.starts_with('-') && is_dangerous(&self.exe, &arg, true) {
                problems.push(format!(
                    "{name} {arg}: this option can run programs or write anywhere; it cannot be allowed"
                ));
            }
        }
        // A script in the prefix that no call could run.
        if matches!(name, "sed" | "gsed" | "awk" | "gawk" | "mawk" | "nawk") {
            let mut reading = argv::read(name, &self.prefix);
            reading.script_unknown = None;
            if let Err(why) = self.check_scripts(name, &self.prefix, &reading) {
                problems.push(format!("prefix {why}"));
            }
        }
        for flag in self.flags.iter().flatten() {
            if !flag.starts_with('-') {
                problems.push(format!(
                    "flags entry {flag:?} is not an option (it starts with -)"
                ));
            }
        }
        problems
    }

    /// Whether `exe` with `args` is this entry: the same executable and the prefix.
    pub fn covers(&self, exe: &str, args: &[String]) -> bool {
        self.exe == exe && args.starts_with(&self.prefix)
    }

    /// Checks the arguments after the prefix and returns how the program reads them all
    /// (`argv::read`); the error names the argument and why, the script quoted at most 80
    /// characters long.
    ///
    /// - An option (by the reading) must be in the entry's `flags`: as written, by its name
    ///   before any `=`, or — a cluster of short options, or one with a value glued — each
    ///   of its options by name (`-qn5` with `-q` and `-n` listed).
    /// - After the `--` the program itself honours (not one an option took as its value:
    ///   `grep -e -- -r` searches for `--`, recursively), arguments are operands, never
    ///   options; a program Aether has no reading of honours none (`echo`, `cargo test --
    ///   ARGS`, whose `--` passes options on): there every argument that starts with `-` is
    ///   an option.
    /// - Whatever its role, an argument that names an option that runs programs or writes
    ///   anywhere is refused: a table Aether got wrong can then only refuse too much.
    /// - A sed script or an awk program is read and refused if it runs a program, writes a
    ///   file or reads one (`scripts.rs`), or cannot be found or read for certain.
    pub fn check_rest(&self, args: &[String]) -> Result<Reading, String> {
        let name = program_name(&self.exe);
        if name == "git"
            && let Some(what) = git_program_subcommand(args)
        {
            return Err(format!(
                "{what}: this subcommand can run programs named in its arguments, so Aether never runs it"
            ));
        }
        if args.iter().any(|a| a.contains('\0')) {
            return Err("an argument contains a NUL byte".into());
        }
        let reading = argv::read(name, args);
        let skip = self.prefix.len().min(args.len());
        for (at, arg) in args.iter().enumerate().skip(skip) {
            let judged = as_option(&self.exe, at, arg);
            let option = matches!(reading.roles[at], Role::Option { .. });
            if judged.starts_with('-')
                && judged.len() > 1
                && is_dangerous(&self.exe, &judged, option)
            {
                return Err(format!(
                    "{name} {}: this option can run programs or write anywhere, so Aether never \
                     passes it (nor an argument spelled like it)",
                    argv::bounded(option_name(&judged))
                ));
            }
            if matches!(name, "less" | "more") && arg.starts_with('+') {
                return Err(format!(
                    "{name} {}: a +command runs {name}'s commands (`!` runs a program)",
                    argv::bounded(arg)
                ));
            }
            let Role::Option { names, .. } = &reading.roles[at] else {
                continue;
            };
            if arg == "--" {
                continue;
            }
            let flags = self.flags.as_deref().unwrap_or_default();
            let listed = |f: &str| flags.iter().any(|l| l == f);
            let allowed = listed(arg)
                || listed(option_name(&judged))
                || listed(&judged)
                || (!names.is_empty() && names.iter().all(|n| listed(n)));
            if !allowed {
                let unlisted = names
                    .iter()
                    .find(|n| !listed(n))
                    .map(String::as_str)
                    .unwrap_or(option_name(&judged));
                return Err(format!(
                    "{name} {}: not an allowed option after `{}` (allowed: {}; a path that starts \
                     with - is written ./{})",
                    argv::bounded(unlisted),
                    std::iter::once(self.exe.as_str())
                        .chain(self.prefix.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" "),
                    match &self.flags {
                        Some(f) if !f.is_empty() => f.join(", "),
                        _ => "none".into(),
                    },
                    argv::bounded(arg)
                ));
            }
        }
        self.check_scripts(name, args, &reading)?;
        Ok(reading)
    }

    /// The scripts of a sed or awk call, judged whole (the pieces joined by newlines, as the
    /// programs join them), and sed's backup suffix.
    fn check_scripts(&self, name: &str, args: &[String], reading: &Reading) -> Result<(), String> {
        let language = match name {
            "sed" | "gsed" => Language::Sed,
            "awk" | "gawk" | "mawk" | "nawk" => Language::Awk,
            _ => return Ok(()),
        };
        if let Some(why) = &reading.script_unknown {
            return Err(format!(
                "{name}: Aether reads a {name} script before it runs, and cannot here: {why}"
            ));
        }
        let mut pieces: Vec<&str> = Vec::new();
        for (at, role) in reading.roles.iter().enumerate() {
            let arg = args[at].as_str();
            match role {
                Role::Value(Kind::Script(_)) | Role::Operand(Kind::Script(_)) => pieces.push(arg),
                Role::Option {
                    names,
                    glued: Some(kind),
                } => {
                    let value = argv::glued_value(arg, names);
                    match kind {
                        Kind::Script(_) => pieces.push(value),
                        // `-i.bak`: the backup's name; with a `/` or `*` it is put elsewhere
                        // (`-i'../../x/*'`), where no argument was judged.
                        _ if language == Language::Sed
                            && names.last().is_some_and(|n| n == "-i" || n == "--in-place")
                            && value.contains(['/', '*']) =>
                        {
                            return Err(format!(
                                "{name} {}: a backup suffix with / or * puts the backup in \
                                 another folder, which Aether does not judge",
                                argv::bounded(arg)
                            ));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let script = pieces.join("\n");
        let read = match language {
            Language::Sed => scripts::sed(&script),
            Language::Awk => scripts::awk(&script),
        };
        let refused = |what: String| {
            format!(
                "{name} script {}: {what}; Aether runs only {name} scripts that read their \
                 input and write their output",
                scripts::shown(&script)
            )
        };
        match read {
            Err(unreadable) => Err(refused(unreadable.to_string())),
            Ok(found) => match found.first() {
                Some(finding) => Err(refused(finding.to_string())),
                None => Ok(()),
            },
        }
    }
}

/// The argument at `at` (counting from the first after the executable) as the program reads
/// it: tar takes a first argument without a dash as a bundle of short options (`tar tIf PROG
/// x.tar` is `tar -t -I PROG -f x.tar`).
fn as_option<'a>(exe: &str, at: usize, arg: &'a str) -> std::borrow::Cow<'a, str> {
    let old_style = matches!(program_name(exe), "tar" | "gtar" | "bsdtar")
        && at == 0
        && !arg.is_empty()
        && !arg.starts_with('-');
    if old_style {
        format!("-{arg}").into()
    } else {
        arg.into()
    }
}

/// Arguments Aether puts before the caller's for some programs, behind the reading of their
/// scripts at admission (`check_rest`): GNU `sed --sandbox` refuses the `e`, `w` and `r`
/// commands and flags, `gawk --sandbox` refuses `system()`, redirections and extensions.
/// (mawk and the one true awk have no such switch: for them the reading is all.)
pub fn forced_arguments(exe: &str) -> &'static [&'static str] {
    match program_name(exe) {
        "sed" | "gsed" => &["--sandbox"],
        "gawk" => &["--sandbox"],
        _ => &[],
    }
}

/// Whether a git config key (`section.key` or `section.subsection.key`, as `git config
/// --name-only --list` prints it) names a program, as its pattern in [`GIT_PROGRAM_KEYS`]
/// (`diff.*.textconv`) — or `None`.
pub fn git_program_key(name: &str) -> Option<String> {
    let (section, rest) = name.split_once('.')?;
    let section = section.to_ascii_lowercase();
    let (subsection, key) = match rest.rsplit_once('.') {
        Some((_, key)) => (true, key),
        None => (false, rest),
    };
    let key = key.to_ascii_lowercase();
    let full = if subsection {
        format!("{section}.*.{key}")
    } else {
        format!("{section}.{key}")
    };
    GIT_PROGRAM_KEYS
        .iter()
        .any(|pattern| match pattern.strip_suffix(".*") {
            // `alias.*`, `pager.*`, `gpg.*`: every key of the section.
            Some(prefix) if !prefix.contains('*') => section == prefix,
            _ => pattern.eq_ignore_ascii_case(&full),
        })
        .then_some(full)
}

/// The program-valued keys a git config text defines (section.key, lower-case, with `*` for
/// a subsection as in [`GIT_PROGRAM_KEYS`]), by a lenient reading of git's INI format that
/// errs toward finding more: several headers on one line, a `]` or `"` inside a quoted
/// subsection, a key after its header on the same line. Bytes that are not UTF-8 are read as
/// replacement characters (a config git can read is never skipped). The runner also asks git
/// itself, whose reading is the one that counts; this one stands when git cannot be asked.
pub fn git_config_programs(text: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(text);
    let mut found = Vec::new();
    let mut section = String::new();
    let mut subsection = false;
    for line in text.trim_start_matches('\u{feff}').lines() {
        let mut rest = line.trim();
        // Every header at the start of the line (`[a] [b "x]"] key = v`).
        while let Some(header) = rest.strip_prefix('[') {
            let (inside, after) = split_header(header);
            let inside = inside.trim();
            // [section "sub"] or the old [section.sub]
            let (name, sub) = match inside.split_once(|c: char| c.is_whitespace() || c == '.') {
                Some((name, sub)) => (name, !sub.trim().is_empty()),
                None => (inside, false),
            };
            section = name.trim().to_ascii_lowercase();
            subsection = sub;
            rest = after.trim_start();
        }
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let key = rest.split(['=', '#', ';']).next().unwrap_or("").trim();
        if key.is_empty() {
            continue;
        }
        let name = if subsection {
            format!("{section}.x.{key}")
        } else {
            format!("{section}.{key}")
        };
        if let Some(full) = git_program_key(&name)
            && !found.contains(&full)
        {
            found.push(full);
        }
    }
    found
}

/// A header's inside and what follows its `]`, with quoted text (`"a]b"`, `"a\"b"`) kept
/// inside. An unclosed header is all inside.
fn split_header(header: &str) -> (&str, &str) {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in header.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return (&header[..i], &header[i + 1..]),
            _ => {}
        }
    }
    (header, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(exe: &str, prefix: &[&str], flags: Option<&[&str]>) -> CommandRule {
        CommandRule {
            uncovered: false,
            exe: exe.into(),
            prefix: prefix.iter().map(|s| s.to_string()).collect(),
            flags: flags.map(|f| f.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_after_the_prefix_must_be_listed() {
        let git = rule(
            "/usr/bin/git",
            &["log"],
            Some(&["--oneline", "-n", "--format"]),
        );
        assert!(git.covers("/usr/bin/git", &args(&["log", "--oneline"])));
        assert!(!git.covers("/usr/bin/git", &args(&["status"])));
        assert!(!git.covers("/usr/local/bin/git", &args(&["log"])));
        git.check_rest(&args(&[
            "log",
            "--oneline",
            "-n",
            "5",
            "--format=%H",
            "main",
        ]))
        .unwrap();
        let err = git.check_rest(&args(&["log", "--stat"])).unwrap_err();
        assert!(
            err.contains("--stat") && err.contains("allowed: --oneline"),
            "{err}"
        );
        // `--` passes; after it git reads pathspecs, never options.
        git.check_rest(&args(&["log", "--oneline", "--", "src"]))
            .unwrap();
        git.check_rest(&args(&["log", "--", "-weird-file"]))
            .unwrap();
        let grep = rule("/usr/bin/grep", &[], Some(&["-e"]));
        let err = grep
            .check_rest(&args(&["-e", "--", "-r", "."]))
            .unwrap_err();
        assert!(err.contains("grep -r: not an allowed option"), "{err}");
        let bare = rule("/usr/bin/ls", &[], None);
        assert!(
            bare.check_rest(&args(&["-la"]))
                .unwrap_err()
                .contains("none")
        );
        bare.check_rest(&args(&["src"])).unwrap();
    }

    #[test]
    fn options_that_run_code_are_refused_even_when_listed() {
        let cases: &[(&str, &[&str])] = &[
            ("/usr/bin/git", &["log", "--output=/tmp/x"]),
            (
                "/usr/bin/git",
                &["log", "-c", "core.fsmonitor=touch /tmp/p"],
            ),
            ("/usr/bin/git", &["log", "-ccore.pager=sh"]),
            ("/usr/bin/git", &["log", "--out=/tmp/x"]),
            ("/usr/bin/git", &["grep", "-nO", "x"]),
            ("/usr/bin/tar", &["-cf", "x.tar", "--to-com=sh", "."]),
            ("/usr/bin/rg", &["--pr", "/tmp/evil", "x"]),
            ("/usr/bin/rg", &["--pre", "/tmp/evil", "x"]),
            ("/usr/bin/find", &[".", "-exec", "sh", ";"]),
            ("/usr/bin/find", &["--", ".", "-delete"]),
            ("/usr/bin/tar", &["-cf", "x.tar", "--to-command=sh", "."]),
            ("/usr/bin/python3", &["-c", "import os"]),
            ("/usr/bin/perl", &["-e", "system 'id'"]),
            ("/usr/bin/perl", &["-Mstrict;system('id')", "x.pl"]),
            ("/usr/bin/node", &["--require", "./x.js", "y.js"]),
            ("/usr/bin/sort", &["--compress-program=sh", "x"]),
            ("/usr/bin/sort", &["--compress-prog=sh", "x"]),
            ("/usr/bin/fd", &["-x", "sh"]),
            // GNU tar's old style: a first argument without a dash is a bundle of options.
            ("/usr/bin/tar", &["tIf", "sh -c id", "x.tar"]),
            ("/usr/bin/tar", &["xF", "x.sh", "x.tar"]),
            // Even after `--`, which the option before may have taken as its value.
            ("/usr/bin/rg", &["-e", "--", "--pre=/tmp/evil", "x"]),
            // Directory changes that chain from one another, absolute names, links.
            (
                "/usr/bin/tar",
                &["-cf", "o.tar", "-C", "..", "-C", "..", "etc/passwd"],
            ),
            ("/usr/bin/tar", &["-xPf", "x.tar"]),
            ("/usr/bin/make", &["-C", "..", "all"]),
            ("/usr/bin/cp", &["-s", "../../x", "y"]),
            ("/usr/bin/git", &["bisect", "run", "sh", "-c", "id"]),
            ("/usr/bin/git", &["submodule", "foreach", "id"]),
            ("/usr/bin/git", &["filter-branch", "--tree-filter", "id"]),
        ];
        for (exe, a) in cases {
            let open = rule(
                exe,
                &[],
                Some(&[
                    "--output",
                    "-c",
                    "--pre",
                    "-exec",
                    "-cf",
                    "--to-command",
                    "-e",
                    "-delete",
                ]),
            );
            let err = open.check_rest(&args(a)).unwrap_err();
            assert!(err.contains("can run programs"), "{exe} {a:?}: {err}");
        }
        // The configuration itself is refused.
        let p = rule("/usr/bin/git", &["-c", "x=y", "log"], Some(&["--output"])).problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(!rule("/usr/bin/bash", &["-lc"], None).problems().is_empty());
        assert!(!rule("/usr/bin/env", &[], None).problems().is_empty());
        assert!(!rule("/usr/bin/sqlite3", &[], None).problems().is_empty());
        for refused in [
            "/usr/bin/curl",
            "/usr/bin/wget",
            "/usr/bin/ssh",
            "/usr/bin/ln",
        ] {
            assert!(!rule(refused, &[], None).problems().is_empty(), "{refused}");
        }
        assert!(
            !rule("/usr/bin/git", &["send-email"], None)
                .problems()
                .is_empty()
        );
        assert!(
            rule("/usr/bin/git", &["bisect"], Some(&["--help"]))
                .problems()
                .is_empty()
        );
        // A tar entry whose prefix is an old-style bundle with a program option.
        assert!(!rule("/usr/bin/tar", &["tIf"], None).problems().is_empty());
        assert!(rule("/usr/bin/tar", &["tf"], None).problems().is_empty());
        // Old style judged only as the first argument: a later `tIf` is a file name.
        let tar = rule("/usr/bin/tar", &["-tf"], None);
        tar.check_rest(&args(&["-tf", "tIf"])).unwrap();
        assert!(!rule("git", &["status"], None).problems().is_empty());
        assert!(
            rule("/usr/bin/git", &["status"], Some(&["--short"]))
                .problems()
                .is_empty()
        );
    }

    #[test]
    fn sed_runs_sandboxed_and_versioned_interpreters_are_known() {
        assert_eq!(forced_arguments("/usr/bin/sed"), ["--sandbox"]);
        assert!(forced_arguments("/usr/bin/head").is_empty());
        let py = rule("/usr/bin/python3.12", &["-m", "pytest"], None);
        assert!(
            !py.problems().is_empty(),
            "python -m is refused even in a prefix"
        );
        let py = rule("/usr/bin/python3.12", &[], Some(&["-q"]));
        assert!(
            py.check_rest(&args(&["-c", "import os"]))
                .unwrap_err()
                .contains("can run programs")
        );
        // awk is allowed now that its program is read (and gawk runs with --sandbox); a
        // script in a prefix is read when the configuration loads.
        assert!(rule("/usr/bin/gawk", &[], None).problems().is_empty());
        assert!(
            rule("/usr/bin/sed", &["-n", "p"], None)
                .problems()
                .is_empty()
        );
        let p = rule("/usr/bin/sed", &["-n", "1e id"], None).problems();
        assert!(p.len() == 1 && p[0].contains("runs a program"), "{p:?}");
        assert!(
            !rule("/usr/bin/mawk", &["{print > \"x\"}"], None)
                .problems()
                .is_empty()
        );
        assert_eq!(forced_arguments("/usr/bin/gawk"), ["--sandbox"]);
        assert!(
            !rule("/usr/bin/gawk", &[], Some(&["-f"]))
                .problems()
                .is_empty()
        );
        assert!(!rule("/usr/bin/mksh", &[], None).problems().is_empty());
    }

    /// A call and what must come of it: the entry's exe, prefix and flags, the argv, and
    /// `Ok(())` or a text the refusal contains.
    type Case = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
        Result<(), &'static str>,
    );

    /// One call judged: the entry (`exe`, `prefix`, `flags`) and the argv after the
    /// executable; `want` is `Ok(())`, or a text the refusal must contain.
    fn check(exe: &str, prefix: &[&str], flags: &[&str], argv: &[&str], want: Result<(), &str>) {
        let r = rule(exe, prefix, Some(flags));
        let got = r.check_rest(&args(argv));
        match (want, got) {
            (Ok(()), Ok(_)) => {}
            (Err(want), Err(got)) => assert!(got.contains(want), "{exe} {argv:?}: {got}"),
            (want, got) => panic!("{exe} {argv:?}: wanted {want:?}, got {got:?}"),
        }
    }

    #[test]
    fn end_of_options_is_where_each_program_puts_it() {
        let cases: &[Case] = &[
            // After git's own `--`: pathspecs, however they are spelled.
            ("/usr/bin/git", &["log"], &[], &["log", "--", "-p"], Ok(())),
            (
                "/usr/bin/git",
                &["log"],
                &["--oneline"],
                &["log", "--oneline", "--", "-y", "--stat"],
                Ok(()),
            ),
            ("/usr/bin/git", &["log"], &[], &["log", "--", "-xO"], Ok(())),
            (
                "/usr/bin/git",
                &[],
                &["--no-pager"],
                &["--no-pager", "log", "--", "-y"],
                Ok(()),
            ),
            (
                "/usr/bin/git",
                &["grep"],
                &["-n"],
                &["grep", "-n", "x", "--", "-y"],
                Ok(()),
            ),
            // A `--` an option takes as its value ends nothing.
            (
                "/usr/bin/git",
                &["log"],
                &["--author"],
                &["log", "--author", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            (
                "/usr/bin/git",
                &["log"],
                &["-S"],
                &["log", "-S", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            (
                "/usr/bin/git",
                &["log"],
                &["-n"],
                &["log", "-n", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            (
                "/usr/bin/git",
                &["grep"],
                &["-e"],
                &["grep", "-e", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            // --format takes its value only after `=`: the `--` after it is git's.
            (
                "/usr/bin/git",
                &["log"],
                &["--format"],
                &["log", "--format", "--", "-p"],
                Ok(()),
            ),
            // A subcommand or an option Aether has no reading of: every `-x` is an option.
            (
                "/usr/bin/git",
                &["blame"],
                &[],
                &["blame", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            (
                "/usr/bin/git",
                &["log"],
                &["--frobnicate"],
                &["log", "--frobnicate", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            // An abbreviation is read carefully too (git and getopt accept them).
            (
                "/usr/bin/git",
                &["log"],
                &["--auth"],
                &["log", "--auth", "--", "-p"],
                Err("git -p: not an allowed option"),
            ),
            // grep: the pattern or a file after `--`, an option before.
            ("/usr/bin/grep", &[], &[], &["--", "-r", "."], Ok(())),
            (
                "/usr/bin/grep",
                &[],
                &["-e"],
                &["-e", "x", "--", "-r"],
                Ok(()),
            ),
            (
                "/usr/bin/grep",
                &[],
                &["-e"],
                &["-e", "--", "-r", "."],
                Err("grep -r: not an allowed option"),
            ),
            (
                "/usr/bin/grep",
                &[],
                &["-C"],
                &["-C", "--", "-r", "."],
                Err("grep -r: not an allowed option"),
            ),
            (
                "/usr/bin/grep",
                &[],
                &["--regexp"],
                &["--regexp", "--", "-r"],
                Err("grep -r: not an allowed option"),
            ),
            (
                "/usr/bin/grep",
                &[],
                &["--regexp"],
                &["--regexp=--", "--", "-r"],
                Ok(()),
            ),
            ("/usr/bin/grep", &[], &["-i"], &["x", "-i", "f"], Ok(())),
            (
                "/usr/bin/grep",
                &[],
                &[],
                &["x", "-r", "f"],
                Err("grep -r: not an allowed option"),
            ),
            (
                "/usr/bin/egrep",
                &[],
                &["-i", "-e"],
                &["-ie", "--", "-r"],
                Err("egrep -r"),
            ),
            // head and friends: a value taken whole, glued or not.
            (
                "/usr/bin/head",
                &["-n", "1"],
                &[],
                &["-n", "1", "--", "-v", "a.txt"],
                Ok(()),
            ),
            (
                "/usr/bin/head",
                &[],
                &["-n"],
                &["-n", "--", "-v"],
                Err("head -v: not an allowed option"),
            ),
            (
                "/usr/bin/head",
                &[],
                &["-n", "-q"],
                &["-qn", "--", "-v"],
                Err("head -v: not an allowed option"),
            ),
            ("/usr/bin/head", &[], &["-n"], &["-n1", "--", "-v"], Ok(())),
            ("/usr/bin/head", &[], &["-n"], &["-n", "-5", "f"], Ok(())),
            (
                "/usr/bin/tail",
                &[],
                &["-n"],
                &["-n", "+2", "--", "-f"],
                Ok(()),
            ),
            (
                "/usr/bin/sort",
                &[],
                &["-t", "-k"],
                &["-t", "-", "-k", "2", "--", "-o"],
                Ok(()),
            ),
            (
                "/usr/bin/sort",
                &[],
                &["-t"],
                &["-t", "--", "-o", "x"],
                Err("sort -o: not an allowed option"),
            ),
            // Clusters: as written, or each option by name.
            ("/usr/bin/ls", &[], &["-l", "-a"], &["-la"], Ok(())),
            ("/usr/bin/ls", &[], &["-la"], &["-la"], Ok(())),
            (
                "/usr/bin/ls",
                &[],
                &["-l"],
                &["-lR"],
                Err("ls -R: not an allowed option"),
            ),
            ("/usr/bin/ls", &[], &["-l"], &["--", "-R"], Ok(())),
            // Programs that honour no `--` (or pass what follows on) are read carefully.
            (
                "/usr/bin/echo",
                &[],
                &[],
                &["--", "-n"],
                Err("echo -n: not an allowed option"),
            ),
            (
                "/usr/bin/cargo",
                &["test"],
                &[],
                &["test", "--", "--nocapture"],
                Err("cargo --nocapture"),
            ),
            (
                "/usr/bin/cargo",
                &["test"],
                &["--nocapture"],
                &["test", "--", "--nocapture"],
                Ok(()),
            ),
            (
                "/usr/bin/cargo",
                &["test"],
                &[],
                &["test", "--", "--logfile=/tmp/x"],
                Err("cargo --logfile"),
            ),
            (
                "/usr/bin/make",
                &[],
                &[],
                &["--", "-f", "x"],
                Err("can run programs"),
            ),
            // find's `--` ends only its leading options: the expression is read as ever.
            (
                "/usr/bin/find",
                &[],
                &["-name"],
                &["--", ".", "-name", "x"],
                Ok(()),
            ),
            (
                "/usr/bin/find",
                &[],
                &[],
                &["--", ".", "-delete"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/find",
                &[],
                &["-name"],
                &[".", "-name", "-delete"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/find",
                &[],
                &[],
                &[".", "-files0-from", "list"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/find",
                &[],
                &["-name"],
                &[".", "-print"],
                Err("find -print: not an allowed option"),
            ),
            // Whatever the role, an argument spelled like an option that runs programs.
            (
                "/usr/bin/rg",
                &[],
                &["-e"],
                &["-e", "--", "--pre=/tmp/evil", "x"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/rg",
                &[],
                &[],
                &["--", "--pre=/tmp/evil", "x"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/git",
                &["log"],
                &[],
                &["log", "--", "--output=/tmp/x"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/tar",
                &[],
                &["-c", "-f"],
                &["-c", "-f", "x.tar", "--", "-T"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/sort",
                &[],
                &[],
                &["--files0-from=list"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/wc",
                &[],
                &["-l"],
                &["-l", "--files0-from", "list"],
                Err("can run programs"),
            ),
            ("/usr/bin/less", &[], &[], &["+!id", "f"], Err("+command")),
            (
                "/usr/bin/less",
                &[],
                &["-o"],
                &["-o", "/tmp/log", "f"],
                Err("can run programs"),
            ),
        ];
        for (exe, prefix, flags, argv, want) in cases {
            check(exe, prefix, flags, argv, *want);
        }
    }

    #[test]
    fn sed_and_awk_scripts_are_judged_at_admission() {
        const SCRIPT: &str = "script";
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &[&str], &[&str], Result<(), &str>)] = &[
            ("/usr/bin/sed", &["-n"], &["-n", "p", "README.md"], Ok(())),
            ("/usr/bin/sed", &[], &["s/a/b/g", "f"], Ok(())),
            (
                "/usr/bin/sed",
                &["-e"],
                &["-e", "s/a/b/", "-e", "p", "f"],
                Ok(()),
            ),
            ("/usr/bin/sed", &[], &["--", "p", "-file"], Ok(())),
            ("/usr/bin/sed", &[], &["s|x|../../../../y|", "f"], Ok(())),
            // A file name starting with e, w or r is a file, not a script.
            (
                "/usr/bin/sed",
                &["-e"],
                &["-e", "p", "w.txt", "e", "r"],
                Ok(()),
            ),
            // Every way to give a script, every command that runs, writes or reads.
            (
                "/usr/bin/sed",
                &["-n"],
                &["-n", "1s/.*/id/e", "f"],
                Err("s///e"),
            ),
            ("/usr/bin/sed", &[], &["1e id", "f"], Err("`e`")),
            (
                "/usr/bin/sed",
                &[],
                &["w /tmp/x", "f"],
                Err("writes a file"),
            ),
            ("/usr/bin/sed", &[], &["s/a/b/w /tmp/x", "f"], Err("s///w")),
            (
                "/usr/bin/sed",
                &[],
                &["1r /etc/passwd", "f"],
                Err("reads a file"),
            ),
            (
                "/usr/bin/sed",
                &[],
                &["R /etc/passwd", "f"],
                Err("reads a file"),
            ),
            (
                "/usr/bin/sed",
                &["-e"],
                &["-e", "p", "-e", "W out", "f"],
                Err("writes a file"),
            ),
            (
                "/usr/bin/sed",
                &["-e"],
                &["-e", "a\\", "-e", "x", "-e", "e id"],
                Err("`e`"),
            ),
            ("/usr/bin/sed", &["-e"], &["-ee id", "f"], Err("`e`")),
            (
                "/usr/bin/sed",
                &["-n", "-e"],
                &["-ne", "e id", "f"],
                Err("`e`"),
            ),
            (
                "/usr/bin/sed",
                &["-n", "-e"],
                &["-ne1e id", "f"],
                Err("`e`"),
            ),
            (
                "/usr/bin/sed",
                &["--expression"],
                &["--expression=1e id", "f"],
                Err("`e`"),
            ),
            (
                "/usr/bin/sed",
                &["--expression"],
                &["--expression", "s/a/b/e", "f"],
                Err("s///e"),
            ),
            ("/usr/bin/sed", &[], &["--", "e id", "f"], Err("`e`")),
            ("/usr/bin/sed", &[], &["1{\ns/a/b/e\n}", "f"], Err("s///e")),
            // Not readable for certain: refused.
            (
                "/usr/bin/sed",
                &[],
                &["s/[/]/x/", "f"],
                Err("cannot be read"),
            ),
            ("/usr/bin/sed", &[], &["k", "f"], Err("cannot be read")),
            ("/usr/bin/sed", &[], &[], Err("no script")),
            (
                "/usr/bin/sed",
                &["-e"],
                &["p", "-e", "w x", "f"],
                Err("put the options first"),
            ),
            (
                "/usr/bin/sed",
                &["--frob"],
                &["--frob", "p", "f"],
                Err("cannot be found for certain"),
            ),
            (
                "/usr/bin/sed",
                &["--exp"],
                &["--exp=w x", "f"],
                Err("cannot be found for certain"),
            ),
            (
                "/usr/bin/sed",
                &[],
                &["-f", "script.sed", "f"],
                Err("can run programs"),
            ),
            // In place: the files are operands (judged as paths); the backup stays beside them.
            ("/usr/bin/sed", &["-i"], &["-i", "s/a/b/", "f"], Ok(())),
            ("/usr/bin/sed", &["-i"], &["-i.bak", "s/a/b/", "f"], Ok(())),
            (
                "/usr/bin/sed",
                &["--in-place"],
                &["--in-place=.orig", "s/a/b/", "f"],
                Ok(()),
            ),
            (
                "/usr/bin/sed",
                &["-i"],
                &["-i../../tmp/*", "s/a/b/", "f"],
                Err("backup suffix"),
            ),
            (
                "/usr/bin/sed",
                &["--in-place"],
                &["--in-place=bak/*", "s/a/b/", "f"],
                Err("backup suffix"),
            ),
            // awk: the program, or every -e piece.
            ("/usr/bin/awk", &[], &["{print $1}", "f"], Ok(())),
            (
                "/usr/bin/mawk",
                &["-F"],
                &["-F", ":", "$3 > 100 {print $1}", "f"],
                Ok(()),
            ),
            (
                "/usr/bin/gawk",
                &["-v"],
                &["-v", "x=1", "--", "{print x}", "f"],
                Ok(()),
            ),
            ("/usr/bin/awk", &[], &["{print $1}", "x=1", "f"], Ok(())),
            (
                "/usr/bin/awk",
                &[],
                &["BEGIN{system(\"id\")}"],
                Err("runs a program"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["{print | \"sh\"}"],
                Err("runs a program"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["{print > \"/tmp/x\"}"],
                Err("writes a file"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["{print $1 >> $2}"],
                Err("writes a file"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["BEGIN{getline l < \"/etc/passwd\"}"],
                Err("reads a file"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["@include \"x.awk\""],
                Err("runs a program"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["--", "BEGIN{system(\"id\")}"],
                Err("runs a program"),
            ),
            (
                "/usr/bin/gawk",
                &["-e"],
                &["-e", "BEGIN{}", "-e", "{print > \"x\"}"],
                Err("writes a file"),
            ),
            (
                "/usr/bin/gawk",
                &["--source"],
                &["--source={print|\"sh\"}"],
                Err("runs a program"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["-f", "prog.awk"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/mawk",
                &[],
                &["-W", "exec", "prog.awk"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/gawk",
                &[],
                &["--load", "x.so"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/awk",
                &[],
                &["{print}", "-f", "x"],
                Err("can run programs"),
            ),
            (
                "/usr/bin/gawk",
                &["-e"],
                &["{print}", "-e", "BEGIN{system(\"id\")}"],
                Err(SCRIPT),
            ),
            ("/usr/bin/awk", &[], &["/[/]/"], Err("cannot be read")),
            ("/usr/bin/awk", &[], &[], Err("no script")),
        ];
        for (exe, flags, argv, want) in cases {
            check(exe, &[], flags, argv, *want);
        }
        // A refusal quotes a long script bounded.
        let long = format!("{}w /tmp/x", "p;".repeat(100_000));
        let err = rule("/usr/bin/sed", &[], Some(&[]))
            .check_rest(&args(&[&long, "f"]))
            .unwrap_err();
        assert!(err.len() < 600, "{} bytes", err.len());
    }

    #[test]
    fn git_configs_that_name_programs_are_found() {
        let text = r#"
[core]
	repositoryformatversion = 0
	fsmonitor = "touch /tmp/pwned"
[remote "origin"]
	url = https://example.com/x.git
	uploadpack = /tmp/evil
[diff "bin"]
	textconv = hexdump
[alias]
	st = status
[includeIf "gitdir:/x/"]
	path = /tmp/other
[filter	"y"]
	clean = sh -c id
[user]
	name = someone
"#;
        let found = git_config_programs(text.as_bytes());
        assert_eq!(
            found,
            [
                "core.fsmonitor",
                "remote.*.uploadpack",
                "diff.*.textconv",
                "alias.st",
                "includeif.*.path",
                "filter.*.clean"
            ]
        );
        assert!(git_config_programs(b"[core]\n\tbare = false\n[user]\n\temail = a@b\n").is_empty());
        let fooling: &[(&[u8], &str)] = &[
            (
                b"\xef\xbb\xbf[diff \"x\"]\n\ttextconv = sh\n",
                "diff.*.textconv",
            ),
            // Two headers on one line, the key after them.
            (b"[user] [core] fsmonitor = x\n", "core.fsmonitor"),
            (b"[user]\n[core]fsmonitor=x\n", "core.fsmonitor"),
            // A `]` and an escaped quote inside a quoted subsection.
            (b"[diff \"a]b\"] textconv = x\n", "diff.*.textconv"),
            (b"[diff \"a\\\"]b\"]\n textconv = x\n", "diff.*.textconv"),
            // Bytes that are not UTF-8 elsewhere in the file.
            (
                b"[user]\n\tname = \xff\xfe\n[core]\n\tpager = sh\n",
                "core.pager",
            ),
            // A comment after the key, a key with no value (true).
            (b"[core]\n\tfsmonitor ; comment\n", "core.fsmonitor"),
            (
                b"[gpg \"ssh\"]\n\tdefaultKeyCommand = sh\n",
                "gpg.*.defaultkeycommand",
            ),
            (b"[trailer \"x\"]\n\tcommand = sh\n", "trailer.*.command"),
            (b"[CORE]\n\tFsMonitor = x\n", "core.fsmonitor"),
        ];
        for (text, want) in fooling {
            assert_eq!(
                git_config_programs(text),
                [*want],
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        // As git lists keys (`git config --name-only --list`).
        assert_eq!(
            git_program_key("includeif.gitdir:/x.y/.path").as_deref(),
            Some("includeif.*.path")
        );
        assert_eq!(
            git_program_key("diff.my.driver.textconv").as_deref(),
            Some("diff.*.textconv")
        );
        assert_eq!(git_program_key("user.name"), None);
        assert_eq!(git_program_key("remote.origin.url"), None);
    }
}

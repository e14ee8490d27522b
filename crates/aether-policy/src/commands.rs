//! What `run_command` may run: the project's allowlist of executables and argv prefixes, the
//! options each may take after its prefix, and the options no allowlist can open.
//!
//! An entry names an absolute executable and the argv it must start with (`/usr/bin/git` with
//! `["status"]`). After that prefix, positional arguments are free, but an option (anything
//! starting with `-`, judged by its name before any `=`) must be listed in the entry's `flags`;
//! with no `flags`, no option is allowed. Some options run code whatever the prefix (`git -c
//! core.fsmonitor=…`, `git --output=…`, `rg --pre`, `find -exec`, `tar --to-command`, an
//! interpreter's `-c`/`-e`): they are refused even when an entry lists them, and such an entry
//! is a configuration error. Shells and launchers (`sh`, `env`, `xargs`, `sudo`, …) cannot be
//! entries at all: `run_shell` is the tool for a shell, inside a sandbox; nor can `awk`, whose
//! program is an argument. `sed` always runs with `--sandbox` (no `e`, `w`, `r`). Known limit:
//! a program that reads code from its arguments or from files in the root (`make` and its
//! Makefile, `cargo` and `.cargo/config.toml`, an interpreter and a script) runs that code;
//! allow such programs only in modes that don't.
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
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "at",
    "batch",
    "crontab",
    "socat",
    "nc",
    "ncat",
    "telnet",
];

/// Options that run code or write where they like, per executable (by file name); a name
/// ending in `=` is matched as a prefix of the option.
fn dangerous_options(exe_name: &str) -> &'static [&'static str] {
    match exe_name {
        "git" => &[
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
        "rg" => &[
            "--pre",
            "--pre-glob",
            "-z",
            "--search-zip",
            "--hostname-bin",
        ],
        "grep" | "egrep" | "fgrep" => &[],
        "find" => &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
        "tar" | "gtar" | "bsdtar" => &[
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
        ],
        "sed" | "gsed" => &["-i", "--in-place", "-f", "--file", "-s", "--separate"],
        "python" | "pypy" => &["-c", "-m"],
        "perl" | "ruby" | "node" | "nodejs" | "deno" | "bun" | "php" | "lua" | "tclsh" => &[
            "-e", "-E", "-r", "--eval", "-p", "--print", "-c", "-n", "-i",
        ],
        "cargo" => &["--config", "-Z"],
        "npm" | "npx" | "pnpm" | "yarn" => &["--node-options", "--script-shell", "-c", "--call"],
        "make" | "gmake" => &["--eval", "-E", "-f", "--file", "--makefile"],
        "ssh" | "scp" | "sftp" | "rsync" => &["-o", "-e", "--rsh", "-F", "-S", "--rsync-path"],
        "curl" | "wget" => &[
            "-o",
            "-O",
            "--output",
            "-K",
            "--config",
            "--output-document",
            "--execute",
            "-e",
        ],
        _ => &[],
    }
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
    "gpg.program",
    "gpg.*.program",
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
    "safe.directory=*",
];

/// The program's name as the lists know it: the file name without a version suffix
/// (`python3.12` is `python`, `ruby3.1` is `ruby`, `lua5.4` is `lua`).
pub fn program_name(exe: &str) -> &str {
    let file = exe.rsplit('/').next().unwrap_or(exe);
    let base = file.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if base.is_empty() { file } else { base }
}

/// The option's name as judged: `--format=%H` is `--format`.
fn option_name(arg: &str) -> &str {
    arg.split_once('=').map(|(name, _)| name).unwrap_or(arg)
}

fn is_dangerous(exe: &str, arg: &str) -> bool {
    let name = option_name(arg);
    let exe = program_name(exe);
    let list = dangerous_options(exe);
    // Programs that take single-dash long options (`-exec`) have no short-option clusters.
    let clusters = !matches!(exe, "find");
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
        for arg in self.prefix.iter().chain(self.flags.iter().flatten()) {
            if arg.starts_with('-') && is_dangerous(&self.exe, arg) {
                problems.push(format!(
                    "{name} {arg}: this option can run programs or write anywhere; it cannot be allowed"
                ));
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

    /// Checks the arguments after the prefix; the error names the argument and why.
    pub fn check_rest(&self, args: &[String]) -> Result<(), String> {
        let name = program_name(&self.exe);
        let rest = &args[self.prefix.len().min(args.len())..];
        let mut options_end = false;
        for arg in rest {
            if arg.contains('\0') {
                return Err("an argument contains a NUL byte".into());
            }
            if !options_end && arg == "--" {
                options_end = true;
                continue;
            }
            // Dangerous options are refused even after `--`: some programs (find) do not
            // treat it as the end of options.
            if arg.starts_with('-') && arg.len() > 1 && is_dangerous(&self.exe, arg) {
                return Err(format!(
                    "{name} {}: this option can run programs or write anywhere, so Aether never passes it",
                    option_name(arg)
                ));
            }
            if !options_end && arg.starts_with('-') && arg.len() > 1 {
                let allowed = self
                    .flags
                    .iter()
                    .flatten()
                    .any(|f| f == option_name(arg) || f == arg);
                if !allowed {
                    return Err(format!(
                        "{name} {}: not an allowed option after `{}` (allowed: {})",
                        option_name(arg),
                        std::iter::once(self.exe.as_str())
                            .chain(self.prefix.iter().map(String::as_str))
                            .collect::<Vec<_>>()
                            .join(" "),
                        match &self.flags {
                            Some(f) if !f.is_empty() => f.join(", "),
                            _ => "none".into(),
                        }
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Arguments Aether puts before the caller's for some programs: GNU `sed --sandbox` refuses
/// the `e`, `w` and `r` commands and flags (scripts that run programs or touch files), which
/// no reading of a script by Aether could do as well.
pub fn forced_arguments(exe: &str) -> &'static [&'static str] {
    match program_name(exe) {
        "sed" | "gsed" => &["--sandbox"],
        _ => &[],
    }
}

/// The program-valued keys a git config text defines (section.key, lower-case, with `*` for
/// a subsection as in [`GIT_PROGRAM_KEYS`]), by a lenient reading of git's INI format.
pub fn git_config_programs(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut section = String::new();
    let mut subsection = false;
    for line in text.trim_start_matches('\u{feff}').lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut rest = line;
        if let Some(header) = line.strip_prefix('[') {
            let Some((inside, after)) = header.split_once(']') else {
                continue;
            };
            let inside = inside.trim();
            // [section "sub"] or the old [section.sub]
            let (name, sub) = match inside.split_once(|c: char| c.is_whitespace() || c == '.') {
                Some((name, sub)) => (name, !sub.trim().is_empty()),
                None => (inside, false),
            };
            section = name.to_ascii_lowercase();
            subsection = sub;
            rest = after.trim();
            if rest.is_empty() {
                continue;
            }
        }
        let key = rest
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if key.is_empty() {
            continue;
        }
        let full = if subsection {
            format!("{section}.*.{key}")
        } else {
            format!("{section}.{key}")
        };
        let hit = GIT_PROGRAM_KEYS.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            match pattern.strip_suffix(".*") {
                // `alias.*`, `pager.*`, `sendemail.*`: every key of the section.
                Some(prefix) if !prefix.contains('*') => section == prefix,
                _ => pattern == full,
            }
        });
        if hit && !found.contains(&full) {
            found.push(full);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(exe: &str, prefix: &[&str], flags: Option<&[&str]>) -> CommandRule {
        CommandRule {
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
        // After `--`, arguments are paths, even if they look like options.
        git.check_rest(&args(&["log", "--", "-weird-file"]))
            .unwrap();
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
        assert!(!rule("/usr/bin/gawk", &[], None).problems().is_empty());
        assert!(!rule("/usr/bin/mksh", &[], None).problems().is_empty());
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
        let found = git_config_programs(text);
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
        assert!(git_config_programs("[core]\n\tbare = false\n[user]\n\temail = a@b\n").is_empty());
        assert_eq!(
            git_config_programs("\u{feff}[diff \"x\"]\n\ttextconv = sh\n"),
            ["diff.*.textconv"]
        );
    }
}

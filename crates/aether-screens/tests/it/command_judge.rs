//! A fuzz target for `run_command`'s judge (`CommandRule::check_rest`, `argv::read`, the
//! script readers), as a proptest: argv vectors mixed from options, `--`, paths that climb
//! or are absolute or spelled like options, sed and awk script fragments and random text.
//! The invariants:
//!
//! - the judge never panics, and reads one role per argument;
//! - its verdict is the same every time it is asked (it is a function of its input);
//! - nothing admitted names an option that runs programs or writes anywhere, in any role;
//! - with no option allowed, nothing admitted is an option to the program: every argument
//!   that starts with `-` (but `--` itself) comes after the `--` the program honours;
//! - a sed script or awk program admitted runs under GNU sed's and gawk's own `--sandbox`
//!   without their refusing a command that runs, writes or reads (where they are installed).
//!
//! Bounded for CI: 96 cases by default, `PROPTEST_CASES` raises it. No nightly toolchain is
//! needed (this is not cargo-fuzz).

use aether_screens::argv::{Role, read};
use aether_screens::commands::{CommandRule, program_name};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const PROGRAMS: &[&str] = &[
    "/usr/bin/grep",
    "/usr/bin/rg",
    "/usr/bin/sed",
    "/usr/bin/gawk",
    "/usr/bin/mawk",
    "/usr/bin/find",
    "/usr/bin/git",
    "/usr/bin/head",
    "/usr/bin/sort",
    "/usr/bin/ls",
    "/usr/bin/tar",
    "/usr/bin/echo",
    "/usr/bin/cargo",
];

/// Programs whose `--` ends their options, when no option before it took it.
const HONOUR_END: &[&str] = &["grep", "rg", "sed", "gawk", "mawk", "head", "sort", "ls"];

const WORDS: &[&str] = &[
    // options, glued or not
    "-n",
    "-n5",
    "-e",
    "-f",
    "-i",
    "-i.bak",
    "-i../*",
    "-r",
    "-v",
    "-l",
    "-la",
    "-qn",
    "-E",
    "-s",
    "-F",
    "-F:",
    "-v",
    "x=1",
    "-C",
    "-C3",
    "-5",
    "-o",
    "-t",
    "-k2",
    "--",
    "-",
    "--format",
    "--format=%H",
    "--author",
    "--expression",
    "--expression=w /tmp/x",
    "--regexp=x",
    "--in-place=bak/*",
    "--source",
    "--exp",
    "-ne",
    "-nep",
    // options that run programs or write anywhere
    "--pre=/tmp/evil",
    "--pre",
    "-exec",
    "-delete",
    "-fprint",
    "-c",
    "core.pager=sh",
    "--output=/tmp/x",
    "-T",
    "--to-command=sh",
    "-W",
    "--files0-from=list",
    "-files0-from",
    "-x",
    "-O",
    // git
    "log",
    "grep",
    "status",
    "blame",
    "-p",
    "-S",
    "--oneline",
    "--stat",
    // find
    ".",
    "-name",
    "*.rs",
    "-type",
    "f",
    "-newer",
    "(",
    ")",
    "!",
    "-print",
    // paths
    "../x",
    "/etc/passwd",
    "a/../../b",
    "-d/../../x",
    "f",
    "README.md",
    "link/..",
    // sed fragments
    "p",
    "s/a/b/",
    "s/a/b/g",
    "s/a/b/e",
    "1e id",
    "w /tmp/x",
    "W /tmp/x",
    "r /etc/passwd",
    "R x",
    "s|a|b|w x",
    "y/a/b/",
    "1d",
    "$!N",
    "a text",
    "s/[/]/x/",
    "1{p\n}",
    "s/a/b/ e",
    // awk fragments
    "{print}",
    "{print $1}",
    "BEGIN{system(\"id\")}",
    "{print > \"x\"}",
    "{print | \"sh\"}",
    "/a|b/",
    "$1 > 2",
    "{print ($1 > 2)}",
    "BEGIN{getline l < \"/etc/passwd\"}",
    "@load \"x\"",
    "{print $1 > $2}",
    "{ a = b / 2; system(\"id\") }",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(str::to_string),
        // Fragments joined into one script.
        1 => prop::collection::vec(prop::sample::select(WORDS), 1..4)
            .prop_map(|w| w.join(";")),
        1 => "[-a-z/.=|{}$;> \"()\\[\\]]{0,12}",
    ]
}

fn case() -> impl Strategy<Value = (&'static str, Vec<String>, Vec<String>)> {
    (
        prop::sample::select(PROGRAMS),
        prop::collection::vec(word(), 0..8),
        prop::collection::vec(prop::sample::select(WORDS).prop_map(str::to_string), 0..4),
    )
}

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn rule(exe: &str, flags: &[String]) -> CommandRule {
    CommandRule {
        exe: exe.into(),
        prefix: Vec::new(),
        flags: Some(flags.to_vec()),
        uncovered: false,
    }
}

/// Whether an entry listing `arg`'s option name would be a configuration error: the option
/// runs programs or writes anywhere. `as_option`: read as the program reads an option (a
/// cluster of short options counts, `-nep` holds `-p`); otherwise only a name spelled as one
/// (a long option, a two-character one, find's primaries) — an operand after `--` that
/// merely holds the letter is a file.
fn names_a_dangerous_option(exe: &str, arg: &str, as_option: bool) -> bool {
    let name = arg.split_once('=').map(|(n, _)| n).unwrap_or(arg);
    let spelled = as_option
        || name.starts_with("--")
        || name.chars().count() == 2
        || program_name(exe) == "find";
    name.starts_with('-')
        && name.len() > 1
        && name != "--"
        && spelled
        && !rule(exe, &[name.to_string()]).problems().is_empty()
}

#[test]
fn the_command_judge_keeps_its_invariants() {
    let mut runner = TestRunner::new(config());
    runner
        .run(&case(), |(exe, argv, flags)| {
            let program = program_name(exe);
            let r = rule(exe, &flags);
            let verdict = r.check_rest(&argv);
            prop_assert_eq!(
                &verdict,
                &r.check_rest(&argv),
                "the same question, another answer"
            );
            let reading = read(program, &argv);
            prop_assert_eq!(reading.roles.len(), argv.len());
            if verdict.is_err() {
                return Ok(());
            }
            for (at, arg) in argv.iter().enumerate() {
                let option = matches!(reading.roles[at], Role::Option { .. });
                prop_assert!(
                    !names_a_dangerous_option(exe, arg, option),
                    "{} {:?} admitted with {}",
                    exe,
                    argv,
                    arg
                );
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn with_no_option_allowed_nothing_admitted_is_an_option() {
    let mut runner = TestRunner::new(config());
    runner
        .run(&case(), |(exe, argv, _)| {
            let program = program_name(exe);
            let Ok(reading) = rule(exe, &[]).check_rest(&argv) else {
                return Ok(());
            };
            let end = argv.iter().position(|a| a == "--");
            for (at, arg) in argv.iter().enumerate() {
                if !arg.starts_with('-') || arg.len() < 2 || arg == "--" {
                    continue;
                }
                // git honours `--` after its subcommand, for the subcommands it knows.
                let honours = HONOUR_END.contains(&program)
                    || (program == "git"
                        && matches!(
                            argv.first().map(String::as_str),
                            Some("log" | "grep" | "status")
                        ));
                prop_assert!(
                    honours && end.is_some_and(|e| e < at),
                    "{} {:?}: {} admitted, read as {:?}",
                    exe,
                    argv,
                    arg,
                    reading.roles[at]
                );
                let option = matches!(reading.roles[at], Role::Option { .. });
                prop_assert!(!option, "{:?} read as an option", arg);
            }
            Ok(())
        })
        .unwrap();
}

/// Runs `exe --sandbox ARGV` on a small input in a scratch folder, stopped after 2 s;
/// its stderr.
fn run_sandboxed(exe: &str, argv: &[String]) -> Option<String> {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().ok()?;
    std::fs::write(dir.path().join("f"), "a\nb\n").ok()?;
    std::fs::write(dir.path().join("README.md"), "a\n").ok()?;
    let mut child = Command::new(exe)
        .arg("--sandbox")
        .args(argv)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_clear()
        .env("LC_ALL", "C")
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while child.try_wait().ok()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn what_the_judge_admits_the_programs_own_sandboxes_do_not_refuse() {
    let installed: Vec<&str> = ["/usr/bin/sed", "/usr/bin/gawk"]
        .into_iter()
        .filter(|p| std::path::Path::new(p).exists())
        .collect();
    if installed.is_empty() {
        eprintln!("skipped: neither GNU sed nor gawk here");
        return;
    }
    let strategy = (
        prop::sample::select(installed),
        prop::collection::vec(word(), 1..5),
    );
    let mut runner = TestRunner::new(config());
    let admitted = std::cell::Cell::new(0u32);
    runner
        .run(&strategy, |(exe, argv)| {
            // Every option given is listed: only the scripts and what no entry can allow
            // stand between the argv and the program.
            if rule(exe, &argv).check_rest(&argv).is_err() {
                return Ok(());
            }
            admitted.set(admitted.get() + 1);
            let Some(stderr) = run_sandboxed(exe, &argv) else {
                return Ok(());
            };
            prop_assert!(
                !stderr.contains("disabled in sandbox mode")
                    && !stderr.contains("not allowed in sandbox mode"),
                "{} {:?} was admitted, and its own sandbox refused it: {}",
                exe,
                argv,
                stderr
            );
            Ok(())
        })
        .unwrap();
    eprintln!("{} generated calls admitted and run", admitted.get());
}

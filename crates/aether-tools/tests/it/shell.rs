//! `run_command` with real processes: the allowlist and its options, the clean environment,
//! confinement of the working folder, output capping, and the whole process tree killed,
//! even a grandchild that left the process group.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_policy::AgentProfile;
use aether_policy::commands::CommandRule;
use aether_tools::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::common::*;

fn rule(exe: &str, prefix: &[&str], flags: Option<&[&str]>) -> CommandRule {
    CommandRule {
        uncovered: false,
        exe: exe.into(),
        prefix: prefix.iter().map(|s| s.to_string()).collect(),
        flags: flags.map(|f| f.iter().map(|s| s.to_string()).collect()),
    }
}

fn cx_with(tree: &Tree, rules: Vec<CommandRule>) -> CallContext {
    let mut agent = AgentProfile::with_groups("builder", &["shell"]);
    agent.commands = rules;
    CallContext {
        agent: Arc::new(agent),
        ..tree.cx()
    }
}

fn tool() -> Arc<dyn Tool> {
    aether_tools::builtin_tools()
        .into_iter()
        .find(|t| t.def().name == "run_command")
        .unwrap()
}

async fn run(cx: &CallContext, args: Value) -> Result<ToolOutput, ToolError> {
    tool().call(cx.clone(), args).await
}

fn out(result: &Result<ToolOutput, ToolError>) -> &Value {
    result
        .as_ref()
        .unwrap_or_else(|e| panic!("the command did not run: {e}"))
        .structured
        .as_ref()
        .unwrap()
}

/// Asserts that the call is refused before anything runs, with `want` in the error.
async fn refused(cx: &CallContext, args: Value, want: &str) {
    match run(cx, args.clone()).await {
        Err(e) => assert!(e.to_string().contains(want), "{args}: {e}"),
        Ok(o) => panic!("{args} ran: {o:?}"),
    }
}

/// An executable script in the root.
fn script(tree: &Tree, name: &str, body: &str) -> String {
    let path = tree.ws.join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test]
async fn an_allowed_command_runs_in_its_folder_with_seven_variables() {
    let tree = Tree::new();
    fs::create_dir(tree.ws.join("sub")).unwrap();
    let env = script(&tree, "env.sh", "pwd; /usr/bin/env | /usr/bin/sort");
    let cx = cx_with(&tree, vec![rule(&env, &[], None)]);
    let r = run(&cx, json!({"command": env, "cwd": "sub"})).await;
    let v = out(&r);
    assert_eq!(v["exit_code"], 0, "{v}");
    let stdout = v["stdout"].as_str().unwrap();
    let mut lines = stdout.lines();
    assert_eq!(lines.next().unwrap(), tree.ws.join("sub").to_str().unwrap());
    let names: Vec<&str> = lines.map(|l| l.split('=').next().unwrap()).collect();
    // /bin/sh may add PWD (and OLDPWD/SHLVL/_); the command was given exactly seven.
    for must in ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "TZ"] {
        assert!(names.contains(&must), "{must} missing: {stdout}");
    }
    for leaked in [
        "AWS_",
        "GITHUB_TOKEN",
        "CARGO",
        "RUST",
        "USER",
        "SSH_AUTH_SOCK",
    ] {
        assert!(
            !names.iter().any(|n| n.starts_with(leaked)),
            "{leaked} leaked: {stdout}"
        );
    }
    let extra: Vec<&&str> = names
        .iter()
        .filter(|n| {
            ![
                "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "TZ", "PWD", "OLDPWD", "SHLVL",
                "_",
            ]
            .contains(n)
        })
        .collect();
    assert!(extra.is_empty(), "unexpected variables {extra:?}");
}

#[tokio::test]
async fn only_the_allowlist_runs_with_only_its_options() {
    let tree = Tree::new();
    fs::write(tree.ws.join("a.txt"), "alpha\nbeta\n").unwrap();
    fs::write(tree.ws.join(".env"), "TOKEN=secret\n").unwrap();
    fs::write(tree.base.join("outside.txt"), "outside\n").unwrap();
    fs::hard_link(tree.base.join("outside.txt"), tree.ws.join("linked.txt")).unwrap();
    let cx = cx_with(
        &tree,
        vec![
            rule("/usr/bin/head", &["-n", "1"], Some(&["-q"])),
            rule("/usr/bin/find", &["."], Some(&["-name", "-type"])),
        ],
    );
    let r = run(
        &cx,
        json!({"command": "/usr/bin/head", "args": ["-n", "1", "a.txt"]}),
    )
    .await;
    assert_eq!(out(&r)["stdout"], "alpha\n");
    for (args, want) in [
        (
            json!({"command": "head", "args": ["-n", "1", "a.txt"]}),
            "absolute",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "2", "a.txt"]}),
            "not allowed",
        ),
        (
            json!({"command": "/usr/bin/tail", "args": ["a.txt"]}),
            "not allowed",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "-v", "a.txt"]}),
            "not an allowed option",
        ),
        (
            json!({"command": "/usr/bin/find", "args": [".", "-name", "*.txt", "-exec", "rm", "{}", ";"]}),
            "can run programs",
        ),
        (
            json!({"command": "/usr/bin/find", "args": [".", "-delete"]}),
            "can run programs",
        ),
        // The program runs without a sandbox: a path it is given must lie in a root, and
        // not be a credential file or a second name of another file.
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "../outside/secret.txt"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "/etc/hostname"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "sub/../../outside/x"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", ".env"]}),
            "credential",
        ),
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "linked.txt"]}),
            "more than one name",
        ),
    ] {
        refused(&cx, args, want).await;
    }
    assert!(tree.ws.join("a.txt").exists(), "find -delete did not run");
    // The working folder stays inside the root.
    for cwd in ["..", "../outside", "/etc"] {
        let r = run(
            &cx,
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "x"], "cwd": cwd}),
        )
        .await;
        assert!(matches!(r, Err(ToolError::Denied { .. })), "{cwd}: {r:?}");
    }
}

/// Paths the kernel would take elsewhere than they read: through a link to a folder outside
/// (to a file that does not exist yet, or climbing out of the link's target), a dangling link,
/// `key=PATH` arguments, a git repository's own folder, and an option after `--`.
#[tokio::test]
async fn arguments_are_judged_where_the_kernel_would_take_them() {
    let tree = Tree::new();
    fs::write(tree.ws.join("a.txt"), "alpha\n").unwrap();
    fs::create_dir_all(tree.outside.join("d1/d2")).unwrap();
    fs::write(tree.outside.join("d1/x.txt"), "outside\n").unwrap();
    std::os::unix::fs::symlink(&tree.outside, tree.ws.join("out")).unwrap();
    std::os::unix::fs::symlink(tree.outside.join("d1/d2"), tree.ws.join("deep")).unwrap();
    std::os::unix::fs::symlink(tree.outside.join("gone/new"), tree.ws.join("dangling")).unwrap();
    fs::create_dir_all(tree.ws.join("repo/.git/hooks")).unwrap();
    fs::create_dir_all(tree.ws.join("bare/objects")).unwrap();
    fs::create_dir_all(tree.ws.join("bare/refs")).unwrap();
    fs::write(tree.ws.join("bare/HEAD"), "ref: refs/heads/main\n").unwrap();
    let cx = cx_with(
        &tree,
        vec![
            rule("/usr/bin/touch", &[], None),
            rule("/usr/bin/head", &["-n", "1"], Some(&["-q"])),
            rule("/usr/bin/dd", &[], None),
            rule("/usr/bin/ls", &[], None),
            rule("/usr/bin/cp", &[], Some(&["-r"])),
        ],
    );
    fs::create_dir_all(tree.ws.join("tmpl/hooks")).unwrap();
    fs::create_dir_all(tree.ws.join("half/objects")).unwrap();
    fs::create_dir_all(tree.ws.join("half/refs")).unwrap();
    let r = run(
        &cx,
        json!({"command": "/usr/bin/touch", "args": ["new.txt"]}),
    )
    .await;
    assert_eq!(out(&r)["exit_code"], 0, "{r:?}");
    for (args, want) in [
        (
            json!({"command": "/usr/bin/touch", "args": ["out/new.txt"]}),
            "outside every root",
        ),
        // `deep/..` is `outside/d1`, not the root: the link is followed before `..`.
        (
            json!({"command": "/usr/bin/head", "args": ["-n", "1", "deep/../x.txt"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/touch", "args": ["deep/../made.txt"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/touch", "args": ["dangling"]}),
            "cannot be resolved",
        ),
        (
            json!({"command": "/usr/bin/dd", "args": ["if=a.txt", "of=/tmp/aether-dd-out"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/dd", "args": ["if=out/secret.txt"]}),
            "outside every root",
        ),
        (
            json!({"command": "/usr/bin/touch", "args": ["repo/.git/hooks/pre-commit"]}),
            "git repository's own folder",
        ),
        (
            json!({"command": "/usr/bin/touch", "args": ["bare/hooks"]}),
            "git repository's own folder",
        ),
        (
            json!({"command": "/usr/bin/ls", "args": [], "cwd": "repo/.git"}),
            "git repository's own folder",
        ),
        (
            json!({"command": "/usr/bin/ls", "args": [], "cwd": "bare"}),
            "git repository's own folder",
        ),
        // A repository's folder made by copying one in, in any case.
        (
            json!({"command": "/usr/bin/cp", "args": ["-r", "tmpl", "sub/.git"]}),
            "git repository's own folder",
        ),
        (
            json!({"command": "/usr/bin/cp", "args": ["-r", "tmpl", ".GIT"]}),
            "git repository's own folder",
        ),
        // The last piece that would make a folder a bare repository.
        (
            json!({"command": "/usr/bin/touch", "args": ["half/HEAD"]}),
            "would change",
        ),
        // `@FILE` reads the file so named.
        (
            json!({"command": "/usr/bin/ls", "args": ["@../outside/secret.txt"]}),
            "outside every root",
        ),
    ] {
        refused(&cx, args, want).await;
    }
    assert!(!tree.outside.join("new.txt").exists());
    assert!(!tree.outside.join("d1/made.txt").exists());
    assert!(!tree.ws.join("repo/.git/hooks/pre-commit").exists());
}

/// A program that walks folders reads what no argument named: where bubblewrap runs, it
/// runs with the credential files under the roots (and Aether's own) covered.
#[tokio::test]
async fn a_program_walking_the_root_never_reads_its_credential_files() {
    if aether_tools::shell::Sandbox::detect().ready().is_err() {
        eprintln!(
            "a_program_walking_the_root_never_reads_its_credential_files: skipped (no sandbox)"
        );
        return;
    }
    let tree = Tree::new();
    fs::write(tree.ws.join(".env"), "TOKEN=walked-secret\n").unwrap();
    fs::create_dir_all(tree.ws.join("deploy/.ssh")).unwrap();
    fs::write(
        tree.ws.join("deploy/.ssh/id_ed25519"),
        "walked-secret key\n",
    )
    .unwrap();
    fs::write(
        tree.ws.join("notes.txt"),
        "walked-secret is not here, just this line\n",
    )
    .unwrap();
    // A second name of a file outside the roots.
    fs::write(tree.outside.join("key.pem"), "walked-secret pem\n").unwrap();
    fs::hard_link(tree.outside.join("key.pem"), tree.ws.join("copy.txt")).unwrap();
    // A remote URL with a token in a repository's config; a credential-named link that
    // points nowhere (covering it must not create its target).
    fs::create_dir_all(tree.ws.join("repo/.git")).unwrap();
    fs::write(
        tree.ws.join("repo/.git/config"),
        "[remote \"origin\"]\n\turl = https://walked-secret@example.com/x.git\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(tree.outside.join("gone/.env"), tree.ws.join("deploy/.env"))
        .unwrap();
    let cx = cx_with(
        &tree,
        vec![rule("/usr/bin/grep", &["-r", "walked-secret"], None)],
    );
    let r = run(
        &cx,
        json!({"command": "/usr/bin/grep", "args": ["-r", "walked-secret"]}),
    )
    .await;
    let shown = match &r {
        Ok(o) => o.structured.clone().unwrap_or_default().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(shown.contains("notes.txt"), "{shown}");
    for secret in ["TOKEN=", "key\\n", "pem", "example.com"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(
        !tree.outside.join("gone").exists(),
        "a cover made a file outside"
    );
}

/// Where the program runs in the sandbox, the names of its URL arguments are held to the
/// addresses Aether vetted: its hosts file names them only there (against DNS
/// rebinding between Aether's look-up and the program's).
#[tokio::test]
async fn a_url_arguments_name_is_held_to_its_vetted_address_in_the_sandbox() {
    if aether_tools::shell::Sandbox::shared().ready().is_err() {
        eprintln!("skipped: no sandbox here");
        return;
    }
    let tree = Tree::new();
    let mut agent = AgentProfile::with_groups("builder", &["shell"]);
    agent.commands = vec![rule("/usr/bin/getent", &["hosts"], None)];
    agent.allowed_domains = vec!["localhost".into()];
    agent.allow_private_network = true;
    let cx = CallContext {
        agent: Arc::new(agent),
        ..tree.cx()
    };
    let r = run(
        &cx,
        json!({"command": "/usr/bin/getent", "args": ["hosts", "localhost", "http://localhost:9/"]}),
    )
    .await;
    // Only the pinned lines name localhost in the sandbox (with a "localhost." alias the
    // machine's own file does not have), whichever address family getent asks for.
    let stdout = out(&r)["stdout"].as_str().unwrap_or_default().to_string();
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|l| l.ends_with(" localhost localhost.")),
        "{r:?}"
    );
    // Nothing of the run's pinned-name files is left behind.
    let pins = std::env::temp_dir().join(format!("aether-pins-{}", std::process::id()));
    let left = std::fs::read_dir(pins).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0);
}

/// A URL argument is reached by the program itself: judged by the agent's egress policy
/// (http/https), as a path (file), or refused (any other scheme).
#[tokio::test]
async fn url_arguments_are_judged_by_the_agents_egress_policy() {
    let tree = Tree::new();
    let mut agent = AgentProfile::with_groups("builder", &["shell"]);
    agent.commands = vec![rule("/usr/bin/echo", &[], None)];
    agent.allowed_domains = vec!["localhost".into(), "1.1.1.1".into()];
    let cx = CallContext {
        agent: Arc::new(agent),
        ..tree.cx()
    };
    let r = run(
        &cx,
        json!({"command": "/usr/bin/echo", "args": ["http://1.1.1.1/x"]}),
    )
    .await;
    assert_eq!(out(&r)["stdout"], "http://1.1.1.1/x\n", "{r:?}");
    for (args, want) in [
        // Not among the agent's domains, in any spelling of the address.
        (
            json!(["http://169.254.169.254/latest/meta-data/"]),
            "egress:domain-not-allowed",
        ),
        // Another spelling of an address, a backslash parsers read differently, one slash.
        (json!(["HTTP://0xA9FEA9FE/latest"]), "egress:malformed-url"),
        (
            json!(["http://1.1.1.1\\@169.254.169.254/latest"]),
            "egress:malformed-url",
        ),
        (
            json!(["http:/169.254.169.254/latest"]),
            "egress:malformed-url",
        ),
        (
            json!(["http://1.1.1.1@169.254.169.254/latest"]),
            "egress:credentials-in-url",
        ),
        // A URL leaves: a credential in it does not.
        (
            json!(["http://1.1.1.1/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"]),
            "dlp:github-token",
        ),
        (
            json!(["--", "url=https://evil.example/x"]),
            "egress:domain-not-allowed",
        ),
        // Read from a file a program fetches (`@URL`), as for paths.
        (
            json!(["@http://169.254.169.254/latest"]),
            "egress:domain-not-allowed",
        ),
        // Allowed by name, but the name is this computer.
        (
            json!(["http://localhost:9/admin"]),
            "egress:private-address",
        ),
        (json!(["ftp://1.1.1.1/x"]), "egress:scheme"),
        (json!(["gopher://1.1.1.1:6379/_FLUSHALL"]), "egress:scheme"),
        (json!(["file:///etc/passwd"]), "outside every root"),
        (json!(["url=file:///%65tc/passwd"]), "outside every root"),
    ] {
        let r = run(
            &cx,
            json!({"command": "/usr/bin/echo", "args": args.clone()}),
        )
        .await;
        match &r {
            Err(ToolError::Denied { rule, message }) => assert!(
                rule.contains(want) || message.contains(want),
                "{args}: {rule}: {message}"
            ),
            other => panic!("{args}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_whole_tree_dies_at_the_timeout_even_what_left_the_group() {
    let tree = Tree::new();
    let pidfile = tree.ws.join("escaped.pid");
    // A child that leaves the session (setsid) and double-forks, then the command waits.
    let escape = script(
        &tree,
        "escape.sh",
        &format!(
            "/usr/bin/setsid /bin/sh -c '/bin/sleep 60 & echo $! > {}' &\n/bin/sleep 60",
            pidfile.display()
        ),
    );
    let cx = cx_with(&tree, vec![rule(&escape, &[], None)]);
    let started = Instant::now();
    let r = tool()
        .call(cx, json!({"command": escape, "timeout_seconds": 1}))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let v = r.structured.as_ref().unwrap();
    assert_eq!(v["timed_out"], true);
    assert!(r.is_error);
    let pid: i32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    if v["containment"] == "cgroup" {
        assert!(
            !alive,
            "the escaped grandchild {pid} survived the cgroup kill"
        );
    } else {
        // Without a cgroup a process that left the group escapes: the call says so.
        assert_eq!(v["containment"], "process-group");
        if alive {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

#[tokio::test]
async fn long_output_keeps_its_head_and_tail_and_a_failure_is_an_error() {
    let tree = Tree::new();
    let noisy = script(
        &tree,
        "noisy.sh",
        "echo FIRST; i=0; while [ $i -lt 20000 ]; do echo 0123456789abcdef; i=$((i+1)); done; echo LAST; echo oops >&2; exit 3",
    );
    let cx = cx_with(&tree, vec![rule(&noisy, &[], None)]);
    let r = tool().call(cx, json!({"command": noisy})).await.unwrap();
    assert!(r.is_error, "a non-zero exit is an error result");
    let v = r.structured.as_ref().unwrap();
    assert_eq!(v["exit_code"], 3);
    let stdout = v["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("FIRST\n") && stdout.trim_end().ends_with("LAST"),
        "{}",
        &stdout[..100]
    );
    assert!(stdout.contains("bytes left out"));
    assert!(stdout.len() < 70_000);
    assert_eq!(v["stdout_bytes"], 6 + 20000 * 17 + 5);
    assert_eq!(v["stderr"], "oops\n");
}

#[tokio::test]
async fn git_runs_without_the_repositorys_programs() {
    let tree = Tree::new();
    let git = "/usr/bin/git";
    if !std::path::Path::new(git).exists() {
        eprintln!("git_runs_without_the_repositorys_programs: skipped (no /usr/bin/git)");
        return;
    }
    let cx = cx_with(&tree, vec![rule(git, &["status"], Some(&["--short"]))]);
    fs::create_dir_all(tree.ws.join("repo/.git")).unwrap();
    let status = std::process::Command::new(git)
        .args(["init", "-q"])
        .current_dir(tree.ws.join("repo"))
        .status()
        .unwrap();
    assert!(status.success());
    let r = run(
        &cx,
        json!({"command": git, "args": ["status", "--short"], "cwd": "repo"}),
    )
    .await;
    assert_eq!(out(&r)["exit_code"], 0, "{:?}", out(&r));
    // A repository whose config names a program is refused before git runs.
    let config = tree.ws.join("repo/.git/config");
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str("[core]\n\tfsmonitor = \"touch /tmp/aether-pwned\"\n");
    fs::write(&config, text).unwrap();
    let r = run(
        &cx,
        json!({"command": git, "args": ["status", "--short"], "cwd": "repo"}),
    )
    .await;
    match r {
        Err(ToolError::Denied { rule, message }) => {
            assert_eq!(rule, "git-config");
            assert!(message.contains("core.fsmonitor"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Configs written to be misread: bytes that are not UTF-8 before the key, two headers on
    // one line, a `]` inside a quoted subsection, a key git takes without a value.
    let configs: &[(&[u8], &str)] = &[
        (
            b"[user]\n\tname = \xff\xfe\n[core]\n\tfsmonitor = touch /tmp/aether-pwned\n",
            "core.fsmonitor",
        ),
        (
            b"[user] [core] fsmonitor = touch /tmp/aether-pwned\n",
            "core.fsmonitor",
        ),
        (
            b"[diff \"a]b\"] textconv = touch /tmp/aether-pwned\n",
            "diff.*.textconv",
        ),
        (
            b"[gpg \"ssh\"]\n\tdefaultKeyCommand = touch /tmp/aether-pwned\n",
            "gpg.*.defaultkeycommand",
        ),
        (
            b"[core]\n\trepositoryformatversion = 0\n[unclosed\n",
            "cannot read",
        ),
    ];
    for (bad, want) in configs {
        fs::write(&config, bad).unwrap();
        let r = run(
            &cx,
            json!({"command": git, "args": ["status", "--short"], "cwd": "repo"}),
        )
        .await;
        match r {
            Err(ToolError::Denied { rule, message }) => {
                assert_eq!(rule, "git-config");
                assert!(
                    message.contains(want),
                    "{}: {message}",
                    String::from_utf8_lossy(bad)
                );
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(bad)),
        }
    }
}

#[tokio::test]
async fn an_agent_with_no_allowed_command_is_not_offered_the_tool() {
    let t = tool();
    let none = AgentProfile::with_groups("plain", &["shell"]);
    let why = t.available_to(&none).unwrap_err();
    assert!(why.contains("allows no commands"), "{why}");
    let mut some = none.clone();
    some.commands = vec![rule("/usr/bin/true", &[], None)];
    assert!(t.available_to(&some).is_ok());
}

fn read_logs() -> Arc<dyn Tool> {
    aether_tools::builtin_tools()
        .into_iter()
        .find(|t| t.def().name == "read_logs")
        .unwrap()
}

#[tokio::test]
async fn read_logs_tails_and_filters_a_log_under_a_root() {
    let tree = Tree::new();
    fs::create_dir(tree.ws.join("logs")).unwrap();
    let mut log = String::new();
    for i in 0..1000 {
        log.push_str(&format!(
            "{i:04} {}\n",
            if i % 100 == 7 { "ERROR disk" } else { "ok" }
        ));
    }
    fs::write(tree.ws.join("logs/app.log"), &log).unwrap();
    let cx = tree.cx();
    let r = read_logs()
        .call(cx.clone(), json!({"path": "logs/app.log", "lines": 3}))
        .await
        .unwrap();
    let v = r.structured.as_ref().unwrap();
    assert_eq!(v["lines"], json!(["0997 ok", "0998 ok", "0999 ok"]));
    let r = read_logs()
        .call(
            cx.clone(),
            json!({"path": "logs/app.log", "lines": 2, "filter": "ERROR"}),
        )
        .await
        .unwrap();
    assert_eq!(
        r.structured.as_ref().unwrap()["lines"],
        json!(["0807 ERROR disk", "0907 ERROR disk"])
    );
    let r = read_logs()
        .call(
            cx.clone(),
            json!({"path": "logs/app.log", "lines": 1, "filter": "^00[0-9]7 ERR", "regex": true}),
        )
        .await
        .unwrap();
    assert_eq!(
        r.structured.as_ref().unwrap()["lines"],
        json!(["0007 ERROR disk"])
    );
    // Confinement and credentials, as for every read; bad input changes nothing.
    for (args, what) in [
        (json!({"path": "../outside/secret.txt"}), "outside"),
        (
            json!({"path": "logs/app.log", "filter": "(", "regex": true}),
            "filter",
        ),
        (
            json!({"path": "logs/app.log", "unit": "x.service"}),
            "journal",
        ),
        (json!({"unit": "--output=x"}), "unit"),
        (json!({"since": "2h; rm -rf /"}), "since"),
    ] {
        let r = read_logs().call(cx.clone(), args.clone()).await;
        assert!(r.is_err(), "{what}: {args} was accepted: {r:?}");
        if let Err(e) = r {
            assert!(!e.to_string().contains(SECRET), "{e}");
        }
    }
    fs::write(tree.ws.join(".env"), "TOKEN=x\n").unwrap();
    let r = read_logs().call(cx, json!({"path": ".env"})).await;
    assert!(matches!(r, Err(ToolError::Denied { .. })), "{r:?}");
}

#[tokio::test]
async fn sed_runs_sandboxed_and_a_dropped_call_kills_its_tree() {
    let tree = Tree::new();
    fs::write(tree.ws.join("README.md"), "hello\n").unwrap();
    let cx = cx_with(&tree, vec![rule("/usr/bin/sed", &["-n"], None)]);
    // A file name starting with e/w/r is fine; a script that would run a program is refused
    // before anything runs (and sed runs with --sandbox behind that).
    let r = run(
        &cx,
        json!({"command": "/usr/bin/sed", "args": ["-n", "p", "README.md"]}),
    )
    .await;
    assert_eq!(out(&r)["stdout"], "hello\n");
    refused(
        &cx,
        json!({"command": "/usr/bin/sed", "args": ["-n", "1s/.*/id/e", "README.md"]}),
        "s///e",
    )
    .await;

    // The pipeline drops a call's future on cancel or at its own limit: the tree dies too.
    let pidfile = tree.ws.join("child.pid");
    let sleeper = script(
        &tree,
        "sleeper.sh",
        &format!("/bin/sleep 60 & echo $! > {}\nwait", pidfile.display()),
    );
    let cx = cx_with(&tree, vec![rule(&sleeper, &[], None)]);
    let runner = tool();
    let call = runner.call(cx, json!({"command": sleeper, "timeout_seconds": 60}));
    let _ = tokio::time::timeout(Duration::from_millis(700), call).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    let pid: i32 = loop {
        if let Ok(t) = fs::read_to_string(&pidfile)
            && let Ok(pid) = t.trim().parse()
        {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "the script never started its child"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let gone = || {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while !gone() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone(), "the child {pid} outlived the dropped call");
}

/// A program writes where Aether's user can: it cannot change, move or remove a control file
/// under the roots (covered where bubblewrap runs), and one it makes — another Aether's rules,
/// say — is set aside when it ends, the call reported as refused.
#[tokio::test]
async fn a_program_cannot_change_or_leave_behind_any_aethers_control_files() {
    if aether_tools::shell::Sandbox::detect().ready().is_err() {
        eprintln!("a_program_cannot_change_or_leave_behind_any_aethers_control_files: skipped");
        return;
    }
    let tree = Tree::new();
    fs::create_dir_all(tree.ws.join("proj")).unwrap();
    fs::write(tree.ws.join("proj/permissions.yaml"), "rules: []\n").unwrap();
    fs::write(tree.ws.join("proj/aether.toml"), "[server]\n").unwrap();
    let evil = script(
        &tree,
        "evil.sh",
        "printf 'rules: [x]' > proj/permissions.yaml; rm -f proj/aether.toml; \
         mv proj/permissions.yaml proj/old.yaml; mkdir -p other; \
         printf 'rules: []' > other/permissions.yaml; printf x > Aether.toml; true",
    );
    let cx = cx_with(&tree, vec![rule(&evil, &[], None)]);
    let r = run(&cx, json!({"command": evil})).await;
    let e = r.expect_err("the call is refused");
    assert!(e.to_string().contains("set-aside"), "{e}");
    assert_eq!(
        fs::read_to_string(tree.ws.join("proj/permissions.yaml")).unwrap(),
        "rules: []\n"
    );
    assert_eq!(
        fs::read_to_string(tree.ws.join("proj/aether.toml")).unwrap(),
        "[server]\n"
    );
    assert!(!tree.ws.join("proj/old.yaml").exists());
    assert!(!tree.ws.join("other/permissions.yaml").exists());
    assert!(!tree.ws.join("Aether.toml").exists());
}

/// After the `--` a program honours, its arguments are operands: a file named `-v` is a
/// file, and a path is still confined however it is spelled; a pattern is never a path.
#[tokio::test]
async fn operands_after_the_programs_own_end_of_options_are_judged_as_operands() {
    let tree = Tree::new();
    fs::write(tree.ws.join("a.txt"), "alpha\n../../etc/passwd\n").unwrap();
    fs::write(tree.ws.join("-v"), "a file named -v\n").unwrap();
    fs::create_dir(tree.ws.join("-d")).unwrap();
    fs::write(tree.outside.join("secret.txt"), "outside\n").unwrap();
    let cx = cx_with(
        &tree,
        vec![
            rule("/usr/bin/head", &["-n", "1"], None),
            rule("/usr/bin/grep", &[], Some(&["-e", "-f", "-h"])),
        ],
    );
    let r = run(
        &cx,
        json!({"command": "/usr/bin/head", "args": ["-n", "1", "--", "-v"]}),
    )
    .await;
    assert_eq!(out(&r)["stdout"], "a file named -v\n", "{r:?}");
    // A pattern that reads like a path outside is text grep matches, never opens.
    for args in [
        json!(["../../etc/passwd", "a.txt"]),
        json!(["-e", "../../etc/passwd", "a.txt"]),
        json!(["-h", "--", "../../etc/passwd", "a.txt"]),
    ] {
        let r = run(&cx, json!({"command": "/usr/bin/grep", "args": args})).await;
        assert_eq!(out(&r)["stdout"], "../../etc/passwd\n", "{args}: {r:?}");
    }
    for (args, want) in [
        // Operands after `--`, spelled as options or not, are confined like any path.
        (
            json!(["-n", "1", "--", "-d/../../outside/secret.txt"]),
            "outside every root",
        ),
        (
            json!(["-n", "1", "--", "../outside/secret.txt"]),
            "outside every root",
        ),
    ] {
        refused(&cx, json!({"command": "/usr/bin/head", "args": args}), want).await;
    }
    for (args, want) in [
        (
            json!(["-e", "x", "--", "-d/../../outside/secret.txt"]),
            "outside every root",
        ),
        (
            json!(["-f", "../outside/secret.txt", "a.txt"]),
            "outside every root",
        ),
        (
            json!(["x", "--", "../outside/secret.txt"]),
            "outside every root",
        ),
        (json!(["-e", "--", "-r", "."]), "not an allowed option"),
        // With -e given, the first operand is a file, not the pattern.
        (
            json!(["-e", "x", "../outside/secret.txt"]),
            "outside every root",
        ),
    ] {
        refused(&cx, json!({"command": "/usr/bin/grep", "args": args}), want).await;
    }
}

/// sed and awk allowlisted: ordinary scripts run; one that runs a program, writes or reads a
/// file is refused before anything runs, in every way a script can be given.
#[tokio::test]
async fn sed_and_awk_scripts_run_only_when_they_cannot_reach_out() {
    let tree = Tree::new();
    fs::write(tree.ws.join("a.txt"), "one 1\ntwo 2\n").unwrap();
    let marker = tree.ws.join("made");
    let mut rules = vec![rule(
        "/usr/bin/sed",
        &[],
        Some(&["-n", "-e", "-i", "--expression"]),
    )];
    for awk in ["/usr/bin/gawk", "/usr/bin/mawk"] {
        if std::path::Path::new(awk).exists() {
            rules.push(rule(awk, &[], Some(&["-F", "-v", "-e"])));
        }
    }
    let awks: Vec<String> = rules[1..].iter().map(|r| r.exe.clone()).collect();
    let cx = cx_with(&tree, rules);
    let r = run(
        &cx,
        json!({"command": "/usr/bin/sed", "args": ["-n", "s/one/ONE/p", "a.txt"]}),
    )
    .await;
    assert_eq!(out(&r)["stdout"], "ONE 1\n");
    let r = run(
        &cx,
        json!({"command": "/usr/bin/sed", "args": ["-i", "s/two/TWO/", "a.txt"]}),
    )
    .await;
    assert_eq!(out(&r)["exit_code"], 0, "{r:?}");
    assert_eq!(
        fs::read_to_string(tree.ws.join("a.txt")).unwrap(),
        "one 1\nTWO 2\n"
    );
    let touch = format!("touch {}", marker.display());
    for args in [
        json!(["-n", format!("1e {touch}"), "a.txt"]),
        json!([
            "-n",
            format!("1s/.*/{}/e", touch.replace('/', "\\/")),
            "a.txt"
        ]),
        json!([
            "-n",
            "-e",
            "p",
            "-e",
            format!("w {}", marker.display()),
            "a.txt"
        ]),
        json!([
            "--expression",
            format!("s/x/y/w {}", marker.display()),
            "a.txt"
        ]),
        json!(["-ne", format!("1e {touch}"), "a.txt"]),
        json!(["-n", "1r ../outside/secret.txt", "a.txt"]),
        json!(["-i../*", "s/a/b/", "a.txt"]),
    ] {
        let r = run(
            &cx,
            json!({"command": "/usr/bin/sed", "args": args.clone()}),
        )
        .await;
        assert!(matches!(r, Err(ToolError::Denied { .. })), "{args}: {r:?}");
    }
    for awk in &awks {
        let r = run(
            &cx,
            json!({"command": awk, "args": ["-F", " ", "$2 > 1 {print $1}", "a.txt"]}),
        )
        .await;
        assert_eq!(out(&r)["stdout"], "TWO\n", "{awk}: {r:?}");
        for program in [
            format!("BEGIN{{system(\"{touch}\")}}"),
            format!("BEGIN{{print \"x\" > \"{}\"}}", marker.display()),
            format!("BEGIN{{print \"{touch}\" | \"sh\"}}"),
            format!("BEGIN{{\"{touch}\" | getline}}"),
            "BEGIN{getline l < \"/etc/passwd\"; print l}".to_string(),
        ] {
            let r = run(&cx, json!({"command": awk, "args": [program.clone()]})).await;
            assert!(
                matches!(r, Err(ToolError::Denied { .. })),
                "{awk} {program}: {r:?}"
            );
        }
    }
    assert!(!marker.exists(), "a refused script ran");
}

/// Aether's reading of sed scripts against GNU sed's own: every script the reader finds
/// harmless runs under `sed --sandbox` (which refuses e/r/w), and every one where it finds
/// a command that runs, writes or reads is refused by it. Likewise awk programs against
/// `gawk --sandbox`.
#[test]
fn the_script_readers_agree_with_the_programs_sandboxes() {
    use aether_policy::scripts;
    use std::process::{Command, Stdio};
    let refused_by = |exe: &str, script: &str, sandbox_words: &[&str]| -> Option<bool> {
        let out = Command::new(exe)
            .args(["--sandbox", script])
            .stdin(Stdio::null())
            .env("LC_ALL", "C")
            .output()
            .ok()?;
        let err = String::from_utf8_lossy(&out.stderr);
        Some(sandbox_words.iter().any(|w| err.contains(w)))
    };
    let sed_scripts = [
        "p",
        "s/a/b/g",
        "s|a|b|gp",
        "1d;$d",
        "/x/I,+2p",
        "y/ab/ba/",
        "1{p;p\n}",
        ":a;N;ba",
        "a text e w",
        "1i\\\nhead",
        "s/[]]/x/",
        "l 5",
        "q 3",
        "e id",
        "1e id",
        "$!e id",
        "s/a/b/e",
        "s/a/b/ e",
        "s/a/b/3e",
        "w out",
        "1W out",
        "s/a/b/w out",
        "s/a/b/gw out",
        "r x",
        "R x",
        "p;e id",
        "p\ne id",
        "1{e id\n}",
        "a foo\ne id",
        "/x/!e id",
        "s,x,y,e",
        "sxaxbxe",
        "y/e/w/;w f",
        "b end;:end\nw f",
    ];
    for script in sed_scripts {
        let Ok(found) = scripts::sed(script) else {
            continue;
        };
        let Some(refused) = refused_by("/usr/bin/sed", script, &["disabled in sandbox mode"])
        else {
            return;
        };
        assert_eq!(
            refused,
            !found.is_empty(),
            "sed {script:?}: Aether found {found:?}, sed --sandbox refused: {refused}"
        );
    }
    if !std::path::Path::new("/usr/bin/gawk").exists() {
        return;
    }
    let awk_programs = [
        "BEGIN{print 1}",
        "BEGIN{x = 4 / 2; print x}",
        "BEGIN{if (1 > 0) print \"y\"}",
        "BEGIN{print (1 > 0)}",
        "BEGIN{system(\"true\")}",
        "BEGIN{print \"x\" > \"out\"}",
        "BEGIN{print \"x\" >> \"out\"}",
        "BEGIN{print \"x\" | \"cat\"}",
        "BEGIN{\"true\" | getline}",
        "BEGIN{getline l < \"/etc/hostname\"}",
        "BEGIN{printf(\"%s\", 1) > \"out\"}",
        "BEGIN{print 1,\n 2 > \"out\"}",
        "BEGIN{if (1) /x/; system(\"true\")}",
        "BEGIN{print > \"/dev/stderr\"}",
    ];
    for program in awk_programs {
        let Ok(found) = scripts::awk(program) else {
            continue;
        };
        let harmless_to_terminal = program.contains("/dev/stderr");
        let refused =
            refused_by("/usr/bin/gawk", program, &["not allowed in sandbox mode"]).unwrap();
        assert_eq!(
            refused && !harmless_to_terminal,
            !found.is_empty(),
            "gawk {program:?}: Aether found {found:?}, gawk --sandbox refused: {refused}"
        );
    }
}

/// The reading's tables against the programs installed here: an option said to take no
/// value (or one only glued) leaves the next argument to the program, which then rejects it
/// as an unknown option; one said to take a value swallows it.
#[test]
fn every_options_arity_is_the_one_the_program_has() {
    use aether_policy::argv::{Arity, known_options};
    use std::process::{Command, Stdio};
    const PROBE: &str = "--aether-probe-xyz";
    let programs: &[(&str, &str, &[&str])] = &[
        ("grep", "/usr/bin/grep", &[]),
        ("sed", "/usr/bin/sed", &[]),
        ("head", "/usr/bin/head", &[]),
        ("tail", "/usr/bin/tail", &[]),
        ("cat", "/usr/bin/cat", &[]),
        ("wc", "/usr/bin/wc", &[]),
        ("ls", "/usr/bin/ls", &[]),
        ("sort", "/usr/bin/sort", &[]),
        ("uniq", "/usr/bin/uniq", &[]),
        ("cut", "/usr/bin/cut", &[]),
        ("awk", "/usr/bin/gawk", &[]),
        ("git log", "/usr/bin/git", &["log"]),
        ("git status", "/usr/bin/git", &["status"]),
        ("git grep", "/usr/bin/git", &["grep"]),
        ("git ls-files", "/usr/bin/git", &["ls-files"]),
    ];
    let repo = tempfile::tempdir().unwrap();
    // A repository with a commit, for git log to get as far as its arguments.
    fs::write(repo.path().join("f"), "x\n").unwrap();
    for git in [
        &["init", "-q"][..],
        &["add", "f"],
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-qm",
            "x",
        ],
    ] {
        let _ = Command::new("git")
            .args(git)
            .current_dir(repo.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", repo.path())
            .status();
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (program, exe, before) in programs {
        if !std::path::Path::new(exe).exists() {
            continue;
        }
        // gawk reports no unknown option: the probe is a program that prints when it is
        // read as the program, which it is unless the option took it.
        let awk = *program == "awk";
        let probe = if awk {
            "BEGIN{print \"aether-probe-xyz\"}"
        } else {
            PROBE
        };
        for (option, arity) in known_options(program) {
            // Options that stop before reading on, that only other implementations have, or
            // (gawk's -e, -D) whose value is itself a program or a debugger session.
            if matches!(
                option.as_str(),
                "--help" | "--version" | "-V" | "-h" | "--usage"
            ) || (awk
                && [
                    "-W",
                    "-C",
                    "-g",
                    "-Y",
                    "-k",
                    "-I",
                    "--csv",
                    "--trace",
                    "-e",
                    "--source",
                    "-D",
                    "--debug",
                    "--copyright",
                    "--gen-pot",
                    "-o",
                    "--pretty-print",
                ]
                .contains(&option.as_str()))
                || (*program == "grep" && option == "-y")
                || (*program == "sed" && option == "--binary")
            {
                continue;
            }
            let out = Command::new(exe)
                .args(*before)
                .arg(&option)
                .arg(probe)
                .current_dir(repo.path())
                .stdin(Stdio::null())
                .env("LC_ALL", "C")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", repo.path())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
            let left = if awk {
                String::from_utf8_lossy(&out.stdout).contains("aether-probe-xyz")
            } else {
                err.contains("aether-probe-xyz")
                    && (err.contains("unrecognized")
                        || err.contains("unknown option")
                        || err.contains("invalid option")
                        || err.contains("not an option")
                        || err.contains("unknown switch"))
            };
            let said_left = arity != Arity::Required;
            // The option alone is an error (git log's bare --format, diff's --cached, which
            // the table shares with log): nothing runs, whatever follows.
            let refused_alone = err.contains(&format!("unrecognized argument: {option}"))
                || err.contains("requires exactly one pathspec");
            if left != said_left && !(said_left && refused_alone) {
                wrong.push(format!(
                    "{program} {option}: said {arity:?}, but the program {} the next argument: {}",
                    if left { "left" } else { "took" },
                    err.lines().next().unwrap_or("")
                ));
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        checked > 100 || !std::path::Path::new("/usr/bin/grep").exists(),
        "{checked}"
    );
}

/// The processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (text.contains(marker) && !stat.contains(") Z ")).then_some(text)
        })
        .collect()
}

/// An output flood is cut at the cap: the producer and everything it started are killed
/// when the cap is reached — the call returns long before its time limit, says why, keeps
/// the head and tail, and nothing of the tree is left.
#[tokio::test]
async fn an_output_flood_is_cut_at_the_cap_and_its_tree_killed() {
    let tree = Tree::new();
    let marker = format!("aether-flood-{}", std::process::id());
    // Two floods on both streams and a sleeper, started by a script that waits for them.
    let flood = script(
        &tree,
        "flood.sh",
        &format!(
            "/usr/bin/yes {marker}-out &\n/usr/bin/yes {marker}-err >&2 &\n\
             /bin/sh -c 'exec /bin/sleep 3599.75 {marker}-sleep' &\nwait"
        ),
    );
    let cx = cx_with(
        &tree,
        vec![rule(&flood, &[], None), rule("/usr/bin/yes", &[], None)],
    );
    for (command, args) in [
        (flood.as_str(), json!([])),
        ("/usr/bin/yes", json!([marker])),
    ] {
        let started = Instant::now();
        let r = run(
            &cx,
            json!({"command": command, "args": args, "timeout_seconds": 60}),
        )
        .await
        .unwrap();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(15), "{command}: took {took:?}");
        let v = r.structured.as_ref().unwrap();
        assert!(r.is_error, "a cut command is an error result");
        assert_eq!(v["output_capped"], true, "{v}");
        assert_eq!(v["timed_out"], false);
        assert_eq!(v["exit_code"], Value::Null);
        let written = v["stdout_bytes"].as_u64().unwrap() + v["stderr_bytes"].as_u64().unwrap();
        assert!(written >= 16 << 20, "{written}");
        let stdout = v["stdout"].as_str().unwrap();
        assert!(stdout.starts_with(&marker), "{}", &stdout[..80]);
        assert!(stdout.contains("bytes left out") && stdout.len() < 70_000);
        let text = match &r.content[0] {
            aether_tools::Content::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            text.contains("killed when its output reached 16 MiB"),
            "{}",
            &text[..200]
        );
    }
    // Nothing of either tree is left: not the floods, not the sleeper.
    let deadline = Instant::now() + Duration::from_secs(3);
    while !processes_with(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_with(&marker);
    assert!(left.is_empty(), "processes survived the cap: {left:?}");
}

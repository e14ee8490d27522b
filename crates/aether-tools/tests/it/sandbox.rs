//! `run_shell` in a real bubblewrap sandbox: what the shell sees (only the roots, credentials
//! and Aether's files covered, `.git` read-only), what it may write, the network, the whole
//! tree killed on timeout, the command log, and not being offered without a sandbox.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aether_policy::AgentProfile;
use aether_policy::paths::RootMode;
use aether_policy::shell::ShellSettings;
use aether_tools::shell::{RunShell, Sandbox};
use aether_tools::{CallContext, Roots, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::common::*;

/// Bubblewrap, which these tests need (scripts/test.sh installs it).
fn sandbox() -> Sandbox {
    let s = Sandbox::detect();
    if let Err(why) = s.ready() {
        panic!("run_shell's tests need a working bubblewrap: {why}");
    }
    s
}

struct Shell {
    tool: RunShell,
    cx: CallContext,
    log: Arc<MemoryLedger>,
}

/// A shell for an agent with `settings`, over the tree's root (`rw` or `ro`).
fn shell(tree: &Tree, settings: ShellSettings, mode: RootMode) -> Shell {
    shell_with(tree, settings, mode, false)
}

/// As [`shell`]; `aether_inside`: Aether's store, configuration and rules file are in the root.
fn shell_with(tree: &Tree, settings: ShellSettings, mode: RootMode, aether_inside: bool) -> Shell {
    let mut spec = spec("ws", &tree.ws);
    spec.mode = mode;
    let mut roots = Roots::open(&[spec]).unwrap();
    if aether_inside {
        roots.set_private([
            tree.ws.join(".aether"),
            tree.ws.join(".aether/aether.db"),
            tree.ws.join("aether.toml"),
            tree.ws.join("permissions.yaml"),
        ]);
    }
    let mut agent = AgentProfile::with_groups("builder", &["shell"]);
    agent.shell = Some(settings);
    let log = Arc::new(MemoryLedger::default());
    let cx = CallContext {
        agent: Arc::new(agent),
        roots: Arc::new(roots),
        ledger: log.clone(),
        ..tree.cx()
    };
    Shell {
        tool: RunShell::new(sandbox()),
        cx,
        log,
    }
}

impl Shell {
    async fn run(&self, args: Value) -> Result<ToolOutput, ToolError> {
        self.tool.call(self.cx.clone(), args).await
    }

    /// Runs `command` and returns its structured output.
    async fn out(&self, command: &str) -> Value {
        let r = self.run(json!({"command": command})).await;
        r.unwrap_or_else(|e| panic!("{command:?} did not run: {e}"))
            .structured
            .unwrap()
    }
}

fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

#[tokio::test]
async fn the_shell_sees_the_roots_and_nothing_else_of_the_machine() {
    let tree = Tree::new();
    tree.file("a.txt", "hello from the root\n");
    tree.link(tree.outside.join("secret.txt"), "link-out");
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    let outside = tree.outside.to_string_lossy();
    let v = sh
        .out(&format!(
            "cat a.txt; pwd; ls /; cat {outside}/secret.txt; cat link-out; ls /root; \
             cat /etc/shadow; cat /proc/1/environ | tr '\\0' '\\n' | head -3; \
             ls /proc | grep -c '^[0-9]'; id -un; env | cut -d= -f1 | sort | tr '\\n' ' '"
        ))
        .await;
    let out = stdout(&v);
    assert!(out.contains("hello from the root"), "{v}");
    assert!(out.contains(tree.ws.to_str().unwrap()), "cwd: {v}");
    assert!(
        !out.contains(SECRET),
        "a file outside the roots leaked: {v}"
    );
    let err = v["stderr"].as_str().unwrap();
    assert!(err.contains("/etc/shadow: No such file"), "{v}");
    assert!(err.contains("/root") && err.contains("No such file"), "{v}");
    // Its own PID namespace: a handful of processes (the sandbox's), not the machine's.
    let pids: usize = out
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .expect("a process count");
    assert!(pids < 10, "sees {pids} processes: {v}");
    assert!(out.contains("aether"), "runs as the sandbox's user: {v}");
    // Exactly the seven variables (bash adds PWD, SHLVL and _).
    let vars = out.lines().last().unwrap();
    for var in vars.split_whitespace() {
        assert!(
            [
                "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "TZ", "PWD", "SHLVL", "_",
                "OLDPWD"
            ]
            .contains(&var),
            "unexpected variable {var}: {vars}"
        );
    }
    assert_eq!(v["sandbox"], "bubblewrap");
}

#[tokio::test]
async fn credentials_aether_files_and_sockets_are_covered() {
    let tree = Tree::new();
    tree.file(".env", "API_KEY=dotenv-secret-1\n");
    tree.file("deploy/id_rsa", "ssh-secret-2\n");
    tree.file(".aws/credentials", "aws-secret-3\n");
    tree.file(".aether/aether.db", "store-secret-4\n");
    tree.file("aether.toml", "config-secret-5\n");
    tree.file(
        ".git/config",
        "[remote \"o\"]\nurl = https://user:git-secret-6@example.com/x\n",
    );
    tree.file(".git/HEAD", "ref: refs/heads/main\n");
    tree.file(".env.example", "API_KEY=\n");
    // A folder whose name is not UTF-8 still has its credentials covered.
    let odd = tree.ws.join(std::ffi::OsStr::from_bytes(b"conf\xff"));
    fs::create_dir(&odd).unwrap();
    fs::write(odd.join(".env"), "odd-secret-7\n").unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(tree.ws.join("agent.sock")).unwrap();
    let _git_socket =
        std::os::unix::net::UnixListener::bind(tree.ws.join(".git/fsmonitor.ipc")).unwrap();
    // A hard link to a file outside the root (another name of someone's key).
    let outside_key = tree.base.join("outside_key");
    fs::write(&outside_key, "linked-secret-8\n").unwrap();
    fs::hard_link(&outside_key, tree.ws.join("notes.txt")).unwrap();
    let sh = shell_with(&tree, ShellSettings::default(), RootMode::ReadWrite, true);
    let v = sh
        .out(
            "cat .env deploy/id_rsa .aws/credentials .aether/aether.db aether.toml .git/config conf*/.env notes.txt; \
             ls -A .aws .aether; test -S agent.sock && echo SOCKET-REACHABLE; \
             test -S .git/fsmonitor.ipc && echo GIT-SOCKET-REACHABLE; ls /etc/ssl; \
             cat .env.example",
        )
        .await;
    let all = format!("{}{}", stdout(&v), v["stderr"].as_str().unwrap());
    for secret in [
        "dotenv-secret-1",
        "ssh-secret-2",
        "aws-secret-3",
        "store-secret-4",
        "config-secret-5",
        "git-secret-6",
        "odd-secret-7",
        "linked-secret-8",
    ] {
        assert!(
            !all.contains(secret),
            "{secret} leaked into the shell: {all}"
        );
    }
    assert!(!all.contains("REACHABLE"), "{all}");
    assert!(
        !all.contains("private"),
        "/etc/ssl/private is not in the sandbox: {all}"
    );
    assert!(
        all.contains("API_KEY="),
        "a look-alike stays readable: {all}"
    );
    // The covers are the sandbox's: the files themselves are untouched.
    assert_eq!(
        fs::read_to_string(tree.ws.join(".env")).unwrap(),
        "API_KEY=dotenv-secret-1\n"
    );
}

#[tokio::test]
async fn a_root_holding_aethers_files_is_read_only_even_with_shell_writes() {
    // Otherwise a shell could write the rules file Aether reloads (approving its own calls
    // from then on), or a configuration, even one that does not exist yet.
    let tree = Tree::new();
    tree.file("aether.toml", "[roots.ws]\npath = \".\"\n");
    let sh = shell_with(
        &tree,
        ShellSettings {
            write: true,
            ..Default::default()
        },
        RootMode::ReadWrite,
        true,
    );
    let v = sh
        .out("printf 'rules: []\\n' > permissions.yaml; mv aether.toml old.toml; mkdir x")
        .await;
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{v}"
    );
    assert!(!tree.ws.join("permissions.yaml").exists());
    assert!(tree.ws.join("aether.toml").exists());
    assert!(!tree.ws.join("x").exists());
}

#[tokio::test]
async fn git_repositories_stay_read_only_and_new_ones_are_removed() {
    let tree = Tree::new();
    tree.file(".git/HEAD", "ref: refs/heads/main\n");
    tree.dir(".git/hooks");
    // A repository reached through a `.git` link, and a bare one.
    tree.dir("realgit/hooks");
    tree.file("realgit/HEAD", "ref: refs/heads/main\n");
    tree.link("../realgit", "linked/.git");
    tree.file("bare.git/HEAD", "ref: refs/heads/main\n");
    tree.dir("bare.git/objects");
    tree.dir("bare.git/refs");
    let settings = ShellSettings {
        write: true,
        read_only: vec![tree.ws.join("vendor").to_string_lossy().into_owned()],
        ..Default::default()
    };
    tree.dir("vendor");
    let sh = shell(&tree, settings, RootMode::ReadWrite);
    let v = sh
        .out(
            "echo new > made.txt && echo WROTE; \
             echo x > .git/hooks/pre-commit; echo x > linked/.git/hooks/pre-commit; \
             echo x > realgit/hooks/post-checkout; echo x > bare.git/config; \
             touch vendor/planted; \
             mkdir -p sub && cd sub && git init -q . && git config core.fsmonitor 'echo PWNED'; \
             cd .. && git init -q --bare made.git; echo done",
        )
        .await;
    let out = stdout(&v);
    assert!(out.contains("WROTE") && out.contains("done"), "{v}");
    assert_eq!(
        fs::read_to_string(tree.ws.join("made.txt")).unwrap(),
        "new\n"
    );
    for planted in [
        ".git/hooks/pre-commit",
        "realgit/hooks/post-checkout",
        "bare.git/config",
        "vendor/planted",
    ] {
        assert!(!tree.ws.join(planted).exists(), "{planted} was written");
    }
    // The repositories the command made are gone, and the result says so.
    assert!(!tree.ws.join("sub/.git").exists());
    assert!(!tree.ws.join("made.git").exists());
    assert!(tree.ws.join("sub").exists(), "only the repository goes");
    let r = sh.run(json!({"command": "true"})).await.unwrap();
    assert!(!r.is_error);
    let r = sh
        .run(json!({"command": "git init -q again"}))
        .await
        .unwrap();
    assert!(r.is_error, "a removed repository is reported");
    let text = match &r.content[1] {
        aether_tools::Content::Text(t) => t.clone(),
        other => panic!("{other:?}"),
    };
    assert!(text.contains("removed the git repositories"), "{text}");
    assert!(!tree.ws.join("again/.git").exists());
    // What was there before is untouched.
    assert!(tree.ws.join(".git/HEAD").exists());
    assert!(tree.ws.join("bare.git/HEAD").exists());
}

#[tokio::test]
async fn roots_are_read_only_unless_the_project_allows_shell_writes() {
    let tree = Tree::new();
    tree.file("keep.txt", "original\n");
    let cmd = "echo changed > keep.txt; touch new.txt; rm -f keep.txt; echo done";
    // Read-write root, no shell writes: read-only in the sandbox.
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadWrite);
    let v = sh.out(cmd).await;
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{v}"
    );
    assert_eq!(
        fs::read_to_string(tree.ws.join("keep.txt")).unwrap(),
        "original\n"
    );
    assert!(!tree.ws.join("new.txt").exists());
    // Shell writes allowed, but the root is `ro`: still read-only.
    let sh = shell(
        &tree,
        ShellSettings {
            write: true,
            ..Default::default()
        },
        RootMode::ReadOnly,
    );
    sh.out(cmd).await;
    assert_eq!(
        fs::read_to_string(tree.ws.join("keep.txt")).unwrap(),
        "original\n"
    );
    // /tmp is the sandbox's own, and writable.
    let v = sh.out("echo scratch > /tmp/x && cat /tmp/x").await;
    assert_eq!(stdout(&v), "scratch\n");
}

#[tokio::test]
async fn the_network_is_the_sandboxs_own_unless_allowed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let tree = Tree::new();
    let probe = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo CONNECTED || echo REFUSED"
    );
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    assert_eq!(stdout(&sh.out(&probe).await), "REFUSED\n");
    let sh = shell(
        &tree,
        ShellSettings {
            network: true,
            ..Default::default()
        },
        RootMode::ReadOnly,
    );
    assert_eq!(stdout(&sh.out(&probe).await), "CONNECTED\n");
}

#[tokio::test]
async fn a_timeout_kills_everything_the_shell_started() {
    let tree = Tree::new();
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    let marker = "1234.25";
    let started = std::time::Instant::now();
    let r = sh
        .run(json!({
            "command": format!("(setsid sleep {marker} &); nohup sleep {marker} & sleep {marker}"),
            "timeout_seconds": 1
        }))
        .await
        .unwrap();
    let v = r.structured.unwrap();
    assert_eq!(v["timed_out"], true, "{v}");
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left: Vec<PathBuf> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("cmdline"))
        .filter(|p| {
            fs::read(p)
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect();
    assert!(left.is_empty(), "processes survived: {left:?}");
}

#[tokio::test]
async fn an_output_flood_in_the_shell_is_cut_at_the_cap_with_its_tree() {
    let tree = Tree::new();
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    let marker = "aether-shell-flood-4242";
    let started = std::time::Instant::now();
    let r = sh
        .run(json!({
            "command": format!("(setsid yes {marker} >&2 &); yes {marker} & sleep 3599.5; wait"),
            "timeout_seconds": 60
        }))
        .await
        .unwrap();
    let v = r.structured.unwrap();
    assert_eq!(v["output_capped"], true, "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left: Vec<PathBuf> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|e| e.path().join("cmdline"))
        .filter(|p| {
            fs::read(p)
                .map(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains(marker) || c.contains("3599.5")
                })
                .unwrap_or(false)
        })
        .collect();
    assert!(left.is_empty(), "processes survived: {left:?}");
}

#[tokio::test]
async fn every_command_is_in_the_command_log_without_secrets() {
    let tree = Tree::new();
    tree.dir("sub");
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    let r = sh
        .run(json!({"command": "echo hi; exit 3", "cwd": "sub"}))
        .await
        .unwrap();
    assert!(r.is_error, "a non-zero exit is reported as an error");
    let key = ["AKIA", "IOSFODNN7", "EXAMPLQ"].concat();
    sh.out(&format!("echo {key} | wc -c")).await;
    let log = sh.log.commands();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].start.command, "echo hi; exit 3");
    assert_eq!(log[0].start.cwd, "sub");
    assert_eq!(log[0].start.tool, "run_shell");
    assert_eq!(log[0].start.sandbox, "bubblewrap");
    assert_eq!(log[0].start.agent, "builder");
    let end = log[0].end.as_ref().expect("the end is recorded");
    assert_eq!(end.exit_code, Some(3));
    assert!(!end.timed_out);
    assert!(
        !log[1].start.command.contains(&key) && log[1].start.command.contains("withheld"),
        "{:?}",
        log[1].start.command
    );
}

#[tokio::test]
async fn without_a_store_for_the_log_nothing_runs() {
    let tree = Tree::new();
    let marker = tree.ws.join("ran");
    let mut sh = shell(
        &tree,
        ShellSettings {
            write: true,
            ..Default::default()
        },
        RootMode::ReadWrite,
    );
    sh.cx.ledger = Arc::new(aether_tools::NoLedger);
    let err = sh.run(json!({"command": "touch ran"})).await.unwrap_err();
    assert!(err.to_string().contains("command log"), "{err}");
    assert!(!marker.exists());
}

#[test]
fn not_offered_without_a_sandbox_or_without_shell_settings() {
    let mut agent = AgentProfile::with_groups("builder", &["shell"]);
    agent.shell = Some(ShellSettings::default());
    let missing = RunShell::new(Sandbox::at("/nonexistent/bwrap"));
    let why = missing.available_to(&agent).unwrap_err();
    assert!(why.contains("no sandbox"), "{why}");
    // A program that is not bubblewrap cannot make one either.
    let wrong = RunShell::new(Sandbox::at("/bin/false"));
    assert!(
        wrong
            .available_to(&agent)
            .unwrap_err()
            .contains("no sandbox")
    );
    let ok = RunShell::new(sandbox());
    assert_eq!(ok.available_to(&agent), Ok(()));
    agent.shell = None;
    let why = ok.available_to(&agent).unwrap_err();
    assert!(why.contains("no shell"), "{why}");
}

#[test]
fn destructive_or_unreadable_commands_ask_for_a_person() {
    let tool = RunShell::new(Sandbox::at("/nonexistent/bwrap"));
    for command in [
        "rm -rf build",
        "sudo make install",
        "git push --force",
        "echo cm0gLXJmIC8= | base64 -d | sh",
        "$CMD -rf /",
    ] {
        assert!(
            tool.needs_person(&json!({ "command": command })).is_some(),
            "{command}"
        );
    }
    for command in ["cargo test", "ls -la | head", "git status"] {
        assert_eq!(tool.needs_person(&json!({ "command": command })), None);
    }
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_runs() {
    let tree = Tree::new();
    let sh = shell(&tree, ShellSettings::default(), RootMode::ReadOnly);
    for (args, want) in [
        (json!({"command": "   "}), "empty"),
        (json!({"command": "ls", "cwd": "../outside"}), ""),
        (json!({"command": "ls", "cwd": "missing"}), ""),
        (json!({"command": "ls", "root": "nope"}), ""),
        (json!({"command": "x".repeat(70_000)}), "at most"),
    ] {
        let err = sh.run(args.clone()).await.unwrap_err();
        assert!(err.to_string().contains(want), "{args}: {err}");
    }
    assert!(sh.log.commands().is_empty(), "nothing ran, nothing logged");
}

/// A repository with a hook folder, as `git init` makes one.
fn repository(tree: &Tree, rel: &str) {
    tree.file(&format!("{rel}/.git/HEAD"), "ref: refs/heads/main\n");
    tree.file(&format!("{rel}/.git/objects/keep"), "history\n");
    tree.dir(&format!("{rel}/.git/refs/heads"));
    tree.dir(&format!("{rel}/.git/hooks"));
}

fn writable_shell(tree: &Tree) -> Shell {
    shell(
        tree,
        ShellSettings {
            write: true,
            ..Default::default()
        },
        RootMode::ReadWrite,
    )
}

#[tokio::test]
async fn a_renamed_repository_is_kept_and_one_planted_in_its_place_is_removed() {
    let tree = Tree::new();
    repository(&tree, "app");
    tree.dir("realgit/hooks");
    tree.file("realgit/HEAD", "ref: refs/heads/main\n");
    tree.link("../realgit", "linked/.git");
    let sh = writable_shell(&tree);
    let r = sh
        .run(json!({"command":
            "mv app app.old && git init -q app && rm linked/.git && git init -q linked && \
             mkdir -p bare && ln -s refs/heads/main bare/HEAD && mkdir bare/objects bare/refs && \
             mkdir -p common && echo x > common/HEAD && echo ../app.old/.git > common/commondir"}))
        .await
        .unwrap();
    assert!(r.is_error, "removals are reported");
    let shown: Vec<String> = r.content.iter().map(|c| format!("{c:?}")).collect();
    let shown = shown.join("\n");
    // The real history moved with its folder and is kept.
    assert_eq!(
        fs::read_to_string(tree.ws.join("app.old/.git/objects/keep")).unwrap(),
        "history\n"
    );
    // What was planted, at old paths or new, is gone.
    for planted in ["app/.git", "linked/.git", "bare", "common"] {
        assert!(
            fs::symlink_metadata(tree.ws.join(planted)).is_err(),
            "{planted} was left: {shown}"
        );
    }
    assert!(tree.ws.join("app").is_dir(), "only the repository goes");
}

#[tokio::test]
async fn a_dropped_call_still_removes_the_repositories_it_made() {
    let tree = Tree::new();
    let sh = writable_shell(&tree);
    let call = sh.run(json!({"command": "git init -q dropped && sleep 30"}));
    assert!(
        tokio::time::timeout(Duration::from_secs(2), call)
            .await
            .is_err(),
        "the call was dropped while it ran"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tree.ws.join("dropped/.git").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the repository of a dropped call was left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn setuid_bits_set_in_the_sandbox_do_not_survive_it() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        // Only as root do files the sandbox owns belong to root outside; as any other user a
        // setuid file gives nothing that user does not have.
        eprintln!("not root: the setuid case does not arise");
        return;
    }
    let tree = Tree::new();
    let sh = writable_shell(&tree);
    sh.out("cp /bin/true x && chmod 4755 x && chmod 2755 x && cp /bin/true y && chmod u+s y")
        .await;
    for name in ["x", "y"] {
        let mode = fs::metadata(tree.ws.join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o6000, 0, "{name} kept mode {mode:o}");
    }
}

#[tokio::test]
async fn a_sealed_root_is_not_in_the_sandbox() {
    let tree = Tree::new();
    tree.file("spec.md", "sealed-text-9\n");
    let sh = shell(&tree, ShellSettings::default(), RootMode::Sealed);
    let command = format!(
        "cat spec.md; cat {}/spec.md; ls {}",
        tree.ws.display(),
        tree.ws.display()
    );
    // Its files are read only through the seal's check, which a program would skip.
    match sh.run(json!({"command": command})).await {
        Ok(out) => {
            let v = out.structured.unwrap();
            let all = format!("{}{}", stdout(&v), v["stderr"].as_str().unwrap_or_default());
            assert!(!all.contains("sealed-text-9"), "{all}");
            assert!(
                !all.contains("spec.md\n"),
                "the sealed root was listed: {all}"
            );
        }
        Err(e) => assert!(!e.to_string().contains("sealed-text-9"), "{e}"),
    }
}

/// Any Aether's control files (`aether.toml`, `permissions.yaml`), not only this process's:
/// a root holding one stays read-only with shell writes on, and in a writable root a control
/// file a command makes — any folder, any spelling — is set aside when it ends.
#[tokio::test]
async fn control_files_keep_a_root_read_only_and_new_ones_are_set_aside() {
    let write = || ShellSettings {
        write: true,
        ..Default::default()
    };
    let held = Tree::new();
    held.file("sub/permissions.yaml", "rules: []\n");
    let sh = shell(&held, write(), RootMode::ReadWrite);
    let v = sh
        .out("printf x > new.txt; printf 'rules: [x]' > sub/permissions.yaml; mv sub sub2")
        .await;
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{v}"
    );
    assert!(!held.ws.join("new.txt").exists());
    assert_eq!(
        fs::read_to_string(held.ws.join("sub/permissions.yaml")).unwrap(),
        "rules: []\n"
    );

    let open = Tree::new();
    let sh = shell(&open, write(), RootMode::ReadWrite);
    let v = sh
        .out(
            "printf x > new.txt; mkdir -p a/b; printf 'rules: []' > a/b/permissions.yaml; \
             printf x > AETHER.TOML; printf x > 'aether.toml.'; printf x > a/Permissions.Yaml",
        )
        .await;
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(open.ws.join("new.txt").exists(), "writes still land: {v}");
    for gone in [
        "a/b/permissions.yaml",
        "AETHER.TOML",
        "aether.toml.",
        "a/Permissions.Yaml",
    ] {
        assert!(!open.ws.join(gone).exists(), "{gone} is still there: {v}");
    }
    let aside: Vec<String> = fs::read_dir(open.ws.join("a/b"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        aside.len() == 1 && aside[0].starts_with("permissions.yaml.set-aside-by-aether-"),
        "{aside:?}"
    );
}

/// While programs may write in the roots, a control file that appears — in any folder, a new
/// one included, in any spelling, moved into place — or one put in place of one that was
/// there, is set aside at once; this process's own files and the ones that were there stay; a
/// link to a folder is never touched.
#[test]
fn the_guard_sets_aside_control_files_that_appear_and_nothing_else() {
    let tree = Tree::new();
    tree.file("deep/er/keep.txt", "x");
    tree.file("other/permissions.yaml", "rules: []\n# another project's\n");
    tree.file("permissions.yaml", "rules: []\n");
    tree.link(tree.ws.join("deep"), "link-to-deep");
    let ws = std::fs::canonicalize(&tree.ws).unwrap();
    let guard = aether_tools::shell::ControlGuard::start(
        vec![ws.clone()],
        vec![ws.join("permissions.yaml"), ws.join("aether.toml")],
    )
    .expect("the root is watched");
    std::thread::sleep(Duration::from_millis(100));
    for made in ["deep/er/permissions.yaml", "deep/AETHER.TOML"] {
        fs::write(ws.join(made), "rules: []\n").unwrap();
    }
    fs::create_dir_all(ws.join("new/folder")).unwrap();
    fs::write(ws.join("new/folder/permissions.yaml"), "rules: []\n").unwrap();
    // Nested folders made and filled faster than a watch can be added to each.
    let nested: Vec<String> = (0..40)
        .map(|i| format!("fast{i}/a/b/permissions.yaml"))
        .collect();
    for made in &nested {
        fs::create_dir_all(ws.join(made).parent().unwrap()).unwrap();
        fs::write(ws.join(made), "rules: []\n").unwrap();
    }
    fs::write(ws.join("deep/staged"), "[server]\n").unwrap();
    fs::rename(ws.join("deep/staged"), ws.join("deep/aether.toml")).unwrap();
    // Another project's rules, replaced by a rename (a new inode in its place).
    fs::write(ws.join("other/next"), "rules: []\n# replaced\n").unwrap();
    fs::rename(ws.join("other/next"), ws.join("other/permissions.yaml")).unwrap();
    // This process's own: the operator edits them.
    fs::write(ws.join("permissions.yaml"), "rules: []\n# edited\n").unwrap();
    fs::write(ws.join("aether.toml"), "[server]\n").unwrap();
    fs::write(ws.join("plain.yaml"), "x").unwrap();
    let gone = [
        "deep/er/permissions.yaml",
        "deep/AETHER.TOML",
        "new/folder/permissions.yaml",
        "deep/aether.toml",
        "other/permissions.yaml",
    ];
    let gone: Vec<&str> = gone
        .into_iter()
        .chain(nested.iter().map(String::as_str))
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while gone.iter().any(|f| ws.join(f).exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "still there: {:?}",
            gone.iter()
                .filter(|f| ws.join(f).exists())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    for kept in [
        "permissions.yaml",
        "aether.toml",
        "plain.yaml",
        "deep/er/keep.txt",
    ] {
        assert!(ws.join(kept).exists(), "{kept}");
    }
    assert!(
        ws.join("link-to-deep").is_symlink(),
        "a link is never set aside"
    );
    let aside: Vec<String> = fs::read_dir(ws.join("deep/er"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        aside
            .iter()
            .any(|n| n.starts_with("permissions.yaml.set-aside-by-aether-")),
        "{aside:?}"
    );
    drop(guard);
}

/// A covered file's folder cannot be renamed away in the sandbox a program runs in (so no
/// folder of the program's own, with a file of its own, takes its place).
#[tokio::test]
async fn a_covered_files_folder_cannot_be_moved_away_in_the_sandbox() {
    let s = sandbox();
    let bwrap = s.ready().unwrap().to_path_buf();
    let tree = Tree::new();
    tree.file("proj/permissions.yaml", "rules: []\n");
    let ws = std::fs::canonicalize(&tree.ws).unwrap();
    let mut args = aether_tools::shell::hiding(&[ws.join("proj/permissions.yaml")]);
    args.extend(
        [
            "--",
            "/bin/sh",
            "-c",
            "mv proj proj.old; mkdir -p proj; printf 'rules: [x]' > proj/permissions.yaml; \
             rm -rf proj; echo done",
        ]
        .map(std::ffi::OsString::from),
    );
    let out = std::process::Command::new(bwrap)
        .args(&args)
        .current_dir(&ws)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("busy") || stderr.contains("Busy"),
        "{stderr}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("proj/permissions.yaml")).unwrap(),
        "rules: []\n"
    );
    assert!(!ws.join("proj.old").exists());
}

/// A command's home or a process's pinned names left by a process that ended without removing
/// them (killed mid-command, or a short `aether` command that exits while its sandbox probe
/// runs) are swept when the next process's probe starts; a live process's are left alone.
#[test]
fn folders_left_by_ended_processes_are_swept_when_the_probe_starts() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let tmp = std::env::temp_dir();
    let left = [
        tmp.join(format!("aether-run-probe-{gone}-0-abc")),
        tmp.join(format!("aether-run-0193a5b2-77aa-7c1d-{gone}-3-ff")),
        tmp.join(format!("aether-pins-{gone}")),
    ];
    let live = tmp.join(format!("aether-run-probe-{}-99-abc", std::process::id()));
    for dir in left.iter().chain([&live]) {
        std::fs::create_dir_all(dir.join("empty.d")).unwrap();
        std::fs::write(dir.join("passwd"), "x").unwrap();
        let aged = std::process::Command::new("touch")
            .args(["-d", "25 hours ago"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(aged.success());
    }
    Sandbox::at("/bin/false").start_probe();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while left.iter().any(|d| d.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kept = live.exists();
    let _ = std::fs::remove_dir_all(&live);
    assert!(left.iter().all(|d| !d.exists()), "{left:?}");
    assert!(kept, "a live process's folder was swept");
}

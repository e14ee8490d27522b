//! The quality tools: `run_tests` (finds the project's test runner — cargo, pytest, npm/jest
//! or node's own, go, dotnet — runs it inside `run_shell`'s sandbox, and reads the pass, fail
//! and skip counts and the failing tests' names from its output) and `analyze_code` (picks a
//! linter by the file's extension where one is installed, and says plainly when none is).
//!
//! Both run only where `run_shell` runs (a sandbox, and a project with shell settings): a test
//! suite is code the agent may have written, and runs as confined as any shell command.

use std::path::Path;

use aether_policy::ArgumentKinds;
use aether_policy::tool::groups;
use aether_policy::{AgentProfile, Risk, Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::process;
use super::run_shell::RunShell;
use super::sandbox::Sandbox;
use crate::{CallContext, Content, Tool, ToolError, ToolOutput, parse_args, schema_of};

/// What a test run came to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    /// The failing tests' names (at most 100).
    pub failures: Vec<String>,
    /// Whether the counts were found in the output (else the exit code is all there is).
    pub parsed: bool,
}

fn number_before(text: &str, word: &str) -> Option<u64> {
    // "12 passed" -> 12
    let at = text.find(word)?;
    text[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
}

fn number_after(text: &str, word: &str) -> Option<u64> {
    // "Passed: 3" / "# pass 3" -> 3
    let at = text.find(word)? + word.len();
    text[at..]
        .trim_start_matches([':', ' '])
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
}

fn push(failures: &mut Vec<String>, name: &str) {
    let name = name.trim();
    if !name.is_empty() && failures.len() < 100 && !failures.iter().any(|f| f == name) {
        failures.push(name.to_string());
    }
}

/// Reads a runner's output.
pub fn tally(runner: &str, output: &str) -> Tally {
    let mut t = Tally::default();
    match runner {
        "cargo" => {
            for line in output.lines() {
                let l = line.trim();
                if let Some(rest) = l.strip_prefix("test result:") {
                    t.parsed = true;
                    t.passed += number_before(rest, " passed").unwrap_or(0);
                    t.failed += number_before(rest, " failed").unwrap_or(0);
                    t.skipped += number_before(rest, " ignored").unwrap_or(0);
                } else if let Some(name) = l
                    .strip_prefix("test ")
                    .and_then(|r| r.strip_suffix(" ... FAILED"))
                {
                    push(&mut t.failures, name);
                }
            }
        }
        "pytest" => {
            for line in output.lines() {
                let l = line.trim().trim_matches('=').trim();
                if (l.contains(" passed") || l.contains(" failed") || l.contains(" skipped"))
                    && l.contains(" in ")
                {
                    t.parsed = true;
                    t.passed = number_before(l, " passed").unwrap_or(0);
                    t.failed = number_before(l, " failed").unwrap_or(0)
                        + number_before(l, " error").unwrap_or(0);
                    t.skipped = number_before(l, " skipped").unwrap_or(0);
                }
                if let Some(name) = line.strip_prefix("FAILED ") {
                    push(&mut t.failures, name.split(" - ").next().unwrap_or(name));
                }
            }
        }
        "npm" => {
            for line in output.lines() {
                let l = line.trim();
                // jest: "Tests:       1 failed, 2 passed, 3 total"
                if let Some(rest) = l.strip_prefix("Tests:") {
                    t.parsed = true;
                    t.passed = number_before(rest, " passed").unwrap_or(0);
                    t.failed = number_before(rest, " failed").unwrap_or(0);
                    t.skipped = number_before(rest, " skipped").unwrap_or(0)
                        + number_before(rest, " todo").unwrap_or(0);
                } else if let Some(n) = l
                    .strip_prefix("# pass ")
                    .or_else(|| l.strip_prefix("ℹ pass "))
                {
                    t.parsed = true;
                    t.passed = n.trim().parse().unwrap_or(0);
                } else if let Some(n) = l
                    .strip_prefix("# fail ")
                    .or_else(|| l.strip_prefix("ℹ fail "))
                {
                    t.failed = n.trim().parse().unwrap_or(0);
                } else if let Some(n) = l
                    .strip_prefix("# skipped ")
                    .or_else(|| l.strip_prefix("ℹ skipped "))
                {
                    t.skipped = n.trim().parse().unwrap_or(0);
                } else if let Some(rest) = l.strip_prefix("not ok ") {
                    // node --test (TAP): "not ok 2 - name"
                    push(
                        &mut t.failures,
                        rest.split_once(" - ").map(|(_, n)| n).unwrap_or(rest),
                    );
                } else if let Some(name) = l.strip_prefix("✕ ") {
                    push(
                        &mut t.failures,
                        name.rsplit_once(" (").map(|(n, _)| n).unwrap_or(name),
                    );
                }
            }
        }
        "go" => {
            for line in output.lines() {
                let l = line.trim();
                if let Some(rest) = l.strip_prefix("--- PASS: ") {
                    t.parsed = true;
                    let _ = rest;
                    t.passed += 1;
                } else if let Some(rest) = l.strip_prefix("--- FAIL: ") {
                    t.parsed = true;
                    t.failed += 1;
                    push(&mut t.failures, rest.split(' ').next().unwrap_or(rest));
                } else if l.starts_with("--- SKIP: ") {
                    t.parsed = true;
                    t.skipped += 1;
                }
            }
        }
        "dotnet" => {
            for line in output.lines() {
                let l = line.trim();
                if (l.starts_with("Passed!") || l.starts_with("Failed!")) && l.contains("Failed:") {
                    t.parsed = true;
                    t.failed += number_after(l, "Failed:").unwrap_or(0);
                    t.passed += number_after(l, "Passed:").unwrap_or(0);
                    t.skipped += number_after(l, "Skipped:").unwrap_or(0);
                } else if let Some(name) = l.strip_prefix("Failed ") {
                    push(&mut t.failures, name.split(" [").next().unwrap_or(name));
                }
            }
        }
        _ => {}
    }
    t
}

/// The project's test runner in `dir`, and the command that runs it.
pub fn detect(dir: &Path) -> Option<(&'static str, &'static str)> {
    let has = |name: &str| dir.join(name).is_file();
    if has("Cargo.toml") {
        return Some(("cargo", "cargo test --no-fail-fast 2>&1"));
    }
    if has("go.mod") {
        return Some(("go", "go test -v ./... 2>&1"));
    }
    if has("package.json") {
        return Some(("npm", "npm test --silent 2>&1"));
    }
    if has("pytest.ini")
        || has("pyproject.toml")
        || has("setup.cfg")
        || has("tox.ini")
        || has("conftest.py")
    {
        return Some(("pytest", "python3 -m pytest -q -rf 2>&1"));
    }
    let dotnet = std::fs::read_dir(dir).ok().is_some_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.ends_with(".sln") || n.ends_with(".csproj") || n.ends_with(".fsproj")
        })
    });
    if dotnet {
        return Some(("dotnet", "dotnet test 2>&1"));
    }
    None
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TestArgs {
    /// The project's folder, relative to the root (default: the root).
    cwd: Option<String>,
    /// Name of the root (default: the first).
    root: Option<String>,
    /// Seconds before the run is stopped (1-300, default 240).
    #[schemars(range(min = 1, max = 300))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct TestOut {
    /// The runner found: cargo, pytest, npm, go or dotnet.
    runner: String,
    command: String,
    exit_code: Option<i32>,
    timed_out: bool,
    #[serde(flatten)]
    tally: Tally,
    /// The end of the runner's output.
    output_tail: String,
}

fn quality_def(name: &str, title: &str, description: &str, input: Value, output: Value) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: title.into(),
        group: groups::QUALITY.into(),
        tier: Tier::Elevated,
        description: description.into(),
        input_schema: input,
        output_schema: output,
        arguments: Default::default(),
        meta: ToolMeta {
            risk: Risk::Medium,
            ..ToolMeta::local_writer()
        },
    }
}

pub struct RunTests {
    def: ToolDef,
    shell: RunShell,
}

impl RunTests {
    pub fn new(sandbox: Sandbox) -> RunTests {
        RunTests {
            def: quality_def(
                "run_tests",
                "Run the tests",
                "Run the project's tests (cargo, pytest, npm/jest or node --test, go, dotnet: found from the project's files) inside the shell sandbox, and get the pass, fail and skip counts and the failing tests' names.",
                schema_of::<TestArgs>(),
                schema_of::<TestOut>(),
            )
            .declaring(ArgumentKinds::paths(&["cwd"])),
            shell: RunShell::new(sandbox),
        }
    }
}

/// Runs `command` through `run_shell` (its sandbox, command log and limits).
async fn in_shell(
    shell: &RunShell,
    cx: CallContext,
    command: &str,
    root: Option<&str>,
    cwd: Option<&str>,
    timeout: u64,
) -> Result<(Option<i32>, bool, String), ToolError> {
    let mut args = json!({"command": command, "timeout_seconds": timeout});
    if let Some(r) = root {
        args["root"] = json!(r);
    }
    if let Some(c) = cwd {
        args["cwd"] = json!(c);
    }
    let out = shell.call(cx, args).await?;
    let s = out.structured.unwrap_or_default();
    Ok((
        s["exit_code"].as_i64().map(|c| c as i32),
        s["timed_out"].as_bool().unwrap_or(false),
        s["stdout"].as_str().unwrap_or_default().to_string(),
    ))
}

#[async_trait]
impl Tool for RunTests {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        self.shell.available_to(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: TestArgs = parse_args(args)?;
        let folder = process::working_folder(&cx, a.root.as_deref(), a.cwd.as_deref())?;
        let Some((runner, command)) = detect(&folder.path) else {
            return Err(ToolError::InvalidArguments(format!(
                "no test runner found in {}:{} (looked for Cargo.toml, go.mod, package.json, pytest.ini, pyproject.toml, setup.cfg, tox.ini, conftest.py, *.sln, *.csproj)",
                folder.root.name,
                if folder.rel.is_empty() {
                    "."
                } else {
                    &folder.rel
                }
            )));
        };
        let (exit_code, timed_out, output) = in_shell(
            &self.shell,
            cx,
            command,
            a.root.as_deref(),
            a.cwd.as_deref(),
            a.timeout_seconds.unwrap_or(240).clamp(1, 300),
        )
        .await?;
        let tally = tally(runner, &output);
        let tail: String = {
            let lines: Vec<&str> = output.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        let verdict = if timed_out {
            "the run was stopped at its time limit".to_string()
        } else if tally.parsed {
            format!(
                "{} passed, {} failed, {} skipped{}",
                tally.passed,
                tally.failed,
                tally.skipped,
                if tally.failures.is_empty() {
                    String::new()
                } else {
                    format!("; failing: {}", tally.failures.join(", "))
                }
            )
        } else {
            format!(
                "the counts were not found in the output; the runner exited with {}",
                exit_code.map(|c| c.to_string()).unwrap_or("no code".into())
            )
        };
        // Failing tests are the run's result, not the tool's failure: the counts and names
        // are in the structured result either way.
        let out = TestOut {
            runner: runner.into(),
            command: command.into(),
            exit_code,
            timed_out,
            tally,
            output_tail: tail,
        };
        Ok(ToolOutput {
            content: vec![Content::Text(format!("{runner}: {verdict}"))],
            structured: Some(serde_json::to_value(out).map_err(ToolError::failed)?),
            is_error: false,
        })
    }
}

/// The linters tried for a file's extension, in order: (program, arguments before the path).
fn linters(extension: &str) -> &'static [(&'static str, &'static [&'static str])] {
    match extension {
        "py" => &[("ruff", &["check"]), ("pyflakes", &[]), ("flake8", &[])],
        "js" | "mjs" | "cjs" | "ts" | "tsx" | "jsx" => &[("eslint", &[]), ("node", &["--check"])],
        "sh" | "bash" => &[("shellcheck", &[]), ("bash", &["-n"])],
        "go" => &[("gofmt", &["-l"]), ("go", &["vet"])],
        "rb" => &[("rubocop", &[]), ("ruby", &["-wc"])],
        "json" => &[("python3", &["-m", "json.tool"])],
        _ => &[],
    }
}

/// Whether `program` is on the PATH the sandbox sees (`/usr/bin`, `/bin`, `/usr/local/bin`).
fn installed(program: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(program).is_file())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AnalyzeArgs {
    /// The file, relative to the root.
    #[schemars(length(min = 1, max = 4096))]
    path: String,
    /// Name of the root (default: the first).
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct AnalyzeOut {
    /// The linter that ran (None: none is installed for this kind of file).
    linter: Option<String>,
    /// The linters Aether knows for this kind of file.
    known: Vec<String>,
    exit_code: Option<i32>,
    /// Whether the linter found nothing.
    clean: bool,
    findings: String,
}

pub struct AnalyzeCode {
    def: ToolDef,
    shell: RunShell,
}

impl AnalyzeCode {
    pub fn new(sandbox: Sandbox) -> AnalyzeCode {
        AnalyzeCode {
            def: quality_def(
                "analyze_code",
                "Analyze code",
                "Check one file with a linter chosen by its extension (ruff/pyflakes/flake8, eslint or node --check, shellcheck or bash -n, gofmt/go vet, rubocop or ruby -wc, json.tool) where one is installed; says plainly when none is.",
                schema_of::<AnalyzeArgs>(),
                schema_of::<AnalyzeOut>(),
            )
            .declaring(ArgumentKinds::paths(&["path"])),
            shell: RunShell::new(sandbox),
        }
    }
}

/// A path argument as shell text: single-quoted, so nothing in it is shell syntax.
fn quoted(path: &str) -> String {
    format!("'{}'", path.replace('\'', r"'\''"))
}

#[async_trait]
impl Tool for AnalyzeCode {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        self.shell.available_to(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let a: AnalyzeArgs = parse_args(args)?;
        // The file's folder is found as every command's working folder is (inside a root, on
        // its real path, not Aether's own); the file must be a regular file in it.
        let rel = Path::new(&a.path);
        let (dir, name) = match (rel.parent(), rel.file_name()) {
            (Some(d), Some(n)) => (
                d.to_string_lossy().into_owned(),
                n.to_string_lossy().into_owned(),
            ),
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                    "{:?} names no file",
                    a.path
                )));
            }
        };
        let folder = process::working_folder(&cx, a.root.as_deref(), Some(&dir))?;
        let is_file = std::fs::symlink_metadata(folder.path.join(&name))
            .map(|m| m.file_type().is_file())
            .unwrap_or(false);
        if !is_file {
            return Err(ToolError::InvalidArguments(format!(
                "{} is not a regular file",
                folder.root.display(&a.path)
            )));
        }
        let (root_name, dir_rel) = (folder.root.name.clone(), folder.rel.clone());
        let path = name;
        let extension = Path::new(&path)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let known: Vec<String> = linters(&extension)
            .iter()
            .map(|(p, _)| p.to_string())
            .collect();
        let Some((program, pre)) = linters(&extension).iter().find(|(p, _)| installed(p)) else {
            let text = if known.is_empty() {
                format!("Aether knows no linter for .{extension} files, so nothing was checked.")
            } else {
                format!(
                    "No linter for .{extension} files is installed here (Aether would use {}), so nothing was checked.",
                    known.join(", ")
                )
            };
            return Ok(ToolOutput {
                content: vec![Content::Text(text)],
                structured: Some(
                    serde_json::to_value(AnalyzeOut {
                        linter: None,
                        known,
                        exit_code: None,
                        clean: false,
                        findings: String::new(),
                    })
                    .map_err(ToolError::failed)?,
                ),
                is_error: false,
            });
        };
        // `./NAME`: a file named like an option (`--rulesdir=x.js`) is never read as one.
        let command = format!(
            "{program} {}{}{} 2>&1",
            pre.join(" "),
            if pre.is_empty() { "" } else { " " },
            quoted(&format!("./{path}"))
        );
        let cwd = (!dir_rel.is_empty()).then_some(dir_rel.as_str());
        let (exit_code, _, output) =
            in_shell(&self.shell, cx, &command, Some(&root_name), cwd, 120).await?;
        let clean = exit_code == Some(0) && (program != &"gofmt" || output.trim().is_empty());
        let text = if clean {
            format!("{program}: nothing found in {path}")
        } else {
            format!("{program} on {path}:\n{output}")
        };
        Ok(ToolOutput {
            content: vec![Content::Text(text)],
            structured: Some(
                serde_json::to_value(AnalyzeOut {
                    linter: Some(program.to_string()),
                    known,
                    exit_code,
                    clean,
                    findings: output,
                })
                .map_err(ToolError::failed)?,
            ),
            is_error: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runners_counts_and_failures_are_read() {
        let cargo = "running 3 tests\ntest a::works ... ok\ntest a::breaks ... FAILED\ntest a::later ... ignored\n\ntest result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(
            tally("cargo", cargo),
            Tally {
                passed: 1,
                failed: 1,
                skipped: 1,
                failures: vec!["a::breaks".into()],
                parsed: true
            }
        );
        let pytest = "..F.s\nFAILED tests/test_a.py::test_b - assert 1 == 2\n==== 1 failed, 3 passed, 1 skipped in 0.12s ====\n";
        let t = tally("pytest", pytest);
        assert_eq!((t.passed, t.failed, t.skipped), (3, 1, 1));
        assert_eq!(t.failures, ["tests/test_a.py::test_b"]);
        let node = "TAP version 13\nok 1 - adds\nnot ok 2 - breaks\n# tests 3\n# pass 1\n# fail 1\n# skipped 1\n";
        let t = tally("npm", node);
        assert_eq!((t.passed, t.failed, t.skipped), (1, 1, 1));
        assert_eq!(t.failures, ["breaks"]);
        let jest = "  ✕ breaks (3 ms)\nTests:       1 failed, 2 passed, 3 total\n";
        let t = tally("npm", jest);
        assert_eq!((t.passed, t.failed), (2, 1));
        assert_eq!(t.failures, ["breaks"]);
        let go = "=== RUN   TestA\n--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)\n--- SKIP: TestC (0.00s)\nFAIL\n";
        let t = tally("go", go);
        assert_eq!((t.passed, t.failed, t.skipped), (1, 1, 1));
        assert_eq!(t.failures, ["TestB"]);
        let dotnet = "  Failed Tests.Math.Breaks [3 ms]\nFailed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3\n";
        let t = tally("dotnet", dotnet);
        assert_eq!((t.passed, t.failed, t.skipped), (2, 1, 0));
        assert_eq!(t.failures, ["Tests.Math.Breaks"]);
        assert!(!tally("cargo", "error: could not compile").parsed);
    }

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(quoted("a b.py"), "'a b.py'");
        assert_eq!(quoted("x'; rm -rf ~; '.sh"), r"'x'\''; rm -rf ~; '\''.sh'");
    }
}

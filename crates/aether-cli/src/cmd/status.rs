//! `aether status` and `aether doctor`: what a server started here would run with (the
//! configuration, the store, the rules file, roots, agents and what each reaches, the
//! sandbox, upstreams) and what the store says now (approvals waiting, halt, accounts,
//! tokens), then every problem found with its fix. Reads only: it never makes a store, a key
//! or a rules file. `doctor` is the same report, exiting 1 when a problem is found.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use aether_policy::config::HttpAuth;
use aether_policy::paths::RootMode;
use aether_store::{Access, Store};
use anyhow::Result;
use clap::Args as ClapArgs;
use serde_json::{Value, json};

use crate::setup::{self, Common};

#[derive(ClapArgs, Debug)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    /// The report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// A problem, and what to do about it.
struct Problem {
    problem: String,
    fix: String,
}

/// The report as it is gathered: its sections in order, and the problems found.
#[derive(Default)]
struct Report {
    sections: Vec<(&'static str, Vec<String>)>,
    json: serde_json::Map<String, Value>,
    problems: Vec<Problem>,
}

impl Report {
    fn section(&mut self, title: &'static str, lines: Vec<String>, json: Value) {
        self.json.insert(title.to_lowercase(), json);
        self.sections.push((title, lines));
    }

    fn problem(&mut self, problem: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    fn print(self, as_json: bool) -> usize {
        let found = self.problems.len();
        if as_json {
            let mut json = self.json;
            let problems = self.problems.iter();
            let problems: Vec<Value> = problems
                .map(|p| json!({"problem": p.problem, "fix": p.fix}))
                .collect();
            json.insert("problems".into(), Value::Array(problems));
            let _ = crate::json_line(&Value::Object(json));
            return found;
        }
        let width = self
            .sections
            .iter()
            .map(|(t, _)| t.len())
            .max()
            .unwrap_or(0)
            + 2;
        for (title, lines) in &self.sections {
            for (i, line) in lines.iter().enumerate() {
                let label = if i == 0 { *title } else { "" };
                say!("{label:<width$}{line}");
            }
        }
        say!();
        if self.problems.is_empty() {
            say!("No problems found.");
        }
        for (i, p) in self.problems.iter().enumerate() {
            say!("Problem {}: {}", i + 1, p.problem);
            say!("  Fix: {}", p.fix);
        }
        found
    }
}

pub async fn run(args: Args, doctor: bool) -> Result<ExitCode> {
    let mut report = Report::default();
    let found = match gather(&args, &mut report).await {
        Ok(()) => report.print(args.json),
        Err(e) => {
            // The configuration itself does not load: that is the one problem to report.
            report.problem(
                format!("{e:#}"),
                "correct the configuration (each problem names its key), then run `aether status` again",
            );
            report.print(args.json)
        }
    };
    Ok(if doctor && found > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn gather(args: &Args, report: &mut Report) -> Result<()> {
    let loaded = setup::load(&args.common)?;
    let file = loaded.file.as_ref().map(|f| f.display().to_string());
    report.section(
        "Configuration",
        vec![match &file {
            Some(f) => f.clone(),
            None => format!(
                "the embedded default (no aether.toml in {})",
                loaded.base.display()
            ),
        }],
        json!({"file": file, "base": loaded.base.display().to_string()}),
    );
    let store = store_section(args, &loaded, report);
    rules_section(&loaded, report);
    let roots = setup::roots(&[], &loaded, true)?;
    roots_section(&loaded, &roots, report);
    agents_section(&loaded, report);
    listen_section(&loaded, report);
    sandbox_section(&loaded, report).await;
    let Some(store) = store else {
        upstreams_section(&loaded, None, report).await;
        return Ok(());
    };
    upstreams_section(&loaded, Some(&store), report).await;
    state_sections(&loaded, &store, report).await;
    Ok(())
}

/// The store in use, opened for reading when it is there.
fn store_section(args: &Args, loaded: &setup::Loaded, report: &mut Report) -> Option<Store> {
    let url = setup::store_url(&args.common, loaded, &loaded.base);
    let shown = aether_store::redact_url(&url);
    let missing = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .filter(|path| !Path::new(path).exists());
    if missing.is_some() {
        // Not a problem: the first server here makes it.
        report.section(
            "Store",
            vec![format!(
                "{shown} (not made yet: the first `aether serve` or `aether mcp-serve` here makes it)"
            )],
            json!({"url": shown, "exists": false}),
        );
        return None;
    }
    match Store::open(&url, Access::ReadOnly) {
        Ok(store) => {
            report.section(
                "Store",
                vec![shown.clone()],
                json!({"url": shown, "exists": true}),
            );
            Some(store)
        }
        Err(e) => {
            report.section(
                "Store",
                vec![format!("{shown} (cannot be opened)")],
                json!({"url": shown, "exists": true, "error": e.to_string()}),
            );
            report.problem(
                format!("the store {shown} cannot be opened: {e}"),
                "check that it is reachable and that this user may read it (--store names another)",
            );
            None
        }
    }
}

/// The operator's rules file, read as a server would (never made here).
fn rules_section(loaded: &setup::Loaded, report: &mut Report) {
    let (path, required) = setup::rules_path(loaded);
    let shown = path.display().to_string();
    let there = std::fs::symlink_metadata(&path).is_ok();
    let line = match (there, required) {
        (false, true) => {
            report.problem(
                format!("policy.rules names {shown}, which is not there: no server starts"),
                "write it (`rules: []` is a file with no rules of its own), or leave policy.rules out",
            );
            format!("{shown} (named by policy.rules, not there)")
        }
        (false, false) => format!("none ({shown} is not there: no rules of the operator's)"),
        (true, _) => match aether_pipeline::Rules::load(&path, required) {
            Ok(_) => shown.clone(),
            Err(e) => {
                report.problem(
                    format!("the rules file does not load: {e}"),
                    format!("`aether policy check {shown}` names each mistake; correct them"),
                );
                format!("{shown} (does not load)")
            }
        },
    };
    report.section(
        "Rules",
        vec![line],
        json!({"file": shown, "exists": there, "required": required}),
    );
}

fn roots_section(
    loaded: &setup::Loaded,
    roots: &[aether_policy::paths::RootSpec],
    report: &mut Report,
) {
    let width = roots.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for r in roots {
        let mode = match r.mode {
            RootMode::ReadWrite => "rw",
            RootMode::ReadOnly => "ro",
            RootMode::Sealed => "sealed",
        };
        let folder = Path::new(&r.path).is_dir();
        lines.push(format!("{:<width$}  {mode:<6}  {}", r.name, r.path));
        json.push(json!({"name": r.name, "path": r.path, "mode": mode, "exists": folder}));
        if !folder {
            let key = if loaded.raw.roots.contains_key(&r.name) {
                format!("roots.{}.path", r.name)
            } else {
                "the root".into()
            };
            report.problem(
                format!("root {}: {} is not a folder", r.name, r.path),
                format!("make the folder, or correct {key}"),
            );
        }
    }
    report.section("Roots", lines, Value::Array(json));
}

/// Each agent with the groups it reaches and the built-in tools it is offered.
fn agents_section(loaded: &setup::Loaded, report: &mut Report) {
    // As a server builds them: the models and the search engine configured decide whether
    // the orchestration tools and web_search are offered.
    let host = aether_runner::Host::new(setup::models(loaded));
    let tools = setup::tools_for(
        false,
        loaded.raw.research.searxng_url.as_deref(),
        host,
        None,
    );
    let group_of = |name: &str| {
        tools
            .iter()
            .find(|t| t.def().name == name)
            .map(|t| t.def().group.as_str())
    };
    let profiles = loaded.raw.agent_profiles();
    let width = profiles.keys().map(String::len).max().unwrap_or(0);
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for (name, profile) in &profiles {
        let groups = profile.groups(group_of);
        let offered: Vec<String> = tools
            .iter()
            .filter(|t| {
                matches!(
                    profile.offer(t.def(), &groups),
                    aether_policy::Offer::Offered
                ) && t.available_to(profile).is_ok()
            })
            .map(|t| t.def().name.clone())
            .collect();
        let upstream_groups: Vec<&String> = groups
            .iter()
            .filter(|g| !aether_policy::tool::groups::BUILT_IN.contains(&g.as_str()))
            .collect();
        let mut line = format!(
            "{name:<width$}  {} tool{}: {}",
            offered.len(),
            if offered.len() == 1 { "" } else { "s" },
            if offered.is_empty() {
                "none".to_string()
            } else {
                offered.join(", ")
            }
        );
        if !upstream_groups.is_empty() {
            line.push_str(&format!(
                "; and upstream group{} {}",
                if upstream_groups.len() == 1 { "" } else { "s" },
                upstream_groups
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        lines.push(line);
        json.push(json!({
            "name": name,
            "groups": groups,
            "tools": offered,
            "approval": profile.approval,
        }));
        if offered.is_empty() && upstream_groups.is_empty() {
            report.problem(
                format!("agent {name} is offered no tool"),
                format!("give agents.{name} mcp_servers (groups) or tools that exist"),
            );
        }
    }
    report.section("Agents", lines, Value::Array(json));
}

fn listen_section(loaded: &setup::Loaded, report: &mut Report) {
    let server = &loaded.raw.server;
    let agent = &server.http_agent;
    let (auth, who) = match server.auth {
        HttpAuth::Auto if loaded.raw.auth.enabled() => {
            ("auto", "every caller brings a token".to_string())
        }
        HttpAuth::Auto => (
            "auto",
            format!("callers on loopback act as {agent} until a token exists"),
        ),
        HttpAuth::Token => ("token", "every caller brings a token".into()),
        HttpAuth::OAuth => (
            "oauth",
            "every caller brings an OAuth access token ([auth])".into(),
        ),
        HttpAuth::None => ("none", format!("every caller acts as {agent}")),
    };
    report.section(
        "HTTP",
        vec![format!(
            "{} (aether serve), auth {auth}: {who}",
            server.listen
        )],
        json!({"listen": server.listen, "auth": auth, "agent": server.http_agent}),
    );
}

/// Whether programs can be covered here, and whether anything configured needs them to be.
async fn sandbox_section(loaded: &setup::Loaded, report: &mut Report) {
    let sandbox = aether_tools::shell::Sandbox::detect();
    let answer = sandbox.probed().await.map(|p| p.display().to_string());
    let line = match &answer {
        Ok(path) => format!("bubblewrap ({path}) works: run_shell and stdio upstreams run covered"),
        Err(why) => why.clone(),
    };
    if let Err(why) = &answer {
        let shells: Vec<&String> = loaded
            .raw
            .projects
            .iter()
            .filter(|(_, p)| p.shell.is_some())
            .map(|(name, _)| name)
            .collect();
        let uncovered: Vec<&String> = loaded
            .raw
            .upstreams
            .iter()
            .filter(|(_, u)| u.command.is_some() && !u.uncovered)
            .map(|(name, _)| name)
            .collect();
        if !shells.is_empty() {
            report.problem(
                format!("run_shell is configured (projects {shells:?}) but {why}"),
                "install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces",
            );
        }
        if !uncovered.is_empty() {
            report.problem(
                format!("stdio upstreams {uncovered:?} do not start: {why}"),
                "install bubblewrap (apt-get install bubblewrap), or set uncovered = true on an upstream you trust to read Aether's files",
            );
        }
    }
    report.section(
        "Sandbox",
        vec![line],
        json!({"available": answer.is_ok(), "detail": answer.unwrap_or_else(|e| e)}),
    );
}

/// Configured upstreams, with their state as the store last recorded it.
async fn upstreams_section(loaded: &setup::Loaded, store: Option<&Store>, report: &mut Report) {
    let statuses = match store {
        Some(store) => store.upstream_statuses().await.unwrap_or_default(),
        None => Vec::new(),
    };
    let names: BTreeSet<&String> = loaded
        .raw
        .upstreams
        .keys()
        .chain(statuses.iter().map(|s| &s.name))
        .collect();
    if names.is_empty() {
        report.section("Upstreams", vec!["none configured".into()], json!([]));
        return;
    }
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for name in names {
        let configured = loaded.raw.upstreams.contains_key(name);
        let status = statuses.iter().find(|s| &s.name == name);
        let state = match (status, configured) {
            (None, _) => "not seen yet (no server has run with it)".to_string(),
            (Some(s), _) => format!(
                "{} {}, {} tools",
                s.transport,
                if s.connected { "connected" } else { "down" },
                s.tool_count
            ),
        };
        let note = if configured {
            ""
        } else {
            " (no longer in the configuration)"
        };
        lines.push(format!("{name:<width$}  {state}{note}"));
        json.push(json!({
            "name": name,
            "configured": configured,
            "connected": status.map(|s| s.connected),
            "tools": status.map(|s| s.tool_count),
            "last_error": status.and_then(|s| s.last_error.clone()),
        }));
        if let Some(s) = status
            && configured
            && !s.connected
        {
            report.problem(
                format!(
                    "upstream {name} is down{}",
                    s.last_error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ),
                format!(
                    "check upstreams.{name} (its command or url); `aether sources refresh {name}` tries again"
                ),
            );
        }
    }
    // A credential an upstream names that the vault does not hold.
    if let Some(store) = store {
        let held: BTreeSet<String> = store
            .vault_names()
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for (name, u) in &loaded.raw.upstreams {
            let named = u.credential.iter().chain(u.env_credentials.values());
            for credential in named.filter(|c| !held.contains(*c)) {
                report.problem(
                    format!("upstream {name} needs the credential {credential:?}, which the vault does not hold"),
                    format!("aether credentials set {credential} (it reads the secret from stdin)"),
                );
            }
        }
    }
    report.section("Upstreams", lines, Value::Array(json));
}

/// What the store says now: definitions waiting for approval, calls waiting for a person, the
/// halt, console accounts and agent tokens.
async fn state_sections(loaded: &setup::Loaded, store: &Store, report: &mut Report) {
    let now = aether_store::now_us();
    let waiting = store
        .approvals(true, 500)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.request.expires_at_us > now)
        .count();
    report.section(
        "Approvals",
        vec![match waiting {
            0 => "no call is waiting for a person".into(),
            n => format!(
                "{n} call{} waiting: aether approvals list",
                if n == 1 { "" } else { "s" }
            ),
        }],
        json!({"waiting": waiting}),
    );
    let unapproved: Vec<String> = store
        .registry()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.state == aether_policy::RegistryState::Unapproved)
        .map(|r| r.name)
        .collect();
    report.section(
        "Registry",
        vec![match unapproved.len() {
            0 => "every definition seen is approved or withdrawn".into(),
            n => format!(
                "{n} definition{} not approved: {}",
                if n == 1 { "" } else { "s" },
                unapproved.join(", ")
            ),
        }],
        json!({"unapproved": unapproved}),
    );
    if !unapproved.is_empty() {
        report.problem(
            format!(
                "{} tool definition{} not approved, so no agent is offered {}",
                unapproved.len(),
                if unapproved.len() == 1 { " is" } else { "s are" },
                if unapproved.len() == 1 { "it" } else { "them" }
            ),
            "review them (aether registry show NAME), then aether registry approve NAME --why \"...\"",
        );
    }
    match store.halt_state().await {
        Ok(h) if h.halted => {
            report.section(
                "Halt",
                vec![format!(
                    "HALTED by {}: {}",
                    h.by.as_deref().unwrap_or("?"),
                    h.why.as_deref().unwrap_or("")
                )],
                json!({"halted": true, "by": h.by, "why": h.why, "at_us": h.at_us}),
            );
            report.problem(
                "every call is refused: an operator halted Aether",
                "aether resume --why \"...\" once it is safe",
            );
        }
        Ok(_) => report.section("Halt", vec!["not halted".into()], json!({"halted": false})),
        Err(e) => report.section(
            "Halt",
            vec![format!("unknown: {e}")],
            json!({"error": e.to_string()}),
        ),
    }
    let accounts = store.accounts().await.map(|a| a.len()).unwrap_or(0);
    let tokens = store
        .tokens()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|(t, _)| t.revoked_at_us.is_none() && t.kind == aether_store::TokenKind::Agent)
        .count();
    report.section(
        "People",
        vec![
            match accounts {
                0 => "no console account yet: `aether serve` prints a one-time setup link".into(),
                n => format!("{n} console account{}", if n == 1 { "" } else { "s" }),
            },
            format!(
                "{tokens} agent token{} in force",
                if tokens == 1 { "" } else { "s" }
            ),
        ],
        json!({"accounts": accounts, "tokens": tokens}),
    );
    let server = &loaded.raw.server;
    let off_loopback =
        aether_policy::config::listen_address(&server.listen).is_ok_and(|a| !a.ip().is_loopback());
    if tokens == 0 && !loaded.raw.auth.enabled() && (server.auth == HttpAuth::Token || off_loopback)
    {
        report.problem(
            "HTTP callers need a token and none exists: every /mcp request is refused",
            format!(
                "aether tokens create --agent {} (shown once; give it to the client)",
                server.http_agent
            ),
        );
    }
}

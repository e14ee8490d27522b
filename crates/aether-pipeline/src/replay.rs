//! Replaying past calls against a draft of the rules: which audited decisions the draft would
//! change. Shared by `aether policy replay` and the console's Policy page.

use std::collections::BTreeMap;

use aether_policy::rules::{CallFacts, RuleSet, Verdict};
use aether_policy::{AgentProfile, ArgumentKinds};
use aether_store::{AuditQuery, AuditRecord, Store, StoreError};
use serde::Serialize;
use serde_json::Value;

/// One audited call whose decision the draft would change.
#[derive(Clone, Debug, Serialize)]
pub struct Changed {
    pub seq: i64,
    pub call_id: String,
    pub at_us: i64,
    pub agent: String,
    pub tool: String,
    pub outcome: String,
    pub before: String,
    pub after: String,
    /// False when the audit kept only a summary of the arguments (Standard tools): rules on
    /// arguments, paths and hosts could not see them.
    pub arguments_complete: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Tool calls replayed.
    pub calls: usize,
    /// Of those, with their arguments cut in the audit.
    pub incomplete: usize,
    pub changed: Vec<Changed>,
}

/// A verdict in words.
pub fn describe(v: Option<Verdict<'_>>) -> String {
    match v {
        None => "no rule (the tier decides)".into(),
        Some(v) => format!("{} by rule {:?}", v.action.as_str(), v.rule),
    }
}

/// Replays every tool call audited since `since_us` against `current` and `draft`; `roots`
/// are (name, path) pairs for making absolute paths relative.
pub async fn replay(
    store: &Store,
    current: &RuleSet,
    draft: &RuleSet,
    since_us: i64,
    roots: &[(String, String)],
    agents: &BTreeMap<String, AgentProfile>,
) -> Result<Report, StoreError> {
    let mut report = Report::default();
    let declared = declarations(store).await?;
    let undeclared = ArgumentKinds::none();
    let mut after = None;
    loop {
        let rows = store
            .audit_query(AuditQuery {
                after,
                since_us: Some(since_us),
                limit: 5_000,
                ..Default::default()
            })
            .await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.seq);
        for row in &rows {
            if !replayable(row) {
                continue;
            }
            report.calls += 1;
            let e = &row.event;
            let arguments: Value = serde_json::from_str(&e.arguments).unwrap_or(Value::Null);
            if arguments.is_null() {
                report.incomplete += 1;
            }
            let kinds = declared.get(&e.tool).unwrap_or(&undeclared);
            let paths = replay_paths(kinds, &arguments, roots);
            let hosts = kinds.hosts_in(&arguments);
            let team = e
                .team
                .clone()
                .or_else(|| agents.get(&e.agent).and_then(|a| a.team.clone()));
            let facts = CallFacts {
                tool: &e.tool,
                agent: &e.agent,
                team: team.as_deref(),
                arguments: &arguments,
                paths: &paths,
                // The files may have changed since; only what the call named is judged.
                dirs: &[],
                hosts: &hosts,
            };
            let (before, now) = (current.evaluate(&facts), draft.evaluate(&facts));
            let same = match (&before, &now) {
                (None, None) => true,
                (Some(a), Some(b)) => a.action == b.action && a.rule == b.rule,
                _ => false,
            };
            if same {
                continue;
            }
            report.changed.push(Changed {
                seq: row.seq,
                call_id: e.call_id.clone(),
                at_us: e.at_us,
                agent: e.agent.clone(),
                tool: e.tool.clone(),
                outcome: e.outcome.clone(),
                before: describe(before),
                after: describe(now),
                arguments_complete: !arguments.is_null(),
            });
        }
    }
    Ok(report)
}

/// Each tool's declaration of its path, URL, host and command arguments, as the registry
/// keeps its definition (one kept before declarations existed: what its schema says).
async fn declarations(store: &Store) -> Result<BTreeMap<String, ArgumentKinds>, StoreError> {
    Ok(store
        .registry()
        .await?
        .into_iter()
        .filter_map(|row| {
            let def: aether_policy::ToolDef = serde_json::from_str(&row.definition).ok()?;
            let kinds = match def.arguments.is_empty() {
                true => ArgumentKinds::from_schema(&def.input_schema),
                false => def.arguments,
            };
            Some((row.name, kinds))
        })
        .collect())
}

/// Tool calls (not operator actions, not unknown tools, not reads) are what rules judge.
fn replayable(row: &AuditRecord) -> bool {
    let e = &row.event;
    e.transport != "operator"
        && e.definition.is_some()
        && e.step.as_deref() != Some("mcp-tool-not-implemented")
}

/// The paths of a replayed call, relative to their root (lexically: the files may have
/// changed since).
fn replay_paths(
    kinds: &ArgumentKinds,
    arguments: &Value,
    roots: &[(String, String)],
) -> Vec<String> {
    let (_, named) = kinds.paths_in(arguments);
    named
        .into_iter()
        .filter_map(|p| {
            if p.starts_with('/') {
                roots.iter().find_map(|(_, path)| {
                    aether_policy::paths::strip_root(p, path).map(str::to_string)
                })
            } else {
                aether_policy::paths::clean_relative(p).ok()
            }
        })
        .collect()
}

//! Agents and the two static layers of the permission model.
//!
//! The *connection* layer decides which groups of tools an agent can reach: its `mcp_servers`
//! list, plus the group of every tool its `tools` list names (so naming a tool brings its
//! group), or, with no `mcp_servers` at all, just the groups its tools imply. The *capability*
//! layer narrows to the `tools` list when there is one. Supervisors always keep `delegate` and
//! `reply`. A tool hidden by either layer is never shown to the agent and never run for it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tool::ToolDef;

/// Who decides an agent's calls that wait for a person.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalRoute {
    /// An operator, in the console, the admin API or `aether approvals`.
    #[default]
    Operator,
    /// The person at the agent's MCP client, asked through MCP elicitation (falls back to an
    /// operator when the client cannot be asked).
    Elicit,
}

/// Tools a supervisor keeps whatever its lists say: they are control flow, not work.
pub const SUPERVISOR_TOOLS: [&str; 2] = ["delegate", "reply"];

/// Who is calling, as configured by the operator. Never built from tool arguments.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentProfile {
    pub name: String,
    pub team: Option<String>,
    pub project: Option<String>,
    /// Group keys this agent may reach; `None` means "derive from `tools`".
    pub mcp_servers: Option<BTreeSet<String>>,
    /// Tool names this agent may use; `None` means every tool of its groups.
    pub tools: Option<BTreeSet<String>>,
    pub supervisor: bool,
    /// Hosts this agent's network tools may reach (exact, or `*.` suffix).
    pub allowed_domains: Vec<String>,
    /// Whether its network tools may reach loopback, private and link-local addresses (off:
    /// the egress gate refuses them, whatever a name resolves to).
    pub allow_private_network: bool,
    /// Per-tool argument defaults, filled in where the caller left an argument out.
    pub arg_defaults: BTreeMap<String, Map<String, Value>>,
    /// What `run_command` may run for this agent: its project's allowlist.
    pub commands: Vec<crate::commands::CommandRule>,
    /// Whether and how `run_shell` runs for this agent: its project's shell settings.
    pub shell: Option<crate::shell::ShellSettings>,
    /// Who decides this agent's calls that wait for a person.
    pub approval: ApprovalRoute,
    /// Knowledge packs it searches (its own and its team's).
    pub knowledge_packs: Vec<String>,
    /// Its rate limits (none by default).
    #[serde(skip_serializing_if = "RateLimits::is_empty")]
    pub rates: RateLimits,
}

/// Calls per window (`"120/min"`): a rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub calls: u64,
    pub window_us: i64,
}

impl Rate {
    /// `N/s`, `N/min`, `N/h` or `N/day` (also `sec`, `second`, `minute`, `hour`, `d`), N from
    /// 1 to 1,000,000.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = || {
            format!("{text:?} is not a rate: calls per window, like \"120/min\" (s, min, h or day)")
        };
        let (calls, window) = text.split_once('/').ok_or_else(bad)?;
        let calls: u64 = calls
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=1_000_000).contains(n))
            .ok_or_else(bad)?;
        let window_us = match window.trim() {
            "s" | "sec" | "second" => 1_000_000,
            "min" | "minute" => 60_000_000,
            "h" | "hour" => 3_600_000_000,
            "d" | "day" => 86_400_000_000,
            _ => return Err(bad()),
        };
        Ok(Rate { calls, window_us })
    }

    /// The window's name: second, minute, hour or day.
    pub fn window_name(&self) -> &'static str {
        match self.window_us {
            1_000_000 => "second",
            60_000_000 => "minute",
            3_600_000_000 => "hour",
            _ => "day",
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.window_us {
            1_000_000 => "s",
            60_000_000 => "min",
            3_600_000_000 => "h",
            _ => "day",
        };
        write!(f, "{}/{unit}", self.calls)
    }
}

/// An agent's rate limits (`[agents.NAME] rate`, `rate_per_caller`, `rates`, `concurrent`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RateLimits {
    /// Calls per window by the agent, all its callers together.
    pub rate: Option<Rate>,
    /// Calls per window by each of its callers (each person of an OAuth token, each static
    /// token; callers without a token count as their agent).
    pub per_caller: Option<Rate>,
    /// Calls per window of one tool by the agent.
    pub per_tool: BTreeMap<String, Rate>,
    /// The agent's calls in flight at once.
    pub concurrent: Option<u32>,
}

impl RateLimits {
    pub fn is_empty(&self) -> bool {
        self.rate.is_none()
            && self.per_caller.is_none()
            && self.per_tool.is_empty()
            && self.concurrent.is_none()
    }
}

impl AgentProfile {
    /// This agent's egress policy (`crate::egress`): its allowed domains, whether it may
    /// reach private networks. An invalid allowed domain is an error naming the agent.
    pub fn egress(&self) -> Result<crate::egress::EgressPolicy, String> {
        crate::egress::EgressPolicy::for_agent(
            &self.name,
            &self.allowed_domains,
            self.allow_private_network,
        )
    }

    /// The knowledge scopes this agent searches: its packs, its team's, its project's, its
    /// own (from its identity and the operator's configuration, never a call's arguments).
    pub fn knowledge_scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = self
            .knowledge_packs
            .iter()
            .map(|p| format!("pack:{p}"))
            .collect();
        scopes.extend(self.team.as_ref().map(|t| format!("team:{t}")));
        scopes.extend(self.project.as_ref().map(|p| format!("project:{p}")));
        scopes.push(format!("agent:{}", self.name));
        scopes.sort();
        scopes.dedup();
        scopes
    }

    /// Where this agent's own knowledge is written: its team's scope, else its own.
    pub fn knowledge_home(&self) -> String {
        match &self.team {
            Some(t) => format!("team:{t}"),
            None => format!("agent:{}", self.name),
        }
    }
}

/// Why a tool is not in an agent's catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "because", rename_all = "snake_case")]
pub enum Hidden {
    /// The registry has never approved it.
    Unapproved,
    /// An operator withdrew it.
    Withdrawn,
    /// It was approved, but its definition has changed since.
    DefinitionChanged,
    /// The connection layer: the agent cannot reach this group.
    GroupNotAllowed { group: String },
    /// The capability layer: the agent's `tools` list leaves it out.
    NotInToolList,
    /// An operator's `always_deny` rule refuses every call of it by this agent.
    DeniedByRule { rule: String },
    /// The tool can do nothing for this agent (say, `run_command` with no allowed command).
    Unavailable { why: String },
    /// The caller's OAuth token has no scope that grants this tool (the agent reaches it).
    OutOfScope { scopes: Vec<String> },
}

impl Hidden {
    pub fn explain(&self, tool: &str, agent: &str) -> String {
        match self {
            Hidden::Unapproved => format!("tool {tool:?} is not approved in the registry"),
            Hidden::Withdrawn => format!("tool {tool:?} has been withdrawn by an operator"),
            Hidden::DefinitionChanged => format!(
                "tool {tool:?} changed since it was approved; an operator must approve the new definition"
            ),
            Hidden::GroupNotAllowed { group } => format!(
                "agent {agent:?} is not connected to the {group:?} group that tool {tool:?} belongs to"
            ),
            Hidden::NotInToolList => {
                format!("tool {tool:?} is not in agent {agent:?}'s tool list")
            }
            Hidden::DeniedByRule { rule } => {
                format!("the operator's rule {rule:?} denies tool {tool:?} to agent {agent:?}")
            }
            Hidden::Unavailable { why } => format!("tool {tool:?} is not available: {why}"),
            Hidden::OutOfScope { scopes } if scopes.is_empty() => format!(
                "tool {tool:?} is not granted by the access token's scopes, and no scope grants it"
            ),
            Hidden::OutOfScope { scopes } => format!(
                "tool {tool:?} is not granted by the access token's scopes; a token with scope {} may call it",
                scopes.join(" or ")
            ),
        }
    }
}

/// What an OAuth access token's scopes let it reach of its agent's tools (`[auth.scopes]`):
/// a tool is in reach when any one of its scopes grants it. The agent's own allowlists still
/// apply on top.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeReach {
    /// The token's scopes that `[auth.scopes]` maps, each with what it grants.
    pub grants: Vec<ScopeGrant>,
    /// Every configured scope of the same agent, for telling a caller which one it lacks.
    pub others: Vec<ScopeGrant>,
}

/// One scope's grant: only these groups and these tools, where set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeGrant {
    pub scope: String,
    pub groups: Option<BTreeSet<String>>,
    pub tools: Option<BTreeSet<String>>,
}

impl ScopeGrant {
    pub fn grants(&self, tool: &ToolDef) -> bool {
        self.groups.as_ref().is_none_or(|g| g.contains(&tool.group))
            && self.tools.as_ref().is_none_or(|t| t.contains(&tool.name))
    }
}

impl ScopeReach {
    /// The groups whose upstream resources and prompts the token reaches: those its scopes
    /// grant whole (a scope limited to some tools grants no upstream's data). `None`: every
    /// group the agent reaches.
    pub fn groups(&self) -> Option<BTreeSet<String>> {
        let mut groups = BTreeSet::new();
        for g in self.grants.iter().filter(|g| g.tools.is_none()) {
            match &g.groups {
                None => return None,
                Some(list) => groups.extend(list.iter().cloned()),
            }
        }
        Some(groups)
    }

    /// Whether the token may call `tool`; if not, the scopes that would let it.
    pub fn check(&self, tool: &ToolDef) -> Result<(), Hidden> {
        if self.grants.iter().any(|g| g.grants(tool)) {
            return Ok(());
        }
        Err(Hidden::OutOfScope {
            scopes: self
                .others
                .iter()
                .filter(|g| g.grants(tool))
                .map(|g| g.scope.clone())
                .collect(),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Offer {
    Offered,
    Hidden(Hidden),
}

impl AgentProfile {
    /// A profile that reaches the given groups and nothing else.
    pub fn with_groups(name: &str, groups: &[&str]) -> AgentProfile {
        AgentProfile {
            name: name.to_string(),
            team: None,
            project: None,
            mcp_servers: Some(groups.iter().map(|g| g.to_string()).collect()),
            tools: None,
            supervisor: false,
            allowed_domains: Vec::new(),
            allow_private_network: false,
            arg_defaults: BTreeMap::new(),
            commands: Vec::new(),
            shell: None,
            approval: Default::default(),
            knowledge_packs: Vec::new(),
            rates: RateLimits::default(),
        }
    }

    /// The connection layer: every group this agent reaches, given how to find a tool's group.
    pub fn groups<'a>(&self, group_of: impl Fn(&str) -> Option<&'a str>) -> BTreeSet<String> {
        let mut groups = self.mcp_servers.clone().unwrap_or_default();
        for tool in self.tools.iter().flatten() {
            if let Some(group) = group_of(tool) {
                groups.insert(group.to_string());
            }
        }
        groups
    }

    /// Both static layers for one tool, given this agent's groups from [`AgentProfile::groups`].
    pub fn offer(&self, tool: &ToolDef, groups: &BTreeSet<String>) -> Offer {
        if self.supervisor && SUPERVISOR_TOOLS.contains(&tool.name.as_str()) {
            return Offer::Offered;
        }
        if !groups.contains(&tool.group) {
            return Offer::Hidden(Hidden::GroupNotAllowed {
                group: tool.group.clone(),
            });
        }
        match &self.tools {
            Some(list) if !list.contains(&tool.name) => Offer::Hidden(Hidden::NotInToolList),
            _ => Offer::Offered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Tier, ToolMeta};
    use serde_json::json;

    fn tool(name: &str, group: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: name.into(),
            group: group.into(),
            tier: Tier::Standard,
            description: "a tool used by these tests only".into(),
            input_schema: json!({"type": "object"}),
            output_schema: json!({"type": "object"}),
            arguments: Default::default(),
            meta: ToolMeta::read_only(),
        }
    }

    fn catalog() -> Vec<ToolDef> {
        vec![
            tool("read_file", "workspace"),
            tool("run_shell", "shell"),
            tool("todo", "planning"),
            tool("reply", "orchestration"),
            tool("delegate", "orchestration"),
        ]
    }

    fn offered(agent: &AgentProfile) -> Vec<String> {
        let cat = catalog();
        let groups = agent.groups(|n| cat.iter().find(|t| t.name == n).map(|t| t.group.as_str()));
        cat.iter()
            .filter(|t| agent.offer(t, &groups) == Offer::Offered)
            .map(|t| t.name.clone())
            .collect()
    }

    #[test]
    fn group_allowlist_alone() {
        let a = AgentProfile::with_groups("a", &["workspace"]);
        assert_eq!(offered(&a), ["read_file"]);
    }

    #[test]
    fn a_named_tool_brings_its_group() {
        let mut a = AgentProfile::with_groups("a", &["workspace"]);
        a.tools = Some(["read_file".to_string(), "todo".to_string()].into());
        assert_eq!(offered(&a), ["read_file", "todo"]);
    }

    #[test]
    fn no_mcp_servers_derives_groups_from_tools() {
        let mut a = AgentProfile::with_groups("a", &[]);
        a.mcp_servers = None;
        a.tools = Some(["run_shell".to_string()].into());
        assert_eq!(offered(&a), ["run_shell"]);
    }

    #[test]
    fn tool_list_narrows_a_group() {
        let mut a = AgentProfile::with_groups("a", &["workspace", "shell"]);
        a.tools = Some(["read_file".to_string()].into());
        assert_eq!(offered(&a), ["read_file"]);
        let cat = catalog();
        let groups = a.groups(|n| cat.iter().find(|t| t.name == n).map(|t| t.group.as_str()));
        assert_eq!(
            a.offer(&cat[1], &groups),
            Offer::Hidden(Hidden::NotInToolList)
        );
    }

    #[test]
    fn supervisors_always_keep_delegate_and_reply() {
        let mut a = AgentProfile::with_groups("lead", &["workspace"]);
        a.tools = Some(["read_file".to_string()].into());
        a.supervisor = true;
        assert_eq!(offered(&a), ["read_file", "reply", "delegate"]);
    }
}

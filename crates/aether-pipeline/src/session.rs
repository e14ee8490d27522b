//! The session context: who is calling, built by the transport from what it authenticated.

use std::collections::BTreeSet;
use std::sync::Arc;

use aether_policy::AgentProfile;

/// The transport a session arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    Http,
    /// Aether calling itself (tests, the agent runner).
    InProcess,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::InProcess => "in-process",
        }
    }
}

/// Everything the pipeline knows about the caller. Never built from tool arguments.
#[derive(Clone, Debug)]
pub struct SessionContext {
    pub session_id: String,
    pub transport: Transport,
    pub agent: Arc<AgentProfile>,
    /// The connection layer's answer for this agent: the groups it reaches.
    pub groups: Arc<BTreeSet<String>>,
    /// Who the caller acts for, when it presented an OAuth access token (its subject); kept
    /// in every audit row of the session beside the agent.
    pub subject: Option<String>,
    /// What the caller's OAuth token's scopes reach of the agent's tools (`None`: all, as for
    /// static tokens, stdio and in-process callers).
    pub scope: Option<Arc<aether_policy::ScopeReach>>,
    /// The id of the static agent token the caller brought (HTTP), for what is counted per
    /// caller (`rate_per_caller`).
    pub token: Option<String>,
}

impl SessionContext {
    /// Who the session acts for, as one name: see [`owner`].
    pub fn owner(&self) -> String {
        owner(&self.agent.name, self.subject.as_deref())
    }

    /// The caller, as rate limits count callers: the person of an OAuth token, else the static
    /// token brought, else the agent (stdio, the runner, a loopback caller without a token).
    pub fn caller(&self) -> String {
        match (&self.subject, &self.token) {
            (Some(_), _) | (None, None) => self.owner(),
            (None, Some(token)) => format!("{} by token {token}", self.agent.name),
        }
    }
}

/// Who a caller acts for, as one name: its agent, or, for an OAuth token, the agent and the
/// person (`coder for alice`). Agent names have no spaces, so neither reads as the other. What
/// one owner keeps (an MCP session, an idempotency key's result, open listen streams) is not
/// another's.
pub fn owner(agent: &str, subject: Option<&str>) -> String {
    match subject {
        Some(subject) => format!("{agent} for {subject}"),
        None => agent.to_string(),
    }
}

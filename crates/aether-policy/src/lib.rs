//! Aether's vocabulary and its pure policy: what a tool is, who an agent is, what a decision
//! looks like, and the configuration as the operator wrote it.
//!
//! This crate does no IO and knows no async runtime, no SQL, no MCP. Everything here is a
//! function of its inputs, so the rules that decide what an agent may see and run can be read
//! and tested in isolation. The crates around it (`aether-tools`, `aether-store`,
//! `aether-pipeline`, `aether-server`) depend on it; it depends on none of them.

pub mod agent;
pub mod arguments;
pub mod argv;
pub mod canon;
pub mod commands;
pub mod config;
pub mod decision;
pub mod definition_screen;
pub mod dlp;
pub mod egress;
pub mod journal;
pub mod models;
pub mod paths;
pub mod registry;
pub mod roles;
pub mod rules;
pub mod scripts;
pub mod shell;
pub mod tool;
pub mod truncate;

/// A name an operator or agent chooses for a thing Aether keeps (a credential, an account, a
/// knowledge pack, a report): 1-64 of ASCII letters, digits, `.`, `-` and `_`.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

pub use agent::{AgentProfile, Hidden, Offer};
pub use arguments::ArgumentKinds;
pub use canon::{Digest, canonical_json, sha256};
pub use decision::{Refusal, Step};
pub use registry::{RegistryState, RegistryView};
pub use rules::{Action, CallFacts, RuleSet, RulesError, Verdict};
pub use tool::{Risk, Tier, ToolDef, ToolMeta};

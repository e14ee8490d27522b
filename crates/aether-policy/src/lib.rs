//! Aether's pure policy: who an agent is and what it reaches (`agent`), the configuration as
//! the operator wrote it (`config`), the operator's rules (`rules`), the registry's view
//! (`registry`), the console's roles (`roles`), model connections as configured (`models`).
//!
//! This crate does no IO and knows no async runtime, no SQL, no MCP. Everything here is a
//! function of its inputs, so the rules that decide what an agent may see and run can be read
//! and tested in isolation. It builds on the vocabulary (`aether-vocab`) and the screens
//! (`aether-screens`), and re-exports both, so `aether_policy::dlp` and
//! `aether_policy::ToolDef` name what they always named.

pub mod agent;
pub mod config;
pub mod models;
pub mod registry;
pub mod roles;
pub mod rules;

pub use aether_screens::{argv, commands, definition_screen, dlp, egress, paths, scripts, shell};
pub use aether_vocab::{arguments, canon, decision, is_plain_name, journal, tool, truncate};

pub use aether_vocab::ArgumentKinds;
pub use agent::{AgentProfile, Hidden, Offer, ScopeGrant, ScopeReach};
pub use canon::{Digest, canonical_json, json_len, sha256};
pub use decision::{Refusal, Step};
pub use registry::{RegistryState, RegistryView};
pub use rules::{Action, CallFacts, RuleSet, RulesError, Verdict};
pub use tool::{Risk, Tier, ToolDef, ToolMeta};

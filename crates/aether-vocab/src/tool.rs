//! The tool model: what every tool declares, and the digest that pins a definition.
//!
//! A tool's group and tier are part of its definition, fixed where the tool is written, not
//! configured per deployment. The registry approves a definition by its digest, so anything a
//! client or a model could read about the tool (name, description, schemas, annotations) is
//! inside the digest: change one word and the tool needs approval again.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::arguments::ArgumentKinds;
use crate::canon::{Digest, canonical_json, sha256};

/// The built-in group keys. Upstream servers add their own keys later.
pub mod groups {
    pub const WORKSPACE: &str = "workspace";
    pub const SHELL: &str = "shell";
    pub const RESEARCH: &str = "research";
    pub const KNOWLEDGE: &str = "knowledge";
    pub const PLANNING: &str = "planning";
    pub const COMMS: &str = "comms";
    pub const TEAM: &str = "team";
    pub const QUALITY: &str = "quality";
    pub const AUDIO: &str = "audio";
    pub const CALC: &str = "calc";
    pub const ORCHESTRATION: &str = "orchestration";
    /// The conformance suite's fixtures; only present in the test-only fixtures mode.
    pub const CONFORMANCE: &str = "conformance";
    /// Every built-in group: no upstream may take one of these names (an agent allowed the
    /// group would be given the upstream's tools, and the other way round).
    pub const BUILT_IN: &[&str] = &[
        WORKSPACE,
        SHELL,
        RESEARCH,
        KNOWLEDGE,
        PLANNING,
        COMMS,
        TEAM,
        QUALITY,
        AUDIO,
        CALC,
        ORCHESTRATION,
        CONFORMANCE,
    ];
}

/// How much stands between a call and its effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Runs at once; the audit keeps a truncated summary.
    Standard,
    /// Runs at once; the audit keeps the full arguments and result.
    Elevated,
    /// Waits for a person to approve it.
    Restricted,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Standard => "standard",
            Tier::Elevated => "elevated",
            Tier::Restricted => "restricted",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    Low,
    Medium,
    High,
}

/// What a tool says about its own effects. Clients see these as MCP annotations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolMeta {
    pub risk: Risk,
    /// Changes nothing anywhere.
    pub read_only: bool,
    /// Can open a connection off this machine (the egress gate applies).
    pub reaches_network: bool,
    /// Needs an explicit `confirm` in its command envelope.
    pub needs_confirmation: bool,
    /// Running it twice with the same arguments has the effect of running it once.
    pub idempotent: bool,
    /// May destroy or overwrite something (MCP's `destructiveHint`).
    pub destructive: bool,
}

impl ToolMeta {
    /// A local, read-only tool: the metadata of every workspace reader.
    pub const fn read_only() -> ToolMeta {
        ToolMeta {
            risk: Risk::Low,
            read_only: true,
            reaches_network: false,
            needs_confirmation: false,
            idempotent: true,
            destructive: false,
        }
    }

    /// A local tool that changes what Aether keeps (a plan, a message, a note), not files
    /// outside it or the world: the metadata the working tools start from.
    pub const fn local_writer() -> ToolMeta {
        ToolMeta {
            read_only: false,
            idempotent: false,
            ..ToolMeta::read_only()
        }
    }
}

/// Everything a tool declares about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub title: String,
    pub group: String,
    pub tier: Tier,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
    /// Which of its arguments name paths, URLs, hosts or commands: what the rules, egress
    /// and replay read a call through (`crate::arguments`). Not part of the digest: a
    /// built-in's is in its code, an upstream's follows from its schema and the operator's
    /// configuration.
    #[serde(default, skip_serializing_if = "ArgumentKinds::is_empty")]
    pub arguments: ArgumentKinds,
    pub meta: ToolMeta,
}

/// The longest tool name Aether hands a client; several popular clients refuse longer ones.
pub const MAX_TOOL_NAME: usize = 64;

impl ToolDef {
    /// This definition, declaring which of its arguments are paths, URLs, hosts and commands.
    pub fn declaring(mut self, arguments: ArgumentKinds) -> ToolDef {
        self.arguments = arguments;
        self
    }

    /// The digest the registry binds an approval to.
    pub fn digest(&self) -> Digest {
        sha256(canonical_json(&self.hashed_form()).as_bytes())
    }

    fn hashed_form(&self) -> Value {
        json!({
            "name": self.name,
            "title": self.title,
            "group": self.group,
            "tier": self.tier,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "meta": self.meta,
        })
    }

    /// Every way this definition falls short of what the catalog promises clients. Empty when
    /// well-formed. Schema *validity* is checked where a JSON Schema validator lives
    /// (`aether-pipeline`); this is the part that needs none.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !is_tool_name(&self.name) {
            problems.push(format!(
                "name {:?} must be 1-{MAX_TOOL_NAME} characters of A-Z a-z 0-9 _ -",
                self.name
            ));
        }
        if !is_group_key(&self.group) {
            problems.push(format!("group {:?} must be a lowercase key", self.group));
        }
        if self.title.trim().is_empty() {
            problems.push("title is empty".into());
        }
        if self.description.trim().len() < 20 {
            problems.push("description is missing or too short to guide a model".into());
        }
        for (which, schema) in [
            ("input", &self.input_schema),
            ("output", &self.output_schema),
        ] {
            if schema.get("type").and_then(Value::as_str) != Some("object") {
                problems.push(format!("{which} schema must be an object schema"));
            }
        }
        if self.meta.read_only && self.meta.destructive {
            problems.push("a read-only tool cannot be destructive".into());
        }
        if self.meta.reaches_network && self.tier == Tier::Standard {
            problems.push("a tool that reaches the network must be Elevated or Restricted".into());
        }
        // What it declares must be there (that everything there is declared, a tidy test
        // checks for the built-ins; an upstream's follows from its schema).
        let declared = self.arguments.problems(&self.input_schema);
        problems.extend(
            declared
                .into_iter()
                .filter(|p| !p.contains("is not declared as one")),
        );
        problems
    }
}

pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn is_group_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && key.len() <= 32
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ToolDef {
        ToolDef {
            name: "read_file".into(),
            title: "Read a file".into(),
            group: groups::WORKSPACE.into(),
            tier: Tier::Standard,
            description: "Read a text file under a root, whole or by line range.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            output_schema: json!({"type": "object"}),
            arguments: Default::default(),
            meta: ToolMeta::read_only(),
        }
    }

    #[test]
    fn every_visible_part_changes_the_digest() {
        let base = def().digest();
        let mut d = def();
        d.description.push('.');
        assert_ne!(d.digest(), base, "description");
        let mut d = def();
        d.input_schema["properties"]["path"]["description"] = json!("x");
        assert_ne!(d.digest(), base, "input schema");
        let mut d = def();
        d.meta.idempotent = false;
        assert_ne!(d.digest(), base, "annotations");
        let mut d = def();
        d.name = "read_file2".into();
        assert_ne!(d.digest(), base, "name");
        assert_eq!(def().digest(), base, "stable");
    }

    #[test]
    fn problems_are_named() {
        assert!(def().problems().is_empty(), "{:?}", def().problems());
        let mut d = def();
        d.name = "read file".into();
        d.meta.reaches_network = true;
        let p = d.problems();
        assert!(p.iter().any(|p| p.contains("name")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("network")), "{p:?}");
    }

    #[test]
    fn names_and_groups() {
        assert!(is_tool_name("srv__tool-1"));
        assert!(!is_tool_name(""));
        assert!(!is_tool_name(&"a".repeat(65)));
        assert!(!is_tool_name("a.b"));
        assert!(is_group_key("workspace"));
        assert!(!is_group_key("Workspace"));
        assert!(!is_group_key("1x"));
    }
}

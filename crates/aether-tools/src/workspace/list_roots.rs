//! `list_roots`: the named folders this agent can work in, and what may be done in each.

use aether_policy::ToolDef;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {}

#[derive(Serialize, JsonSchema)]
struct Output {
    roots: Vec<RootInfo>,
}

#[derive(Serialize, JsonSchema)]
struct RootInfo {
    /// The name to pass as `root` to the other workspace tools.
    name: String,
    /// The folder on this machine.
    path: String,
    /// `rw` (read and write), `ro` (read only) or `sealed` (read only, pinned by hash).
    mode: String,
    /// Whether the folder is there right now.
    available: bool,
}

pub struct ListRoots {
    def: ToolDef,
}

impl ListRoots {
    pub fn new() -> ListRoots {
        ListRoots {
            def: super::reader::<Args, Output>(
                "list_roots",
                "List roots",
                "List the named folders (roots) you can work in, with each one's mode (rw, ro, sealed). \
                 Other workspace tools take a path relative to a root and an optional `root` name; \
                 without `root` they use the first root listed here.",
            ),
        }
    }
}

#[async_trait]
impl Tool for ListRoots {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let Args {} = parse_args(args)?;
        let roots: Vec<RootInfo> = cx
            .roots
            .iter()
            .map(|r| RootInfo {
                name: r.name.clone(),
                path: r.path.display().to_string(),
                mode: r.mode.as_str().into(),
                available: r.check_present().is_ok(),
            })
            .collect();
        let text = if roots.is_empty() {
            "No roots are configured.".to_string()
        } else {
            roots
                .iter()
                .map(|r| {
                    let gone = if r.available { "" } else { " (unavailable)" };
                    format!("{} ({}) {}{gone}", r.name, r.mode, r.path)
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let structured = serde_json::to_value(Output { roots }).map_err(ToolError::failed)?;
        Ok(ToolOutput::with_structured(text, structured))
    }
}

//! `write_file`: create a file or replace its content, atomically and undoably.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The path: relative to the root, or absolute inside a root.
    path: String,
    /// The whole new content of the file (UTF-8 text).
    content: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// Create missing parent folders. Default true.
    #[serde(default = "super::walk::yes")]
    create_parents: bool,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct Output {
    root: String,
    path: String,
    /// Bytes now in the file.
    bytes: u64,
    /// Whether the file is new.
    created: bool,
    /// Whether the content was already exactly this (nothing was written).
    unchanged: bool,
    /// The call to name to `aether undo`; `revert_file` undoes this session's changes.
    call_id: String,
}

pub struct WriteFile {
    def: ToolDef,
}

impl Default for WriteFile {
    fn default() -> WriteFile {
        WriteFile::new()
    }
}

impl WriteFile {
    pub fn new() -> WriteFile {
        WriteFile {
            def: write::writer::<Args, Output>(
                "write_file",
                "Write a file",
                "Create a file, or replace all of its content, under a read-write root. The write is \
                 atomic (a crash leaves the old file or the new one, never half) and journalled: \
                 revert_file undoes it. Missing parent folders are created. Use edit_file to change \
                 part of a file.",
                true,
                true,
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for WriteFile {
    /// Its only effect is the file's new content, journalled (old and new) before the file
    /// is replaced.
    fn journals_every_effect(&self) -> bool {
        true
    }

    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let bytes = args.content.into_bytes();
        let w = write::write_whole(
            &cx,
            "write_file",
            (args.root.as_deref(), &args.path),
            &bytes,
            args.create_parents,
        )
        .await?;
        let (shown, created, unchanged) = (&w.shown, w.created, w.unchanged);
        let text = if unchanged {
            format!("{shown} already had exactly this content; nothing was written")
        } else {
            format!(
                "{} {shown} ({} bytes). revert_file undoes it.",
                if created { "created" } else { "wrote" },
                bytes.len()
            )
        };
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(Output {
                root: w.root.clone(),
                path: w.rel.clone(),
                bytes: bytes.len() as u64,
                created,
                unchanged,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

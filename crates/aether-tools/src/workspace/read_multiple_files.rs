//! `read_multiple_files`: several whole text files in one call, each with its own outcome, so
//! one missing file does not cost the others. The files share the result budget.

use std::sync::Arc;

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::config::Limits;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::read_file::ReadFile;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

/// The most files one call may read.
const MAX_FILES: usize = 50;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Paths of the files: relative to the root, or absolute inside a root.
    #[schemars(length(min = 1, max = 50))]
    paths: Vec<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    files: Vec<FileResult>,
}

#[derive(Serialize, JsonSchema)]
struct FileResult {
    path: String,
    /// The text, when the read succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    /// Why the read failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    truncated: bool,
}

pub struct ReadMultipleFiles {
    def: ToolDef,
    one: ReadFile,
}

impl ReadMultipleFiles {
    pub fn new() -> ReadMultipleFiles {
        ReadMultipleFiles {
            def: super::reader::<Args, Output>(
                "read_multiple_files",
                "Read several files",
                "Read up to 50 whole text files in one call. Each file reports its own content or error, \
                 so one bad path does not fail the rest. Use read_file for ranges of large files.",
            )
            .declaring(ArgumentKinds::paths(&["paths"])),
            one: ReadFile::new(),
        }
    }
}

#[async_trait]
impl Tool for ReadMultipleFiles {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        if args.paths.is_empty() || args.paths.len() > MAX_FILES {
            return Err(ToolError::InvalidArguments(format!(
                "give 1 to {MAX_FILES} paths"
            )));
        }
        let share = (cx.limits.result_chars / args.paths.len())
            .max(200)
            .min(cx.limits.result_chars);
        // Each file is read with its share as the result bound, so it is cut once and its
        // marker counts the whole file (cutting read_file's already-cut text again would
        // report the length of that copy instead).
        let mut one_cx = cx.clone();
        one_cx.limits = Arc::new(Limits {
            result_chars: share,
            ..(*cx.limits).clone()
        });
        let mut files = Vec::with_capacity(args.paths.len());
        let mut text = String::new();
        for path in args.paths {
            if cx.cancel.is_cancelled() {
                return Err(ToolError::Cancelled);
            }
            let one = json!({"path": path, "root": args.root});
            let result = self.one.call(one_cx.clone(), one).await;
            let entry = match result {
                Ok(out) => {
                    let structured = out.structured.unwrap_or_default();
                    FileResult {
                        truncated: structured["truncated"].as_bool().unwrap_or(false),
                        content: Some(
                            structured["content"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        ),
                        error: None,
                        path,
                    }
                }
                Err(e) => FileResult {
                    path,
                    content: None,
                    error: Some(e.to_string()),
                    truncated: false,
                },
            };
            text.push_str(&format!("==> {} <==\n", entry.path));
            match (&entry.content, &entry.error) {
                (Some(c), _) => text.push_str(c),
                (None, Some(e)) => text.push_str(&format!("[error: {e}]")),
                (None, None) => {}
            }
            if !text.ends_with('\n') {
                text.push('\n');
            }
            files.push(entry);
        }
        let structured = serde_json::to_value(Output { files }).map_err(ToolError::failed)?;
        Ok(ToolOutput::with_structured(text, structured))
    }
}

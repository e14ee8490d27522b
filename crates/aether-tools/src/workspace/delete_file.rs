//! `delete_file`: delete one file, undoably, in a root whose operator opted in.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::journal::{JournalOp, JournalWrite};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write::{self, Before};
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The file: relative to the root, or absolute inside a root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// Bytes the file held (kept in the journal).
    bytes: u64,
    call_id: String,
}

pub struct DeleteFile {
    def: ToolDef,
}

impl DeleteFile {
    pub fn new() -> DeleteFile {
        DeleteFile {
            def: write::writer::<Args, Output>(
                "delete_file",
                "Delete a file",
                "Delete one regular file under a read-write root whose operator allows deletes \
                 (allow_delete). Folders are not deleted. The content is kept in the journal: \
                 revert_file brings the file back.",
                true,
                false,
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for DeleteFile {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let t = write::target(&cx, args.root.as_deref(), &args.path, "delete", false)?;
        if !t.root.allow_delete {
            return Err(ToolError::denied(
                "delete-opt-in",
                format!(
                    "root {:?} does not allow deletes (the operator opts in with allow_delete = true \
                     under [roots.{}]); {} is unchanged",
                    t.root.name,
                    t.root.name,
                    t.shown()
                ),
            ));
        }
        let _guard = write::lock(&[&t.real]).await;
        let before = write::read_before(&t, cx.limits.write_file_bytes)?;
        let Before::File { bytes, hash, mode } = before else {
            return Err(ToolError::failed(format!("{}: no such file", t.shown())));
        };
        let mut e = write::entry(&cx, "delete_file", JournalOp::Delete, &t.root.name, &t.rel);
        e.before_hash = Some(hash.clone());
        e.before_mode = Some(mode);
        let size = bytes.len() as u64;
        write::record(
            &cx,
            JournalWrite {
                entries: vec![e],
                blobs: vec![(hash, bytes)],
                reverts: Vec::new(),
                receipts: Vec::new(),
            },
        )
        .await?;
        t.dir
            .remove_file(&t.name)
            .map_err(|e| t.root.io_error(&t.rel, e))?;
        write::sync_dir(&t.dir).map_err(|e| t.root.io_error(&t.rel, e))?;
        Ok(ToolOutput::with_structured(
            format!(
                "deleted {} ({size} bytes). revert_file brings it back.",
                t.shown()
            ),
            serde_json::to_value(Output {
                root: t.root.name.clone(),
                path: t.rel.clone(),
                bytes: size,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

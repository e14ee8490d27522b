//! `create_directory`: create a folder and any missing parents, undoably.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::journal::JournalWrite;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The folder: relative to the root, or absolute inside a root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// Folders created, outermost first (empty: it already existed).
    created: Vec<String>,
    call_id: String,
}

pub struct CreateDirectory {
    def: ToolDef,
}

impl CreateDirectory {
    pub fn new() -> CreateDirectory {
        CreateDirectory {
            def: write::writer::<Args, Output>(
                "create_directory",
                "Create a folder",
                "Create a folder under a read-write root, with any missing parents. Succeeds quietly \
                 if it exists. Journalled: aether undo removes what it created (if still empty).",
                false,
                true,
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for CreateDirectory {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let mut rel = String::new();
        let loc = cx
            .roots
            .locate(args.root.as_deref(), &args.path, &mut rel)?;
        let (root, rel) = (loc.root, loc.rel.to_string());
        root.check_writable(&rel, "create")?;
        let existed = root.open_folder(&rel, cx.opening()).is_ok();
        let mut created = Vec::new();
        if !existed {
            // The folder that will hold it, its missing parents created (and journalled).
            let t = write::target(&cx, Some(&root.name), &rel, "create", true)?;
            let _guard = write::lock(&[&t.real]).await;
            match t.dir.symlink_metadata(&t.name) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Ok(m) if m.is_dir() => {
                    return Err(ToolError::failed(format!(
                        "{} was created by someone else meanwhile",
                        root.display(&rel)
                    )));
                }
                Ok(_) => {
                    return Err(ToolError::failed(format!(
                        "{} exists and is not a folder; nothing was created",
                        root.display(&rel)
                    )));
                }
                Err(e) => return Err(root.io_error(&rel, e)),
            }
            let mut entries = write::mkdir_entries(&cx, "create_directory", &t);
            entries.push(write::entry(
                &cx,
                "create_directory",
                aether_policy::journal::JournalOp::Mkdir,
                &root.name,
                &rel,
            ));
            write::record(
                &cx,
                JournalWrite {
                    entries,
                    ..Default::default()
                },
            )
            .await?;
            match crate::roots::land_git_piece(&t.dir, "", &t.name, || t.dir.create_dir(&t.name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Something else made it meanwhile; it must be a folder.
                    root.open_folder(&rel, cx.opening())?;
                }
                Err(e) => return Err(root.io_error(&rel, e)),
            }
            write::sync_dir(&t.dir).map_err(|e| root.io_error(&rel, e))?;
            created = t.created.clone();
            created.push(rel.clone());
        }
        let shown = root.display(&rel);
        Ok(ToolOutput::with_structured(
            if created.is_empty() {
                format!("{shown} already exists")
            } else {
                format!("created {shown}")
            },
            serde_json::to_value(Output {
                root: root.name.clone(),
                path: rel,
                created,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

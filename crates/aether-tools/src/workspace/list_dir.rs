//! `list_dir`: one folder's entries, folders first, with kinds and sizes.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use cap_std::fs::MetadataExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args};

/// Entries listed at most; the rest are counted.
const MAX_ENTRIES: usize = 2000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The folder: relative to the root (empty or "." for the root itself), or absolute inside a root.
    #[serde(default)]
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    entries: Vec<Entry>,
    /// Entries not listed because the listing hit its cap.
    omitted: usize,
}

#[derive(Serialize, JsonSchema)]
struct Entry {
    name: String,
    /// `file`, `dir`, `symlink` or `other`.
    kind: String,
    /// Size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    /// Set when the name is not valid UTF-8 and is shown approximately.
    // `default` makes the schema match the output: the field is left out when false, so it
    // must not be listed as required.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lossy_name: bool,
}

pub struct ListDir {
    def: ToolDef,
}

impl ListDir {
    pub fn new() -> ListDir {
        ListDir {
            def: super::reader::<Args, Output>(
                "list_dir",
                "List a folder",
                "List the entries of one folder under a root: name, kind (file, dir, symlink) and size. \
                 Folders come first. Use glob or search_files to find files deeper in the tree.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for ListDir {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let mut rel = String::new();
        let loc = cx
            .roots
            .locate(args.root.as_deref(), &args.path, &mut rel)?;
        let seal = loc.root.seal_in_force()?;
        let (dir, real) = loc.root.open_folder(loc.rel, cx.opening())?;
        // Seal keys are real root-relative paths: the folder as it really is.
        let here = loc
            .root
            .relative_of(&real)
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let root_name = loc.root.name.clone();
        let shown = loc.root.display(loc.rel);
        let credentials = cx.roots.credentials().clone();
        // Names listed until they fill the result budget; the rest are counted.
        let budget = cx.limits.result_chars;
        let listed = blocking(move || -> Result<(Vec<Entry>, usize), String> {
            let mut entries = Vec::new();
            let mut omitted = 0;
            let mut used = 0;
            for item in dir.entries().map_err(|e| e.to_string())? {
                let item = item.map_err(|e| e.to_string())?;
                let os_name = item.file_name();
                let name = os_name.to_string_lossy().into_owned();
                if name == ".aether" || aether_policy::paths::is_write_temp(&name) {
                    // Aether's own store, and a write in progress: not part of anyone's
                    // workspace.
                    continue;
                }
                // A sealed root shows only what its seal pinned.
                if let Some(seal) = &seal {
                    let rel = if here.is_empty() {
                        name.clone()
                    } else {
                        format!("{here}/{name}")
                    };
                    let ft = item.file_type().map_err(|e| e.to_string())?;
                    if ft.is_symlink() || !seal.shows(&rel, ft.is_dir()) {
                        continue;
                    }
                }
                if entries.len() >= MAX_ENTRIES || used + name.len() > budget {
                    omitted += 1;
                    continue;
                }
                used += name.len() + 24;
                let meta = item.metadata().ok();
                let ft = item.file_type().map_err(|e| e.to_string())?;
                let kind = super::kind_of(&ft);
                // A credential file's name is listed, its size is not; nor is the size of a
                // file with several hard links (its other names may lie outside the root).
                let secret = credentials.is_credential(&real.join(&os_name).to_string_lossy());
                let size = meta
                    .filter(|m| kind == "file" && !secret && m.nlink() == 1)
                    .map(|m| m.len());
                entries.push(Entry {
                    lossy_name: os_name.to_str().is_none(),
                    size,
                    kind: kind.into(),
                    name,
                });
            }
            entries.sort_by(|a, b| (a.kind != "dir", &a.name).cmp(&(b.kind != "dir", &b.name)));
            Ok((entries, omitted))
        })
        .await
        .map_err(|e| ToolError::failed(format!("{shown}: {e}")))?;
        let (entries, omitted) = listed;
        let mut text = String::new();
        for e in &entries {
            match (e.kind.as_str(), e.size) {
                ("dir", _) => text.push_str(&format!("{}/\n", e.name)),
                ("symlink", _) => text.push_str(&format!("{}@\n", e.name)),
                (_, Some(size)) => text.push_str(&format!("{}  ({size} bytes)\n", e.name)),
                _ => text.push_str(&format!("{}\n", e.name)),
            }
        }
        if entries.is_empty() {
            text.push_str(&format!("{shown} is empty\n"));
        }
        if omitted > 0 {
            text.push_str(&format!("[… {omitted} more entries not listed]\n"));
        }
        let output = Output {
            root: root_name,
            path: loc.rel.to_string(),
            entries,
            omitted,
        };
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

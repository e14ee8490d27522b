//! `list_files`: the tree under a folder, as an indented listing, honouring ignore files, with
//! a depth and an entry limit and a marker where it stops. The whole tree (to the depth) is
//! walked in parallel so the marker can say how much was left out.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::walk::{self, Kind, Walk, WalkOptions};
use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args};

/// Entries a walk collects at most before it stops counting.
const MAX_WALKED: usize = 2_000_000;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Folder to list, relative to the root. Defaults to the whole root.
    #[serde(default)]
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// How many folder levels to descend (1: just the folder's own entries). Default 10.
    #[serde(default = "default_depth")]
    #[schemars(range(min = 1, max = 64))]
    depth: usize,
    /// Most entries to show. Default 500, at most 10000.
    #[serde(default = "default_entries")]
    #[schemars(range(min = 1, max = 10000))]
    max_entries: usize,
    /// Also list hidden files and folders (names starting with "."). Default false.
    #[serde(default)]
    include_hidden: bool,
    /// Leave out what .gitignore and .ignore files exclude. Default true.
    #[serde(default = "walk::yes")]
    respect_ignore: bool,
}

fn default_depth() -> usize {
    10
}
fn default_entries() -> usize {
    500
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// Files and folders found (to the depth).
    files: usize,
    folders: usize,
    /// Entries shown in the listing.
    shown: usize,
    /// Whether the listing stopped before the end.
    truncated: bool,
}

pub struct ListFiles {
    def: ToolDef,
}

impl ListFiles {
    pub fn new() -> ListFiles {
        ListFiles {
            def: super::reader::<Args, Output>(
                "list_files",
                "List a folder as a tree",
                "The files and folders under a folder as an indented tree (folders end in \"/\"), \
                 sorted, honouring .gitignore and .ignore, skipping hidden entries unless asked. \
                 Limited by depth and entry count; a marker says where and how much it left out.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for ListFiles {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        if args.max_entries == 0 || args.max_entries > 10_000 || args.depth == 0 || args.depth > 64
        {
            return Err(ToolError::InvalidArguments(
                "depth is 1-64 and max_entries 1-10000".into(),
            ));
        }
        let opts = WalkOptions {
            include_hidden: args.include_hidden,
            respect_ignore: args.respect_ignore,
            skip_folders: &[],
        };
        let walk = Walk::prepare(&cx, args.root.as_deref(), &args.path, opts, None)?;
        let root_name = walk.root_name.clone();
        let shown_base = walk
            .base
            .strip_prefix(&walk.root_path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cancel = cx.cancel.clone();
        let depth = args.depth;
        let _turn = walk::turn(&cx).await?;
        let tree = blocking(move || walk::tree(&walk, depth, MAX_WALKED, &cancel)).await;
        if cx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let (mut entries, capped) = (tree.entries, tree.capped);
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let folders = entries.iter().filter(|e| e.1 == Kind::Folder).count();
        let files = entries.len() - folders;
        let max = args.max_entries;
        let budget = cx.limits.result_chars.saturating_sub(400);
        let loc_root = cx.roots.get(&root_name).expect("the walk's root exists");
        let mut text = format!(
            "{} — {folders} folder(s), {files} file(s){}{}\n",
            loc_root.display(&shown_base),
            if args.respect_ignore {
                ", ignore files honoured"
            } else {
                ""
            },
            if args.include_hidden {
                ""
            } else {
                ", hidden entries skipped"
            },
        );
        let mut shown = 0;
        for (key, kind) in &entries {
            if shown >= max || text.len() >= budget {
                break;
            }
            let (depth, name) = level_and_name(key);
            for _ in 1..depth {
                text.push_str("  ");
            }
            text.push_str(&String::from_utf8_lossy(name));
            text.push_str(match kind {
                Kind::Folder => "/",
                Kind::Symlink => "@",
                Kind::File => "",
            });
            text.push('\n');
            shown += 1;
        }
        let truncated = shown < entries.len() || capped;
        if truncated {
            text.push_str(&format!(
                "[… stopped after {shown} of {}{} entries: {} more not shown. List a sub-folder, lower depth, or raise max_entries (up to 10000)]\n",
                entries.len(),
                if capped { "+" } else { "" },
                entries.len() - shown
            ));
        }
        if entries
            .iter()
            .any(|(key, kind)| *kind == Kind::Folder && level_and_name(key).0 == depth)
        {
            text.push_str(&format!(
                "[folders at depth {depth} are not opened; raise depth to see inside them]\n"
            ));
        }
        if entries.is_empty() {
            text.push_str("(empty)\n");
        }
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(Output {
                root: root_name,
                path: shown_base,
                files,
                folders,
                shown,
                truncated,
            })
            .map_err(ToolError::failed)?,
        ))
    }
}

/// An entry's level (1: in the folder listed) and its own name, from its [`walk::Tree`] key.
fn level_and_name(key: &[u8]) -> (usize, &[u8]) {
    let mut parts = key.rsplit(|b| *b == 0);
    let name = parts.next().unwrap_or_default();
    (parts.count() + 1, name)
}

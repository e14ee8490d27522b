//! `glob`: file names matching a glob, found by a parallel walk of the tree.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use ignore::WalkState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::walk::{self, NameGlob, Walk, WalkOptions};
use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// A glob such as "**/*.rs" or "src/**/mod.rs". Without a "/", it matches file names
    /// anywhere ("*.toml"); with one, paths relative to `path`.
    pub pattern: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    pub root: Option<String>,
    /// Folder to search under, relative to the root. Defaults to the whole root.
    #[serde(default)]
    pub path: String,
    /// Also look in hidden files and folders (names starting with "."). Default false.
    #[serde(default)]
    pub include_hidden: bool,
    /// Skip what .gitignore and .ignore files exclude. Default true.
    #[serde(default = "walk::yes")]
    pub respect_ignore: bool,
    /// Most paths to return (capped by the operator's limit).
    #[schemars(range(min = 1))]
    pub max_results: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct Output {
    pub root: String,
    /// Matching files, relative to the root, sorted.
    pub matches: Vec<String>,
    /// Whether more files matched than were returned.
    pub truncated: bool,
}

pub struct GlobTool {
    def: ToolDef,
}

impl GlobTool {
    pub fn new() -> GlobTool {
        GlobTool {
            def: super::reader::<Args, Output>(
                "glob",
                "Find files by name",
                "Find files whose names match a glob (\"*.rs\", \"**/test_*.py\", \"src/**/mod.rs\") under a \
                 root, honouring .gitignore. Returns paths relative to the root, sorted, capped.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

/// Runs a name search; shared with `search_files` in name mode.
pub(super) async fn find(cx: &CallContext, args: Args) -> Result<(Output, String), ToolError> {
    let (root, folder, glob) =
        NameGlob::confined(cx, args.root.as_deref(), &args.path, &args.pattern)?;
    let opts = WalkOptions {
        include_hidden: args.include_hidden,
        respect_ignore: args.respect_ignore,
        skip_folders: &[],
    };
    let walk = Walk::prepare(cx, Some(&root), &folder, opts, args.max_results)?;
    let (max, root_name) = (walk.max, walk.root_name.clone());
    // The paths returned, together, stay within the result budget.
    let budget = cx.limits.result_chars;
    let cancel = cx.cancel.clone();
    let _turn = walk::turn(cx).await?;
    let (mut matches, truncated) = blocking(move || {
        let found = Mutex::new(Vec::new());
        let count = AtomicUsize::new(0);
        let used = AtomicUsize::new(0);
        let truncated = AtomicBool::new(false);
        walk.builder().build_parallel().run(|| {
            Box::new(|entry| {
                if cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                let Some((abs, rel)) = walk::regular_file(entry, &walk) else {
                    return WalkState::Continue;
                };
                if glob.matches(&abs, &walk.base)
                    && still_beneath(&walk.root_dir, &walk.root_path, &abs)
                {
                    if count.fetch_add(1, Ordering::Relaxed) >= max
                        || used.fetch_add(rel.len() + 1, Ordering::Relaxed) + rel.len() > budget
                    {
                        truncated.store(true, Ordering::Relaxed);
                        return WalkState::Quit;
                    }
                    found.lock().expect("glob results lock").push(rel);
                }
                WalkState::Continue
            })
        });
        (
            found.into_inner().expect("glob results lock"),
            truncated.into_inner(),
        )
    })
    .await;
    if cx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    matches.sort();
    let mut text = matches.join("\n");
    if matches.is_empty() {
        text = format!("no files match {:?}", args.pattern);
    }
    if truncated {
        text.push_str(&format!(
            "\n[… more files match; showing the first {max}. Narrow the pattern or path]"
        ));
    }
    Ok((
        Output {
            root: root_name,
            matches,
            truncated,
        },
        text,
    ))
}

/// Whether `abs`, found by the walk, still leads to a regular file when resolved beneath the
/// root's handle without following a final symlink. The walk reads folders by path, so a folder
/// swapped for a symlink mid-walk can show it entries from outside the root; this keeps their
/// names out of the results.
fn still_beneath(root_dir: &cap_std::fs::Dir, root_path: &Path, abs: &Path) -> bool {
    abs.strip_prefix(root_path)
        .is_ok_and(|rel| root_dir.symlink_metadata(rel).is_ok_and(|m| m.is_file()))
}

#[async_trait]
impl Tool for GlobTool {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let (output, text) = find(&cx, parse_args(args)?).await?;
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

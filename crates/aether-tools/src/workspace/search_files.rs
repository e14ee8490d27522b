//! `search_files`: the read-only locate step. File names by glob, or lines by literal text or
//! regular expression, with ripgrep's own crates (`ignore` for the parallel walk, `grep-regex`
//! and `grep-searcher` for matching), output capped. Meant to replace `ls`, `find` and `grep`
//! in a shell.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use async_trait::async_trait;
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::walk::{self, NameGlob, Walk, WalkOptions};
use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args};

/// The most memory one file's search may use for its buffer.
const SEARCH_HEAP: usize = 8 << 20;

/// Characters of one matching line kept in a result.
const LINE_CHARS: usize = 300;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Text to find inside files. Literal unless `regex` is true. Leave it out to search file
    /// names only (then `glob` is required).
    #[serde(default)]
    query: Option<String>,
    /// Treat `query` as a regular expression (Rust regex syntax). Default false.
    #[serde(default)]
    regex: bool,
    /// Match case-insensitively. Default false.
    #[serde(default)]
    case_insensitive: bool,
    /// Only files whose names match this glob ("*.rs"; with a "/", paths relative to `path`).
    #[serde(default)]
    glob: Option<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// Folder to search under, relative to the root. Defaults to the whole root.
    #[serde(default)]
    path: String,
    /// Also look in hidden files and folders. Default false.
    #[serde(default)]
    include_hidden: bool,
    /// Skip what .gitignore and .ignore files exclude. Default true.
    #[serde(default = "walk::yes")]
    respect_ignore: bool,
    /// Most results to return (capped by the operator's limit).
    #[schemars(range(min = 1))]
    max_results: Option<usize>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    /// `lines` (query given) or `names` (glob only).
    mode: String,
    matches: Vec<Match>,
    /// Files whose contents were searched (lines mode).
    files_searched: usize,
    /// Whether more matched than was returned.
    truncated: bool,
}

#[derive(Serialize, JsonSchema)]
struct Match {
    /// Relative to the root.
    path: String,
    /// 1-based line number (lines mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u64>,
    /// The matching line, trimmed (lines mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

pub struct SearchFiles {
    def: ToolDef,
}

impl SearchFiles {
    pub fn new() -> SearchFiles {
        SearchFiles {
            def: super::reader::<Args, Output>(
                "search_files",
                "Search files",
                "Search under a root: lines containing `query` (literal, or a regex with `regex: true`), \
                 optionally only in files matching `glob`; or, with only `glob`, file names. Honours \
                 .gitignore, skips binary and credential files, caps the output. Use this instead of \
                 grep, find or ls in a shell.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for SearchFiles {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let Some(query) = args.query.clone().filter(|q| !q.is_empty()) else {
            let Some(pattern) = args.glob.clone() else {
                return Err(ToolError::InvalidArguments(
                    "give `query` (text to find in files), `glob` (file names), or both".into(),
                ));
            };
            let names = super::glob::Args {
                pattern,
                root: args.root,
                path: args.path,
                include_hidden: args.include_hidden,
                respect_ignore: args.respect_ignore,
                max_results: args.max_results,
            };
            let (found, text) = super::glob::find(&cx, names).await?;
            let output = Output {
                root: found.root,
                mode: "names".into(),
                matches: found
                    .matches
                    .into_iter()
                    .map(|path| Match {
                        path,
                        line: None,
                        text: None,
                    })
                    .collect(),
                files_searched: 0,
                truncated: found.truncated,
            };
            return Ok(ToolOutput::with_structured(
                text,
                serde_json::to_value(output).map_err(ToolError::failed)?,
            ));
        };
        search_lines(&cx, args, query).await
    }
}

/// Opens a file the walk found beneath the root (`found`: its path relative to the root,
/// its absolute path, its shown path). The walk reads folders by path, so a folder swapped for
/// a symlink between the walk and the open (say, to `.ssh`) would make an open land somewhere
/// the walk never saw: opened through no symlink at all, the file is where the walk saw it
/// (and judged it); where the kernel cannot refuse symlinks in every component, where it
/// landed is checked, as read_file does. Only a regular file with one name is searched: one
/// swapped for a FIFO or a device since the walk saw it is skipped, as is a hard link.
pub(super) fn open_found(
    root: &crate::Root,
    root_dir: &cap_std::fs::Dir,
    open: &cap_std::fs::OpenOptions,
    opening: crate::Opening<'_>,
    (rel_path, abs, rel): (&std::path::Path, &std::path::Path, &str),
) -> Option<(std::fs::File, std::path::PathBuf)> {
    let (file, real) = match root.open_exact(rel_path) {
        Some(Ok(file)) => (file, abs.to_path_buf()),
        Some(Err(_)) => return None,
        None => {
            let file = root_dir.open_with(rel_path, open).ok()?.into_std();
            let real = root.check_real_path(rel, &file, opening, false).ok()?;
            (file, real)
        }
    };
    let plain = file
        .metadata()
        .is_ok_and(|m| m.is_file() && std::os::unix::fs::MetadataExt::nlink(&m) <= 1);
    plain.then_some((file, real))
}

/// The text of a search's matching lines, and what was left out.
fn lines_text(
    matches: &[Match],
    query: &str,
    files_searched: usize,
    (truncated, max): (bool, usize),
    unsealed: usize,
) -> String {
    let mut text = String::new();
    for m in matches {
        text.push_str(&format!(
            "{}:{}: {}\n",
            m.path,
            m.line.unwrap_or(0),
            m.text.as_deref().unwrap_or("")
        ));
    }
    if matches.is_empty() {
        text.push_str(&format!(
            "no matches for {query:?} in {files_searched} files\n"
        ));
    }
    if truncated {
        text.push_str(&format!(
            "[… more lines match; showing the first {max}. Narrow the query, glob or path]\n"
        ));
    }
    if unsealed > 0 {
        text.push_str(&format!(
            "[{unsealed} file(s) not searched: they changed since the root was sealed]\n"
        ));
    }
    text
}

async fn search_lines(
    cx: &CallContext,
    args: Args,
    query: String,
) -> Result<ToolOutput, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .fixed_strings(!args.regex)
        .size_limit(16 << 20)
        .dfa_size_limit(16 << 20)
        .build(&query)
        .map_err(|e| ToolError::InvalidArguments(format!("bad query: {e}")))?;
    // A glob narrows the folder searched as it would for file names (confined like a path).
    let (root, folder, name_glob) = match args.glob.as_deref() {
        Some(pattern) => {
            let (root, folder, glob) =
                NameGlob::confined(cx, args.root.as_deref(), &args.path, pattern)?;
            (Some(root), folder, Some(glob))
        }
        None => (args.root.clone(), args.path.clone(), None),
    };
    let opts = WalkOptions {
        include_hidden: args.include_hidden,
        respect_ignore: args.respect_ignore,
        skip_folders: &[],
    };
    let walk = Walk::prepare(cx, root.as_deref(), &folder, opts, args.max_results)?;
    let (max, root_name) = (walk.max, walk.root_name.clone());
    // The matches returned, together, stay within the result budget.
    let budget = cx.limits.result_chars;
    let roots = cx.roots.clone();
    let cancel = cx.cancel.clone();

    let _turn = walk::turn(cx).await?;
    let (mut matches, files_searched, truncated, unsealed) = blocking(move || {
        let root = roots
            .get(&walk.root_name)
            .expect("the located root is among the roots");
        let found: Mutex<Vec<Match>> = Mutex::new(Vec::new());
        let count = AtomicUsize::new(0);
        let used = AtomicUsize::new(0);
        let searched = AtomicUsize::new(0);
        let unsealed = AtomicUsize::new(0);
        let truncated = AtomicBool::new(false);
        let mut open = crate::roots::read_options();
        open.follow(FollowSymlinks::No);
        let (root_dir, root_path, credentials, base, walked) = (
            &walk.root_dir,
            &walk.root_path,
            &walk.credentials,
            &walk.base,
            &walk,
        );
        walk.builder().build_parallel().run(|| {
            let mut searcher = SearcherBuilder::new()
                .binary_detection(BinaryDetection::quit(b'\x00'))
                .line_number(true)
                // A single enormous line must not pull the whole file into memory; a file
                // with one is skipped and the search goes on.
                .heap_limit(Some(SEARCH_HEAP))
                .build();
            let matcher = &matcher;
            let (found, count, used, searched, truncated, unsealed) =
                (&found, &count, &used, &searched, &truncated, &unsealed);
            let (name_glob, open, cancel) = (&name_glob, &open, &cancel);
            Box::new(move |entry| {
                if cancel.is_cancelled() || truncated.load(Ordering::Relaxed) {
                    return WalkState::Quit;
                }
                let Some((abs, rel)) = walk::regular_file(entry, walked) else {
                    return WalkState::Continue;
                };
                if name_glob.as_ref().is_some_and(|g| !g.matches(&abs, base)) {
                    return WalkState::Continue;
                }
                let Ok(rel_path) = abs.strip_prefix(root_path) else {
                    return WalkState::Continue;
                };
                let opening = crate::Opening {
                    credentials,
                    paths: &*walked.paths,
                };
                let opened = open_found(root, root_dir, open, opening, (rel_path, &abs, &rel));
                let Some((file, real)) = opened else {
                    return WalkState::Continue;
                };
                // In a sealed root, a file changed since the seal is not searched, and what is
                // searched is the content that was checked.
                let file = match root.verified(&root.relative_of(&real).unwrap_or_default(), file) {
                    Ok(file) => file,
                    Err(_) => {
                        unsealed.fetch_add(1, Ordering::Relaxed);
                        return WalkState::Continue;
                    }
                };
                searched.fetch_add(1, Ordering::Relaxed);
                let mut local = Vec::new();
                let _ = searcher.search_file(
                    matcher,
                    &file,
                    Lossy(|line, text| {
                        let size = rel.len() + text.len().min(LINE_CHARS * 4) + 12;
                        if count.fetch_add(1, Ordering::Relaxed) >= max
                            || used.fetch_add(size, Ordering::Relaxed) + size > budget
                        {
                            truncated.store(true, Ordering::Relaxed);
                            return Ok(false);
                        }
                        let text = text.trim_end_matches(['\n', '\r']);
                        let text: String = text.chars().take(LINE_CHARS).collect();
                        local.push(Match {
                            path: rel.clone(),
                            line: Some(line),
                            text: Some(text),
                        });
                        Ok(true)
                    }),
                );
                if !local.is_empty() {
                    found.lock().expect("search results lock").extend(local);
                }
                WalkState::Continue
            })
        });
        (
            found.into_inner().expect("search results lock"),
            searched.into_inner(),
            truncated.into_inner(),
            unsealed.into_inner(),
        )
    })
    .await;
    if cx.cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    matches.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let text = lines_text(&matches, &query, files_searched, (truncated, max), unsealed);
    let output = Output {
        root: root_name,
        mode: "lines".into(),
        matches,
        files_searched,
        truncated,
    };
    Ok(ToolOutput::with_structured(
        text,
        serde_json::to_value(output).map_err(ToolError::failed)?,
    ))
}

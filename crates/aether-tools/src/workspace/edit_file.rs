//! `edit_file`: search and replace in a file (see `edit.rs` for the exact rules), atomically
//! and undoably, or as a dry run that shows the diff.

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::journal::{JournalOp, content_hash};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::coalesce;
use super::edit::{self, EditRequest, Edited, Landed};
use super::write::{self, Before, Place};
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The path: relative to the root, or absolute inside a root.
    path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// The text to find. Exact first; if it is not there exactly, a match that ignores
    /// whitespace is used when it lands in exactly one place. Every exact occurrence is
    /// replaced. Empty: create the file (if missing), or replace the line range.
    #[serde(default)]
    search: String,
    /// What replaces the search text (or the line range).
    #[serde(default)]
    replace: String,
    /// First line (1-based) of a range to replace (empty search) or to search in.
    #[serde(default)]
    #[schemars(range(min = 1))]
    start_line: Option<usize>,
    /// Last line of the range, inclusive; past the end means the last line.
    #[serde(default)]
    #[schemars(range(min = 1))]
    end_line: Option<usize>,
    /// Several search/replace pairs applied in order, all or nothing (instead of
    /// search/replace).
    #[serde(default)]
    edits: Option<Vec<Pair>>,
    /// Show the unified diff without writing.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Pair {
    search: String,
    replace: String,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    /// `created`, `lines`, `exact` or `whitespace-tolerant` (the last edit's).
    matched: String,
    /// Lines where the (last) edit landed.
    lines: Vec<usize>,
    /// Whether the file was written (false for a dry run or an edit that changed nothing).
    written: bool,
    /// The unified diff of the change.
    diff: String,
    call_id: String,
}

pub struct EditFile {
    def: ToolDef,
}

impl EditFile {
    pub fn new() -> EditFile {
        EditFile {
            def: write::writer::<Args, Output>(
                "edit_file",
                "Edit a file",
                "Replace text in a file under a read-write root and return the unified diff. The \
                 search is matched exactly (every occurrence is replaced), else ignoring whitespace \
                 if that lands in exactly one place. An empty search creates a missing file. \
                 start_line/end_line replace those lines (empty search) or confine the search; \
                 start_line 1 to the last line with an empty search rewrites the whole file. A miss \
                 names the nearest line. `edits` applies several pairs in order, all or nothing. \
                 dry_run shows the diff without writing. Atomic and journalled: revert_file undoes it.",
                true,
                false,
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for EditFile {
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
        let ranged = args.start_line.is_some() || args.end_line.is_some();
        if args.edits.is_some() && (!args.search.is_empty() || !args.replace.is_empty() || ranged) {
            return Err(ToolError::InvalidArguments(
                "give either edits or search/replace (with an optional line range), not both"
                    .into(),
            ));
        }
        if let (Some(s), Some(e)) = (args.start_line, args.end_line)
            && e < s
        {
            return Err(ToolError::InvalidArguments(format!(
                "end_line {e} is before start_line {s}"
            )));
        }
        // A new file's folders are made only once the edit is known to be written: a dry run or
        // a failing edit leaves nothing behind.
        let place = write::place(&cx, args.root.as_deref(), &args.path, "edit")?;
        let (root, rel) = match &place {
            Place::Ready(t) => (t.root, t.rel.clone()),
            Place::NoFolder { root, rel } => (*root, rel.clone()),
        };
        let shown = root.display(&rel);
        let requests: Vec<(String, String, Option<usize>, Option<usize>)> = match args.edits {
            Some(pairs) if pairs.is_empty() => {
                return Err(ToolError::InvalidArguments("edits is empty".into()));
            }
            Some(pairs) => pairs
                .into_iter()
                .map(|p| (p.search, p.replace, None, None))
                .collect(),
            None => vec![(args.search, args.replace, args.start_line, args.end_line)],
        };
        let max = cx.limits.write_file_bytes;
        let run = {
            let shown = shown.clone();
            move |current: Option<&[u8]>| edit_text(&shown, current, &requests, max)
        };
        let (before, edited, written) = match place {
            // The common case goes through the file's queue, in a batch with other edits to it.
            Place::Ready(t) if !args.dry_run => {
                let change = coalesce::Change {
                    entry: write::entry(&cx, "edit_file", JournalOp::Write, &root.name, &rel),
                    cancel: cx.cancel.clone(),
                    edit: Box::new(run),
                    receipt: cx.receipt.clone(),
                };
                let at = coalesce::Place::of(t, &cx.roots, &cx.ledger, max);
                let applied = coalesce::apply(at, change).await?;
                (applied.before, applied.edited, applied.written)
            }
            // A dry run, or a new file whose folder is not there yet.
            place => {
                let _guard = match &place {
                    Place::Ready(t) => write::lock(&[&t.real]).await,
                    Place::NoFolder { .. } => Vec::new(),
                };
                let before = match &place {
                    Place::Ready(t) => write::read_before(t, max)?,
                    Place::NoFolder { .. } => Before::Absent,
                };
                let current = match &before {
                    Before::Absent => None,
                    Before::File { bytes, .. } => Some(bytes.as_slice()),
                };
                let edited = run(current)?;
                let current = current.map(|b| String::from_utf8_lossy(b).into_owned());
                let written = !args.dry_run && current.as_deref() != Some(edited.text.as_str());
                if written {
                    // Only a new file in a missing folder gets here: make the folders now.
                    write::commit_receipt(&cx).await?;
                    let t = write::target(&cx, Some(&root.name), &rel, "edit", true)?;
                    let _created_guard = write::lock(&[&t.real]).await;
                    if !matches!(write::read_before(&t, max)?, Before::Absent) {
                        return Err(ToolError::failed(format!(
                            "{shown} was created by someone else meanwhile; nothing was written, try again"
                        )));
                    }
                    let after = content_hash(edited.text.as_bytes());
                    write::journal_and_replace(
                        &cx,
                        "edit_file",
                        &t,
                        &Before::Absent,
                        edited.text.as_bytes(),
                        after,
                    )
                    .await?;
                }
                (current, edited, written)
            }
        };
        let changed = before.as_deref() != Some(edited.text.as_str());
        let diff = edit::unified_diff(&rel, before.as_deref().unwrap_or(""), &edited.text);
        let landed = edited.landed;
        let (matched, lines) = match &landed {
            Landed::Created => ("created", vec![1]),
            Landed::Lines { start, end } => ("lines", vec![*start, *end]),
            Landed::Exact { at_lines } => ("exact", at_lines.clone()),
            Landed::Tolerant { start, end } => ("whitespace-tolerant", vec![*start, *end]),
        };
        let head = match (&landed, args.dry_run, changed) {
            (_, _, false) => format!("{shown}: the edit changes nothing; the file was not written"),
            (_, true, true) => {
                format!("{shown}: dry run, nothing written. The edit would make this change:")
            }
            (Landed::Created, _, _) => format!("created {shown}. revert_file undoes it."),
            (Landed::Exact { at_lines }, _, _) if at_lines.len() > 1 => format!(
                "edited {shown}: replaced {} occurrences. revert_file undoes it.",
                at_lines.len()
            ),
            (Landed::Tolerant { .. }, _, _) => format!(
                "edited {shown} (matched ignoring whitespace, lines {}-{}). revert_file undoes it.",
                lines[0], lines[1]
            ),
            _ => format!("edited {shown}. revert_file undoes it."),
        };
        let text = if changed {
            format!("{head}\n{diff}")
        } else {
            head
        };
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(Output {
                root: root.name.clone(),
                path: rel,
                matched: matched.into(),
                lines,
                written,
                diff,
                call_id: cx.call_id.clone(),
            })
            .unwrap_or_default(),
        ))
    }
}

/// Applies `requests` (search, replace, start line, end line) in order to `current`, all or
/// nothing, and checks the result against the write limit `max`.
fn edit_text(
    shown: &str,
    current: Option<&[u8]>,
    requests: &[(String, String, Option<usize>, Option<usize>)],
    max: u64,
) -> Result<Edited, ToolError> {
    let current = match current {
        None => None,
        Some(bytes) => Some(std::str::from_utf8(bytes).map_err(|_| {
            ToolError::failed(format!(
                "{shown} is not UTF-8 text, so it cannot be edited as text; write_file replaces it whole"
            ))
        })?),
    };
    let mut text: Option<String> = current.map(str::to_string);
    let mut landed = Landed::Created;
    for (i, (search, replace, start_line, end_line)) in requests.iter().enumerate() {
        let req = EditRequest {
            search,
            replace,
            start_line: *start_line,
            end_line: *end_line,
        };
        let edited = edit::apply(text.as_deref(), &req).map_err(|e| {
            let which = if requests.len() > 1 {
                format!("edit {} of {}: ", i + 1, requests.len())
            } else {
                String::new()
            };
            ToolError::failed(format!("{shown}: {which}{e}; the file is unchanged"))
        })?;
        text = Some(edited.text);
        landed = edited.landed;
    }
    let text = text.unwrap_or_default();
    write::check_len(max, shown, text.len())?;
    Ok(Edited { text, landed })
}

//! `read_file`: a text file under a root, whole or by lines (a range, the head or the tail).
//!
//! Whole reads are refused past the size limit with a message naming the ranged forms, so a
//! model never pulls a 2 GB log into its context by accident. Binary files (a NUL byte in the
//! first block, or bytes that are not UTF-8) are described, not dumped.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::truncate::{bound_partial, bound_text};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args};

/// Files up to this size are read on the calling task; larger ones on the blocking pool.
pub const MAX_INLINE_READ: u64 = 256 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// Path of the file: relative to the root, or absolute inside a root.
    pub path: String,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    pub root: Option<String>,
    /// First line to return (1-based). Use with `end_line` for a range.
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Last line to return (inclusive). Past the end means "to the end".
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
    /// Return only the first N lines.
    #[schemars(range(min = 1))]
    pub head: Option<u64>,
    /// Return only the last N lines.
    #[schemars(range(min = 1, max = 100000))]
    pub tail: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct Output {
    pub root: String,
    pub path: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// First line returned (1-based); absent for a whole read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// Last line returned; absent for a whole read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Lines in the file, when the read went through all of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<u64>,
    /// Whether `content` was cut to the result limit.
    pub truncated: bool,
    pub content: String,
}

/// Which part of the file to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Whole,
    Lines { start: u64, end: u64 },
    Tail(u64),
}

fn span(a: &Args) -> Result<Span, ToolError> {
    let ranged = a.start_line.is_some() || a.end_line.is_some();
    match (ranged, a.head, a.tail) {
        (false, None, None) => Ok(Span::Whole),
        (true, None, None) => {
            let start = a.start_line.unwrap_or(1);
            let end = a.end_line.unwrap_or(u64::MAX);
            if start > end {
                return Err(ToolError::InvalidArguments(format!(
                    "start_line {start} is after end_line {end}"
                )));
            }
            Ok(Span::Lines { start, end })
        }
        (false, Some(n), None) => Ok(Span::Lines { start: 1, end: n }),
        (false, None, Some(n)) => Ok(Span::Tail(n)),
        _ => Err(ToolError::InvalidArguments(
            "give at most one of: a line range (start_line/end_line), head, or tail".into(),
        )),
    }
}

pub struct ReadFile {
    def: ToolDef,
}

impl ReadFile {
    pub fn new() -> ReadFile {
        ReadFile {
            def: super::reader::<Args, Output>(
                "read_file",
                "Read a file",
                "Read a text file under a root. Whole, or part of it: `start_line`/`end_line` (1-based, \
                 inclusive), `head` (first N lines) or `tail` (last N lines). Large files must be read by \
                 part; binary files are described, not shown. Credential files (.env, keys, .ssh) are refused.",
            )
            .declaring(ArgumentKinds::paths(&["path"])),
        }
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let span = span(&args)?;
        let mut rel = String::new();
        let loc = cx
            .roots
            .locate(args.root.as_deref(), &args.path, &mut rel)?;
        let (file, meta) = loc.root.open_file(loc.rel, cx.opening())?;
        let size = meta.len();
        let shown = loc.root.display(loc.rel);
        if span == Span::Whole && size > cx.limits.read_file_bytes {
            return Err(ToolError::failed(format!(
                "{shown} is {size} bytes, over the {}-byte limit for a whole read; \
                 read it in parts with start_line/end_line, head or tail",
                cx.limits.read_file_bytes
            )));
        }
        let limit = cx.limits.result_chars;
        let bounds = Bounds {
            keep_bytes: limit * 4 + 4,
            cancel: cx.cancel.clone(),
        };
        let read = if span == Span::Whole && size <= MAX_INLINE_READ {
            read_span(file, span, &shown, &bounds)
        } else {
            let shown = shown.clone();
            blocking(move || read_span(file, span, &shown, &bounds)).await
        }?;
        // A read that stopped early does not know its full length; a tail keeps its end.
        let (content, truncated) = if read.cut || span_is_tail(span) {
            let content = bound_partial(&read.text, limit, span_is_tail(span), read.cut);
            let truncated = read.cut || content.len() != read.text.len();
            (content, truncated)
        } else {
            let bounded = bound_text(&read.text, limit);
            let truncated = bounded.len() != read.text.len();
            (bounded.into_owned(), truncated)
        };
        let output = Output {
            root: loc.root.name.clone(),
            path: loc.rel.to_string(),
            size,
            start_line: read.first,
            end_line: read.last,
            total_lines: read.total,
            truncated,
            content,
        };
        let text = output.content.clone();
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

fn span_is_tail(span: Span) -> bool {
    matches!(span, Span::Tail(_))
}

struct Slice {
    text: String,
    first: Option<u64>,
    last: Option<u64>,
    total: Option<u64>,
    /// Lines were left out or cut short to stay within [`Bounds::keep_bytes`].
    cut: bool,
}

/// What a line read may hold and when it must stop: however large the file or its lines,
/// memory stays within a few result budgets, and a cancelled call stops reading.
struct Bounds {
    keep_bytes: usize,
    cancel: tokio_util::sync::CancellationToken,
}

/// Lines read between checks of the cancellation token.
const CHECK_EVERY: u64 = 4096;

/// Reads the next line into `out`, at most `max` bytes of it (the rest of a longer line is
/// skipped). `None` at the end of the file; `Some(true)` when the line was cut.
fn next_line(
    reader: &mut BufReader<File>,
    out: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    out.clear();
    let n = (&mut *reader).take(max as u64).read_until(b'\n', out)?;
    if n == 0 {
        return Ok(None);
    }
    let cut = n == max && !out.ends_with(b"\n");
    if cut {
        reader.skip_until(b'\n')?;
    }
    Ok(Some(cut))
}

/// `bytes` as text: a line cut inside a multi-byte character keeps its valid part; anything
/// else that is not UTF-8 makes the file binary.
fn line_text(bytes: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) if cut && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

fn binary(shown: &str, size: u64) -> ToolError {
    ToolError::failed(format!(
        "{shown} is a binary file ({size} bytes) or not UTF-8 text; read_file shows text only"
    ))
}

/// Bytes at the start of a file checked for NUL bytes, whichever way the file is read.
const FIRST_BLOCK: usize = 8192;

/// A line reader over `file` that refuses a binary file up front. Checking the first block,
/// not the first line, keeps line reads in step with whole reads: a short text header must not
/// let `tail` or a range dump the binary body that a whole read refuses.
fn text_lines(file: File, shown: &str, size: u64) -> Result<BufReader<File>, ToolError> {
    let mut reader = BufReader::with_capacity(FIRST_BLOCK, file);
    let head = reader
        .fill_buf()
        .map_err(|e| ToolError::failed(format!("{shown}: {e}")))?;
    if super::looks_binary(head) {
        return Err(binary(shown, size));
    }
    Ok(reader)
}

fn read_span(file: File, span: Span, shown: &str, bounds: &Bounds) -> Result<Slice, ToolError> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let io = |e: std::io::Error| ToolError::failed(format!("{shown}: {e}"));
    match span {
        Span::Whole => {
            let mut bytes = Vec::with_capacity(size as usize + 1);
            (&file).read_to_end(&mut bytes).map_err(io)?;
            if super::looks_binary(&bytes[..bytes.len().min(FIRST_BLOCK)]) {
                return Err(binary(shown, size));
            }
            let text = String::from_utf8(bytes).map_err(|_| binary(shown, size))?;
            let total = text.lines().count() as u64;
            Ok(Slice {
                text,
                first: None,
                last: None,
                total: Some(total),
                cut: false,
            })
        }
        Span::Lines { start, end } => {
            let mut reader = text_lines(file, shown, size)?;
            let mut text = String::new();
            let mut line = Vec::new();
            let mut n = 0u64;
            let mut cut = false;
            while let Some(line_cut) =
                next_line(&mut reader, &mut line, bounds.keep_bytes).map_err(io)?
            {
                n += 1;
                if n.is_multiple_of(CHECK_EVERY) && bounds.cancel.is_cancelled() {
                    return Err(ToolError::Cancelled);
                }
                if n >= start {
                    text.push_str(line_text(&line, line_cut).ok_or_else(|| binary(shown, size))?);
                    cut |= line_cut;
                    if text.len() >= bounds.keep_bytes {
                        // Enough for any result: stop reading, report where.
                        cut = true;
                        break;
                    }
                }
                if n >= end {
                    break;
                }
            }
            let reached_end = n < end && !cut;
            if start > n && !(n == 0 && start == 1) {
                return Err(ToolError::InvalidArguments(format!(
                    "{shown} has {n} lines; start_line {start} is past the end"
                )));
            }
            Ok(Slice {
                text,
                first: Some(start),
                last: Some(n.min(end)),
                total: reached_end.then_some(n),
                cut,
            })
        }
        Span::Tail(count) => {
            // One pass, keeping the last `count` lines but never more than `keep_bytes`: the
            // end of the file is what a tail is for, so it is the front that gives way.
            let mut reader = text_lines(file, shown, size)?;
            let mut lines: VecDeque<(String, bool)> = VecDeque::new();
            let mut kept = 0usize;
            let mut dropped_for_room = false;
            let mut line = Vec::new();
            let mut n = 0u64;
            while let Some(line_cut) =
                next_line(&mut reader, &mut line, bounds.keep_bytes).map_err(io)?
            {
                n += 1;
                if n.is_multiple_of(CHECK_EVERY) && bounds.cancel.is_cancelled() {
                    return Err(ToolError::Cancelled);
                }
                let text = line_text(&line, line_cut).ok_or_else(|| binary(shown, size))?;
                kept += text.len();
                lines.push_back((text.to_string(), line_cut));
                if lines.len() as u64 > count {
                    kept -= lines.pop_front().map_or(0, |(l, _)| l.len());
                }
                while kept > bounds.keep_bytes && lines.len() > 1 {
                    kept -= lines.pop_front().map_or(0, |(l, _)| l.len());
                    dropped_for_room = true;
                }
            }
            let cut = dropped_for_room || lines.iter().any(|(_, cut)| *cut);
            let first = n.saturating_sub(lines.len() as u64) + 1;
            Ok(Slice {
                text: lines.into_iter().map(|(l, _)| l).collect(),
                first: Some(first.min(n.max(1))),
                last: Some(n),
                total: Some(n),
                cut,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(start: Option<u64>, end: Option<u64>, head: Option<u64>, tail: Option<u64>) -> Args {
        Args {
            path: "x".into(),
            root: None,
            start_line: start,
            end_line: end,
            head,
            tail,
        }
    }

    #[test]
    fn spans() {
        assert_eq!(span(&args(None, None, None, None)).unwrap(), Span::Whole);
        assert_eq!(
            span(&args(Some(2), None, None, None)).unwrap(),
            Span::Lines {
                start: 2,
                end: u64::MAX
            }
        );
        assert_eq!(
            span(&args(None, None, Some(3), None)).unwrap(),
            Span::Lines { start: 1, end: 3 }
        );
        assert_eq!(
            span(&args(None, None, None, Some(3))).unwrap(),
            Span::Tail(3)
        );
        assert!(span(&args(Some(5), Some(2), None, None)).is_err());
        assert!(span(&args(Some(1), None, Some(2), None)).is_err());
        assert!(span(&args(None, None, Some(1), Some(2))).is_err());
    }
}

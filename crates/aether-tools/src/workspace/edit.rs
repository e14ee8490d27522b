//! The edit `edit_file` makes, as a pure function of the text: no IO.
//!
//! Search-and-replace first: an exact match (every occurrence is replaced), then, when there
//! is none, a whitespace-tolerant match (lines compared with their whitespace collapsed) if it
//! lands in exactly one place. An empty search creates a missing file. `start_line`/`end_line`
//! replace those lines outright (empty search) or confine the search to them; 1 to the end
//! with an empty search rewrites the whole file, and an `end_line` past the end is clamped. A
//! miss names the nearest line, so the caller can fix its search text without reading the file
//! again, and names the whole-file form when the search was most of the file. A replace that
//! matched several times and would insert more than the text it edits is refused.

use std::fmt::Write as _;

/// One edit as asked for.
#[derive(Clone, Debug, Default)]
pub struct EditRequest<'a> {
    pub search: &'a str,
    pub replace: &'a str,
    pub start_line: Option<usize>,
    pub end_line: Option<usize>,
}

/// How an edit landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landed {
    /// The file did not exist; the replacement is its content.
    Created,
    /// Lines `start..=end` were replaced outright.
    Lines { start: usize, end: usize },
    /// The search matched exactly, at these lines (1-based, where each match starts).
    Exact { at_lines: Vec<usize> },
    /// The search matched once with whitespace tolerated, at these lines.
    Tolerant { start: usize, end: usize },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edited {
    pub text: String,
    pub landed: Landed,
}

/// Applies one edit to `current` (`None`: the file does not exist).
pub fn apply(current: Option<&str>, req: &EditRequest<'_>) -> Result<Edited, String> {
    let Some(text) = current else {
        if req.search.is_empty() {
            return Ok(Edited {
                text: req.replace.to_string(),
                landed: Landed::Created,
            });
        }
        return Err(
            "the file does not exist, so the search text cannot be found; to create the file, \
             give an empty search and the content as the replacement"
                .into(),
        );
    };
    // The common case, an exact search of the whole file, needs no line table.
    let whole = req.start_line.is_none() && req.end_line.is_none();
    if whole
        && !req.search.is_empty()
        && let Some(edited) = exact(text, 0, text.len(), 1, req)?
    {
        return Ok(edited);
    }
    let lines = split_lines(text);
    let count = lines.len();
    let range = match (req.start_line, req.end_line) {
        (None, None) => None,
        (start, end) => {
            let start = start.unwrap_or(1);
            if start == 0 {
                return Err("start_line counts from 1".into());
            }
            if start > count.max(1) {
                return Err(format!(
                    "start_line {start} is past the end: the file has {count} line(s)"
                ));
            }
            // An end past the last line is clamped to it.
            let end = end.unwrap_or(count).min(count).max(start);
            Some((start, end))
        }
    };
    if req.search.is_empty() {
        return match range {
            Some((start, end)) => Ok(Edited {
                text: replace_lines(&lines, start, end, req.replace),
                landed: Landed::Lines { start, end },
            }),
            None => Err(format!(
                "the search is empty and the file exists ({count} lines): an empty search only \
                 creates a missing file. To rewrite the whole file, give start_line 1 and end_line \
                 {count} with the empty search, or use write_file"
            )),
        };
    }
    // The part of the text the search may match in, and where it starts.
    let (lo, hi) = match range {
        Some((start, end)) => (
            offset_of_line(&lines, start),
            offset_of_line(&lines, end + 1),
        ),
        None => (0, text.len()),
    };
    let first_line = range.map_or(1, |(s, _)| s);
    if let Some(edited) = exact(text, lo, hi, first_line, req)? {
        return Ok(edited);
    }
    // Whitespace-tolerant: compare lines with whitespace collapsed.
    let want: Vec<String> = req.search.lines().map(collapse).collect();
    let want: Vec<&str> = trim_blank_ends(&want);
    // An empty file has no lines, though a range on it is clamped to line 1.
    let (first_idx, last_idx) = match range {
        Some((s, e)) => ((s - 1).min(count), e.min(count)),
        None => (0, count),
    };
    let have: Vec<String> = lines.iter().map(|l| collapse(l)).collect();
    let mut places = Vec::new();
    if !want.is_empty() && want.len() <= last_idx - first_idx {
        for i in first_idx..=(last_idx - want.len()) {
            if have[i..i + want.len()]
                .iter()
                .zip(&want)
                .all(|(h, w)| h == w)
            {
                places.push(i);
            }
        }
    }
    match places.as_slice() {
        [i] => {
            let (start, end) = (i + 1, i + want.len());
            let replacement = reindent(req.search, req.replace, lines[*i]);
            Ok(Edited {
                text: replace_lines(&lines, start, end, &replacement),
                landed: Landed::Tolerant { start, end },
            })
        }
        [] => Err(miss(text, &lines, req.search, range)),
        many => Err(format!(
            "the search is not in the file exactly; ignoring whitespace it matches {} places (lines {}). \
             Add surrounding lines to the search so it matches once, or confine it with start_line/end_line",
            many.len(),
            many.iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The message for a search that matched nowhere: the nearest line, and the whole-file form
/// when the search was most of the file.
fn miss(text: &str, lines: &[&str], search: &str, range: Option<(usize, usize)>) -> String {
    let probe = search
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(search);
    let (from, to) = range.map_or((1, lines.len()), |(s, e)| (s, e));
    let mut best: Option<(f32, usize)> = None;
    for n in from..=to.min(lines.len()) {
        let line = lines[n - 1].trim();
        if line.is_empty() {
            continue;
        }
        let score = similar::TextDiff::from_chars(probe, line).ratio();
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, n));
        }
    }
    let mut msg = String::from("the search text is not in the file");
    if let Some((s, e)) = range {
        let _ = write!(msg, " between lines {s} and {e}");
    }
    msg.push_str(" (not exactly, and not ignoring whitespace).");
    if let Some((score, n)) = best.filter(|(score, _)| *score > 0.3) {
        let shown: String = lines[n - 1]
            .trim_end_matches(['\n', '\r'])
            .chars()
            .take(200)
            .collect();
        let _ = write!(
            msg,
            " The nearest line is {n} ({:.0}% alike): {shown:?}.",
            score * 100.0
        );
    }
    if search.len() * 2 > text.len() {
        let _ = write!(
            msg,
            " The search is most of the file: to rewrite the whole file, give start_line 1 and end_line {} \
             with an empty search, or use write_file.",
            lines.len()
        );
    }
    msg
}

/// Replaces every exact occurrence of the search in `text[lo..hi]` (whose first line is
/// `first_line`), or `None` if there is none.
fn exact(
    text: &str,
    lo: usize,
    hi: usize,
    first_line: usize,
    req: &EditRequest<'_>,
) -> Result<Option<Edited>, String> {
    let scope = &text[lo..hi];
    let found: Vec<usize> = scope.match_indices(req.search).map(|(i, _)| i).collect();
    if found.is_empty() {
        return Ok(None);
    }
    let inserted = found.len() * req.replace.len();
    if found.len() > 1 && inserted > scope.len() {
        return Err(format!(
            "the search matches {} places, and replacing them all would insert {inserted} bytes, \
             more than the {} bytes of text being edited; refused rather than repeated. Add \
             surrounding lines to the search so it matches once, or confine it with \
             start_line/end_line",
            found.len(),
            scope.len()
        ));
    }
    let at_lines = found
        .iter()
        .map(|&i| first_line + scope[..i].matches('\n').count())
        .collect();
    let mut out = String::with_capacity(text.len() + inserted);
    out.push_str(&text[..lo]);
    out.push_str(&scope.replace(req.search, req.replace));
    out.push_str(&text[hi..]);
    Ok(Some(Edited {
        text: out,
        landed: Landed::Exact { at_lines },
    }))
}

/// The text's lines, each with its line ending (the last may have none).
fn split_lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// Byte offset where 1-based line `n` starts (`n` past the end: the text's length).
fn offset_of_line(lines: &[&str], n: usize) -> usize {
    lines
        .iter()
        .take(n.saturating_sub(1))
        .map(|l| l.len())
        .sum()
}

/// Lines `start..=end` (1-based) replaced by `replacement`. A replaced block that ended a line
/// keeps the line ending, so the next line does not join it.
fn replace_lines(lines: &[&str], start: usize, end: usize, replacement: &str) -> String {
    let mut out = String::new();
    for l in &lines[..start - 1] {
        out.push_str(l);
    }
    out.push_str(replacement);
    let ended = lines
        .get(end.saturating_sub(1))
        .is_some_and(|l| l.ends_with('\n'));
    if ended && !replacement.is_empty() && !replacement.ends_with('\n') {
        out.push('\n');
    }
    for l in lines.get(end..).unwrap_or_default() {
        out.push_str(l);
    }
    out
}

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn trim_blank_ends(lines: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = lines.iter().map(String::as_str).collect();
    while v.first().is_some_and(|l| l.is_empty()) {
        v.remove(0);
    }
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// The replacement re-indented from the search's indentation to what the file has.
fn reindent(search: &str, replace: &str, matched_first: &str) -> String {
    let indent =
        |s: &str| -> String { s.chars().take_while(|c| c == &' ' || c == &'\t').collect() };
    let from = indent(search.lines().find(|l| !l.trim().is_empty()).unwrap_or(""));
    let to = indent(matched_first);
    if from == to {
        return replace.to_string();
    }
    replace
        .split_inclusive('\n')
        .map(|l| match l.strip_prefix(from.as_str()) {
            Some(rest) if !l.trim().is_empty() => format!("{to}{rest}"),
            _ => l.to_string(),
        })
        .collect()
}

/// A unified diff of `before` → `after`, labelled with `name`.
pub fn unified_diff(name: &str, before: &str, after: &str) -> String {
    // Only the changed middle is diffed: the lines both texts share at the start and at the
    // end, less the context kept around a change, are left out, and the hunk headers are moved
    // down by the lines dropped from the start. An edit touches a few lines of a file; diffing
    // it whole cost more than everything else an edit does.
    let (b, a) = (before.as_bytes(), after.as_bytes());
    // `similar` also breaks lines at a lone CR, which the trimming below does not count: such
    // text is diffed whole.
    if b.contains(&b'\r') || a.contains(&b'\r') {
        return whole_diff(name, before, after);
    }
    let same = common_prefix(b, a);
    let tail = common_suffix(&b[same..], &a[same..]);
    // Whole lines shared at the start end at the last newline before the first difference;
    // whole lines shared at the end start after the first newline of the shared tail.
    let mut start = b[..same]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    let tail_at = b.len() - tail;
    let mut end_b = b[tail_at..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |i| tail_at + i + 1);
    for _ in 0..CONTEXT {
        if start == 0 {
            break;
        }
        start = b[..start - 1]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
    }
    for _ in 0..CONTEXT {
        if end_b == b.len() {
            break;
        }
        end_b = b[end_b..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |i| end_b + i + 1);
    }
    let end_a = a.len() - (b.len() - end_b);
    let skip = b[..start].iter().filter(|&&c| c == b'\n').count();
    let diff = whole_diff(name, &before[start..end_b], &after[start..end_a]);
    if skip == 0 {
        return diff;
    }
    let mut shifted = String::with_capacity(diff.len() + 16);
    for line in diff.split_inclusive('\n') {
        // The two header lines name the file and are never shifted.
        if line.starts_with("--- ") || line.starts_with("+++ ") {
            shifted.push_str(line);
            continue;
        }
        match shift_hunk_header(line, skip) {
            Some(header) => shifted.push_str(&header),
            None => shifted.push_str(line),
        }
    }
    shifted
}

/// How many bytes `a` and `b` share at the start.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 64 <= n && a[i..i + 64] == b[i..i + 64] {
        i += 64;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// How many bytes `a` and `b` share at the end.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 64 <= n && a[a.len() - i - 64..a.len() - i] == b[b.len() - i - 64..b.len() - i] {
        i += 64;
    }
    while i < n && a[a.len() - i - 1] == b[b.len() - i - 1] {
        i += 1;
    }
    i
}

/// The unified diff of two whole texts.
fn whole_diff(name: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(CONTEXT)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

/// Lines of context around each change in a diff.
const CONTEXT: usize = 3;

/// `line` with its ranges moved down by `by` lines, if it is a hunk header
/// (`@@ -start[,len] +start[,len] @@`).
fn shift_hunk_header(line: &str, by: usize) -> Option<String> {
    let rest = line.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let (new, tail) = rest.split_once(" @@")?;
    let shift = |range: &str| -> Option<String> {
        let (start, len) = match range.split_once(',') {
            Some((s, l)) => (s, Some(l)),
            None => (range, None),
        };
        let start: usize = start.parse().ok()?;
        Some(match len {
            Some(len) => format!("{},{len}", start + by),
            None => format!("{}", start + by),
        })
    };
    Some(format!("@@ -{} +{} @@{tail}", shift(old)?, shift(new)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_in_an_empty_file_misses_cleanly() {
        for (search, start) in [
            ("x", Some(1)),
            ("  ", Some(1)),
            ("x", None),
            ("  \n ", None),
        ] {
            let req = EditRequest {
                search,
                replace: "y",
                start_line: start,
                end_line: None,
            };
            let err = apply(Some(""), &req).unwrap_err();
            assert!(err.contains("not in the file"), "{search:?}: {err}");
        }
    }

    #[test]
    fn the_trimmed_diff_is_the_whole_texts_diff() {
        let lines: Vec<String> = (1..=60).map(|i| format!("line {}\n", i % 7)).collect();
        let base = lines.concat();
        let mut cases: Vec<(String, String)> = vec![
            (base.clone(), base.clone()),
            (String::new(), "new\n".into()),
            ("a\n".into(), String::new()),
            ("a\nb".into(), "a\nc".into()),
            ("x\ny\nz".into(), "x\ny\nz\n".into()),
        ];
        for at in [0, 1, 2, 3, 4, 10, 30, 56, 57, 58, 59] {
            let mut changed = lines.clone();
            changed[at] = "changed\n".into();
            cases.push((base.clone(), changed.concat()));
            let mut inserted = lines.clone();
            inserted.insert(at, "inserted\n".into());
            cases.push((base.clone(), inserted.concat()));
            let mut removed = lines.clone();
            removed.remove(at);
            cases.push((base.clone(), removed.concat()));
            // Two changes far apart (two hunks) and close together (one).
            let mut two = lines.clone();
            two[at] = "first\n".into();
            two[(at + 20) % 60] = "second\n".into();
            cases.push((base.clone(), two.concat()));
            let mut near = lines.clone();
            near[at] = "first\n".into();
            near[(at + 4) % 60] = "second\n".into();
            cases.push((base.clone(), near.concat()));
        }
        // Lone CRs (which similar counts as line breaks) and CRLF.
        let cr = base.replace("line 1\n", "line 1\r");
        cases.push((cr.clone(), cr.replace("line 5\n", "five\n")));
        let crlf = base.replace('\n', "\r\n");
        cases.push((crlf.clone(), crlf.replace("line 5\r\n", "five\r\n")));
        // No newline at the end, changed near the end.
        let trimmed = base.trim_end().to_string();
        cases.push((trimmed.clone(), format!("{trimmed} more")));
        cases.push((trimmed.clone(), trimmed.replace("line 3\nline 4", "x")));
        for (before, after) in cases {
            assert_eq!(
                unified_diff("f.txt", &before, &after),
                whole_diff("f.txt", &before, &after),
                "before:\n{before}\nafter:\n{after}"
            );
        }
    }

    fn edit(text: Option<&str>, search: &str, replace: &str) -> Result<Edited, String> {
        apply(
            text,
            &EditRequest {
                search,
                replace,
                ..Default::default()
            },
        )
    }

    fn ranged(
        text: &str,
        search: &str,
        replace: &str,
        s: usize,
        e: usize,
    ) -> Result<Edited, String> {
        apply(
            Some(text),
            &EditRequest {
                search,
                replace,
                start_line: Some(s),
                end_line: Some(e),
            },
        )
    }

    #[test]
    fn exact_match_replaces_every_occurrence() {
        let e = edit(Some("a x b\nx\n"), "x", "y").unwrap();
        assert_eq!(e.text, "a y b\ny\n");
        assert_eq!(
            e.landed,
            Landed::Exact {
                at_lines: vec![1, 2]
            }
        );
    }

    #[test]
    fn whitespace_tolerant_match_when_unique_and_reindented() {
        let text = "fn main() {\n        let a  =  1;\n        call(a);\n}\n";
        let e = edit(Some(text), "let a = 1;\ncall(a);", "let a = 2;\ncall(a);\n").unwrap();
        assert_eq!(e.landed, Landed::Tolerant { start: 2, end: 3 });
        assert_eq!(
            e.text,
            "fn main() {\n        let a = 2;\n        call(a);\n}\n"
        );
    }

    #[test]
    fn whitespace_tolerant_match_in_two_places_is_refused() {
        let err = edit(Some("  a\nb\n a\n"), "a ", "c").unwrap_err();
        assert!(err.contains("matches 2 places (lines 1, 3)"), "{err}");
    }

    #[test]
    fn empty_search_creates_a_missing_file_only() {
        assert_eq!(edit(None, "", "new\n").unwrap().landed, Landed::Created);
        let err = edit(Some("x\ny\n"), "", "z").unwrap_err();
        assert!(err.contains("start_line 1 and end_line 2"), "{err}");
        assert!(edit(None, "x", "y").unwrap_err().contains("does not exist"));
    }

    #[test]
    fn line_ranges_replace_or_confine() {
        let text = "1\n2\n3\n4\n";
        assert_eq!(
            ranged(text, "", "two\nthree\n", 2, 3).unwrap().text,
            "1\ntwo\nthree\n4\n"
        );
        // Without a trailing newline in the replacement, the line ending is kept.
        assert_eq!(
            ranged(text, "", "two", 2, 2).unwrap().text,
            "1\ntwo\n3\n4\n"
        );
        // The whole-file form, with end past the end clamped.
        let whole = ranged(text, "", "all new\n", 1, 99).unwrap();
        assert_eq!(whole.text, "all new\n");
        assert_eq!(whole.landed, Landed::Lines { start: 1, end: 4 });
        // Confined: only the match inside the range is replaced.
        let text = "x\nx\nx\n";
        let e = ranged(text, "x", "y", 2, 2).unwrap();
        assert_eq!(e.text, "x\ny\nx\n");
        assert_eq!(e.landed, Landed::Exact { at_lines: vec![2] });
        assert!(
            ranged(text, "", "y", 9, 10)
                .unwrap_err()
                .contains("past the end")
        );
        assert!(ranged(text, "", "y", 0, 1).unwrap_err().contains("from 1"));
    }

    #[test]
    fn a_miss_names_the_nearest_line_and_the_whole_file_form() {
        let text =
            "alpha\nfn compute(x: i32) -> i32 {\n    x * 2\n}\n\nfn other() {}\n// more lines\n";
        let err = edit(Some(text), "fn compute(x: u32) -> u32 {", "y").unwrap_err();
        assert!(err.contains("nearest line is 2"), "{err}");
        assert!(!err.contains("whole file"), "{err}");
        let err = edit(Some("short\n"), "shirt\nand more and more", "y").unwrap_err();
        assert!(err.contains("start_line 1 and end_line 1"), "{err}");
    }

    #[test]
    fn a_multi_match_replace_that_outweighs_the_text_is_refused() {
        let text = "a\n".repeat(50);
        let err = edit(Some(&text), "a", &"long insertion ".repeat(3)).unwrap_err();
        assert!(err.contains("matches 50 places"), "{err}");
        // One match may insert as much as it likes.
        assert!(edit(Some("a\n"), "a", &"b".repeat(1000)).is_ok());
    }

    #[test]
    fn diff_is_unified() {
        let d = unified_diff("f.txt", "a\nb\n", "a\nc\n");
        assert!(
            d.contains("--- a/f.txt") && d.contains("-b") && d.contains("+c"),
            "{d}"
        );
    }
}

//! Bounding what a model reads.
//!
//! Every result is cut to a character budget with a marker that says so, inside the budget,
//! so a model can tell a short file from a cut one and ask for a range.

use std::borrow::Cow;

/// The default bound on a result's text, in characters.
pub const RESULT_CHARS: usize = 24_000;

/// `text` if it fits in `max_chars` characters, else its head and a marker, together no longer
/// than `max_chars`.
pub fn bound_text(text: &str, max_chars: usize) -> Cow<'_, str> {
    // Fast path: a string of at most max_chars bytes has at most max_chars characters.
    if text.len() <= max_chars {
        return Cow::Borrowed(text);
    }
    let total = text.chars().count();
    if total <= max_chars {
        return Cow::Borrowed(text);
    }
    let marker = marker(total);
    let keep = max_chars.saturating_sub(marker.chars().count());
    let cut = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let mut out = String::with_capacity(cut + marker.len());
    out.push_str(&text[..cut]);
    out.push_str(&marker);
    Cow::Owned(out)
}

/// For a selection that was itself cut before it reached here (so its full length is not
/// known): `text` if it fits, else its head, or for `keep_end` its tail, with a marker that
/// says more exists, together no longer than `max_chars`. `always_mark` adds the marker even
/// when `text` fits, because the selection behind it was longer.
pub fn bound_partial(text: &str, max_chars: usize, keep_end: bool, always_mark: bool) -> String {
    let count = text.chars().count();
    if count <= max_chars && !always_mark {
        return text.to_string();
    }
    let marker = if keep_end {
        "[… earlier lines cut by Aether; ask for a range …]\n"
    } else {
        "\n[… truncated by Aether: the selection goes on past this; ask for a narrower range …]"
    };
    let keep = max_chars.saturating_sub(marker.chars().count()).min(count);
    let mut out = String::with_capacity(text.len().min(max_chars * 4) + marker.len());
    if keep_end {
        let start = text
            .char_indices()
            .nth(count - keep)
            .map_or(text.len(), |(i, _)| i);
        out.push_str(marker);
        out.push_str(&text[start..]);
    } else {
        let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
        out.push_str(&text[..end]);
        out.push_str(marker);
    }
    out
}

fn marker(total: usize) -> String {
    format!(
        "\n[… truncated by Aether: {total} characters in all, cut here; ask for a narrower range …]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_selections_keep_the_head_or_the_tail_within_the_bound() {
        let text = format!("{}END", "a".repeat(1000));
        let head = bound_partial(&text, 200, false, false);
        assert!(head.chars().count() <= 200 && head.starts_with("aaa") && head.contains("goes on"));
        let tail = bound_partial(&text, 200, true, false);
        assert!(
            tail.chars().count() <= 200 && tail.ends_with("END") && tail.starts_with("[… earlier")
        );
        assert_eq!(bound_partial("short", 200, false, false), "short");
        assert!(bound_partial("short", 200, false, true).starts_with("short\n[… truncated"));
    }

    #[test]
    fn short_text_is_untouched() {
        assert!(matches!(bound_text("hello", 10), Cow::Borrowed("hello")));
    }

    #[test]
    fn long_text_is_cut_with_a_marker_inside_the_bound() {
        let text = "é".repeat(30_000);
        let out = bound_text(&text, RESULT_CHARS);
        assert!(out.chars().count() <= RESULT_CHARS);
        assert!(out.contains("truncated by Aether: 30000 characters in all"));
        assert!(out.starts_with("éé"));
    }
}

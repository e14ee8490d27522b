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

fn marker(total: usize) -> String {
    format!(
        "\n[… truncated by Aether: {total} characters in all, cut here; ask for a narrower range …]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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

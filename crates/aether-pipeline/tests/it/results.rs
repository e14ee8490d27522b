//! What callers and the audit keep of a result: text bounded to `Limits::result_chars` with
//! Aether's marker; Standard audit rows keep a summary, Elevated rows keep everything.

use std::sync::Arc;

use aether_policy::config::Limits;
use aether_policy::{Tier, canonical_json};
use aether_tools::Tool;
use serde_json::json;

use crate::support::*;

const MARKER: &str = "truncated by Aether";

#[tokio::test]
async fn a_long_result_is_cut_to_result_chars_with_a_marker() {
    let h = Harness::new();
    let ascii = Big::new("big", Tier::Standard, vec!["x".repeat(30_000)]);
    let accented = Big::new("big_accented", Tier::Standard, vec!["é".repeat(30_000)]);
    let fits = Big::new("fits", Tier::Standard, vec!["y".repeat(24_000)]);
    let tools: Vec<Arc<dyn Tool>> = vec![ascii.clone(), accented.clone(), fits.clone()];
    let p = h.pipeline(vec![worker()], Limits::default(), tools).await;
    let ctx = session(&p, "worker", "s1");
    let limit = Limits::default().result_chars;
    assert_eq!(limit, 24_000);

    for (tool, head) in [("big", "xxxxxxxxxx"), ("big_accented", "éééééééééé")] {
        let out = ok_text(&call(&p, &ctx, tool, json!({})).await);
        let chars = out.chars().count();
        assert!(chars <= limit, "{tool}: {chars} characters");
        assert!(
            chars > limit - 200,
            "{tool}: cut far below the bound ({chars})"
        );
        assert!(out.starts_with(head), "{tool}");
        assert!(
            out.contains(MARKER) && out.contains("30000 characters in all"),
            "{tool}: {}",
            &out[out.len() - 200..]
        );
    }
    // A result that fits is untouched.
    let out = ok_text(&call(&p, &ctx, "fits", json!({})).await);
    assert_eq!(out, "y".repeat(24_000));
    assert_eq!((ascii.calls(), accented.calls(), fits.calls()), (1, 1, 1));
    h.check().await;
}

#[tokio::test]
async fn result_chars_is_the_operators_bound() {
    let h = Harness::new();
    let big = Big::new("big", Tier::Standard, vec!["x".repeat(30_000)]);
    let p = h
        .pipeline(
            vec![worker()],
            Limits {
                result_chars: 5_000,
                ..Limits::default()
            },
            vec![big.clone()],
        )
        .await;
    let ctx = session(&p, "worker", "s1");
    let out = ok_text(&call(&p, &ctx, "big", json!({})).await);
    assert!(
        out.chars().count() <= 5_000 && out.chars().count() > 4_800,
        "{}",
        out.chars().count()
    );
    assert!(out.contains(MARKER));
    h.check().await;
}

#[tokio::test]
async fn several_text_blocks_together_fit_result_chars() {
    let h = Harness::new();
    let limit = 2_000;
    let cases: Vec<Vec<String>> = vec![
        // The first block alone overflows.
        vec!["a".repeat(3_000), "b".repeat(3_000), "c".repeat(10)],
        // The first block fits with a little room; the second overflows what is left.
        vec!["a".repeat(1_950), "b".repeat(3_000)],
        // Many small blocks that overflow together.
        (0..50).map(|i| format!("{i:02}").repeat(50)).collect(),
    ];
    let tools: Vec<Arc<dyn Tool>> = cases
        .iter()
        .enumerate()
        .map(|(i, blocks)| {
            Big::new(&format!("blocks{i}"), Tier::Standard, blocks.clone()) as Arc<dyn Tool>
        })
        .collect();
    let p = h
        .pipeline(
            vec![worker()],
            Limits {
                result_chars: limit,
                ..Limits::default()
            },
            tools,
        )
        .await;
    let ctx = session(&p, "worker", "s1");

    for (i, blocks) in cases.iter().enumerate() {
        let out = ok_text(&call(&p, &ctx, &format!("blocks{i}"), json!({})).await);
        let chars = out.chars().count();
        assert!(
            chars <= limit,
            "case {i}: {chars} characters for a bound of {limit}"
        );
        assert!(out.contains(MARKER), "case {i}: cut without saying so");
        assert!(
            out.starts_with(&blocks[0][..100]),
            "case {i}: the head is kept"
        );
    }
    // A multi-block result that fits is untouched.
    let h2 = Harness::new();
    let small = Big::new(
        "small",
        Tier::Standard,
        vec!["a".repeat(900), "b".repeat(900)],
    );
    let p2 = h2
        .pipeline(
            vec![worker()],
            Limits {
                result_chars: limit,
                ..Limits::default()
            },
            vec![small.clone()],
        )
        .await;
    let ctx2 = session(&p2, "worker", "s1");
    assert_eq!(
        ok_text(&call(&p2, &ctx2, "small", json!({})).await),
        format!("{}{}", "a".repeat(900), "b".repeat(900))
    );
    h.check().await;
    h2.check().await;
}

/// `{"text":"` + text + `"}`: the canonical arguments of an echo call with only `text`.
fn echo_args_chars(text_chars: usize) -> usize {
    text_chars + 11
}

#[tokio::test]
async fn standard_rows_keep_a_summary_and_elevated_rows_keep_everything() {
    let h = Harness::new();
    let standard = Echo::new("echo", "alpha", Tier::Standard);
    let elevated = Echo::new("echo_elevated", "alpha", Tier::Elevated);
    let big = Big::new("big", Tier::Standard, vec!["x".repeat(30_000)]);
    let big_elevated = Big::new("big_elevated", Tier::Elevated, vec!["x".repeat(30_000)]);
    let tools: Vec<Arc<dyn Tool>> = vec![
        standard.clone(),
        elevated.clone(),
        big.clone(),
        big_elevated.clone(),
    ];
    let p = h.pipeline(vec![worker()], Limits::default(), tools).await;
    let ctx = session(&p, "worker", "s1");

    let long = json!({"text": "z".repeat(2_000)});
    let total = echo_args_chars(2_000);
    let canonical = canonical_json(&long);
    assert_eq!(canonical.chars().count(), total);

    let result = call(&p, &ctx, "echo", long.clone()).await;
    ok_text(&result);
    let row = row_of(&h.store, &result.call_id).await.event;
    let summary = format!("{}… [{total} characters]", &canonical[..512]);
    assert_eq!(row.arguments, summary);
    assert_eq!(
        row.result, summary,
        "echo's result is its canonical arguments"
    );
    assert_eq!(
        row.arguments_digest,
        aether_policy::sha256(canonical.as_bytes()).to_string(),
        "the digest covers it all"
    );

    let result = call(&p, &ctx, "echo_elevated", long.clone()).await;
    ok_text(&result);
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(
        (
            row.tier.as_str(),
            row.arguments.as_str(),
            row.result.as_str()
        ),
        ("elevated", canonical.as_str(), canonical.as_str())
    );

    // A long result: the Standard row keeps its head; the Elevated row keeps what the caller got.
    let result = call(&p, &ctx, "big", json!({})).await;
    let out = ok_text(&result);
    let row = row_of(&h.store, &result.call_id).await.event;
    assert!(row.result.starts_with(&"x".repeat(512)), "{}", row.result);
    assert!(
        row.result
            .ends_with(&format!("… [{} characters]", out.chars().count())),
        "{}",
        row.result
    );
    assert_eq!(
        row.result.chars().count(),
        512 + format!("… [{} characters]", out.chars().count())
            .chars()
            .count()
    );
    let result = call(&p, &ctx, "big_elevated", json!({})).await;
    let out = ok_text(&result);
    let row = row_of(&h.store, &result.call_id).await.event;
    assert_eq!(row.result, out);
    assert!(row.result.contains(MARKER));
    h.check().await;
}

#[tokio::test]
async fn a_standard_row_keeps_short_arguments_whole_whatever_their_bytes() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    // (text, kept whole?) — the summary bound is 512 characters, not bytes.
    let cases = [
        ("a".repeat(501), true),
        ("a".repeat(502), false),
        ("é".repeat(300), true),
        ("é".repeat(501), true),
        ("é".repeat(502), false),
    ];
    for (text, whole) in cases {
        let args = json!({"text": text});
        let canonical = canonical_json(&args);
        let result = call(&p, &ctx, "echo", args).await;
        ok_text(&result);
        let row = row_of(&h.store, &result.call_id).await.event;
        let chars = canonical.chars().count();
        if whole {
            assert_eq!(
                row.arguments, canonical,
                "{chars} characters should be kept whole"
            );
        } else {
            let head: String = canonical.chars().take(512).collect();
            assert_eq!(row.arguments, format!("{head}… [{chars} characters]"));
        }
    }
    h.check().await;
}

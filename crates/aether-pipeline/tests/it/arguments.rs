//! Argument validation against the tool's input schema, with the agent's `arg_defaults` filled
//! in first: refusals name the JSON path; defaults fill gaps and never override the caller.

use aether_policy::config::Limits;
use aether_policy::{AgentProfile, Step, Tier};
use serde_json::{Map, Value, json};

use crate::support::*;

fn defaults(map: Value) -> Map<String, Value> {
    serde_json::from_value(map).unwrap()
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_refused_with_their_path() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let p = h
        .pipeline(vec![worker()], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    // (arguments, where the problem is, a word the problem names)
    let cases = [
        (json!({"text": 5}), "/text", "string"),
        (json!({"text": "x", "count": "two"}), "/count", "integer"),
        (json!({"count": 2}), "(top level)", "text"),
        (json!({"text": "x", "extra": true}), "(top level)", "extra"),
        (json!({"text": "x", "count": 0}), "/count", "minimum"),
        (json!({"text": "x", "tags": ["a", 7]}), "/tags/1", "string"),
    ];
    for (args, at, names) in cases {
        let result = call(&p, &ctx, "echo", args.clone()).await;
        let (reason, row) = refused(&h.store, &result, Step::Arguments, "schema").await;
        assert!(reason.contains("echo's input schema"), "{args}: {reason}");
        assert!(
            reason.contains(&format!("{at}: ")),
            "{args}: the reason should name {at}: {reason}"
        );
        assert!(
            reason.contains(names),
            "{args}: the reason should mention {names}: {reason}"
        );
        // The row keeps what was refused.
        assert_eq!(row.event.arguments, aether_policy::canonical_json(&args));
    }

    // Several problems at once are all named.
    let result = call(&p, &ctx, "echo", json!({"count": -1, "tags": [1]})).await;
    let (reason, _) = refused(&h.store, &result, Step::Arguments, "schema").await;
    for at in ["(top level)", "/count", "/tags/0"] {
        assert!(reason.contains(at), "{at} missing: {reason}");
    }

    // No arguments at all is an empty object: `text` is missing.
    let result = p
        .call(
            &ctx,
            "echo",
            None,
            std::sync::Arc::new(aether_tools::NoClient),
            Default::default(),
        )
        .await;
    let (reason, _) = refused(&h.store, &result, Step::Arguments, "schema").await;
    assert!(reason.contains("text"), "{reason}");

    assert_eq!(echo.calls(), 0, "no invalid call ran");
    ok_text(
        &call(
            &p,
            &ctx,
            "echo",
            json!({"text": "x", "count": 1, "tags": []}),
        )
        .await,
    );
    assert_eq!(echo.calls(), 1);
    h.check().await;
}

#[tokio::test]
async fn arg_defaults_fill_what_the_caller_left_out_and_never_override_it() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let other = Echo::new("other", "alpha", Tier::Standard);
    let mut agent = worker();
    agent.arg_defaults.insert(
        "echo".into(),
        defaults(json!({"text": "from the operator", "count": 7})),
    );
    let bare = AgentProfile::with_groups("bare", &["alpha"]);
    let tools: Vec<std::sync::Arc<dyn aether_tools::Tool>> = vec![echo.clone(), other.clone()];
    let p = h
        .pipeline(vec![agent, bare], Limits::default(), tools)
        .await;
    let ctx = session(&p, "worker", "s1");

    // Filled: even a required argument can come from the profile.
    let result = call(&p, &ctx, "echo", json!({})).await;
    ok_text(&result);
    assert_eq!(
        echo.last(),
        json!({"text": "from the operator", "count": 7})
    );
    let row = row_of(&h.store, &result.call_id).await;
    assert_eq!(
        row.event.arguments, r#"{"count":7,"text":"from the operator"}"#,
        "the row keeps the arguments as admitted"
    );

    // Given arguments win.
    ok_text(&call(&p, &ctx, "echo", json!({"text": "mine", "count": 2})).await);
    assert_eq!(echo.last(), json!({"text": "mine", "count": 2}));
    ok_text(&call(&p, &ctx, "echo", json!({"text": "mine"})).await);
    assert_eq!(echo.last(), json!({"text": "mine", "count": 7}));

    // Defaults are per tool and per agent.
    let result = call(&p, &ctx, "other", json!({})).await;
    refused(&h.store, &result, Step::Arguments, "schema").await;
    let bare = session(&p, "bare", "s2");
    let result = call(&p, &bare, "echo", json!({})).await;
    refused(&h.store, &result, Step::Arguments, "schema").await;

    // A caller's invalid value is not rescued by a valid default.
    let result = call(&p, &ctx, "echo", json!({"count": 0})).await;
    let (reason, _) = refused(&h.store, &result, Step::Arguments, "schema").await;
    assert!(reason.contains("/count"), "{reason}");
    assert_eq!(echo.calls(), 3);
    h.check().await;
}

#[tokio::test]
async fn an_invalid_operator_default_is_refused_like_a_caller_argument() {
    let h = Harness::new();
    let echo = Echo::new("echo", "alpha", Tier::Standard);
    let mut agent = worker();
    agent
        .arg_defaults
        .insert("echo".into(), defaults(json!({"count": -5})));
    let p = h
        .pipeline(vec![agent], Limits::default(), vec![echo.clone()])
        .await;
    let ctx = session(&p, "worker", "s1");

    let result = call(&p, &ctx, "echo", json!({"text": "x"})).await;
    let (reason, _) = refused(&h.store, &result, Step::Arguments, "schema").await;
    assert!(reason.contains("/count"), "{reason}");
    // The caller can still give a valid value, which wins over the default.
    ok_text(&call(&p, &ctx, "echo", json!({"text": "x", "count": 3})).await);
    assert_eq!(echo.calls(), 1);
    h.check().await;
}

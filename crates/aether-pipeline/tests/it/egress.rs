//! Step 8 for tools that reach the network: no credential leaves in the arguments, raw or
//! encoded, and every URL is one the agent may reach; a refusal names the rule and the audit
//! keeps no secret.

use std::sync::Arc;

use aether_pipeline::CallOutcome;
use aether_policy::{AgentProfile, Step, Tier, ToolDef};
use aether_tools::{CallContext, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::support::*;

/// A tool that would reach the network (it only counts its calls).
struct Fetcher {
    def: ToolDef,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Tool for Fetcher {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    async fn call(&self, _cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(ToolOutput::text("fetched"))
    }
}

fn fetcher() -> Arc<Fetcher> {
    let mut d = def(
        "fetch",
        "research",
        Tier::Elevated,
        json!({"type": "object", "properties": {"url": {"type": "string"}, "body": {"type": "string"},
               "headers": {"type": "object"}}, "required": ["url"]}),
    );
    d.meta.reaches_network = true;
    d.meta.read_only = false;
    Arc::new(Fetcher {
        def: d,
        calls: Default::default(),
    })
}

fn researcher() -> AgentProfile {
    AgentProfile {
        allowed_domains: vec!["docs.example.com".into(), "*.api.example.com".into()],
        ..AgentProfile::with_groups("researcher", &["research"])
    }
}

#[tokio::test]
async fn credentials_and_disallowed_destinations_never_leave() {
    let h = Harness::new();
    let tool = fetcher();
    let p = h
        .pipeline_with(vec![researcher()], vec![tool.clone()], |_| {})
        .await;
    let ctx = session(&p, "researcher", "s1");

    // Allowed, clean: runs.
    ok_text(
        &call(
            &p,
            &ctx,
            "fetch",
            json!({"url": "https://docs.example.com/page?q=rust"}),
        )
        .await,
    );
    ok_text(
        &call(
            &p,
            &ctx,
            "fetch",
            json!({"url": "https://v2.api.example.com/x"}),
        )
        .await,
    );

    let token = "ghp_Q8vX2mK7pL4nR9tZ3wB6yC1dF5gH0jS7uA2e";
    let b64 = "Z2hwX1E4dlgybUs3cEw0blI5dFozd0I2eUMxZEY1Z0gwalM3dUEyZQ==";
    for (args, rule) in [
        (
            json!({"url": "https://docs.example.com/", "body": token}),
            "dlp:github-token",
        ),
        (
            json!({"url": format!("https://docs.example.com/?t={token}")}),
            "dlp:github-token",
        ),
        (
            json!({"url": "https://docs.example.com/", "headers": {"X-Data": b64}}),
            "dlp:github-token",
        ),
        (
            json!({"url": "https://docs.example.com/", "body": "AKIA2E7XQ4WJ9KD3LM6P"}),
            "dlp:aws-access-key",
        ),
        (
            json!({"url": "https://user:hunter2@docs.example.com/"}),
            "egress:credentials-in-url",
        ),
        (
            json!({"url": "https://evil.test/"}),
            "egress:domain-not-allowed",
        ),
        (
            json!({"url": "https://api.example.com/"}),
            "egress:domain-not-allowed",
        ),
        (
            json!({"url": "http://169.254.169.254/latest/meta-data"}),
            "egress:domain-not-allowed",
        ),
        (json!({"url": "file:///etc/passwd"}), "egress:scheme"),
    ] {
        let result = call(&p, &ctx, "fetch", args.clone()).await;
        let (reason, row) = refused(&h.store, &result, Step::Egress, rule).await;
        for secret in [token, b64, "hunter2", "AKIA2E7XQ4WJ9KD3LM6P"] {
            assert!(
                !reason.contains(secret),
                "{args}: the refusal repeats the secret: {reason}"
            );
            assert!(
                !row.event.arguments.contains(secret)
                    && !row.event.reason.as_deref().unwrap_or("").contains(secret),
                "{args}: the audit keeps the secret: {row:?}"
            );
        }
    }
    // Refused earlier (here: bad arguments), a network tool's secret is still not kept.
    let result = call(&p, &ctx, "fetch", json!({"url": 5, "body": token})).await;
    let (_, row) = refused(&h.store, &result, Step::Arguments, "schema").await;
    assert!(!row.event.arguments.contains(token), "{row:?}");
    assert!(
        row.event.arguments.contains("withheld by dlp:github-token"),
        "{row:?}"
    );
    assert_eq!(tool.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // A refused call is not the end of the session: clean calls still run.
    ok_text(
        &call(
            &p,
            &ctx,
            "fetch",
            json!({"url": "https://docs.example.com/"}),
        )
        .await,
    );
    match call(
        &p,
        &ctx,
        "fetch",
        json!({"url": "https://docs.example.com/", "body": "a task-list of desk-lamps"}),
    )
    .await
    .outcome
    {
        CallOutcome::Ran(out) => assert!(!out.is_error),
        other => panic!("a benign look-alike was refused: {other:?}"),
    }
    h.check().await;
}

/// A tool that follows a redirect: it asks the pipeline whether the hop named in its
/// arguments (`hop`, without its scheme: what a server's `Location` would say, not a URL the
/// call itself names) may be reached, as `aether-net`'s client does for every redirect.
struct Redirected {
    def: ToolDef,
}

#[async_trait]
impl Tool for Redirected {
    fn def(&self) -> &ToolDef {
        &self.def
    }
    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        // The host as the client hands it over: `url::Host`'s display, IPv6 without brackets.
        let (hop, host) = (
            args["hop"].as_str().unwrap(),
            args["hop_host"].as_str().unwrap(),
        );
        let hop = format!("https://{hop}");
        cx.destinations.check(&hop, host)?;
        Ok(ToolOutput::text(format!("reached {hop}")))
    }
}

#[tokio::test]
async fn a_redirect_hop_meets_the_same_rules_as_the_call_itself() {
    let h = Harness::new();
    let mut d = def(
        "request",
        "research",
        Tier::Elevated,
        json!({"type": "object", "properties": {"url": {"type": "string"}, "hop": {"type": "string"},
               "hop_host": {"type": "string"}, "method": {"type": "string"}},
               "required": ["url", "hop", "hop_host"]}),
    );
    d.meta.reaches_network = true;
    d.meta.read_only = false;
    let tool: Arc<dyn Tool> = Arc::new(Redirected { def: d });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("permissions.yaml");
    std::fs::write(
        &path,
        r#"rules:
  - name: no-deletes-on-prod
    match: { tool: request, url_host: prod.example.com, args: { method: "^DELETE$" } }
    action: always_deny
  - name: not-that-address
    match: { tool: request, url_host: "[2606:4700::1111]" }
    action: always_deny
"#,
    )
    .unwrap();
    let agent = AgentProfile {
        allowed_domains: vec![
            "a.example.com".into(),
            "prod.example.com".into(),
            "[2606:4700::1111]".into(),
        ],
        ..AgentProfile::with_groups("researcher", &["research"])
    };
    let p = h
        .pipeline_with(vec![agent], vec![tool], |s| {
            s.rules = aether_pipeline::Rules::load(&path, true).unwrap();
        })
        .await;
    let ctx = session(&p, "researcher", "s1");
    let first = "https://a.example.com/r";

    // A DELETE sent to a.example.com that a redirect would carry to prod: stopped at the hop,
    // by the rule that tests the method, exactly as a DELETE sent to prod directly is.
    for (hop, host) in [
        ("prod.example.com/users/1", "prod.example.com"),
        ("PROD.example.com./users/1", "prod.example.com."),
    ] {
        let result = call(
            &p,
            &ctx,
            "request",
            json!({"url": first, "hop": hop, "hop_host": host, "method": "DELETE"}),
        )
        .await;
        let text = error_text(&result);
        assert!(text.contains("no-deletes-on-prod"), "{hop}: {text}");
    }
    let direct = call(
        &p,
        &ctx,
        "request",
        json!({"url": "https://prod.example.com/users/1", "hop": "prod.example.com/users/1",
               "hop_host": "prod.example.com", "method": "DELETE"}),
    )
    .await;
    assert!(
        matches!(direct.outcome, CallOutcome::Refused(_)),
        "{:?}",
        direct.outcome
    );
    // A GET may follow the same redirect.
    ok_text(
        &call(
            &p,
            &ctx,
            "request",
            json!({"url": first, "hop": "prod.example.com/users/1",
                   "hop_host": "prod.example.com", "method": "GET"}),
        )
        .await,
    );
    // An IPv6 host rule holds on a hop as on the first request.
    let result = call(
        &p,
        &ctx,
        "request",
        json!({"url": first, "hop": "[2606:4700::1111]/", "hop_host": "2606:4700::1111",
               "method": "GET"}),
    )
    .await;
    let text = error_text(&result);
    assert!(text.contains("not-that-address"), "{text}");
}

/// The text of a call whose tool ran and reported an error.
fn error_text(result: &aether_pipeline::CallResult) -> String {
    match &result.outcome {
        CallOutcome::Ran(out) => assert!(out.is_error, "expected a tool error: {out:?}"),
        other => panic!("expected the tool to run and fail, got {other:?}"),
    }
    text(result)
}

/// Limits checked before anything reads the arguments further (and before the receipt): the
/// arguments' total size, a URL's length, the request headers' count, size and shape (a name
/// that is not an HTTP token, a value with a control character that would inject a header).
/// Nothing runs; the refusal and the audit row stay small whatever the call carried.
#[tokio::test]
async fn oversized_arguments_long_urls_and_bad_headers_are_refused_up_front() {
    let h = Harness::new();
    let tool = fetcher();
    let p = h
        .pipeline_with(vec![researcher()], vec![tool.clone()], |s| {
            s.limits.argument_bytes = 256 << 10;
        })
        .await;
    let ctx = session(&p, "researcher", "s1");
    let url = "https://docs.example.com/page";
    let long = format!("{url}?q={}", "a".repeat(100 << 10));
    let just = format!("{url}?q={}", "a".repeat(8192 - url.len() - 3));
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("X-H{i}"), json!("v"))).collect();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"url": url, "body": "b".repeat(300 << 10)}),
            "limits:arguments",
        ),
        (json!({"url": long}), "limits:url"),
        (json!({"url": format!("{just}aa")}), "limits:url"),
        (json!({"url": url, "headers": many}), "limits:headers"),
        (
            json!({"url": url, "headers": {"X-Big": "v".repeat(9000)}}),
            "limits:headers",
        ),
        (
            json!({"url": url, "headers": {"X-A": "ok\r\nX-Injected: 1"}}),
            "headers:value",
        ),
        (
            json!({"url": url, "headers": {"X-A": "ok\nHost: evil"}}),
            "headers:value",
        ),
        (
            json!({"url": url, "headers": {"X-A": "nul\u{0}"}}),
            "headers:value",
        ),
        (
            json!({"url": url, "headers": {"X-A": "bell\u{7}"}}),
            "headers:value",
        ),
        (json!({"url": url, "headers": {"X A": "v"}}), "headers:name"),
        (
            json!({"url": url, "headers": {"X-A:": "v"}}),
            "headers:name",
        ),
        (json!({"url": url, "headers": {"": "v"}}), "headers:name"),
        (json!({"url": url, "headers": {"X-Ä": "v"}}), "headers:name"),
        (
            json!({"url": url, "headers": {"X-A\r\nEvil": "v"}}),
            "headers:name",
        ),
        // A credential in a call refused here is not kept in the audit either.
        (
            json!({"url": url, "headers": {"Authorization": "Bearer ghp_Q8vX2mK7pL4nR9tZ3wB6yC1dF5gH0jS7uA2e", "Bad Name": "1"}}),
            "headers:name",
        ),
    ];
    for (args, rule) in cases {
        let result = call(&p, &ctx, "fetch", args.clone()).await;
        let (reason, row) = refused(&h.store, &result, Step::Arguments, rule).await;
        assert!(reason.len() <= 2_100, "{rule}: {} chars", reason.len());
        assert!(
            row.event.arguments.len() <= 25_000,
            "{rule}: the audit kept {} bytes",
            row.event.arguments.len()
        );
        assert!(
            !row.event.arguments.contains("ghp_"),
            "{}",
            row.event.arguments
        );
    }
    assert_eq!(tool.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // At the limits, and with ordinary headers, it runs.
    for args in [
        json!({"url": just}),
        json!({"url": url, "headers": {"Accept": "text/html", "X-Trace": "a\tb", "If-None-Match": "\"x\""}}),
    ] {
        ok_text(&call(&p, &ctx, "fetch", args).await);
    }
    h.check().await;
}

/// A credential sent a piece per call — in the URL's path, a header, the body — is refused
/// when its last piece would leave, also when the agent spreads the calls over sessions; the
/// pieces before it went through (each alone is nothing), and the refusal names the rule,
/// never the secret.
#[tokio::test]
async fn a_credential_split_over_an_agents_calls_and_sessions_is_refused_at_its_last_piece() {
    let h = Harness::new();
    let tool = fetcher();
    let p = h
        .pipeline_with(vec![researcher()], vec![tool.clone()], |_| {})
        .await;
    // A GitHub token (random-looking, not a placeholder), in three pieces.
    let token = "ghp_Q8vX2mK7pL4nR9tZ3wB6yC1dF5gH0jS7uA2e";
    let pieces = [&token[..12], &token[12..26], &token[26..]];
    let calls = [
        json!({"url": format!("https://docs.example.com/files/{}", pieces[0])}),
        json!({"url": "https://docs.example.com/x", "headers": {"X-Part": pieces[1]}}),
        json!({"url": "https://docs.example.com/y", "body": pieces[2]}),
    ];
    for (i, args) in calls.iter().enumerate() {
        // A new session for every call: the agent is the same.
        let ctx = session(&p, "researcher", &format!("s{i}"));
        let result = call(&p, &ctx, "fetch", args.clone()).await;
        if i < 2 {
            ok_text(&result);
            continue;
        }
        let (reason, row) = refused(&h.store, &result, Step::Egress, "dlp:github-token").await;
        assert!(
            !reason.contains(pieces[2]) && !reason.contains(pieces[0]),
            "{reason}"
        );
        assert!(
            !row.event.arguments.contains(pieces[2]),
            "{}",
            row.event.arguments
        );
    }
    assert_eq!(tool.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // Another agent's pieces are its own: the same last piece from a fresh agent goes through.
    h.check().await;
}

/// A tool whose URL argument has a name of its own (an upstream's `target`, say) meets egress
/// and the host rules like any other: every string that is a URL by itself is judged, however
/// deep; an argument the declaration names a URL is judged even without a scheme; text that
/// only mentions a URL is not a destination.
#[tokio::test]
async fn a_url_under_any_name_meets_egress_and_the_host_rules() {
    let h = Harness::new();
    let mut d = def(
        "reach",
        "research",
        Tier::Elevated,
        json!({"type": "object", "properties": {
            "target": {"type": "string"},
            "where": {"type": "string"},
            "opts": {"type": "object"}
        }}),
    );
    d.meta.reaches_network = true;
    d.meta.read_only = false;
    d.arguments = aether_policy::ArgumentKinds::urls(&["where"]);
    let tool = Echo::with_def(d);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("permissions.yaml");
    std::fs::write(
        &rules,
        "rules:\n  - name: no-v2\n    match: { url_host: v2.api.example.com }\n    action: always_deny\n",
    )
    .unwrap();
    let p = h
        .pipeline_with(vec![researcher()], vec![tool.clone()], |s| {
            s.rules = aether_pipeline::Rules::load(&rules, true).unwrap();
        })
        .await;
    let ctx = session(&p, "researcher", "s1");
    ok_text(
        &call(
            &p,
            &ctx,
            "reach",
            json!({"target": "https://docs.example.com/x"}),
        )
        .await,
    );
    ok_text(
        &call(
            &p,
            &ctx,
            "reach",
            json!({"target": "see https://evil.test for more"}),
        )
        .await,
    );
    for args in [
        json!({"target": "https://evil.test/"}),
        json!({"opts": {"next": ["https://docs.example.com/", "https://evil.test/"]}}),
    ] {
        let result = call(&p, &ctx, "reach", args.clone()).await;
        refused(&h.store, &result, Step::Egress, "egress:domain-not-allowed").await;
    }
    // Declared a URL: judged as one, scheme or not.
    let result = call(&p, &ctx, "reach", json!({"where": "evil.test/x"})).await;
    refused(&h.store, &result, Step::Egress, "egress:malformed-url").await;
    // The operator's host rule sees the undeclared URL too.
    let result = call(
        &p,
        &ctx,
        "reach",
        json!({"target": "https://v2.api.example.com/"}),
    )
    .await;
    refused(&h.store, &result, Step::Rules, "rule:no-v2").await;
    assert_eq!(tool.calls(), 2);
    h.check().await;
}

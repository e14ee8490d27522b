//! OpenTelemetry: each call a trace, exported over OTLP to a receiver that decodes with the
//! official `opentelemetry-proto` package (`tests/peers/otlp_receiver.py`), over HTTP/protobuf
//! (configured in `[telemetry]`) and gRPC (configured by the standard `OTEL_*` variables).
//! The span tree is asserted (a call's span continuing the client's `traceparent`, a child per
//! step, the upstream's call inside the run), and the trace context is followed into an
//! upstream MCP server; no argument value ever reaches the receiver.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::modern::call_2026;
use crate::util::{
    HttpServer, Killed, StdioServer, Ws, aether, peers, repo_root, spawn_announcing,
};

/// A text that is in the calls' arguments and must be in no span.
const MARKER: &str = "aethermarker7731";

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

struct Receiver {
    _child: Killed,
    http: u16,
    grpc: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(peers: &Path, dir: &Path) -> Receiver {
        let out = dir.join("spans.jsonl");
        let (child, ports) = spawn_announcing(
            Command::new(peers.join("venv/bin/python"))
                .arg(repo_root().join("tests/peers/otlp_receiver.py"))
                .args(["--out", out.to_str().unwrap(), "--forbid", MARKER])
                .stdin(Stdio::piped()),
        );
        Receiver {
            _child: child,
            http: ports["http"].as_u64().unwrap() as u16,
            grpc: ports["grpc"].as_u64().unwrap() as u16,
            out,
        }
    }

    /// The lines received so far.
    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The spans of trace `trace`, once `want` of them have come (within 20 s).
    fn trace(&self, trace: &str, want: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans: Vec<Value> = self
                .lines()
                .into_iter()
                .filter(|s| s["trace_id"] == trace)
                .collect();
            if want(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Option<&'a Value> {
    spans.iter().find(|s| s["name"] == name)
}

fn children<'a>(spans: &'a [Value], parent: &Value) -> Vec<&'a str> {
    spans
        .iter()
        .filter(|s| s["parent_span_id"] == parent["span_id"])
        .map(|s| s["name"].as_str().unwrap())
        .collect()
}

/// No span carried an argument value.
fn nothing_forbidden(receiver: &Receiver) {
    let lines = receiver.lines();
    assert!(
        !lines.iter().any(|l| l.get("forbidden").is_some()),
        "an argument value reached the receiver"
    );
    assert!(!lines.is_empty());
}

fn config(peers: &Path, telemetry: &str) -> String {
    format!(
        "[server]\nhttp_agent = \"builder\"\n[roots.ws]\npath = \".\"\n\
         [agents.builder]\nmcp_servers = [\"workspace\", \"up\"]\n\
         [upstreams.up]\ncommand = \"{}\"\nargs = [\"{}\"]\ntimeout_seconds = 20\n{telemetry}",
        peers.join("venv/bin/python").display(),
        repo_root().join("tests/peers/upstream_server.py").display(),
    )
}

/// The upstream's `trace_context` tool, seen once and approved.
fn approve_upstream(ws: &Ws, cfg: &str) {
    let mut s = StdioServer::spawn(ws, &["--config", cfg, "--agent", "builder"]);
    s.initialize("2025-11-25");
    // The upstream's tools are recorded once it has listed them.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws
        .run(&["registry", "list", "--config", cfg])
        .1
        .contains("up__trace_context")
    {
        assert!(
            Instant::now() < deadline,
            "the upstream never offered its tools"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(s);
    let (code, _, err) = ws.run(&[
        "registry",
        "approve",
        "up__trace_context",
        "--why",
        "reviewed",
        "--config",
        cfg,
    ]);
    assert_eq!(code, 0, "{err}");
}

fn traceparent_in(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .strip_prefix("traceparent: ")
        .unwrap_or_default()
        .to_string()
}

#[test]
fn each_call_is_a_trace_of_its_steps_continued_from_the_client_into_the_upstream() {
    let Some(peers) = peers("telemetry") else {
        return;
    };
    let ws = Ws::new();
    ws.write(&format!("src/{MARKER}.txt"), "marked\n");
    let receiver = Receiver::start(&peers, ws.path());
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://127.0.0.1:{}\"\nheaders = {{ x-collector-key = \"k1\" }}\n",
        receiver.http
    );
    ws.write("aether.toml", &config(&peers, &telemetry));
    let cfg = ws.path().join("aether.toml").display().to_string();
    approve_upstream(&ws, &cfg);
    let srv = HttpServer::start(&ws, &["--config", &cfg]);
    let header = |span: &str| format!("00-{CLIENT_TRACE}-{span}-01");

    // A read, continuing the client's trace from its `traceparent` header.
    let read = header(CLIENT_SPAN);
    let path = format!("src/{MARKER}.txt");
    let (status, answer) = call_2026(
        &srv.addr,
        1,
        json!({"name": "read_file", "arguments": {"path": path}}),
        &[("traceparent", &read)],
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let spans = receiver.trace(CLIENT_TRACE, |s| named(s, "tools/call read_file").is_some());
    let root = named(&spans, "tools/call read_file").expect("the call's span");
    assert_eq!(root["parent_span_id"], CLIENT_SPAN, "{root}");
    assert_eq!(root["kind"], 2, "a server span: {root}");
    let a = &root["attributes"];
    assert_eq!(a["aether.agent"], "builder", "{root}");
    assert_eq!(a["gen_ai.tool.name"], "read_file", "{root}");
    assert_eq!(a["mcp.method.name"], "tools/call", "{root}");
    assert_eq!(a["aether.transport"], "http", "{root}");
    assert_eq!(a["aether.decision"], "ran", "{root}");
    assert_eq!(a["aether.tool.group"], "workspace", "{root}");
    let mut steps = children(&spans, root);
    steps.sort();
    assert_eq!(steps, ["audit", "rules", "run"], "{spans:?}");
    for child in spans
        .iter()
        .filter(|s| s["parent_span_id"] == root["span_id"])
    {
        assert!(
            child["start_ns"].as_u64() >= root["start_ns"].as_u64()
                && child["end_ns"].as_u64() <= root["end_ns"].as_u64(),
            "a step inside its call: {child} {root}"
        );
    }
    assert_eq!(root["resource"]["service.name"], "aether", "{root}");
    assert_eq!(root["transport"], "http");
    assert_eq!(root["headers"]["x-collector-key"], "k1", "{root}");

    // An upstream's tool: its call is a client span inside the run, and the upstream hears
    // that span as its parent.
    let up = header("00f067aa0ba902b8");
    let (status, answer) = call_2026(
        &srv.addr,
        2,
        json!({"name": "up__trace_context", "arguments": {}}),
        &[("traceparent", &up)],
    );
    assert_eq!(status, 200, "{answer}");
    let heard = traceparent_in(&answer);
    let spans = receiver.trace(CLIENT_TRACE, |s| named(s, "upstream").is_some());
    let root = named(&spans, "tools/call up__trace_context").expect("the call's span");
    assert_eq!(root["parent_span_id"], "00f067aa0ba902b8", "{root}");
    let run = spans
        .iter()
        .find(|s| s["name"] == "run" && s["parent_span_id"] == root["span_id"])
        .expect("the run's span");
    let upstream = named(&spans, "upstream").unwrap();
    assert_eq!(upstream["parent_span_id"], run["span_id"], "{spans:?}");
    assert_eq!(upstream["kind"], 3, "a client span: {upstream}");
    assert_eq!(
        heard,
        format!(
            "00-{CLIENT_TRACE}-{}-01",
            upstream["span_id"].as_str().unwrap()
        ),
        "{answer}"
    );

    // Refusals: an unknown tool (its made-up name, which carries the marker, named nowhere)
    // and a path outside the roots; each span says which step refused.
    let refused = header("00f067aa0ba902b9");
    let (_, answer) = call_2026(
        &srv.addr,
        3,
        json!({"name": format!("no_{MARKER}"), "arguments": {}}),
        &[("traceparent", &refused)],
    );
    assert!(
        answer.get("error").is_some() || answer["result"]["isError"] == true,
        "{answer}"
    );
    let escape = header("00f067aa0ba902ba");
    let (_, answer) = call_2026(
        &srv.addr,
        4,
        json!({"name": "read_file", "arguments": {"path": format!("../{MARKER}/x")}}),
        &[("traceparent", &escape)],
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let spans = receiver.trace(CLIENT_TRACE, |s| {
        s.iter()
            .filter(|s| {
                s["attributes"]["aether.decision"] == "refused"
                    || s["attributes"]["aether.decision"] == "tool-error"
            })
            .count()
            >= 2
    });
    let unknown = spans
        .iter()
        .find(|s| s["parent_span_id"] == "00f067aa0ba902b9")
        .expect("the unknown tool's span");
    assert_eq!(unknown["name"], "tools/call", "{unknown}");
    assert_eq!(unknown["attributes"]["aether.decision"], "refused");
    assert_eq!(
        unknown["attributes"]["aether.refused.step"],
        "mcp-tool-not-implemented"
    );
    assert!(unknown["attributes"].get("gen_ai.tool.name").is_none());
    let outside = spans
        .iter()
        .find(|s| s["parent_span_id"] == "00f067aa0ba902ba")
        .expect("the escape's span");
    let decision = outside["attributes"]["aether.decision"].as_str().unwrap();
    assert!(matches!(decision, "refused" | "tool-error"), "{outside}");
    drop(srv);
    nothing_forbidden(&receiver);
}

#[test]
fn traces_go_over_grpc_where_the_standard_variables_say_and_are_flushed_at_exit() {
    let Some(peers) = peers("telemetry") else {
        return;
    };
    let ws = Ws::new();
    let receiver = Receiver::start(&peers, ws.path());
    let log = ws.path().join("stderr.log");
    let mut cmd = aether();
    cmd.args([
        "mcp-serve",
        "--root",
        &ws.root_arg(),
        "--log-format",
        "json",
    ])
    .env("RUST_LOG", "aether=info")
    .current_dir(ws.path())
    .env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{}", receiver.grpc),
    )
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    .env("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=k2")
    .env("OTEL_SERVICE_NAME", "aether-stdio")
    // Longer than the test waits: only the flush at exit can send the spans.
    .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
    .stderr(std::fs::File::create(&log).unwrap());
    let mut s = StdioServer::from_command(cmd);
    s.initialize("2025-11-25");
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let req = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"path": "src/hello.txt"},
        "_meta": {"traceparent": format!("00-{trace}-b7ad6b7169203331-01")}}});
    s.send_raw(&req.to_string());
    let r = s.recv(5);
    assert_eq!(r["result"]["isError"], false, "{r}");
    s.close_stdin();
    assert!(s.wait_exit(Duration::from_secs(20)).is_some());
    let spans = receiver.trace(trace, |s| named(s, "tools/call read_file").is_some());
    let root = named(&spans, "tools/call read_file").expect("the call's span, flushed at exit");
    assert_eq!(root["parent_span_id"], "b7ad6b7169203331", "{root}");
    assert_eq!(root["transport"], "grpc");
    assert_eq!(root["headers"]["x-collector-key"], "k2", "{root}");
    assert_eq!(root["resource"]["service.name"], "aether-stdio", "{root}");
    assert_eq!(root["attributes"]["aether.transport"], "stdio", "{root}");
    assert!(children(&spans, root).contains(&"run"), "{spans:?}");
    // Logs as JSON lines, on request.
    let log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "exporting traces over OTLP"
                && l["fields"]["protocol"] == "grpc"),
        "{log}"
    );
}

/// Telemetry off: no tracer, but the caller's trace context still reaches the upstream as it
/// came, so the upstream's own spans join the client's trace.
#[test]
fn without_telemetry_the_callers_trace_context_reaches_the_upstream_unchanged() {
    let Some(peers) = peers("telemetry") else {
        return;
    };
    let ws = Ws::new();
    ws.write("aether.toml", &config(&peers, ""));
    let cfg = ws.path().join("aether.toml").display().to_string();
    approve_upstream(&ws, &cfg);
    let mut s = StdioServer::spawn(&ws, &["--config", &cfg, "--agent", "builder"]);
    s.initialize("2025-11-25");
    let sent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let req = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "up__trace_context", "arguments": {}, "_meta": {"traceparent": sent}}});
    s.send_raw(&req.to_string());
    let r = s.recv(2);
    assert_eq!(traceparent_in(&r), sent, "{r}");
    // And a call without one sends none.
    let r = s.call(3, "up__trace_context", json!({}));
    assert_eq!(traceparent_in(&r), "none", "{r}");
}

#[test]
fn a_telemetry_section_that_cannot_work_is_refused_at_start() {
    let ws = Ws::new();
    for (section, says) in [
        ("endpoint = \"collector:4318\"", "telemetry.endpoint"),
        (
            "endpoint = \"http://127.0.0.1:4318\"\nprotocol = \"http/json\"",
            "telemetry.protocol",
        ),
        ("sample_ratio = 1.5", "telemetry.sample_ratio"),
        ("headers = { \"bad header\" = \"x\" }", "telemetry.headers"),
    ] {
        ws.write("aether.toml", &format!("[telemetry]\n{section}\n"));
        let (code, _, err) = ws.run(&["serve", "--listen", "127.0.0.1:0"]);
        assert_ne!(code, 0, "{section}");
        assert!(err.contains(says), "{section}: {err}");
    }
}

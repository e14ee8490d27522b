//! `aether agent run`, `aether runs` and `aether models`: the model loop against a scripted
//! OpenAI-compatible server (for the faults a real server will not produce on demand: errors,
//! garbage, oversize, silence, malformed calls) and against a real one (llama.cpp's
//! llama-server with SmolLM2, built by scripts/install-peers.sh).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Killed, Ws, aether};

/// One scripted reply: status, body, and a delay before it.
#[derive(Clone)]
struct Scripted {
    status: u16,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Scripted {
    Scripted {
        status: 200,
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

fn completion(message: Value, finish: &str) -> Value {
    json!({"id": "x", "object": "chat.completion",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

fn says(text: &str) -> Scripted {
    ok(completion(
        json!({"role": "assistant", "content": text}),
        "stop",
    ))
}

fn calls(calls: &[(&str, &str)]) -> Scripted {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("c{i}"), "type": "function",
                                        "function": {"name": name, "arguments": args}})
        })
        .collect();
    ok(completion(
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
        "tool_calls",
    ))
}

/// A request the scripted server received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) line: String,
    pub(crate) headers: String,
    pub(crate) body: Value,
}

/// An OpenAI-compatible server that answers each request with the next scripted reply (the
/// last one again when the script runs out) and keeps what it was sent.
struct ScriptedModel {
    addr: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl ScriptedModel {
    fn start(script: Vec<Scripted>) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        std::thread::spawn(move || {
            let mut next = 0;
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&mut stream) else {
                    continue;
                };
                let models = request.line.starts_with("GET ");
                log.lock().unwrap().push(request);
                let reply = if models {
                    ok(json!({"object": "list", "data": [{"id": "scripted-model"}]}))
                } else {
                    let r = script[next.min(script.len() - 1)].clone();
                    next += 1;
                    r
                };
                std::thread::spawn(move || {
                    std::thread::sleep(reply.delay);
                    let head = format!(
                        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        reply.status,
                        reply.body.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(reply.body.as_bytes());
                });
            }
        });
        ScriptedModel { addr, received }
    }

    fn chats(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.line.starts_with("POST "))
            .cloned()
            .collect()
    }
}

pub(crate) fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut headers = String::new();
    let mut length = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok()?;
        }
        headers.push_str(&h);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        line: line.trim().to_string(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

/// A workspace whose agent `reader` has read_file only, on model connection `m` at `base`.
fn workspace(base: &str, extra: &str) -> Ws {
    let ws = Ws::new();
    // A short time limit per model request unless the test sets one.
    let timeout = match extra.contains("timeout_seconds") {
        true => "",
        false => "timeout_seconds = 2\n",
    };
    ws.write(
        "aether.toml",
        &format!(
            "[server]\nhttp_agent = \"reader\"\n\n[agents.reader]\ntools = [\"read_file\"]\n\n[agents.writer]\nmcp_servers = [\"workspace\"]\n\n\
             [models.m]\nbase_url = \"{base}\"\nmodel = \"scripted-model\"\ntemperature = 0.0\nmax_tokens = 256\n{timeout}{extra}"
        ),
    );
    ws
}

/// `aether agent run --json` as `agent`: (exit code, the outcome, stderr).
fn run(ws: &Ws, agent: &str, extra: &[&str], task: &str) -> (i32, Value, String) {
    let mut args = vec!["agent", "run", "--agent", agent, "--model", "m", "--json"];
    args.extend_from_slice(extra);
    args.push(task);
    let (code, out, err) = ws.run(&args);
    let outcome = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (code, outcome, err)
}

/// The run's transcript entries of one kind.
fn events(ws: &Ws, id: &str, kind: &str) -> Vec<Value> {
    let (code, out, err) = ws.run(&["runs", "show", id, "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["body"].clone())
        .collect()
}

fn audit(ws: &Ws) -> Vec<Value> {
    let (code, out, err) = ws.run(&["audit", "tail", "-n", "200", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_tool_call_of_a_run_goes_through_the_pipeline() {
    let model = ScriptedModel::start(vec![
        calls(&[
            ("read_file", r#"{"path": "src/hello.txt"}"#),
            ("read_file", r#"{"path": "src/hello.txt""#),
            ("write_file", r#"{"path": "x.txt", "content": "x"}"#),
            ("no_such_tool", "{}"),
        ]),
        says("It says hello from aether."),
    ]);
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let (code, outcome, err) = run(&ws, "reader", &[], "What does src/hello.txt say?");
    assert_eq!(code, 0, "{outcome} {err}");
    assert_eq!(outcome["status"], "done");
    assert_eq!(outcome["answer"], "It says hello from aether.");
    assert_eq!(
        (
            outcome["rounds"].as_u64(),
            outcome["prompt_tokens"].as_u64()
        ),
        (Some(2), Some(200))
    );
    // The live view on stderr names the rounds and the calls.
    assert!(
        err.contains("round 1") && err.contains("read_file"),
        "{err}"
    );

    // The model was offered the agent's catalog, exactly as tools/list gives it.
    let chats = model.chats();
    let offered: Vec<&str> = chats[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["read_file"]);
    assert_eq!(chats[0].body["stream"], false);
    assert_eq!(
        (
            chats[0].body["max_tokens"].as_u64(),
            chats[0].body["temperature"].as_f64()
        ),
        (Some(256), Some(0.0))
    );
    assert!(
        !chats[0].headers.to_lowercase().contains("authorization"),
        "no key configured, none sent"
    );
    // The second request carries each call's result back, answered in order.
    let tool_messages: Vec<&Value> = chats[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 4);
    let said = |i: usize| tool_messages[i]["content"].as_str().unwrap();
    assert!(said(0).contains("hello from aether"), "{}", said(0));
    assert!(
        said(1).starts_with("Not run: the arguments of read_file are not a JSON object"),
        "{}",
        said(1)
    );
    assert!(said(2).contains("Refused by Aether"), "{}", said(2));
    assert!(
        said(3).contains("Refused by Aether") || said(3).contains("no_such_tool"),
        "{}",
        said(3)
    );

    // Each call that reached the pipeline is audited under the agent, from in-process.
    let tools = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    let outcomes: Vec<&str> = tools
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "not_run", "refused", "refused"]);
    let rows = audit(&ws);
    for t in tools.iter().filter(|t| t["outcome"] != "not_run") {
        let row = rows
            .iter()
            .find(|r| r["call_id"] == t["call_id"])
            .unwrap_or_else(|| panic!("audit row of {t}"));
        assert_eq!(
            (row["agent"].as_str(), row["transport"].as_str()),
            (Some("reader"), Some("in-process"))
        );
        assert_eq!(row["outcome"], t["outcome"], "{row}");
    }
    assert!(
        !ws.path().join("x.txt").exists(),
        "write_file is outside reader's catalog"
    );
    let (code, out, _) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
}

/// A run waiting for a slow model says so in a log (stderr not a terminal): a heartbeat line
/// every 15 s with the time waited, no spinner's escape codes; the run then ends as usual.
#[test]
fn a_run_waiting_for_its_model_says_so_in_a_log() {
    let mut slow = says("done, slowly");
    slow.delay = Duration::from_secs(16);
    let model = ScriptedModel::start(vec![slow]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "timeout_seconds = 60\n",
    );
    let (code, outcome, err) = run(&ws, "reader", &[], "wait for it");
    assert_eq!(code, 0, "{err}");
    assert_eq!(outcome["answer"], "done, slowly", "{outcome}");
    assert!(
        err.contains("round 1: still waiting for the model (15 s)"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

#[test]
fn a_run_that_uses_its_rounds_ends_with_one_request_without_tools() {
    let model = ScriptedModel::start(vec![
        calls(&[("read_file", r#"{"path": "README.md"}"#)]),
        calls(&[("read_file", r#"{"path": "README.md"}"#)]),
        says("The readme is a demo."),
    ]);
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let (code, outcome, err) = run(&ws, "reader", &["--max-rounds", "2"], "Summarize README.md");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (outcome["status"].as_str(), outcome["rounds"].as_u64()),
        (Some("done"), Some(2))
    );
    assert_eq!(outcome["answer"], "The readme is a demo.");
    let chats = model.chats();
    assert_eq!(chats.len(), 3);
    assert!(chats[1].body["tools"].is_array());
    assert!(
        chats[2].body.get("tools").is_none(),
        "the last request offers no tools"
    );
    let last = chats[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("used all 2 rounds"),
        "{last}"
    );
}

#[test]
fn cut_off_and_unreadable_replies_run_nothing_and_the_model_is_told() {
    let dsml_broken = "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n";
    let model = ScriptedModel::start(vec![
        ok(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"src/hello.txt\"}"}}]}),
            "length",
        )),
        ok(completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"arguments": "{}"}}]}),
            "tool_calls",
        )),
        says(dsml_broken),
        says("done"),
    ]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "dialect = \"deepseek\"\n",
    );
    let (code, outcome, err) = run(&ws, "reader", &[], "Read src/hello.txt");
    assert_eq!(code, 0, "{err}");
    let id = outcome["id"].as_str().unwrap();
    assert_eq!(events(&ws, id, "cut_off").len(), 1);
    assert_eq!(events(&ws, id, "quarantined").len(), 2);
    assert!(events(&ws, id, "tool").is_empty(), "nothing ran");
    assert!(
        audit(&ws).iter().all(|r| r["agent"] != "reader"),
        "no call reached the pipeline"
    );
    let chats = model.chats();
    let told = |i: usize| {
        chats[i].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        told(1).contains("cut off at the output limit"),
        "{}",
        told(1)
    );
    assert!(
        told(2).contains("could not be read") && told(2).contains("has no name"),
        "{}",
        told(2)
    );
    assert!(told(3).contains("DeepSeek tool-call markup"), "{}", told(3));
}

#[test]
fn deepseek_text_calls_become_governed_calls() {
    let dsml = "Reading.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">src/hello.txt</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
    let model = ScriptedModel::start(vec![says(dsml), says("It says hello.")]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "dialect = \"deepseek\"\n",
    );
    let (code, outcome, err) = run(&ws, "reader", &[], "Read src/hello.txt");
    assert_eq!(code, 0, "{err}");
    let tools = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["outcome"], "ok");
    assert!(
        tools[0]["text"]
            .as_str()
            .unwrap()
            .contains("hello from aether")
    );
    let rows = audit(&ws);
    assert!(
        rows.iter()
            .any(|r| r["call_id"] == tools[0]["call_id"] && r["outcome"] == "ok")
    );
}

#[test]
fn model_server_faults_end_the_run_cleanly_with_a_clear_error() {
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(9 << 20));
    let cases: Vec<(Scripted, &str)> = vec![
        (
            Scripted {
                status: 500,
                body: "{\"error\":\"boom\"}".into(),
                delay: Duration::ZERO,
            },
            "answered HTTP 500",
        ),
        (
            Scripted {
                status: 401,
                body: "{\"error\":\"bad key\"}".into(),
                delay: Duration::ZERO,
            },
            "answered HTTP 401",
        ),
        (
            Scripted {
                status: 200,
                body: "<html>not json</html>".into(),
                delay: Duration::ZERO,
            },
            "not JSON",
        ),
        (
            Scripted {
                status: 200,
                body: big,
                delay: Duration::ZERO,
            },
            "larger than 8 MiB",
        ),
        (
            Scripted {
                status: 200,
                body: "{\"choices\": []}".into(),
                delay: Duration::ZERO,
            },
            "not a chat completion",
        ),
        (
            Scripted {
                status: 200,
                body: "{}".into(),
                delay: Duration::from_secs(4),
            },
            "did not answer within 2 s",
        ),
    ];
    for (reply, expect) in cases {
        let model = ScriptedModel::start(vec![reply]);
        let ws = workspace(&format!("http://{}/v1", model.addr), "");
        let started = Instant::now();
        let (code, outcome, err) = run(&ws, "reader", &[], "Read README.md");
        assert_eq!(code, 1, "{expect}: {outcome} {err}");
        assert_eq!(outcome["status"], "failed", "{expect}");
        assert!(
            outcome["error"].as_str().unwrap().contains(expect),
            "{expect}: {outcome}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{expect}: ended promptly"
        );
        let (_, list, _) = ws.run(&["runs", "list", "--json"]);
        let listed: Value = serde_json::from_str(list.lines().next().unwrap()).unwrap();
        assert_eq!(
            (
                listed["status"].as_str(),
                listed["error"].as_str().map(|e| e.contains(expect))
            ),
            (Some("failed"), Some(true))
        );
    }
    // Nothing listening at all.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ws = workspace(&format!("http://127.0.0.1:{port}/v1"), "");
    let (code, outcome, _) = run(&ws, "reader", &[], "Read README.md");
    assert_eq!(code, 1);
    assert!(
        outcome["error"]
            .as_str()
            .unwrap()
            .contains("cannot be reached"),
        "{outcome}"
    );
    let (code, _, err) = ws.run(&["models", "check", "m"]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot be reached"), "{err}");
}

#[test]
fn the_key_comes_from_the_vault_and_goes_only_where_it_may() {
    let model = ScriptedModel::start(vec![says("hi")]);
    let keys = tempfile::tempdir().unwrap();
    let vault = format!(
        "[vault]\nkey_file = \"{}\"\n",
        keys.path().join("vault.key").display()
    );
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        &format!("key = \"model-key\"\n{vault}"),
    );
    // Named but not in the vault: refused before any request.
    let (code, _, err) = ws.run(&["agent", "run", "--agent", "reader", "--model", "m", "hi"]);
    assert_ne!(code, 0);
    assert!(err.contains("aether credentials set model-key"), "{err}");
    assert!(model.chats().is_empty());
    ws.set_credential("model-key", "sk-test-123", &[]);
    let (code, out, err) = ws.run(&["models", "check", "m"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("scripted-model   (configured)"), "{out}");
    let (code, _, err) = run(&ws, "reader", &[], "hi");
    assert_eq!(code, 0, "{err}");
    let sent = model.received.lock().unwrap().clone();
    assert!(
        sent.iter()
            .all(|r| r.headers.contains("authorization: Bearer sk-test-123")
                || r.headers.contains("Authorization: Bearer sk-test-123")),
        "{sent:?}"
    );
    let (_, shown, _) = ws.run(&["runs", "list", "--json"]);
    assert!(!shown.contains("sk-test-123"));

    // A key to a plain-HTTP host elsewhere is refused by the configuration itself.
    let far = workspace("http://models.example.com/v1", "key = \"model-key\"\n");
    let (code, _, err) = far.run(&["models", "list"]);
    assert_ne!(code, 0);
    assert!(err.contains("only over HTTPS or to this computer"), "{err}");
}

#[test]
fn a_run_is_stopped_from_another_terminal_and_by_a_halt() {
    // Each reply takes a while, so the run is mid-flight when asked to stop.
    let slow = |s: Scripted| Scripted {
        delay: Duration::from_millis(700),
        ..s
    };
    let model = ScriptedModel::start(vec![slow(calls(&[(
        "read_file",
        r#"{"path": "README.md"}"#,
    )]))]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "timeout_seconds = 30\n",
    );
    for (how, status) in [("stop", "stopped"), ("halt", "halted")] {
        let child = run_in_background(&ws, KEEP_READING);
        let id = newest_running_run(&ws);
        let (code, out, err) = match how {
            "stop" => ws.run(&["runs", "stop", &id, "--why", "enough"]),
            _ => ws.run(&["halt", "--why", "drill"]),
        };
        assert_eq!(code, 0, "{out}{err}");
        let out = child.finish(Duration::from_secs(10));
        let outcome: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(outcome["status"], status, "{outcome}");
        if how == "stop" {
            assert!(
                outcome["error"].as_str().unwrap().contains("enough"),
                "{outcome}"
            );
            let (code, _, err) = ws.run(&["runs", "stop", &id]);
            assert_ne!(code, 0);
            assert!(err.contains("is not running"), "{err}");
        } else {
            let (code, _, err) = ws.run(&["resume", "--why", "drill over"]);
            assert_eq!(code, 0, "{err}");
        }
    }
    let (code, _, err) = ws.run(&["runs", "stop", "no-such-run"]);
    assert_ne!(code, 0);
    assert!(err.contains("no run"), "{err}");
}

#[test]
fn a_run_whose_process_is_killed_shows_interrupted_and_a_stop_ends_it() {
    let model = ScriptedModel::start(vec![Scripted {
        delay: Duration::from_millis(700),
        ..calls(&[("read_file", r#"{"path": "README.md"}"#)])
    }]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "timeout_seconds = 30\n",
    );
    let mut child = run_in_background_with(
        &ws,
        &[
            "--agent",
            "reader",
            "--model",
            "m",
            "--max-rounds",
            "50",
            "keep reading",
        ],
        &[("AETHER_RUN_LEASE_MS", "900")],
    );
    let status_of = |id: &str| {
        runs(&ws)
            .into_iter()
            .find(|r| r["id"] == id)
            .map(|r| r["status"].as_str().unwrap().to_string())
    };
    let id = newest_running_run(&ws);
    // Renewed while it runs: still running after several leases' worth of time.
    std::thread::sleep(Duration::from_millis(2_000));
    assert_eq!(status_of(&id).as_deref(), Some("running"));
    // Killed outright: nothing records its end, and its lease lapses.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_of(&id).as_deref() != Some("interrupted") {
        assert!(Instant::now() < deadline, "the run shows as interrupted");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, out, err) = ws.run(&["runs", "stop", &id, "--why", "its terminal was closed"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("recorded as interrupted"), "{out}");
    let (code, out, _) = ws.run(&["runs", "show", &id]);
    assert_eq!(code, 0);
    assert!(out.contains("interrupted"), "{out}");
    let (code, _, err) = ws.run(&["runs", "stop", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("is not running"), "{err}");
}

#[test]
fn a_run_stops_at_its_cost_cap_before_the_next_call() {
    let model = ScriptedModel::start(vec![calls(&[("read_file", r#"{"path": "README.md"}"#)])]);
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let (code, outcome, _) = run(&ws, "reader", &["--cost-cap", "100"], "Read README.md");
    assert_eq!(code, 1);
    assert_eq!(outcome["status"], "cost_cap", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .unwrap()
            .contains("120 tokens of its 100-token cap"),
        "{outcome}"
    );
    assert!(
        events(&ws, outcome["id"].as_str().unwrap(), "tool").is_empty(),
        "the call did not run"
    );
    assert!(audit(&ws).iter().all(|r| r["agent"] != "reader"));
    // A capped run against a server that reports no usage cannot keep its cap: it ends.
    let model = ScriptedModel::start(vec![ok(
        json!({"choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}]}),
    )]);
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let (code, outcome, _) = run(&ws, "reader", &["--cost-cap", "1000"], "Read README.md");
    assert_eq!(code, 1);
    assert!(
        outcome["error"]
            .as_str()
            .unwrap()
            .contains("reported no token usage"),
        "{outcome}"
    );
    let (code, _, err) = ws.run(&[
        "agent",
        "run",
        "--agent",
        "reader",
        "--model",
        "m",
        "--cost-cap",
        "0",
        "hi",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--cost-cap must be at least 1"), "{err}");
}

/// `aether agent run ARGS` started in the background (its outcome read with `finish`).
/// The console's Runs page in a real browser: a running run's transcript opens there, and its
/// Stop button (with the reason asked for) stops it before its next model request.
#[test]
fn a_run_is_stopped_from_the_consoles_runs_page_in_a_real_browser() {
    let Some(peers) = crate::util::peers("runs in a browser") else {
        return;
    };
    if !std::path::Path::new("/usr/bin/chromium").exists() {
        eprintln!("runs in a browser: skipped; install chromium (scripts/test.sh does)");
        return;
    }
    let slow = Scripted {
        delay: Duration::from_millis(700),
        ..calls(&[("read_file", r#"{"path": "README.md"}"#)])
    };
    let model = ScriptedModel::start(vec![slow]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "timeout_seconds = 30\n",
    );
    crate::console::account(&ws, "olga", "operator", "olga's long password");
    let srv = crate::util::HttpServer::start(&ws, &[]);
    let child = run_in_background(&ws, KEEP_READING);
    let id = newest_running_run(&ws);
    let mut browser = crate::browser::Browser::open(
        &peers,
        &format!("http://{}", srv.addr),
        &crate::util::repo_root().join("target/screenshots/runs"),
    );
    browser.ok(json!({"op": "sign_in", "name": "olga", "password": "olga's long password"}));
    let transcript = browser.ok(json!({"op": "transcript", "run": id}));
    let transcript = transcript.as_str().unwrap();
    assert!(
        transcript.contains(&format!("Transcript of run {id} (running)"))
            && transcript.contains("read_file"),
        "{transcript}"
    );
    browser.ok(json!({"op": "shot", "name": "run-transcript"}));
    let row =
        browser.ok(json!({"op": "stop_run", "run": id, "dialog": "enough, from the console"}));
    assert!(row.as_str().unwrap().contains("stopped"), "{row}");
    let out = child.finish(Duration::from_secs(15));
    let outcome: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(outcome["status"], "stopped", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .unwrap()
            .contains("enough, from the console"),
        "{outcome}"
    );
    let problems = browser.ok(json!({"op": "problems"}));
    assert_eq!(problems, json!([]), "errors in the page");
}

/// A run of `reader` that reads on and on (its model always asks for another read).
const KEEP_READING: &[&str] = &[
    "--agent",
    "reader",
    "--model",
    "m",
    "--json",
    "--max-rounds",
    "50",
    "keep reading",
];

fn run_in_background(ws: &Ws, args: &[&str]) -> Killed {
    run_in_background_with(ws, args, &[])
}

/// [`run_in_background`] with more environment variables.
fn run_in_background_with(ws: &Ws, args: &[&str], env: &[(&str, &str)]) -> Killed {
    Killed(
        aether()
            .args(["agent", "run"])
            .args(args)
            .envs(env.iter().copied())
            .current_dir(ws.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The id of the newest run, once it is running and has made at least one round (20 s at
/// most).
fn newest_running_run(ws: &Ws) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "the run started");
        std::thread::sleep(Duration::from_millis(100));
        if let Some(r) = runs(ws).first()
            && r["status"] == "running"
            && r["rounds"].as_u64() >= Some(1)
        {
            return r["id"].as_str().unwrap().to_string();
        }
    }
}

impl Killed {
    /// Waits up to `limit` for it to exit; its stdout.
    fn finish(mut self, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        while self.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the run ended within {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut out = String::new();
        self.0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    }
}

/// llama.cpp's llama-server with SmolLM2 on a free port, or `None` when not installed.
struct LlamaServer {
    child: Child,
    base: String,
}

impl LlamaServer {
    fn start(test: &str) -> Option<LlamaServer> {
        let peers = crate::util::peers(test)?;
        let dir = peers.join("llama");
        let model = dir.join("SmolLM2-135M-Instruct.Q4_1.gguf");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(dir.join("llama-server"))
            .args([
                "-m",
                &model.display().to_string(),
                "--jinja",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "-c",
                "4096",
                "-t",
                "2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server (scripts/install-peers.sh builds it)");
        let server = LlamaServer {
            child,
            base: format!("http://127.0.0.1:{port}/v1"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let up = TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                let _ =
                    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut reply = String::new();
                let _ = s.read_to_string(&mut reply);
                reply.starts_with("HTTP/1.1 200")
            });
            if up {
                return Some(server);
            }
            assert!(
                Instant::now() < deadline,
                "llama-server answered /health within 60 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_model_server_drives_governed_calls() {
    let Some(llama) = LlamaServer::start("a_real_model_server_drives_governed_calls") else {
        return;
    };
    let ws = workspace(&llama.base, "timeout_seconds = 300\n");
    ws.write("secret.txt", "the vault combination is 12-34-56\n");
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: no-secret\n    match: { tool: read_file, path: \"secret.txt\" }\n    action: always_deny\n",
    );
    // The server's own model list (no model runs).
    let (code, out, err) = ws.run(&["models", "check", "m"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SmolLM2-135M-Instruct"), "{out}");

    let (code, outcome, err) = run(
        &ws,
        "reader",
        &["--max-rounds", "2"],
        "Read the file README.md",
    );
    assert_eq!(code, 0, "{outcome} {err}");
    assert_eq!(
        (outcome["status"].as_str(), outcome["rounds"].as_u64()),
        (Some("done"), Some(2))
    );
    assert!(
        outcome["prompt_tokens"].as_u64() > Some(0)
            && outcome["completion_tokens"].as_u64() > Some(0)
    );
    let id = outcome["id"].as_str().unwrap();
    let requests = events(&ws, id, "request");
    assert_eq!(requests.len(), 3, "two rounds and the final request");
    assert_eq!(
        (
            requests[0]["tools"].as_u64(),
            requests[2]["final"].as_bool()
        ),
        (Some(1), Some(true))
    );
    let tools = events(&ws, id, "tool");
    assert!(
        !tools.is_empty(),
        "SmolLM2 at temperature 0 calls read_file: {tools:?}"
    );
    let rows = audit(&ws);
    for t in &tools {
        assert!(
            rows.iter().any(|r| r["call_id"] == t["call_id"]
                && r["agent"] == "reader"
                && r["outcome"] == t["outcome"]),
            "audit row of {t}"
        );
    }

    // A rule denies the file the model is asked for: refused, audited with the rule, and
    // its content never reaches the model.
    let (code, outcome, err) = run(
        &ws,
        "reader",
        &["--max-rounds", "1"],
        "Read the file secret.txt",
    );
    assert_eq!(code, 0, "{outcome} {err}");
    let (_, shown, _) = ws.run(&["runs", "show", outcome["id"].as_str().unwrap(), "--json"]);
    assert!(
        !shown.contains("12-34-56"),
        "the denied file's content reached the model"
    );
    let tools = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    for t in tools
        .iter()
        .filter(|t| t["arguments"].as_str().unwrap_or("").contains("secret"))
    {
        assert_eq!(t["outcome"], "refused", "{t}");
        let row = audit(&ws)
            .into_iter()
            .find(|r| r["call_id"] == t["call_id"])
            .unwrap();
        assert_eq!(row["rule"], "rule:no-secret", "{row}");
    }
}

/// A workspace with a supervisor `lead`, workers `reader` and `w1`..`w4` (each of which may
/// delegate), on the scripted model at `base`.
fn team(base: &str, lead_tools: &str) -> Ws {
    let ws = Ws::new();
    let mut text = format!(
        "[server]\nhttp_agent = \"lead\"\n\n[agents.lead]\nsupervisor = true\ntools = [{lead_tools}]\nworkers = [\"reader\", \"w1\"]\n\n\
         [agents.reader]\ntools = [\"read_file\"]\n\n"
    );
    for w in 1..=4 {
        let workers = if w < 4 {
            format!("[\"w{}\"]", w + 1)
        } else {
            "[]".into()
        };
        text.push_str(&format!(
            "[agents.w{w}]\ntools = [\"delegate\"]\nworkers = {workers}\n\n"
        ));
    }
    text.push_str(&format!(
        "[models.m]\nbase_url = \"{base}\"\nmodel = \"scripted-model\"\ntemperature = 0.0\ntimeout_seconds = 5\n"
    ));
    ws.write("aether.toml", &text);
    ws
}

fn runs(ws: &Ws) -> Vec<Value> {
    let (code, out, err) = ws.run(&["runs", "list", "--json"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_supervisor_delegates_to_a_worker_and_replies() {
    let model = ScriptedModel::start(vec![
        calls(&[(
            "delegate",
            r#"{"agent": "reader", "task": "Read src/hello.txt and say what it says."}"#,
        )]),
        calls(&[("read_file", r#"{"path": "src/hello.txt"}"#)]),
        says("It says hello from aether."),
        calls(&[
            ("reply", r#"{"text": "The file says hello from aether."}"#),
            ("read_file", r#"{"path": "README.md"}"#),
        ]),
    ]);
    let ws = team(&format!("http://{}/v1", model.addr), "\"read_file\"");
    let (code, outcome, err) = run(
        &ws,
        "lead",
        &[],
        "What does src/hello.txt say? Ask the reader.",
    );
    assert_eq!(code, 0, "{outcome} {err}");
    assert_eq!(
        outcome["answer"], "The file says hello from aether.",
        "reply's text is the answer"
    );
    // A supervisor is offered delegate and reply beside its own tools.
    let chats = model.chats();
    let offered: Vec<&str> = chats[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"read_file")
            && offered.contains(&"delegate")
            && offered.contains(&"reply"),
        "{offered:?}"
    );
    assert!(!offered.contains(&"spawn_subagents"), "{offered:?}");
    // The worker was offered its own catalog, not the supervisor's.
    let worker: Vec<&str> = chats[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(worker, ["read_file"]);
    assert_eq!(chats.len(), 4, "the reply ended the run: no fifth request");

    let lead_id = outcome["id"].as_str().unwrap();
    let all = runs(&ws);
    let child = all
        .iter()
        .find(|r| r["agent"] == "reader")
        .expect("the worker's run");
    assert_eq!(
        (child["parent"].as_str(), child["status"].as_str()),
        (Some(lead_id), Some("done"))
    );
    assert_eq!(child["answer"], "It says hello from aether.");
    // Each call audited under the agent that made it, in its own run's session.
    let rows = audit(&ws);
    let row = |tool: &str| {
        rows.iter()
            .find(|r| r["tool"] == tool)
            .unwrap_or_else(|| panic!("{tool} audited"))
    };
    assert_eq!(
        (
            row("delegate")["agent"].as_str(),
            row("delegate")["outcome"].as_str()
        ),
        (Some("lead"), Some("ok"))
    );
    assert_eq!(row("delegate")["session"], format!("run:{lead_id}"));
    assert_eq!(row("read_file")["agent"], "reader");
    assert_eq!(
        row("read_file")["session"],
        format!("run:{}", child["id"].as_str().unwrap())
    );
    assert_eq!(row("reply")["agent"], "lead");
    // The call after the reply did not run.
    assert_eq!(rows.iter().filter(|r| r["tool"] == "read_file").count(), 1);
    let (code, out, _) = ws.run(&["audit", "verify"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn subagents_run_in_parallel_and_share_the_cost_cap() {
    let model = ScriptedModel::start(vec![
        calls(&[(
            "spawn_subagents",
            r#"{"tasks": ["Look at the readme.", "Look at the source."]}"#,
        )]),
        says("a subagent's finding"),
        says("a subagent's finding"),
        says("never reached: the cap is spent"),
    ]);
    let ws = team(
        &format!("http://{}/v1", model.addr),
        "\"read_file\", \"spawn_subagents\"",
    );
    let (code, outcome, err) = run(
        &ws,
        "lead",
        &["--cost-cap", "250"],
        "Research, in parallel.",
    );
    assert_eq!(code, 1, "{outcome} {err}");
    // 120 tokens for the lead's first reply and 120 for each subagent's: 360 of 250.
    assert_eq!(outcome["status"], "cost_cap", "{outcome}");
    assert!(
        outcome["error"]
            .as_str()
            .unwrap()
            .contains("360 tokens of its 250-token cap"),
        "{outcome}"
    );
    assert_eq!(model.chats().len(), 3);
    let lead_id = outcome["id"].as_str().unwrap();
    let children: Vec<Value> = runs(&ws)
        .into_iter()
        .filter(|r| r["parent"] == lead_id)
        .collect();
    assert_eq!(children.len(), 2);
    assert!(
        children
            .iter()
            .all(|c| c["agent"] == "lead" && c["status"] == "done"),
        "{children:?}"
    );
    // Elevated: the audit keeps the whole arguments.
    let row = audit(&ws)
        .into_iter()
        .find(|r| r["tool"] == "spawn_subagents")
        .unwrap();
    assert_eq!(
        (row["tier"].as_str(), row["outcome"].as_str()),
        (Some("elevated"), Some("ok"))
    );
    assert!(
        row["arguments"]
            .as_str()
            .unwrap()
            .contains("Look at the source."),
        "{row}"
    );
    // Bounds: five tasks are refused by the schema, before anything runs.
    let model = ScriptedModel::start(vec![
        calls(&[("spawn_subagents", r#"{"tasks": ["a", "b", "c", "d", "e"]}"#)]),
        says("ok"),
    ]);
    let ws = team(&format!("http://{}/v1", model.addr), "\"spawn_subagents\"");
    let (code, outcome, _) = run(&ws, "lead", &[], "Research.");
    assert_eq!(code, 0);
    let tools = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    assert_eq!(tools[0]["outcome"], "refused", "{tools:?}");
    assert_eq!(runs(&ws).len(), 1, "no subagent started");
}

#[test]
fn delegation_nests_at_most_three_deep_and_never_to_oneself() {
    let hop = |to: &str| {
        calls(&[(
            "delegate",
            &format!(r#"{{"agent": "{to}", "task": "go on"}}"#),
        )])
    };
    let model = ScriptedModel::start(vec![
        hop("w1"),
        hop("w2"),
        hop("w3"),
        hop("w4"),
        says("w3 done"),
        says("w2 done"),
        says("w1 done"),
        calls(&[
            ("delegate", r#"{"agent": "lead", "task": "myself"}"#),
            ("delegate", r#"{"agent": "nobody", "task": "x"}"#),
            ("delegate", r#"{"agent": "w3", "task": "not my worker"}"#),
        ]),
        says("lead done"),
    ]);
    let ws = team(&format!("http://{}/v1", model.addr), "\"read_file\"");
    let (code, outcome, err) = run(&ws, "lead", &[], "Pass it on.");
    assert_eq!(code, 0, "{outcome} {err}");
    assert_eq!(outcome["answer"], "lead done");
    let all = runs(&ws);
    assert_eq!(all.len(), 4, "lead, w1, w2, w3: w4 never started");
    let rows = audit(&ws);
    let refused: Vec<&Value> = rows
        .iter()
        .filter(|r| r["tool"] == "delegate" && r["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    let rule_of = |agent: &str| {
        refused
            .iter()
            .find(|r| r["agent"] == agent)
            .map(|r| r["rule"].as_str().unwrap().to_string())
    };
    assert_eq!(rule_of("w3").as_deref(), Some("orchestration:depth"));
    // Another agent's profile is reached only through the operator's list of workers.
    assert_eq!(rule_of("lead").as_deref(), Some("orchestration:workers"));
    // Delegating to oneself or to nobody is a failed call the model is told about.
    let failed = rows
        .iter()
        .filter(|r| r["tool"] == "delegate" && r["outcome"] == "tool_error")
        .count();
    assert_eq!(failed, 2);
    let lead_calls = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    let texts: Vec<&str> = lead_calls
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("cannot delegate to itself")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("no agent is named \"nobody\"")),
        "{texts:?}"
    );
}

#[test]
fn stopping_a_supervisor_stops_the_run_it_delegated_to() {
    let slow = |s: Scripted| Scripted {
        delay: Duration::from_millis(500),
        ..s
    };
    let model = ScriptedModel::start(vec![
        calls(&[(
            "delegate",
            r#"{"agent": "reader", "task": "Keep reading."}"#,
        )]),
        slow(calls(&[("read_file", r#"{"path": "README.md"}"#)])),
    ]);
    let ws = team(&format!("http://{}/v1", model.addr), "\"read_file\"");
    let child = run_in_background(
        &ws,
        &[
            "--agent",
            "lead",
            "--model",
            "m",
            "--json",
            "-q",
            "Delegate the reading.",
        ],
    );
    // Wait for the worker's run to be under way, then stop the supervisor's.
    let deadline = Instant::now() + Duration::from_secs(20);
    let lead = loop {
        assert!(Instant::now() < deadline, "the worker's run started");
        std::thread::sleep(Duration::from_millis(100));
        let all = runs(&ws);
        let worker = all
            .iter()
            .find(|r| r["agent"] == "reader" && r["rounds"].as_u64() >= Some(1));
        if let (Some(_), Some(lead)) = (worker, all.iter().find(|r| r["agent"] == "lead")) {
            break lead["id"].as_str().unwrap().to_string();
        }
    };
    let (code, _, err) = ws.run(&["runs", "stop", &lead, "--why", "change of plan"]);
    assert_eq!(code, 0, "{err}");
    let out = child.finish(Duration::from_secs(15));
    let outcome: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(outcome["status"], "stopped", "{outcome}");
    let worker = runs(&ws)
        .into_iter()
        .find(|r| r["agent"] == "reader")
        .unwrap();
    assert_eq!(worker["status"], "stopped", "{worker}");
    // It ends either on its parent's stop flag or on the cancellation of the delegate call
    // that started it, whichever it sees first, and says so.
    let why = worker["error"].as_str().unwrap();
    assert!(
        why.contains(&format!("the run {lead}, which started this one"))
            || why.contains("whatever started this run went away"),
        "{worker}"
    );
    assert!(worker["ended_us"].is_i64(), "{worker}");
    // The delegate call the stop cut short is audited as cancelled, not left open.
    let row = audit(&ws)
        .into_iter()
        .find(|r| r["tool"] == "delegate")
        .unwrap();
    assert_eq!(row["outcome"], "cancelled", "{row}");
}

#[test]
fn bad_run_requests_change_nothing_and_say_why() {
    let model = ScriptedModel::start(vec![says("hi")]);
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let cases: [(&[&str], &str); 5] = [
        (
            &["agent", "run", "--model", "nope", "--agent", "reader", "hi"],
            "no model connection \"nope\"; configured: m",
        ),
        (
            &["agent", "run", "--model", "m", "--agent", "nobody", "hi"],
            "nobody",
        ),
        (
            &["agent", "run", "--model", "m", "--agent", "reader", "  "],
            "the task is empty",
        ),
        (
            &[
                "agent",
                "run",
                "--model",
                "m",
                "--agent",
                "reader",
                "--max-rounds",
                "0",
                "hi",
            ],
            "--max-rounds must be between 1 and 200",
        ),
        (&["runs", "show", "no-such-run"], "no run \"no-such-run\""),
    ];
    for (args, expect) in cases {
        let (code, _, err) = ws.run(args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert!(model.chats().is_empty(), "no model request was made");
    let (_, out, _) = ws.run(&["runs", "list", "--json"]);
    assert!(out.trim().is_empty(), "no run was recorded: {out}");
    // An agent limited to other connections may not use this one.
    let ws = workspace(&format!("http://{}/v1", model.addr), "");
    let text = std::fs::read_to_string(ws.path().join("aether.toml")).unwrap();
    ws.write(
        "aether.toml",
        &text.replace("[agents.writer]", "[models.other]\npreset = \"lm-studio\"\nmodel = \"x\"\n\n[agents.writer]\nmodels = [\"other\"]"),
    );
    let (code, _, err) = ws.run(&["agent", "run", "--model", "m", "--agent", "writer", "hi"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("may not run on model connection \"m\""),
        "{err}"
    );
}

#[test]
fn a_runs_call_that_needs_a_person_waits_for_one() {
    let model = ScriptedModel::start(vec![
        calls(&[("read_file", r#"{"path": "src/hello.txt"}"#)]),
        says("It says hello."),
    ]);
    let ws = workspace(
        &format!("http://{}/v1", model.addr),
        "timeout_seconds = 30\n",
    );
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: ask-for-src\n    match: { tool: read_file, path: \"src/**\" }\n    action: ask_user\n",
    );
    let child = run_in_background(
        &ws,
        &[
            "--agent",
            "reader",
            "--model",
            "m",
            "--json",
            "-q",
            "Read src/hello.txt",
        ],
    );
    // The call waits for a person, under the run's agent, like any client's call.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        assert!(
            Instant::now() < deadline,
            "the run's call waits for approval"
        );
        std::thread::sleep(Duration::from_millis(100));
        let (_, out, _) = ws.run(&["approvals", "list", "--json"]);
        let rows = Value::Array(crate::util::json_lines(&out));
        if let Some(row) = rows.as_array().and_then(|r| r.first()) {
            assert_eq!(
                (row["agent"].as_str(), row["tool"].as_str()),
                (Some("reader"), Some("read_file")),
                "{row}"
            );
            break row["id"].as_str().unwrap().to_string();
        }
    };
    let (code, out, err) = ws.run(&["approvals", "approve", &id, "--why", "looked at it"]);
    assert_eq!(code, 0, "{out}{err}");
    let out = child.finish(Duration::from_secs(20));
    let outcome: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(
        (outcome["status"].as_str(), outcome["answer"].as_str()),
        (Some("done"), Some("It says hello."))
    );
    let tools = events(&ws, outcome["id"].as_str().unwrap(), "tool");
    assert_eq!(tools[0]["outcome"], "ok", "{tools:?}");
    assert!(
        tools[0]["text"]
            .as_str()
            .unwrap()
            .contains("hello from aether")
    );
    let row = audit(&ws)
        .into_iter()
        .find(|r| r["call_id"] == tools[0]["call_id"])
        .unwrap();
    assert!(
        row["reason"]
            .as_str()
            .unwrap_or("")
            .contains("looked at it"),
        "{row}"
    );
}

/// An MCP session over stdio acting as `agent`, initialized.
fn session_as(ws: &Ws, agent: &str) -> crate::util::StdioServer {
    let mut s = crate::util::StdioServer::spawn(ws, &["--agent", agent]);
    s.initialize("2025-11-25");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    s
}

/// `code_review` through the calling agent's model connection, against the real llama-server:
/// a review of the asked shape (its structure asserted, not its wisdom) within the tokens
/// asked for; a file the caller may not read is refused before any model sees it; without a
/// model connection, a clear error.
#[test]
fn code_review_asks_the_agents_model_for_a_structured_review() {
    let Some(llama) =
        LlamaServer::start("code_review_asks_the_agents_model_for_a_structured_review")
    else {
        return;
    };
    let ws = workspace(
        &llama.base,
        "timeout_seconds = 300\n\n[agents.reviewer]\ntools = [\"code_review\"]\n",
    );
    ws.write(
        "src/calc.py",
        "def average(xs):\n    return sum(xs) / len(xs)\n\nprint(average([]))\n",
    );
    ws.write(".env", "API_KEY=sk-live-0123456789abcdef0123456789abcdef\n");
    ws.write("secret.py", "PASSWORD = 'hunter2'\n");
    ws.write(
        "permissions.yaml",
        "rules:\n  - name: not-that\n    match: { tool: code_review, path: \"secret.py\" }\n    action: always_deny\n",
    );
    let mut s = session_as(&ws, "reviewer");
    let reply = s.call(
        1,
        "code_review",
        json!({"path": "src/calc.py", "max_tokens": 200}),
    );
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{reply}");
    let out = &result["structuredContent"];
    assert_eq!(
        (
            out["connection"].as_str(),
            out["lines"].as_u64(),
            out["path"].as_str()
        ),
        (Some("m"), Some(4), Some("src/calc.py")),
        "{out}"
    );
    // The server's grammar holds the model to the review's JSON.
    assert_eq!(out["parsed"], true, "{out}");
    assert!(out["summary"].is_string(), "{out}");
    for f in out["findings"].as_array().unwrap() {
        assert!(
            ["critical", "major", "minor", "nit"].contains(&f["severity"].as_str().unwrap()),
            "{f}"
        );
        assert!(
            f["line"].is_null() || (1..=4).contains(&f["line"].as_u64().unwrap()),
            "{f}"
        );
        assert!(f["title"].is_string() && f["detail"].is_string(), "{f}");
    }
    eprintln!("the review: {out}");
    let completion = out["completion_tokens"].as_u64().unwrap();
    assert!(completion > 0 && completion <= 200, "{out}");
    assert!(out["prompt_tokens"].as_u64().unwrap() > 0, "{out}");

    // Files the caller may not read are not reviewed: a credential file, a ruled-off path.
    for (id, path, why) in [(2, ".env", "credential"), (3, "secret.py", "not-that")] {
        let reply = s.call(id, "code_review", json!({"path": path}));
        let text = reply.to_string();
        assert!(
            reply["error"].is_object() || reply["result"]["isError"] == true,
            "{path} was reviewed: {reply}"
        );
        assert!(text.contains(why), "{path}: {text}");
        assert!(
            !text.contains("sk-live") && !text.contains("hunter2"),
            "{text}"
        );
    }
    drop(s);

    // No model connection: the tool says so.
    let bare = Ws::new();
    bare.write(
        "aether.toml",
        "[server]\nhttp_agent = \"reviewer\"\n\n[agents.reviewer]\ntools = [\"code_review\"]\n",
    );
    bare.write("a.py", "x = 1\n");
    let mut s = session_as(&bare, "reviewer");
    let reply = s.call(1, "code_review", json!({"path": "a.py"}));
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        reply
            .to_string()
            .contains("no model connection is configured"),
        "{reply}"
    );
}

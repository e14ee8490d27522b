//! `tts_render` and `tts_status` through the operator's speech server (`[tts]` in
//! `aether.toml`), as a user runs them: `aether mcp-serve` over stdio, the key in the vault
//! (`aether credentials set`). No OpenAI-compatible speech server can be installed on these
//! machines, so the test's own speaks the API's shape (`POST /v1/audio/speech`, `GET
//! /v1/models`, `GET /v1/audio/voices`) with the real espeak-ng behind it: the audio Aether
//! joins and encodes is real speech, and what Aether sent is checked request by request.

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::runner::{Received, read_request};
use crate::util::{StdioServer, Ws, aether};

/// The speech server's voices, and the espeak-ng voice that speaks each.
const VOICES: &[(&str, &str)] = &[("alloy", "en-us"), ("nova", "en-gb+f3")];

struct SpeechServer {
    addr: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl SpeechServer {
    fn start() -> SpeechServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&mut stream) else {
                    continue;
                };
                log.lock().unwrap().push(request.clone());
                let (status, kind, body) = answer(&request);
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        SpeechServer { addr, received }
    }

    fn speech_requests(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.line.starts_with("POST /v1/audio/speech "))
            .cloned()
            .collect()
    }
}

fn answer(r: &Received) -> (u16, &'static str, Vec<u8>) {
    let json = |v: Value| v.to_string().into_bytes();
    if !r
        .headers
        .to_ascii_lowercase()
        .contains("authorization: bearer sk-speech-1")
    {
        return (401, "application/json", json(json!({"error": "no key"})));
    }
    match r.line.split_whitespace().take(2).collect::<Vec<_>>()[..] {
        ["GET", "/v1/models"] => (
            200,
            "application/json",
            json(json!({"data": [{"id": "tts-1-hd"}]})),
        ),
        ["GET", "/v1/audio/voices"] => (
            200,
            "application/json",
            json(json!({"voices": VOICES.iter().map(|(v, _)| *v).collect::<Vec<_>>()})),
        ),
        ["POST", "/v1/audio/speech"] => {
            let voice = r.body["voice"].as_str().unwrap_or_default();
            let Some((_, espeak_voice)) = VOICES.iter().find(|(v, _)| *v == voice) else {
                return (
                    400,
                    "application/json",
                    json(json!({"error": format!("unknown voice {voice}")})),
                );
            };
            assert_eq!(r.body["response_format"], "wav");
            let mut child = Command::new("espeak-ng")
                .args(["-v", espeak_voice, "--stdout", "--stdin"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("espeak-ng (scripts/test.sh installs it)");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(r.body["input"].as_str().unwrap().as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            (200, "audio/wav", out.stdout)
        }
        _ => (
            404,
            "application/json",
            json(json!({"error": "no such route"})),
        ),
    }
}

/// A workspace whose narrator agent reaches the audio tools, with `[tts]` as given.
fn workspace(tts: &str) -> (Ws, tempfile::TempDir) {
    let ws = Ws::new();
    let keys = tempfile::tempdir().unwrap();
    ws.write(
        "aether.toml",
        &format!(
            "[server]\nhttp_agent = \"narrator\"\n[roots.ws]\npath = \"{}\"\nmode = \"rw\"\n[agents.narrator]\nmcp_servers = [\"workspace\", \"audio\"]\n[vault]\nkey_file = \"{}\"\n{tts}",
            ws.path().display(),
            keys.path().join("vault.key").display()
        ),
    );
    ws.write(
        "show/script.md",
        "# Pilot\n\n[HOST]\nWelcome to the show, where we build things in the open.\nGUEST: Thanks for having me here tonight.\n",
    );
    (ws, keys)
}

fn serve(ws: &Ws) -> StdioServer {
    let mut cmd = aether();
    cmd.args(["mcp-serve", "--agent", "narrator"])
        .current_dir(ws.path())
        .stderr(Stdio::null());
    let mut s = StdioServer::from_command(cmd);
    let init = s.initialize("2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "aether", "{init}");
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    s
}

fn probed_seconds(mp3: &std::path::Path) -> f64 {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "default=nw=1:nk=1",
        ])
        .arg(mp3)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn tts_render_speaks_through_the_operators_speech_server_with_the_vaults_key() {
    let server = SpeechServer::start();
    let base = format!("http://{}/v1", server.addr);
    let (ws, _keys) = workspace(&format!(
        "[tts]\nbase_url = \"{base}\"\nmodel = \"tts-1-hd\"\nkey = \"speech-key\"\n"
    ));
    ws.set_credential("speech-key", "sk-speech-1", &[]);
    let mut s = serve(&ws);

    // The server is up, and its voices are the ones it lists.
    let status = s.call(1, "tts_status", json!({}));
    let out = &status["result"]["structuredContent"];
    assert_eq!(out["up"], true, "{status}");
    assert_eq!(out["backend"], format!("openai-compatible {base}"));
    assert_eq!(out["voices"], json!(["alloy", "nova"]));

    // Each line spoken by the server in its speaker's voice, in order, with the key.
    let reply = s.call(
        2,
        "tts_render",
        json!({"script": "show/script.md", "voices": {"guest": "nova"}}),
    );
    let out = &reply["result"]["structuredContent"];
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert_eq!(out["backend"], format!("openai-compatible {base}"));
    assert_eq!(
        out["speakers"],
        json!([
            {"speaker": "HOST", "voice": "alloy", "lines": 1},
            {"speaker": "GUEST", "voice": "nova", "lines": 1},
        ])
    );
    let sent: Vec<Value> = server
        .speech_requests()
        .iter()
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(
        sent,
        [
            json!({"model": "tts-1-hd", "input": "Welcome to the show, where we build things in the open.", "voice": "alloy", "response_format": "wav"}),
            json!({"model": "tts-1-hd", "input": "Thanks for having me here tonight.", "voice": "nova", "response_format": "wav"}),
        ]
    );
    // A real MP3, as long as reported (two lines of speech and the gap between).
    let mp3 = ws.path().join("show/script.mp3");
    let seconds = probed_seconds(&mp3);
    let reported = out["duration_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        (seconds - reported).abs() < 0.15 && seconds > 2.0,
        "{seconds} s probed, {reported} s reported"
    );

    // A voice the server does not have: its answer, and nothing written.
    let reply = s.call(
        3,
        "tts_render",
        json!({"script": "show/script.md", "voices": {"guest": "shimmer"}, "output": "show/other.mp3"}),
    );
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let said = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("400") && said.contains("unknown voice shimmer"),
        "{said}"
    );
    assert!(!ws.path().join("show/other.mp3").exists());
    // A voice name no server has the shape of: refused before anything is sent.
    let before = server.speech_requests().len();
    let reply = s.call(
        4,
        "tts_render",
        json!({"script": "show/script.md", "voices": {"guest": "--help"}}),
    );
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert_eq!(server.speech_requests().len(), before);
}

#[test]
fn a_speech_server_that_is_down_or_misconfigured_is_said_so() {
    // Nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (ws, _keys) = workspace(&format!(
        "[tts]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nvoices = [\"alloy\"]\n"
    ));
    let mut s = serve(&ws);
    let status = s.call(1, "tts_status", json!({}));
    let out = &status["result"]["structuredContent"];
    assert_eq!(out["up"], false, "{status}");
    assert!(
        out["problems"][0]
            .as_str()
            .unwrap()
            .contains("is not reachable"),
        "{status}"
    );
    // The configured voices, since the server cannot list its own.
    assert_eq!(out["voices"], json!(["alloy"]));
    let reply = s.call(2, "tts_render", json!({"script": "show/script.md"}));
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(!ws.path().join("show/script.mp3").exists());
    drop(s);

    // A [tts] section that cannot work is refused when Aether starts.
    for (tts, says) in [
        (
            "[tts]\nbase_url = \"ftp://x/v1\"\n",
            "must be an http or https URL",
        ),
        (
            "[tts]\nbase_url = \"http://u:p@x/v1\"\n",
            "must not hold credentials",
        ),
        ("[tts]\nmodel = \"tts-1\"\n", "tts: base_url is missing"),
        (
            "[tts]\nbase_url = \"http://x/v1\"\nvoices = [\"-rf\"]\n",
            "is not a voice name",
        ),
        (
            "[tts]\nbase_url = \"http://speech.example/v1\"\nkey = \"speech-key\"\n",
            "a key is sent only over HTTPS or to this computer",
        ),
    ] {
        let (ws, _keys) = workspace(tts);
        let (code, _, err) = ws.run(&["mcp-serve", "--agent", "narrator"]);
        assert_ne!(code, 0, "{tts}");
        assert!(err.contains(says), "{tts}: {err}");
    }
}

//! `tts_render` and `tts_status` with the real espeak-ng and ffmpeg (`scripts/test.sh` installs
//! them): one MP3 whose duration and line order are checked against the audio itself, voices
//! that are not espeak-ng's refused with nothing written, the output confined and undoable.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Tree, call, denied, invalid, ok};

/// The MP3's duration, as ffprobe reads it.
fn probed_seconds(mp3: &Path) -> f64 {
    let out = std::process::Command::new("ffprobe")
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

/// The silences ffmpeg's silencedetect finds in the MP3, as (start, end) in seconds.
fn silences(mp3: &Path) -> Vec<(f64, f64)> {
    let out = std::process::Command::new("ffmpeg")
        .args(["-nostdin", "-hide_banner", "-i"])
        .arg(mp3)
        .args(["-af", "silencedetect=noise=-45dB:d=0.6", "-f", "null", "-"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let mut found = Vec::new();
    let mut start = None;
    for line in log.lines() {
        if let Some(s) = line.split("silence_start: ").nth(1) {
            start = s.trim().parse::<f64>().ok();
        }
        if let Some(e) = line.split("silence_end: ").nth(1) {
            let end: f64 = e.split_whitespace().next().unwrap().parse().unwrap();
            found.push((start.take().unwrap_or(0.0), end));
        }
    }
    found
}

#[tokio::test]
async fn a_script_is_spoken_into_one_mp3_line_by_line_in_its_speakers_voices() {
    let t = Tree::new();
    let (text, status) = ok(call(&t.cx(), "tts_status", json!({})).await);
    assert_eq!(
        status["up"], true,
        "tts needs espeak-ng and ffmpeg (scripts/test.sh): {text}"
    );
    let voices: Vec<&str> = status["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        voices.contains(&"en-us") && voices.contains(&"en-gb"),
        "{voices:?}"
    );

    t.file(
        "show/script.md",
        "# Pilot\n\n[HOST]\nWelcome to the show, where we build things in the open.\n(laughs)\nPIXEL: Thanks.\n**Host:** So, let us begin with the very first question of the evening.\n",
    );
    let cx = t.cx_writable();
    let (text, out) = ok(call(
        &cx,
        "tts_render",
        json!({"script": "show/script.md", "voices": {"pixel": "en-gb+f3"}, "gap_ms": 1200}),
    )
    .await);
    assert_eq!(out["path"], "show/script.mp3", "{text}");
    assert_eq!(out["lines"], 3);
    assert_eq!(
        out["speakers"],
        json!([
            {"speaker": "HOST", "voice": "en-us", "lines": 2},
            {"speaker": "PIXEL", "voice": "en-gb+f3", "lines": 1},
        ])
    );
    let spoken: Vec<(u64, String, f64, f64)> = out["spoken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap(),
                s["speaker"].as_str().unwrap().to_string(),
                s["start_ms"].as_f64().unwrap() / 1000.0,
                s["end_ms"].as_f64().unwrap() / 1000.0,
            )
        })
        .collect();
    let order: Vec<(u64, &str)> = spoken.iter().map(|(l, s, ..)| (*l, s.as_str())).collect();
    assert_eq!(order, [(4, "HOST"), (6, "PIXEL"), (7, "Host")]);
    let mp3 = t.ws.join("show/script.mp3");
    let bytes = std::fs::read(&mp3).unwrap();
    assert_eq!(out["bytes"], bytes.len() as u64);
    // An MP3 as ffprobe reads it, as long as reported (the encoder pads a little).
    let seconds = probed_seconds(&mp3);
    let reported = out["duration_ms"].as_f64().unwrap() / 1000.0;
    assert!(
        (seconds - reported).abs() < 0.15,
        "{seconds} s probed, {reported} s reported"
    );
    // The gaps are in the audio where the lines are said to meet, in script order: each
    // boundary lies inside a silence ffmpeg finds (the short line's length puts the second
    // boundary early; swapped lines would not fit).
    let quiet = silences(&mp3);
    for pair in spoken.windows(2) {
        let (end, next) = (pair[0].3, pair[1].2);
        assert!(
            quiet
                .iter()
                .any(|(a, b)| *a <= end + 0.25 && *b >= next - 0.25),
            "no silence from {end} to {next}: {quiet:?}"
        );
    }

    // And the lines themselves are speech, not silence.
    for (line, speaker, start, end) in &spoken {
        assert!(
            !quiet
                .iter()
                .any(|(a, b)| *a <= start + 0.1 && *b >= end - 0.1),
            "line {line} ({speaker}) is silent: {quiet:?}"
        );
    }

    // Undone like any write.
    let (_, undone) = ok(call(&cx, "revert_file", json!({"path": "show/script.mp3"})).await);
    assert!(!mp3.exists(), "{undone}");
}

#[tokio::test]
async fn voices_outputs_and_scripts_are_checked_before_anything_is_written() {
    let t = Tree::new();
    t.file("s.md", "HOST: Hello.\n");
    t.file("empty.md", "# Only a heading\n\n(applause)\n");
    let cx = t.cx_writable();
    let render = |args: Value| call(&cx, "tts_render", args);
    // Not a voice name at all: refused before any program runs.
    for voice in ["-w /tmp/x", "en;rm -rf", "../../voice", "EN"] {
        let message = invalid(render(json!({"script": "s.md", "voices": {"HOST": voice}})).await);
        assert!(message.contains("not an espeak-ng voice name"), "{message}");
    }
    // Shaped like one, but espeak-ng has none by that name.
    let message = invalid(render(json!({"script": "s.md", "voices": {"host": "zz-qq"}})).await);
    assert!(message.contains("no voice \"zz-qq\""), "{message}");
    let message = invalid(render(json!({"script": "empty.md"})).await);
    assert!(message.contains("no line to speak"), "{message}");
    let message = invalid(render(json!({"script": "s.md", "output": "s.wav"})).await);
    assert!(message.contains(".mp3"), "{message}");
    denied(render(json!({"script": "s.md", "output": "../outside/s.mp3"})).await);
    denied(render(json!({"script": "../outside/secret.txt"})).await);
    let files: Vec<String> = std::fs::read_dir(&t.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().all(|f| !f.ends_with(".mp3")), "{files:?}");
    assert!(!t.outside.join("s.mp3").exists());
}

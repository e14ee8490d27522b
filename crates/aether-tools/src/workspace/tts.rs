//! `tts_render` and `tts_status`: a workspace script spoken line by line, each line in the
//! voice mapped to its speaker, joined with short gaps into one MP3 written into the workspace
//! (journalled like any write: `revert_file` undoes it).
//!
//! The backend is the operator's speech server when `[tts]` names one (OpenAI-compatible
//! `/audio/speech`, asked for WAV; `aether_net::speech`, handed over as a [`Speech`]), else
//! the local `espeak-ng` (Debian's package): each line's text reaches it on standard input,
//! never as an argument, and its WAV comes back in a private folder. Either way hound joins
//! the lines with silence between them and `ffmpeg` encodes the MP3. Programs run with a
//! cleared environment, killed at the time limit or when the call is cancelled. `tts_status`
//! says which backend is up and which voices it has.
//!
//! The script's speaker lines come in the shapes agents write: `[HOST]` on a line of its own
//! (its words on the lines below, or after it), `NAME: words`, `**NAME:** words`, and
//! `**Name:**` on its own with the words below it. Headings, rules, blank lines and stage
//! directions (a line wholly in parentheses or brackets, or in italics) are not spoken;
//! words before any speaker are the narrator's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::tool::groups;
use aether_policy::{Risk, Tier, ToolMeta};
use async_trait::async_trait;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::write;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use aether_tools_core::Speech;

/// Lines spoken at most, characters per line, and characters in all.
const MAX_LINES: usize = 500;
const MAX_LINE_CHARS: usize = 2_000;
const MAX_CHARS: usize = 50_000;
/// How long one program may run, and a whole render.
const PROGRAM_TIME: Duration = Duration::from_secs(60);
const RENDER_TIME: Duration = Duration::from_secs(600);
/// The voices unmapped speakers get, in order of their first line.
const DEFAULT_VOICES: &[&str] = &[
    "en-us", "en-gb+m3", "en-us+f3", "en-gb+f4", "en-us+m7", "en-gb",
];

/// One spoken line of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spoken {
    /// The speaker as first written (`HOST`, `Pixel`).
    pub speaker: String,
    pub text: String,
    /// Its line number in the script, from 1.
    pub line: usize,
}

static BRACKET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[([A-Z0-9][A-Z0-9 _-]{0,31})\]\s*(.*)$").expect("a speaker in brackets")
});
static BOLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\*\*([^*:\n]{1,32})(?::\*\*|\*\*:)\s*(.*)$").expect("a speaker in bold")
});
static PLAIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Za-z][A-Za-z0-9_-]*(?: [A-Za-z0-9_-]+){0,2}):\s+(\S.*)$")
        .expect("a speaker and a colon")
});

/// The lines of `script` to speak, each with its speaker (the narrator's, `NARRATOR`, before
/// any speaker is named).
pub fn parse_script(script: &str) -> Vec<Spoken> {
    let mut speaker = "NARRATOR".to_string();
    let mut out = Vec::new();
    for (i, raw) in script.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.chars().all(|c| "-*_= ".contains(c)) {
            continue;
        }
        let (named, rest) = if let Some(c) = BRACKET.captures(line) {
            (Some(c[1].trim().to_string()), c[2].to_string())
        } else if let Some(c) = BOLD.captures(line) {
            (Some(c[1].trim().to_string()), c[2].to_string())
        } else if let Some(c) = PLAIN.captures(line) {
            (Some(c[1].trim().to_string()), c[2].to_string())
        } else {
            (None, line.to_string())
        };
        // A label with no name in it ("** :**") names no one.
        if let Some(name) = named.filter(|n| !n.is_empty()) {
            speaker = name;
        }
        let text = spoken_text(&rest);
        if !text.is_empty() {
            out.push(Spoken {
                speaker: speaker.clone(),
                text,
                line: i + 1,
            });
        }
    }
    out
}

/// A line's words as spoken: stage directions (wholly in parentheses, brackets or italics) say
/// nothing, and markdown's emphasis and code marks are not read out.
fn spoken_text(line: &str) -> String {
    let t = line.trim();
    let wrapped = |open: char, close: char| t.starts_with(open) && t.ends_with(close);
    if t.is_empty()
        || wrapped('(', ')')
        || wrapped('[', ']')
        || (t.len() > 1 && (wrapped('*', '*') || wrapped('_', '_')) && !t.starts_with("**"))
    {
        return String::new();
    }
    t.chars()
        .filter(|c| !matches!(c, '*' | '`'))
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RenderArgs {
    /// The script, relative to the root: speaker lines such as "[HOST]", "PIXEL: words",
    /// "**Host:** words" or "**Host:**" with the words below.
    script: String,
    /// Where the MP3 goes, relative to the root. Default: the script's path with ".mp3".
    #[serde(default)]
    output: Option<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
    /// A voice per speaker (case does not matter): an espeak-ng voice such as
    /// {"HOST": "en-gb+m3"}, or, with a speech server configured, one of its voices
    /// (tts_status lists them). Speakers left out get distinct voices in order.
    #[serde(default)]
    voices: BTreeMap<String, String>,
    /// Silence between lines, in milliseconds (0 to 5,000). Default 350.
    #[serde(default = "default_gap")]
    #[schemars(range(min = 0, max = 5000))]
    gap_ms: u32,
}

fn default_gap() -> u32 {
    350
}

#[derive(Serialize, JsonSchema)]
struct Cast {
    speaker: String,
    voice: String,
    lines: usize,
}

/// Where one line sits in the MP3.
#[derive(Serialize, JsonSchema)]
struct Timed {
    /// Its line number in the script.
    line: usize,
    speaker: String,
    start_ms: u64,
    end_ms: u64,
}

#[derive(Serialize, JsonSchema)]
struct RenderOut {
    root: String,
    path: String,
    bytes: u64,
    /// Lines spoken, in script order.
    lines: usize,
    /// Each speaker in order of their first line, with the voice that spoke them.
    speakers: Vec<Cast>,
    /// Each line spoken, in order, with where it starts and ends in the MP3.
    spoken: Vec<Timed>,
    duration_ms: u64,
    backend: String,
    created: bool,
    call_id: String,
}

pub struct TtsRender {
    def: ToolDef,
    /// The operator's speech server; espeak-ng without one.
    speech: Option<Arc<dyn Speech>>,
}

impl Default for TtsRender {
    fn default() -> TtsRender {
        TtsRender::new()
    }
}

impl TtsRender {
    pub fn new() -> TtsRender {
        TtsRender {
            def: ToolDef {
                name: "tts_render".into(),
                title: "Speak a workspace script file into one MP3".into(),
                group: groups::AUDIO.into(),
                tier: Tier::Standard,
                description: "Speak a script from the workspace line by line, each line in the voice mapped to its speaker \
                     (speaker lines such as \"[HOST]\", \"PIXEL: words\", \"**Host:** words\"), join the lines with short \
                     gaps and write one MP3 into the workspace (journalled: revert_file undoes it). Spoken by the operator's \
                     speech server (OpenAI-compatible) when one is configured, else by the local espeak-ng; encoded by \
                     ffmpeg; tts_status says which backend is up and lists its voices."
                    .into(),
                input_schema: schema_of::<RenderArgs>(),
                output_schema: schema_of::<RenderOut>(),
                arguments: ArgumentKinds::paths(&["script", "output"]),
                meta: ToolMeta {
                    risk: Risk::Medium,
                    read_only: false,
                    reaches_network: false,
                    needs_confirmation: false,
                    idempotent: false,
                    destructive: true,
                },
            },
            speech: None,
        }
    }

    /// Speaking through the operator's speech server instead of espeak-ng (the definition is
    /// the same: an approval holds for both).
    pub fn with_speech(speech: Arc<dyn Speech>) -> TtsRender {
        TtsRender {
            speech: Some(speech),
            ..TtsRender::new()
        }
    }
}

/// A voice name as espeak-ng spells one: a language (`en-gb`), optionally with a variant
/// (`+f3`). Anything else is refused before a program sees it.
fn valid_voice(voice: &str) -> bool {
    static VOICE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[a-z]{2,3}(?:-[a-z0-9]{1,8}){0,3}(?:\+[a-z0-9_]{1,16})?$")
            .expect("a voice name")
    });
    VOICE.is_match(voice)
}

/// Gives a WAV written as a stream (its RIFF and data sizes left as placeholders such as
/// 0xFFFFFFFF, as servers that stream and `espeak-ng --stdout` write them) the sizes of the
/// bytes it has, so it reads to its end; a WAV with true sizes is left as it is.
fn streamed_wav_sized(wav: &mut [u8]) {
    if wav.len() < 12 || &wav[..4] != b"RIFF" || &wav[8..12] != b"WAVE" {
        return;
    }
    let riff = u32::try_from(wav.len() - 8).unwrap_or(u32::MAX);
    wav[4..8].copy_from_slice(&riff.to_le_bytes());
    let mut at = 12;
    while at + 8 <= wav.len() {
        let size = u32::from_le_bytes(wav[at + 4..at + 8].try_into().expect("four bytes")) as usize;
        let left = wav.len() - at - 8;
        if &wav[at..at + 4] == b"data" {
            if size > left {
                let size = u32::try_from(left).unwrap_or(u32::MAX);
                wav[at + 4..at + 8].copy_from_slice(&size.to_le_bytes());
            }
            return;
        }
        // Chunks are padded to an even length.
        at += 8 + size + (size & 1);
    }
}

/// Where a program is installed, from a fixed list of places (never the caller's PATH).
fn installed(program: &str) -> Option<PathBuf> {
    ["/usr/bin", "/usr/local/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// Runs `program` with `args` and `input` on its standard input, with a cleared environment,
/// in `dir`; its standard output, or an error naming what it said.
async fn run(
    cx: &CallContext,
    program: &Path,
    args: &[&str],
    input: &[u8],
    dir: &Path,
) -> Result<Vec<u8>, ToolError> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::failed(format!("{} did not start: {e}", program.display())))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
    });
    let out = tokio::select! {
        out = tokio::time::timeout(PROGRAM_TIME, child.wait_with_output()) => out,
        _ = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
    };
    let _ = feed.await;
    let out = out
        .map_err(|_| {
            ToolError::failed(format!(
                "{} ran over {} s",
                program.display(),
                PROGRAM_TIME.as_secs()
            ))
        })?
        .map_err(|e| ToolError::failed(format!("{}: {e}", program.display())))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said: String = said.trim().chars().take(500).collect();
        return Err(ToolError::failed(format!(
            "{} failed ({}): {said}",
            program.display(),
            out.status
        )));
    }
    Ok(out.stdout)
}

/// Scripts read at most.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// What speaks a render's lines.
enum Speaker<'a> {
    /// The operator's speech server.
    Server(&'a dyn Speech),
    /// espeak-ng, installed here.
    Espeak(PathBuf),
}

/// espeak-ng, or an error saying it is missing and how to install it.
fn espeak() -> Result<PathBuf, ToolError> {
    installed("espeak-ng").ok_or_else(|| {
        ToolError::failed("no voice backend: espeak-ng is not installed (apt install espeak-ng)")
    })
}

/// ffmpeg, or an error saying it is missing and how to install it.
fn ffmpeg() -> Result<PathBuf, ToolError> {
    installed("ffmpeg").ok_or_else(|| {
        ToolError::failed("cannot encode MP3: ffmpeg is not installed (apt install ffmpeg)")
    })
}

#[async_trait]
impl Tool for TtsRender {
    fn journals_every_effect(&self) -> bool {
        true
    }

    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: RenderArgs = parse_args(args)?;
        if args.gap_ms > 5_000 {
            return Err(ToolError::InvalidArguments("gap_ms is at most 5000".into()));
        }
        let output = match &args.output {
            Some(o) => o.clone(),
            None => Path::new(&args.script)
                .with_extension("mp3")
                .to_string_lossy()
                .into_owned(),
        };
        if !output.to_ascii_lowercase().ends_with(".mp3") {
            return Err(ToolError::InvalidArguments(format!(
                "the output {output:?} must be an .mp3 file"
            )));
        }
        let voices: BTreeMap<String, String> = args
            .voices
            .iter()
            .map(|(k, v)| (k.to_lowercase(), v.clone()))
            .collect();
        // The backend's name, the shape of its voice names (and how a wrong one is refused),
        // and its voices for speakers without one.
        let (backend, valid, shape, defaults): (String, fn(&str) -> bool, &str, Vec<String>) =
            match &self.speech {
                Some(s) => (
                    s.name(),
                    aether_policy::config::valid_speech_voice,
                    "a voice name (letters, digits and _ . + -; tts_status lists them)",
                    s.default_voices(),
                ),
                None => (
                    "espeak-ng".into(),
                    valid_voice,
                    "an espeak-ng voice name such as \"en-gb\" or \"en-us+f3\" (tts_status lists them)",
                    DEFAULT_VOICES.iter().map(|v| v.to_string()).collect(),
                ),
            };
        if let Some((speaker, voice)) = voices.iter().find(|(_, v)| !valid(v)) {
            return Err(ToolError::InvalidArguments(format!(
                "{voice:?} (for {speaker}) is not {shape}"
            )));
        }
        let script = crate::read_text_file(
            &cx,
            args.root.as_deref(),
            &args.script,
            MAX_SCRIPT_BYTES,
            "a script",
        )?
        .text;
        let lines = parse_script(&script);
        if lines.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "{} has no line to speak",
                args.script
            )));
        }
        if lines.len() > MAX_LINES
            || lines
                .iter()
                .any(|l| l.text.chars().count() > MAX_LINE_CHARS)
            || lines.iter().map(|l| l.text.len()).sum::<usize>() > MAX_CHARS
        {
            return Err(ToolError::InvalidArguments(format!(
                "the script is too long to speak: at most {MAX_LINES} lines of {MAX_LINE_CHARS} characters, {MAX_CHARS} in all"
            )));
        }
        // The cast: each speaker's voice, mapped or the next default, in order of first line.
        // `part[i]`: which member of the cast speaks line i.
        let mut cast: Vec<Cast> = Vec::new();
        let mut part = Vec::with_capacity(lines.len());
        for l in &lines {
            match cast
                .iter()
                .position(|c| c.speaker.eq_ignore_ascii_case(&l.speaker))
            {
                Some(c) => {
                    cast[c].lines += 1;
                    part.push(c);
                }
                None => {
                    let voice = voices
                        .get(&l.speaker.to_lowercase())
                        .cloned()
                        .unwrap_or_else(|| defaults[cast.len() % defaults.len().max(1)].clone());
                    part.push(cast.len());
                    cast.push(Cast {
                        speaker: l.speaker.clone(),
                        voice,
                        lines: 1,
                    });
                }
            }
        }
        let ffmpeg = ffmpeg()?;
        let speaker = match &self.speech {
            Some(speech) => Speaker::Server(speech.as_ref()),
            None => Speaker::Espeak(espeak()?),
        };
        // A private folder for the render's files, removed when dropped.
        let scratch = crate::shell::Home::new(&cx.call_id)?;
        // Each line spoken into a WAV of its own, then joined with silence between.
        let mut joined: Option<(hound::WavSpec, Vec<i16>)> = None;
        let mut spoken = Vec::with_capacity(lines.len());
        let started = std::time::Instant::now();
        for (i, l) in lines.iter().enumerate() {
            if started.elapsed() > RENDER_TIME {
                return Err(ToolError::failed(format!(
                    "the render ran over {} minutes at line {}: split the script",
                    RENDER_TIME.as_secs() / 60,
                    l.line
                )));
            }
            let voice = &cast[part[i]].voice;
            let mut audio = match &speaker {
                Speaker::Server(speech) => speech.speak(&l.text, voice, &cx.cancel).await?,
                Speaker::Espeak(espeak) => {
                    let wav = format!("line{i}.wav");
                    run(
                        &cx,
                        espeak,
                        &["-v", voice, "-w", &wav, "--stdin"],
                        l.text.as_bytes(),
                        &scratch.dir,
                    )
                    .await
                    .map_err(|e| match e {
                        ToolError::Failed(m) if m.contains("voice") => ToolError::InvalidArguments(
                            format!("espeak-ng has no voice {voice:?} (for {}): {m}", l.speaker),
                        ),
                        e => e,
                    })?;
                    std::fs::read(scratch.dir.join(&wav)).map_err(|e| {
                        ToolError::failed(format!("espeak-ng's audio for line {}: {e}", l.line))
                    })?
                }
            };
            streamed_wav_sized(&mut audio);
            let mut reader = hound::WavReader::new(std::io::Cursor::new(audio)).map_err(|e| {
                ToolError::failed(format!("{backend}'s audio for line {}: {e}", l.line))
            })?;
            let spec = reader.spec();
            let samples: Vec<i16> =
                reader
                    .samples::<i16>()
                    .collect::<Result<_, _>>()
                    .map_err(|e| {
                        ToolError::failed(format!("{backend}'s audio for line {}: {e}", l.line))
                    })?;
            let (first, all) = joined.get_or_insert_with(|| (spec, Vec::new()));
            if spec != *first {
                return Err(ToolError::failed(format!(
                    "{backend}'s voices spoke in different formats"
                )));
            }
            let per_ms = (first.sample_rate as u64 * first.channels as u64).max(1);
            if i > 0 {
                let gap = per_ms * args.gap_ms as u64 / 1000;
                all.extend(std::iter::repeat_n(0i16, gap as usize));
            }
            let start_ms = all.len() as u64 * 1000 / per_ms;
            all.extend(samples);
            spoken.push(Timed {
                line: l.line,
                speaker: l.speaker.clone(),
                start_ms,
                end_ms: all.len() as u64 * 1000 / per_ms,
            });
        }
        let (spec, samples) = joined.expect("at least one line");
        let duration_ms =
            samples.len() as u64 * 1000 / (spec.sample_rate as u64 * spec.channels as u64).max(1);
        let wav = scratch.dir.join("joined.wav");
        {
            let mut writer = hound::WavWriter::create(&wav, spec)
                .map_err(|e| ToolError::failed(format!("cannot join the lines: {e}")))?;
            for s in &samples {
                writer
                    .write_sample(*s)
                    .map_err(|e| ToolError::failed(format!("cannot join the lines: {e}")))?;
            }
            writer
                .finalize()
                .map_err(|e| ToolError::failed(format!("cannot join the lines: {e}")))?;
        }
        run(
            &cx,
            &ffmpeg,
            &[
                "-nostdin",
                "-hide_banner",
                "-loglevel",
                "error",
                "-i",
                "joined.wav",
                "-codec:a",
                "libmp3lame",
                "-q:a",
                "4",
                "out.mp3",
            ],
            &[],
            &scratch.dir,
        )
        .await?;
        let bytes = std::fs::read(scratch.dir.join("out.mp3"))
            .map_err(|e| ToolError::failed(format!("ffmpeg wrote no MP3: {e}")))?;
        drop(scratch);
        // Written into the workspace as write_file writes: checked, journalled, atomic.
        let w = write::write_whole(
            &cx,
            "tts_render",
            (args.root.as_deref(), &output),
            &bytes,
            true,
        )
        .await?;
        let (created, shown) = (w.created, &w.shown);
        let voices_text = cast
            .iter()
            .map(|c| format!("{} ({}, {} line(s))", c.speaker, c.voice, c.lines))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "{} {shown}: {} line(s), {:.1} s, spoken by {backend}: {voices_text}. revert_file undoes it.",
            if created { "created" } else { "wrote" },
            lines.len(),
            duration_ms as f64 / 1000.0
        );
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(RenderOut {
                root: w.root.clone(),
                path: w.rel.clone(),
                bytes: bytes.len() as u64,
                lines: lines.len(),
                speakers: cast,
                spoken,
                duration_ms,
                backend: backend.clone(),
                created,
                call_id: cx.call_id.clone(),
            })
            .map_err(ToolError::failed)?,
        ))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {}

#[derive(Serialize, JsonSchema)]
struct StatusOut {
    /// The backend tts_render speaks with.
    backend: String,
    /// Whether tts_render can render: the backend is up (the server answers, or espeak-ng is
    /// installed) and ffmpeg is installed.
    up: bool,
    /// espeak-ng's version line, if installed.
    espeak_ng: Option<String>,
    /// Whether ffmpeg (the MP3 encoder) is installed.
    ffmpeg: bool,
    /// The voices the backend has: the server's (as it lists them, else as configured), or
    /// espeak-ng's languages, each of which takes a variant too, e.g. "en-us+f3".
    voices: Vec<String>,
    /// What is missing or down, and how to install it.
    problems: Vec<String>,
}

pub struct TtsStatus {
    def: ToolDef,
    speech: Option<Arc<dyn Speech>>,
}

impl Default for TtsStatus {
    fn default() -> TtsStatus {
        TtsStatus::new()
    }
}

impl TtsStatus {
    pub fn new() -> TtsStatus {
        TtsStatus {
            def: ToolDef {
                name: "tts_status".into(),
                title: "Whether the voice service is up, and the reference voices".into(),
                group: groups::AUDIO.into(),
                tier: Tier::Standard,
                description: "Whether tts_render can speak here: the operator's speech server up (when one is configured) or \
                     espeak-ng installed, and ffmpeg; and the voices the backend has (espeak-ng's each take a variant, e.g. \
                     \"en-us+f3\")."
                    .into(),
                input_schema: schema_of::<StatusArgs>(),
                output_schema: schema_of::<StatusOut>(),
                arguments: Default::default(),
                meta: ToolMeta::read_only(),
            },
            speech: None,
        }
    }

    /// Asking the operator's speech server instead of espeak-ng.
    pub fn with_speech(speech: Arc<dyn Speech>) -> TtsStatus {
        TtsStatus {
            speech: Some(speech),
            ..TtsStatus::new()
        }
    }
}

#[async_trait]
impl Tool for TtsStatus {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let _: StatusArgs = parse_args(args)?;
        let mut problems = Vec::new();
        let (mut version, mut voices) = (None, Vec::new());
        let mut backend = "espeak-ng".to_string();
        let mut server = None;
        if let Some(speech) = &self.speech {
            let status = tokio::select! {
                s = speech.status() => s,
                () = cx.cancel.cancelled() => return Err(ToolError::Cancelled),
            };
            backend = speech.name();
            if !status.up {
                problems.push(status.detail.clone());
            }
            voices = status.voices;
            server = Some(status.detail);
        } else {
            match installed("espeak-ng") {
                Some(espeak) => {
                    let dir = std::env::temp_dir();
                    let out = run(&cx, &espeak, &["--version"], &[], &dir).await?;
                    version = Some(String::from_utf8_lossy(&out).trim().to_string());
                    let out = run(&cx, &espeak, &["--voices"], &[], &dir).await?;
                    // "Pty Language Age/Gender VoiceName File Other Languages", one voice a row.
                    let mut found: Vec<String> = String::from_utf8_lossy(&out)
                        .lines()
                        .skip(1)
                        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
                        .filter(|v| valid_voice(v))
                        .collect();
                    found.sort();
                    found.dedup();
                    voices = found;
                }
                None => {
                    problems.push("espeak-ng is not installed (apt install espeak-ng)".to_string())
                }
            }
        }
        let ffmpeg = installed("ffmpeg").is_some();
        if !ffmpeg {
            problems.push("ffmpeg is not installed (apt install ffmpeg)".to_string());
        }
        let up = problems.is_empty();
        let text = match up {
            true => format!(
                "up: {} with {} voices (e.g. {}), MP3 by ffmpeg",
                server
                    .as_deref()
                    .or(version.as_deref())
                    .unwrap_or("espeak-ng"),
                voices.len(),
                voices
                    .iter()
                    .take(8)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            false => format!("down: {}", problems.join("; ")),
        };
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(StatusOut {
                backend,
                up,
                espeak_ng: version,
                ffmpeg,
                voices,
                problems,
            })
            .map_err(ToolError::failed)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_wav_gets_the_sizes_of_what_it_holds() {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 8000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut wav = std::io::Cursor::new(Vec::new());
        {
            let mut w = hound::WavWriter::new(&mut wav, spec).unwrap();
            for s in 0..100i16 {
                w.write_sample(s).unwrap();
            }
            w.finalize().unwrap();
        }
        let whole = wav.into_inner();
        let mut streamed = whole.clone();
        // As a stream writes it: both sizes unknown.
        streamed[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let data = streamed.windows(4).position(|w| w == b"data").unwrap();
        streamed[data + 4..data + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            hound::WavReader::new(std::io::Cursor::new(streamed.clone()))
                .and_then(|r| r.into_samples::<i16>().collect::<Result<Vec<_>, _>>())
                .is_err()
        );
        streamed_wav_sized(&mut streamed);
        assert_eq!(streamed, whole);
        let samples: Vec<i16> = hound::WavReader::new(std::io::Cursor::new(streamed))
            .unwrap()
            .into_samples()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(samples, (0..100).collect::<Vec<i16>>());
        // Not a WAV: left alone.
        let mut other = b"ID3 not a wav".to_vec();
        streamed_wav_sized(&mut other);
        assert_eq!(other, b"ID3 not a wav");
    }

    fn said(script: &str) -> Vec<(String, String)> {
        parse_script(script)
            .into_iter()
            .map(|s| (s.speaker, s.text))
            .collect()
    }

    #[test]
    fn every_shape_of_speaker_line_is_read() {
        let script = "# Episode 1\n\nWelcome, everyone.\n\n[HOST]\nHello and welcome.\n(laughs)\nPIXEL: I am **Pixel**.\n**Guest:** Thanks for having me.\n**Host:**\nSo, tell us.\n*music swells*\n---\nGuest Star: Of course.\n";
        assert_eq!(
            said(script),
            [
                ("NARRATOR", "Welcome, everyone."),
                ("HOST", "Hello and welcome."),
                ("PIXEL", "I am Pixel."),
                ("Guest", "Thanks for having me."),
                ("Host", "So, tell us."),
                ("Guest Star", "Of course."),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        // A URL or a long clause before a colon is not a speaker.
        assert_eq!(
            said(
                "[HOST] See https://example.org: it says so.\nWe asked them why this happens: nobody knew.\n"
            ),
            [
                ("HOST", "See https://example.org: it says so."),
                ("HOST", "We asked them why this happens: nobody knew."),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
    }

    proptest::proptest! {
        // proptest's default runs 256 cases, or `PROPTEST_CASES`.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text, speaker lines among it or not: each spoken line is one non-empty line of
        /// the script's own words (less markdown's marks) on a line the script has, and no speaker name is empty.
        #[test]
        fn any_script_is_read_into_lines_of_its_own(
            script in "(\\[[A-Z ]{0,8}\\]|\\*\\*[A-Za-z :]{0,8}\\*\\*|[A-Za-z]{0,6}: |\\PC{0,12}|\n|\\(|\\)){0,40}",
        ) {
            let count = script.lines().count();
            // Markdown's emphasis and code marks are not read out.
            let plain: String = script.chars().filter(|c| !matches!(c, '*' | '`')).collect();
            for s in parse_script(&script) {
                proptest::prop_assert!(!s.text.is_empty() && !s.text.contains('\n'));
                proptest::prop_assert!(s.line >= 1 && s.line <= count);
                proptest::prop_assert!(!s.speaker.trim().is_empty());
                for word in s.text.split_whitespace() {
                    proptest::prop_assert!(plain.contains(word), "{word:?} is not the script's");
                }
            }
        }

        /// A voice name that passes the check can never be read as an option or a path.
        #[test]
        fn a_valid_voice_is_never_an_option_or_a_path(voice in "\\PC{0,24}") {
            if valid_voice(&voice) {
                proptest::prop_assert!(!voice.starts_with('-'));
                proptest::prop_assert!(!voice.contains(['/', ' ', '.', '=']));
            }
        }
    }

    #[test]
    fn voice_names_are_espeaks_shape_only() {
        for ok in ["en", "en-us", "en-gb+f3", "en-gb-x-rp", "cmn", "de+m7"] {
            assert!(valid_voice(ok), "{ok}");
        }
        for bad in [
            "",
            "-w",
            "en us",
            "en;rm",
            "../x",
            "en+",
            "EN-US",
            "en-us+f3 -w /tmp/x",
        ] {
            assert!(!valid_voice(bad), "{bad}");
        }
    }
}

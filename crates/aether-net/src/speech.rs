//! An OpenAI-compatible speech server (`[tts]` in `aether.toml`) for `tts_render`: each line
//! POSTed to `BASE/audio/speech` as `{model, input, voice, response_format: "wav"}`, the WAV
//! that comes back joined by the tool as espeak-ng's would be. The server is the operator's
//! (like a model connection), reached with the same outbound client as every connection
//! Aether makes: no proxy from the environment, no redirects followed, a bounded time.

use std::sync::Arc;
use std::time::Duration;

use aether_tools_core::{Speech, SpeechStatus, ToolError};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// Bytes of one line's audio at most (a long line at 24 kHz is a few MB).
const MAX_AUDIO: usize = 64 << 20;

/// The voices OpenAI's speech API has, for speakers no voice is mapped to (in order).
pub const OPENAI_VOICES: &[&str] = &["alloy", "echo", "fable", "onyx", "nova", "shimmer"];

/// Where the API key comes from, asked at each use (the vault is read then, not kept).
#[async_trait]
pub trait KeySource: Send + Sync {
    async fn key(&self) -> Result<String, String>;
}

/// An OpenAI-compatible `/audio/speech` server.
pub struct OpenAiSpeech {
    base: url::Url,
    model: String,
    voices: Vec<String>,
    key: Option<Arc<dyn KeySource>>,
    /// One client for every line and status check (its connections kept between them), or
    /// why none could be built.
    client: Result<reqwest::Client, String>,
}

impl OpenAiSpeech {
    /// `base` is the API's base URL (`http://host:port/v1`); `voices`, what it has when it
    /// does not list them itself.
    pub fn new(
        base: url::Url,
        model: String,
        voices: Vec<String>,
        key: Option<Arc<dyn KeySource>>,
        timeout: Duration,
    ) -> OpenAiSpeech {
        let client = crate::outbound(timeout)
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"));
        OpenAiSpeech {
            base,
            model,
            voices,
            key,
            client,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base.as_str().trim_end_matches('/'))
    }

    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client.as_ref().map_err(ToolError::failed)
    }

    async fn authorized(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, ToolError> {
        Ok(match &self.key {
            Some(key) => request.bearer_auth(key.key().await.map_err(|e| {
                ToolError::failed(format!("the speech server's key is not available: {e}"))
            })?),
            None => request,
        })
    }

    /// The server's own list of voices (`GET BASE/audio/voices`, as Kokoro's and others'
    /// servers have it), if it has one.
    async fn listed_voices(&self) -> Option<Vec<String>> {
        let client = self.client().ok()?;
        let answer = self
            .authorized(client.get(self.url("audio/voices")))
            .await
            .ok()?
            .send()
            .await
            .ok()?;
        if !answer.status().is_success() {
            return None;
        }
        let body: serde_json::Value = serde_json::from_slice(&answer.bytes().await.ok()?).ok()?;
        let list = body.get("voices").unwrap_or(&body).as_array()?;
        let voices: Vec<String> = list
            .iter()
            .filter_map(|v| {
                v.as_str()
                    .or_else(|| v.get("id").and_then(|i| i.as_str()))
                    .or_else(|| v.get("name").and_then(|i| i.as_str()))
                    .map(str::to_string)
            })
            .collect();
        (!voices.is_empty()).then_some(voices)
    }
}

#[async_trait]
impl Speech for OpenAiSpeech {
    fn name(&self) -> String {
        format!("openai-compatible {}", crate::client::shown(&self.base))
    }

    fn default_voices(&self) -> Vec<String> {
        if self.voices.is_empty() {
            OPENAI_VOICES.iter().map(|v| v.to_string()).collect()
        } else {
            self.voices.clone()
        }
    }

    async fn speak(
        &self,
        text: &str,
        voice: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<u8>, ToolError> {
        let shown = self.name();
        let request = self
            .authorized(
                self.client()?
                    .post(self.url("audio/speech"))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(
                        serde_json::json!({
                            "model": self.model,
                            "input": text,
                            "voice": voice,
                            "response_format": "wav",
                        })
                        .to_string(),
                    ),
            )
            .await?;
        let exchange = async {
            let mut answer = request.send().await.map_err(|e| {
                ToolError::failed(format!("the speech server ({shown}) did not answer: {e}"))
            })?;
            let status = answer.status();
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await.map_err(|e| {
                ToolError::failed(format!("reading the speech server's audio failed: {e}"))
            })? {
                if body.len() + chunk.len() > MAX_AUDIO {
                    return Err(ToolError::failed(format!(
                        "the speech server's audio for one line is over {} MiB",
                        MAX_AUDIO >> 20
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                let said: String = String::from_utf8_lossy(&body)
                    .trim()
                    .chars()
                    .take(300)
                    .collect();
                // A voice the server does not have is the caller's to fix.
                let message = format!(
                    "the speech server ({shown}) answered {status} for voice {voice:?}: {said}"
                );
                return Err(if status.is_client_error() {
                    ToolError::InvalidArguments(message)
                } else {
                    ToolError::failed(message)
                });
            }
            if !body.starts_with(b"RIFF") || body.get(8..12) != Some(b"WAVE") {
                return Err(ToolError::failed(format!(
                    "the speech server ({shown}) did not answer with WAV audio"
                )));
            }
            Ok(body)
        };
        tokio::select! {
            r = exchange => r,
            () = cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }

    async fn status(&self) -> SpeechStatus {
        let up = match self.client() {
            Ok(client) => match self.authorized(client.get(self.url("models"))).await {
                Ok(request) => match request.send().await {
                    Ok(a) if a.status().is_success() => Ok(()),
                    Ok(a) => Err(format!("it answered {} at /models", a.status())),
                    Err(e) => Err(format!("it did not answer: {e}")),
                },
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        let voices = match self.listed_voices().await {
            Some(v) => v,
            None => self.default_voices(),
        };
        SpeechStatus {
            up: up.is_ok(),
            detail: match up {
                Ok(()) => format!("{} is up (model {})", self.name(), self.model),
                Err(e) => format!("{} is not reachable: {e}", self.name()),
            },
            voices,
        }
    }
}

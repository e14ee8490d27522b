//! Model connections (`[models.NAME]` in `aether.toml`): OpenAI-compatible chat-completions
//! servers the agent runner talks to, with presets for hosted providers and local servers.
//! Pure: the key itself lives in the vault, named here.

use std::time::Duration;

use serde::Deserialize;

/// How a server writes tool calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// Standard `tool_calls` only.
    #[default]
    Openai,
    /// Also DeepSeek's text-form calls (DSML markup in the content), converted.
    Deepseek,
    /// Standard calls, and DSML markup converted where it appears.
    Auto,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Openai => "openai",
            Dialect::Deepseek => "deepseek",
            Dialect::Auto => "auto",
        }
    }
}

/// A preset: where a known provider or local server is, and its habits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Preset {
    #[serde(rename = "openai")]
    OpenAi,
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "deepseek")]
    DeepSeek,
    #[serde(rename = "lm-studio")]
    LmStudio,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
}

impl Preset {
    /// Base URL, default model (if the preset has one), dialect, and whether the provider
    /// refuses a temperature.
    fn defaults(self) -> (&'static str, Option<&'static str>, Dialect, bool) {
        match self {
            Preset::OpenAi => (
                "https://api.openai.com/v1",
                Some("gpt-5.5"),
                Dialect::Openai,
                true,
            ),
            Preset::Anthropic => (
                "https://api.anthropic.com/v1",
                Some("claude-opus-5-5"),
                Dialect::Openai,
                true,
            ),
            Preset::DeepSeek => (
                "https://api.deepseek.com",
                Some("deepseek-flash"),
                Dialect::Deepseek,
                false,
            ),
            Preset::LmStudio => ("http://127.0.0.1:1234/v1", None, Dialect::Openai, false),
            Preset::LlamaCpp => ("http://127.0.0.1:8080/v1", None, Dialect::Openai, false),
        }
    }
}

/// `[models.NAME]` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// openai, anthropic, deepseek, lm-studio or llama.cpp: fills in what is left out.
    pub preset: Option<Preset>,
    /// The server's OpenAI-compatible base, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub dialect: Option<Dialect>,
    /// The name of the vault credential holding the API key (`aether credentials set NAME`).
    pub key: Option<String>,
    /// Sent unless the provider refuses one (OpenAI, Anthropic). Default 0.2.
    pub temperature: Option<f64>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Per model request.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Rounds before the last request without tools.
    #[serde(default = "default_rounds")]
    pub max_rounds: u32,
    /// Tokens (prompt and completion, as the server counts them) a run may spend.
    pub cost_cap_tokens: Option<u64>,
}

fn default_max_tokens() -> u32 {
    1024
}

fn default_timeout() -> u64 {
    120
}

fn default_rounds() -> u32 {
    40
}

/// A model connection, resolved and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    /// Without a trailing slash.
    pub base_url: String,
    pub model: String,
    pub dialect: Dialect,
    /// The vault credential holding the key.
    pub key: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: u32,
    pub timeout: Duration,
    pub max_rounds: u32,
    pub cost_cap_tokens: Option<u64>,
}

/// Whether a key may be sent to `url`: HTTPS, or this computer.
pub fn key_may_go_to(url: &url::Url) -> bool {
    url.scheme() == "https"
        || match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
}

impl RawModel {
    /// The connection resolved against its preset, or what is wrong with it.
    pub fn resolve(&self, name: &str) -> Result<ModelSpec, Vec<String>> {
        let mut problems = Vec::new();
        let (base, model, dialect, no_temperature) = match self.preset {
            Some(p) => {
                let (b, m, d, t) = p.defaults();
                (Some(b), m, d, t)
            }
            None => (None, None, Dialect::Openai, false),
        };
        let base_url = self.base_url.as_deref().or(base).unwrap_or_default();
        let base_url = base_url.trim_end_matches('/').to_string();
        if base_url.is_empty() {
            problems.push(format!(
                "models.{name}: base_url is missing (or choose a preset: openai, anthropic, deepseek, lm-studio, llama.cpp)"
            ));
        } else if let Some(p) = base_url_problem(&format!("models.{name}.base_url"), &base_url) {
            problems.push(p);
        } else if let Ok(u) = url::Url::parse(&base_url)
            && self.key.is_some()
            && !key_may_go_to(&u)
        {
            problems.push(format!(
                "models.{name}: a key is sent only over HTTPS or to this computer, and {base_url:?} is neither"
            ));
        }
        let model = self
            .model
            .as_deref()
            .or(model)
            .unwrap_or_default()
            .to_string();
        if model.trim().is_empty() {
            problems.push(format!(
                "models.{name}.model is missing (aether models check {name} lists what the server has)"
            ));
        }
        if let Some(t) = self.temperature
            && !(0.0..=2.0).contains(&t)
        {
            problems.push(format!("models.{name}.temperature must be between 0 and 2"));
        }
        if !(16..=131_072).contains(&self.max_tokens) {
            problems.push(format!(
                "models.{name}.max_tokens must be between 16 and 131072"
            ));
        }
        if !(1..=600).contains(&self.timeout_seconds) {
            problems.push(format!(
                "models.{name}.timeout_seconds must be between 1 and 600"
            ));
        }
        if !(1..=200).contains(&self.max_rounds) {
            problems.push(format!(
                "models.{name}.max_rounds must be between 1 and 200"
            ));
        }
        if let Some(key) = &self.key
            && !valid_credential_name(key)
        {
            problems.push(format!(
                "models.{name}.key {key:?} is not a credential name (1-64 of letters, digits, -, _ and .)"
            ));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(ModelSpec {
            name: name.to_string(),
            base_url,
            model,
            dialect: self.dialect.unwrap_or(dialect),
            key: self.key.clone(),
            temperature: if no_temperature {
                None
            } else {
                Some(self.temperature.unwrap_or(0.2))
            },
            max_tokens: self.max_tokens,
            timeout: Duration::from_secs(self.timeout_seconds),
            max_rounds: self.max_rounds,
            cost_cap_tokens: self.cost_cap_tokens,
        })
    }
}

/// What is wrong with `url` as the base URL of an operator's server (a model connection, the
/// speech server), set at `key`: not an http(s) URL, or credentials in it (they belong in the
/// vault).
pub(crate) fn base_url_problem(key: &str, url: &str) -> Option<String> {
    match url::Url::parse(url) {
        Err(e) => Some(format!("{key} {url:?}: {e}")),
        Ok(u) if !matches!(u.scheme(), "http" | "https") || u.host().is_none() => {
            Some(format!("{key} {url:?} must be an http or https URL"))
        }
        Ok(u) if !u.username().is_empty() || u.password().is_some() => Some(format!(
            "{key} must not hold credentials; name a vault credential in key"
        )),
        Ok(_) => None,
    }
}

pub(crate) fn valid_credential_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(toml_text: &str) -> RawModel {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn presets_fill_in_and_explicit_values_win() {
        let m = raw("preset = \"llama.cpp\"\nmodel = \"smol\"")
            .resolve("local")
            .unwrap();
        assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(
            (m.temperature, m.max_rounds, m.max_tokens),
            (Some(0.2), 40, 1024)
        );
        let m = raw("preset = \"openai\"\nkey = \"openai\"")
            .resolve("gpt")
            .unwrap();
        assert_eq!(
            (m.model.as_str(), m.temperature),
            ("gpt-5.5", None),
            "OpenAI gets no temperature"
        );
        let m = raw("preset = \"deepseek\"\nkey = \"ds\"")
            .resolve("ds")
            .unwrap();
        assert_eq!(m.dialect, Dialect::Deepseek);
        let m = raw("base_url = \"http://127.0.0.1:9/v1/\"\nmodel = \"x\"\ntemperature = 0.0\ndialect = \"auto\"")
            .resolve("x")
            .unwrap();
        assert_eq!(
            (m.base_url.as_str(), m.temperature, m.dialect),
            ("http://127.0.0.1:9/v1", Some(0.0), Dialect::Auto)
        );
    }

    #[test]
    fn a_key_goes_only_over_https_or_to_this_computer() {
        for base in [
            "http://models.example.com/v1",
            "http://10.0.0.5:8080/v1",
            "http://127.0.0.1.nip.io/v1",
        ] {
            let e = raw(&format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nkey = \"k\""
            ))
            .resolve("m")
            .unwrap_err();
            assert!(
                e[0].contains("only over HTTPS or to this computer"),
                "{base}: {e:?}"
            );
        }
        for base in [
            "https://models.example.com/v1",
            "http://127.0.0.1:8080/v1",
            "http://[::1]:8080/v1",
            "http://localhost:1234/v1",
        ] {
            raw(&format!(
                "base_url = \"{base}\"\nmodel = \"m\"\nkey = \"k\""
            ))
            .resolve("m")
            .unwrap();
        }
        // Without a key, nothing secret goes: a plain remote server is the operator's call.
        raw("base_url = \"http://models.example.com/v1\"\nmodel = \"m\"")
            .resolve("m")
            .unwrap();
    }

    #[test]
    fn bad_connections_say_what_is_wrong() {
        let cases = [
            ("model = \"m\"", "base_url is missing"),
            (
                "base_url = \"ftp://x/v1\"\nmodel = \"m\"",
                "must be an http or https URL",
            ),
            (
                "base_url = \"https://u:p@x/v1\"\nmodel = \"m\"",
                "must not hold credentials",
            ),
            ("preset = \"lm-studio\"", "model is missing"),
            (
                "preset = \"lm-studio\"\nmodel = \"m\"\ntemperature = 3.0",
                "temperature must be between",
            ),
            (
                "preset = \"lm-studio\"\nmodel = \"m\"\nmax_rounds = 0",
                "max_rounds must be between",
            ),
            (
                "preset = \"lm-studio\"\nmodel = \"m\"\nkey = \"a b\"",
                "is not a credential name",
            ),
        ];
        for (text, expect) in cases {
            let e = raw(text).resolve("m").unwrap_err();
            assert!(e.iter().any(|p| p.contains(expect)), "{text}: {e:?}");
        }
        assert!(toml::from_str::<RawModel>("preset = \"nope\"").is_err());
        assert!(
            toml::from_str::<RawModel>("base_url = \"x\"\napi_key = \"sk-...\"").is_err(),
            "no key in the file"
        );
    }
}

//! `aether.toml` as the operator wrote it: parsed and validated, nothing opened.
//!
//! Configuration happens in two steps (as in ripgrep's flags): this module turns text into
//! checked values and says precisely what is wrong; `aether-pipeline` then builds the real
//! objects (canonical roots, an open store) from them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::agent::{AgentProfile, ApprovalRoute, Rate};
use crate::paths::{RootMode, is_root_name};
use crate::tool::{is_group_key, is_tool_name};

/// The name of the agent used when the operator configured none.
pub const DEFAULT_AGENT: &str = "default";
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8484";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub roots: BTreeMap<String, RawRoot>,
    #[serde(default)]
    pub agents: BTreeMap<String, RawAgent>,
    /// Per project: what `run_command` may run for its agents.
    #[serde(default)]
    pub projects: BTreeMap<String, RawProject>,
    /// Teams' settings.
    #[serde(default)]
    pub teams: BTreeMap<String, RawTeam>,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub journal: JournalSection,
    #[serde(default)]
    pub approvals: ApprovalsSection,
    #[serde(default)]
    pub policy: PolicySection,
    #[serde(default)]
    pub research: ResearchSection,
    /// The operator's speech server for `tts_render` (`[tts]`); espeak-ng without one.
    #[serde(default)]
    pub tts: TtsSection,
    /// Upstream MCP servers whose tools Aether serves, through its own pipeline.
    #[serde(default)]
    pub upstreams: BTreeMap<String, RawUpstream>,
    #[serde(default)]
    pub vault: VaultSection,
    /// Model connections for the agent runner (`aether agent run --model NAME`).
    #[serde(default)]
    pub models: BTreeMap<String, crate::models::RawModel>,
    #[serde(default)]
    pub registry: RegistrySection,
    /// OAuth 2.1 access tokens from an authorization server (`[auth]`), beside or instead of
    /// the static agent tokens.
    #[serde(default)]
    pub auth: AuthSection,
    /// OpenTelemetry traces over OTLP (`[telemetry]`); the standard `OTEL_*` variables too.
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// The console (`[console]`): signing in through the organization's identity provider.
    #[serde(default)]
    pub console: ConsoleSection,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSection {
    /// Sign-in through an OpenID Connect provider, beside the local accounts.
    pub oidc: Option<ConsoleOidc>,
    /// A trace in the operator's tracing UI, `{trace_id}` standing for an audit row's trace
    /// id, e.g. "http://127.0.0.1:16686/trace/{trace_id}" (Jaeger): the audit's row detail
    /// links to it.
    pub trace_url: Option<String>,
}

/// The console's sign-in through an OpenID provider (`[console.oidc]`): authorization code
/// with PKCE as a public client; the person's role from a claim of the ID token.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleOidc {
    /// The provider's issuer URL (its discovery document is read from it).
    pub issuer: String,
    /// The console's client id at the provider (a public client: no secret).
    pub client_id: String,
    /// Where the provider sends people back: this server's `/console/oidc/callback`, as the
    /// browser reaches it (registered at the provider).
    pub redirect_uri: String,
    /// The button's label (unset: "your identity provider").
    pub name: Option<String>,
    /// The ID token claim holding the person's groups or roles.
    #[serde(default = "default_role_claim")]
    pub role_claim: String,
    /// Scopes asked for besides `openid` (for the provider to put the claim in the ID token).
    #[serde(default = "default_oidc_scopes")]
    pub scopes: Vec<String>,
    /// Claim values to console roles (viewer, approver, operator, admin). A person gets the
    /// most privileged role their values map to; one whose values map to none is refused.
    pub roles: BTreeMap<String, String>,
}

fn default_role_claim() -> String {
    "groups".into()
}

fn default_oidc_scopes() -> Vec<String> {
    vec!["profile".into(), "groups".into()]
}

/// Where each call's trace goes (OTLP). Unset `endpoint`: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
/// or `OTEL_EXPORTER_OTLP_ENDPOINT`; neither set, no traces are made.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySection {
    /// The collector's OTLP endpoint, as `OTEL_EXPORTER_OTLP_ENDPOINT` names it: the base URL
    /// (`http://collector:4318`; Aether adds `/v1/traces`) for HTTP, `http://collector:4317`
    /// for gRPC.
    pub endpoint: Option<String>,
    /// `"http/protobuf"` or `"grpc"` (unset: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`, else `"http/protobuf"`).
    pub protocol: Option<String>,
    /// Headers sent with each export (an API key); `OTEL_EXPORTER_OTLP_HEADERS` adds to them.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of Aether's spans (unset: `OTEL_SERVICE_NAME`, else `aether`).
    pub service_name: Option<String>,
    /// The share of new traces kept, 0 to 1 (a caller's sampled flag is followed as it comes).
    /// Unset: `OTEL_TRACES_SAMPLER`, else all.
    pub sample_ratio: Option<f64>,
}

/// OTLP's transports, as `OTEL_EXPORTER_OTLP_PROTOCOL` names them.
pub const OTLP_PROTOCOLS: [&str; 2] = ["http/protobuf", "grpc"];

/// An authorization server whose access tokens `/mcp` accepts (the MCP authorization spec:
/// Aether is the resource server). Unset `issuer`: static agent tokens only.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// The authorization server's issuer URL: a token's `iss` must be exactly this, and its
    /// signing keys are read from the issuer's metadata (`jwks_uri`).
    pub issuer: Option<String>,
    /// This server's resource URL (RFC 8707/9728), e.g. `https://aether.example.com/mcp`: a
    /// token must be minted for it (its `aud`); a token for any other resource is refused.
    pub resource: Option<String>,
    /// Where the issuer's signing keys are, when its metadata does not say (or to pin them).
    pub jwks_uri: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    /// Take JWTs without `typ: at+jwt` (RFC 9068) as access tokens: only for an issuer that
    /// does not mark its access tokens, and whose other JWTs (ID tokens) never name this
    /// server's resource as their audience.
    #[serde(default)]
    pub accept_plain_jwt: bool,
    /// What each scope grants: the agent a token with it acts as, and optionally only some
    /// of that agent's groups and tools. A token's scopes must name one agent.
    #[serde(default)]
    pub scopes: BTreeMap<String, ScopeGrant>,
    /// Aether is its own authorization server (instead of `issuer`): console accounts sign in
    /// and consent, tokens are signed with a key derived from the vault key. The issuer is
    /// `resource`'s origin.
    #[serde(default)]
    pub builtin: bool,
    /// The built-in server's dynamic client registration (RFC 7591, `/oauth/register`): off
    /// by default, since anyone who can reach the server could register a client; clients
    /// identify themselves by a client ID metadata document instead.
    #[serde(default)]
    pub registration: bool,
    /// How long the built-in server's access tokens last, in seconds.
    #[serde(default = "default_access_seconds")]
    pub access_token_seconds: u64,
    /// How long a grant lasts without its person consenting again, in days (its refresh
    /// tokens rotate on every use within it).
    #[serde(default = "default_refresh_days")]
    pub refresh_token_days: u64,
}

fn default_leeway() -> u64 {
    30
}

fn default_access_seconds() -> u64 {
    600
}

fn default_refresh_days() -> u64 {
    30
}

/// What one OAuth scope lets a token do (`[auth.scopes] "mcp:read" = { agent = "coder" }`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeGrant {
    /// The agent a token with this scope acts as (its allowlists, rules and approvals).
    pub agent: String,
    /// Only these of the agent's groups (unset: all it reaches).
    pub mcp_servers: Option<Vec<String>>,
    /// Only these of the agent's tools (unset: all of its groups').
    pub tools: Option<Vec<String>>,
}

/// Whether a URL names this computer (plain `http` is allowed there, for local tests).
pub fn is_loopback_url(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

impl AuthSection {
    /// Whether OAuth access tokens are accepted.
    pub fn enabled(&self) -> bool {
        self.issuer.is_some() || self.builtin
    }
}

/// The tool registry (`[registry]`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrySection {
    /// What the definition screen's findings (hidden text, instructions to the model, other
    /// tools or credential files named, oversized schemas; `definition_screen`) do to an
    /// approval: "warn" (the default: they are shown beside the definition and the operator
    /// decides) or "block" (a definition with any finding cannot be approved).
    #[serde(default)]
    pub screen: crate::definition_screen::ScreenMode,
}

/// An upstream MCP server (`[upstreams.NAME]`): a program Aether starts (`command`, over
/// stdio) or a Streamable HTTP endpoint (`url`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// The program (looked up on PATH if not absolute), e.g. "npx" or "/usr/bin/node".
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment, besides PATH, HOME and LANG (nothing else of Aether's is passed).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Environment variables whose values come from the vault: `{ API_TOKEN = "name" }`.
    #[serde(default)]
    pub env_credentials: BTreeMap<String, String>,
    /// A Streamable HTTP endpoint, e.g. "https://mcp.example.com/mcp".
    pub url: Option<String>,
    /// Headers sent with every HTTP request (not secrets: those go in `credential`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A credential from the vault (`aether credentials set NAME`), sent as
    /// `Authorization: Bearer …` (only to https or loopback URLs).
    pub credential: Option<String>,
    /// Seconds a call (and the start) may take, 1-300.
    #[serde(default = "default_upstream_timeout")]
    pub timeout_seconds: u64,
    /// The group its tools are in, for agents' `mcp_servers`; default: the upstream's name.
    pub group: Option<String>,
    /// Its tools' tier: "standard", "elevated" (the default: full arguments and results in the
    /// audit) or "restricted" (every call waits for a person).
    #[serde(default = "default_upstream_tier")]
    pub tier: crate::Tier,
    /// "persistent" (the default: one connection, started again with backoff if it dies) or
    /// "fresh" (a new connection, and process, for every call, closed after it).
    #[serde(default)]
    pub session: UpstreamSession,
    /// A command upstream runs where Aether's own files (vault key, store, configuration) are
    /// covered, and does not start where bubblewrap cannot cover them — unless this is set:
    /// then it runs as Aether's user, able to read them.
    #[serde(default)]
    pub uncovered: bool,
    /// Which arguments of its tools are paths, URLs, hosts or commands, beyond what their
    /// schemas say (`format: uri` and the usual names, `aether_policy::arguments`), by the
    /// tool's name at the upstream (`"*"`: every tool): `{ fetch = { urls = ["target"] } }`.
    /// The rules and egress read a call through them.
    #[serde(default)]
    pub arguments: BTreeMap<String, crate::ArgumentKinds>,
}

/// Where the vault's key lives (`[vault]`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VaultSection {
    /// The key file (32 bytes, owner-only), created on first use. Default:
    /// `$XDG_CONFIG_HOME/aether/vault.key` (else `~/.config/aether/vault.key`): outside the
    /// store, so a copy of the store opens no credential.
    pub key_file: Option<String>,
}

/// How an upstream's process lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamSession {
    #[default]
    Persistent,
    Fresh,
}

/// Names an upstream cannot have: paths of the admin API under `/api/sources/`.
const RESERVED_UPSTREAM_NAMES: &[&str] = &["refresh", "datasets", "reports"];

/// What is wrong with one upstream's table.
fn upstream_problems(name: &str, u: &RawUpstream) -> Vec<String> {
    let mut problems = Vec::new();
    let credential_names = u.credential.iter().chain(u.env_credentials.values());
    for c in credential_names {
        if !crate::is_plain_name(c) {
            problems.push(format!(
                "upstreams.{name}: {c:?} is not a credential name (1-64 of letters, digits, -, _ and .)"
            ));
        }
    }
    match (&u.command, &u.url) {
        (Some(_), Some(_)) => problems.push(format!(
            "upstreams.{name}: give either command (stdio) or url (Streamable HTTP), not both"
        )),
        (None, None) => problems.push(format!(
            "upstreams.{name}: give command (a program to start over stdio) or url (a Streamable HTTP endpoint)"
        )),
        (Some(command), None) => {
            if command.trim().is_empty() {
                problems.push(format!("upstreams.{name}.command is empty"));
            }
            if !u.headers.is_empty() || u.credential.is_some() {
                problems.push(format!(
                    "upstreams.{name}: headers and credential are for url upstreams; a command gets env and env_credentials"
                ));
            }
        }
        (None, Some(url)) => {
            if !u.args.is_empty() || !u.env.is_empty() || !u.env_credentials.is_empty() || u.uncovered
            {
                problems.push(format!(
                    "upstreams.{name}: args, env, env_credentials and uncovered are for command upstreams; a url gets headers and credential"
                ));
            }
            match url::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {
                    let loopback = match parsed.host() {
                        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                        None => false,
                    };
                    if parsed.scheme() == "http" && !loopback && u.credential.is_some() {
                        problems.push(format!(
                            "upstreams.{name}: a credential is sent only over https (or to a loopback address); {url:?} is plain http"
                        ));
                    }
                    if !parsed.username().is_empty() || parsed.password().is_some() {
                        problems.push(format!(
                            "upstreams.{name}.url carries a user or password; put the secret in the vault (credential = NAME)"
                        ));
                    }
                }
                Ok(_) => problems.push(format!("upstreams.{name}.url must be http or https")),
                Err(e) => problems.push(format!("upstreams.{name}.url {url:?}: {e}")),
            }
            for header in u.headers.keys() {
                if header.eq_ignore_ascii_case("authorization")
                    || header.eq_ignore_ascii_case("cookie")
                    || header.eq_ignore_ascii_case("proxy-authorization")
                {
                    problems.push(format!(
                        "upstreams.{name}.headers: {header} is a secret; keep it in the vault (credential = NAME), not in aether.toml"
                    ));
                }
            }
        }
    }
    problems
}

fn default_upstream_timeout() -> u64 {
    60
}

fn default_upstream_tier() -> crate::Tier {
    crate::Tier::Elevated
}

/// The research tools' settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResearchSection {
    /// The operator's SearXNG instance for `web_search` (its JSON format enabled), e.g.
    /// "http://127.0.0.1:8888/". Unset: `web_search` is not offered.
    pub searxng_url: Option<String>,
}

/// `[tts]`: an OpenAI-compatible speech server `tts_render` speaks through instead of the
/// local espeak-ng.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtsSection {
    /// The server's API base URL, e.g. "http://127.0.0.1:8880/v1" (its `/audio/speech` is
    /// asked). Unset: espeak-ng speaks.
    pub base_url: Option<String>,
    /// The model asked for (default "tts-1").
    pub model: Option<String>,
    /// The vault credential holding its API key, if it needs one (`aether credentials set
    /// NAME`).
    pub key: Option<String>,
    /// The voices it has, for servers that do not list them at `/audio/voices`; speakers
    /// without a mapped voice get these in order (default: OpenAI's six).
    #[serde(default)]
    pub voices: Vec<String>,
    /// Seconds one line may take (1-600, default 120).
    pub timeout_seconds: Option<u64>,
}

/// A speech server's voice name, as `[tts] voices` and `tts_render`'s `voices` take one: 1-64
/// letters, digits and `_ . + -`, the first a letter or digit (never an option's `-`).
pub fn valid_speech_voice(voice: &str) -> bool {
    voice.len() <= 64
        && voice
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && voice
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-'))
}

impl TtsSection {
    /// What is wrong with the section.
    fn problems(&self, problems: &mut Vec<String>) {
        let Some(base) = &self.base_url else {
            if self.model.is_some() || self.key.is_some() || !self.voices.is_empty() {
                problems.push("tts: base_url is missing (the speech server's API, e.g. \"http://127.0.0.1:8880/v1\")".into());
            }
            return;
        };
        if let Some(p) = crate::models::base_url_problem("tts.base_url", base) {
            problems.push(p);
        } else if let Ok(u) = url::Url::parse(base)
            && self.key.is_some()
            && !crate::models::key_may_go_to(&u)
        {
            problems.push(format!(
                "tts: a key is sent only over HTTPS or to this computer, and {base:?} is neither"
            ));
        }
        if let Some(key) = &self.key
            && !crate::models::valid_credential_name(key)
        {
            problems.push(format!(
                "tts.key {key:?} is not a credential name (1-64 of letters, digits, -, _ and .)"
            ));
        }
        if let Some(v) = self.voices.iter().find(|v| !valid_speech_voice(v)) {
            problems.push(format!(
                "tts.voices: {v:?} is not a voice name (letters, digits and _ . + -)"
            ));
        }
        if let Some(t) = self.timeout_seconds
            && !(1..=600).contains(&t)
        {
            problems.push("tts.timeout_seconds must be between 1 and 600".into());
        }
    }
}

/// Calls that wait for a person.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// How long a call waits for a decision before it is denied.
    #[serde(default = "default_window")]
    pub window_seconds: u64,
}

impl Default for ApprovalsSection {
    fn default() -> Self {
        ApprovalsSection {
            window_seconds: default_window(),
        }
    }
}

fn default_window() -> u64 {
    300
}

/// The operator's rules.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    /// The rules file (relative to this configuration's folder). Unset: `permissions.yaml`
    /// beside the configuration, if it exists (or appears later).
    pub rules: Option<String>,
}

/// How HTTP callers prove who they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HttpAuth {
    /// Bearer tokens as soon as an agent token has been made (revoking it does not undo
    /// that) and always off loopback; until then, loopback callers act as `http_agent`.
    #[default]
    Auto,
    /// Always a bearer token.
    Token,
    /// Never: every caller is `http_agent`. Loopback listeners only.
    None,
    /// Only OAuth access tokens from `[auth] issuer` (static agent tokens are refused).
    #[serde(rename = "oauth")]
    OAuth,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Where `aether serve` listens. Loopback unless the operator says otherwise.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The agent an HTTP caller acts as. (Bearer tokens per agent come with governance.)
    #[serde(default = "default_agent")]
    pub http_agent: String,
    /// MCP sessions over HTTP (`Mcp-Session-Id`, replies as SSE streams). `false` serves
    /// statelessly: no session id, and replies as plain JSON unless a call sends progress or
    /// log messages first.
    #[serde(default = "yes")]
    pub sessions: bool,
    #[serde(default)]
    pub auth: HttpAuth,
    /// More `Host` values (`name` or `name:port`) requests may carry, and so `https://` and
    /// `http://` origins of them: the names a load balancer in front of the replicas is reached
    /// by. Every other Host is refused (DNS rebinding).
    #[serde(default)]
    pub public_hosts: Vec<String>,
    /// MCP sessions held at once, in all; a new one past it is refused (503) until one ends.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// MCP sessions one caller (a token, or an agent reached without one) may hold at once.
    #[serde(default = "default_max_sessions_per_caller")]
    pub max_sessions_per_caller: usize,
    /// Seconds a handshake-era session may sit idle (no request in flight, no GET stream
    /// open) before its worker is let go; the session stays, kept in the store, and its next
    /// request wakes it (0: never let go).
    #[serde(default = "default_session_sleep_seconds")]
    pub session_sleep_seconds: u64,
}

fn default_session_sleep_seconds() -> u64 {
    60
}

/// About 165 KiB each while awake (docs/BENCHMARKS.md): 660 MiB at most, if all were; an idle
/// one sleeps after `session_sleep_seconds`.
fn default_max_sessions() -> usize {
    4_096
}
fn default_max_sessions_per_caller() -> usize {
    1_024
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            max_sessions: default_max_sessions(),
            max_sessions_per_caller: default_max_sessions_per_caller(),
            session_sleep_seconds: default_session_sleep_seconds(),
            listen: default_listen(),
            http_agent: default_agent(),
            sessions: true,
            auth: HttpAuth::Auto,
            public_hosts: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `sqlite://PATH` or `postgres://USER@HOST:PORT/DATABASE`; unset means `.aether/aether.db`
    /// beside the configuration.
    pub url: Option<String>,
    /// The audit's witness: an append-only file of signed checkpoints of the audit's head,
    /// outside the store (relative to the configuration's folder). Default: beside the vault
    /// key, `witness/STORE.log`, STORE naming the store's location.
    pub witness: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoot {
    pub path: String,
    #[serde(default = "default_root_mode")]
    pub mode: RootMode,
    /// Globs (relative to the root) where writes are allowed; unset: anywhere.
    pub writable: Option<Vec<String>>,
    /// Lets `delete_file` delete under this root.
    #[serde(default)]
    pub allow_delete: bool,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    pub team: Option<String>,
    pub project: Option<String>,
    pub mcp_servers: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub supervisor: bool,
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    /// Lets this agent's network tools reach loopback and private addresses.
    #[serde(default)]
    pub allow_private_network: bool,
    #[serde(default)]
    pub arg_defaults: BTreeMap<String, Map<String, Value>>,
    #[serde(default)]
    pub approval: ApprovalRoute,
    /// Knowledge packs this agent searches (besides its team's, its project's and its own).
    #[serde(default)]
    pub knowledge_packs: Vec<String>,
    /// Model connections this agent may run on (`[models.NAME]`); unset: any.
    pub models: Option<Vec<String>>,
    /// Agents this one may hand work to with `delegate` or `spawn_subagents` (each then
    /// works under its own profile); unset: none.
    #[serde(default)]
    pub workers: Vec<String>,
    /// Calls per window by this agent, all its callers together (`"120/min"`; unset: none).
    pub rate: Option<String>,
    /// Calls per window by each of its callers: each person of an OAuth token, each static
    /// token (callers without a token count as the agent).
    pub rate_per_caller: Option<String>,
    /// Calls per window of one tool by this agent (`{ web_fetch = "10/min" }`).
    #[serde(default)]
    pub rates: BTreeMap<String, String>,
    /// This agent's calls in flight at once.
    pub concurrent: Option<u32>,
}

/// A team's settings (`[teams.NAME]`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTeam {
    /// Knowledge packs every agent of the team searches.
    #[serde(default)]
    pub knowledge_packs: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProject {
    /// Executables (absolute) with the argv they must start with, and the options allowed
    /// after it.
    #[serde(default)]
    pub commands: Vec<crate::commands::CommandRule>,
    /// `run_shell` for this project's agents, in a sandbox; unset: no shell.
    pub shell: Option<crate::shell::ShellSettings>,
}

/// Bounds on what one call may produce or read.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Characters of result text a model reads per call.
    #[serde(default = "default_result_chars")]
    pub result_chars: usize,
    /// Bytes `read_file` will open; larger files must be read by range.
    #[serde(default = "default_read_bytes")]
    pub read_file_bytes: u64,
    /// Matches or names `search_files` and `glob` return at most.
    #[serde(default = "default_search_results")]
    pub search_results: usize,
    /// Seconds a built-in tool may run before it is stopped.
    #[serde(default = "default_tool_seconds")]
    pub tool_seconds: u64,
    /// `search_knowledge` leaves out hits scoring below this (BM25, higher is better; 0
    /// keeps every match).
    #[serde(default)]
    pub knowledge_score_floor: f64,
    /// Bytes a write may put in one file, and the largest file a write, edit or delete may
    /// replace (its old content goes to the journal).
    #[serde(default = "default_read_bytes")]
    pub write_file_bytes: u64,
    /// Bytes a call's arguments may take together (as JSON); a larger call is refused before
    /// its receipt.
    #[serde(default = "default_argument_bytes")]
    pub argument_bytes: u64,
}

/// How long the journal keeps what it needs for undo.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalSection {
    /// Entries older than this many days are dropped.
    #[serde(default = "default_journal_days")]
    pub keep_days: u64,
    /// At most this many entries are kept (the oldest go first).
    #[serde(default = "default_journal_entries")]
    pub keep_entries: usize,
}

impl Default for JournalSection {
    fn default() -> Self {
        JournalSection {
            keep_days: default_journal_days(),
            keep_entries: default_journal_entries(),
        }
    }
}

fn default_journal_days() -> u64 {
    30
}
fn default_journal_entries() -> usize {
    100_000
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            result_chars: default_result_chars(),
            read_file_bytes: default_read_bytes(),
            search_results: default_search_results(),
            tool_seconds: default_tool_seconds(),
            write_file_bytes: default_read_bytes(),
            argument_bytes: default_argument_bytes(),
            knowledge_score_floor: 0.0,
        }
    }
}

fn default_listen() -> String {
    DEFAULT_LISTEN.into()
}
fn default_agent() -> String {
    DEFAULT_AGENT.into()
}
fn default_root_mode() -> RootMode {
    RootMode::ReadOnly
}
fn default_result_chars() -> usize {
    crate::truncate::RESULT_CHARS
}
fn default_read_bytes() -> u64 {
    8 << 20
}
/// Room for a whole `write_file` of the default size, escaped, and its other arguments.
fn default_argument_bytes() -> u64 {
    10 << 20
}
fn default_search_results() -> usize {
    200
}
fn default_tool_seconds() -> u64 {
    60
}

/// Everything wrong with a configuration, each with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.len() {
            1 => write!(f, "aether.toml has a problem:")?,
            n => write!(f, "aether.toml has {n} problems:")?,
        }
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl RawConfig {
    pub fn parse(text: &str) -> Result<RawConfig, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError {
            problems: vec![parse_problem(text, &e)],
        })?;
        raw.validate()?;
        Ok(raw)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        self.check_listen_roots_store(&mut problems);
        self.check_agents_and_projects(&mut problems);
        self.check_server_and_limits(&mut problems);
        self.check_upstreams(&mut problems);
        self.check_models_and_delegation(&mut problems);
        self.check_auth(&mut problems);
        self.check_telemetry(&mut problems);
        self.check_console(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems })
        }
    }

    /// `[console.oidc]`: https URLs (http on loopback), roles that exist; `trace_url` an
    /// http(s) URL with `{trace_id}` in it.
    fn check_console(&self, problems: &mut Vec<String>) {
        if let Some(url) = &self.console.trace_url
            && (!url.contains("{trace_id}")
                || !url::Url::parse(&url.replace("{trace_id}", "0"))
                    .is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
        {
            problems.push(format!(
                "console.trace_url {url:?} must be an http(s) URL with {{trace_id}} in it, e.g. \"http://127.0.0.1:16686/trace/{{trace_id}}\""
            ));
        }
        let Some(o) = &self.console.oidc else { return };
        for (key, value) in [("issuer", &o.issuer), ("redirect_uri", &o.redirect_uri)] {
            match url::Url::parse(value) {
                Ok(u) if u.scheme() == "https" && u.host().is_some() => {}
                Ok(u) if u.scheme() == "http" && is_loopback_url(&u) => {}
                _ => problems.push(format!(
                    "console.oidc.{key} {value:?} must be an https URL (http only on loopback)"
                )),
            }
        }
        if !o.redirect_uri.ends_with("/console/oidc/callback") {
            problems.push(format!(
                "console.oidc.redirect_uri {:?} must be this server's /console/oidc/callback",
                o.redirect_uri
            ));
        }
        if o.client_id.trim().is_empty() {
            problems.push("console.oidc.client_id is empty".into());
        }
        if o.roles.is_empty() {
            problems.push(
                "console.oidc.roles is empty: map the claim's values to roles, e.g. { \"aether-admins\" = \"admin\" }".into(),
            );
        }
        for (value, role) in &o.roles {
            if crate::roles::role(role).is_none() {
                problems.push(format!(
                    "console.oidc.roles.{value:?}: {role:?} is not a role (viewer, approver, operator, admin)"
                ));
            }
        }
    }

    /// `[telemetry]`: an http(s) endpoint, a known protocol, header names and values HTTP takes,
    /// a ratio between 0 and 1.
    fn check_telemetry(&self, problems: &mut Vec<String>) {
        let t = &self.telemetry;
        if let Some(endpoint) = &t.endpoint {
            match url::Url::parse(endpoint) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => problems.push(format!(
                    "telemetry.endpoint {endpoint:?} must be an http or https URL, e.g. \"http://127.0.0.1:4318\""
                )),
            }
        }
        if let Some(protocol) = &t.protocol
            && !OTLP_PROTOCOLS.contains(&protocol.as_str())
        {
            problems.push(format!(
                "telemetry.protocol {protocol:?} is not one Aether speaks: \"http/protobuf\" or \"grpc\""
            ));
        }
        for (name, value) in &t.headers {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                problems.push(format!(
                    "telemetry.headers: {name:?} is not an HTTP header name"
                ));
            } else if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
                problems.push(format!(
                    "telemetry.headers.{name}: a header value cannot hold control characters"
                ));
            }
        }
        if let Some(r) = t.sample_ratio
            && !(0.0..=1.0).contains(&r)
        {
            problems.push(format!(
                "telemetry.sample_ratio {r} must be between 0 and 1"
            ));
        }
    }

    /// `[auth]`: an issuer and this server's resource URL together, scopes naming agents.
    fn check_auth(&self, problems: &mut Vec<String>) {
        let a = &self.auth;
        let web_url =
            |key: &str, value: &str, problems: &mut Vec<String>| match url::Url::parse(value) {
                Ok(u) if u.scheme() == "https" && u.host().is_some() => {}
                Ok(u) if u.scheme() == "http" && is_loopback_url(&u) => {}
                _ => problems.push(format!(
                    "auth.{key} {value:?} must be an https URL (http only on loopback)"
                )),
            };
        if a.builtin {
            if a.issuer.is_some() || a.jwks_uri.is_some() {
                problems.push(
                    "auth.builtin makes Aether its own authorization server: leave auth.issuer and auth.jwks_uri unset".into(),
                );
            }
            match &a.resource {
                Some(resource) => web_url("resource", resource, problems),
                None => problems.push(
                    "auth.builtin needs auth.resource, this server's MCP URL (e.g. \"http://127.0.0.1:8484/mcp\")".into(),
                ),
            }
            if !(60..=86_400).contains(&a.access_token_seconds) {
                problems.push("auth.access_token_seconds is between 60 and 86400".into());
            }
            if !(1..=365).contains(&a.refresh_token_days) {
                problems.push("auth.refresh_token_days is between 1 and 365".into());
            }
        } else if a.registration {
            problems.push(
                "auth.registration is the built-in authorization server's: set auth.builtin = true, or register clients at your issuer".into(),
            );
        }
        match (&a.issuer, &a.resource) {
            _ if a.builtin => {}
            (None, None) => {
                if !a.scopes.is_empty() || a.jwks_uri.is_some() {
                    problems.push(
                        "auth.scopes and auth.jwks_uri need auth.issuer and auth.resource".into(),
                    );
                }
                if self.server.auth == HttpAuth::OAuth {
                    problems.push(
                        "server.auth = \"oauth\" needs an authorization server: set auth.issuer and auth.resource".into(),
                    );
                }
                return;
            }
            (Some(issuer), Some(resource)) => {
                web_url("issuer", issuer, problems);
                web_url("resource", resource, problems);
            }
            _ => problems.push(
                "auth.issuer and auth.resource go together: the issuer whose tokens are accepted, and this server's resource URL they must be minted for".into(),
            ),
        }
        if let Some(jwks) = &a.jwks_uri {
            web_url("jwks_uri", jwks, problems);
        }
        if self.server.auth == HttpAuth::None {
            problems.push(
                "server.auth = \"none\" takes no tokens: with an authorization server ([auth]), use \"auto\", \"token\" or \"oauth\"".into(),
            );
        }
        if a.scopes.is_empty() {
            problems.push(
                "auth.scopes is empty: map at least one scope to an agent (e.g. \"mcp:tools\" = { agent = \"default\" })".into(),
            );
        }
        if a.leeway_seconds > 300 {
            problems.push("auth.leeway_seconds is at most 300".into());
        }
        for (scope, grant) in &a.scopes {
            // RFC 6749's scope-token: printable ASCII but space, `"` and `\`.
            if scope.is_empty()
                || !scope
                    .chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
            {
                problems.push(format!(
                    "auth.scopes: {scope:?} is not a scope (printable ASCII, no spaces, quotes or backslashes)"
                ));
            }
            let known = if self.agents.is_empty() {
                grant.agent == DEFAULT_AGENT
            } else {
                self.agents.contains_key(&grant.agent)
            };
            if !known {
                problems.push(format!(
                    "auth.scopes.{scope:?}: agent {:?} is not one of the configured agents",
                    grant.agent
                ));
            }
        }
    }

    /// The listener, the roots and the store's URL.
    fn check_listen_roots_store(&self, problems: &mut Vec<String>) {
        if let Err(e) = listen_address(&self.server.listen) {
            problems.push(format!("server.listen {e}"));
        }
        for (name, root) in &self.roots {
            if !is_root_name(name) {
                problems.push(format!(
                    "roots.{name}: a root name is 1-64 of A-Z a-z 0-9 _ -"
                ));
            }
            if root.path.trim().is_empty() {
                problems.push(format!("roots.{name}.path is empty"));
            }
            if let Err(e) = crate::paths::WriteGate::new(root.writable.as_deref()) {
                problems.push(format!("roots.{name}.writable: {e}"));
            }
            if root.mode != RootMode::ReadWrite && (root.writable.is_some() || root.allow_delete) {
                problems.push(format!(
                    "roots.{name}: writable and allow_delete need mode = \"rw\" (this root is {:?})",
                    root.mode.as_str()
                ));
            }
        }
        if let Some(url) = &self.store.url
            && !["sqlite:", "postgres://", "postgresql://"]
                .iter()
                .any(|scheme| url.starts_with(scheme))
        {
            // Only the scheme is named: the rest may hold a password.
            let scheme = url.split(':').next().unwrap_or("");
            problems.push(format!(
                "store.url: {scheme:?} is not a store Aether keeps; use sqlite://PATH or postgres://USER@HOST:PORT/DATABASE"
            ));
        }
    }

    /// Each agent's name, groups and tools; each project's shell and commands.
    fn check_agents_and_projects(&self, problems: &mut Vec<String>) {
        for (name, agent) in &self.agents {
            if !is_root_name(name) {
                problems.push(format!(
                    "agents.{name}: an agent name is 1-64 of A-Z a-z 0-9 _ -"
                ));
            }
            for (key, rate) in [
                ("rate", &agent.rate),
                ("rate_per_caller", &agent.rate_per_caller),
            ] {
                if let Some(Err(e)) = rate.as_deref().map(Rate::parse) {
                    problems.push(format!("agents.{name}.{key}: {e}"));
                }
            }
            for (tool, rate) in &agent.rates {
                if !is_tool_name(tool) {
                    problems.push(format!("agents.{name}.rates: {tool:?} is not a tool name"));
                }
                if let Err(e) = Rate::parse(rate) {
                    problems.push(format!("agents.{name}.rates.{tool}: {e}"));
                }
            }
            if agent.concurrent.is_some_and(|n| !(1..=10_000).contains(&n)) {
                problems.push(format!(
                    "agents.{name}.concurrent must be between 1 and 10000"
                ));
            }
            for (i, g) in agent.mcp_servers.iter().flatten().enumerate() {
                if !is_group_key(g) {
                    problems.push(format!(
                        "agents.{name}.mcp_servers[{i}] {g:?} is not a group key"
                    ));
                }
            }
            for (i, t) in agent.tools.iter().flatten().enumerate() {
                if !is_tool_name(t) {
                    problems.push(format!("agents.{name}.tools[{i}] {t:?} is not a tool name"));
                }
            }
        }
        for (name, project) in &self.projects {
            if let Some(shell) = &project.shell {
                for p in shell.problems() {
                    problems.push(format!("projects.{name}.shell: {p}"));
                }
            }
            for (i, rule) in project.commands.iter().enumerate() {
                for p in rule.problems() {
                    problems.push(format!("projects.{name}.commands[{i}]: {p}"));
                }
            }
        }
    }

    /// Sessions, the HTTP agent and auth, the limits, the journal, research, approvals, the rules file.
    fn check_server_and_limits(&self, problems: &mut Vec<String>) {
        if self.server.max_sessions == 0 || self.server.max_sessions_per_caller == 0 {
            problems.push(
                "server.max_sessions and server.max_sessions_per_caller are at least 1 (for no sessions, set server.sessions = false)".into(),
            );
        }
        if !self.agents.is_empty() && !self.agents.contains_key(&self.server.http_agent) {
            problems.push(format!(
                "server.http_agent {:?} is not one of the configured agents",
                self.server.http_agent
            ));
        }
        let l = &self.limits;
        if !(1_000..=1_000_000).contains(&l.result_chars) {
            problems.push("limits.result_chars must be between 1000 and 1000000".into());
        }
        if !(1..=300).contains(&l.tool_seconds) {
            problems.push("limits.tool_seconds must be between 1 and 300".into());
        }
        if !(1..=(1 << 30)).contains(&l.write_file_bytes) {
            problems.push("limits.write_file_bytes must be between 1 and 1073741824".into());
        }
        if self.journal.keep_days == 0 || self.journal.keep_entries == 0 {
            problems.push(
                "journal.keep_days and journal.keep_entries must be at least 1 (undo needs the journal)"
                    .into(),
            );
        }
        if let Some(url) = &self.research.searxng_url
            && !url::Url::parse(url)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        {
            problems.push(format!(
                "research.searxng_url {url:?} must be an http or https URL"
            ));
        }
        self.tts.problems(problems);
        if !(1..=86_400).contains(&self.approvals.window_seconds) {
            problems.push("approvals.window_seconds must be between 1 and 86400".into());
        }
        if let Some(rules) = &self.policy.rules
            && rules.trim().is_empty()
        {
            problems.push("policy.rules is empty; leave it out to use permissions.yaml".into());
        }
        if self.server.auth == HttpAuth::None
            && listen_address(&self.server.listen).is_ok_and(|a| !a.ip().is_loopback())
        {
            problems.push(format!(
                "server.auth = \"none\" needs a loopback server.listen (this is {:?}): anyone who can reach the port would act as {:?}",
                self.server.listen, self.server.http_agent
            ));
        }
        if self.server.auth == HttpAuth::None && !self.server.public_hosts.is_empty() {
            problems.push(format!(
                "server.auth = \"none\" with server.public_hosts: a proxy or load balancer in front \
                 brings anyone's requests from loopback, and they would act as {:?}; use tokens \
                 (server.auth = \"token\" or \"auto\")",
                self.server.http_agent
            ));
        }
        if l.search_results == 0 || l.search_results > 10_000 {
            problems.push("limits.search_results must be between 1 and 10000".into());
        }
    }

    /// Each upstream: its name, transport options and time limit.
    fn check_upstreams(&self, problems: &mut Vec<String>) {
        for (name, u) in &self.upstreams {
            let valid = !name.is_empty()
                && name.len() <= 32
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
                && !name.contains("__")
                && !name.starts_with('_')
                && !name.ends_with('_');
            if !valid {
                problems.push(format!(
                    "upstreams.{name}: a name is 1-32 of a-z, 0-9, - and _, without \"__\" and not starting or ending with _ (its tools are named NAME__TOOL, split at the first __)"
                ));
            }
            if RESERVED_UPSTREAM_NAMES.contains(&name.as_str()) {
                problems.push(format!(
                    "upstreams.{name}: {name:?} is reserved (the admin API has /api/sources/{name}); choose another name"
                ));
            }
            if crate::tool::groups::BUILT_IN.contains(&name.as_str()) {
                problems.push(format!(
                    "upstreams.{name}: {name:?} is a built-in tool group; an upstream's name is its \
                     group's, so agents allowed one would get the other's tools; choose another name"
                ));
            }
            problems.extend(upstream_problems(name, u));
            if !(1..=300).contains(&u.timeout_seconds) {
                problems.push(format!(
                    "upstreams.{name}.timeout_seconds must be between 1 and 300"
                ));
            }
        }
    }

    /// Each model connection, and the workers and models each agent names.
    fn check_models_and_delegation(&self, problems: &mut Vec<String>) {
        for (name, model) in &self.models {
            if !is_root_name(name) {
                problems.push(format!(
                    "models.{name}: a connection name is 1-64 of A-Z a-z 0-9 _ -"
                ));
            }
            if let Err(p) = model.resolve(name) {
                problems.extend(p);
            }
        }
        for (name, agent) in &self.agents {
            for w in &agent.workers {
                if !self.agents.contains_key(w) || w == name {
                    problems.push(format!(
                        "agents.{name}.workers: {w:?} is not another configured agent"
                    ));
                }
            }
            for m in agent.models.iter().flatten() {
                if !self.models.contains_key(m) {
                    problems.push(format!(
                        "agents.{name}.models: {m:?} is not a configured model connection ([models.{m}])"
                    ));
                }
            }
        }
    }

    /// The agent profiles, with the default agent when none is configured.
    pub fn agent_profiles(&self) -> BTreeMap<String, AgentProfile> {
        if self.agents.is_empty() {
            return [(DEFAULT_AGENT.to_string(), default_agent_profile())].into();
        }
        self.agents
            .iter()
            .map(|(name, a)| {
                let profile = AgentProfile {
                    name: name.clone(),
                    team: a.team.clone(),
                    project: a.project.clone(),
                    mcp_servers: a.mcp_servers.as_ref().map(|v| v.iter().cloned().collect()),
                    tools: a.tools.as_ref().map(|v| v.iter().cloned().collect()),
                    supervisor: a.supervisor,
                    allowed_domains: a.allowed_domains.clone(),
                    allow_private_network: a.allow_private_network,
                    arg_defaults: a.arg_defaults.clone(),
                    approval: a.approval,
                    commands: a
                        .project
                        .as_ref()
                        .and_then(|p| self.projects.get(p))
                        .map(|p| p.commands.clone())
                        .unwrap_or_default(),
                    shell: a
                        .project
                        .as_ref()
                        .and_then(|p| self.projects.get(p))
                        .and_then(|p| p.shell.clone()),
                    knowledge_packs: a
                        .knowledge_packs
                        .iter()
                        .chain(
                            a.team
                                .as_ref()
                                .and_then(|t| self.teams.get(t))
                                .map(|t| t.knowledge_packs.iter())
                                .into_iter()
                                .flatten(),
                        )
                        .cloned()
                        .collect(),
                    // Checked by `validate`: what does not parse is left out here.
                    rates: crate::agent::RateLimits {
                        rate: a.rate.as_deref().and_then(|r| Rate::parse(r).ok()),
                        per_caller: a
                            .rate_per_caller
                            .as_deref()
                            .and_then(|r| Rate::parse(r).ok()),
                        per_tool: a
                            .rates
                            .iter()
                            .filter_map(|(tool, r)| Some((tool.clone(), Rate::parse(r).ok()?)))
                            .collect(),
                        concurrent: a.concurrent,
                    },
                };
                (name.clone(), profile)
            })
            .collect()
    }
}

impl RawConfig {
    /// Names this configuration gives that nothing answers to: a tool (of an agent, a scope, a
    /// per-tool rate or argument default) that is not one of `tools` (what this build serves)
    /// and not `SERVER__TOOL` of a configured upstream, and a group (`mcp_servers`) that is
    /// neither built in nor an upstream's. Each problem names its key and, when a real name is
    /// close, the one probably meant. (`validate` cannot: the catalog is not the policy's.)
    pub fn unknown_names(&self, tools: &BTreeSet<String>) -> Vec<String> {
        let groups: BTreeSet<String> = crate::tool::groups::BUILT_IN
            .iter()
            .filter(|g| **g != crate::tool::groups::CONFORMANCE)
            .map(|g| g.to_string())
            .chain(
                self.upstreams
                    .iter()
                    .map(|(name, u)| u.group.clone().unwrap_or_else(|| name.clone())),
            )
            .collect();
        let mut problems = Vec::new();
        let mut tool = |key: String, name: &str| {
            let upstream = name
                .split_once("__")
                .map(|(server, rest)| (server, !rest.is_empty()));
            match upstream {
                None if tools.contains(name) => {}
                Some((server, true)) if self.upstreams.contains_key(server) => {}
                Some((server, false)) if self.upstreams.contains_key(server) => problems.push(
                    format!("{key} {name:?} names no tool after the upstream (SERVER__TOOL)"),
                ),
                Some((server, _)) => problems.push(format!(
                    "{key} {name:?} is no upstream's tool: there is no [upstreams.{server}]{}",
                    meant(server, self.upstreams.keys())
                )),
                None => problems.push(format!(
                    "{key} {name:?} is not a tool Aether has{}",
                    meant(name, tools.iter())
                )),
            }
        };
        for (agent, a) in &self.agents {
            for (i, t) in a.tools.iter().flatten().enumerate() {
                tool(format!("agents.{agent}.tools[{i}]"), t);
            }
            for t in a.rates.keys() {
                tool(format!("agents.{agent}.rates:"), t);
            }
            for t in a.arg_defaults.keys() {
                tool(format!("agents.{agent}.arg_defaults:"), t);
            }
        }
        for (scope, grant) in &self.auth.scopes {
            for (i, t) in grant.tools.iter().flatten().enumerate() {
                tool(format!("auth.scopes.{scope:?}.tools[{i}]"), t);
            }
        }
        let group_lists = self
            .agents
            .iter()
            .map(|(agent, a)| (format!("agents.{agent}"), &a.mcp_servers))
            .chain(
                self.auth
                    .scopes
                    .iter()
                    .map(|(scope, g)| (format!("auth.scopes.{scope:?}"), &g.mcp_servers)),
            );
        for (key, list) in group_lists {
            for (i, g) in list.iter().flatten().enumerate() {
                if !groups.contains(g) {
                    problems.push(format!(
                        "{key}.mcp_servers[{i}] {g:?} is no group: not built in ({}) and no upstream's{}",
                        groups.iter().filter(|g| crate::tool::groups::BUILT_IN.contains(&g.as_str())).cloned().collect::<Vec<_>>().join(", "),
                        meant(g, groups.iter())
                    ));
                }
            }
        }
        problems
    }
}

/// A TOML error as an operator reads it. serde's "unknown variant `wr`, expected one of `rw`,
/// `ro`, `sealed`" (a mistyped mode, tier, route…) and "unknown field `paht`, expected …" (a
/// mistyped key) become the key, its line, what is allowed there and the one probably meant;
/// anything else is the TOML parser's own report (the line, a caret under the place).
fn parse_problem(text: &str, e: &toml::de::Error) -> String {
    let message = e.message();
    let (kind, rest) = match (
        message.strip_prefix("unknown variant `"),
        message.strip_prefix("unknown field `"),
    ) {
        (Some(rest), _) => ("variant", rest),
        (_, Some(rest)) => ("field", rest),
        _ => return e.to_string(),
    };
    let (Some((typed, expected)), Some(span)) = (rest.split_once('`'), e.span()) else {
        return e.to_string();
    };
    let allowed: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect();
    let (table, key, line) = key_at(text, span.start);
    let listed = allowed
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let meant = meant(typed, allowed.iter());
    let dotted = |key: &str| {
        if table.is_empty() {
            key.to_string()
        } else {
            format!("{table}.{key}")
        }
    };
    if kind == "variant" {
        format!(
            "{} (line {line}): {typed:?} is not one of {listed}{meant}",
            dotted(&key)
        )
    } else {
        let place = if table.is_empty() {
            "at the top level".to_string()
        } else {
            format!("in [{table}]")
        };
        format!(
            "{} (line {line}): no such key {place}{meant} (its keys: {listed})",
            dotted(typed)
        )
    }
}

/// The table header in force at byte `at` of `text`, the key of the line `at` is on (what
/// stands before its `=`), and that line's number.
fn key_at(text: &str, at: usize) -> (String, String, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let this_line = text[start..].lines().next().unwrap_or("");
    let key = this_line
        .split_once('=')
        .map_or(this_line, |(k, _)| k)
        .trim()
        .to_string();
    (table, key, line)
}

/// Where a server listens: `IP:PORT`, or `localhost:PORT` for 127.0.0.1 (no other name is
/// looked up: what the server binds is what the file or flag says).
pub fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    match text.strip_prefix("localhost:").map(str::parse::<u16>) {
        Some(Ok(port)) => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        _ => Err(format!(
            "{text:?} is not an IP address and port: {DEFAULT_LISTEN} (or localhost:PORT) serves \
             this computer only, 0.0.0.0:PORT every network (tokens needed)"
        )),
    }
}

/// `; did you mean "NAME"?` for the one of `names` nearest `typed`, when it is near (a slip
/// of a few letters), else nothing.
pub fn meant<'a>(typed: &str, names: impl Iterator<Item = &'a String>) -> String {
    let limit = (typed.chars().count() / 3).clamp(1, 3);
    names
        .map(|n| (strsim::damerau_levenshtein(typed, n), n))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, n)| format!("; did you mean {n:?}?"))
        .unwrap_or_default()
}

/// The agent Aether runs as when nobody configured one: the workspace group and nothing that
/// reaches the network or runs programs.
pub fn default_agent_profile() -> AgentProfile {
    AgentProfile {
        mcp_servers: Some(BTreeSet::from([crate::tool::groups::WORKSPACE.to_string()])),
        ..AgentProfile::with_groups(DEFAULT_AGENT, &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition_screen::ScreenMode;

    #[test]
    fn a_speech_voice_is_a_name_never_an_option_or_a_path() {
        for ok in ["alloy", "en_US-amy.low", "af+bella", "9", &"a".repeat(64)] {
            assert!(valid_speech_voice(ok), "{ok}");
        }
        for bad in [
            "",
            "-rf",
            "_x",
            ".hidden",
            "+x",
            "a b",
            "../x",
            "a/b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!valid_speech_voice(bad), "{bad}");
        }
    }

    #[test]
    fn empty_file_is_the_embedded_default() {
        let c = RawConfig::parse("").unwrap();
        assert_eq!(c.server.listen, DEFAULT_LISTEN);
        let agents = c.agent_profiles();
        assert_eq!(agents.keys().collect::<Vec<_>>(), ["default"]);
        assert_eq!(
            agents["default"].mcp_servers,
            Some(BTreeSet::from(["workspace".to_string()]))
        );
        assert_eq!(c.limits.result_chars, 24_000);
    }

    #[test]
    fn an_authorization_server_needs_its_resource_https_and_scopes_naming_agents() {
        let ok = RawConfig::parse(
            r#"
            [auth]
            issuer = "https://idp.example.com/realms/dev"
            resource = "https://aether.example.com/mcp"
            [auth.scopes]
            "mcp:tools" = { agent = "default" }
            "mcp:read" = { agent = "default", tools = ["read_file"] }
            "#,
        )
        .unwrap();
        assert!(ok.auth.enabled());
        assert_eq!(ok.auth.leeway_seconds, 30);
        // Loopback may be plain http (tests, a local IdP).
        RawConfig::parse(
            r#"
            [server]
            auth = "oauth"
            [auth]
            issuer = "http://127.0.0.1:9000"
            resource = "http://localhost:8484/mcp"
            scopes = { "mcp" = { agent = "default" } }
            "#,
        )
        .unwrap();
        for (text, problem) in [
            (
                "[auth]\nissuer = \"https://idp.example.com\"\nscopes = { \"a\" = { agent = \"default\" } }",
                "go together",
            ),
            (
                "[auth]\nissuer = \"http://idp.example.com\"\nresource = \"https://a.example.com/mcp\"\nscopes = { \"a\" = { agent = \"default\" } }",
                "auth.issuer \"http://idp.example.com\" must be an https URL",
            ),
            (
                "[auth]\nissuer = \"https://idp.example.com\"\nresource = \"https://a.example.com/mcp\"",
                "auth.scopes is empty",
            ),
            (
                "[auth]\nissuer = \"https://idp.example.com\"\nresource = \"https://a.example.com/mcp\"\nscopes = { \"a\" = { agent = \"ghost\" } }",
                "agent \"ghost\" is not one of the configured agents",
            ),
            (
                "[auth]\nissuer = \"https://idp.example.com\"\nresource = \"https://a.example.com/mcp\"\nscopes = { \"a b\" = { agent = \"default\" } }",
                "is not a scope",
            ),
            (
                "[server]\nauth = \"oauth\"",
                "needs an authorization server",
            ),
            (
                "[server]\nauth = \"none\"\n[auth]\nissuer = \"https://idp.example.com\"\nresource = \"https://a.example.com/mcp\"\nscopes = { \"a\" = { agent = \"default\" } }",
                "takes no tokens",
            ),
        ] {
            let err = RawConfig::parse(text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn the_builtin_authorization_server_needs_a_resource_and_no_issuer() {
        let ok = RawConfig::parse(
            r#"
            [auth]
            builtin = true
            resource = "http://127.0.0.1:8484/mcp"
            scopes = { "mcp:tools" = { agent = "default" } }
            "#,
        )
        .unwrap();
        assert!(ok.auth.enabled() && !ok.auth.registration);
        assert_eq!(
            (ok.auth.access_token_seconds, ok.auth.refresh_token_days),
            (600, 30)
        );
        let scopes = "scopes = { \"a\" = { agent = \"default\" } }";
        for (text, problem) in [
            (
                format!("builtin = true\n{scopes}"),
                "auth.builtin needs auth.resource",
            ),
            (
                format!(
                    "builtin = true\nresource = \"https://a.example.com/mcp\"\nissuer = \"https://idp.example.com\"\n{scopes}"
                ),
                "leave auth.issuer and auth.jwks_uri unset",
            ),
            (
                format!("builtin = true\nresource = \"http://a.example.com/mcp\"\n{scopes}"),
                "must be an https URL",
            ),
            (
                format!(
                    "builtin = true\nresource = \"https://a.example.com/mcp\"\naccess_token_seconds = 5\n{scopes}"
                ),
                "auth.access_token_seconds",
            ),
            (
                "builtin = true\nresource = \"https://a.example.com/mcp\"".to_string(),
                "auth.scopes is empty",
            ),
            (
                format!(
                    "registration = true\nissuer = \"https://idp.example.com\"\nresource = \"https://a.example.com/mcp\"\n{scopes}"
                ),
                "auth.registration is the built-in authorization server's",
            ),
        ] {
            let err = RawConfig::parse(&format!("[auth]\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn console_sign_in_through_a_provider_needs_its_callback_and_real_roles() {
        let ok = RawConfig::parse(
            r#"
            [console.oidc]
            issuer = "https://idp.example.com"
            client_id = "aether-console"
            redirect_uri = "https://aether.example.com/console/oidc/callback"
            roles = { "ops" = "operator" }
            "#,
        )
        .unwrap();
        let oidc = ok.console.oidc.unwrap();
        assert_eq!(oidc.role_claim, "groups");
        assert_eq!(oidc.scopes, ["profile", "groups"]);
        let base = "issuer = \"https://idp.example.com\"\nclient_id = \"c\"\n";
        for (text, problem) in [
            (
                format!(
                    "{base}redirect_uri = \"https://a.example.com/elsewhere\"\nroles = {{ a = \"admin\" }}"
                ),
                "must be this server's /console/oidc/callback",
            ),
            (
                format!(
                    "{base}redirect_uri = \"http://a.example.com/console/oidc/callback\"\nroles = {{ a = \"admin\" }}"
                ),
                "console.oidc.redirect_uri",
            ),
            (
                format!(
                    "{base}redirect_uri = \"https://a.example.com/console/oidc/callback\"\nroles = {{ a = \"root\" }}"
                ),
                "\"root\" is not a role",
            ),
            (
                format!(
                    "{base}redirect_uri = \"https://a.example.com/console/oidc/callback\"\nroles = {{}}"
                ),
                "console.oidc.roles is empty",
            ),
        ] {
            let err = RawConfig::parse(&format!("[console.oidc]\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn a_trace_link_needs_an_http_url_with_the_trace_id_in_it() {
        let ok = RawConfig::parse(
            "[console]\ntrace_url = \"http://127.0.0.1:16686/trace/{trace_id}\"\n",
        )
        .unwrap();
        assert_eq!(
            ok.console.trace_url.as_deref(),
            Some("http://127.0.0.1:16686/trace/{trace_id}")
        );
        for bad in [
            "http://127.0.0.1:16686/trace/",
            "javascript:alert(1)//{trace_id}",
            "not a url {trace_id}",
        ] {
            let err = RawConfig::parse(&format!("[console]\ntrace_url = {bad:?}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("console.trace_url"), "{bad}: {err}");
        }
    }

    #[test]
    fn rate_limits_parse_and_bad_ones_are_named() {
        let c = RawConfig::parse(
            r#"
            [server]
            http_agent = "coder"
            [agents.coder]
            mcp_servers = ["workspace"]
            rate = "120/min"
            rate_per_caller = "30/min"
            rates = { web_fetch = "10/h" }
            concurrent = 4
            "#,
        )
        .unwrap();
        let r = &c.agent_profiles()["coder"].rates;
        assert_eq!(r.rate.map(|r| r.to_string()), Some("120/min".into()));
        assert_eq!(r.per_caller.map(|r| r.to_string()), Some("30/min".into()));
        assert_eq!(r.per_tool["web_fetch"].to_string(), "10/h");
        assert_eq!(r.concurrent, Some(4));
        for (text, problem) in [
            (
                "rate = \"5/week\"",
                "agents.coder.rate: \"5/week\" is not a rate",
            ),
            (
                "rate_per_caller = \"0/min\"",
                "agents.coder.rate_per_caller",
            ),
            (
                "rates = { web_fetch = \"lots\" }",
                "agents.coder.rates.web_fetch",
            ),
            ("rates = { \"no such!\" = \"1/s\" }", "is not a tool name"),
            ("concurrent = 0", "concurrent must be between 1 and 10000"),
        ] {
            let err = RawConfig::parse(&format!(
                "[server]\nhttp_agent = \"coder\"\n[agents.coder]\n{text}\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn agents_and_roots_parse() {
        let c = RawConfig::parse(
            r#"
            [server]
            http_agent = "coder"
            [roots.docs]
            path = "/srv/docs"
            [roots.src]
            path = "."
            mode = "rw"
            [agents.coder]
            team = "core"
            tools = ["read_file", "todo"]
            [agents.lead]
            supervisor = true
            mcp_servers = ["workspace", "planning"]
            "#,
        )
        .unwrap();
        assert_eq!(c.roots["docs"].mode, RootMode::ReadOnly);
        assert_eq!(c.roots["src"].mode, RootMode::ReadWrite);
        let a = c.agent_profiles();
        assert_eq!(a["coder"].mcp_servers, None);
        assert!(a["lead"].supervisor);
    }

    #[test]
    fn upstreams_are_stdio_or_http_and_keep_secrets_out_of_the_file() {
        let ok = RawConfig::parse(
            r#"
            [upstreams.fs]
            command = "npx"
            env_credentials = { TOKEN = "gh" }
            [upstreams.remote]
            url = "https://mcp.example.com/mcp"
            credential = "remote-key"
            headers = { "X-Team" = "core" }
            [upstreams.local]
            url = "http://127.0.0.1:3001/mcp"
            credential = "local"
            "#,
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
        for name in ["a_", "_a", "a__b", "reports", "A", "workspace", "shell"] {
            let err = RawConfig::parse(&format!("[upstreams.{name}]\ncommand = \"x\"\n"))
                .err()
                .unwrap_or_else(|| panic!("accepted upstream name {name:?}"));
            assert!(
                err.to_string().contains(&format!("upstreams.{name}")),
                "{err}"
            );
        }
        for (bad, says) in [
            ("command = \"x\"\nurl = \"https://a/mcp\"", "not both"),
            ("timeout_seconds = 5", "give command"),
            ("url = \"ftp://a/x\"", "http or https"),
            ("url = \"not a url\"", "url"),
            (
                "url = \"http://mcp.example.com/mcp\"\ncredential = \"k\"",
                "only over https",
            ),
            (
                "url = \"https://user:pw@a.example/mcp\"",
                "user or password",
            ),
            (
                "url = \"https://a.example/mcp\"\nheaders = { Authorization = \"Bearer x\" }",
                "keep it in the vault",
            ),
            (
                "url = \"https://a.example/mcp\"\nargs = [\"x\"]",
                "for command upstreams",
            ),
            ("command = \"x\"\ncredential = \"k\"", "for url upstreams"),
            (
                "url = \"https://a.example/mcp\"\nuncovered = true",
                "for command upstreams",
            ),
            (
                "command = \"x\"\nenv_credentials = { T = \"a b\" }",
                "not a credential name",
            ),
        ] {
            let err = RawConfig::parse(&format!("[upstreams.u]\n{bad}\n"))
                .err()
                .unwrap_or_else(|| panic!("accepted: {bad}"));
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn every_problem_is_reported_with_its_place() {
        let err = RawConfig::parse(
            r#"
            [server]
            listen = "localhost"
            http_agent = "ghost"
            [roots."bad name"]
            path = ""
            [agents.a]
            mcp_servers = ["Shell"]
            tools = ["no spaces please"]
            [limits]
            tool_seconds = 0
            "#,
        )
        .unwrap_err();
        let text = err.to_string();
        let err = RawConfig::parse(
            "[server]\nauth = \"none\"\npublic_hosts = [\"aether.example.com\"]\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("public_hosts"), "{err}");
        for needle in [
            "server.listen",
            "roots.bad name",
            "roots.bad name.path",
            "agents.a.mcp_servers[0]",
            "agents.a.tools[0]",
            "server.http_agent",
            "limits.tool_seconds",
        ] {
            assert!(text.contains(needle), "{needle} missing from:\n{text}");
        }
    }

    #[test]
    fn the_registry_screen_is_warn_or_block() {
        assert_eq!(
            RawConfig::parse("").unwrap().registry.screen,
            ScreenMode::Warn
        );
        for (text, mode) in [("warn", ScreenMode::Warn), ("block", ScreenMode::Block)] {
            let c = RawConfig::parse(&format!("[registry]\nscreen = \"{text}\"\n")).unwrap();
            assert_eq!(c.registry.screen, mode);
        }
        for (bad, says) in [
            ("screen = \"blok\"", "blok"),
            (
                "screen = \"Block\"",
                "\"warn\", \"block\"; did you mean \"block\"?",
            ),
            ("screen = true", "screen"),
            ("scren = \"block\"", "scren"),
        ] {
            let err = RawConfig::parse(&format!("[registry]\n{bad}\n"))
                .err()
                .unwrap_or_else(|| panic!("accepted: {bad}"));
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = RawConfig::parse("[server]\nlisten_on = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("listen_on"), "{err}");
    }

    /// A mistyped key or choice is named with its table, its line, what is allowed there and
    /// the name probably meant, whatever the key.
    #[test]
    fn a_mistyped_key_or_choice_is_named_with_what_was_meant() {
        let cases = [
            (
                "[roots.src]\npath = \".\"\nmode = \"wr\"\n",
                &[
                    "roots.src.mode (line 3)",
                    "\"wr\" is not one of",
                    "\"rw\", \"ro\", \"sealed\"",
                    "did you mean \"rw\"?",
                ][..],
            ),
            (
                "[roots.src]\npaht = \".\"\n",
                &[
                    "roots.src.paht (line 2)",
                    "no such key in [roots.src]",
                    "did you mean \"path\"?",
                ],
            ),
            (
                "# a comment\n[agents.a]\napproval = \"operater\"\n",
                &["agents.a.approval (line 3)", "did you mean \"operator\"?"],
            ),
            (
                "[upstreams.gh]\ncommand = \"x\"\ntier = \"elevate\"\n",
                &["upstreams.gh.tier (line 3)", "did you mean \"elevated\"?"],
            ),
            (
                "lisen = 1\n",
                &["lisen (line 1)", "no such key at the top level"],
            ),
        ];
        for (text, needles) in cases {
            let err = RawConfig::parse(text).unwrap_err().to_string();
            for needle in needles {
                assert!(err.contains(needle), "{text:?}: {needle:?} not in {err}");
            }
        }
        // Far from every choice: no guess.
        let err = RawConfig::parse("[roots.src]\npath = \".\"\nmode = \"writable\"\n")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("did you mean"), "{err}");
    }

    #[test]
    fn localhost_listens_on_loopback_and_other_names_are_refused() {
        assert_eq!(
            listen_address("localhost:8484").unwrap(),
            "127.0.0.1:8484".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            listen_address("[::1]:9").unwrap(),
            "[::1]:9".parse::<SocketAddr>().unwrap()
        );
        for bad in ["localhost", "example.com:80", "localhost:99999", ":8484"] {
            let e = listen_address(bad).unwrap_err();
            assert!(e.contains("127.0.0.1:8484"), "{bad}: {e}");
        }
        assert!(RawConfig::parse("[server]\nlisten = \"localhost:1\"\n").is_ok());
    }

    /// Tools and groups an agent or a scope names must exist: built in, or an upstream's.
    #[test]
    fn names_of_tools_and_groups_nothing_has_are_problems() {
        let raw = RawConfig::parse(
            r#"
            [server]
            http_agent = "a"
            [upstreams.gh]
            command = "x"
            [upstreams.files]
            command = "y"
            group = "shared"
            [agents.a]
            tools = ["read_file", "red_file", "gh__create_issue", "gj__x", "gh__"]
            mcp_servers = ["workspace", "shared", "gh", "workspaces", "files"]
            rates = { web_fetc = "1/min" }
            arg_defaults = { list_dirs = { depth = 1 } }
            [auth]
            issuer = "https://idp.example.com"
            resource = "https://aether.example.com/mcp"
            [auth.scopes]
            "mcp:x" = { agent = "a", tools = ["read_fil"], mcp_servers = ["plannin"] }
            "#,
        )
        .unwrap();
        let tools: BTreeSet<String> = ["read_file", "web_fetch", "list_dir"]
            .map(String::from)
            .into();
        let problems = raw.unknown_names(&tools).join("\n");
        for needle in [
            "agents.a.tools[1] \"red_file\" is not a tool Aether has; did you mean \"read_file\"?",
            "agents.a.tools[3] \"gj__x\" is no upstream's tool: there is no [upstreams.gj]; did you mean \"gh\"?",
            "agents.a.tools[4] \"gh__\"",
            "agents.a.mcp_servers[3] \"workspaces\" is no group",
            "did you mean \"workspace\"?",
            "agents.a.mcp_servers[4] \"files\"",
            "agents.a.rates: \"web_fetc\"",
            "agents.a.arg_defaults: \"list_dirs\"",
            "auth.scopes.\"mcp:x\".tools[0] \"read_fil\"",
            "auth.scopes.\"mcp:x\".mcp_servers[0] \"plannin\"",
            "did you mean \"planning\"?",
        ] {
            assert!(problems.contains(needle), "{needle:?} not in\n{problems}");
        }
        // What exists is no problem: the known tool, the upstream's tool and both groups.
        assert_eq!(problems.lines().count(), 9, "{problems}");
        assert!(RawConfig::default().unknown_names(&tools).is_empty());
    }
}

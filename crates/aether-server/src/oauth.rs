//! OAuth 2.1 access tokens for `/mcp`: Aether as the resource server of the MCP authorization
//! spec. A token is a JWT (RFC 9068) from the one configured issuer, signed by a key the
//! issuer publishes (its `jwks_uri`), minted for this server's resource URL (its `aud`; RFC
//! 8707), in date; its scopes choose the agent it acts as and what of that agent's tools it
//! reaches (`[auth.scopes]`). Nothing a token says is passed on: Aether never forwards it.
//!
//! With `[auth] builtin`, the issuer is Aether itself (`authz.rs`): its tokens are checked
//! with its own key (never fetched), and each names its grant (`gid`), which the store says is
//! still live (asked at most once a second per grant, so a revocation reaches every replica
//! within a second).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_policy::config::AuthSection;
use aether_policy::{ScopeGrant, ScopeReach};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};

/// Signing algorithms accepted: asymmetric only (a shared secret would let anyone holding it
/// mint tokens; `none` is never a signature).
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Tokens remembered as checked, at most (past it, all are forgotten and checked again).
const MAX_REMEMBERED: usize = 10_000;

/// The longest subject (`sub`) taken.
const MAX_SUBJECT_CHARS: usize = 256;

/// Keys are read again this often, so a key the issuer withdrew stops working.
const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// A token naming a key not yet seen makes Aether read the keys again, at most this often
/// (a stream of made-up key ids cannot make it hammer the issuer).
const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// After a failed reading of the keys, the issuer is not asked again for this long.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

/// What a caller is told when the keys cannot be read (the details go to the log).
const KEYS_UNREADABLE: &str = "the authorization server's signing keys cannot be read just now";

/// The largest metadata or key set read from the issuer.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Who a valid access token is for, and what it may do.
#[derive(Clone, Debug)]
pub struct Grant {
    pub agent: String,
    /// The token's subject: the person (or client) it was issued to.
    pub subject: String,
    /// What its scopes reach of the agent's tools.
    pub reach: Arc<ScopeReach>,
}

/// Why a token was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// Not a valid token for this server (401 `invalid_token`).
    Invalid(String),
    /// Valid, but none of its scopes lets it act here (403 `insufficient_scope`), with the
    /// scopes that would.
    Scope { needed: Vec<String>, why: String },
    /// The issuer's keys cannot be read just now (503): nothing is decided.
    Unavailable(String),
}

/// The issuer's signing keys as last read.
#[derive(Default)]
struct Keys {
    by_id: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys published without an id: usable by a token naming none, when only one exists.
    unnamed: Vec<(DecodingKey, Option<Algorithm>)>,
    /// When they were read.
    read_at: Option<Instant>,
    /// The last attempt to read them, and whether it failed.
    tried: Option<(Instant, bool)>,
}

impl Keys {
    /// The answer when the keys may not be read again yet: too soon after a reading (the
    /// token names a key the issuer does not publish), or after a failed one (the issuer is
    /// not asked again for a while, whoever sends tokens).
    fn too_soon(&self, fresh: bool, kid: Option<&str>) -> Option<Refusal> {
        match self.tried {
            Some((at, true)) if at.elapsed() < RETRY_AFTER_FAILURE => {
                Some(Refusal::Unavailable(KEYS_UNREADABLE.into()))
            }
            Some((at, false)) if fresh && at.elapsed() < REFETCH_AT_MOST_EVERY => {
                Some(Refusal::Invalid(unknown_key(kid)))
            }
            _ => None,
        }
    }
}

/// The built-in authorization server's key, and the store that says which grants are live.
pub struct Builtin {
    pub verifier: crate::authz::Verifier,
    pub store: aether_store::Store,
    /// Grants asked about lately: live or not, and when the store said so.
    live: std::sync::Mutex<HashMap<String, (bool, Instant)>>,
}

/// How long the store's word on a grant is taken.
const GRANT_CHECKED_FOR: Duration = Duration::from_secs(1);

impl Builtin {
    pub fn new(verifier: crate::authz::Verifier, store: aether_store::Store) -> Builtin {
        Builtin {
            verifier,
            store,
            live: Default::default(),
        }
    }

    /// Whether grant `gid` is neither revoked nor expired.
    async fn live(&self, gid: &str) -> Result<bool, Refusal> {
        if let Some((live, at)) = self.live.lock().unwrap_or_else(|e| e.into_inner()).get(gid)
            && at.elapsed() < GRANT_CHECKED_FOR
        {
            return Ok(*live);
        }
        let live = self
            .store
            .oauth_live_grant(gid.to_string())
            .await
            .map_err(|e| Refusal::Unavailable(format!("the store cannot be read: {e}")))?
            .is_some();
        let mut seen = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(gid.to_string(), (live, Instant::now()));
        Ok(live)
    }
}

pub struct OAuth {
    /// The built-in authorization server, when it is the issuer.
    builtin: Option<Builtin>,
    issuer: String,
    resource: String,
    /// Where the issuer's keys are: configured, or found in its metadata once.
    jwks_uri: tokio::sync::Mutex<Option<String>>,
    leeway: u64,
    /// Whether a JWT without `typ: at+jwt` (RFC 9068) is taken as an access token.
    plain_jwt: bool,
    scopes: BTreeMap<String, aether_policy::config::ScopeGrant>,
    /// The scopes a client is told to ask for: those of one agent (`server.http_agent`'s, if
    /// it has any), since a token's scopes must name one agent.
    asked: Vec<String>,
    http: reqwest::Client,
    keys: tokio::sync::RwLock<Keys>,
    /// One reading of the keys at a time.
    reading: tokio::sync::Mutex<()>,
    /// Tokens checked, by their SHA-256.
    seen: std::sync::Mutex<HashMap<String, Seen>>,
}

/// A token checked before: what it grants, until when, under which keys (and for the
/// built-in issuer, under which grant).
struct Seen {
    grant: Grant,
    exp: i64,
    keys_read: Instant,
    gid: Option<String>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    /// Checked by the decoder (a number, in date); kept to know how long a token is good.
    exp: f64,
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers list scopes as an array under `scp` instead.
    #[serde(default)]
    scp: Option<Value>,
    /// The built-in issuer's grant.
    #[serde(default)]
    gid: Option<String>,
}

impl OAuth {
    /// `None` when `[auth]` names no issuer (and Aether is not its own: `builtin`, whose key
    /// and store check its tokens).
    pub fn from_config(
        auth: &AuthSection,
        http_agent: &str,
        builtin: Option<Builtin>,
    ) -> Option<OAuth> {
        let resource = auth.resource.clone()?;
        let issuer = match &builtin {
            Some(_) => crate::authz::issuer_of(&resource)?,
            None => auth.issuer.clone()?,
        };
        let agent = match auth.scopes.values().any(|g| g.agent == http_agent) {
            true => http_agent,
            false => auth.scopes.values().next().map_or("", |g| g.agent.as_str()),
        };
        let asked = auth
            .scopes
            .iter()
            .filter(|(_, g)| g.agent == agent)
            .map(|(scope, _)| scope.clone())
            .collect();
        Some(OAuth {
            builtin,
            asked,
            issuer,
            resource,
            jwks_uri: tokio::sync::Mutex::new(auth.jwks_uri.clone()),
            leeway: auth.leeway_seconds,
            plain_jwt: auth.accept_plain_jwt,
            scopes: auth.scopes.clone(),
            http: aether_net::outbound(Duration::from_secs(10))
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client with Aether's outbound settings"),
            keys: Default::default(),
            reading: Default::default(),
            seen: Default::default(),
        })
    }

    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The protected resource metadata (RFC 9728) served at
    /// `/.well-known/oauth-protected-resource` and its path-suffixed form.
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes.keys().collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "Aether",
        })
    }

    /// Where this server's metadata is: the well-known URI with the resource's path appended
    /// (RFC 9728 §3.1), on the resource's own origin.
    pub fn metadata_url(&self) -> String {
        match url::Url::parse(&self.resource) {
            Ok(u) => {
                let path = u.path().trim_end_matches('/');
                format!(
                    "{}/.well-known/oauth-protected-resource{path}",
                    u.origin().ascii_serialization()
                )
            }
            Err(_) => format!("{}/.well-known/oauth-protected-resource", self.resource),
        }
    }

    /// The `WWW-Authenticate` value for a refusal (`error` is RFC 6750's code, if any).
    pub fn challenge(&self, error: Option<&str>, scopes: &[String], why: Option<&str>) -> String {
        let mut parts = vec![format!("resource_metadata=\"{}\"", self.metadata_url())];
        if let Some(error) = error {
            parts.push(format!("error=\"{error}\""));
        }
        let scope = if scopes.is_empty() {
            self.asked.join(" ")
        } else {
            scopes.join(" ")
        };
        if !scope.is_empty() {
            parts.push(format!("scope=\"{scope}\""));
        }
        if let Some(why) = why {
            // A quoted-string: no quotes or backslashes, printable ASCII only.
            let why: String = why
                .chars()
                .map(|c| match c {
                    '"' | '\\' => '\'',
                    c if c.is_ascii_graphic() || c == ' ' => c,
                    _ => '?',
                })
                .collect();
            parts.push(format!("error_description=\"{why}\""));
        }
        format!("Bearer {}", parts.join(", "))
    }

    /// Whether `token` looks like a JWT (three base64url parts) rather than a static token.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3 && jsonwebtoken::decode_header(token).is_ok()
    }

    /// Checks an access token and says whom it is for.
    pub async fn validate(&self, token: &str) -> Result<Grant, Refusal> {
        // A token seen before, under the keys as they are now, and still in date: its
        // signature need not be checked again (the costly part, every request).
        let digest = aether_policy::sha256(token.as_bytes()).to_string();
        if let Some(grant) = self.remembered(&digest).await? {
            return Ok(grant);
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("the access token is not a JWT: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "the access token is signed with {:?}, which this server does not accept",
                header.alg
            )));
        }
        // RFC 9068: an access token says so, which tells it from an ID token or any other
        // JWT the issuer signs. Some issuers do not (`accept_plain_jwt`).
        let typ = header.typ.as_deref().unwrap_or("");
        let access = ["at+jwt", "application/at+jwt"]
            .iter()
            .any(|t| typ.eq_ignore_ascii_case(t));
        let plain = typ.is_empty() || typ.eq_ignore_ascii_case("jwt");
        let taken = access || (plain && self.plain_jwt);
        if !taken {
            return Err(Refusal::Invalid(format!(
                "a JWT of type {:?} is not an access token (RFC 9068's at+jwt; auth.accept_plain_jwt takes plain JWTs)",
                typ.chars().take(32).collect::<String>()
            )));
        }
        let (key, keys_read) = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| Refusal::Invalid(explain(e.kind(), &self.resource)))?
            .claims;
        let exp = claims.exp as i64;
        let gid = claims.gid.clone();
        if let Some(builtin) = &self.builtin {
            match &gid {
                Some(gid) if builtin.live(gid).await? => {}
                Some(_) => {
                    return Err(Refusal::Invalid(
                        "the access token's grant was revoked or has expired".into(),
                    ));
                }
                None => return Err(Refusal::Invalid("the access token names no grant".into())),
            }
        }
        let grant = self.grant(claims)?;
        self.remember(digest, &grant, exp, keys_read, gid);
        Ok(grant)
    }

    /// A token's grant as checked before, if it still holds: in date (with the leeway), and
    /// checked under the keys held now, which are fresh (keys read again forget every token
    /// checked under the ones before, so a withdrawn key's tokens are checked again).
    /// For the built-in issuer, the key never changes, and the grant must still be live.
    async fn remembered(&self, digest: &str) -> Result<Option<Grant>, Refusal> {
        let Some((grant, exp, keys_read, gid)) = ({
            let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.get(digest)
                .map(|s| (s.grant.clone(), s.exp, s.keys_read, s.gid.clone()))
        }) else {
            return Ok(None);
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(i64::MAX, |d| d.as_secs() as i64);
        if now > exp.saturating_add(self.leeway as i64) {
            return Ok(None);
        }
        if let Some(builtin) = &self.builtin {
            return match gid {
                Some(gid) if builtin.live(&gid).await? => Ok(Some(grant)),
                _ => Ok(None),
            };
        }
        let keys = self.keys.read().await;
        let current = keys.read_at == Some(keys_read) && keys_read.elapsed() < KEYS_MAX_AGE;
        Ok(current.then_some(grant))
    }

    fn remember(
        &self,
        digest: String,
        grant: &Grant,
        exp: i64,
        keys_read: Instant,
        gid: Option<String>,
    ) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= MAX_REMEMBERED {
            seen.clear();
        }
        seen.insert(
            digest,
            Seen {
                grant: grant.clone(),
                exp,
                keys_read,
                gid,
            },
        );
    }

    /// The agent and reach of a token with these claims.
    fn grant(&self, claims: Claims) -> Result<Grant, Refusal> {
        // The subject is kept in the audit and binds sessions: a name, not a payload.
        if claims.sub.is_empty()
            || claims.sub.chars().count() > MAX_SUBJECT_CHARS
            || claims.sub.chars().any(char::is_control)
        {
            return Err(Refusal::Invalid(format!(
                "the access token's subject must be 1 to {MAX_SUBJECT_CHARS} characters, none of them control characters"
            )));
        }
        let mut scopes: BTreeSet<String> = claims
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        match &claims.scp {
            Some(Value::String(s)) => scopes.extend(s.split_whitespace().map(str::to_string)),
            Some(Value::Array(list)) => {
                scopes.extend(list.iter().filter_map(Value::as_str).map(str::to_string))
            }
            _ => {}
        }
        let mapped: Vec<(&String, &aether_policy::config::ScopeGrant)> = self
            .scopes
            .iter()
            .filter(|(scope, _)| scopes.contains(*scope))
            .collect();
        let agents: BTreeSet<&str> = mapped.iter().map(|(_, g)| g.agent.as_str()).collect();
        let agent = match agents.len() {
            0 => {
                return Err(Refusal::Scope {
                    needed: self.asked.clone(),
                    why: "the access token has no scope this server grants anything for".into(),
                });
            }
            1 => agents.into_iter().next().unwrap_or_default().to_string(),
            _ => {
                return Err(Refusal::Scope {
                    needed: self.asked.clone(),
                    why: format!(
                        "the access token's scopes name several agents ({}); a token acts as one",
                        agents.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        };
        let grant = |(scope, g): (&String, &aether_policy::config::ScopeGrant)| ScopeGrant {
            scope: scope.clone(),
            groups: g.mcp_servers.as_ref().map(|l| l.iter().cloned().collect()),
            tools: g.tools.as_ref().map(|l| l.iter().cloned().collect()),
        };
        let reach = ScopeReach {
            grants: mapped.into_iter().map(grant).collect(),
            others: self
                .scopes
                .iter()
                .filter(|(_, g)| g.agent == agent)
                .map(grant)
                .collect(),
        };
        Ok(Grant {
            agent,
            subject: claims.sub,
            reach: Arc::new(reach),
        })
    }

    /// The key `kid` names, reading the issuer's keys again when they are old, or when the
    /// token names one not seen yet (the issuer rotated its keys).
    async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(DecodingKey, Instant), Refusal> {
        if let Some(builtin) = &self.builtin {
            return match kid {
                Some(kid) if kid == builtin.verifier.kid && alg == Algorithm::EdDSA => {
                    Ok((builtin.verifier.key.clone(), Instant::now()))
                }
                _ => Err(Refusal::Invalid(
                    "the access token is not signed by this server's key".into(),
                )),
            };
        }
        let found = |keys: &Keys| -> Option<(DecodingKey, Instant)> {
            let (key, key_alg) = match kid {
                Some(kid) => keys.by_id.get(kid)?,
                None if keys.unnamed.len() == 1 && keys.by_id.is_empty() => &keys.unnamed[0],
                None => return None,
            };
            let read_at = keys.read_at?;
            key_alg
                .is_none_or(|a| a == alg)
                .then(|| (key.clone(), read_at))
        };
        {
            let keys = self.keys.read().await;
            let fresh = keys.read_at.is_some_and(|t| t.elapsed() < KEYS_MAX_AGE);
            if fresh && let Some(key) = found(&keys) {
                return Ok(key);
            }
            if let Some(refusal) = keys.too_soon(fresh, kid) {
                return Err(refusal);
            }
        }
        // One reading at a time; those that waited take its outcome instead of another.
        let _one = self.reading.lock().await;
        {
            let keys = self.keys.read().await;
            let fresh = keys.read_at.is_some_and(|t| t.elapsed() < KEYS_MAX_AGE);
            if fresh && let Some(key) = found(&keys) {
                return Ok(key);
            }
            if let Some(refusal) = keys.too_soon(fresh, kid) {
                return Err(refusal);
            }
        }
        match self.read_keys().await {
            Ok(read) => {
                let mut keys = self.keys.write().await;
                *keys = read;
                found(&keys).ok_or_else(|| Refusal::Invalid(unknown_key(kid)))
            }
            Err(why) => {
                // The keys held are not used past their age: a key the issuer withdrew
                // must not keep working because the issuer cannot be reached.
                tracing::warn!(%why, "cannot read the authorization server's signing keys");
                self.keys.write().await.tried = Some((Instant::now(), true));
                Err(Refusal::Unavailable(KEYS_UNREADABLE.into()))
            }
        }
    }

    /// Reads the issuer's published keys.
    async fn read_keys(&self) -> Result<Keys, String> {
        let known = self.jwks_uri.lock().await.clone();
        let uri = match known {
            Some(uri) => uri,
            None => {
                let uri = self.discover_jwks_uri().await?;
                *self.jwks_uri.lock().await = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet = serde_json::from_value(self.get_json(&uri).await?)
            .map_err(|e| format!("the issuer's key set at {uri} is not a JWK set: {e}"))?;
        let mut keys = Keys {
            read_at: Some(Instant::now()),
            tried: Some((Instant::now(), false)),
            ..Default::default()
        };
        for jwk in &set.keys {
            // Only signing keys; one this build cannot read is skipped, not fatal.
            if jwk
                .common
                .public_key_use
                .as_ref()
                .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
            {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let alg = jwk_algorithm(jwk);
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_id.insert(kid.clone(), (key, alg));
                }
                None => keys.unnamed.push((key, alg)),
            }
        }
        tracing::debug!(keys = keys.by_id.len() + keys.unnamed.len(), %uri, "read the issuer's signing keys");
        Ok(keys)
    }

    /// The issuer's `jwks_uri`, from its metadata (RFC 8414, else OpenID Connect discovery),
    /// which must name the same issuer.
    async fn discover_jwks_uri(&self) -> Result<String, String> {
        let base = url::Url::parse(&self.issuer).map_err(|e| format!("auth.issuer: {e}"))?;
        let origin = base.origin().ascii_serialization();
        let path = base.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!(
                "{}/.well-known/openid-configuration",
                self.issuer.trim_end_matches('/')
            ),
        ];
        let mut problems = Vec::new();
        for url in candidates {
            match self.get_json(&url).await {
                Ok(meta) => {
                    if meta.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
                        problems.push(format!("{url} names another issuer"));
                        continue;
                    }
                    return match meta.get("jwks_uri").and_then(Value::as_str) {
                        Some(uri) if web_url(uri) => Ok(uri.to_string()),
                        Some(uri) => Err(format!(
                            "{url} names jwks_uri {uri:?}, which is not an https URL (http only on loopback)"
                        )),
                        None => Err(format!("{url} names no jwks_uri; set auth.jwks_uri")),
                    };
                }
                Err(e) => problems.push(e),
            }
        }
        Err(format!(
            "cannot read the issuer's metadata: {}",
            problems.join("; ")
        ))
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        get_json(&self.http, url).await
    }
}

/// A JSON document from an authorization or identity server (its metadata, its keys).
pub(crate) async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    json_reply(url, response).await
}

/// A server's JSON answer, read up to [`MAX_DOCUMENT_BYTES`]; an answer that is not a success
/// is an error naming its status (and what it said, when that is JSON).
pub(crate) async fn json_reply(
    url: &str,
    mut response: reqwest::Response,
) -> Result<Value, String> {
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url} is larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    let json = serde_json::from_slice::<Value>(&body);
    match (status.is_success(), json) {
        (true, Ok(json)) => Ok(json),
        (true, Err(e)) => Err(format!("{url} is not JSON: {e}")),
        (false, Ok(json)) => Err(format!(
            "{url} answered {status}: {}",
            json.to_string().chars().take(300).collect::<String>()
        )),
        (false, Err(_)) => Err(format!("{url} answered {status}")),
    }
}

/// An https URL, or http on loopback: where keys may be read from.
fn web_url(uri: &str) -> bool {
    url::Url::parse(uri).is_ok_and(|u| {
        (u.scheme() == "https" && u.host().is_some())
            || (u.scheme() == "http" && aether_policy::config::is_loopback_url(&u))
    })
}

fn unknown_key(kid: Option<&str>) -> String {
    // The caller chose the key id: it is quoted only so far.
    let kid = kid.map(|k| k.chars().take(64).collect::<String>());
    match kid.as_deref() {
        Some(kid) => {
            format!("the access token is signed by key {kid:?}, which the issuer does not publish")
        }
        None => "the access token names no key (kid) and the issuer publishes several".into(),
    }
}

/// The algorithm a JWK says it is for, when it says.
fn jwk_algorithm(jwk: &Jwk) -> Option<Algorithm> {
    use jsonwebtoken::jwk::KeyAlgorithm as K;
    Some(match jwk.common.key_algorithm? {
        K::RS256 => Algorithm::RS256,
        K::RS384 => Algorithm::RS384,
        K::RS512 => Algorithm::RS512,
        K::PS256 => Algorithm::PS256,
        K::PS384 => Algorithm::PS384,
        K::PS512 => Algorithm::PS512,
        K::ES256 => Algorithm::ES256,
        K::ES384 => Algorithm::ES384,
        K::EdDSA => Algorithm::EdDSA,
        // A key for another purpose (HMAC, encryption) never verifies an access token.
        _ => return Some(Algorithm::HS256),
    })
}

/// A refused token's reason, in words a client's user can act on.
fn explain(kind: &jsonwebtoken::errors::ErrorKind, resource: &str) -> String {
    use jsonwebtoken::errors::ErrorKind as E;
    match kind {
        E::ExpiredSignature => "the access token has expired".into(),
        E::ImmatureSignature => "the access token is not valid yet".into(),
        E::InvalidAudience => format!(
            "the access token was not minted for this server (its audience must be {resource})"
        ),
        E::InvalidIssuer => "the access token is from another issuer".into(),
        E::InvalidSignature => "the access token's signature does not verify".into(),
        E::MissingRequiredClaim(claim) => format!("the access token has no {claim:?} claim"),
        E::InvalidAlgorithm => "the access token's algorithm does not match its key".into(),
        other => format!("the access token is malformed ({other:?})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};

    /// A P-256 key made for these tests only (PKCS#8), and its public half as a JWK.
    const KEY: &str = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgvu85+F0qLFrgTgMwldraW35+OJCBryYJSTz7i+geyIGhRANCAAS6CulRE7/GEFB6mJwjD/YOssWgqbHXU5E5sIrp/rPOVIQnqA5++YyKJHKfnXJEn5w3dOXA//i8Jy6cquPSM7A9";
    const X: &str = "ugrpURO_xhBQepicIw_2DrLFoKmx11ORObCK6f6zzlQ";
    const Y: &str = "hCeoDn75jIokcp-dckSfnDd05cD_-LwnLpyq49IzsD0";
    const ISSUER: &str = "https://idp.test";
    const RESOURCE: &str = "https://aether.test/mcp";

    fn oauth(plain_jwt: bool) -> OAuth {
        let grant = |agent: &str, tools: Option<Vec<String>>| aether_policy::config::ScopeGrant {
            agent: agent.into(),
            mcp_servers: None,
            tools,
        };
        let section = AuthSection {
            issuer: Some(ISSUER.into()),
            resource: Some(RESOURCE.into()),
            jwks_uri: None,
            leeway_seconds: 0,
            accept_plain_jwt: plain_jwt,
            builtin: false,
            registration: false,
            access_token_seconds: 600,
            refresh_token_days: 30,
            scopes: [
                ("mcp:tools".to_string(), grant("default", None)),
                (
                    "mcp:read".to_string(),
                    grant("default", Some(vec!["read_file".into()])),
                ),
                ("ops".to_string(), grant("ops", None)),
            ]
            .into(),
        };
        let oauth = OAuth::from_config(&section, "default", None).unwrap();
        let set: JwkSet = serde_json::from_value(json!({"keys": [{
            "kty": "EC", "crv": "P-256", "x": X, "y": Y, "kid": "k1", "alg": "ES256", "use": "sig",
        }]}))
        .unwrap();
        let mut keys = Keys {
            read_at: Some(Instant::now()),
            tried: Some((Instant::now(), false)),
            ..Default::default()
        };
        for jwk in &set.keys {
            keys.by_id.insert(
                "k1".into(),
                (DecodingKey::from_jwk(jwk).unwrap(), jwk_algorithm(jwk)),
            );
        }
        *oauth.keys.try_write().unwrap() = keys;
        oauth
    }

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    fn claims() -> Value {
        json!({
            "iss": ISSUER, "aud": RESOURCE, "sub": "alice", "scope": "mcp:tools",
            "iat": now(), "exp": now() + 300,
        })
    }

    fn mint(claims: &Value, typ: Option<&str>, kid: &str) -> String {
        let der = base64::engine::general_purpose::STANDARD
            .decode(KEY)
            .unwrap();
        let mut header = Header::new(Algorithm::ES256);
        header.typ = typ.map(str::to_string);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&der)).unwrap()
    }

    async fn check(oauth: &OAuth, token: &str) -> Result<Grant, String> {
        oauth.validate(token).await.map_err(|r| match r {
            Refusal::Invalid(why) => format!("invalid: {why}"),
            Refusal::Scope { needed, why } => format!("scope {needed:?}: {why}"),
            Refusal::Unavailable(why) => format!("unavailable: {why}"),
        })
    }

    fn with(change: impl FnOnce(&mut Value)) -> Value {
        let mut c = claims();
        change(&mut c);
        c
    }

    #[tokio::test]
    async fn a_good_access_token_names_its_agent_subject_and_reach() {
        let o = oauth(false);
        let grant = check(&o, &mint(&claims(), Some("at+jwt"), "k1"))
            .await
            .unwrap();
        assert_eq!(
            (grant.agent.as_str(), grant.subject.as_str()),
            ("default", "alice")
        );
        // An audience list naming this server is taken.
        let listed = with(|c| c["aud"] = json!(["https://other.test", RESOURCE]));
        check(&o, &mint(&listed, Some("at+jwt"), "k1"))
            .await
            .unwrap();
        // A narrower scope reaches its own tools; the others name the scope that would.
        let read = with(|c| c["scope"] = json!("mcp:read"));
        let grant = check(&o, &mint(&read, Some("at+jwt"), "k1")).await.unwrap();
        let tool = |name: &str| aether_policy::ToolDef {
            name: name.into(),
            title: name.into(),
            group: "workspace".into(),
            tier: aether_policy::Tier::Standard,
            description: String::new(),
            input_schema: json!({}),
            output_schema: json!({}),
            arguments: Default::default(),
            meta: aether_policy::ToolMeta::read_only(),
        };
        assert!(grant.reach.check(&tool("read_file")).is_ok());
        assert_eq!(
            grant.reach.check(&tool("list_dir")),
            Err(aether_policy::Hidden::OutOfScope {
                scopes: vec!["mcp:tools".into()]
            })
        );
        assert_eq!(grant.reach.groups(), Some(Default::default()));
    }

    #[tokio::test]
    async fn every_kind_of_bad_token_is_refused_with_its_reason() {
        let o = oauth(false);
        let cases: Vec<(&str, String, &str)> = vec![
            (
                "another issuer, same key",
                mint(
                    &with(|c| c["iss"] = json!("https://evil.test")),
                    Some("at+jwt"),
                    "k1",
                ),
                "another issuer",
            ),
            (
                "another resource",
                mint(
                    &with(|c| c["aud"] = json!("https://other.test/mcp")),
                    Some("at+jwt"),
                    "k1",
                ),
                "not minted for this server",
            ),
            (
                "expired",
                mint(&with(|c| c["exp"] = json!(now() - 5)), Some("at+jwt"), "k1"),
                "expired",
            ),
            (
                "not valid yet",
                mint(
                    &with(|c| c["nbf"] = json!(now() + 600)),
                    Some("at+jwt"),
                    "k1",
                ),
                "not valid yet",
            ),
            // CVE-2026-25537: a claim of the wrong type is not a claim left out.
            (
                "nbf as a string",
                mint(
                    &with(|c| c["nbf"] = json!((now() + 600).to_string())),
                    Some("at+jwt"),
                    "k1",
                ),
                "invalid",
            ),
            (
                "exp as a string",
                mint(
                    &with(|c| c["exp"] = json!((now() + 600).to_string())),
                    Some("at+jwt"),
                    "k1",
                ),
                "invalid",
            ),
            (
                "no exp",
                mint(
                    &with(|c| {
                        c.as_object_mut().unwrap().remove("exp");
                    }),
                    Some("at+jwt"),
                    "k1",
                ),
                "exp",
            ),
            (
                "no sub",
                mint(
                    &with(|c| {
                        c.as_object_mut().unwrap().remove("sub");
                    }),
                    Some("at+jwt"),
                    "k1",
                ),
                "sub",
            ),
            (
                "an empty sub",
                mint(&with(|c| c["sub"] = json!("")), Some("at+jwt"), "k1"),
                "subject",
            ),
            (
                "a control character in sub",
                mint(&with(|c| c["sub"] = json!("al\nice")), Some("at+jwt"), "k1"),
                "subject",
            ),
            (
                "an ID token's type",
                mint(&claims(), Some("JWT"), "k1"),
                "not an access token",
            ),
            (
                "no type",
                mint(&claims(), None, "k1"),
                "not an access token",
            ),
            (
                "a key the issuer does not publish",
                mint(&claims(), Some("at+jwt"), "k2"),
                "does not publish",
            ),
            (
                "no mapped scope",
                mint(
                    &with(|c| c["scope"] = json!("openid profile")),
                    Some("at+jwt"),
                    "k1",
                ),
                "scope [\"mcp:read\", \"mcp:tools\"]",
            ),
            (
                "two agents",
                mint(
                    &with(|c| c["scope"] = json!("mcp:tools ops")),
                    Some("at+jwt"),
                    "k1",
                ),
                "several agents",
            ),
        ];
        for (what, token, why) in cases {
            let refused = check(&o, &token)
                .await
                .err()
                .unwrap_or_else(|| panic!("{what}: taken"));
            assert!(refused.contains(why), "{what}: {refused}");
        }
        // The signature covers the claims.
        let good = mint(&claims(), Some("at+jwt"), "k1");
        let (head, rest) = good.split_once('.').unwrap();
        let (_, sig) = rest.split_once('.').unwrap();
        let forged_claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(with(|c| c["sub"] = json!("root")).to_string());
        let refused = check(&o, &format!("{head}.{forged_claims}.{sig}"))
            .await
            .unwrap_err();
        assert!(refused.contains("signature"), "{refused}");
        // Unsigned, or signed with a shared secret: never.
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let body = b64(claims());
        for header in [
            json!({"alg": "none", "typ": "at+jwt", "kid": "k1"}),
            json!({"alg": "HS256", "typ": "at+jwt", "kid": "k1"}),
        ] {
            let token = format!("{}.{body}.c2ln", b64(header.clone()));
            let refused = check(&o, &token).await.unwrap_err();
            assert!(refused.starts_with("invalid"), "{header}: {refused}");
        }
        // A plain JWT only where the operator says its issuer marks none.
        check(&oauth(true), &mint(&claims(), Some("JWT"), "k1"))
            .await
            .unwrap();
    }
}

//! OAuth 2.1 access tokens for `/mcp`: Aether as the resource server of the MCP authorization
//! spec. A token is a JWT (RFC 9068) from the one configured issuer, signed by a key the
//! issuer publishes (its `jwks_uri`), minted for this server's resource URL (its `aud`; RFC
//! 8707), in date; its scopes choose the agent it acts as and what of that agent's tools it
//! reaches (`[auth.scopes]`). Nothing a token says is passed on: Aether never forwards it.

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

/// Keys are read again this often, so a key the issuer withdrew stops working.
const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// A token naming a key not yet seen makes Aether read the keys again, at most this often
/// (a stream of made-up key ids cannot make it hammer the issuer).
const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(1);

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
    read_at: Option<Instant>,
}

pub struct OAuth {
    issuer: String,
    resource: String,
    jwks_uri: Option<String>,
    leeway: u64,
    scopes: BTreeMap<String, aether_policy::config::ScopeGrant>,
    /// The scopes a client is told to ask for: those of one agent (`server.http_agent`'s, if
    /// it has any), since a token's scopes must name one agent.
    asked: Vec<String>,
    http: reqwest::Client,
    keys: tokio::sync::RwLock<Keys>,
    /// One reading of the keys at a time.
    reading: tokio::sync::Mutex<()>,
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
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers list scopes as an array under `scp` instead.
    #[serde(default)]
    scp: Option<Value>,
}

impl OAuth {
    /// `None` when `[auth]` names no issuer.
    pub fn from_config(auth: &AuthSection, http_agent: &str) -> Option<OAuth> {
        let (issuer, resource) = (auth.issuer.clone()?, auth.resource.clone()?);
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
            asked,
            issuer,
            resource,
            jwks_uri: auth.jwks_uri.clone(),
            leeway: auth.leeway_seconds,
            scopes: auth.scopes.clone(),
            http: aether_net::outbound(Duration::from_secs(10))
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client with Aether's outbound settings"),
            keys: Default::default(),
            reading: Default::default(),
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
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("the access token is not a JWT: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "the access token is signed with {:?}, which this server does not accept",
                header.alg
            )));
        }
        if let Some(typ) = &header.typ
            && !["at+jwt", "application/at+jwt", "jwt"]
                .iter()
                .any(|t| typ.eq_ignore_ascii_case(t))
        {
            return Err(Refusal::Invalid(format!(
                "a JWT of type {typ:?} is not an access token"
            )));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| Refusal::Invalid(explain(e.kind(), &self.resource)))?
            .claims;
        self.grant(claims)
    }

    /// The agent and reach of a token with these claims.
    fn grant(&self, claims: Claims) -> Result<Grant, Refusal> {
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
                return Err(Refusal::Invalid(format!(
                    "the access token's scopes name several agents ({}); a token acts as one",
                    agents.into_iter().collect::<Vec<_>>().join(", ")
                )));
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
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let found = |keys: &Keys| -> Option<DecodingKey> {
            let (key, key_alg) = match kid {
                Some(kid) => keys.by_id.get(kid)?,
                None if keys.unnamed.len() == 1 && keys.by_id.is_empty() => &keys.unnamed[0],
                None => return None,
            };
            key_alg.is_none_or(|a| a == alg).then(|| key.clone())
        };
        {
            let keys = self.keys.read().await;
            let fresh = keys.read_at.is_some_and(|t| t.elapsed() < KEYS_MAX_AGE);
            if fresh && let Some(key) = found(&keys) {
                return Ok(key);
            }
            let may_read = keys
                .read_at
                .is_none_or(|t| !fresh || t.elapsed() >= REFETCH_AT_MOST_EVERY);
            if !may_read {
                return Err(Refusal::Invalid(unknown_key(kid)));
            }
        }
        let _one = self.reading.lock().await;
        // Another request may have read them while this one waited.
        {
            let keys = self.keys.read().await;
            if keys
                .read_at
                .is_some_and(|t| t.elapsed() < REFETCH_AT_MOST_EVERY)
            {
                return found(&keys).ok_or_else(|| Refusal::Invalid(unknown_key(kid)));
            }
        }
        let read = self.read_keys().await.map_err(Refusal::Unavailable)?;
        let mut keys = self.keys.write().await;
        *keys = read;
        found(&keys).ok_or_else(|| Refusal::Invalid(unknown_key(kid)))
    }

    /// Reads the issuer's published keys.
    async fn read_keys(&self) -> Result<Keys, String> {
        let uri = match &self.jwks_uri {
            Some(uri) => uri.clone(),
            None => self.discover_jwks_uri().await?,
        };
        let set: JwkSet = serde_json::from_value(self.get_json(&uri).await?)
            .map_err(|e| format!("the issuer's key set at {uri} is not a JWK set: {e}"))?;
        let mut keys = Keys {
            read_at: Some(Instant::now()),
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
                        Some(uri) => Ok(uri.to_string()),
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
        let response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url} is larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url} is not JSON: {e}"))
    }
}

fn unknown_key(kid: Option<&str>) -> String {
    match kid {
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

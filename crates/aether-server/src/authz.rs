//! Aether as its own OAuth 2.1 authorization server (`[auth] builtin = true`), so one machine
//! or a small team needs no identity provider: a person consents by signing in with a console
//! account; clients are public (authorization code + PKCE, S256 only) and identify themselves
//! by a client ID metadata document (an https URL) or, when the operator turns it on, by
//! dynamic client registration (RFC 7591). Access tokens are short-lived JWTs (RFC 9068)
//! signed with an Ed25519 key derived from the vault key — every replica derives the same, so
//! any replica issues and checks them —, refresh tokens rotate on every use (one used twice
//! revokes its grant), and codes, grants and refresh tokens live in the store (by their
//! SHA-256), so any replica redeems, refreshes and revokes.
//!
//! The resource server side (checking these tokens on `/mcp`) is `oauth.rs`, given this
//! server's key ([`Authority::verifier`]) instead of an issuer's published keys, and asking
//! the store whether a token's grant was revoked.
//!
//! Routes: `/.well-known/oauth-authorization-server` (RFC 8414), `/oauth/authorize` (GET: the
//! consent page; POST: its form), `/oauth/token`, `/oauth/revoke` (RFC 7009),
//! `/oauth/register` (RFC 7591, when on), `/oauth/jwks`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::Pipeline;
use aether_pipeline::accounts::{self, AccountError};
use aether_policy::config::{AuthSection, ScopeGrant};
use aether_store::{OAuthClient, OAuthCode, OAuthGrant, Redeemed, Refreshed, Store};
use axum::extract::{Form, Query, State};
use axum::response::{Html, IntoResponse, Json, Redirect, Response};
use axum::{Extension, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use http::header::{CACHE_CONTROL, ORIGIN};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde::Deserialize;
use serde_json::{Value, json};

/// How long an authorization code may be redeemed.
const CODE_LIFETIME: Duration = Duration::from_secs(60);

/// The largest client ID metadata document read.
const MAX_CLIENT_DOCUMENT: usize = 64 << 10;

/// Redirect URIs a registered client may have, at most.
const MAX_REDIRECT_URIS: usize = 10;

/// The key tokens are signed with, and what checks them.
pub struct Verifier {
    pub kid: String,
    pub key: DecodingKey,
}

/// The authorization server.
pub struct Authority {
    issuer: String,
    resource: String,
    scopes: BTreeMap<String, ScopeGrant>,
    registration: bool,
    access_ttl: Duration,
    refresh_ttl: Duration,
    kid: String,
    signing: EncodingKey,
    /// The public key, as a JWK (`/oauth/jwks`).
    jwk: Value,
    verifying: [u8; 32],
    /// Client ID metadata documents may be read from loopback and private addresses (Aether
    /// itself serves only this computer).
    private_ok: bool,
    store: Store,
    /// Client ID metadata documents read lately, by URL (kept 5 minutes): a flood of
    /// authorization requests does not make Aether fetch one document again and again.
    documents:
        std::sync::Mutex<std::collections::HashMap<String, (OAuthClient, std::time::Instant)>>,
}

/// How long a client ID metadata document is kept.
const DOCUMENT_KEPT: Duration = Duration::from_secs(300);

/// Documents kept at most (past it, all are forgotten).
const MAX_DOCUMENTS: usize = 1_000;

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The issuer of Aether's own authorization server: its resource URL's origin.
pub fn issuer_of(resource: &str) -> Option<String> {
    url::Url::parse(resource)
        .ok()
        .map(|u| u.origin().ascii_serialization())
}

impl Authority {
    /// `None` unless `[auth] builtin`. The store must hold the vault key (the signing key is
    /// derived from it).
    pub fn from_config(auth: &AuthSection, store: &Store) -> Result<Option<Authority>, String> {
        if !auth.builtin {
            return Ok(None);
        }
        let resource = auth
            .resource
            .clone()
            .ok_or("[auth] builtin needs auth.resource, this server's /mcp URL")?;
        let issuer = issuer_of(&resource).ok_or("auth.resource is not a URL")?;
        let audit = store.audit_key().ok_or(
            "[auth] builtin signs its tokens with a key derived from the vault key, which this store was opened without",
        )?;
        let seed: [u8; 32] = audit
            .purpose_key("oauth access token signing key v1")
            .try_into()
            .map_err(|_| "the derived signing key has the wrong length")?;
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        let der = {
            use ed25519_dalek::pkcs8::EncodePrivateKey;
            key.to_pkcs8_der()
                .map_err(|e| format!("cannot encode the signing key: {e}"))?
        };
        let verifying = key.verifying_key().to_bytes();
        let kid = aether_policy::sha256(&verifying).to_hex()[..16].to_string();
        let x = URL_SAFE_NO_PAD.encode(verifying);
        let host = url::Url::parse(&resource).ok();
        let private_ok = host
            .as_ref()
            .is_some_and(aether_policy::config::is_loopback_url);
        Ok(Some(Authority {
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"}),
            signing: EncodingKey::from_ed_der(der.as_bytes()),
            verifying,
            kid,
            issuer,
            resource,
            scopes: auth.scopes.clone(),
            registration: auth.registration,
            access_ttl: Duration::from_secs(auth.access_token_seconds),
            refresh_ttl: Duration::from_secs(auth.refresh_token_days * 86_400),
            private_ok,
            store: store.clone(),
            documents: Default::default(),
        }))
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// What the resource server checks this server's tokens with.
    pub fn verifier(&self) -> Verifier {
        Verifier {
            kid: self.kid.clone(),
            key: DecodingKey::from_ed_der(&self.verifying),
        }
    }

    /// RFC 8414 metadata.
    pub fn metadata(&self) -> Value {
        let at = |path: &str| format!("{}{path}", self.issuer);
        let mut meta = json!({
            "issuer": self.issuer,
            "authorization_endpoint": at("/oauth/authorize"),
            "token_endpoint": at("/oauth/token"),
            "revocation_endpoint": at("/oauth/revoke"),
            "jwks_uri": at("/oauth/jwks"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": self.scopes.keys().collect::<Vec<_>>(),
            "client_id_metadata_document_supported": true,
            "authorization_response_iss_parameter_supported": true,
        });
        if self.registration {
            meta["registration_endpoint"] = json!(at("/oauth/register"));
        }
        meta
    }

    /// A signed access token for `grant`.
    fn access_token(&self, grant: &OAuthGrant) -> Result<String, String> {
        let now = aether_store::now_us() / 1_000_000;
        let mut jti = [0u8; 16];
        getrandom::fill(&mut jti).map_err(|e| e.to_string())?;
        let claims = json!({
            "iss": self.issuer,
            "aud": grant.resource,
            "sub": grant.account,
            "client_id": grant.client_id,
            "scope": grant.scope,
            "iat": now,
            "nbf": now,
            "exp": now + self.access_ttl.as_secs() as i64,
            "jti": URL_SAFE_NO_PAD.encode(jti),
            "gid": grant.grant_id,
        });
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some("at+jwt".into());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.signing).map_err(|e| e.to_string())
    }

    /// The grant id of an access token this server signed (its signature checked; expired or
    /// not), for revocation.
    fn grant_of_access_token(&self, token: &str) -> Option<String> {
        let mut validation = jsonwebtoken::Validation::new(Algorithm::EdDSA);
        validation.validate_exp = false;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["iss", "aud"]);
        let data = jsonwebtoken::decode::<Value>(
            token,
            &DecodingKey::from_ed_der(&self.verifying),
            &validation,
        )
        .ok()?;
        data.claims
            .get("gid")
            .and_then(Value::as_str)
            .map(String::from)
    }

    /// The scopes asked for, checked: each one configured, naming one agent together. None
    /// asked: every scope of the first agent that has some.
    fn scopes_asked(&self, asked: Option<&str>) -> Result<Vec<String>, String> {
        let asked: BTreeSet<String> = asked
            .unwrap_or("")
            .split_whitespace()
            // `offline_access` and OpenID's scopes are clients' habits; refresh tokens are
            // issued anyway, and there is no ID token.
            .filter(|s| !matches!(*s, "offline_access" | "openid" | "profile" | "email"))
            .map(String::from)
            .collect();
        if asked.is_empty() {
            let Some(agent) = self.scopes.values().next().map(|g| g.agent.clone()) else {
                return Err("this server grants no scopes ([auth.scopes] is empty)".into());
            };
            return Ok(self
                .scopes
                .iter()
                .filter(|(_, g)| g.agent == agent)
                .map(|(s, _)| s.clone())
                .collect());
        }
        if let Some(unknown) = asked.iter().find(|s| !self.scopes.contains_key(*s)) {
            return Err(format!("this server grants no scope {unknown:?}"));
        }
        let agents: BTreeSet<&str> = asked
            .iter()
            .filter_map(|s| self.scopes.get(s))
            .map(|g| g.agent.as_str())
            .collect();
        if agents.len() > 1 {
            return Err(format!(
                "the scopes asked for name several agents ({}); a token acts as one",
                agents.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(asked.into_iter().collect())
    }

    /// The client `client_id` names: a registered one, or the metadata document at its URL.
    async fn client(&self, client_id: &str) -> Result<OAuthClient, String> {
        if client_id.starts_with("https://") || client_id.starts_with("http://") {
            if let Some((client, at)) = self
                .documents
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(client_id)
                && at.elapsed() < DOCUMENT_KEPT
            {
                return Ok(client.clone());
            }
            let client = self.client_document(client_id).await?;
            let mut kept = self.documents.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() >= MAX_DOCUMENTS {
                kept.clear();
            }
            kept.insert(
                client_id.to_string(),
                (client.clone(), std::time::Instant::now()),
            );
            return Ok(client);
        }
        match self.store.oauth_client(client_id.to_string()).await {
            Ok(Some(client)) => Ok(client),
            Ok(None) => Err(format!(
                "no client is registered as {:?}",
                client_id.chars().take(64).collect::<String>()
            )),
            Err(e) => Err(format!("the store cannot be read: {e}")),
        }
    }

    /// A client ID metadata document: fetched from its URL (https; http and private addresses
    /// only when Aether itself serves only this computer), through the same egress checks as
    /// an agent's fetch (resolved once, every address vetted, no redirects), and naming itself.
    async fn client_document(&self, client_id: &str) -> Result<OAuthClient, String> {
        let url = url::Url::parse(client_id).map_err(|e| format!("client_id: {e}"))?;
        let loopback = aether_policy::config::is_loopback_url(&url);
        if url.scheme() != "https" && !(self.private_ok && loopback) {
            return Err("a client ID metadata document must be at an https URL".into());
        }
        if url.path() == "/" || url.fragment().is_some() || !url.username().is_empty() {
            return Err(
                "a client ID metadata document's URL needs a path, and no fragment or credentials"
                    .into(),
            );
        }
        let host = url.host_str().unwrap_or_default().to_string();
        let policy = aether_policy::egress::EgressPolicy {
            domains: aether_policy::egress::DomainAllowlist::new(&[host])
                .map_err(|e| format!("client_id: {e}"))?,
            allow_private: self.private_ok,
        };
        let resolver: Arc<dyn aether_net::Resolve> = Arc::new(aether_net::SystemResolver);
        let response = aether_net::fetch(
            &resolver,
            &policy,
            &aether_tools::AnyDestination,
            aether_net::Request {
                method: http::Method::GET,
                url: client_id.to_string(),
                headers: vec![("accept".into(), "application/json".into())],
                body: None,
                timeout: Duration::from_secs(5),
                max_body: MAX_CLIENT_DOCUMENT,
            },
        )
        .await
        .map_err(|e| format!("the client's metadata document cannot be read: {e}"))?;
        if response.status != 200 || response.truncated || !response.redirects.is_empty() {
            return Err(format!(
                "the client's metadata document answered {}{}",
                response.status,
                if response.redirects.is_empty() {
                    ""
                } else {
                    " after a redirect"
                }
            ));
        }
        let doc: Value = serde_json::from_slice(&response.body)
            .map_err(|e| format!("the client's metadata document is not JSON: {e}"))?;
        if doc.get("client_id").and_then(Value::as_str) != Some(client_id) {
            return Err("the client's metadata document names another client_id".into());
        }
        let redirect_uris = string_list(&doc, "redirect_uris")?;
        check_redirect_uris(&redirect_uris)?;
        if let Some(method) = doc
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str)
            && method != "none"
        {
            return Err(format!(
                "this server takes public clients only (token_endpoint_auth_method \"none\"), not {method:?}"
            ));
        }
        Ok(OAuthClient {
            client_id: client_id.to_string(),
            name: doc
                .get("client_name")
                .and_then(Value::as_str)
                .unwrap_or(client_id)
                .chars()
                .take(100)
                .collect(),
            redirect_uris,
            created_us: aether_store::now_us(),
        })
    }
}

fn string_list(doc: &Value, field: &str) -> Result<Vec<String>, String> {
    doc.get(field)
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .map(|v| v.as_str().map(String::from))
                .collect::<Option<Vec<_>>>()
        })
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("{field} must be a list of strings"))
}

/// Redirect URIs a client may have: absolute, no fragment; https, http on loopback (a native
/// app's local listener, RFC 8252), or a private-use scheme (`com.example.app:/callback`).
fn check_redirect_uris(uris: &[String]) -> Result<(), String> {
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(format!("at most {MAX_REDIRECT_URIS} redirect_uris"));
    }
    for uri in uris {
        let u = url::Url::parse(uri).map_err(|e| format!("redirect_uri {uri:?}: {e}"))?;
        let ok = match u.scheme() {
            "https" => true,
            "http" => aether_policy::config::is_loopback_url(&u),
            "javascript" | "data" | "file" | "vbscript" | "blob" | "about" | "ws" | "wss" => false,
            scheme => scheme.contains('.'),
        };
        if !ok || u.fragment().is_some() {
            return Err(format!(
                "redirect_uri {uri:?} must be https, http on loopback, or a private-use scheme, without a fragment"
            ));
        }
    }
    Ok(())
}

/// The routes, for the HTTP router.
pub fn routes(authority: Arc<Authority>) -> Router<Arc<Pipeline>> {
    use axum::routing::{get, post};
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(|Extension(a): Extension<Arc<Authority>>| async move { Json(a.metadata()) }),
        )
        .route(
            "/oauth/jwks",
            get(|Extension(a): Extension<Arc<Authority>>| async move {
                Json(json!({"keys": [a.jwk.clone()]}))
            }),
        )
        .route("/oauth/authorize", get(authorize_page).post(authorize_form))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
        .route("/oauth/register", post(register))
        .layer(Extension(authority))
}

/// An authorization request's parameters (query or form).
#[derive(Clone, Debug, Default, Deserialize)]
struct AuthorizeParams {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    scope: Option<String>,
    state: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    resource: Option<String>,
    // The consent form's own fields.
    name: Option<String>,
    password: Option<String>,
    decision: Option<String>,
}

/// An authorization request that names a known client and one of its redirect URIs.
struct Checked {
    client: OAuthClient,
    redirect_uri: String,
    state: Option<String>,
}

/// Why an authorization request goes no further: said on a page, never by a redirect. The
/// clients here are anyone's (a metadata document anyone can host, a registration anyone can
/// make), so a redirect before the person has acted would make this server an open redirect
/// to whatever URI such a client lists (RFC 9700 §4.11.2). Only the person's own decision
/// (allow, deny) sends them back.
enum Stop {
    /// The error code (RFC 6749 §4.1.2.1's) and what is wrong.
    Page(StatusCode, &'static str, String),
}

impl Authority {
    /// Checks an authorization request; on success, the scopes granted.
    async fn check(&self, p: &AuthorizeParams) -> Result<(Checked, Vec<String>, String), Stop> {
        let client_id = p.client_id.as_deref().ok_or_else(|| {
            Stop::Page(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "client_id is missing".into(),
            )
        })?;
        let client = self
            .client(client_id)
            .await
            .map_err(|why| Stop::Page(StatusCode::BAD_REQUEST, "invalid_client", why))?;
        let redirect_uri = match &p.redirect_uri {
            Some(uri) if client.redirect_uris.contains(uri) => uri.clone(),
            Some(_) => {
                return Err(Stop::Page(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "redirect_uri is not one the client registered".into(),
                ));
            }
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return Err(Stop::Page(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "redirect_uri is missing".into(),
                ));
            }
        };
        let checked = Checked {
            client,
            redirect_uri,
            state: p.state.clone(),
        };
        if p.response_type.as_deref() != Some("code") {
            return Err(Stop::Page(
                StatusCode::BAD_REQUEST,
                "unsupported_response_type",
                "response_type must be \"code\"".into(),
            ));
        }
        match (&p.code_challenge, p.code_challenge_method.as_deref()) {
            (Some(c), Some("S256")) if c.len() == 43 => {}
            _ => {
                return Err(Stop::Page(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "PKCE is required: code_challenge (43 characters) with code_challenge_method S256".into(),
                ));
            }
        }
        let resource = match &p.resource {
            Some(r) if r.trim_end_matches('/') == self.resource.trim_end_matches('/') => {
                self.resource.clone()
            }
            Some(_) => {
                return Err(Stop::Page(
                    StatusCode::BAD_REQUEST,
                    "invalid_target",
                    format!("this server issues tokens for {} only", self.resource),
                ));
            }
            None => self.resource.clone(),
        };
        let scopes = match self.scopes_asked(p.scope.as_deref()) {
            Ok(s) => s,
            Err(why) => {
                return Err(Stop::Page(StatusCode::BAD_REQUEST, "invalid_scope", why));
            }
        };
        Ok((checked, scopes, resource))
    }

    fn stopped(&self, stop: Stop) -> Response {
        let Stop::Page(status, error, why) = stop;
        page(
            status,
            "Cannot authorize",
            &format!(
                "<p>{}</p><p>(<code>{error}</code>; nothing was sent back to the client)</p>",
                esc(&why)
            ),
        )
    }

    /// A redirect to the client with `params`, its state and this issuer (RFC 9207).
    fn back(&self, checked: &Checked, params: &[(&str, &str)]) -> Response {
        let mut url = match url::Url::parse(&checked.redirect_uri) {
            Ok(u) => u,
            Err(_) => {
                return page(
                    StatusCode::BAD_REQUEST,
                    "Cannot authorize",
                    "<p>bad redirect_uri</p>",
                );
            }
        };
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            if let Some(state) = &checked.state {
                q.append_pair("state", state);
            }
            q.append_pair("iss", &self.issuer);
        }
        let mut response = Redirect::to(url.as_str()).into_response();
        response
            .headers_mut()
            .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
        response
    }

    /// The consent page: who asks, for what, and a sign-in to allow or deny it.
    fn consent(
        &self,
        p: &AuthorizeParams,
        checked: &Checked,
        scopes: &[String],
        problem: Option<&str>,
    ) -> Response {
        let grants: String = scopes
            .iter()
            .filter_map(|s| self.scopes.get(s).map(|g| (s, g)))
            .map(|(s, g)| {
                let reach = match (&g.tools, &g.mcp_servers) {
                    (Some(tools), _) => format!("the tools {}", tools.join(", ")),
                    (None, Some(groups)) => format!("the groups {}", groups.join(", ")),
                    (None, None) => "everything the agent reaches".into(),
                };
                format!(
                    "<li><code>{}</code>: act as agent <b>{}</b>, with {}</li>",
                    esc(s),
                    esc(&g.agent),
                    esc(&reach)
                )
            })
            .collect();
        let hidden: String = [
            ("response_type", &p.response_type),
            ("client_id", &p.client_id),
            ("redirect_uri", &Some(checked.redirect_uri.clone())),
            ("scope", &Some(scopes.join(" "))),
            ("state", &p.state),
            ("code_challenge", &p.code_challenge),
            ("code_challenge_method", &p.code_challenge_method),
            ("resource", &p.resource),
        ]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .map(|(k, v)| format!(r#"<input type="hidden" name="{k}" value="{}">"#, esc(v)))
        .collect();
        let redirect_host = url::Url::parse(&checked.redirect_uri)
            .ok()
            .and_then(|u| u.host_str().map(String::from))
            .unwrap_or_default();
        let problem = problem
            .map(|p| format!(r#"<p class="problem" role="alert">{}</p>"#, esc(p)))
            .unwrap_or_default();
        let body = format!(
            r#"<p><b>{name}</b> (<code>{id}</code>) asks to use Aether for you:</p>
<ul>{grants}</ul>
<p>It will be sent back to <code>{redirect_host}</code>. Every call it makes is audited as yours.</p>
{problem}
<form method="post" action="/oauth/authorize">{hidden}
<label>Account <input name="name" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button name="decision" value="allow">Allow</button>
<button name="decision" value="deny" formnovalidate>Deny</button>
</form>"#,
            name = esc(&checked.client.name),
            id = esc(&checked.client.client_id),
            redirect_host = esc(&redirect_host),
        );
        page(
            if problem.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::UNAUTHORIZED
            },
            "Allow access to Aether?",
            &body,
        )
    }
}

async fn authorize_page(
    Extension(a): Extension<Arc<Authority>>,
    Query(p): Query<AuthorizeParams>,
) -> Response {
    match a.check(&p).await {
        Ok((checked, scopes, _)) => a.consent(&p, &checked, &scopes, None),
        Err(stop) => a.stopped(stop),
    }
}

async fn authorize_form(
    State(pipeline): State<Arc<Pipeline>>,
    Extension(a): Extension<Arc<Authority>>,
    Extension(limiter): Extension<crate::console::Limiter>,
    info: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    headers: http::HeaderMap,
    Form(p): Form<AuthorizeParams>,
) -> Response {
    // The form is this server's own page: a post from anywhere else (the gate refuses other
    // Origins; here, a missing one) is not a person's decision.
    if headers.get(ORIGIN).is_none() {
        return page(
            StatusCode::FORBIDDEN,
            "Cannot authorize",
            "<p>a consent must come from this server's own page</p>",
        );
    }
    let (checked, scopes, resource) = match a.check(&p).await {
        Ok(ok) => ok,
        Err(stop) => return a.stopped(stop),
    };
    if p.decision.as_deref() != Some("allow") {
        return a.back(
            &checked,
            &[
                ("error", "access_denied"),
                ("error_description", "the person denied the request"),
            ],
        );
    }
    let (name, password) = (
        p.name.clone().unwrap_or_default(),
        p.password.clone().unwrap_or_default(),
    );
    let client = crate::console::client_of(info);
    let account = match accounts::check_credentials(
        pipeline.store(),
        &limiter.0,
        &client,
        &name,
        &password,
    )
    .await
    {
        Ok(account)
            if aether_policy::roles::role(&account.role)
                .is_some_and(|r| r.grants(aether_policy::roles::Permission::ManageAgents)) =>
        {
            account
        }
        // Consenting gives a client an agent's tools: what minting an agent's token needs.
        Ok(account) => {
            return a.consent(
                    &p,
                    &checked,
                    &scopes,
                    Some(&format!(
                        "The account {} ({}) may not let a client act as an agent: that needs the manage_agents permission (operator or admin).",
                        account.name, account.role
                    )),
                );
        }
        Err(AccountError::WrongCredentials) => {
            return a.consent(
                &p,
                &checked,
                &scopes,
                Some("Wrong account name or password."),
            );
        }
        Err(AccountError::RateLimited(wait)) => {
            return a.consent(
                &p,
                &checked,
                &scopes,
                Some(&format!(
                    "Too many attempts; try again in {} s.",
                    wait.as_secs() + 1
                )),
            );
        }
        Err(e) => {
            return page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Cannot authorize",
                &esc(&e.to_string()),
            );
        }
    };
    let code = match random() {
        Ok(c) => c,
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot authorize",
                &esc(&e),
            );
        }
    };
    let stored = a
        .store
        .oauth_put_code(
            digest(&code),
            OAuthCode {
                client_id: checked.client.client_id.clone(),
                redirect_uri: checked.redirect_uri.clone(),
                account: account.name,
                scope: scopes.join(" "),
                resource,
                challenge: p.code_challenge.clone().unwrap_or_default(),
                expires_us: aether_store::now_us() + CODE_LIFETIME.as_micros() as i64,
            },
        )
        .await;
    if let Err(e) = stored {
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Cannot authorize",
            &esc(&e.to_string()),
        );
    }
    a.back(&checked, &[("code", &code)])
}

/// A token or revocation request's parameters.
#[derive(Debug, Default, Deserialize)]
struct TokenParams {
    grant_type: Option<String>,
    code: Option<String>,
    redirect_uri: Option<String>,
    client_id: Option<String>,
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    resource: Option<String>,
    scope: Option<String>,
    token: Option<String>,
    #[allow(dead_code)]
    token_type_hint: Option<String>,
}

/// An OAuth error answer (RFC 6749 §5.2).
fn oauth_error(status: StatusCode, error: &str, why: &str) -> Response {
    let mut response = (
        status,
        Json(json!({"error": error, "error_description": why})),
    )
        .into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

fn invalid_grant(why: &str) -> Response {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", why)
}

async fn token(Extension(a): Extension<Arc<Authority>>, Form(p): Form<TokenParams>) -> Response {
    match p.grant_type.as_deref() {
        Some("authorization_code") => redeem(&a, p).await,
        Some("refresh_token") => refresh(&a, p).await,
        Some(other) => oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            &format!(
                "grant_type {:?}: this server takes authorization_code and refresh_token",
                other.chars().take(64).collect::<String>()
            ),
        ),
        None => oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "grant_type is missing",
        ),
    }
}

/// The token answer for `grant`, with a new refresh token.
fn issued(a: &Authority, grant: &OAuthGrant, refresh: &str) -> Response {
    match a.access_token(grant) {
        Ok(access) => {
            let mut response = Json(json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": a.access_ttl.as_secs(),
                "refresh_token": refresh,
                "scope": grant.scope,
            }))
            .into_response();
            response
                .headers_mut()
                .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            response
        }
        Err(e) => oauth_error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", &e),
    }
}

async fn redeem(a: &Authority, p: TokenParams) -> Response {
    let (Some(code), Some(client_id), Some(verifier)) = (&p.code, &p.client_id, &p.code_verifier)
    else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "code, client_id and code_verifier are required",
        );
    };
    let (Ok(grant_id), Ok(refresh)) = (random_id(), random()) else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no randomness",
        );
    };
    let now = aether_store::now_us();
    let redeemed = a
        .store
        .oauth_redeem_code(
            digest(code),
            grant_id.clone(),
            now + a.refresh_ttl.as_micros() as i64,
            digest(&refresh),
        )
        .await;
    let code_row = match redeemed {
        Ok(Redeemed::Started(row)) => row,
        Ok(Redeemed::Unknown) => return invalid_grant("the code is unknown"),
        Ok(Redeemed::Reused) => {
            return invalid_grant("the code was already used; the grant it started is revoked");
        }
        Err(e) => {
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                &e.to_string(),
            );
        }
    };
    // Checked after the code is used up: a wrong guess spends it, and its grant is ended.
    let challenge = URL_SAFE_NO_PAD.encode(aether_policy::sha256(verifier.as_bytes()).0);
    let why = if code_row.expires_us < now {
        Some("the code has expired")
    } else if code_row.client_id != *client_id {
        Some("the code was issued to another client")
    } else if p
        .redirect_uri
        .as_ref()
        .is_some_and(|r| *r != code_row.redirect_uri)
    {
        Some("redirect_uri is not the one the code was sent to")
    } else if !(43..=128).contains(&verifier.len()) || challenge != code_row.challenge {
        Some("code_verifier does not match the code_challenge")
    } else if p
        .resource
        .as_ref()
        .is_some_and(|r| r.trim_end_matches('/') != code_row.resource.trim_end_matches('/'))
    {
        Some("resource is not the one the code was issued for")
    } else {
        None
    };
    if let Some(why) = why {
        let _ = a.store.oauth_revoke_grant(grant_id).await;
        return invalid_grant(why);
    }
    // The grant as stored: the code's account, scope and resource.
    match a.store.oauth_live_grant(grant_id).await {
        Ok(Some(stored)) => issued(a, &stored, &refresh),
        Ok(None) => invalid_grant("the grant was revoked"),
        Err(e) => oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            &e.to_string(),
        ),
    }
}

async fn refresh(a: &Authority, p: TokenParams) -> Response {
    let (Some(token), Some(client_id)) = (&p.refresh_token, &p.client_id) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "refresh_token and client_id are required",
        );
    };
    let Ok(next) = random() else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no randomness",
        );
    };
    let expires = aether_store::now_us() + a.refresh_ttl.as_micros() as i64;
    match a
        .store
        .oauth_refresh(digest(token), digest(&next), expires)
        .await
    {
        Ok(Refreshed::Rotated(grant)) => {
            if grant.client_id != *client_id {
                let _ = a.store.oauth_revoke_grant(grant.grant_id.clone()).await;
                return invalid_grant(
                    "the refresh token was issued to another client; its grant is revoked",
                );
            }
            // A narrower scope may be asked for; never a wider one.
            let mut grant = grant;
            if let Some(scope) = &p.scope {
                let had: BTreeSet<&str> = grant.scope.split_whitespace().collect();
                let asked: Vec<&str> = scope.split_whitespace().collect();
                if asked.iter().any(|s| !had.contains(s)) {
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_scope",
                        "a refresh cannot widen the scope",
                    );
                }
                grant.scope = asked.join(" ");
            }
            issued(a, &grant, &next)
        }
        Ok(Refreshed::Unknown) => invalid_grant("the refresh token is unknown"),
        Ok(Refreshed::Expired) => invalid_grant("the refresh token has expired"),
        Ok(Refreshed::Revoked) => invalid_grant("the grant was revoked"),
        Ok(Refreshed::Reused) => invalid_grant(
            "the refresh token was already used: someone else may hold it, so its grant is revoked",
        ),
        Err(e) => oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            &e.to_string(),
        ),
    }
}

/// RFC 7009: a refresh token or an access token of this server's ends its whole grant. The
/// answer is 200 whether the token was known or not.
async fn revoke(Extension(a): Extension<Arc<Authority>>, Form(p): Form<TokenParams>) -> Response {
    let Some(token) = p.token.as_deref().filter(|t| !t.is_empty()) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "token is missing",
        );
    };
    let outcome = match a.store.oauth_revoke_refresh(digest(token)).await {
        Ok(true) => Ok(()),
        Ok(false) => match a.grant_of_access_token(token) {
            Some(grant) => a.store.oauth_revoke_grant(grant).await,
            None => Ok(()),
        },
        Err(e) => Err(e),
    };
    match outcome {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            &e.to_string(),
        ),
    }
}

/// RFC 7591 dynamic client registration, when `[auth] registration = true`: public clients
/// only (no secret is issued).
async fn register(Extension(a): Extension<Arc<Authority>>, body: axum::body::Bytes) -> Response {
    if !a.registration {
        return oauth_error(
            StatusCode::FORBIDDEN,
            "access_denied",
            "dynamic client registration is off ([auth] registration = false): use a client ID metadata document",
        );
    }
    let doc: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client_metadata",
                "the body must be a JSON object",
            );
        }
    };
    let uris = match string_list(&doc, "redirect_uris")
        .and_then(|u| check_redirect_uris(&u).map(|()| u))
    {
        Ok(u) => u,
        Err(why) => return oauth_error(StatusCode::BAD_REQUEST, "invalid_redirect_uri", &why),
    };
    let name: String = doc
        .get("client_name")
        .and_then(Value::as_str)
        .unwrap_or("unnamed client")
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    let Ok(client_id) = random_id() else {
        return oauth_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no randomness",
        );
    };
    let client = OAuthClient {
        client_id,
        name,
        redirect_uris: uris,
        created_us: aether_store::now_us(),
    };
    if let Err(e) = a.store.oauth_register_client(client.clone()).await {
        return oauth_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            &e.to_string(),
        );
    }
    let mut response = (
        StatusCode::CREATED,
        Json(json!({
            "client_id": client.client_id,
            "client_id_issued_at": client.created_us / 1_000_000,
            "client_name": client.name,
            "redirect_uris": client.redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

/// 32 random bytes, base64url.
fn random() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// An id people read and type (a grant's, a registered client's): 128 random bits in lower-case
/// hex, so it never begins with "-" (a command line would take it for an option) and reads the
/// same in every font.
fn random_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the store keeps of a code or token.
fn digest(secret: &str) -> String {
    aether_policy::sha256(secret.as_bytes()).to_string()
}

/// Text for HTML.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page of this server's own: no script, framed by nobody, posting only here.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}}label{{display:block;margin:.5rem 0}}input{{display:block;width:100%;padding:.4rem}}button{{margin:1rem .5rem 0 0;padding:.5rem 1.2rem}}.problem{{color:#b00020}}@media (prefers-color-scheme:dark){{body{{background:#111;color:#eee}}}}</style></head>
<body><h1>{title}</h1>{body}</body></html>"#,
        title = esc(title),
    );
    let mut response = (status, Html(html)).into_response();
    let h = response.headers_mut();
    h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    h.insert(
        "content-security-policy",
        http::HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert("x-frame-options", http::HeaderValue::from_static("DENY"));
    h.insert(
        "referrer-policy",
        http::HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_loopback_http_or_a_private_use_scheme() {
        for good in [
            "https://app.example/cb",
            "http://127.0.0.1:33418/callback",
            "http://localhost/cb",
            "com.example.app:/oauth",
        ] {
            assert!(check_redirect_uris(&[good.into()]).is_ok(), "{good}");
        }
        for bad in [
            "http://app.example/cb",
            "javascript:alert(1)",
            "data:text/html,hi",
            "https://app.example/cb#frag",
            "file:///etc/passwd",
            "relative/cb",
        ] {
            assert!(check_redirect_uris(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}

//! Signing in to the console through the organization's OpenID provider (`[console.oidc]`),
//! beside the local accounts: authorization code with PKCE (S256) as a public client, the ID
//! token checked (signature by a key the provider publishes, issuer, audience, dates, nonce),
//! and the person's console role taken from a claim (`role_claim`, mapped by `roles`; a
//! person whose values map to no role is refused). The person becomes the account `sso.SUB`
//! (the provider's stable `sub`; its hash when it cannot be an account name), bound to that
//! issuer and subject, made at first sign-in, its role following the provider at every
//! sign-in; it has no password.
//!
//! What the login needs between leaving and coming back (state, nonce, PKCE verifier) rides in
//! a cookie signed with a key derived from the vault key (HS256, by jsonwebtoken), so the
//! provider may send the person back to any replica. The session ends as a password sign-in's
//! does; its page key reaches the page in the URL's fragment, which never leaves the browser.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aether_pipeline::Pipeline;
use aether_pipeline::accounts;
use aether_policy::config::ConsoleOidc;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Json, Redirect, Response};
use axum::{Extension, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use http::header::{CACHE_CONTROL, COOKIE, SET_COOKIE};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The cookie carrying a login in progress; over https `__Host-` prefixed (Secure, host-only,
/// `Path=/`), so no sibling site or plain-http attacker can plant one.
const PENDING: &str = "aether_oidc";
const PENDING_SECURE: &str = "__Host-aether_oidc";
/// How long a login may take at the provider.
const PENDING_FOR: Duration = Duration::from_secs(600);

/// The console's OpenID sign-in.
pub struct ConsoleSignIn {
    config: ConsoleOidc,
    /// Sign and check the pending-login cookie.
    sign: EncodingKey,
    check: DecodingKey,
    http: reqwest::Client,
}

impl std::fmt::Debug for ConsoleSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSignIn")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

/// A login between leaving for the provider and coming back.
#[derive(Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    exp: i64,
}

impl ConsoleSignIn {
    pub fn new(config: ConsoleOidc, store: &aether_store::Store) -> ConsoleSignIn {
        let key = match store.audit_key() {
            Some(key) => key.purpose_key("console oidc login v1"),
            None => {
                let mut key = vec![0u8; 32];
                getrandom::fill(&mut key).expect("the system gives random bytes");
                key
            }
        };
        ConsoleSignIn {
            config,
            sign: EncodingKey::from_secret(&key).expect("a 32-byte key signs"),
            check: DecodingKey::from_secret(&key).expect("a 32-byte key checks"),
            http: aether_net::outbound(Duration::from_secs(10))
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client with Aether's outbound settings"),
        }
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        crate::oauth::get_json(&self.http, url).await
    }

    /// The provider's discovery document, naming this issuer.
    async fn discovery(&self) -> Result<Value, String> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let meta = self.get_json(&url).await?;
        if meta.get("issuer").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
            return Err(format!("{url} names another issuer"));
        }
        Ok(meta)
    }
}

pub fn routes(sign_in: Arc<ConsoleSignIn>) -> Router<Arc<Pipeline>> {
    use axum::routing::get;
    Router::new()
        .route("/console/oidc", get(start))
        .route("/console/oidc/callback", get(callback))
        .layer(Extension(sign_in))
}

/// What the sign-in form offers besides a password (`GET /api/sign-in/methods`).
pub fn methods(sign_in: Option<&ConsoleSignIn>) -> Value {
    match sign_in {
        Some(s) => json!({"password": true, "oidc": {
            "name": s.config.name.clone().unwrap_or_else(|| "your identity provider".into()),
            "start": "/console/oidc",
        }}),
        None => json!({"password": true, "oidc": null}),
    }
}

fn random() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the system gives random bytes");
    URL_SAFE_NO_PAD.encode(bytes)
}

fn page(status: StatusCode, message: &str) -> Response {
    let text: String = message
        .chars()
        .map(|c| match c {
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '&' => "&amp;".to_string(),
            '"' => "&quot;".to_string(),
            c => c.to_string(),
        })
        .collect();
    let mut response = (
        status,
        Html(format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign-in failed</title></head>\
             <body><h1>Sign-in failed</h1><p>{text}</p><p><a href=\"/console\">Back to the console</a></p></body></html>"
        )),
    )
        .into_response();
    let h = response.headers_mut();
    h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    h.insert(
        "content-security-policy",
        http::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    response
}

impl ConsoleSignIn {
    /// Whether the console is reached over https (its callback is).
    fn secure(&self) -> bool {
        self.config.redirect_uri.starts_with("https://")
    }

    fn cookie_name(&self) -> &'static str {
        if self.secure() {
            PENDING_SECURE
        } else {
            PENDING
        }
    }

    fn cookie(&self, value: &str, max_age: Duration) -> http::HeaderValue {
        // Lax: the provider's redirect back is a top-level navigation from its site.
        let c = cookie::Cookie::build((self.cookie_name(), value.to_string()))
            .http_only(true)
            .secure(self.secure())
            .same_site(cookie::SameSite::Lax)
            .path(if self.secure() { "/" } else { "/console/oidc" })
            .max_age(cookie::time::Duration::seconds(max_age.as_secs() as i64))
            .build();
        http::HeaderValue::from_str(&c.to_string())
            .unwrap_or_else(|_| http::HeaderValue::from_static(""))
    }
}

/// Leaves for the provider.
async fn start(Extension(s): Extension<Arc<ConsoleSignIn>>) -> Response {
    let meta = match s.discovery().await {
        Ok(m) => m,
        Err(why) => {
            tracing::warn!(%why, "cannot read the console's identity provider");
            return page(
                StatusCode::BAD_GATEWAY,
                "the identity provider cannot be reached just now",
            );
        }
    };
    let Some(endpoint) = meta.get("authorization_endpoint").and_then(Value::as_str) else {
        return page(
            StatusCode::BAD_GATEWAY,
            "the identity provider names no authorization endpoint",
        );
    };
    let pending = Pending {
        state: random(),
        nonce: random(),
        verifier: random(),
        exp: aether_store::now_us() / 1_000_000 + PENDING_FOR.as_secs() as i64,
    };
    let challenge = URL_SAFE_NO_PAD.encode(aether_policy::sha256(pending.verifier.as_bytes()).0);
    let Ok(mut url) = url::Url::parse(endpoint) else {
        return page(
            StatusCode::BAD_GATEWAY,
            "the identity provider's authorization endpoint is not a URL",
        );
    };
    let mut scopes = vec!["openid".to_string()];
    scopes.extend(s.config.scopes.iter().cloned());
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &s.config.client_id)
        .append_pair("redirect_uri", &s.config.redirect_uri)
        .append_pair("scope", &scopes.join(" "))
        .append_pair("state", &pending.state)
        .append_pair("nonce", &pending.nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let Ok(sealed) = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &pending, &s.sign) else {
        return page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot start the sign-in",
        );
    };
    let mut response = Redirect::to(url.as_str()).into_response();
    response
        .headers_mut()
        .insert(SET_COOKIE, s.cookie(&sealed, PENDING_FOR));
    response
        .headers_mut()
        .insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

#[derive(Deserialize)]
struct Back {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct IdClaims {
    sub: String,
    #[serde(default)]
    nonce: Option<String>,
    #[serde(default)]
    preferred_username: Option<String>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// Comes back from the provider: the code redeemed, the ID token checked, the person's role
/// found, a console session started.
async fn callback(
    State(pipeline): State<Arc<Pipeline>>,
    Extension(s): Extension<Arc<ConsoleSignIn>>,
    headers: http::HeaderMap,
    Query(back): Query<Back>,
) -> Response {
    match signed_in(&pipeline, &s, &headers, back).await {
        Ok((session, name)) => {
            let mut response =
                Redirect::to(&format!("/console#signed-in={}", session.key)).into_response();
            let h = response.headers_mut();
            h.append(
                SET_COOKIE,
                crate::console::session_cookie_header(&session.cookie),
            );
            h.append(SET_COOKIE, s.cookie("", Duration::ZERO));
            h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            tracing::info!(account = %name, "signed in to the console through the identity provider");
            response
        }
        Err((status, why)) => {
            let mut response = page(status, &why);
            response
                .headers_mut()
                .append(SET_COOKIE, s.cookie("", Duration::ZERO));
            response
        }
    }
}

type Failure = (StatusCode, String);

async fn signed_in(
    pipeline: &Pipeline,
    s: &ConsoleSignIn,
    headers: &http::HeaderMap,
    back: Back,
) -> Result<(accounts::NewSession, String), Failure> {
    let bad = |why: &str| (StatusCode::BAD_REQUEST, why.to_string());
    let sealed = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == s.cookie_name())
        .map(|c| c.value().to_string())
        .ok_or_else(|| {
            bad("no sign-in was started from this browser (or it took over 10 minutes)")
        })?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_required_spec_claims(&["exp"]);
    let pending = jsonwebtoken::decode::<Pending>(&sealed, &s.check, &validation)
        .map_err(|_| bad("the sign-in in progress is not this server's, or has expired"))?
        .claims;
    // Only this browser's own login's answer is read, an error included (a link elsewhere
    // cannot put words on this page).
    if back.state.as_deref() != Some(pending.state.as_str()) {
        return Err(bad(
            "the sign-in's state does not match the one this browser started",
        ));
    }
    if let Some(error) = back.error {
        return Err((
            StatusCode::FORBIDDEN,
            format!(
                "the identity provider refused: {} {}",
                error.chars().take(64).collect::<String>(),
                back.error_description
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ),
        ));
    }
    let Some(code) = back.code else {
        return Err(bad("the identity provider sent no code"));
    };
    let unreachable = |why: String| {
        tracing::warn!(%why, "console sign-in through the identity provider failed");
        (
            StatusCode::BAD_GATEWAY,
            "the identity provider cannot be reached just now".to_string(),
        )
    };
    let meta = s.discovery().await.map_err(unreachable)?;
    let token_endpoint = meta
        .get("token_endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| unreachable("no token_endpoint".into()))?;
    let jwks_uri = meta
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| unreachable("no jwks_uri".into()))?;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", s.config.redirect_uri.as_str()),
        ("client_id", s.config.client_id.as_str()),
        ("code_verifier", pending.verifier.as_str()),
    ];
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = s
        .http
        .post(token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let tokens = crate::oauth::json_reply(token_endpoint, response)
        .await
        .map_err(|why| {
            tracing::warn!(%why, "the identity provider did not redeem the code");
            (
                StatusCode::FORBIDDEN,
                "the identity provider did not redeem the sign-in's code".to_string(),
            )
        })?;
    let id_token = tokens
        .get("id_token")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the identity provider sent no ID token"))?;
    let header =
        jsonwebtoken::decode_header(id_token).map_err(|_| bad("the ID token is not a JWT"))?;
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(bad(
            "the ID token must be signed with the provider's published key",
        ));
    }
    let set: JwkSet = serde_json::from_value(s.get_json(jwks_uri).await.map_err(unreachable)?)
        .map_err(|e| unreachable(format!("{jwks_uri}: {e}")))?;
    let jwk = match &header.kid {
        Some(kid) => set.find(kid),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    }
    .ok_or_else(|| bad("the ID token is signed by a key the provider does not publish"))?;
    let key = DecodingKey::from_jwk(jwk).map_err(|_| bad("the provider's key cannot be read"))?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&s.config.issuer]);
    validation.set_audience(&[&s.config.client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.leeway = 30;
    let claims = jsonwebtoken::decode::<IdClaims>(id_token, &key, &validation)
        .map_err(|e| {
            (
                StatusCode::FORBIDDEN,
                format!("the ID token is not valid: {e}"),
            )
        })?
        .claims;
    if claims.nonce.as_deref() != Some(pending.nonce.as_str()) {
        return Err(bad("the ID token's nonce is not this sign-in's"));
    }
    // The claim's values: a string, or a list of strings.
    let values: BTreeSet<String> = match claims.rest.get(&s.config.role_claim) {
        Some(Value::String(v)) => v.split_whitespace().map(String::from).collect(),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => BTreeSet::new(),
    };
    let role = values
        .iter()
        .filter_map(|v| s.config.roles.get(v))
        .filter_map(|r| aether_policy::roles::role(r))
        .max_by_key(|r| r.permissions.len())
        .ok_or_else(|| {
            (
                StatusCode::FORBIDDEN,
                format!(
                    "your identity provider gives you no role in Aether (its {:?} claim holds none of {})",
                    s.config.role_claim,
                    s.config.roles.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
    // The account is the provider's `sub` (unique and stable for this issuer), never a
    // name a person can choose there (`preferred_username` is neither, and could be made to
    // match someone else's); a `sub` that cannot be an account name is named by its hash.
    let _ = claims.preferred_username;
    let name = match format!("sso.{}", claims.sub) {
        n if aether_policy::is_plain_name(&n) => n,
        _ => format!(
            "sso.{}",
            &aether_policy::sha256(claims.sub.as_bytes()).to_hex()[..32]
        ),
    };
    let session = accounts::sign_in_external(
        pipeline.store(),
        &s.config.issuer,
        &claims.sub,
        &name,
        role.name,
    )
    .await
    .map_err(|e| (StatusCode::FORBIDDEN, e.to_string()))?;
    Ok((session, name))
}

/// `GET /api/sign-in/methods`.
pub async fn sign_in_methods(sign_in: Option<Extension<Arc<ConsoleSignIn>>>) -> Json<Value> {
    Json(methods(sign_in.as_ref().map(|Extension(s)| s.as_ref())))
}

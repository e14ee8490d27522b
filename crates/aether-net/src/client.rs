//! The one HTTP client every network tool uses, built around the egress gate.
//!
//! For each hop (the first request and each redirect, at most [`MAX_REDIRECTS`]): the URL is
//! parsed and checked against the agent's policy (scheme, credentials, domain allowlist); the
//! name is resolved once, through the [`Resolve`] seam; every address in the answer is vetted
//! (a private or loopback address anywhere in it refuses the hop, unless the agent may reach
//! private networks); and the connection goes to exactly the vetted address: the client is
//! told that address for that name, so it never looks the name up again, and it ignores proxy
//! settings from the environment. Redirects are never followed by the client itself.
//!
//! Bodies are read up to a cap and the rest is dropped; a request that takes too long is
//! abandoned with a clear error; TLS, connection and DNS failures are reported as what they
//! are. Cancellation is the pipeline's: it drops the call's future, which drops the request.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aether_policy::dlp::Scanner;
use aether_policy::egress::{
    Destination, EgressPolicy, EgressRefusal, Host, MAX_REDIRECTS, parse_destination,
    redirect_target,
};
use aether_tools_core::{DestinationCheck, ToolError};
use async_trait::async_trait;
use reqwest::Method;

/// Where names are looked up. The system resolver in production; tests inject answers here,
/// never by touching the machine's resolver.
#[async_trait]
pub trait Resolve: Send + Sync {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>>;
}

/// The machine's resolver (`getaddrinfo`, on the blocking pool).
#[derive(Debug, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((host, port)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// One request as a tool asks for it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// For the whole exchange, redirects included.
    pub timeout: Duration,
    /// Bytes of body kept; the rest is not read.
    pub max_body: usize,
}

#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    /// Where the answer came from (after redirects).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than the cap.
    pub truncated: bool,
    pub elapsed: Duration,
    /// Every URL redirected to, in order.
    pub redirects: Vec<String>,
}

impl Response {
    /// The answer's `Content-Type`, if it has one.
    pub fn content_type(&self) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.clone())
    }
}

/// Headers a caller may not set: they belong to the connection, or would let a request
/// pretend to be for another host than the one vetted.
pub(crate) const RESERVED_HEADERS: &[&str] = &[
    aether_policy::egress::EGRESS_MARK,
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "keep-alive",
];

/// Headers that may follow a redirect to another origin: they describe the request, not the
/// caller.
const SAFE_ACROSS_ORIGINS: &[&str] = &[
    "accept",
    "accept-language",
    "content-type",
    "content-language",
    "user-agent",
    "cache-control",
];

/// A URL as it is shown in results and errors: scheme, host, port and path, never the query
/// or the fragment (a server's redirect can put signatures or codes there).
pub(crate) fn shown(url: &url::Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

fn refused(r: EgressRefusal) -> ToolError {
    ToolError::denied(r.rule(), r)
}

/// Sends `request` under `policy`, following redirects hop by hop through the same checks;
/// `hops` judges each redirect by the operator's rules.
pub async fn fetch(
    resolver: &Arc<dyn Resolve>,
    policy: &EgressPolicy,
    hops: &dyn DestinationCheck,
    request: Request,
) -> Result<Response, ToolError> {
    for (name, _) in &request.headers {
        let lower = name.to_ascii_lowercase();
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            return Err(ToolError::InvalidArguments(format!(
                "the header {name:?} is set by Aether's client, not by the caller"
            )));
        }
    }
    let started = Instant::now();
    let deadline = started + request.timeout;
    let mut destination = parse_destination(&request.url).map_err(refused)?;
    let (mut method, mut body, mut headers) =
        (request.method, request.body, request.headers.clone());
    let mut redirects = Vec::new();
    loop {
        policy.check_destination(&destination).map_err(refused)?;
        // What leaves on this hop carries no credential, raw or encoded (the pipeline scanned
        // the arguments; a redirect can move them into a new URL).
        if let Some(finding) = Scanner::shared().scan_request(
            destination.url.as_str(),
            &headers,
            body.as_deref().unwrap_or_default(),
        ) {
            return Err(ToolError::denied(
                finding.rule,
                format!("the request carries {finding}; nothing was sent"),
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let address = tokio::time::timeout(left, vet(resolver, policy, &destination))
            .await
            .map_err(|_| timed_out(request.timeout))??;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(request.timeout));
        }
        let client = client_for(&destination, address, left)?;
        let mut builder = client.request(method.clone(), destination.url.clone());
        for (k, v) in &headers {
            builder = builder.header(k, v);
        }
        if let Some(b) = &body {
            builder = builder.body(b.clone());
        }
        let response = builder
            .send()
            .await
            .map_err(|e| transport_error(&destination, &e, request.timeout))?;
        let status = response.status();
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let follows = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
        if follows && let Some(location) = location {
            if redirects.len() >= MAX_REDIRECTS {
                return Err(refused(EgressRefusal::TooManyRedirects));
            }
            let next = redirect_target(&destination.url, &location).map_err(refused)?;
            if destination.https && !next.https {
                return Err(ToolError::denied(
                    "egress:downgrade",
                    format!(
                        "{} redirected from https to plain http ({}); the request stopped there",
                        shown(&destination.url),
                        shown(&next.url)
                    ),
                ));
            }
            let cross_origin = next.url.origin() != destination.url.origin();
            // 303, and 301/302 after a POST, continue as GET without the body (what browsers
            // do; HEAD stays HEAD); 307 and 308 repeat the request as it was, and never send
            // a body to another origin.
            if (status == reqwest::StatusCode::SEE_OTHER && method != Method::HEAD)
                || (matches!(status.as_u16(), 301 | 302) && method == Method::POST)
            {
                method = Method::GET;
                body = None;
            } else if cross_origin && body.is_some() {
                return Err(ToolError::denied(
                    "egress:redirect-body",
                    format!(
                        "{} asked for the request body to be sent again to another origin ({}); it was not",
                        shown(&destination.url),
                        shown(&next.url)
                    ),
                ));
            }
            // Nothing a caller set for one origin goes to another, but what describes the
            // request itself.
            if cross_origin {
                headers.retain(|(k, _)| {
                    SAFE_ACROSS_ORIGINS.contains(&k.to_ascii_lowercase().as_str())
                });
            }
            // The operator's rules on where this hop goes.
            hops.check(next.url.as_str(), &next.host.to_string())?;
            redirects.push(shown(&next.url));
            destination = next;
            continue;
        }
        let headers_out = response
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let (body, truncated) = read_capped(response, request.max_body, &destination).await?;
        return Ok(Response {
            status: status.as_u16(),
            url: shown(&destination.url),
            headers: headers_out,
            body,
            truncated,
            elapsed: started.elapsed(),
            redirects,
        });
    }
}

/// Resolves the destination's name once and vets every address; an IP literal is vetted as
/// it is.
async fn vet(
    resolver: &Arc<dyn Resolve>,
    policy: &EgressPolicy,
    d: &Destination,
) -> Result<IpAddr, ToolError> {
    let (name, addresses) = match &d.host {
        Host::Ip(ip) => (ip.to_string(), vec![*ip]),
        // `localhost` and its subdomains are this machine's loopback (RFC 6761), whatever a
        // resolver says (the system's has no `localhost.`): still vetted as loopback below.
        Host::Domain(name) if name == "localhost" || name.ends_with(".localhost") => (
            name.clone(),
            vec![
                IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ],
        ),
        Host::Domain(name) => {
            // Looked up as a fully qualified name: no search domain can turn an allowed name
            // that does not exist into an internal one.
            let found = resolver
                .resolve(&format!("{name}."), d.port)
                .await
                .map_err(|e| ToolError::failed(format!("cannot resolve {name}: {e}")))?;
            (name.clone(), found)
        }
    };
    policy.vet_addresses(&name, &addresses).map_err(refused)
}

/// Makes ring the process's TLS crypto (reqwest is built without a provider of its own);
/// certificates are checked against the system's trust store. [`outbound`] does it first.
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client for one hop: no proxy from the environment, no redirects of its own, and the
/// destination's name pinned to the vetted address.
fn client_for(
    d: &Destination,
    address: IpAddr,
    timeout: Duration,
) -> Result<reqwest::Client, ToolError> {
    let mut builder =
        outbound(timeout)
            .timeout(timeout)
            .default_headers(reqwest::header::HeaderMap::from_iter([(
                reqwest::header::HeaderName::from_static(aether_policy::egress::EGRESS_MARK),
                reqwest::header::HeaderValue::from_static("1"),
            )]));
    if let Host::Domain(name) = &d.host {
        builder = builder.resolve(name, SocketAddr::new(address, d.port));
    }
    builder
        .build()
        .map_err(|e| ToolError::failed(format!("cannot build the HTTP client: {e}")))
}

async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    d: &Destination,
) -> Result<(Vec<u8>, bool), ToolError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        if e.is_timeout() {
            ToolError::failed(format!(
                "the answer from {} did not arrive in time; the request was abandoned",
                shown(&d.url)
            ))
        } else {
            ToolError::failed(format!(
                "reading the answer from {} failed: {e}",
                shown(&d.url)
            ))
        }
    })? {
        let room = cap.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn timed_out(limit: Duration) -> ToolError {
    ToolError::failed(format!(
        "no complete answer within {} s; the request was abandoned",
        limit.as_secs()
    ))
}

fn transport_error(d: &Destination, e: &reqwest::Error, limit: Duration) -> ToolError {
    if e.is_timeout() {
        return timed_out(limit);
    }
    let what = if e.is_connect() {
        "could not connect to"
    } else {
        "the request failed for"
    };
    // The innermost cause says why (TLS certificate, refused connection, reset, ...); it
    // never holds the URL's query.
    let mut cause = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    ToolError::failed(format!("{what} {}: {cause}", shown(&d.url)))
}

/// Every HTTP client Aether connects out with starts here — the network tools' (per hop,
/// pinned to the vetted address), the upstreams' and the model connections': no proxy from
/// the environment (a proxy would see, and choose, where a call goes), no redirects of its own
/// (each hop is judged again by whoever follows it), TLS as the build configures it, a
/// connection time bounded by `within` (at most 10 s), Aether's user agent.
pub fn outbound(within: Duration) -> reqwest::ClientBuilder {
    install_tls();
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(within.min(Duration::from_secs(10)))
        .user_agent(concat!("aether/", env!("CARGO_PKG_VERSION")))
}

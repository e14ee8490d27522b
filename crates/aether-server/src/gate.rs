//! The gate in front of every HTTP handler: the exact `Host` this listener answers to, and,
//! when a request carries an `Origin`, this listener's own origin. A page on another site that
//! resolves its name to 127.0.0.1 (DNS rebinding) sends its own `Host` and `Origin`, and is
//! turned away here, before MCP or the admin API sees anything. So is whatever a browser
//! marks as sent for another site (`Sec-Fetch-Site: cross-site`, or `same-site` without this
//! listener's own `Origin`): a link, form or image on a sibling subdomain carries no `Origin`
//! to check. The exception is a person arriving: a top-level page load (`GET`,
//! `Sec-Fetch-Mode: navigate`) of one of [`ENTRY_PAGES`] — pages another site sends people
//! to (an MCP client to the consent page, an identity provider back to the console), which
//! change nothing by being loaded. Their `Host` is checked all the same.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HOST, ORIGIN};

#[derive(Clone, Debug)]
pub struct HostGate {
    hosts: Arc<Vec<String>>,
    origins: Arc<Vec<String>>,
}

impl HostGate {
    /// The hosts a listener on `addr` answers to: its own address, and the loopback names
    /// when it listens on loopback.
    pub fn for_addr(addr: SocketAddr) -> HostGate {
        let port = addr.port();
        let mut hosts = Vec::new();
        if !addr.ip().is_unspecified() {
            hosts.push(match addr {
                SocketAddr::V4(a) => format!("{}:{port}", a.ip()),
                SocketAddr::V6(a) => format!("[{}]:{port}", a.ip()),
            });
        }
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                let h = format!("{name}:{port}");
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        HostGate {
            hosts: Arc::new(hosts),
            origins: Arc::new(origins),
        }
    }

    /// Also accepts `hosts` (the names a load balancer is reached by) and their `https://`
    /// and `http://` origins.
    pub fn with_public_hosts(mut self, hosts: &[String]) -> HostGate {
        let (mut all, mut origins) = (self.hosts.to_vec(), self.origins.to_vec());
        for h in hosts {
            let h = h.trim().to_ascii_lowercase();
            if h.is_empty() || all.contains(&h) {
                continue;
            }
            origins.push(format!("https://{h}"));
            origins.push(format!("http://{h}"));
            all.push(h);
        }
        self.hosts = Arc::new(all);
        self.origins = Arc::new(origins);
        self
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Why a request with these headers is refused, if it is. `fetch_site`: the browser's
    /// `Sec-Fetch-Site` (absent from clients that are not browsers).
    pub fn refuse_fetch(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        fetch_site: Option<&str>,
    ) -> Option<String> {
        match fetch_site.map(str::to_ascii_lowercase).as_deref() {
            None | Some("same-origin") | Some("none") => {}
            // A sibling site's page: only with this server's own Origin (checked below).
            Some("same-site") if origin.is_some() => {}
            Some("same-site") => {
                return Some(
                    "the browser says another page of this site sent the request \
                     (Sec-Fetch-Site: same-site) without this server's Origin"
                        .into(),
                );
            }
            Some(other) => {
                return Some(format!(
                    "the browser says a page of another site sent the request (Sec-Fetch-Site: {})",
                    other.chars().take(32).collect::<String>()
                ));
            }
        }
        self.refuse(host, origin)
    }

    /// Why a request with these headers is refused, if it is.
    pub fn refuse(&self, host: Option<&str>, origin: Option<&str>) -> Option<String> {
        let Some(host) = host else {
            return Some("the request has no Host header".into());
        };
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Some(format!("Host {host:?} is not this server"));
        }
        match origin {
            Some(o)
                if !self
                    .origins
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(o)) =>
            {
                Some(format!("Origin {o:?} is not this server's"))
            }
            _ => None,
        }
    }
}

/// Pages another site may send a person to (a top-level `GET`): the console itself (a static
/// page), the built-in authorization server's consent page (its form is posted with this
/// server's `Origin`), and the identity provider's way back to the console (bound to the
/// browser that left by the login's state).
pub const ENTRY_PAGES: [&str; 3] = ["/console", "/oauth/authorize", "/console/oidc/callback"];

/// Whether the request is a person's browser loading one of [`ENTRY_PAGES`].
fn arriving(request: &Request) -> bool {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    request.method() == http::Method::GET
        && header("sec-fetch-mode").as_deref() == Some("navigate")
        && header("sec-fetch-dest").is_none_or(|d| d == "document")
        && ENTRY_PAGES.contains(&request.uri().path())
}

/// Axum middleware applying the gate.
pub async fn guard(State(gate): State<HostGate>, request: Request, next: Next) -> Response {
    let refusal = {
        let headers = request.headers();
        let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
        if headers.contains_key(aether_policy::egress::EGRESS_MARK) {
            Some(
                "the request was sent by Aether's own network tools; an agent may not call \
                 Aether through them"
                    .to_string(),
            )
        } else if headers.get_all(HOST).iter().count() > 1 {
            Some("the request carries more than one Host header".to_string())
        } else if headers.get_all(ORIGIN).iter().count() > 1 {
            Some("the request carries more than one Origin header".to_string())
        } else if headers.get_all("sec-fetch-site").iter().count() > 1 {
            Some("the request carries more than one Sec-Fetch-Site header".to_string())
        } else if let Some(target) = request.uri().authority()
            && header(HOST).is_none_or(|h| !h.eq_ignore_ascii_case(target.as_str()))
        {
            // An absolute-form target names the host that counts (RFC 9112 §3.2.2).
            Some(format!(
                "the request target names {target}, not this server"
            ))
        } else if arriving(&request) {
            gate.refuse(header(HOST), header(ORIGIN))
        } else {
            gate.refuse_fetch(
                header(HOST),
                header(ORIGIN),
                headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
            )
        }
    };
    if let Some(why) = refusal {
        tracing::warn!(%why, path = %request.uri().path(), "request refused at the gate");
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "error": {"code": -32000, "message": format!("Forbidden: {why}")},
            "id": null
        });
        return Response::builder()
            .status(StatusCode::FORBIDDEN)
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap_or_else(|_| StatusCode::FORBIDDEN.into_response());
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_listener_answers_to_its_names_only() {
        let gate = HostGate::for_addr("127.0.0.1:8484".parse().unwrap());
        assert_eq!(gate.refuse(Some("127.0.0.1:8484"), None), None);
        assert_eq!(
            gate.refuse(Some("LOCALHOST:8484"), Some("http://localhost:8484")),
            None
        );
        assert!(gate.refuse(Some("evil.example.com"), None).is_some());
        assert!(
            gate.refuse(Some("127.0.0.1:8485"), None).is_some(),
            "another port"
        );
        assert!(gate.refuse(Some("127.0.0.1"), None).is_some(), "no port");
        assert!(gate.refuse(None, None).is_some());
        assert!(
            gate.refuse(Some("127.0.0.1:8484"), Some("http://evil.example.com"))
                .is_some()
        );
        assert!(
            gate.refuse(Some("127.0.0.1:8484"), Some("https://127.0.0.1:8484"))
                .is_some(),
            "scheme"
        );
        assert!(gate.refuse(Some("127.0.0.1:8484"), Some("null")).is_some());
    }

    #[test]
    fn what_a_browser_marks_as_another_sites_is_refused() {
        let gate = HostGate::for_addr("127.0.0.1:8484".parse().unwrap());
        let host = Some("127.0.0.1:8484");
        let own = Some("http://127.0.0.1:8484");
        for (origin, site, refused) in [
            (None, None, false),
            (None, Some("none"), false),
            (None, Some("same-origin"), false),
            (own, Some("same-origin"), false),
            (own, Some("Same-Origin"), false),
            (own, Some("same-site"), false),
            (None, Some("same-site"), true),
            (Some("http://app.localhost:8484"), Some("same-site"), true),
            (None, Some("cross-site"), true),
            (own, Some("cross-site"), true),
            (Some("https://evil.example"), Some("cross-site"), true),
            (None, Some("CROSS-SITE"), true),
            (None, Some("something-new"), true),
            (None, Some(""), true),
        ] {
            assert_eq!(
                gate.refuse_fetch(host, origin, site).is_some(),
                refused,
                "{origin:?} {site:?}"
            );
        }
    }
}

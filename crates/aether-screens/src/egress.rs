//! The pure half of the egress gate: which URLs a network tool may fetch, and which addresses
//! it may connect to. This is Aether's defence against server-side request forgery (SSRF): an
//! agent talking a tool into reading `http://169.254.169.254/` (cloud credentials), a service
//! on loopback, or the operator's LAN.
//!
//! A network tool does this, in order, for the first request and again for every redirect hop
//! (at most [`MAX_REDIRECTS`], each found with [`redirect_target`]):
//!
//! 1. [`parse_destination`]: the URL, read by the WHATWG rules (the `url` crate) and
//!    normalised. Everything after this uses the [`Destination`], never the text again, so the
//!    gate and the connection cannot read one string two ways (`http://0x7f.1/` is 127.0.0.1
//!    here too).
//! 2. [`EgressPolicy::check_destination`]: the host against the domain allowlist. An IP
//!    literal must be listed by itself, and is then vetted as in step 4.
//! 3. The name is resolved once, by the caller (this crate does no IO and no DNS).
//! 4. [`EgressPolicy::vet_addresses`]: *every* address in the answer must be public (or
//!    opened by `allow_private`), so a DNS answer mixing a public and a private address — the
//!    rebinding trick — is refused as a whole. The caller connects to exactly the address
//!    returned, with no second lookup and no proxy, so the name cannot change its mind between
//!    the check and the connection.
//!
//! Credentials in the URL (`user:pass@`) are refused rather than stripped: they would land in
//! logs and the audit, and `http://example.com@evil.test/` is a trick that reaches `evil.test`.
//!
//! [`classify`] knows the special-purpose blocks of IPv4 and IPv6 (IANA registries, RFC 6890),
//! and reads the IPv4 address inside the IPv6 forms that carry one (mapped, compatible, NAT64,
//! 6to4, Teredo), so `[::ffff:127.0.0.1]` is loopback. IPv6 outside `2000::/3`, the only block
//! handed out for global unicast, is reserved.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Url;

use aether_vocab::decision::{Refusal, Step};

/// The redirect limit: a tool follows at most this many hops, each checked like the first
/// request, and refuses the next with [`EgressRefusal::TooManyRedirects`].
pub const MAX_REDIRECTS: usize = 5;

/// The address classes `allow_private` opens: services a team runs on its own machine, LAN or
/// tailnet (Tailscale lives in 100.64/10). Metadata, link-local (169.254/16 also holds cloud
/// credential endpoints such as ECS's 169.254.170.2) and the unroutable classes stay closed.
const OPENED_BY_ALLOW_PRIVATE: [&str; 5] =
    ["loopback", "private", "unique-local", "site-local", "cgnat"];

/// Why a destination is refused. The `Display` is a sentence for the model or person reading
/// it; it names the host and the address, never the URL as written, so credentials in a URL
/// are not echoed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EgressRefusal {
    /// Not `http` or `https`.
    Scheme { scheme: String },
    /// A user name or password before the host; `host` is where the URL would really go.
    CredentialsInUrl { host: String },
    /// The text is not a URL a tool can fetch; `problem` says why, without the text.
    MalformedUrl { problem: String },
    /// The host is not on the allowlist.
    DomainNotAllowed { host: String },
    /// The host is, or resolves to, an address that is not public unicast.
    PrivateAddress {
        host: String,
        address: IpAddr,
        /// What [`classify`] says the address is, e.g. `loopback`.
        kind: &'static str,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    TooManyRedirects,
    /// The name resolved to no address.
    NoAddress { host: String },
}

impl EgressRefusal {
    /// The stable id of the refusal, for the audit.
    pub fn rule(&self) -> &'static str {
        match self {
            EgressRefusal::Scheme { .. } => "egress:scheme",
            EgressRefusal::CredentialsInUrl { .. } => "egress:credentials-in-url",
            EgressRefusal::MalformedUrl { .. } => "egress:malformed-url",
            EgressRefusal::DomainNotAllowed { .. } => "egress:domain-not-allowed",
            EgressRefusal::PrivateAddress { .. } => "egress:private-address",
            EgressRefusal::TooManyRedirects => "egress:too-many-redirects",
            EgressRefusal::NoAddress { .. } => "egress:no-address",
        }
    }
}

impl fmt::Display for EgressRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EgressRefusal::Scheme { scheme } => write!(
                f,
                "only http and https URLs may be fetched, not `{scheme}:` URLs"
            ),
            EgressRefusal::CredentialsInUrl { host } => write!(
                f,
                "the URL carries a user name or password before `@` (it would reach {host}); \
                 credentials may not be put in a URL"
            ),
            EgressRefusal::MalformedUrl { problem } => {
                write!(f, "the URL cannot be fetched: {problem}")
            }
            EgressRefusal::DomainNotAllowed { host } => {
                write!(f, "{host} is not on the list of hosts this agent may reach")
            }
            EgressRefusal::PrivateAddress {
                host,
                address,
                kind,
            } => {
                if *host == address.to_string() {
                    write!(
                        f,
                        "{address} is a {kind} address; only public addresses may be reached"
                    )
                } else {
                    write!(
                        f,
                        "{host} resolves to {address}, a {kind} address; only public \
                         addresses may be reached"
                    )
                }
            }
            EgressRefusal::TooManyRedirects => write!(
                f,
                "the server redirected more than {MAX_REDIRECTS} times; the request was stopped"
            ),
            EgressRefusal::NoAddress { host } => {
                write!(f, "{host} did not resolve to any address")
            }
        }
    }
}

impl From<EgressRefusal> for Refusal {
    fn from(refusal: EgressRefusal) -> Refusal {
        Refusal::new(Step::Egress, refusal.rule(), refusal.to_string())
    }
}

/// A header Aether's own network client puts on every request it sends (callers cannot set or
/// remove it), and Aether's HTTP listener refuses every request that carries: an agent allowed
/// to reach this computer cannot call Aether's own endpoints (as another agent, or as the
/// token-less local caller) through `http_request`.
pub const EGRESS_MARK: &str = "x-aether-egress";

/// A host as the gate sees it: a normalised name (lower-case ASCII, IDNA applied, no trailing
/// dot) or an address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    Domain(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Domain(name) => f.write_str(name),
            Host::Ip(ip) => ip.fmt(f),
        }
    }
}

/// Where a request goes: the normalised URL and the parts of it the gate judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// Without user info or fragment, the host normalised as in `host`.
    pub url: Url,
    pub host: Host,
    /// The port given, or 80/443.
    pub port: u16,
    pub https: bool,
}

/// Parses and normalises a URL a tool was asked to fetch: only `http` and `https`; no user
/// info (`user:pass@` or `user@`), refused rather than stripped; a host is required; the host
/// lower-cased, IDNA-encoded and without its trailing dot; IP literals in any form the WHATWG
/// rules accept (`http://0x7f.1/`, `http://2130706433/`, `http://127.1/` are all 127.0.0.1),
/// but no IPv6 zone id; the port defaulted; the fragment dropped.
pub fn parse_destination(text: &str) -> Result<Destination, EgressRefusal> {
    let url = Url::parse(text).map_err(|e| malformed(text, e))?;
    destination(url)
}

/// Resolves a redirect's `Location` against the URL that answered with it (a relative path,
/// an absolute URL or a scheme-relative `//host/path`) and parses the result like
/// [`parse_destination`]. The caller checks it with [`EgressPolicy::check_destination`]
/// again: a redirect is a new request.
pub fn redirect_target(current: &Url, location: &str) -> Result<Destination, EgressRefusal> {
    let url = current.join(location).map_err(|e| malformed(location, e))?;
    destination(url)
}

/// What [`parse_destination`] and [`redirect_target`] share: a parsed URL, checked and
/// normalised.
fn destination(mut url: Url) -> Result<Destination, EgressRefusal> {
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        other => {
            return Err(EgressRefusal::Scheme {
                scheme: other.to_string(),
            });
        }
    };
    // http and https are "special" schemes: the parser has already lower-cased, IDNA-encoded
    // and percent-decoded the host, and read any IPv4 form into an address.
    let host = match url.host() {
        None => return Err(problem("it has no host")),
        Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
        Some(url::Host::Domain(name)) => Host::Domain(domain_name(name)?),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EgressRefusal::CredentialsInUrl {
            host: host.to_string(),
        });
    }
    if let Host::Domain(name) = &host
        && url.host_str() != Some(name.as_str())
    {
        url.set_host(Some(name))
            .map_err(|e| problem(&format!("its host cannot be normalised: {e}")))?;
    }
    let port = url
        .port_or_known_default()
        .ok_or_else(|| problem("it has no port"))?;
    if port == 0 {
        return Err(problem("port 0 cannot be connected to"));
    }
    url.set_fragment(None);
    Ok(Destination {
        url,
        host,
        port,
        https,
    })
}

/// A domain name as the `url` crate gave it, without its one trailing dot (`example.com.` is
/// `example.com` in DNS), and refused if a label is empty (`a..b`, `example.com..`).
fn domain_name(name: &str) -> Result<String, EgressRefusal> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(problem("it has no host"));
    }
    if name.split('.').any(str::is_empty) {
        return Err(problem(&format!("the host {name} has an empty label")));
    }
    Ok(name.to_string())
}

fn problem(problem: &str) -> EgressRefusal {
    EgressRefusal::MalformedUrl {
        problem: problem.to_string(),
    }
}

/// The parser's complaint, in words that do not repeat the text (which may hold credentials).
fn malformed(text: &str, error: url::ParseError) -> EgressRefusal {
    let zone_id = text
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .is_some_and(|(inside, _)| inside.contains('%'));
    match error {
        url::ParseError::RelativeUrlWithoutBase => {
            problem("it is not an absolute URL (it needs http:// or https://)")
        }
        url::ParseError::InvalidIpv6Address if zone_id => {
            problem("an IPv6 address may not carry a zone id (`%eth0`)")
        }
        other => problem(&other.to_string()),
    }
}

/// The hosts an agent may reach: exact names (`example.com`), sub-domains of a name
/// (`*.example.com` allows `api.example.com` and `a.b.example.com`, but neither `example.com`
/// itself nor `evilexample.com`), and IP literals (`127.0.0.1`, `[::1]` or `::1`). Entries are
/// normalised as hosts are (case, trailing dot, IDNA). An empty list allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAllowlist {
    exact: BTreeSet<Host>,
    /// `.example.com` for `*.example.com`.
    suffixes: BTreeSet<String>,
}

impl DomainAllowlist {
    /// Checks and normalises the entries; the error names every entry that is wrong and why.
    pub fn new(entries: &[String]) -> Result<DomainAllowlist, String> {
        let mut list = DomainAllowlist::default();
        let mut problems = Vec::new();
        for entry in entries {
            match allow_entry(entry.trim()) {
                Ok(AllowEntry::Exact(host)) => {
                    list.exact.insert(host);
                }
                Ok(AllowEntry::Subdomains(name)) => {
                    list.suffixes.insert(format!(".{name}"));
                }
                Err(why) => problems.push(format!("allowed host `{entry}`: {why}")),
            }
        }
        if problems.is_empty() {
            Ok(list)
        } else {
            Err(problems.join("; "))
        }
    }

    /// Whether `host` (spelled any way a URL may spell it) is allowed. A host that is not a
    /// valid host is not.
    pub fn allows(&self, host: &str) -> bool {
        normalise_host(host).is_ok_and(|h| self.allows_host(&h))
    }

    /// Whether a normalised host is allowed.
    pub fn allows_host(&self, host: &Host) -> bool {
        if self.exact.contains(host) {
            return true;
        }
        match host {
            // A normalised name has no empty label, so a match has one before the suffix.
            Host::Domain(name) => self.suffixes.iter().any(|s| name.ends_with(s.as_str())),
            Host::Ip(_) => false,
        }
    }
}

enum AllowEntry {
    Exact(Host),
    Subdomains(String),
}

fn allow_entry(entry: &str) -> Result<AllowEntry, String> {
    match entry.strip_prefix("*.") {
        Some(name) => match normalise_host(name)? {
            Host::Domain(name) => Ok(AllowEntry::Subdomains(name)),
            Host::Ip(_) => Err("`*.` goes before a domain name, not an IP address".into()),
        },
        None => Ok(AllowEntry::Exact(normalise_host(entry)?)),
    }
}

/// A host written on its own (an allowlist entry, or a host a caller asks about), normalised
/// as [`parse_destination`] normalises a URL's host.
fn normalise_host(text: &str) -> Result<Host, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Host::Ip(ip));
    }
    if text.contains('*') {
        return Err("a host is a name, or `*.` and a name; no other wildcard".into());
    }
    if text.is_empty() {
        return Err("the host is empty".into());
    }
    if !text.starts_with('[') && text.contains([':', '/', '@', '?', '#', '\\']) {
        return Err("a host only: no scheme, user, port or path".into());
    }
    match url::Host::parse(text).map_err(|e| format!("not a host: {e}"))? {
        url::Host::Ipv4(ip) => Ok(Host::Ip(IpAddr::V4(ip))),
        url::Host::Ipv6(ip) => Ok(Host::Ip(IpAddr::V6(ip))),
        url::Host::Domain(name) => domain_name(&name).map(Host::Domain).map_err(|e| match e {
            EgressRefusal::MalformedUrl { problem } => problem,
            other => other.to_string(),
        }),
    }
}

/// The egress policy of one agent in one team.
#[derive(Clone, Debug, Default)]
pub struct EgressPolicy {
    pub domains: DomainAllowlist,
    /// The team allows private targets: loopback, private, unique-local, site-local and
    /// CGNAT addresses. Metadata, link-local and unroutable addresses stay refused.
    pub allow_private: bool,
}

impl EgressPolicy {
    /// The policy of agent `agent`: its allowed domains and whether it may reach private
    /// networks. An invalid allowed domain is an error naming the agent.
    pub fn for_agent(
        agent: &str,
        allowed_domains: &[String],
        allow_private: bool,
    ) -> Result<EgressPolicy, String> {
        let domains = DomainAllowlist::new(allowed_domains)
            .map_err(|e| format!("agent {agent:?} has an invalid allowed_domains entry: {e}"))?;
        Ok(EgressPolicy {
            domains,
            allow_private,
        })
    }

    /// Before resolving: the scheme, the absence of credentials, and the host against the
    /// allowlist. An IP-literal host must be listed by its literal and is then vetted like a
    /// resolved address. The destination is re-derived from its URL first, so one whose
    /// fields were changed after parsing is refused rather than trusted.
    pub fn check_destination(&self, d: &Destination) -> Result<(), EgressRefusal> {
        if destination(d.url.clone())? != *d {
            return Err(problem("the destination does not match its URL"));
        }
        if !self.domains.allows_host(&d.host) {
            return Err(EgressRefusal::DomainNotAllowed {
                host: d.host.to_string(),
            });
        }
        if let Host::Ip(ip) = d.host {
            self.vet_addresses(&ip.to_string(), &[ip])?;
        }
        Ok(())
    }

    /// After resolving `host` once: every address must be acceptable (an answer mixing a
    /// public and a private address is refused whole, against DNS rebinding), and there must
    /// be at least one. Returns the address to connect to: the first.
    pub fn vet_addresses(&self, host: &str, addrs: &[IpAddr]) -> Result<IpAddr, EgressRefusal> {
        let Some(&first) = addrs.first() else {
            return Err(EgressRefusal::NoAddress {
                host: host.to_string(),
            });
        };
        for &address in addrs {
            if let Some(kind) = classify(address)
                && !(self.allow_private && OPENED_BY_ALLOW_PRIVATE.contains(&kind))
            {
                return Err(EgressRefusal::PrivateAddress {
                    host: host.to_string(),
                    address,
                    kind,
                });
            }
        }
        Ok(first)
    }
}

// ---------------------------------------------------------------------------------------------
// Address classes.

/// What kind of address `ip` is, if it is not a public unicast address (`None`): `loopback`,
/// `private`, `link-local`, `cgnat`, `metadata`, `unspecified`, `multicast`, `broadcast`,
/// `benchmarking`, `documentation`, `reserved`, `unique-local` or `site-local`. An IPv6
/// address that carries an IPv4 address (mapped, compatible, translated, NAT64, 6to4,
/// Teredo) is what its IPv4 address is.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => classify_v4(ip),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

/// The IPv4 special-purpose blocks; the first that holds an address names it, so an address
/// comes before the block around it.
const V4_BLOCKS: [(Ipv4Addr, u8, &str); 20] = [
    (Ipv4Addr::new(169, 254, 169, 254), 32, "metadata"), // AWS, GCP, Azure, ...
    (Ipv4Addr::new(100, 100, 100, 200), 32, "metadata"), // Alibaba Cloud
    (Ipv4Addr::new(192, 0, 0, 192), 32, "metadata"),     // Oracle Cloud
    (Ipv4Addr::new(168, 63, 129, 16), 32, "metadata"),   // Azure WireServer
    (Ipv4Addr::new(0, 0, 0, 0), 32, "unspecified"),
    (Ipv4Addr::new(255, 255, 255, 255), 32, "broadcast"),
    (Ipv4Addr::new(0, 0, 0, 0), 8, "reserved"), // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "cgnat"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "reserved"), // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved"),
];

/// The IPv6 special-purpose blocks, after the IPv4-carrying forms have been read (see
/// [`embedded_v4`]); first match wins, as for [`V4_BLOCKS`].
#[rustfmt::skip] // a table reads best one row a line
const V6_BLOCKS: [(Ipv6Addr, u8, &str); 10] = [
    // AWS's link-local services: the instance metadata (::254), EKS Pod Identity's
    // credentials (::23), DNS (::253) and time (::123), all in fd00:ec2::/64.
    (Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0), 64, "metadata"), // AWS
    (Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254), 128, "metadata"), // GCP
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "unique-local"),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local"),
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "site-local"),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast"),
    (Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 0), 48, "benchmarking"),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "documentation"),
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "documentation"),
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, "reserved"), // IETF protocol assignments
];

/// The only block handed out for global unicast; the rest of IPv6 is reserved.
const V6_GLOBAL_UNICAST: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4_BLOCKS
        .iter()
        .find(|(net, len, _)| prefix_v4(bits, *len) == u32::from(*net))
        .map(|&(_, _, kind)| kind)
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let bits = u128::from(ip);
    let named = V6_BLOCKS
        .iter()
        .find(|(net, len, _)| prefix_v6(bits, *len) == u128::from(*net))
        .map(|&(_, _, kind)| kind);
    let (global, len) = V6_GLOBAL_UNICAST;
    match named {
        Some(kind) => Some(kind),
        None if prefix_v6(bits, len) == u128::from(global) => None,
        None => Some("reserved"),
    }
}

/// The IPv4 address an IPv6 address stands for, if it has one of the standard forms that
/// carry one: reaching the IPv6 address reaches (or may reach, through a translator or relay
/// on the way) the IPv4 one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    let low = Ipv4Addr::from(bits as u32);
    let within = |net: Ipv6Addr, len: u8| prefix_v6(bits, len) == u128::from(net);
    if within(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96) // mapped ::ffff:a.b.c.d
        || within(Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96) // translated ::ffff:0:a.b.c.d
        || within(Ipv6Addr::UNSPECIFIED, 96) // compatible ::a.b.c.d (:: and ::1 come first)
        || within(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96) // NAT64, RFC 6052
        // Local-use NAT64 (RFC 8215) with the usual /96 layout; the rest of its /48 falls
        // outside 2000::/3 and is reserved.
        || within(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 96)
    {
        return Some(low);
    }
    if within(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        return Some(Ipv4Addr::from((bits >> 80) as u32)); // 6to4: 2002:AABB:CCDD::
    }
    if within(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32) {
        return Some(Ipv4Addr::from(!(bits as u32))); // Teredo: the client, inverted
    }
    None
}

/// The first `len` bits of an address, the rest zero.
fn prefix_v4(bits: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        bits & (u32::MAX << (32 - u32::from(len)))
    }
}

fn prefix_v6(bits: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        bits & (u128::MAX << (128 - u32::from(len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn allowlist(entries: &[&str]) -> DomainAllowlist {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        DomainAllowlist::new(&entries).unwrap()
    }

    fn policy(entries: &[&str]) -> EgressPolicy {
        EgressPolicy {
            domains: allowlist(entries),
            allow_private: false,
        }
    }

    /// The audit id of what parsing `url` leads to: `ok`, or the refusal's rule.
    fn parse_rule(url: &str) -> &'static str {
        match parse_destination(url) {
            Ok(_) => "ok",
            Err(refusal) => refusal.rule(),
        }
    }

    /// The host `url` parses to, as the gate spells it.
    fn host_of(url: &str) -> String {
        parse_destination(url).unwrap().host.to_string()
    }

    /// Parses `url` and checks it against a policy that lists its host (so an IP literal gets
    /// as far as being vetted): `ok`, or the refusal's rule and the address class.
    fn literal_check(url: &str) -> String {
        let d = parse_destination(url).unwrap();
        let policy = policy(&[&d.host.to_string()]);
        match policy.check_destination(&d) {
            Ok(()) => "ok".into(),
            Err(EgressRefusal::PrivateAddress { kind, .. }) => kind.into(),
            Err(other) => other.rule().into(),
        }
    }

    #[test]
    fn ssrf_classics_through_ip_literals_are_refused_even_when_listed() {
        for (url, kind) in [
            ("http://127.0.0.1", "loopback"),
            ("http://127.1/", "loopback"),
            ("http://0x7f.1/", "loopback"),
            ("http://2130706433/", "loopback"),
            ("http://017700000001/", "loopback"),
            ("http://0x7f000001/", "loopback"),
            ("http://%31%32%37.0.0.1/", "loopback"),
            ("http://127.0.0.1./", "loopback"),
            ("http://0.0.0.0", "unspecified"),
            ("http://0/", "unspecified"),
            ("http://[::]/", "unspecified"),
            ("http://[::1]", "loopback"),
            ("http://[::ffff:127.0.0.1]", "loopback"),
            ("http://[::ffff:7f00:1]", "loopback"),
            ("http://[::127.0.0.1]", "loopback"),
            ("http://[::ffff:0:127.0.0.1]", "loopback"),
            ("http://[64:ff9b::7f00:1]", "loopback"),
            ("http://[64:ff9b:1::7f00:1]", "loopback"),
            ("http://[2002:7f00:1::]", "loopback"),
            // Teredo: server 65.54.227.120, client 127.0.0.1 stored inverted (0x80fffffe).
            ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "loopback"),
            ("http://169.254.169.254/latest/meta-data", "metadata"),
            ("http://[::ffff:169.254.169.254]/", "metadata"),
            ("http://[fd00:ec2::254]", "metadata"),
            ("http://100.100.100.200/", "metadata"),
            ("http://192.0.0.192/", "metadata"),
            ("http://169.254.170.2/v2/credentials", "link-local"),
            ("http://100.64.0.1", "cgnat"),
            ("http://10.0.0.1", "private"),
            ("http://192.168.1.1", "private"),
            ("http://172.16.0.1", "private"),
            ("http://172.31.255.255", "private"),
            ("http://[fc00::1]/", "unique-local"),
            ("http://[fec0::1]/", "site-local"),
            ("http://[fe80::1]/", "link-local"),
            ("http://255.255.255.255/", "broadcast"),
            ("http://224.0.0.1/", "multicast"),
            ("http://[ff02::1]/", "multicast"),
            ("http://198.18.0.1/", "benchmarking"),
            ("http://192.0.2.1/", "documentation"),
            ("http://[2001:db8::1]/", "documentation"),
            ("http://240.0.0.1/", "reserved"),
            ("http://0.1.2.3/", "reserved"),
            ("http://[100::1]/", "reserved"),
            ("http://[64:ff9b:1:2::7f00:1]/", "reserved"),
        ] {
            assert_eq!(literal_check(url), kind, "{url}");
        }
    }

    #[test]
    fn public_ip_literals_pass_when_listed() {
        for url in [
            "http://8.8.8.8/",
            "https://1.1.1.1/dns-query",
            "http://[2606:4700::1111]/",
            "http://172.32.0.1/",  // just outside 172.16/12
            "http://100.128.0.1/", // just outside 100.64/10
            "http://[::ffff:8.8.8.8]/",
            "http://[64:ff9b::808:808]/",
            "http://[2002:808:808::1]/",
        ] {
            assert_eq!(literal_check(url), "ok", "{url}");
        }
    }

    #[test]
    fn ip_literals_must_be_listed_by_their_literal() {
        let d = parse_destination("http://8.8.8.8/").unwrap();
        let refused = policy(&["dns.google", "*.google"]).check_destination(&d);
        assert_eq!(refused.unwrap_err().rule(), "egress:domain-not-allowed");
        // Any spelling of the listed address is the address.
        let d = parse_destination("http://0x08080808/").unwrap();
        assert_eq!(policy(&["8.8.8.8"]).check_destination(&d), Ok(()));
        for entry in ["[2606:4700::1111]", "2606:4700:0::1111"] {
            let d = parse_destination("http://[2606:4700::1111]/").unwrap();
            assert_eq!(policy(&[entry]).check_destination(&d), Ok(()), "{entry}");
        }
    }

    #[test]
    fn hosts_are_normalised() {
        assert_eq!(host_of("http://EXAMPLE.COM./"), "example.com");
        let d = parse_destination("http://EXAMPLE.COM./a?b#frag").unwrap();
        assert_eq!(d.url.as_str(), "http://example.com/a?b");
        assert_eq!(host_of("http://bücher.example/"), "xn--bcher-kva.example");
        assert_eq!(host_of("http://BÜCHER.example./"), "xn--bcher-kva.example");
        assert_eq!(host_of("http://0x7f.1/"), "127.0.0.1");
        assert_eq!(host_of("http://[0:0::1]/"), "::1");
        let d = parse_destination("https://example.com/").unwrap();
        assert_eq!((d.port, d.https), (443, true));
        let d = parse_destination("HTTP://example.com:8080").unwrap();
        assert_eq!(
            (d.port, d.https, d.url.as_str()),
            (8080, false, "http://example.com:8080/")
        );
        assert_eq!(
            parse_destination("http://example.com:80/").unwrap().port,
            80
        );
    }

    #[test]
    fn only_http_and_https() {
        for url in [
            "file:///etc/passwd",
            "gopher://127.0.0.1:25/_HELO",
            "ftp://example.com/",
            "javascript:alert(1)",
            "data:text/plain,hi",
            "ws://example.com/",
            "dict://127.0.0.1:11211/",
        ] {
            assert_eq!(parse_rule(url), "egress:scheme", "{url}");
        }
        let refusal = parse_destination("file:///etc/passwd").unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "only http and https URLs may be fetched, not `file:` URLs"
        );
    }

    #[test]
    fn credentials_are_refused_without_being_echoed() {
        for url in [
            "http://alice:s3cret@example.com",
            "http://alice@example.com/",
            "http://:s3cret@example.com/",
            "https://ghp_s3cret:x-oauth-basic@api.example.com/",
        ] {
            let refusal = parse_destination(url).unwrap_err();
            assert_eq!(refusal.rule(), "egress:credentials-in-url", "{url}");
            let said = refusal.to_string();
            assert!(
                !said.contains("s3cret") && !said.contains("alice"),
                "{said}"
            );
        }
        // The classic: it looks like example.com, it reaches evil.test, and the refusal says so.
        let refusal = parse_destination("http://example.com@evil.test/").unwrap_err();
        assert_eq!(
            refusal,
            EgressRefusal::CredentialsInUrl {
                host: "evil.test".into()
            }
        );
        assert!(refusal.to_string().contains("it would reach evil.test"));
        // Malformed URLs with credentials are not echoed either.
        let refusal = parse_destination("http://alice:s3cret@[::1/").unwrap_err();
        assert_eq!(refusal.rule(), "egress:malformed-url");
        assert!(!refusal.to_string().contains("s3cret"));
    }

    #[test]
    fn malformed_urls_say_why() {
        for (url, says) in [
            ("http://[fe80::1%25eth0]/", "zone id"),
            ("http://[fe80::1%eth0]/", "zone id"),
            ("example.com/path", "not an absolute URL"),
            ("", "not an absolute URL"),
            ("http://", "empty host"),
            ("http://a..b/", "empty label"),
            ("http://example.com../", "empty label"),
            ("http://./", "no host"),
            ("http://example.com:0/", "port 0"),
            ("http://example.com:99999/", "port"),
            ("http://256.0.0.1/", "IPv4"),
            ("http://1.2.3.4.5/", "IPv4"),
        ] {
            let refusal = parse_destination(url).unwrap_err();
            assert_eq!(refusal.rule(), "egress:malformed-url", "{url}");
            assert!(refusal.to_string().contains(says), "{url}: {refusal}");
        }
    }

    #[test]
    fn allowlist_exact_and_subdomains() {
        let list = allowlist(&["example.com", "*.api.test"]);
        assert!(list.allows("example.com"));
        assert!(list.allows("EXAMPLE.com."));
        assert!(!list.allows("sub.example.com"));
        assert!(!list.allows("evilexample.com"));
        assert!(!list.allows("example.com.evil.test"));
        assert!(list.allows("v1.api.test"));
        assert!(list.allows("sub.sub.api.test"));
        assert!(!list.allows("api.test"), "`*.` is sub-domains only");
        assert!(!list.allows("evilapi.test"));
        assert!(!list.allows("api.test.evil"));
        assert!(!list.allows(".api.test"));
        assert!(!list.allows("127.0.0.1"));
    }

    #[test]
    fn allowlist_entries_are_normalised() {
        let list = allowlist(&["Bücher.Example.", "*.EXAMPLE.org", " spaced.test "]);
        assert!(list.allows("xn--bcher-kva.example"));
        assert!(list.allows("bücher.example"));
        assert!(list.allows("a.example.org"));
        assert!(list.allows("spaced.test"));
        let list = allowlist(&["127.1", "[::1]"]);
        assert!(list.allows("127.0.0.1"));
        assert!(list.allows("[::1]"));
        assert!(list.allows("::1"));
        assert!(!list.allows("localhost"));
    }

    #[test]
    fn an_empty_allowlist_allows_nothing() {
        let list = allowlist(&[]);
        assert!(!list.allows("example.com"));
        assert!(!list.allows("localhost"));
        let d = parse_destination("https://example.com/").unwrap();
        let refusal = policy(&[]).check_destination(&d).unwrap_err();
        assert_eq!(refusal.rule(), "egress:domain-not-allowed");
        assert_eq!(
            refusal.to_string(),
            "example.com is not on the list of hosts this agent may reach"
        );
    }

    #[test]
    fn invalid_allowlist_entries_are_named() {
        let entries: Vec<String> = [
            "ok.test",
            "*",
            "*.127.0.0.1",
            "https://x.test",
            "a*.test",
            "",
            "a..b",
        ]
        .iter()
        .map(|e| e.to_string())
        .collect();
        let error = DomainAllowlist::new(&entries).unwrap_err();
        for named in [
            "`*`",
            "`*.127.0.0.1`",
            "`https://x.test`",
            "`a*.test`",
            "``",
            "`a..b`",
        ] {
            assert!(
                error.contains(&format!("allowed host {named}")),
                "{named}: {error}"
            );
        }
        assert!(!error.contains("ok.test"), "{error}");
    }

    #[test]
    fn localhost_is_a_name_allowed_only_if_listed_and_refused_once_resolved() {
        let d = parse_destination("http://localhost:8080/admin").unwrap();
        assert_eq!(d.host, Host::Domain("localhost".into()));
        let refusal = policy(&["example.com"]).check_destination(&d).unwrap_err();
        assert_eq!(refusal.rule(), "egress:domain-not-allowed");
        let listed = policy(&["localhost"]);
        assert_eq!(listed.check_destination(&d), Ok(()));
        let refusal = listed
            .vet_addresses("localhost", &[ip("127.0.0.1")])
            .unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "localhost resolves to 127.0.0.1, a loopback address; only public addresses may be \
             reached"
        );
    }

    #[test]
    fn every_resolved_address_is_vetted() {
        let policy = policy(&["example.com"]);
        let public = [
            ip("93.184.215.14"),
            ip("2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
        ];
        assert_eq!(policy.vet_addresses("example.com", &public), Ok(public[0]));
        // Rebinding: one private address in the answer refuses the whole answer.
        let mixed = [ip("93.184.215.14"), ip("127.0.0.1")];
        assert_eq!(
            policy.vet_addresses("example.com", &mixed),
            Err(EgressRefusal::PrivateAddress {
                host: "example.com".into(),
                address: ip("127.0.0.1"),
                kind: "loopback",
            })
        );
        let refusal = policy.vet_addresses("example.com", &[]).unwrap_err();
        assert_eq!(refusal.rule(), "egress:no-address");
        for public in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert_eq!(
                policy.vet_addresses("x.test", &[ip(public)]),
                Ok(ip(public))
            );
        }
    }

    #[test]
    fn allow_private_opens_local_networks_but_not_metadata() {
        let team = EgressPolicy {
            domains: allowlist(&["*.internal.test"]),
            allow_private: true,
        };
        for open in [
            "127.0.0.1",
            "10.0.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "fd12::1",
            "::1",
        ] {
            assert_eq!(
                team.vet_addresses("a.internal.test", &[ip(open)]),
                Ok(ip(open))
            );
        }
        for (closed, kind) in [
            ("169.254.169.254", "metadata"),
            ("fd00:ec2::254", "metadata"),
            ("fd00:ec2::23", "metadata"),
            ("fd00:ec2::253", "metadata"),
            ("fd20:ce::254", "metadata"),
            ("168.63.129.16", "metadata"),
            ("169.254.170.2", "link-local"),
            ("169.254.170.23", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
        ] {
            let refusal = team
                .vet_addresses("a.internal.test", &[ip(closed)])
                .unwrap_err();
            assert!(matches!(refusal, EgressRefusal::PrivateAddress { kind: k, .. } if k == kind));
        }
    }

    #[test]
    fn a_tampered_destination_is_refused() {
        let mut d = parse_destination("https://example.com/").unwrap();
        d.host = Host::Domain("allowed.test".into());
        let refusal = policy(&["allowed.test"]).check_destination(&d).unwrap_err();
        assert_eq!(refusal.rule(), "egress:malformed-url");
    }

    #[test]
    fn redirects_resolve_against_the_current_url() {
        let current = Url::parse("https://example.com/a/b?q=1").unwrap();
        let target = |location: &str| redirect_target(&current, location);
        assert_eq!(target("c").unwrap().url.as_str(), "https://example.com/a/c");
        assert_eq!(
            target("/root#x").unwrap().url.as_str(),
            "https://example.com/root"
        );
        assert_eq!(
            target("?p=2").unwrap().url.as_str(),
            "https://example.com/a/b?p=2"
        );
        let absolute = target("http://other.test:8080/x").unwrap();
        assert_eq!(
            (absolute.host.to_string(), absolute.port, absolute.https),
            ("other.test".into(), 8080, false)
        );
        let scheme_relative = target("//evil.test/x").unwrap();
        assert_eq!(scheme_relative.url.as_str(), "https://evil.test/x");
        // Backslashes and missing slashes still name a host under the WHATWG rules; what
        // matters is that the gate sees the host the client would reach.
        assert_eq!(
            target("http:/\\evil.test/").unwrap().host.to_string(),
            "evil.test"
        );
        assert_eq!(
            target("\\\\evil.test/x").unwrap().host.to_string(),
            "evil.test"
        );
        assert_eq!(
            target("https:evil.test").unwrap().url.as_str(),
            "https://example.com/a/evil.test"
        );
        assert_eq!(
            target("http:evil.test").unwrap().host.to_string(),
            "evil.test"
        );
        assert_eq!(
            target("http://0x7f.1/").unwrap().host.to_string(),
            "127.0.0.1"
        );
        for (location, rule) in [
            ("file:///etc/passwd", "egress:scheme"),
            ("javascript:alert(1)", "egress:scheme"),
            ("//user:pass@evil.test/", "egress:credentials-in-url"),
            ("http://[::1", "egress:malformed-url"),
        ] {
            assert_eq!(target(location).unwrap_err().rule(), rule, "{location}");
        }
    }

    #[test]
    fn refusals_become_pipeline_refusals() {
        let refusal: Refusal = EgressRefusal::TooManyRedirects.into();
        assert_eq!(refusal.step, Step::Egress);
        assert_eq!(refusal.rule, "egress:too-many-redirects");
        assert!(refusal.reason.contains(&MAX_REDIRECTS.to_string()));
    }

    #[test]
    fn classify_names_the_special_blocks() {
        for (address, kind) in [
            ("127.255.255.254", Some("loopback")),
            ("172.15.255.255", None),
            ("172.32.0.1", None),
            ("100.63.255.255", None),
            ("100.127.255.255", Some("cgnat")),
            ("198.17.255.255", None),
            ("198.19.255.255", Some("benchmarking")),
            ("198.20.0.0", None),
            ("169.254.169.253", Some("link-local")),
            ("203.0.113.9", Some("documentation")),
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", None), // Teredo client 8.8.8.8
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Some("private")), // Teredo client 10.0.0.1
            ("2001:2::1", Some("benchmarking")),
            ("2001:4:112::1", Some("reserved")),
            ("3fff::1", Some("documentation")),
            ("2a00:1450:4001::200e", None),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("fdff::1", Some("unique-local")),
        ] {
            assert_eq!(classify(ip(address)), kind, "{address}");
        }
    }
}

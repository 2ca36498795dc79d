//! The client's address: the connecting peer's, or, when that peer is a trusted reverse proxy
//! (`TRUSTED_PROXIES`), the address the proxy reports in `X-Forwarded-For` or `Forwarded`.
//!
//! Every module reads "the client address" through [`client_ip`] (rate limits, logs), never
//! through `peer_addr()` or a forwarding header itself, so that one rule decides for the whole
//! service:
//!
//! - no trusted proxy is configured (the default), or the peer is not one: the peer's address,
//!   whatever headers the request carries (a spoofed header changes nothing);
//! - the peer is trusted: the hops of the configured header are read right to left, and the
//!   client is the right-most hop that is not itself a trusted proxy (hops to its left were written
//!   by the client and cannot be believed). When every hop is trusted, the left-most one; when the
//!   header is missing, the peer; a hop that is not an address (`unknown`, an obfuscated
//!   identifier, garbage) ends the walk at the last trusted address seen.
//!
//! Only one header is read (`TRUSTED_PROXY_HEADER`, default `x-forwarded-for`): a proxy that
//! appends to one header passes the other through untouched, so reading both would let a client
//! choose its address through the one the proxy does not write.

use std::net::IpAddr;
use std::str::FromStr;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::HeaderMap;
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpRequest, web};

use crate::ConfigError;

/// An address range: an address and a prefix length (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` lies in this range. An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, as a
    /// dual-stack listener reports IPv4 peers) is compared as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_match(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_match(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR range"))?;
        let addr = canonical(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn prefix_match(net: &[u8], ip: &[u8], prefix: u8) -> bool {
    let full = usize::from(prefix / 8);
    let rest = prefix % 8;
    if net.get(..full) != ip.get(..full) {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    match (net.get(full), ip.get(full)) {
        (Some(n), Some(i)) => n & mask == i & mask,
        _ => false,
    }
}

/// Which forwarding header a trusted proxy writes (`TRUSTED_PROXY_HEADER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, Caddy, HAProxy, most load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`.
    Forwarded,
}

/// The reverse proxies whose forwarding header is believed (`TRUSTED_PROXIES`), and which header
/// they write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<Cidr>,
    header: ForwardHeader,
}

impl TrustedProxies {
    /// No proxy is trusted: the client is always the peer.
    pub fn none() -> Self {
        Self::default()
    }

    /// From `TRUSTED_PROXIES` (comma-separated addresses or CIDR ranges) and
    /// `TRUSTED_PROXY_HEADER` (`x-forwarded-for` or `forwarded`).
    pub fn from_settings(proxies: Option<&str>, header: Option<&str>) -> Result<Self, ConfigError> {
        let ranges = proxies
            .unwrap_or_default()
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| p.parse::<Cidr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ConfigError::new("TRUSTED_PROXIES", e))?;
        let header = match header.map(|h| h.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("x-forwarded-for") => ForwardHeader::XForwardedFor,
            Some("forwarded") => ForwardHeader::Forwarded,
            Some(other) => {
                return Err(ConfigError::new(
                    "TRUSTED_PROXY_HEADER",
                    format!("{other:?} is not x-forwarded-for or forwarded"),
                ));
            }
        };
        Ok(TrustedProxies { ranges, header })
    }

    /// Reads `TRUSTED_PROXIES` and `TRUSTED_PROXY_HEADER` from the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_settings(
            crate::config::var("TRUSTED_PROXIES").as_deref(),
            crate::config::var("TRUSTED_PROXY_HEADER").as_deref(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// The client's address of a request that came from `peer` with `headers` (the rule of this
    /// module's documentation).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical(peer);
        if !self.trusts(peer) {
            return peer;
        }
        let hops = match self.header {
            ForwardHeader::XForwardedFor => x_forwarded_for(headers),
            ForwardHeader::Forwarded => forwarded(headers),
        };
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(ip) = hop.map(canonical) else {
                break;
            };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// The hops of every `X-Forwarded-For` line, in order; `None` for one that is not an address.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("x-forwarded-for")
        .flat_map(|v| v.to_str().unwrap_or("\u{0}").split(','))
        .map(|hop| parse_node(hop.trim()))
        .collect()
}

/// The `for=` nodes of every `Forwarded` element, in order; `None` for one that is not an
/// address (`unknown`, `_hidden`) or an element without `for=`.
fn forwarded(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("forwarded")
        .flat_map(|v| v.to_str().unwrap_or("\u{0}").split(','))
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(key, _)| key.trim().eq_ignore_ascii_case("for"))
                .and_then(|(_, value)| parse_node(value.trim().trim_matches('"')))
        })
        .collect()
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:4711`.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, port) = node.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The client's address, in the request's extensions (set by [`middleware`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// Middleware: works out the client's address once per request from the app's
/// [`TrustedProxies`] (app data; none trusted when absent) and stores it as [`ClientAddr`].
pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if let Some(peer) = req.peer_addr() {
        let ip = match req.app_data::<web::Data<TrustedProxies>>() {
            Some(trusted) => trusted.client_ip(peer.ip(), req.headers()),
            None => canonical(peer.ip()),
        };
        req.extensions_mut().insert(ClientAddr(ip));
    }
    next.call(req).await
}

/// The client's address of this request: what [`middleware`] worked out, else the peer's
/// address (a server without the middleware trusts no proxy). `None` only without a peer (a
/// test request built without one).
pub fn client_ip(req: &HttpRequest) -> Option<IpAddr> {
    req.extensions()
        .get::<ClientAddr>()
        .map(|c| c.0)
        .or_else(|| req.peer_addr().map(|p| canonical(p.ip())))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        map
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn trusted(list: &str, header: Option<&str>) -> TrustedProxies {
        TrustedProxies::from_settings(Some(list), header).unwrap()
    }

    #[test]
    fn ranges_match_by_prefix() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.255.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        let odd: Cidr = "192.168.4.0/22".parse().unwrap();
        assert!(odd.contains(ip("192.168.7.255")));
        assert!(!odd.contains(ip("192.168.8.0")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fdab::1")));
        assert!(!v6.contains(ip("fe80::1")));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("::ffff:127.0.0.1")), "mapped IPv4");
        assert!(!one.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        assert!(!all.contains(ip("2001:db8::1")));
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        for bad in [
            "10.0.0.0/33",
            "fd00::/129",
            "example.com",
            "10.0.0.0/x",
            "1.2.3",
        ] {
            let err = TrustedProxies::from_settings(Some(bad), None).unwrap_err();
            assert_eq!(err.setting, "TRUSTED_PROXIES", "{bad}");
        }
        let err = TrustedProxies::from_settings(None, Some("x-real-ip")).unwrap_err();
        assert_eq!(err.setting, "TRUSTED_PROXY_HEADER");
        assert!(
            TrustedProxies::from_settings(Some(" "), None)
                .unwrap()
                .is_empty()
        );
        let both = trusted("10.0.0.0/8, ::1", Some("Forwarded"));
        assert!(both.trusts(ip("::1")) && both.trusts(ip("10.9.9.9")));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_sends() {
        let spoofed = headers(&[
            ("x-forwarded-for", "198.51.100.1"),
            ("forwarded", "for=198.51.100.2"),
        ]);
        let peer = ip("203.0.113.5");
        assert_eq!(TrustedProxies::none().client_ip(peer, &spoofed), peer);
        assert_eq!(trusted("10.0.0.0/8", None).client_ip(peer, &spoofed), peer);
        let forwarded = trusted("10.0.0.0/8", Some("forwarded"));
        assert_eq!(forwarded.client_ip(peer, &spoofed), peer);
    }

    #[test]
    fn behind_a_trusted_proxy_the_right_most_untrusted_hop_is_the_client() {
        let proxies = trusted("10.0.0.0/8", None);
        let peer = ip("10.0.0.2");
        // The client wrote the first hop itself; the proxy appended the real address.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.7")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("198.51.100.7"));
        // Two proxies: the inner one is trusted and skipped.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.7, 10.0.0.9")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("198.51.100.7"));
        // Several header lines are one list.
        let mut h = headers(&[("x-forwarded-for", "1.1.1.1")]);
        h.append(
            HeaderName::from_static("x-forwarded-for"),
            HeaderValue::from_static("198.51.100.8"),
        );
        assert_eq!(proxies.client_ip(peer, &h), ip("198.51.100.8"));
        // Every hop trusted: the left-most; no header: the proxy itself.
        let h = headers(&[("x-forwarded-for", "10.3.3.3, 10.0.0.9")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("10.3.3.3"));
        assert_eq!(proxies.client_ip(peer, &HeaderMap::new()), peer);
        // Garbage the proxy passed on ends the walk at the last trusted address.
        let h = headers(&[("x-forwarded-for", "198.51.100.7, nonsense, 10.0.0.9")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("10.0.0.9"));
        // Ports and brackets are accepted.
        let h = headers(&[("x-forwarded-for", "[2001:db8::7]:4711")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("2001:db8::7"));
        let h = headers(&[("x-forwarded-for", "198.51.100.9:1234")]);
        assert_eq!(proxies.client_ip(peer, &h), ip("198.51.100.9"));
        // The other header is not read.
        let h = headers(&[("forwarded", "for=198.51.100.2")]);
        assert_eq!(proxies.client_ip(peer, &h), peer);
    }

    #[test]
    fn the_forwarded_header_is_read_when_chosen() {
        let proxies = trusted("10.0.0.0/8, fd00::/8", Some("forwarded"));
        let h = headers(&[(
            "forwarded",
            "for=1.1.1.1, for=\"[2001:db8::1]:4711\";proto=https;by=10.0.0.1, For=10.0.0.3",
        )]);
        assert_eq!(proxies.client_ip(ip("fd00::2"), &h), ip("2001:db8::1"));
        let h = headers(&[("forwarded", "for=unknown;proto=http")]);
        assert_eq!(proxies.client_ip(ip("10.0.0.2"), &h), ip("10.0.0.2"));
        let h = headers(&[("x-forwarded-for", "198.51.100.2")]);
        assert_eq!(proxies.client_ip(ip("10.0.0.2"), &h), ip("10.0.0.2"));
    }
}

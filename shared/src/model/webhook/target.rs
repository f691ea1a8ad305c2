//! Where a webhook may be sent: an `https` URL (plain `http` only in the local mode) whose
//! host is no private, loopback, link-local, CGNAT, unique-local, multicast, unspecified,
//! reserved or metadata address. Checked twice: on the URL as written when the endpoint is
//! saved (a literal address is a 400 naming `url`), and on every address its host resolves to
//! at each send (so a name that resolves, or later rebinds, to one is never connected to).
//!
//! URLs are parsed by the WHATWG parser reqwest itself uses, which normalises every IPv4
//! spelling (`2130706433`, `0x7f.1`, `0177.0.0.1`) to its address, so the host checked is the
//! host that would be connected to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

use crate::model::error::ValidationError;
use crate::model::webhook::MAX_URL_CHARS;

/// The targets a deployment allows. On AWS: https only, no private address at all. In the
/// local mode (`WEBHOOK_ALLOWED_LOCAL_TARGETS` set, by tests and `make dev`): plain http too,
/// and the loopback `host:port`s it lists; every other private address stays refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Whether plain `http` is allowed (the local mode).
    pub local_mode: bool,
    /// Loopback receivers allowed in the local mode: `(host, port)`, host a loopback literal
    /// or `localhost`.
    pub allowed_local: Vec<(String, u16)>,
}

/// The environment variable of the local mode's allow-list.
pub const ALLOWED_LOCAL_TARGETS_ENV: &str = "WEBHOOK_ALLOWED_LOCAL_TARGETS";

impl TargetPolicy {
    /// AWS's policy: https only, no private address.
    pub fn strict() -> Self {
        Self::default()
    }

    /// The local mode, allowing `targets` (`host:port`, comma-separated).
    pub fn local(targets: &str) -> Self {
        let allowed_local = targets
            .split(',')
            .filter_map(|t| {
                let (host, port) = t.trim().rsplit_once(':')?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                Some((host.to_ascii_lowercase(), port.parse().ok()?))
            })
            .collect();
        Self {
            local_mode: true,
            allowed_local,
        }
    }

    /// From the environment: the local mode when [`ALLOWED_LOCAL_TARGETS_ENV`] is set (the
    /// template never sets it), else strict.
    pub fn from_env() -> Self {
        match std::env::var(ALLOWED_LOCAL_TARGETS_ENV) {
            Ok(targets) => Self::local(&targets),
            Err(_) => Self::strict(),
        }
    }

    /// Whether `ip:port` (a loopback address) is on the local allow-list.
    fn allows_loopback(&self, ip: IpAddr, port: u16) -> bool {
        self.local_mode
            && ip.is_loopback()
            && self.allowed_local.iter().any(|(host, p)| {
                *p == port
                    && (host == "localhost"
                        || host.parse::<IpAddr>().is_ok_and(|allowed| allowed == ip))
            })
    }

    /// Why `ip` (at `port`) may not be sent to, or `None` when it may.
    pub fn refusal(&self, ip: IpAddr, port: u16) -> Option<&'static str> {
        let reason = forbidden_reason(ip)?;
        if self.allows_loopback(canonical(ip), port) {
            return None;
        }
        Some(reason)
    }

    /// Why `ip` may not be connected to whatever the port, or `None` when it may: what a
    /// resolver checks (it does not know the port; [`TargetPolicy::check_resolved`] before the
    /// send does). A loopback address passes if some allowed local target names it.
    pub fn refusal_any_port(&self, ip: IpAddr) -> Option<&'static str> {
        let reason = forbidden_reason(ip)?;
        let ip = canonical(ip);
        let listed = self.local_mode
            && ip.is_loopback()
            && self.allowed_local.iter().any(|(host, _)| {
                host == "localhost" || host.parse::<IpAddr>().is_ok_and(|allowed| allowed == ip)
            });
        if listed {
            None
        } else {
            Some(reason)
        }
    }

    /// Checks a URL as written (at creation and change): its scheme, no credentials, and a
    /// host that is no forbidden literal address. Every failure is a 400 naming `url`.
    pub fn check_url(&self, raw: &str) -> Result<Url, ValidationError> {
        let bad = |why: &str| ValidationError::new("url", why.to_string());
        if raw.len() > MAX_URL_CHARS {
            return Err(bad("is too long"));
        }
        let url = Url::parse(raw).map_err(|_| bad("is not a URL"))?;
        match url.scheme() {
            "https" => {}
            "http" if self.local_mode => {}
            "http" => return Err(bad("must be https")),
            _ => return Err(bad("must be an https URL")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("must not carry credentials"));
        }
        let port = url
            .port_or_known_default()
            .ok_or_else(|| bad("has no port"))?;
        match url.host() {
            None => return Err(bad("has no host")),
            Some(Host::Ipv4(ip)) => self.check_literal(IpAddr::V4(ip), port)?,
            Some(Host::Ipv6(ip)) => self.check_literal(IpAddr::V6(ip), port)?,
            Some(Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    let allowed = self.local_mode
                        && self
                            .allowed_local
                            .iter()
                            .any(|(host, p)| host == "localhost" && *p == port);
                    if !allowed {
                        return Err(bad("must not be a loopback host"));
                    }
                }
            }
        }
        Ok(url)
    }

    fn check_literal(&self, ip: IpAddr, port: u16) -> Result<(), ValidationError> {
        match self.refusal(ip, port) {
            None => Ok(()),
            Some(reason) => Err(ValidationError::new(
                "url",
                format!("must not be a {reason} address"),
            )),
        }
    }

    /// Checks every address a host resolved to, at send time: all must be allowed (one
    /// forbidden address refuses the send, so a name cannot mix a public and a private one).
    pub fn check_resolved(&self, addresses: &[SocketAddr]) -> Result<(), String> {
        if addresses.is_empty() {
            return Err("the host resolved to no address".into());
        }
        for address in addresses {
            if let Some(reason) = self.refusal(address.ip(), address.port()) {
                return Err(format!("the host resolved to a {reason} address"));
            }
        }
        Ok(())
    }
}

/// An IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4) as that IPv4
/// address; anything else unchanged.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        // ::ffff:a.b.c.d (mapped)
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        // ::a.b.c.d (the deprecated compatible form; not :: and ::1)
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        // 64:ff9b::a.b.c.d (NAT64)
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        // 2002:AABB:CCDD::/48 (6to4)
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// The class of a forbidden address, or `None` for a public one.
pub fn forbidden_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => "metadata",
        (0, _) => "unspecified",
        (127, _) => "loopback",
        (10, _) | (172, 16..=31) | (192, 168) => "private",
        (169, 254) => "link-local",
        (100, 64..=127) => "CGNAT",
        (224..=239, _) => "multicast",
        (240..=255, _) => "reserved",
        // IETF protocol assignments, benchmarking, documentation.
        (192, 0) if c == 0 || c == 2 => "reserved",
        (198, 18..=19) => "reserved",
        (198, 51) if c == 100 => "reserved",
        (203, 0) if c == 113 => "reserved",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    Some(match s[0] {
        _ if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => "metadata",
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        0xfc00..=0xfdff => "unique-local",
        0xfe80..=0xfebf => "link-local",
        // Site-local, deprecated but still routed by some stacks.
        0xfec0..=0xfeff => "site-local",
        0xff00..=0xffff => "multicast",
        0x2001 if s[1] == 0xdb8 => "reserved",
        // The rest of ::/8 (the embedded IPv4 forms are handled above).
        0 => "reserved",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(policy: &TargetPolicy, url: &str) -> String {
        let err = policy.check_url(url).expect_err(url);
        assert_eq!(err.field, "url", "{url}");
        err.reason
    }

    #[test]
    fn every_forbidden_ipv4_class_is_refused_at_creation() {
        let strict = TargetPolicy::strict();
        for (url, class) in [
            ("https://127.0.0.1/", "loopback"),
            ("https://127.1.2.3:8443/", "loopback"),
            ("https://10.0.0.1/", "private"),
            ("https://172.16.0.1/", "private"),
            ("https://172.31.255.255/", "private"),
            ("https://192.168.1.1/", "private"),
            ("https://169.254.169.254/latest/meta-data/", "metadata"),
            ("https://169.254.1.1/", "link-local"),
            ("https://100.64.0.1/", "CGNAT"),
            ("https://100.127.255.254/", "CGNAT"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://224.0.0.1/", "multicast"),
            ("https://239.255.255.250/", "multicast"),
            ("https://255.255.255.255/", "reserved"),
            ("https://240.0.0.1/", "reserved"),
        ] {
            let reason = refused(&strict, url);
            assert!(reason.contains(class), "{url}: {reason}");
        }
    }

    #[test]
    fn every_spelling_of_an_ipv4_address_is_normalised_before_the_check() {
        let strict = TargetPolicy::strict();
        for url in [
            "https://2130706433/",          // decimal 127.0.0.1
            "https://0x7f.1/",              // hex, short form
            "https://0x7f000001/",          // hex whole
            "https://0177.0.0.1/",          // octal
            "https://017700000001/",        // octal whole
            "https://127.1/",               // short form
            "https://0xa9.0xfe.0xa9.0xfe/", // 169.254.169.254 in hex
            "https://2852039166/",          // 169.254.169.254 in decimal
            "https://012.0.0.1/",           // 10.0.0.1 in octal
        ] {
            refused(&strict, url);
        }
    }

    #[test]
    fn every_forbidden_ipv6_class_and_embedded_ipv4_is_refused() {
        let strict = TargetPolicy::strict();
        for (url, class) in [
            ("https://[::1]/", "loopback"),
            ("https://[::]/", "unspecified"),
            ("https://[fd00:ec2::254]/", "metadata"),
            ("https://[fd12:3456::1]/", "unique-local"),
            ("https://[fc00::1]/", "unique-local"),
            ("https://[fe80::1]/", "link-local"),
            ("https://[ff02::1]/", "multicast"),
            ("https://[::ffff:127.0.0.1]/", "loopback"),
            ("https://[::ffff:7f00:1]/", "loopback"),
            ("https://[::ffff:169.254.169.254]/", "metadata"),
            ("https://[::ffff:10.0.0.1]/", "private"),
            ("https://[::127.0.0.1]/", "loopback"),
            ("https://[64:ff9b::a00:1]/", "private"),
            ("https://[2002:a9fe:a9fe::1]/", "metadata"),
            ("https://[2001:db8::1]/", "reserved"),
        ] {
            let reason = refused(&strict, url);
            assert!(reason.contains(class), "{url}: {reason}");
        }
    }

    #[test]
    fn public_https_urls_pass_and_other_schemes_and_shapes_do_not() {
        let strict = TargetPolicy::strict();
        for ok in [
            "https://hooks.example.com/fleet",
            "https://93.184.216.34/x",
            "https://[2606:4700::1111]/",
            "https://example.com:8443/a?b=c",
        ] {
            strict.check_url(ok).expect(ok);
        }
        for url in [
            "http://hooks.example.com/",
            "ftp://example.com/",
            "file:///etc/passwd",
            "gopher://example.com/",
            "not a url",
            "https://user:pw@example.com/",
            "https://localhost/",
            "https://a.localhost/",
            "",
        ] {
            refused(&strict, url);
        }
        refused(
            &strict,
            &format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS)),
        );
    }

    #[test]
    fn the_local_mode_allows_http_and_only_the_listed_loopback_receivers() {
        let local = TargetPolicy::local("127.0.0.1:9000, localhost:9001,[::1]:9002");
        for ok in [
            "http://127.0.0.1:9000/hook",
            "http://localhost:9001/",
            "http://[::1]:9002/",
            "http://hooks.example.com/",
        ] {
            local.check_url(ok).expect(ok);
        }
        for url in [
            "http://127.0.0.1:9005/",
            "http://127.0.0.2:9000/",
            "http://localhost:9000/",
            "http://10.0.0.1:9000/",
            "http://169.254.169.254:9000/",
            "http://[::ffff:127.0.0.1]:9003/",
        ] {
            refused(&local, url);
        }
        // The allow-list admits loopback only: listing a private address does not open it.
        let listed_private = TargetPolicy::local("10.0.0.1:80");
        refused(&listed_private, "http://10.0.0.1/");
    }

    #[test]
    fn at_send_time_every_resolved_address_must_be_allowed() {
        let strict = TargetPolicy::strict();
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        let private: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let metadata: SocketAddr = "[fd00:ec2::254]:443".parse().unwrap();
        assert!(strict.check_resolved(&[public]).is_ok());
        assert!(strict.check_resolved(&[public, private]).is_err());
        assert!(strict.check_resolved(&[metadata]).is_err());
        assert!(strict.check_resolved(&[]).is_err());
        let local = TargetPolicy::local("localhost:9000");
        let loopback: SocketAddr = "127.0.0.1:9000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9000".parse().unwrap();
        assert!(local.check_resolved(&[loopback, mapped]).is_ok());
        assert!(local
            .check_resolved(&["127.0.0.1:9001".parse().unwrap()])
            .is_err());
    }
}

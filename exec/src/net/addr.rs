//! Where an allowed connection goes: the proxy resolves the name itself (the sandbox has no
//! DNS), refuses addresses no public host should resolve to (DNS rebinding onto loopback, the
//! LAN or a cloud metadata service) unless the deployer pinned the name, and connects.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bridle_policy::network::RequestHost;
use tokio::net::TcpStream;

/// Why an address is refused for a name that is not pinned by `network.resolve`, or `None`
/// when it is an ordinary public address.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let s = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if v6.is_multicast() {
                Some("multicast")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xfe00 == 0xfc00 {
                // fc00::/7, which holds fd00:ec2::254 (the AWS metadata service over IPv6).
                Some("private (unique local)")
            } else if s[0] == 0x0064 && s[1] == 0xff9b {
                // NAT64 (64:ff9b::/96 and the local-use /48): judge the embedded IPv4 address.
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                forbidden_v4(Ipv4Addr::new(a, b, c, d))
            } else if s[0] == 0x2001 && s[1] == 0x0db8 {
                Some("documentation")
            } else if s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0 {
                // ::a.b.c.d (IPv4-compatible, deprecated) and the rest of ::/96.
                Some("reserved")
            } else {
                None
            }
        }
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] {
        Some("cloud metadata")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_private() {
        Some("private")
    } else if o[0] == 100 && o[1] & 0xc0 == 64 {
        Some("shared (carrier-grade NAT)")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if ip.is_broadcast() {
        Some("broadcast")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if o[0] >= 240 {
        Some("reserved")
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        Some("reserved (IETF protocol assignments)")
    } else if o[0] == 198 && o[1] & 0xfe == 18 {
        Some("reserved (benchmarking)")
    } else if ip.is_documentation() {
        Some("documentation")
    } else {
        None
    }
}

/// Why a connection could not be made (the connection was allowed).
#[derive(Debug)]
pub enum ConnectError {
    /// Every address the name resolves to is refused: `(address, why)` of the first.
    Forbidden(IpAddr, &'static str),
    /// The name does not resolve.
    Unresolved(io::Error),
    /// No address accepted the connection (the last error).
    Failed(io::Error),
    /// Connecting took longer than allowed.
    TimedOut,
}

impl ConnectError {
    /// One clause for people and the model: "resolves only to a loopback address (127.0.0.1)".
    pub fn describe(&self, host: &RequestHost) -> String {
        match self {
            ConnectError::Forbidden(ip, why) => match host {
                RequestHost::Ip(_) => format!("`{ip}` is a {why} address"),
                RequestHost::Name(name) => {
                    format!("`{name}` resolves only to a {why} address ({ip})")
                }
            },
            ConnectError::Unresolved(e) => format!("`{host}` does not resolve ({e})"),
            ConnectError::Failed(e) => format!("connecting to `{host}` failed ({e})"),
            ConnectError::TimedOut => format!("connecting to `{host}` timed out"),
        }
    }
}

/// Resolves and connects to `host:port`. `pinned` is the `network.resolve` address of the name,
/// which is used as is; otherwise every resolved address is checked with [`forbidden`] and only
/// the acceptable ones are tried, in the resolver's order.
pub async fn connect(
    host: &RequestHost,
    port: u16,
    pinned: Option<IpAddr>,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), ConnectError> {
    let work = async {
        let candidates: Vec<SocketAddr> = match (pinned, host) {
            (Some(ip), _) => vec![SocketAddr::new(ip, port)],
            (None, RequestHost::Ip(ip)) => vec![SocketAddr::new(*ip, port)],
            (None, RequestHost::Name(name)) => tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(ConnectError::Unresolved)?
                .collect(),
        };
        let mut refused = None;
        let mut last_error = None;
        for addr in candidates {
            if pinned.is_none()
                && let Some(why) = forbidden(addr.ip())
            {
                refused.get_or_insert((addr.ip(), why));
                continue;
            }
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok((stream, addr)),
                Err(e) => last_error = Some(e),
            }
        }
        Err(match (last_error, refused) {
            (Some(e), _) => ConnectError::Failed(e),
            (None, Some((ip, why))) => ConnectError::Forbidden(ip, why),
            (None, None) => {
                ConnectError::Unresolved(io::Error::new(io::ErrorKind::NotFound, "no address"))
            }
        })
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::TimedOut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_and_public_ones_pass() {
        for (ip, why) in [
            ("127.0.0.1", "loopback"),
            ("127.5.6.7", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.100.100.200", "cloud metadata"),
            ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "private (unique local)"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "cloud metadata"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("::127.0.0.1", "reserved"),
        ] {
            assert_eq!(forbidden(ip.parse().unwrap()), Some(why), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "140.82.112.3",
            "2606:4700::1111",
            "64:ff9b::8.8.8.8",
        ] {
            assert_eq!(forbidden(ip.parse().unwrap()), None, "{ip}");
        }
    }
}

//! SOCKS5 (RFC 1928), CONNECT only and without authentication, for clients that only know
//! SOCKS (`ALL_PROXY=socks5h://...`). Parsing is over a byte buffer, like the HTTP side:
//! incomplete input asks for more, anything malformed is refused with a reply code.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bridle_policy::network::{RequestHost, parse_host};

/// The first byte of every SOCKS5 message.
pub const VERSION: u8 = 5;

/// Reply codes.
pub mod reply {
    /// Succeeded.
    pub const OK: u8 = 0x00;
    /// General failure.
    pub const FAILURE: u8 = 0x01;
    /// Connection not allowed by ruleset.
    pub const NOT_ALLOWED: u8 = 0x02;
    /// Host unreachable.
    pub const HOST_UNREACHABLE: u8 = 0x04;
    /// Connection refused.
    pub const REFUSED: u8 = 0x05;
    /// TTL expired (used for timeouts).
    pub const TIMED_OUT: u8 = 0x06;
    /// Command not supported.
    pub const COMMAND_UNSUPPORTED: u8 = 0x07;
    /// Address type not supported.
    pub const ADDRESS_UNSUPPORTED: u8 = 0x08;
}

/// Why a SOCKS exchange is refused: the reply code to send (none when the greeting itself is
/// unusable) and a description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The reply to send before closing, when a request was read.
    pub reply: Option<u8>,
    /// What was wrong.
    pub why: String,
}

fn refused(reply: Option<u8>, why: impl Into<String>) -> Refused {
    Refused {
        reply,
        why: why.into(),
    }
}

/// The greeting: `VER NMETHODS METHODS...`. Returns its length once complete. Only "no
/// authentication" (0) is accepted: the proxy is reachable from this sandbox alone.
pub fn greeting(buf: &[u8]) -> Result<Option<usize>, Refused> {
    let [version, count, ..] = buf else {
        return Ok(None);
    };
    if *version != VERSION {
        return Err(refused(None, format!("SOCKS version {version} (only 5)")));
    }
    let len = 2 + usize::from(*count);
    let Some(methods) = buf.get(2..len) else {
        return Ok(None);
    };
    if !methods.contains(&0) {
        return Err(refused(
            None,
            "the client offers no SOCKS method without authentication",
        ));
    }
    Ok(Some(len))
}

/// The answer to an acceptable greeting.
pub const METHOD_NO_AUTH: [u8; 2] = [VERSION, 0];
/// The answer to an unacceptable greeting.
pub const METHOD_NONE: [u8; 2] = [VERSION, 0xff];

/// The request: `VER CMD RSV ATYP DST.ADDR DST.PORT`. Returns the target and the request's
/// length once complete.
pub fn request(buf: &[u8]) -> Result<Option<(RequestHost, u16, usize)>, Refused> {
    let [version, command, _reserved, atyp, rest @ ..] = buf else {
        return Ok(None);
    };
    if *version != VERSION {
        return Err(refused(
            Some(reply::FAILURE),
            format!("SOCKS version {version} in the request"),
        ));
    }
    let (host, addr_len) = match atyp {
        1 => match rest.get(..4) {
            Some(a) => (
                RequestHost::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
                4,
            ),
            None => return Ok(None),
        },
        4 => match rest.get(..16).and_then(|a| <[u8; 16]>::try_from(a).ok()) {
            Some(a) => (RequestHost::Ip(IpAddr::V6(Ipv6Addr::from(a))), 16),
            None => return Ok(None),
        },
        3 => {
            let Some(&len) = rest.first() else {
                return Ok(None);
            };
            let len = usize::from(len);
            let Some(name) = rest.get(1..1 + len) else {
                return Ok(None);
            };
            let text = std::str::from_utf8(name).map_err(|_| {
                refused(
                    Some(reply::NOT_ALLOWED),
                    "a SOCKS host name that is not text",
                )
            })?;
            let host = parse_host(text).map_err(|e| refused(Some(reply::NOT_ALLOWED), e))?;
            (host, 1 + len)
        }
        other => {
            return Err(refused(
                Some(reply::ADDRESS_UNSUPPORTED),
                format!("SOCKS address type {other}"),
            ));
        }
    };
    let Some(port) = rest.get(addr_len..addr_len + 2) else {
        return Ok(None);
    };
    let port = u16::from_be_bytes([port[0], port[1]]);
    if *command != 1 {
        return Err(refused(
            Some(reply::COMMAND_UNSUPPORTED),
            format!("SOCKS command {command} (only CONNECT)"),
        ));
    }
    if port == 0 {
        return Err(refused(Some(reply::NOT_ALLOWED), "port 0"));
    }
    Ok(Some((host, port, 4 + addr_len + 2)))
}

/// A reply with an empty bound address.
pub fn answer(code: u8) -> [u8; 10] {
    [VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_by_name_parses_in_pieces() {
        let greet = [5, 2, 2, 0];
        assert_eq!(greeting(&greet[..1]), Ok(None));
        assert_eq!(greeting(&greet[..3]), Ok(None));
        assert_eq!(greeting(&greet), Ok(Some(4)));
        let mut req = vec![5, 1, 0, 3, 9];
        req.extend_from_slice(b"crates.io");
        req.extend_from_slice(&443u16.to_be_bytes());
        for cut in 0..req.len() {
            assert_eq!(request(&req[..cut]), Ok(None), "{cut}");
        }
        assert_eq!(
            request(&req),
            Ok(Some((
                RequestHost::Name("crates.io".into()),
                443,
                req.len()
            )))
        );
        let v4 = [5, 1, 0, 1, 127, 0, 0, 1, 0, 80];
        assert!(matches!(
            request(&v4),
            Ok(Some((RequestHost::Ip(_), 80, 10)))
        ));
    }

    proptest::proptest! {
        /// Parsing any bytes is total, and a name that parses holds no line break.
        #[test]
        fn any_bytes_parse_or_are_refused(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = greeting(&raw);
            if let Ok(Some((RequestHost::Name(name), _, _))) = request(&raw) {
                proptest::prop_assert!(!name.contains(['\r', '\n', ' ']));
            }
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reply_code() {
        assert!(greeting(&[4, 1, 0]).is_err());
        assert!(greeting(&[5, 1, 2]).is_err());
        let name_with_crlf = {
            let mut r = vec![5, 1, 0, 3, 6];
            r.extend_from_slice(b"a\r\nb.c");
            r.extend_from_slice(&[0, 80]);
            r
        };
        for (req, code) in [
            (
                vec![5, 2, 0, 1, 1, 2, 3, 4, 0, 80],
                reply::COMMAND_UNSUPPORTED,
            ),
            (
                vec![5, 3, 0, 1, 1, 2, 3, 4, 0, 80],
                reply::COMMAND_UNSUPPORTED,
            ),
            (
                vec![5, 1, 0, 9, 1, 2, 3, 4, 0, 80],
                reply::ADDRESS_UNSUPPORTED,
            ),
            (vec![5, 1, 0, 3, 2, 0xff, 0xfe, 0, 80], reply::NOT_ALLOWED),
            (name_with_crlf, reply::NOT_ALLOWED),
            (vec![5, 1, 0, 1, 1, 2, 3, 4, 0, 0], reply::NOT_ALLOWED),
            (vec![4, 1, 0, 1, 1, 2, 3, 4, 0, 80], reply::FAILURE),
        ] {
            assert_eq!(request(&req).unwrap_err().reply, Some(code), "{req:?}");
        }
    }
}

//! The HTTP side of the proxy: a request head (`CONNECT host:port` or an absolute-form
//! `GET http://host/path`), parsed with `httparse` under a size limit, and the responses the
//! proxy writes itself (`200 Connection established`, `403`, `400`, `502`, ...).

use bridle_policy::network::{RequestHost, split_host_port};

/// Headers a request head may carry.
pub const MAX_HEADERS: usize = 100;

/// What a client asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel (TLS goes through it untouched).
    Connect {
        /// The host.
        host: RequestHost,
        /// The port.
        port: u16,
    },
    /// A plain HTTP request to forward: `head` is the request rewritten for the origin server
    /// (origin-form target, hop-by-hop and proxy headers removed, `Connection: close`).
    Forward {
        /// The host.
        host: RequestHost,
        /// The port (80 unless the URI says otherwise).
        port: u16,
        /// The rewritten request head, ending in the blank line.
        head: Vec<u8>,
    },
}

/// Why a request head is refused, with the status to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// Why, for the body.
    pub why: String,
}

fn bad(why: impl Into<String>) -> Refused {
    Refused {
        status: 400,
        why: why.into(),
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` while it is incomplete, or the request
/// and the length of its head (bytes after it belong to the tunnel or the request body).
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, Refused> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refused {
                status: 431,
                why: format!("more than {MAX_HEADERS} header fields"),
            });
        }
        Err(e) => return Err(bad(format!("malformed request: {e}"))),
    };
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    let version = req.version.unwrap_or(1);
    if method.eq_ignore_ascii_case("CONNECT") {
        return parse_connect(target).map(|r| Some((r, len)));
    }
    let Some((host, port, path)) = absolute_target(target)? else {
        return Err(bad(format!(
            "`{}` is not a proxy request: name the host in an absolute URI (`http://host/path`), or use CONNECT",
            target.escape_debug()
        )));
    };
    let mut head = format!("{method} {path} HTTP/1.{version}\r\n").into_bytes();
    let mut hop_by_hop: Vec<String> = vec![
        "connection".into(),
        "proxy-connection".into(),
        "keep-alive".into(),
        "proxy-authorization".into(),
        "proxy-authenticate".into(),
        "te".into(),
        "trailer".into(),
        "upgrade".into(),
        "host".into(),
    ];
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            let listed = String::from_utf8_lossy(h.value).to_ascii_lowercase();
            hop_by_hop.extend(listed.split(',').map(|t| t.trim().to_owned()));
        }
    }
    let authority = match (&host, port) {
        (h, 80) => h.to_string(),
        (h, p) => format!("{h}:{p}"),
    };
    head.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    for h in req.headers.iter() {
        if hop_by_hop.iter().any(|n| h.name.eq_ignore_ascii_case(n)) {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some((Request::Forward { host, port, head }, len)))
}

fn parse_connect(target: &str) -> Result<Request, Refused> {
    let has_port = if target.starts_with('[') {
        target.contains("]:")
    } else {
        target.matches(':').count() == 1
    };
    if !has_port {
        return Err(bad(format!(
            "CONNECT needs `host:port`, not `{}`",
            target.escape_debug()
        )));
    }
    let (host, port) = split_host_port(target, 0).map_err(bad)?;
    Ok(Request::Connect { host, port })
}

/// `http://authority/path` → host, port, origin-form path. `None` for an origin-form target.
fn absolute_target(target: &str) -> Result<Option<(RequestHost, u16, String)>, Refused> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Ok(None);
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad(format!(
            "`{}://` requests are not forwarded: use CONNECT for https (HTTPS_PROXY), plain http otherwise",
            scheme.escape_debug()
        )));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err(bad(
            "credentials in a proxy request URI are not forwarded; send them in a header",
        ));
    }
    let (host, port) = split_host_port(authority, 80).map_err(bad)?;
    let path = match path {
        "" => "/".to_owned(),
        p if p.starts_with('/') => p.split('#').next().unwrap_or("/").to_owned(),
        p => format!("/{}", p.split('#').next().unwrap_or_default()),
    };
    Ok(Some((host, port, path)))
}

/// A complete response the proxy writes itself, with a plain-text body.
pub fn response(status: u16, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "Connection established",
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    if status == 200 {
        return format!("HTTP/1.1 200 {reason}\r\n\r\n").into_bytes();
    }
    let body = format!("{}\n", body.replace(['\r', '\n'], " "));
    let error = match status {
        403 => "\r\nX-Proxy-Error: blocked-by-allowlist",
        _ => "",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close{error}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> RequestHost {
        RequestHost::Name(n.into())
    }

    #[test]
    fn connect_names_host_and_port() {
        let (req, len) = parse(b"CONNECT Crates.io:443 HTTP/1.1\r\nHost: crates.io:443\r\n\r\nTLS")
            .unwrap()
            .unwrap();
        assert_eq!(
            req,
            Request::Connect {
                host: name("crates.io"),
                port: 443
            }
        );
        assert_eq!(len, 55);
        let (req, _) = parse(b"CONNECT [2606:4700::1111]:443 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(
            req,
            Request::Connect {
                host: RequestHost::Ip(_),
                port: 443
            }
        ));
    }

    #[test]
    fn forwarded_requests_are_rewritten_for_the_origin() {
        let raw = b"GET http://registry.test:8080/simple/x/?a=1 HTTP/1.1\r\nHost: spoofed\r\nProxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nAccept: */*\r\n\r\nbody";
        let (req, len) = parse(raw).unwrap().unwrap();
        assert_eq!(len, raw.len() - 4);
        let Request::Forward { host, port, head } = req else {
            panic!("{req:?}")
        };
        assert_eq!((host, port), (name("registry.test"), 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /simple/x/?a=1 HTTP/1.1\r\nHost: registry.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let (req, _) = parse(b"GET http://example.com HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        let Request::Forward { port, head, .. } = req else {
            panic!()
        };
        assert_eq!(port, 80);
        assert!(head.starts_with(b"GET / HTTP/1.0\r\nHost: example.com\r\n"));
    }

    #[test]
    fn malformed_and_hostile_heads_are_refused_with_a_status() {
        for (raw, status, needle) in [
            (&b"CONNECT evil.test HTTP/1.1\r\n\r\n"[..], 400, "host:port"),
            (b"CONNECT evil.test:0 HTTP/1.1\r\n\r\n", 400, "between 1"),
            (
                b"CONNECT evil.test:99999 HTTP/1.1\r\n\r\n",
                400,
                "between 1",
            ),
            (
                b"CONNECT ev\x01il.test:443 HTTP/1.1\r\n\r\n",
                400,
                "malformed",
            ),
            (b"CONNECT evil.test\r\n:443 HTTP/1.1\r\n\r\n", 400, ""),
            (
                b"CONNECT a%0d%0ab.test:443 HTTP/1.1\r\n\r\n",
                400,
                "contains `%`",
            ),
            (
                b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n",
                400,
                "not a proxy request",
            ),
            (b"GET https://x.test/ HTTP/1.1\r\n\r\n", 400, "use CONNECT"),
            (b"GET ftp://x.test/ HTTP/1.1\r\n\r\n", 400, "not forwarded"),
            (
                b"GET http://u:p@x.test/ HTTP/1.1\r\n\r\n",
                400,
                "credentials",
            ),
            (b"\x16\x03\x01\x02\x00 garbage\r\n\r\n", 400, "malformed"),
        ] {
            let err = parse(raw).unwrap_err();
            assert_eq!(err.status, status, "{raw:?}: {err:?}");
            assert!(err.why.contains(needle), "{raw:?}: {}", err.why);
        }
        let many = format!(
            "GET http://x.test/ HTTP/1.1\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(parse(many.as_bytes()).unwrap_err().status, 431);
        assert_eq!(
            parse(b"CONNECT crates.io:443 HTTP/1.1\r\nHost: c").unwrap(),
            None
        );
    }

    proptest::proptest! {
        /// Whatever a client sends, parsing is total; a forwarded head is one request line and
        /// headers, each ending in CRLF, with no bare CR or LF that could start another.
        #[test]
        fn any_bytes_parse_or_are_refused(raw in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
                                          tail in "[ -~\r\n]{0,200}") {
            let _ = parse(&raw);
            let text = format!("GET http://x.test/{tail} HTTP/1.1\r\nA: {tail}\r\n\r\n");
            if let Ok(Some((Request::Forward { head, .. }, _))) = parse(text.as_bytes()) {
                let head = String::from_utf8_lossy(&head).into_owned();
                let body = head.strip_suffix("\r\n\r\n").unwrap();
                for line in body.split("\r\n") {
                    proptest::prop_assert!(!line.contains('\r') && !line.contains('\n'), "{head:?}");
                }
            }
        }
    }

    #[test]
    fn responses_never_carry_a_line_break_from_their_body() {
        let text = String::from_utf8(response(403, "denied\r\nX-Injected: 1")).unwrap();
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        assert!(text.contains("X-Proxy-Error: blocked-by-allowlist"));
        assert!(text.ends_with("\r\n\r\ndenied  X-Injected: 1\n"));
        assert_eq!(
            response(200, ""),
            b"HTTP/1.1 200 Connection established\r\n\r\n"
        );
    }
}

//! A loopback HTTP server for the model adapter's tests: serves scripted replies, one per
//! connection, and keeps what it received.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub request_line: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

/// One scripted reply: status, extra headers, body, and a pause after the headers.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub stall: Duration,
}

/// A reply that is no reply: the connection closes once the request is read.
pub fn hang_up() -> Reply {
    Reply {
        status: 0,
        headers: Vec::new(),
        body: String::new(),
        stall: Duration::ZERO,
    }
}

pub fn sse(events: &[serde_json::Value]) -> Reply {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Reply {
        status: 200,
        headers: vec![("Content-Type", "text/event-stream".into())],
        body,
        stall: Duration::ZERO,
    }
}

pub fn raw_sse(body: &str) -> Reply {
    Reply {
        status: 200,
        headers: vec![("Content-Type", "text/event-stream".into())],
        body: body.into(),
        stall: Duration::ZERO,
    }
}

pub fn status(code: u16, body: &str) -> Reply {
    Reply {
        status: code,
        headers: vec![("Content-Type", "application/json".into())],
        body: body.into(),
        stall: Duration::ZERO,
    }
}

/// Serves `replies` in order, one per connection; returns the base URL and what it received.
pub fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&received);
    std::thread::spawn(move || {
        for reply in replies {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let log = Arc::clone(&log);
            // Each connection on its own thread: a stalled reply does not hold up the next.
            std::thread::spawn(move || answer(stream, reply, &log));
        }
    });
    (url, received)
}

fn answer(stream: std::net::TcpStream, reply: Reply, log: &Mutex<Vec<Received>>) {
    {
        {
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let line = line.trim_end().to_owned();
                if line.is_empty() {
                    break;
                }
                let (k, v) = line.split_once(':').unwrap();
                headers.push((k.trim().to_lowercase(), v.trim().to_owned()));
            }
            let length: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .map_or(0, |(_, v)| v.parse().unwrap());
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            log.lock().unwrap().push(Received {
                request_line: request_line.trim_end().to_owned(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
            });
            let mut stream = reader.into_inner();
            if reply.status == 0 {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
            let mut head = format!(
                "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                reply.status,
                reply.body.len()
            );
            for (k, v) in &reply.headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
            std::thread::sleep(reply.stall);
            let _ = stream.write_all(reply.body.as_bytes());
            let _ = stream.flush();
        }
    }
}

//! When a started node counts as ready: its application started (default), a log line matching
//! a regex, a TCP port accepting connections, or an HTTP URL answering 2xx/3xx.

use super::logs::{LogBuffer, Query};
use regex::Regex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Default)]
pub enum Readiness {
    /// Booted and, when Mix runs the project (a `path` start, or a command such as `mix
    /// phx.server` or `iex -S mix`), the project's applications started.
    #[default]
    App,
    /// A log line (stdout, stderr or logger) matches.
    LogLine(Regex),
    /// Something accepts TCP connections on this port on 127.0.0.1.
    Port(u16),
    /// A GET of this `http://` URL answers 2xx or 3xx.
    Http(String),
}

/// What one check of a readiness condition saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Probe {
    pub met: bool,
    /// What was seen, for the message when the condition is not met in time:
    /// `GET http://…/health answered 404 Not Found: "{\"error\"…"`, `port 4000: connection
    /// refused`. Empty for [`Readiness::App`] (the caller knows the application's state).
    pub saw: String,
}

impl Probe {
    fn met() -> Self {
        Self {
            met: true,
            saw: String::new(),
        }
    }

    fn not_yet(saw: String) -> Self {
        Self { met: false, saw }
    }
}

impl Readiness {
    /// Checks the condition once (the helper has already answered).
    pub(super) async fn probe(&self, logs: &LogBuffer, app_started: bool) -> Probe {
        match self {
            Self::App if app_started => Probe::met(),
            Self::App => Probe::not_yet(String::new()),
            Self::LogLine(re) => {
                let query = Query {
                    tail: 1,
                    grep: Some(re.clone()),
                    ..Query::default()
                };
                if logs.query(&query).matched > 0 {
                    return Probe::met();
                }
                Probe::not_yet(format!(
                    "no log line matched `{re}` yet; the last ones: {}",
                    last_lines(logs)
                ))
            }
            Self::Port(port) => {
                match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(("127.0.0.1", *port)))
                    .await
                {
                    Ok(Ok(_)) => Probe::met(),
                    Ok(Err(e)) => Probe::not_yet(format!("port {port}: {}", connect_error(&e))),
                    Err(_) => Probe::not_yet(format!(
                        "port {port}: no answer to a connection within {} ms",
                        PROBE_TIMEOUT.as_millis()
                    )),
                }
            }
            Self::Http(url) => match http_get(url).await {
                HttpAnswer::Status { code, .. } if (200..400).contains(&code) => Probe::met(),
                answer => Probe::not_yet(format!("GET {url} {answer}")),
            },
        }
    }

    /// Checks the condition once, for callers that only need the verdict.
    #[cfg(test)]
    async fn met(&self, logs: &LogBuffer, app_started: bool) -> bool {
        self.probe(logs, app_started).await.met
    }

    pub fn describe(&self) -> String {
        match self {
            Self::App => "the application to start".into(),
            Self::LogLine(re) => format!("a log line matching `{re}`"),
            Self::Port(port) => format!("port {port} to accept connections"),
            Self::Http(url) => format!("{url} to answer 2xx/3xx"),
        }
    }

    /// Rejects URLs this minimal prober cannot use.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::Http(url) if split_url(url).is_none() => Err(format!(
                "readiness URL `{url}` must look like http://host:port/path (https is not supported)"
            )),
            _ => Ok(()),
        }
    }
}

/// `http://host[:port][/path]` → (host, port, path).
fn split_url(url: &str) -> Option<(String, u16, String)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().ok()?),
        None => (authority, 80),
    };
    (!host.is_empty()).then(|| (host.to_string(), port, path.to_string()))
}

/// What a GET of the readiness URL got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HttpAnswer {
    /// A status line, with the start of the body.
    Status {
        code: u16,
        reason: String,
        body: String,
    },
    /// No connection: refused, unreachable, no such host.
    NoConnection(String),
    /// Connected, but no status line within the probe timeout.
    Timeout,
    /// Something that is not an HTTP/1 answer (its first bytes).
    NotHttp(String),
}

impl std::fmt::Display for HttpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Status { code, reason, body } if body.is_empty() => {
                write!(f, "answered {code} {reason} (empty body)")
            }
            Self::Status { code, reason, body } => write!(f, "answered {code} {reason}: {body:?}"),
            Self::NoConnection(why) => write!(f, "could not connect: {why}"),
            Self::Timeout => write!(
                f,
                "connected but got no answer within {} ms",
                PROBE_TIMEOUT.as_millis()
            ),
            Self::NotHttp(start) => write!(f, "got an answer that is not HTTP: {start:?}"),
        }
    }
}

/// Bytes of an HTTP answer read: the status line, headers and the start of the body.
const HTTP_READ_BYTES: usize = 2048;
/// Characters of a body quoted in a readiness failure.
const BODY_QUOTE_CHARS: usize = 80;

/// One GET of `url`, bounded by the probe timeout.
async fn http_get(url: &str) -> HttpAnswer {
    let Some((host, port, path)) = split_url(url) else {
        return HttpAnswer::NoConnection("not an http:// URL".into());
    };
    let exchange = async {
        let mut stream = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| HttpAnswer::NoConnection(connect_error(&e)))?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| HttpAnswer::NoConnection(e.to_string()))?;
        let mut answer = Vec::with_capacity(HTTP_READ_BYTES);
        let mut buf = [0u8; 512];
        // Until the whole head and a little body are in, the peer closes, or the cap.
        while answer.len() < HTTP_READ_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if let Some(head_end) = find(&answer, b"\r\n\r\n") {
                if answer.len() >= head_end + 4 + BODY_QUOTE_CHARS {
                    break;
                }
            }
        }
        Ok::<_, HttpAnswer>(parse_answer(&answer))
    };
    match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(Ok(answer) | Err(answer)) => answer,
        Err(_) => HttpAnswer::Timeout,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_answer(answer: &[u8]) -> HttpAnswer {
    let text = String::from_utf8_lossy(answer);
    let status_line = text.lines().next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let code = match (parts.next(), parts.next()) {
        (Some(version), Some(code)) if version.starts_with("HTTP/1.") => code.parse().ok(),
        _ => None,
    };
    let Some(code) = code else {
        return if answer.is_empty() {
            HttpAnswer::NotHttp(String::new())
        } else {
            HttpAnswer::NotHttp(quote(&text))
        };
    };
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| quote(body))
        .unwrap_or_default();
    HttpAnswer::Status {
        code,
        reason: parts.next().unwrap_or_default().trim().to_string(),
        body,
    }
}

/// The start of `text` on one line, cut with a visible marker.
fn quote(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(BODY_QUOTE_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

fn connect_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            "connection refused (nothing listens there)".into()
        }
        _ => e.to_string(),
    }
}

/// The node's last few log lines, each cut, for a log-line condition not met.
fn last_lines(logs: &LogBuffer) -> String {
    let query = Query {
        tail: 3,
        ..Query::default()
    };
    let lines: Vec<String> = logs
        .query(&query)
        .lines
        .iter()
        .map(|line| quote(&line.text))
        .collect();
    if lines.is_empty() {
        "(none)".into()
    } else {
        lines.join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_host_port_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:4000/health"),
            Some(("127.0.0.1".into(), 4000, "/health".into()))
        );
        assert_eq!(
            split_url("http://localhost"),
            Some(("localhost".into(), 80, "/".into()))
        );
        assert!(split_url("https://x").is_none());
        assert!(Readiness::Http("ftp://x".into()).validate().is_err());
    }

    #[tokio::test]
    async fn probes_ports_and_http_servers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let _ = socket.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
            }
        });
        let logs = LogBuffer::default();
        assert!(Readiness::Port(port).met(&logs, false).await);
        assert!(
            Readiness::Http(format!("http://127.0.0.1:{port}/"))
                .met(&logs, false)
                .await
        );
        logs.push(
            super::super::logs::Source::Stdout,
            None,
            "Running on port 4000",
            false,
        );
        assert!(
            Readiness::LogLine(Regex::new("port \\d+").unwrap())
                .met(&logs, false)
                .await
        );
        assert!(!Readiness::App.met(&logs, false).await);
    }
}

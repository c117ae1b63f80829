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
    /// Booted and, for Mix projects, the project's application started.
    #[default]
    App,
    /// A log line (stdout, stderr or logger) matches.
    LogLine(Regex),
    /// Something accepts TCP connections on this port on 127.0.0.1.
    Port(u16),
    /// A GET of this `http://` URL answers 2xx or 3xx.
    Http(String),
}

impl Readiness {
    /// Checks the condition once (the helper has already answered).
    pub(super) async fn met(&self, logs: &LogBuffer, app_started: bool) -> bool {
        match self {
            Self::App => app_started,
            Self::LogLine(re) => {
                let query = Query {
                    tail: 1,
                    grep: Some(re.clone()),
                    ..Query::default()
                };
                logs.query(&query).matched > 0
            }
            Self::Port(port) => {
                tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(("127.0.0.1", *port)))
                    .await
                    .is_ok_and(|c| c.is_ok())
            }
            Self::Http(url) => http_status(url)
                .await
                .is_some_and(|s| (200..400).contains(&s)),
        }
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

/// The status code of a GET, or None if there is no HTTP answer within the probe timeout.
async fn http_status(url: &str) -> Option<u16> {
    let (host, port, path) = split_url(url)?;
    tokio::time::timeout(PROBE_TIMEOUT, async {
        let mut stream = TcpStream::connect((host.as_str(), port)).await.ok()?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 64];
        let n = stream.read(&mut head).await.ok()?;
        let line = std::str::from_utf8(&head[..n]).ok()?;
        line.strip_prefix("HTTP/1.")?.get(2..5)?.parse().ok()
    })
    .await
    .ok()
    .flatten()
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

//! `keel healthcheck`: asks a running server's `/health/live` (or `/health/ready`) and exits 0
//! only on a 200, for a container's `HEALTHCHECK` in an image that carries no HTTP client.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::cli::CliError;
use crate::config::Config;

const TIMEOUT: Duration = Duration::from_secs(3);

/// The URL asked: `url` when given, else this configuration's own server (`HOST`, with the
/// loopback address for a wildcard, and `PORT`).
pub fn target(config: &Config, ready: bool, url: Option<String>) -> String {
    if let Some(url) = url {
        return url;
    }
    let host = match config.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_owned(),
        "::" | "[::]" => "[::1]".to_owned(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_owned(),
    };
    let path = if ready {
        "/health/ready"
    } else {
        "/health/live"
    };
    format!("http://{host}:{}{path}", config.port)
}

/// `http://host[:port]/path` split into the address to connect to, the `Host` header and the path.
fn split_url(url: &str) -> Result<(String, String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?}: only http:// URLs are probed"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(format!("{url:?} has no host"));
    }
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let addr = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok((addr, authority.to_owned(), path.to_owned()))
}

/// The status code of `GET url`.
fn status_of(url: &str) -> Result<u16, String> {
    let (addr, host, path) = split_url(url)?;
    let socket = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&socket, TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    // One write: a request sent in pieces can meet a server that answers and closes after the
    // first piece, and the reset that its unread rest causes can discard the answer.
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nUser-Agent: keel-healthcheck\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        let n = stream.read(&mut head[read..]).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        read += n;
    }
    let line = String::from_utf8_lossy(&head[..read]);
    line.strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))
}

/// `keel healthcheck`.
pub fn run(config: &Config, ready: bool, url: Option<String>) -> Result<(), CliError> {
    let url = target(config, ready, url);
    match status_of(&url) {
        Ok(200) => {
            println!("{url}: 200");
            Ok(())
        }
        Ok(status) => Err(CliError::Failed(format!("{url}: {status}"))),
        Err(e) => Err(CliError::Failed(format!("{url}: {e}"))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_default_target_is_this_servers_own_port() {
        let mut config = Config {
            host: "0.0.0.0".to_owned(),
            port: 8123,
            ..Config::default()
        };
        assert_eq!(
            target(&config, false, None),
            "http://127.0.0.1:8123/health/live"
        );
        config.host = "::".to_owned();
        assert_eq!(
            target(&config, true, None),
            "http://[::1]:8123/health/ready"
        );
        assert_eq!(
            target(&config, true, Some("http://x/y".into())),
            "http://x/y"
        );
    }

    #[test]
    fn urls_split_into_address_host_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:8000/health/live").unwrap(),
            (
                "127.0.0.1:8000".into(),
                "127.0.0.1:8000".into(),
                "/health/live".into()
            )
        );
        assert_eq!(
            split_url("http://[::1]/").unwrap(),
            ("[::1]:80".into(), "[::1]".into(), "/".into())
        );
        assert!(split_url("https://example.com/").is_err());
        assert!(split_url("http:///x").is_err());
    }

    /// A one-connection server that reads a request's head, then answers `status`.
    fn answering(status: &'static str) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            if let Ok((mut conn, _)) = listener.accept() {
                let mut request = Vec::new();
                let mut buf = [0u8; 512];
                while !request.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        format!("http://127.0.0.1:{port}/health/live")
    }

    #[test]
    fn only_a_200_passes() {
        let config = Config::default();
        assert!(run(&config, false, Some(answering("200 OK"))).is_ok());
        let err = run(&config, true, Some(answering("503 Service Unavailable"))).unwrap_err();
        assert!(err.to_string().ends_with(": 503"), "{err}");
    }

    #[test]
    fn a_closed_port_fails() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let config = Config::default();
        let url = format!("http://127.0.0.1:{port}/health/live");
        assert!(run(&config, false, Some(url)).is_err());
    }
}

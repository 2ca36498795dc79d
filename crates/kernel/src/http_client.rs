//! The shared outbound HTTP client: one `reqwest::Client` per process (rustls on ring, connection
//! reuse, connect and read timeouts, a user agent), handed to every module in
//! [`crate::module::Deps`]. Provider clients set their own total timeout per request.

use std::time::Duration;

use crate::ConfigError;

/// How long an idle connection is kept for reuse: below the idle limits of the servers and load
/// balancers in front of providers (60 s on AWS's, 75 s on nginx), so that keel drops a
/// connection before the server does. A connection the server is closing, picked for a request,
/// fails that request midway ("connection closed before message completed"), and a POST is not
/// safe to send again.
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);

/// How the shared client behaves.
#[derive(Debug, Clone)]
pub struct HttpClientSettings {
    /// The longest a TCP and TLS connection may take (default 10 s).
    pub connect_timeout: Duration,
    /// The longest wait for any read of a response (default 60 s); a stream that stalls longer
    /// fails.
    pub read_timeout: Duration,
    /// Idle connections kept per host for reuse (default 512). Below the calls a host gets at
    /// once, every call past it opens a connection and closes it on return: at 64 concurrent
    /// email sends a pool of 32 opened about 300 connections a second to the provider.
    pub pool_max_idle_per_host: usize,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Default for HttpClientSettings {
    fn default() -> Self {
        HttpClientSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 512,
            user_agent: format!("keel/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

impl HttpClientSettings {
    /// Builds the client (installing the TLS crypto provider first).
    pub fn build(&self) -> Result<reqwest::Client, ConfigError> {
        crate::init_crypto();
        reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .pool_idle_timeout(IDLE_TIMEOUT)
            .tcp_nodelay(true)
            .user_agent(&self.user_agent)
            .build()
            .map_err(|e| ConfigError::new("HTTP client", e.to_string()))
    }
}

/// "no answer within 15 s (COMMS_TIMEOUT_SECONDS)": a provider call past its time limit, naming
/// the setting that sets it.
pub fn no_answer(timeout: Duration, setting: &str) -> String {
    format!("no answer within {} ({setting})", seconds(timeout))
}

/// `30 s`, or `0.3 s` below a second.
pub fn seconds(timeout: Duration) -> String {
    if timeout.subsec_millis() == 0 {
        format!("{} s", timeout.as_secs())
    } else {
        format!("{} s", timeout.as_secs_f64())
    }
}

/// A provider call that failed before an answer, in words a deployer can act on: its time limit
/// ([`no_answer`]), a host that cannot be reached (`cannot connect to <host>`), or the error chain.
pub fn transport_error(error: &reqwest::Error, timeout: Duration, setting: &str) -> String {
    if error.is_timeout() {
        no_answer(timeout, setting)
    } else if error.is_connect() {
        let host = error
            .url()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        format!("cannot connect to {host}")
    } else {
        format!("request failed: {}", crate::error::cause_chain(error))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timeouts_are_written_in_seconds() {
        use std::time::Duration;
        assert_eq!(super::seconds(Duration::from_secs(30)), "30 s");
        assert_eq!(super::seconds(Duration::from_millis(300)), "0.3 s");
        assert_eq!(
            super::no_answer(Duration::from_secs(15), "COMMS_TIMEOUT_SECONDS"),
            "no answer within 15 s (COMMS_TIMEOUT_SECONDS)"
        );
    }

    use super::*;

    #[test]
    fn the_default_client_builds() {
        assert!(HttpClientSettings::default().build().is_ok());
    }
}

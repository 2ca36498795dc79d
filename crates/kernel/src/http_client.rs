//! The shared outbound HTTP client: one `reqwest::Client` per process (rustls on ring, connection
//! reuse, connect and read timeouts, a user agent), handed to every module in
//! [`crate::module::Deps`]. Provider clients set their own total timeout per request.

use std::time::Duration;

use crate::ConfigError;

/// How the shared client behaves.
#[derive(Debug, Clone)]
pub struct HttpClientSettings {
    /// The longest a TCP and TLS connection may take (default 10 s).
    pub connect_timeout: Duration,
    /// The longest wait for any read of a response (default 60 s); a stream that stalls longer
    /// fails.
    pub read_timeout: Duration,
    /// Idle connections kept per host for reuse (default 32).
    pub pool_max_idle_per_host: usize,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Default for HttpClientSettings {
    fn default() -> Self {
        HttpClientSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            pool_max_idle_per_host: 32,
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
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            .user_agent(&self.user_agent)
            .build()
            .map_err(|e| ConfigError::new("HTTP client", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_client_builds() {
        assert!(HttpClientSettings::default().build().is_ok());
    }
}

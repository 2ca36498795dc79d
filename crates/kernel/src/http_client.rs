//! The outbound HTTP client ([`HttpClient`]): a `reqwest::Client` per thread that makes calls
//! (rustls on ring, connection reuse, connect and read timeouts, a user agent), all built from
//! one [`HttpClientSettings`] and handed to every module in [`crate::module::Deps`]. Provider
//! clients set their own total timeout per request.

use std::sync::Arc;
use std::time::Duration;

use thread_local::ThreadLocal;

use crate::ConfigError;

/// How long an idle connection is kept for reuse: below the idle limits of the servers and load
/// balancers in front of providers (60 s on AWS's, 75 s on nginx), so that keel drops a
/// connection before the server does. A connection the server is closing, picked for a request,
/// fails that request midway ("connection closed before message completed"), and a POST is not
/// safe to send again.
const IDLE_TIMEOUT: Duration = Duration::from_secs(50);

/// How the outbound clients behave.
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
    /// The process's outbound client: one `reqwest::Client` of these settings per thread
    /// ([`HttpClient`]). Fails when the settings cannot make a client.
    pub fn build(&self) -> Result<HttpClient, ConfigError> {
        let first = self.client()?;
        Ok(HttpClient(Arc::new(Clients::PerThread {
            settings: self.clone(),
            first,
            threads: ThreadLocal::new(),
        })))
    }

    /// One `reqwest::Client` of these settings (installing the TLS crypto provider first).
    pub fn client(&self) -> Result<reqwest::Client, ConfigError> {
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

/// The outbound HTTP client that modules make their provider calls with: [`get`](Self::get)
/// gives the calling thread's `reqwest::Client`. Cheap to clone (the clones share the clients).
///
/// Each thread gets a client of its own because hyper drives a connection on the runtime that
/// opened it. An HTTP worker is a single-threaded runtime of its own thread, and with one client
/// for the process a call made on one worker often took a connection that the other had opened:
/// its request went to that worker's thread to be written, and its answer came back from there,
/// two wake-ups of another thread per call. With a client per thread, a worker's calls use the
/// connections it opened itself (docs/performance.md: about a fifth less idle CPU per email
/// sent). Each thread keeps its own idle connections, and a thread that ended leaves its client
/// to the next thread started (`thread_local` reuses the slot), so there are never more clients
/// than threads alive at once.
#[derive(Clone)]
pub struct HttpClient(Arc<Clients>);

// One value per process, behind the `Arc`: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Clients {
    /// A client per thread, built from `settings` on the thread's first call.
    PerThread {
        settings: HttpClientSettings,
        /// Built when the settings were checked; also the client of a thread whose own could not
        /// be built (the same settings built it once, so that is not expected).
        first: reqwest::Client,
        threads: ThreadLocal<reqwest::Client>,
    },
    /// One client for every thread: one the host built itself.
    One(reqwest::Client),
}

impl HttpClient {
    /// The calling thread's client.
    pub fn get(&self) -> &reqwest::Client {
        match &*self.0 {
            Clients::PerThread {
                settings,
                first,
                threads,
            } => threads.get_or(|| settings.client().unwrap_or_else(|_| first.clone())),
            Clients::One(client) => client,
        }
    }
}

/// A client the host built: every thread makes its calls with it.
impl From<reqwest::Client> for HttpClient {
    fn from(client: reqwest::Client) -> Self {
        HttpClient(Arc::new(Clients::One(client)))
    }
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &*self.0 {
            Clients::PerThread { .. } => "a client per thread",
            Clients::One(_) => "one client",
        };
        f.debug_tuple("HttpClient").field(&kind).finish()
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
    #![allow(clippy::unwrap_used)]

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

    /// Each thread gets its own client, the same one on every call; clones share them; a client
    /// the host built serves every thread.
    #[test]
    fn each_thread_gets_a_client_of_its_own() {
        // Where each `get` points: the same address is the same client.
        let http = HttpClientSettings::default().build().unwrap();
        let address = |http: &HttpClient| http.get() as *const reqwest::Client as usize;
        let here = address(&http);
        assert_eq!(address(&http), here);
        assert_eq!(address(&http.clone()), here);
        let there = {
            let http = http.clone();
            std::thread::spawn(move || address(&http)).join().unwrap()
        };
        assert_ne!(there, here);

        let one = HttpClient::from(reqwest::Client::new());
        let here = address(&one);
        let there = {
            let one = one.clone();
            std::thread::spawn(move || address(&one)).join().unwrap()
        };
        assert_eq!(there, here);
    }
}

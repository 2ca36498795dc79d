//! The server's settings, read once at start from the environment (and `.env`), with each
//! compiled module's own settings beside them.

use kernel::Authenticator;
use kernel::ConfigError;
use kernel::config::{list, parse, parse_in_range, var};
use kernel::module::{Deployment, Settings};

use crate::modules;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// `HOST` (default 127.0.0.1).
    pub host: String,
    /// `PORT` (default 8000; 0 picks a free port).
    pub port: u16,
    /// `DATABASE_URL` (default `sqlite://data/keel.db`).
    pub database_url: String,
    /// `DATABASE_POOL_SIZE` (default 10 for PostgreSQL, 4 for SQLite).
    pub db_pool_size: usize,
    /// `DATABASE_TIMEOUT_SECONDS` (default 10): the longest a request waits for a pooled
    /// connection or for a new one to open; past it, 503.
    pub db_timeout_seconds: u64,
    /// `KEEL_MODULES`: the modules to mount, by name (default: every compiled module).
    pub modules: Vec<&'static str>,
    /// `LOG_FORMAT` (`pretty` or `json`, default pretty).
    pub log_format: LogFormat,
    /// `MAX_JSON_BYTES` (default 1 MiB).
    pub max_json_bytes: usize,
    /// `CORS_ORIGINS`: comma-separated origins allowed to call the API from a browser, or `*`.
    pub cors_origins: Vec<String>,
    /// `HTTP_WORKERS` (default: one per CPU core).
    pub http_workers: usize,
    /// `SHUTDOWN_TIMEOUT_SECONDS`: how long in-flight requests get on SIGTERM/SIGINT (default 30).
    pub shutdown_timeout_seconds: u64,
    /// `REDIS_URL` (default `redis://localhost:6379`): the deployment's Redis, for state that
    /// instances share (looked for only when a module asks).
    pub redis_url: String,
    /// `REDIS_DB`: overrides the database number of `REDIS_URL`.
    pub redis_db: Option<i64>,
    /// `READ_CACHE` (default on): serve hot public reads (blog list, post, tags; the user behind a
    /// token) from an in-process cache that local writes clear at once and that holds nothing
    /// older than a second.
    pub read_cache: bool,
    /// `METRICS_ENABLED` (default false): Prometheus metrics at `GET /metrics`.
    pub metrics_enabled: bool,
    /// `METRICS_ADDR`: a `host:port` that serves `/metrics` instead of the main port.
    pub metrics_addr: Option<String>,
    /// `TRUSTED_PROXIES` (default none) and `TRUSTED_PROXY_HEADER` (default `x-forwarded-for`):
    /// the reverse proxies whose forwarding header names the client (see
    /// `kernel::client_addr`).
    pub trusted_proxies: kernel::client_addr::TrustedProxies,
    /// Every compiled module's settings (`settings.get_mut::<AuthConfig>()`, ...).
    pub settings: Settings,
}

impl Default for Config {
    /// The defaults, without reading the environment: SQLite at `data/keel.db`, every compiled
    /// module mounted with its default settings.
    fn default() -> Self {
        let mut settings = Settings::default();
        for entry in modules::compiled() {
            entry.default_settings(&mut settings);
        }
        Config {
            host: "127.0.0.1".to_owned(),
            port: 8000,
            database_url: kernel::db::DEFAULT_DATABASE_URL.to_owned(),
            db_pool_size: 4,
            db_timeout_seconds: kernel::db::DEFAULT_TIMEOUT.as_secs(),
            modules: modules::names(),
            log_format: LogFormat::Pretty,
            max_json_bytes: kernel::http::DEFAULT_MAX_JSON_BYTES,
            cors_origins: Vec::new(),
            http_workers: cpus(),
            shutdown_timeout_seconds: 30,
            redis_url: DEFAULT_REDIS_URL.to_owned(),
            redis_db: None,
            read_cache: true,
            metrics_enabled: false,
            metrics_addr: None,
            trusted_proxies: kernel::client_addr::TrustedProxies::none(),
            settings,
        }
    }
}

const DEFAULT_REDIS_URL: &str = "redis://localhost:6379";

fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

impl Config {
    /// Reads every setting. A value that is present but invalid is refused by name; with
    /// `APP_ENV=production`, so is every unsafe one, all named at once (see
    /// [`Config::production_problems`]).
    pub fn from_env() -> Result<Config, ConfigError> {
        let config = Config::read_env()?;
        if kernel::config::is_production() {
            kernel::config::refuse_unsafe(config.production_problems())?;
        }
        Ok(config)
    }

    /// What `APP_ENV=production` refuses in these settings: the problems every compiled module
    /// reports for its own settings (mounted or not: a module command may still use them), each
    /// naming its setting and what to set.
    pub fn production_problems(&self) -> Vec<ConfigError> {
        let compiled = modules::compiled();
        let deployment = Deployment {
            identity: compiled
                .iter()
                .any(|e| e.provides::<dyn Authenticator>() && self.is_enabled(e.name)),
        };
        compiled
            .iter()
            .flat_map(|e| e.production_problems(&self.settings, &deployment))
            .collect()
    }

    fn read_env() -> Result<Config, ConfigError> {
        let database_url =
            var("DATABASE_URL").unwrap_or_else(|| kernel::db::DEFAULT_DATABASE_URL.to_owned());
        let backend = kernel::db::parse_url(&database_url)
            .map_err(|e| ConfigError::new("DATABASE_URL", e.to_string()))?
            .0;
        let default_pool = match backend {
            kernel::db::Backend::Postgres => 10,
            kernel::db::Backend::Sqlite => 4,
        };
        let log_format = match var("LOG_FORMAT")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("pretty") => LogFormat::Pretty,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(ConfigError::new(
                    "LOG_FORMAT",
                    format!("{other:?} is not pretty or json"),
                ));
            }
        };
        let mut settings = Settings::default();
        for entry in modules::compiled() {
            entry.load_settings(&mut settings)?;
        }
        Ok(Config {
            host: var("HOST").unwrap_or_else(|| "127.0.0.1".to_owned()),
            port: parse("PORT", 8000)?,
            database_url,
            db_pool_size: parse_in_range("DATABASE_POOL_SIZE", default_pool, 1..=1000)?,
            db_timeout_seconds: parse_in_range(
                "DATABASE_TIMEOUT_SECONDS",
                kernel::db::DEFAULT_TIMEOUT.as_secs(),
                1..=600,
            )?,
            modules: parse_modules(list("KEEL_MODULES"))?,
            log_format,
            max_json_bytes: parse_in_range(
                "MAX_JSON_BYTES",
                kernel::http::DEFAULT_MAX_JSON_BYTES,
                1024..=1 << 30,
            )?,
            cors_origins: list("CORS_ORIGINS").unwrap_or_default(),
            http_workers: parse_in_range("HTTP_WORKERS", cpus(), 1..=1024)?,
            shutdown_timeout_seconds: parse_in_range("SHUTDOWN_TIMEOUT_SECONDS", 30, 0..=3600)?,
            redis_url: var("REDIS_URL").unwrap_or_else(|| DEFAULT_REDIS_URL.to_owned()),
            redis_db: match var("REDIS_DB") {
                None => None,
                Some(_) => Some(parse_in_range("REDIS_DB", 0, 0..=10_000)?),
            },
            read_cache: kernel::config::flag("READ_CACHE", true)?,
            metrics_enabled: kernel::config::flag("METRICS_ENABLED", false)?,
            metrics_addr: parse_metrics_addr(var("METRICS_ADDR"))?,
            trusted_proxies: kernel::client_addr::TrustedProxies::from_env()?,
            settings,
        })
    }

    pub fn is_enabled(&self, module: &str) -> bool {
        self.modules.contains(&module)
    }
}

/// `METRICS_ADDR`: `host:port` (`0.0.0.0:9100`, `[::1]:9100`, `localhost:9100`).
fn parse_metrics_addr(addr: Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let valid = addr
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if valid {
        Ok(Some(addr))
    } else {
        Err(ConfigError::new(
            "METRICS_ADDR",
            format!("{addr:?} is not host:port (e.g. 0.0.0.0:9100)"),
        ))
    }
}

/// `KEEL_MODULES`: names of compiled modules; absent means all of them.
fn parse_modules(names: Option<Vec<String>>) -> Result<Vec<&'static str>, ConfigError> {
    let compiled = modules::names();
    let Some(names) = names else {
        return Ok(compiled);
    };
    let mut chosen = Vec::new();
    for name in names {
        let lower = name.to_ascii_lowercase();
        match compiled.iter().find(|c| **c == lower) {
            Some(module) => chosen.push(*module),
            None => {
                return Err(ConfigError::new(
                    "KEEL_MODULES",
                    format!(
                        "unknown module {name:?}: this build has {} (a module is compiled in by \
                         its Cargo feature)",
                        compiled.join(", ")
                    ),
                ));
            }
        }
    }
    // Mount in the canonical order whatever the order given.
    Ok(compiled
        .into_iter()
        .filter(|m| chosen.contains(m))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_default_to_all_compiled() {
        assert_eq!(parse_modules(None).ok(), Some(modules::names()));
        assert_eq!(parse_modules(Some(vec![])).ok(), Some(vec![]));
    }

    #[test]
    fn unknown_modules_are_refused() {
        let err = parse_modules(Some(vec!["billing".into()])).err();
        assert_eq!(err.map(|e| e.setting), Some("KEEL_MODULES".to_owned()));
    }

    #[test]
    fn metrics_addresses_need_a_host_and_a_port() {
        for good in ["0.0.0.0:9100", "[::1]:9100", "localhost:0"] {
            assert_eq!(
                parse_metrics_addr(Some(good.into())),
                Ok(Some(good.into())),
                "{good}"
            );
        }
        for bad in ["9100", ":9100", "localhost", "localhost:http", "h:70000"] {
            let err = parse_metrics_addr(Some(bad.into())).err();
            assert_eq!(
                err.map(|e| e.setting),
                Some("METRICS_ADDR".to_owned()),
                "{bad}"
            );
        }
        assert_eq!(parse_metrics_addr(None), Ok(None));
    }

    #[test]
    fn defaults_carry_every_compiled_module() {
        let config = Config::default();
        assert_eq!(config.modules, modules::names());
    }
}

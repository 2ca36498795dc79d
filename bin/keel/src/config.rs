//! The server's settings, read once at start from the environment (and `.env`).

use kernel::ConfigError;
use kernel::config::{list, parse, parse_in_range, var};

/// A module of Keel, as named in `KEEL_MODULES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Module {
    Auth,
    Blog,
    Tasks,
}

impl Module {
    /// Every module this build was compiled with, in mounting (and migration) order.
    #[allow(clippy::vec_init_then_push, unused_mut)]
    pub fn compiled() -> Vec<Module> {
        let mut modules = Vec::new();
        #[cfg(feature = "auth")]
        modules.push(Module::Auth);
        #[cfg(feature = "blog")]
        modules.push(Module::Blog);
        #[cfg(feature = "tasks")]
        modules.push(Module::Tasks);
        modules
    }

    pub fn name(self) -> &'static str {
        match self {
            Module::Auth => "auth",
            Module::Blog => "blog",
            Module::Tasks => "tasks",
        }
    }

    fn known() -> &'static [(&'static str, Module)] {
        &[
            ("auth", Module::Auth),
            ("blog", Module::Blog),
            ("tasks", Module::Tasks),
        ]
    }
}

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
    /// `KEEL_MODULES` (default: every compiled module).
    pub modules: Vec<Module>,
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
    #[cfg(feature = "auth")]
    pub auth: auth_core::AuthConfig,
    #[cfg(feature = "blog")]
    pub blog: blog_core::BlogConfig,
    #[cfg(feature = "tasks")]
    pub tasks: tasks_core::TasksConfig,
}

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
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
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        Ok(Config {
            host: var("HOST").unwrap_or_else(|| "127.0.0.1".to_owned()),
            port: parse("PORT", 8000)?,
            database_url,
            db_pool_size: parse_in_range("DATABASE_POOL_SIZE", default_pool, 1..=1000)?,
            modules: parse_modules(list("KEEL_MODULES"))?,
            log_format,
            max_json_bytes: parse_in_range(
                "MAX_JSON_BYTES",
                kernel::http::DEFAULT_MAX_JSON_BYTES,
                1024..=1 << 30,
            )?,
            cors_origins: list("CORS_ORIGINS").unwrap_or_default(),
            http_workers: parse_in_range("HTTP_WORKERS", cpus, 1..=1024)?,
            shutdown_timeout_seconds: parse_in_range("SHUTDOWN_TIMEOUT_SECONDS", 30, 0..=3600)?,
            #[cfg(feature = "auth")]
            auth: auth_core::AuthConfig::from_env()?,
            #[cfg(feature = "blog")]
            blog: blog_core::BlogConfig::from_env()?,
            #[cfg(feature = "tasks")]
            tasks: tasks_core::TasksConfig::from_env()?,
        })
    }

    pub fn is_enabled(&self, module: Module) -> bool {
        self.modules.contains(&module)
    }
}

/// `KEEL_MODULES`: names of compiled modules; absent means all of them.
fn parse_modules(names: Option<Vec<String>>) -> Result<Vec<Module>, ConfigError> {
    let compiled = Module::compiled();
    let Some(names) = names else {
        return Ok(compiled);
    };
    let mut chosen = Vec::new();
    for name in names {
        let lower = name.to_ascii_lowercase();
        let module = Module::known()
            .iter()
            .find(|(n, _)| *n == lower)
            .map(|(_, m)| *m)
            .ok_or_else(|| ConfigError::new("KEEL_MODULES", format!("unknown module {name:?}")))?;
        if !compiled.contains(&module) {
            return Err(ConfigError::new(
                "KEEL_MODULES",
                format!(
                    "module {name:?} is not compiled into this build (enable its Cargo feature)"
                ),
            ));
        }
        chosen.push(module);
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
        assert_eq!(parse_modules(None).ok(), Some(Module::compiled()));
        assert_eq!(parse_modules(Some(vec![])).ok(), Some(vec![]));
    }

    #[test]
    fn unknown_modules_are_refused() {
        let err = parse_modules(Some(vec!["billing".into()])).err();
        assert_eq!(err.map(|e| e.setting), Some("KEEL_MODULES".to_owned()));
    }
}

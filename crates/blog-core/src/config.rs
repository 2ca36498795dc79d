//! Settings of the blog module.

use kernel::ConfigError;
use kernel::config::{parse_in_range, var};
use kernel::module::Deployment;

/// 50 MiB.
pub const DEFAULT_IMPORT_MAX_BYTES: usize = 50 * 1024 * 1024;
pub const DEFAULT_IMPORT_MAX_ENTRIES: usize = 10_000;
/// 200 MiB.
pub const DEFAULT_IMPORT_MAX_UNPACKED_BYTES: u64 = 200 * 1024 * 1024;
pub const DEFAULT_IMPORT_MAX_RATIO: u64 = 100;
pub const DEFAULT_IMPORT_CONCURRENCY: usize = 2;

/// Who may use the write and editor endpoints (`BLOG_PROTECTION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Administrators and moderators.
    Role,
    /// Any active user.
    Basic,
    /// Anyone: writes are open.
    None,
}

impl Protection {
    pub fn as_str(self) -> &'static str {
        match self {
            Protection::Role => "role",
            Protection::Basic => "basic",
            Protection::None => "none",
        }
    }

    pub fn parse(raw: &str) -> Option<Protection> {
        match raw.to_ascii_lowercase().as_str() {
            "role" => Some(Protection::Role),
            "basic" => Some(Protection::Basic),
            "none" => Some(Protection::None),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlogConfig {
    /// `BLOG_PROTECTION`; `None` when unset: `basic` when auth is mounted, else `none`.
    pub protection: Option<Protection>,
    /// `BLOG_IMPORT_MAX_BYTES` (default 50 MiB): the largest upload; over it, 413.
    pub import_max_bytes: usize,
    /// `BLOG_IMPORT_MAX_ENTRIES` (default 10,000): entries of an imported zip.
    pub import_max_entries: usize,
    /// `BLOG_IMPORT_MAX_UNPACKED_BYTES` (default 200 MiB): what an imported zip unpacks to.
    pub import_max_unpacked_bytes: u64,
    /// `BLOG_IMPORT_CONCURRENCY` (default 2): imports handled at once; more answer 503 with
    /// `Retry-After` (each holds its upload in memory).
    pub import_concurrency: usize,
    /// `BLOG_IMPORT_MAX_RATIO` (default 100): the compression ratio an entry over 1 MiB may have.
    pub import_max_ratio: u64,
}

impl Default for BlogConfig {
    fn default() -> Self {
        Self {
            protection: None,
            import_max_bytes: DEFAULT_IMPORT_MAX_BYTES,
            import_concurrency: DEFAULT_IMPORT_CONCURRENCY,
            import_max_entries: DEFAULT_IMPORT_MAX_ENTRIES,
            import_max_unpacked_bytes: DEFAULT_IMPORT_MAX_UNPACKED_BYTES,
            import_max_ratio: DEFAULT_IMPORT_MAX_RATIO,
        }
    }
}

impl kernel::ModuleConfig for BlogConfig {
    fn from_env() -> Result<Self, ConfigError> {
        BlogConfig::from_env()
    }

    /// `BLOG_PROTECTION=role` or `basic` without the auth module: the module would fall back to
    /// `none` and open its writes to anyone, which production refuses.
    fn production_problems(&self, deployment: &Deployment) -> Vec<ConfigError> {
        match self.check(deployment.identity) {
            Ok(()) => Vec::new(),
            Err(e) => vec![ConfigError::new(
                &e.setting,
                format!(
                    "{}: writes would be open to anyone; mount auth (KEEL_MODULES) or set \
                     BLOG_PROTECTION=none to open them on purpose",
                    e.message
                ),
            )],
        }
    }
}

impl BlogConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        let protection = match var("BLOG_PROTECTION") {
            None => None,
            Some(raw) => Some(Protection::parse(&raw).ok_or_else(|| {
                ConfigError::new(
                    "BLOG_PROTECTION",
                    format!("{raw:?} is not one of role, basic, none"),
                )
            })?),
        };
        Ok(Self {
            protection,
            import_max_bytes: parse_in_range(
                "BLOG_IMPORT_MAX_BYTES",
                DEFAULT_IMPORT_MAX_BYTES,
                1..=usize::MAX,
            )?,
            import_max_entries: parse_in_range(
                "BLOG_IMPORT_MAX_ENTRIES",
                DEFAULT_IMPORT_MAX_ENTRIES,
                1..=usize::MAX,
            )?,
            import_max_unpacked_bytes: parse_in_range(
                "BLOG_IMPORT_MAX_UNPACKED_BYTES",
                DEFAULT_IMPORT_MAX_UNPACKED_BYTES,
                1..=u64::MAX,
            )?,
            import_concurrency: parse_in_range(
                "BLOG_IMPORT_CONCURRENCY",
                DEFAULT_IMPORT_CONCURRENCY,
                1..=1024,
            )?,
            import_max_ratio: parse_in_range(
                "BLOG_IMPORT_MAX_RATIO",
                DEFAULT_IMPORT_MAX_RATIO,
                1..=u64::MAX,
            )?,
        })
    }

    /// The protection in force: the setting, or its default (`basic` with auth, `none`
    /// without). Without auth only `none` is possible.
    pub fn effective_protection(&self, auth_mounted: bool) -> Protection {
        match (auth_mounted, self.protection) {
            (false, _) => Protection::None,
            (true, Some(p)) => p,
            (true, None) => Protection::Basic,
        }
    }

    /// An error naming `BLOG_PROTECTION` when it asks for users but auth is not mounted. The
    /// server may refuse to start on it; [`crate::BlogModule::build`] itself falls back to `none`
    /// with a warning.
    pub fn check(&self, auth_mounted: bool) -> Result<(), ConfigError> {
        match self.protection {
            Some(p @ (Protection::Role | Protection::Basic)) if !auth_mounted => {
                Err(ConfigError::new(
                    "BLOG_PROTECTION",
                    format!("{} needs the auth module, which is not mounted", p.as_str()),
                ))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protection_defaults_follow_auth() {
        let config = BlogConfig::default();
        assert_eq!(config.effective_protection(true), Protection::Basic);
        assert_eq!(config.effective_protection(false), Protection::None);
        let role = BlogConfig {
            protection: Some(Protection::Role),
            ..BlogConfig::default()
        };
        assert_eq!(role.effective_protection(true), Protection::Role);
        assert_eq!(role.effective_protection(false), Protection::None);
        assert!(role.check(false).is_err());
        assert!(role.check(true).is_ok());
    }

    #[test]
    fn production_refuses_protection_that_would_fall_back_to_open_writes() {
        use kernel::ModuleConfig as _;
        let with_auth = Deployment { identity: true };
        let without_auth = Deployment { identity: false };
        for protection in [Protection::Role, Protection::Basic] {
            let config = BlogConfig {
                protection: Some(protection),
                ..BlogConfig::default()
            };
            assert!(config.production_problems(&with_auth).is_empty());
            let problems = config.production_problems(&without_auth);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].setting, "BLOG_PROTECTION");
        }
        // Unset or `none`: open without auth by design, not a refusal.
        for protection in [None, Some(Protection::None)] {
            let config = BlogConfig {
                protection,
                ..BlogConfig::default()
            };
            assert!(config.production_problems(&without_auth).is_empty());
        }
    }

    #[test]
    fn protection_values() {
        assert_eq!(Protection::parse("ROLE"), Some(Protection::Role));
        assert_eq!(Protection::parse("admin"), None);
    }
}

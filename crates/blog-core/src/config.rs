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
/// What caches may do with the public reads: keep them, but ask again (with the ETag) each time.
pub const DEFAULT_CACHE_CONTROL: &str = "public, max-age=0, must-revalidate";
/// Where a post is read, relative to `PUBLIC_BASE_URL`: the module's own public read.
pub const DEFAULT_POST_URL_TEMPLATE: &str = "/api/v1/blog/posts/{slug}";
pub const DEFAULT_FEED_TITLE: &str = "Blog";
pub const DEFAULT_FEED_ENTRIES: i64 = 20;
pub const DEFAULT_SCHEDULE_SWEEP_SECONDS: u64 = 60;

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
    /// `BLOG_CACHE_CONTROL` (default `public, max-age=0, must-revalidate`): the `Cache-Control`
    /// of the public reads (list, post, tags, feeds, sitemap).
    pub cache_control: String,
    /// `PUBLIC_BASE_URL` (see `kernel::config::public_base_url`): the start of the absolute links
    /// of the feeds and the sitemap.
    pub public_base_url: String,
    /// `BLOG_POST_URL_TEMPLATE` (default `/api/v1/blog/posts/{slug}`): where a reader finds a
    /// post, `{slug}` replaced by its slug; a path is joined to `PUBLIC_BASE_URL`, an absolute
    /// http(s) URL is used as it is.
    pub post_url_template: String,
    /// `BLOG_FEED_TITLE` (default `Blog`): the title of the feeds.
    pub feed_title: String,
    /// `BLOG_FEED_ENTRIES` (default 20, 1 to 100): the posts a feed shows, newest first.
    pub feed_entries: i64,
    /// `BLOG_SCHEDULE_SWEEP_SECONDS` (default 60; 0 turns it off): how often the module publishes
    /// scheduled posts whose time has passed but whose task did not run (a safety net: the task
    /// queue publishes them on time).
    pub schedule_sweep_seconds: u64,
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
            cache_control: DEFAULT_CACHE_CONTROL.to_owned(),
            public_base_url: "http://localhost:8000".to_owned(),
            post_url_template: DEFAULT_POST_URL_TEMPLATE.to_owned(),
            feed_title: DEFAULT_FEED_TITLE.to_owned(),
            feed_entries: DEFAULT_FEED_ENTRIES,
            schedule_sweep_seconds: DEFAULT_SCHEDULE_SWEEP_SECONDS,
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
            cache_control: cache_control(var("BLOG_CACHE_CONTROL"))?,
            public_base_url: kernel::config::public_base_url()?.url,
            post_url_template: post_url_template(var("BLOG_POST_URL_TEMPLATE"))?,
            feed_title: feed_title(var("BLOG_FEED_TITLE"))?,
            feed_entries: parse_in_range("BLOG_FEED_ENTRIES", DEFAULT_FEED_ENTRIES, 1..=100)?,
            schedule_sweep_seconds: parse_in_range(
                "BLOG_SCHEDULE_SWEEP_SECONDS",
                DEFAULT_SCHEDULE_SWEEP_SECONDS,
                0..=86_400,
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
    /// server may refuse to start on it; `BlogModule::build` itself falls back to `none`
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

/// `BLOG_CACHE_CONTROL`: a header value (visible ASCII and spaces), not blank.
fn cache_control(raw: Option<String>) -> Result<String, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_CACHE_CONTROL.to_owned());
    };
    let value = raw.trim();
    if value.is_empty() || !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
        return Err(ConfigError::new(
            "BLOG_CACHE_CONTROL",
            format!("{raw:?} is not a Cache-Control value (printable ASCII, not blank)"),
        ));
    }
    Ok(value.to_owned())
}

/// `BLOG_POST_URL_TEMPLATE`: a path (`/...`) or an absolute http(s) URL holding `{slug}`.
fn post_url_template(raw: Option<String>) -> Result<String, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_POST_URL_TEMPLATE.to_owned());
    };
    let value = raw.trim();
    let problem = if !value.contains("{slug}") {
        Some("must contain {slug}")
    } else if !(value.starts_with('/')
        || value.starts_with("http://")
        || value.starts_with("https://"))
    {
        Some("must be a path starting with / or an absolute http(s) URL")
    } else if value
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '"'))
    {
        Some("must not contain spaces, control characters, <, > or \"")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(ConfigError::new(
            "BLOG_POST_URL_TEMPLATE",
            format!("{raw:?} {problem}"),
        )),
        None => Ok(value.to_owned()),
    }
}

/// `BLOG_FEED_TITLE`: not blank, without control characters.
fn feed_title(raw: Option<String>) -> Result<String, ConfigError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_FEED_TITLE.to_owned());
    };
    let value = raw.trim();
    if value.is_empty() || value.chars().any(char::is_control) {
        return Err(ConfigError::new(
            "BLOG_FEED_TITLE",
            format!("{raw:?} must be text without control characters, not blank"),
        ));
    }
    Ok(value.to_owned())
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
    fn feed_and_cache_settings_are_checked() {
        assert_eq!(
            cache_control(None).ok().as_deref(),
            Some(DEFAULT_CACHE_CONTROL)
        );
        assert!(cache_control(Some("no\u{1}store".into())).is_err());
        assert!(cache_control(Some(" ".into())).is_err());
        assert_eq!(
            cache_control(Some(" public, max-age=60 ".into()))
                .ok()
                .as_deref(),
            Some("public, max-age=60")
        );
        for bad in [
            "/blog/",
            "blog/{slug}",
            "ftp://x/{slug}",
            "/a b/{slug}",
            "/<{slug}>",
        ] {
            assert!(post_url_template(Some(bad.into())).is_err(), "{bad}");
        }
        assert_eq!(
            post_url_template(Some(" https://www.example.org/b/{slug}/ ".into()))
                .ok()
                .as_deref(),
            Some("https://www.example.org/b/{slug}/")
        );
        assert!(feed_title(Some("a\u{0}b".into())).is_err());
    }

    #[test]
    fn protection_values() {
        assert_eq!(Protection::parse("ROLE"), Some(Protection::Role));
        assert_eq!(Protection::parse("admin"), None);
    }
}

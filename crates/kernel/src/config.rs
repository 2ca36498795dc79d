//! Reading settings from the environment (and a `.env` file in the working directory).
//!
//! Every setting is optional with a documented default; a value that is present but invalid stops
//! the process at start with an error that names the setting.

use std::str::FromStr;

/// A setting that is present but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(setting: &str, message: impl Into<String>) -> Self {
        Self {
            setting: setting.to_owned(),
            message: message.into(),
        }
    }
}

/// Whether `APP_ENV=production` (any case): the server then refuses to start while any setting is
/// unsafe (see [`refuse_unsafe`] and [`crate::ModuleConfig::production_problems`]).
pub fn is_production() -> bool {
    var("APP_ENV").is_some_and(|v| v.eq_ignore_ascii_case("production"))
}

/// Secret values published in this repository: the provider simulator's settings and the bench
/// scripts' keys. Anyone can read them, so a key that verifies what the service receives (token
/// signing key, webhook signing secrets) must never be one of them in production.
pub const PUBLISHED_SECRETS: &[&str] = &[
    "sk_test_provider_sim",
    "whsec_provider_sim",
    "re_provider_sim",
    "whsec_cHJvdmlkZXItc2ltLXJlc2VuZC1ob29r",
    "0123456789abcdef0123456789abcdef",
    "sim-ai-key",
    "bench-secret-bench-secret-bench-secret",
    "whsec_bench",
    "sk_test_bench",
];

/// Whether `value` is one of the [`PUBLISHED_SECRETS`].
pub fn is_published_secret(value: &str) -> bool {
    PUBLISHED_SECRETS.contains(&value.trim())
}

/// The refusal of `APP_ENV=production`: `Ok` when `problems` is empty, else one error that lists
/// every problem (each naming its setting and what to set), so that a deployer fixes them all in
/// one pass.
pub fn refuse_unsafe(problems: Vec<ConfigError>) -> Result<(), ConfigError> {
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("  {}: {}", p.setting, p.message))
        .collect();
    Err(ConfigError::new(
        "APP_ENV",
        format!(
            "production refuses to start with {} unsafe setting{}:\n{}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            lines.join("\n")
        ),
    ))
}

/// Loads `.env` from the working directory into the process environment, if the file exists.
/// Variables already set in the environment win over the file.
pub fn load_dotenv() {
    let _ = dotenvy::dotenv();
}

/// The trimmed value of a variable; unset and blank both count as absent.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// A variable parsed with `FromStr`, or `default` when absent.
pub fn parse<T>(name: &str, default: T) -> Result<T, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match var(name) {
        None => Ok(default),
        Some(raw) => raw
            .parse()
            .map_err(|e| ConfigError::new(name, format!("{raw:?} is not valid: {e}"))),
    }
}

/// A boolean variable: `true/false`, `1/0`, `yes/no`, `on/off` (any case), or `default` when absent.
pub fn flag(name: &str, default: bool) -> Result<bool, ConfigError> {
    match var(name) {
        None => Ok(default),
        Some(raw) => parse_bool(&raw).ok_or_else(|| {
            ConfigError::new(name, format!("{raw:?} is not a boolean (true/false)"))
        }),
    }
}

fn parse_bool(raw: &str) -> Option<bool> {
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// A comma-separated list of non-empty, trimmed items, or `None` when the variable is absent.
pub fn list(name: &str) -> Option<Vec<String>> {
    var(name).map(|raw| {
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

/// `PUBLIC_BASE_URL`: the service's public address, as clients and providers reach it (scheme,
/// host, and the port when it is not the scheme's default; no trailing `/`). Every module reads it
/// through [`public_base_url`], so it has one meaning and one default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicBaseUrl {
    /// The address: the setting, or `http://localhost:<PORT>` when it is unset.
    pub url: String,
    /// Whether `PUBLIC_BASE_URL` was set. What only an address reachable from outside can do
    /// (asking Twilio for status callbacks) happens only then.
    pub is_set: bool,
}

/// Reads `PUBLIC_BASE_URL` (default `http://localhost:<PORT>`, with `PORT`'s default 8000, and
/// 8000 for `PORT=0`); anything but an absolute http(s) URL is refused by name.
pub fn public_base_url() -> Result<PublicBaseUrl, ConfigError> {
    public_base_url_from(var("PUBLIC_BASE_URL"), var("PORT"))
}

fn public_base_url_from(
    value: Option<String>,
    port: Option<String>,
) -> Result<PublicBaseUrl, ConfigError> {
    match value {
        None => {
            let port = port
                .and_then(|p| p.parse::<u16>().ok())
                .filter(|p| *p != 0)
                .unwrap_or(8000);
            Ok(PublicBaseUrl {
                url: format!("http://localhost:{port}"),
                is_set: false,
            })
        }
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            Ok(PublicBaseUrl {
                url: url.trim_end_matches('/').to_owned(),
                is_set: true,
            })
        }
        Some(url) => Err(ConfigError::new(
            "PUBLIC_BASE_URL",
            format!("{url:?} is not an http(s) URL"),
        )),
    }
}

/// A number that must lie in `range`.
pub fn parse_in_range<T>(
    name: &str,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ConfigError>
where
    T: FromStr + PartialOrd + std::fmt::Display + Copy,
    T::Err: std::fmt::Display,
{
    let value = parse(name, default)?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(
            name,
            format!("{value} is outside {}..={}", range.start(), range.end()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_accept_the_usual_spellings() {
        for t in ["true", "TRUE", "1", "yes", "on"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "0", "No", "off"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("maybe"), None);
    }

    #[test]
    fn the_production_refusal_lists_every_problem() {
        assert_eq!(refuse_unsafe(Vec::new()), Ok(()));
        let err = refuse_unsafe(vec![
            ConfigError::new("SECRET_KEY", "is not set; set 32 random bytes"),
            ConfigError::new("BCRYPT_COST", "4 is below 10; set 10 or more"),
        ])
        .err()
        .unwrap_or_else(|| ConfigError::new("", ""));
        assert_eq!(err.setting, "APP_ENV");
        assert_eq!(
            err.to_string(),
            "invalid setting APP_ENV: production refuses to start with 2 unsafe settings:\n  \
             SECRET_KEY: is not set; set 32 random bytes\n  \
             BCRYPT_COST: 4 is below 10; set 10 or more"
        );
    }

    #[test]
    fn published_secrets_are_recognised() {
        assert!(is_published_secret("whsec_provider_sim"));
        assert!(is_published_secret(" whsec_provider_sim "));
        assert!(!is_published_secret("whsec_provider_sim2"));
    }

    #[test]
    fn config_error_names_the_setting() {
        let e = ConfigError::new("PORT", "\"x\" is not valid");
        assert_eq!(e.to_string(), "invalid setting PORT: \"x\" is not valid");
    }

    #[test]
    fn the_public_base_url_defaults_to_this_port_on_localhost() {
        let unset = public_base_url_from(None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(unset.url, "http://localhost:8000");
        assert!(!unset.is_set);
        let on_port = public_base_url_from(None, Some("9001".into()));
        assert_eq!(
            on_port.map(|b| b.url).ok(),
            Some("http://localhost:9001".into())
        );
        let any_port = public_base_url_from(None, Some("0".into()));
        assert_eq!(
            any_port.map(|b| b.url).ok(),
            Some("http://localhost:8000".into())
        );
        let set = public_base_url_from(Some("https://api.example.com/".into()), Some("9".into()));
        assert_eq!(
            set.ok(),
            Some(PublicBaseUrl {
                url: "https://api.example.com".into(),
                is_set: true
            })
        );
        let bad = public_base_url_from(Some("api.example.com".into()), None);
        assert_eq!(bad.err().map(|e| e.setting), Some("PUBLIC_BASE_URL".into()));
    }
}

//! Settings of the AI module and the catalog of providers it speaks to.

use std::collections::BTreeMap;
use std::time::Duration;

use kernel::ConfigError;
use kernel::config::{flag, parse, parse_in_range, var};

use crate::providers::Dialect;

/// A provider this module can talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderSpec {
    /// Its name in `AI_PROVIDER`.
    pub name: &'static str,
    pub dialect: Dialect,
    pub default_base_url: &'static str,
    pub default_model: &'static str,
    /// The setting holding its key; `None` for providers that need none.
    pub key_setting: Option<&'static str>,
    /// The setting overriding its base URL.
    pub base_setting: &'static str,
}

/// Every provider, the spec's six `providers_supported` first, then `ollama` (local, no key).
pub const PROVIDERS: [ProviderSpec; 8] = [
    ProviderSpec {
        name: "public",
        dialect: Dialect::OpenAi,
        default_base_url: "https://api.llm7.io/v1",
        default_model: "gpt-4o-mini",
        key_setting: None,
        // Not `PUBLIC_BASE_URL`: that one is the service's own public address (comms' callbacks).
        base_setting: "PUBLIC_AI_BASE_URL",
    },
    ProviderSpec {
        name: "openai",
        dialect: Dialect::OpenAi,
        default_base_url: "https://api.openai.com/v1",
        default_model: "gpt-4o-mini",
        key_setting: Some("OPENAI_API_KEY"),
        base_setting: "OPENAI_BASE_URL",
    },
    ProviderSpec {
        name: "anthropic",
        dialect: Dialect::Anthropic,
        default_base_url: "https://api.anthropic.com/v1",
        default_model: "claude-3-5-haiku-latest",
        key_setting: Some("ANTHROPIC_API_KEY"),
        base_setting: "ANTHROPIC_BASE_URL",
    },
    ProviderSpec {
        name: "google",
        dialect: Dialect::Gemini,
        default_base_url: "https://generativelanguage.googleapis.com/v1beta",
        default_model: "gemini-2.0-flash",
        key_setting: Some("GOOGLE_API_KEY"),
        base_setting: "GOOGLE_BASE_URL",
    },
    ProviderSpec {
        name: "groq",
        dialect: Dialect::OpenAi,
        default_base_url: "https://api.groq.com/openai/v1",
        default_model: "llama-3.1-8b-instant",
        key_setting: Some("GROQ_API_KEY"),
        base_setting: "GROQ_BASE_URL",
    },
    ProviderSpec {
        name: "mistral",
        dialect: Dialect::OpenAi,
        default_base_url: "https://api.mistral.ai/v1",
        default_model: "mistral-small-latest",
        key_setting: Some("MISTRAL_API_KEY"),
        base_setting: "MISTRAL_BASE_URL",
    },
    ProviderSpec {
        name: "cohere",
        dialect: Dialect::Cohere,
        default_base_url: "https://api.cohere.com/v2",
        default_model: "command-r-08-2024",
        key_setting: Some("COHERE_API_KEY"),
        base_setting: "COHERE_BASE_URL",
    },
    ProviderSpec {
        name: "ollama",
        dialect: Dialect::OpenAi,
        default_base_url: "http://localhost:11434/v1",
        default_model: "llama3.2",
        key_setting: None,
        base_setting: "OLLAMA_BASE_URL",
    },
];

/// The provider named `name` (case-insensitive).
pub fn provider(name: &str) -> Option<&'static ProviderSpec> {
    PROVIDERS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

/// One entry of `AI_FALLBACK_PROVIDERS`: a provider, and the model to ask it for (its default
/// model when the entry names none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub provider: &'static ProviderSpec,
    pub model: Option<String>,
}

/// Where conversations are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreChoice {
    /// In this process (the spec's default): lost on restart, not shared.
    Memory,
    /// In the database: shared by every instance, kept across restarts.
    Database,
}

#[derive(Clone, PartialEq)]
pub struct AiConfig {
    /// `AI_ENABLED` (default true).
    pub enabled: bool,
    /// `AI_PROVIDER` (default `public`).
    pub provider: &'static ProviderSpec,
    /// `AI_MODEL` (default: the provider's).
    pub model: Option<String>,
    /// `AI_TEMPERATURE` (0.7).
    pub temperature: f32,
    /// `AI_MAX_TOKENS` (1000).
    pub max_tokens: u32,
    /// `AI_SYSTEM_PROMPT`.
    pub system_prompt: Option<String>,
    /// `AI_CONTEXT_MESSAGES` (10): earlier messages sent as context.
    pub context_messages: usize,
    /// `AI_TIMEOUT_SECONDS` (60).
    pub timeout: Duration,
    /// `AI_MAX_MESSAGE_CHARS` (32000).
    pub max_message_chars: usize,
    /// `AI_CONVERSATION_TTL_HOURS` (24): idle conversations older than this are forgotten.
    pub conversation_ttl: Duration,
    /// `AI_MAX_CONVERSATIONS` (10000): kept in memory at most, least recently active evicted first.
    pub max_conversations: usize,
    /// `AI_CONVERSATION_STORE` (`memory`, or `database`).
    pub store: StoreChoice,
    /// `<PROVIDER>_API_KEY` of every provider that has one set.
    pub api_keys: BTreeMap<&'static str, String>,
    /// `<PROVIDER>_BASE_URL` overrides.
    pub base_urls: BTreeMap<&'static str, String>,
    /// `AI_DAILY_TOKENS_<PLAN>`: tokens a day per plan, keyed by the plan's setting suffix
    /// ([`crate::budget::setting_suffix`]: `FREE`, `PRO`); a plan without one is unlimited.
    pub daily_tokens: BTreeMap<String, i64>,
    /// `AI_FALLBACK_PROVIDERS` (none): asked in this order when the providers before them fail
    /// before their first chunk.
    pub fallbacks: Vec<Fallback>,
    /// `AI_CIRCUIT_FAILURES` (5): consecutive failures after which a provider is skipped for
    /// [`Self::circuit_cooldown`]; 0 never skips one.
    pub circuit_failures: u32,
    /// `AI_CIRCUIT_COOLDOWN_SECONDS` (30): how long a failing provider is skipped before one
    /// request tries it again.
    pub circuit_cooldown: Duration,
}

/// The API keys show as `<redacted>`: settings may end up in a log or a panic message.
impl std::fmt::Debug for AiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: BTreeMap<&str, &str> = self.api_keys.keys().map(|k| (*k, "<redacted>")).collect();
        f.debug_struct("AiConfig")
            .field("enabled", &self.enabled)
            .field("provider", &self.provider.name)
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("system_prompt", &self.system_prompt)
            .field("context_messages", &self.context_messages)
            .field("timeout", &self.timeout)
            .field("max_message_chars", &self.max_message_chars)
            .field("conversation_ttl", &self.conversation_ttl)
            .field("max_conversations", &self.max_conversations)
            .field("store", &self.store)
            .field("api_keys", &keys)
            .field("base_urls", &self.base_urls)
            .field("daily_tokens", &self.daily_tokens)
            .field("fallbacks", &self.chain())
            .field("circuit_failures", &self.circuit_failures)
            .field("circuit_cooldown", &self.circuit_cooldown)
            .finish()
    }
}

impl Default for AiConfig {
    fn default() -> Self {
        AiConfig {
            enabled: true,
            provider: &PROVIDERS[0],
            model: None,
            temperature: 0.7,
            max_tokens: 1000,
            system_prompt: None,
            context_messages: 10,
            timeout: Duration::from_secs(60),
            max_message_chars: 32_000,
            conversation_ttl: Duration::from_secs(24 * 3600),
            max_conversations: 10_000,
            store: StoreChoice::Memory,
            api_keys: BTreeMap::new(),
            base_urls: BTreeMap::new(),
            daily_tokens: BTreeMap::new(),
            fallbacks: Vec::new(),
            circuit_failures: DEFAULT_CIRCUIT_FAILURES,
            circuit_cooldown: Duration::from_secs(DEFAULT_CIRCUIT_COOLDOWN_SECONDS),
        }
    }
}

/// `AI_CIRCUIT_FAILURES`' default.
pub const DEFAULT_CIRCUIT_FAILURES: u32 = 5;
/// `AI_CIRCUIT_COOLDOWN_SECONDS`' default.
pub const DEFAULT_CIRCUIT_COOLDOWN_SECONDS: u64 = 30;
/// The setting naming the fallback providers.
pub const FALLBACK_SETTING: &str = "AI_FALLBACK_PROVIDERS";

impl AiConfig {
    /// The model in use.
    pub fn model_for(&self, spec: &ProviderSpec) -> String {
        match &self.model {
            Some(model) if spec.name == self.provider.name => model.clone(),
            _ => spec.default_model.to_owned(),
        }
    }

    /// The providers asked for a reply, in order, each with its model: `AI_PROVIDER` with
    /// `AI_MODEL`, then each of `AI_FALLBACK_PROVIDERS` with the model its entry names (else the
    /// provider's default: `AI_MODEL` is `AI_PROVIDER`'s).
    pub fn chain(&self) -> Vec<(&'static ProviderSpec, String)> {
        let mut chain = vec![(self.provider, self.model_for(self.provider))];
        chain.extend(self.fallbacks.iter().map(|f| {
            let model = f
                .model
                .clone()
                .unwrap_or_else(|| f.provider.default_model.to_owned());
            (f.provider, model)
        }));
        chain
    }

    /// The base URL of a provider (its override, or its default).
    pub fn base_url(&self, spec: &ProviderSpec) -> String {
        self.base_urls
            .get(spec.name)
            .cloned()
            .unwrap_or_else(|| spec.default_base_url.to_owned())
    }

    /// Why the provider cannot be used, as the 503 and the health report say it.
    pub fn missing_key(&self, spec: &ProviderSpec) -> Option<String> {
        let setting = spec.key_setting?;
        (!self.api_keys.contains_key(spec.name))
            .then(|| format!("Missing API key for {}. Set {setting}.", spec.name))
    }
}

impl kernel::ModuleConfig for AiConfig {
    fn from_env() -> Result<Self, ConfigError> {
        let provider = match var("AI_PROVIDER") {
            None => &PROVIDERS[0],
            Some(name) => provider(&name).ok_or_else(|| {
                let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
                ConfigError::new(
                    "AI_PROVIDER",
                    format!("{name:?} is not one of {}", names.join(", ")),
                )
            })?,
        };
        let temperature: f32 = parse("AI_TEMPERATURE", 0.7)?;
        if !(0.0..=2.0).contains(&temperature) {
            return Err(ConfigError::new(
                "AI_TEMPERATURE",
                "must be between 0 and 2",
            ));
        }
        let store = match var("AI_CONVERSATION_STORE").as_deref() {
            None | Some("memory") => StoreChoice::Memory,
            Some("database") => StoreChoice::Database,
            Some(other) => {
                return Err(ConfigError::new(
                    "AI_CONVERSATION_STORE",
                    format!("{other:?} is not memory or database"),
                ));
            }
        };
        let mut api_keys = BTreeMap::new();
        let mut base_urls = BTreeMap::new();
        for spec in &PROVIDERS {
            if let Some(setting) = spec.key_setting
                && let Some(key) = var(setting)
            {
                api_keys.insert(spec.name, key);
            }
            if let Some(url) = var(spec.base_setting) {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::new(
                        spec.base_setting,
                        format!("{url:?} is not an http(s) URL"),
                    ));
                }
                base_urls.insert(spec.name, url);
            }
        }
        // Gemini's settings are also known by the dialect's name.
        if !api_keys.contains_key("google")
            && let Some(key) = var("GEMINI_API_KEY")
        {
            api_keys.insert("google", key);
        }
        if !base_urls.contains_key("google")
            && let Some(url) = var("GEMINI_BASE_URL")
        {
            base_urls.insert("google", url);
        }
        let model = var("AI_MODEL");
        let fallbacks = match var(FALLBACK_SETTING) {
            None => Vec::new(),
            Some(raw) => parse_fallbacks(&raw, (provider, model.as_deref()), &api_keys)?,
        };
        Ok(AiConfig {
            enabled: flag("AI_ENABLED", true)?,
            provider,
            model,
            temperature,
            max_tokens: parse_in_range("AI_MAX_TOKENS", 1000, 1..=1_000_000)?,
            system_prompt: var("AI_SYSTEM_PROMPT"),
            context_messages: parse_in_range("AI_CONTEXT_MESSAGES", 10, 0..=1000)?,
            timeout: Duration::from_secs(parse_in_range("AI_TIMEOUT_SECONDS", 60, 1..=3600)?),
            max_message_chars: parse_in_range("AI_MAX_MESSAGE_CHARS", 32_000, 1..=10_000_000)?,
            conversation_ttl: Duration::from_secs(
                parse_in_range("AI_CONVERSATION_TTL_HOURS", 24u64, 1..=24 * 365)? * 3600,
            ),
            max_conversations: parse_in_range("AI_MAX_CONVERSATIONS", 10_000, 1..=10_000_000)?,
            store,
            api_keys,
            base_urls,
            daily_tokens: crate::budget::limits_from_env()?,
            fallbacks,
            circuit_failures: parse_in_range(
                "AI_CIRCUIT_FAILURES",
                DEFAULT_CIRCUIT_FAILURES,
                0..=1_000_000,
            )?,
            circuit_cooldown: Duration::from_secs(parse_in_range(
                "AI_CIRCUIT_COOLDOWN_SECONDS",
                DEFAULT_CIRCUIT_COOLDOWN_SECONDS,
                1..=86_400,
            )?),
        })
    }
}

/// `AI_FALLBACK_PROVIDERS`: entries `provider` or `provider:model`, separated by commas. Each
/// must name a known provider, hold its key when it needs one (`keys`), and differ from the
/// `primary` (provider and model) and from every entry before it; an empty entry or an empty
/// model is refused. The error names the entry.
pub fn parse_fallbacks(
    raw: &str,
    primary: (&'static ProviderSpec, Option<&str>),
    keys: &BTreeMap<&'static str, String>,
) -> Result<Vec<Fallback>, ConfigError> {
    let bad = |n: usize, entry: &str, why: String| {
        ConfigError::new(FALLBACK_SETTING, format!("entry {n} ({entry:?}): {why}"))
    };
    let (primary, primary_model) = primary;
    let mut seen = vec![(
        primary.name,
        primary_model.unwrap_or(primary.default_model).to_owned(),
    )];
    let mut fallbacks = Vec::new();
    for (i, entry) in raw.split(',').enumerate() {
        let n = i + 1;
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(ConfigError::new(
                FALLBACK_SETTING,
                format!(
                    "entry {n} is empty (write provider or provider:model, separated by commas)"
                ),
            ));
        }
        let (name, model) = match entry.split_once(':') {
            None => (entry, None),
            Some((name, model)) => (name.trim(), Some(model.trim())),
        };
        let spec = provider(name).ok_or_else(|| {
            let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
            bad(
                n,
                entry,
                format!("{name:?} is not one of {}", names.join(", ")),
            )
        })?;
        if let Some(model) = model
            && (model.is_empty() || model.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(bad(
                n,
                entry,
                "the model after ':' must be a name without spaces".to_owned(),
            ));
        }
        if let Some(setting) = spec.key_setting
            && !keys.contains_key(spec.name)
        {
            return Err(bad(
                n,
                entry,
                format!("{setting} is not set (a fallback provider needs its key)"),
            ));
        }
        let resolved = model.unwrap_or(spec.default_model).to_owned();
        if seen.iter().any(|(p, m)| *p == spec.name && *m == resolved) {
            return Err(bad(
                n,
                entry,
                format!(
                    "{} with the model {resolved} is already in the chain (AI_PROVIDER and AI_MODEL, or an earlier entry)",
                    spec.name
                ),
            ));
        }
        seen.push((spec.name, resolved));
        fallbacks.push(Fallback {
            provider: spec,
            model: model.map(str::to_owned),
        });
    }
    Ok(fallbacks)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_api_keys() {
        let mut config = AiConfig::default();
        config.api_keys.insert("openai", "sk-hidden".to_owned());
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-hidden"), "{shown}");
        assert!(shown.contains(r#""openai": "<redacted>""#), "{shown}");
    }

    fn keys(names: &[&'static str]) -> BTreeMap<&'static str, String> {
        names.iter().map(|n| (*n, "k".to_owned())).collect()
    }

    #[test]
    fn fallbacks_are_read_in_order_with_their_models() {
        let openai = provider("openai").unwrap();
        let parsed = parse_fallbacks(
            " anthropic , openai:gpt-4o ,ollama, OpenAI:gpt-4.1-mini",
            (openai, None),
            &keys(&["anthropic", "openai"]),
        )
        .unwrap();
        let names: Vec<(&str, Option<&str>)> = parsed
            .iter()
            .map(|f| (f.provider.name, f.model.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("anthropic", None),
                ("openai", Some("gpt-4o")),
                ("ollama", None),
                ("openai", Some("gpt-4.1-mini")),
            ]
        );
        let config = AiConfig {
            provider: openai,
            model: Some("gpt-4o-mini".into()),
            fallbacks: parsed,
            ..AiConfig::default()
        };
        let chain: Vec<(&str, String)> = config
            .chain()
            .into_iter()
            .map(|(p, m)| (p.name, m))
            .collect();
        assert_eq!(chain[0], ("openai", "gpt-4o-mini".to_owned()));
        assert_eq!(
            chain[1],
            ("anthropic", "claude-3-5-haiku-latest".to_owned())
        );
        assert_eq!(chain[3], ("ollama", "llama3.2".to_owned()));
    }

    #[test]
    fn a_bad_fallback_entry_is_named() {
        let openai = provider("openai").unwrap();
        let error = |raw: &str| {
            parse_fallbacks(raw, (openai, Some("gpt-4o")), &keys(&["openai"]))
                .unwrap_err()
                .to_string()
        };
        let unknown = error("openai:gpt-4o-mini,antropic");
        assert!(unknown.contains("AI_FALLBACK_PROVIDERS"), "{unknown}");
        assert!(unknown.contains(r#"entry 2 ("antropic")"#), "{unknown}");
        assert!(
            unknown.contains("is not one of public, openai"),
            "{unknown}"
        );
        assert!(error("ollama,,public").contains("entry 2 is empty"));
        assert!(error("ollama:").contains(r#"entry 1 ("ollama:")"#));
        assert!(error("ollama:a b").contains("without spaces"));
        let keyless = error("anthropic");
        assert!(
            keyless.contains("ANTHROPIC_API_KEY is not set"),
            "{keyless}"
        );
        // The primary again, or an entry twice.
        assert!(error("openai:gpt-4o").contains("already in the chain"));
        assert!(error("ollama,ollama:llama3.2").contains("entry 2"));
        // The same provider with another model is a fallback of its own.
        assert!(parse_fallbacks("openai", (openai, Some("gpt-4o")), &keys(&["openai"])).is_ok());
    }
}

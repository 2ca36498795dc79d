//! Daily token budgets: how many tokens a caller may spend per UTC day, by plan
//! (`AI_DAILY_TOKENS_<PLAN>`), counted from what each provider reports (estimated from characters
//! when it reports nothing) and kept per caller and day in the database.
//!
//! Who counts: every caller under their identifier (the token's user id, or the `user_id` they
//! send). Whose plan: an account's (a bearer token's user), from the mounted [`Entitlements`];
//! every other caller, and everyone when no module lends entitlements, has the free plan.

mod store;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{NaiveDate, NaiveDateTime};
use kernel::config::var;
use kernel::plans::{Entitlements, Plan};
use kernel::{ConfigError, DbPool};

use crate::error::AiError;
use crate::providers::{ChatRequest, Usage};

/// The settings' common prefix: `AI_DAILY_TOKENS_FREE`, `AI_DAILY_TOKENS_PRO`, ...
pub const SETTING_PREFIX: &str = "AI_DAILY_TOKENS_";
/// The largest daily budget a setting may give.
pub const MAX_DAILY_TOKENS: i64 = 1_000_000_000_000;
/// Characters counted as one token when a provider reports no usage (rounded up).
pub const CHARS_PER_TOKEN: usize = 4;
/// Days of usage kept (older rows are forgotten by `cleanup_expired_data`).
pub const KEEP_DAYS: i64 = 31;

/// The suffix of a plan's setting: the name upper-cased, every character other than an ASCII
/// letter or digit as `_` (`pro` → `PRO`, `team-2` → `TEAM_2`, `Monthly plan` → `MONTHLY_PLAN`).
pub fn setting_suffix(plan: &str) -> String {
    plan.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Reads every `AI_DAILY_TOKENS_<PLAN>` setting: suffix → tokens a day (0 to 10^12). A blank
/// value counts as unset.
pub fn limits_from_env() -> Result<BTreeMap<String, i64>, ConfigError> {
    let names = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok());
    parse_limits(names.filter_map(|name| var(&name).map(|value| (name, value))))
}

/// The budgets among `(setting, trimmed value)` pairs: those named `AI_DAILY_TOKENS_<PLAN>`.
pub fn parse_limits(
    settings: impl IntoIterator<Item = (String, String)>,
) -> Result<BTreeMap<String, i64>, ConfigError> {
    let mut limits = BTreeMap::new();
    for (name, raw) in settings {
        let Some(suffix) = name.strip_prefix(SETTING_PREFIX) else {
            continue;
        };
        if suffix.is_empty() || setting_suffix(suffix) != suffix {
            return Err(ConfigError::new(
                &name,
                format!(
                    "is not {SETTING_PREFIX}<PLAN> with the plan's name in upper case (letters, \
                     digits and _)"
                ),
            ));
        }
        let tokens = raw
            .parse::<i64>()
            .ok()
            .filter(|n| (0..=MAX_DAILY_TOKENS).contains(n))
            .ok_or_else(|| {
                ConfigError::new(
                    &name,
                    format!("{raw:?} is not a number of tokens from 0 to {MAX_DAILY_TOKENS}"),
                )
            })?;
        limits.insert(suffix.to_owned(), tokens);
    }
    Ok(limits)
}

/// Tokens for `chars` characters when the provider reports none: one per 4, rounded up.
pub fn estimate(chars: usize) -> i64 {
    i64::try_from(chars.div_ceil(CHARS_PER_TOKEN)).unwrap_or(i64::MAX)
}

/// The characters a request sends: the system prompt and every message (the context included).
pub fn prompt_chars(request: &ChatRequest) -> usize {
    let system = request.system.as_deref().map_or(0, |s| s.chars().count());
    system
        + request
            .messages
            .iter()
            .map(|m| m.content.chars().count())
            .sum::<usize>()
}

/// The tokens one exchange spent: the provider's counts of the prompt and of the reply, each
/// estimated from characters when the provider did not report it (or reported 0).
pub fn spent(request: &ChatRequest, reply: &str, usage: Usage) -> i64 {
    let reported = |n: Option<u32>| n.filter(|n| *n > 0).map(i64::from);
    let prompt = reported(usage.input_tokens).unwrap_or_else(|| estimate(prompt_chars(request)));
    let output = reported(usage.output_tokens).unwrap_or_else(|| estimate(reply.chars().count()));
    prompt.saturating_add(output)
}

/// The next UTC midnight after `now`, when a day's budget starts again.
pub fn next_reset(now: NaiveDateTime) -> NaiveDateTime {
    let tomorrow = now.date().succ_opt().unwrap_or(NaiveDate::MAX);
    tomorrow.and_time(chrono::NaiveTime::MIN)
}

/// Whole seconds from `now` to the next UTC midnight, rounded up (at least 1).
pub fn seconds_to_reset(now: NaiveDateTime) -> u64 {
    let left = next_reset(now) - now;
    let seconds = left.num_seconds() + i64::from(left.subsec_nanos() > 0);
    u64::try_from(seconds.max(1)).unwrap_or(1)
}

/// A caller's budget today.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// The caller identifier the tokens are counted under.
    pub user_id: String,
    pub plan: String,
    /// The UTC day counted.
    pub day: NaiveDate,
    /// Tokens spent today.
    pub used: i64,
    /// The plan's daily tokens; `None` is unlimited.
    pub limit: Option<i64>,
    /// When the count starts again (the next UTC midnight).
    pub resets_at: NaiveDateTime,
}

impl Quota {
    /// Tokens left today; `None` when unlimited.
    pub fn remaining(&self) -> Option<i64> {
        self.limit.map(|limit| (limit - self.used).max(0))
    }

    /// Whether nothing more may be asked today.
    pub fn spent(&self) -> bool {
        self.limit.is_some_and(|limit| self.used >= limit)
    }
}

/// Who asks, as budgets see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The conversations' owner and the key tokens are counted under: the token's user id, or
    /// the `user_id` given (default `api-user`).
    pub id: String,
    /// The account behind a bearer token, whose plan the entitlements tell.
    pub account: Option<i64>,
    /// Whether budgets apply (not to the operator's command line).
    pub metered: bool,
}

impl Caller {
    /// A caller known only by the `user_id` they send: the free plan.
    pub fn anonymous(id: impl Into<String>) -> Caller {
        Caller {
            id: id.into(),
            account: None,
            metered: true,
        }
    }

    /// The user behind a bearer token.
    pub fn account(user_id: i64) -> Caller {
        Caller {
            id: user_id.to_string(),
            account: Some(user_id),
            metered: true,
        }
    }

    /// The operator (`keel ai ...`): asks as `id`, with no budget and nothing counted.
    pub fn operator(id: impl Into<String>) -> Caller {
        Caller {
            metered: false,
            ..Caller::anonymous(id)
        }
    }
}

/// Plans, budgets and the counts: what the service asks before and after each reply.
pub struct Meter {
    pool: DbPool,
    /// `AI_DAILY_TOKENS_<PLAN>`: setting suffix → tokens a day.
    limits: BTreeMap<String, i64>,
    entitlements: Option<Arc<dyn Entitlements>>,
}

impl Meter {
    pub fn new(
        pool: DbPool,
        limits: BTreeMap<String, i64>,
        entitlements: Option<Arc<dyn Entitlements>>,
    ) -> Meter {
        Meter {
            pool,
            limits,
            entitlements,
        }
    }

    /// The daily tokens of `plan`; `None` is unlimited.
    pub fn limit(&self, plan: &str) -> Option<i64> {
        self.limits.get(&setting_suffix(plan)).copied()
    }

    async fn plan(&self, caller: &Caller) -> Result<Plan, AiError> {
        match (caller.account, &self.entitlements) {
            (Some(user), Some(entitlements)) => Ok(entitlements.plan(user).await?),
            _ => Ok(Plan::free()),
        }
    }

    async fn used(&self, user_id: &str, day: NaiveDate) -> Result<i64, AiError> {
        let mut pooled = self.pool.read().await?;
        Ok(store::used(&mut pooled.conn(), user_id, &day.to_string()).await?)
    }

    /// The caller's budget today.
    pub async fn quota(&self, caller: &Caller) -> Result<Quota, AiError> {
        let plan = self.plan(caller).await?;
        let now = kernel::time::now();
        let used = self.used(&caller.id, now.date()).await?;
        Ok(Quota {
            user_id: caller.id.clone(),
            limit: self.limit(&plan.name),
            plan: plan.name,
            day: now.date(),
            used,
            resets_at: next_reset(now),
        })
    }

    /// Refuses a caller whose plan's tokens for today are spent (429). Reads no count when the
    /// caller's plan has no budget, and nothing at all when no budget is set.
    pub async fn check(&self, caller: &Caller) -> Result<(), AiError> {
        if !caller.metered || self.limits.is_empty() {
            return Ok(());
        }
        let plan = self.plan(caller).await?;
        let Some(limit) = self.limit(&plan.name) else {
            return Ok(());
        };
        let now = kernel::time::now();
        let used = self.used(&caller.id, now.date()).await?;
        let quota = Quota {
            user_id: caller.id.clone(),
            plan: plan.name,
            day: now.date(),
            used,
            limit: Some(limit),
            resets_at: next_reset(now),
        };
        if quota.spent() {
            return Err(AiError::QuotaExceeded(quota));
        }
        Ok(())
    }

    /// Adds `tokens` to the count of `user_id` today.
    pub async fn spend(&self, user_id: &str, tokens: i64) -> Result<(), AiError> {
        if tokens <= 0 {
            return Ok(());
        }
        let now = kernel::time::now();
        let mut pooled = self.pool.get().await?;
        store::add(
            &mut pooled.conn(),
            user_id,
            &now.date().to_string(),
            tokens,
            now,
        )
        .await?;
        Ok(())
    }

    /// Forgets counts older than [`KEEP_DAYS`]: the `ai_usage` step of `cleanup_expired_data`.
    pub async fn forget_old(&self) -> Result<usize, AiError> {
        let before = kernel::time::now().date() - chrono::Duration::days(KEEP_DAYS);
        let mut pooled = self.pool.get().await?;
        Ok(store::forget_before(&mut pooled.conn(), &before.to_string()).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{ChatMessage, Role};

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap_or_default()
    }

    #[test]
    fn plan_names_become_setting_suffixes() {
        assert_eq!(setting_suffix("free"), "FREE");
        assert_eq!(setting_suffix("team-2"), "TEAM_2");
        assert_eq!(setting_suffix("Monthly plan"), "MONTHLY_PLAN");
        assert_eq!(setting_suffix("price_monthly"), "PRICE_MONTHLY");
        assert_eq!(setting_suffix("Café"), "CAF_");
    }

    #[test]
    fn budgets_are_read_from_their_settings() {
        let settings = |pairs: &[(&str, &str)]| {
            parse_limits(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            )
        };
        let limits = settings(&[
            ("AI_DAILY_TOKENS_FREE", "1000"),
            ("AI_DAILY_TOKENS_TEAM_2", "0"),
            ("AI_MAX_TOKENS", "7"),
        ]);
        let expected: BTreeMap<String, i64> =
            [("FREE".to_owned(), 1000), ("TEAM_2".to_owned(), 0)].into();
        assert_eq!(limits, Ok(expected));
        for (name, value) in [
            ("AI_DAILY_TOKENS_pro", "5"),
            ("AI_DAILY_TOKENS_", "5"),
            ("AI_DAILY_TOKENS_PRO", "-1"),
            ("AI_DAILY_TOKENS_PRO", "lots"),
            ("AI_DAILY_TOKENS_PRO", "1000000000001"),
        ] {
            let refused = settings(&[(name, value)]).map_err(|e| e.setting);
            assert_eq!(refused, Err(name.to_owned()), "{name}={value}");
        }
    }

    #[test]
    fn characters_are_four_to_a_token_rounded_up() {
        assert_eq!(estimate(0), 0);
        assert_eq!(estimate(1), 1);
        assert_eq!(estimate(4), 1);
        assert_eq!(estimate(5), 2);
        let request = ChatRequest {
            model: "m".into(),
            system: Some("Be brief".into()),
            messages: vec![
                ChatMessage {
                    role: Role::User,
                    content: "héllo".into(),
                },
                ChatMessage {
                    role: Role::Assistant,
                    content: "hi".into(),
                },
            ],
            temperature: 0.7,
            max_tokens: 10,
        };
        assert_eq!(prompt_chars(&request), 8 + 5 + 2);
        // Nothing reported: (15 → 4) + (9 → 3).
        assert_eq!(spent(&request, "12345678é", Usage::default()), 7);
        let reported = Usage {
            input_tokens: Some(20),
            output_tokens: Some(30),
        };
        assert_eq!(spent(&request, "ignored", reported), 50);
        // Half reported, or a count of 0: the missing half is estimated.
        let half = Usage {
            input_tokens: Some(0),
            output_tokens: Some(2),
        };
        assert_eq!(spent(&request, "ignored", half), 4 + 2);
    }

    #[test]
    fn the_day_resets_at_the_next_utc_midnight() {
        let now = at("2026-11-25 23:59:59.250");
        assert_eq!(next_reset(now), at("2026-11-26 00:00:00.0"));
        assert_eq!(seconds_to_reset(now), 1);
        assert_eq!(seconds_to_reset(at("2026-11-25 00:00:00.0")), 86_400);
        assert_eq!(seconds_to_reset(at("2026-11-25 12:00:00.5")), 43_200);
    }

    #[test]
    fn a_quota_is_spent_at_its_limit() {
        let quota = Quota {
            user_id: "7".into(),
            plan: "free".into(),
            day: at("2026-11-25 10:00:00.0").date(),
            used: 90,
            limit: Some(100),
            resets_at: at("2026-11-26 00:00:00.0"),
        };
        assert_eq!((quota.remaining(), quota.spent()), (Some(10), false));
        let at_limit = Quota {
            used: 100,
            ..quota.clone()
        };
        assert!(at_limit.spent());
        let over = Quota {
            used: 130,
            ..quota.clone()
        };
        assert_eq!(over.remaining(), Some(0));
        let unlimited = Quota {
            limit: None,
            ..over
        };
        assert_eq!((unlimited.remaining(), unlimited.spent()), (None, false));
    }
}

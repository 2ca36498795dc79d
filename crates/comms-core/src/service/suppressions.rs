//! The suppression list: recipients the module no longer sends to. Webhooks add to it
//! (`events.rs`), the sends consult it before calling a provider, administrators list it and
//! take entries off.

use chrono::NaiveDateTime;
use kernel::pagination::Page;

use super::{CommsServiceImpl, now};
use crate::domain::Channel;
use crate::domain::suppression::{self, Reason};
use crate::error::CommsError;
use crate::store::suppressions::{self as store, NewSuppressionRow, SuppressionRow};

/// An entry of the suppression list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppression {
    pub id: i64,
    /// `email` or `sms`.
    pub channel: Channel,
    /// A lower-case email address or an E.164 number.
    pub address: String,
    pub reason: Reason,
    /// The provider's words (the bounce message, the error, the keyword).
    pub detail: Option<String>,
    /// The provider's id of the email or SMS that reported it.
    pub provider_id: Option<String>,
    pub created_at: NaiveDateTime,
}

/// Filters of the suppression list.
#[derive(Debug, Clone, Default)]
pub struct SuppressionFilter {
    pub channel: Option<Channel>,
    pub reason: Option<Reason>,
    /// Entries whose address contains this text (any case).
    pub contains: Option<String>,
}

impl From<SuppressionRow> for Suppression {
    fn from(row: SuppressionRow) -> Self {
        Suppression {
            id: row.id,
            channel: Channel::parse(&row.channel).unwrap_or(Channel::Email),
            address: row.address,
            reason: Reason::parse(&row.reason).unwrap_or(Reason::HardBounce),
            detail: row.detail,
            provider_id: row.provider_id,
            created_at: row.created_at,
        }
    }
}

/// Characters of a provider's words kept with an entry.
const DETAIL_CHARS: usize = 500;

impl CommsServiceImpl {
    /// Adds `address` (already normalised) to the list unless it is there: whether it was added.
    pub(super) async fn suppress(
        &self,
        channel: Channel,
        address: &str,
        reason: Reason,
        detail: Option<&str>,
        provider_id: Option<&str>,
    ) -> Result<bool, CommsError> {
        // A NUL cannot be stored by PostgreSQL; the provider's words are kept short.
        let detail: Option<String> =
            detail.map(|d| d.replace('\0', "").chars().take(DETAIL_CHARS).collect());
        let provider_id = provider_id.filter(|p| !p.contains('\0'));
        let row = NewSuppressionRow {
            channel: channel.as_str(),
            address,
            reason: reason.as_str(),
            detail: detail.as_deref(),
            provider_id,
            created_at: now(),
        };
        let mut pooled = self.pool.get().await?;
        let added = store::add(&mut pooled.conn(), &row).await?;
        if added {
            tracing::info!(
                channel = channel.as_str(),
                address,
                reason = reason.as_str(),
                "recipient suppressed"
            );
        }
        Ok(added)
    }

    /// Takes a number off the list after an opt-in keyword (START): only an SMS opt-out entry
    /// (`stop` or `unsubscribed`); whether one was removed.
    pub(super) async fn lift_opt_out(&self, number: &str) -> Result<bool, CommsError> {
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        let found = store::find_any(&mut conn, &[number.to_owned()]).await?;
        let opted_out = found.iter().any(|row| {
            matches!(
                Reason::parse(&row.reason),
                Some(Reason::Stop | Reason::Unsubscribed)
            )
        });
        if !opted_out {
            return Ok(false);
        }
        let removed = store::remove(&mut conn, number).await?.is_some();
        if removed {
            tracing::info!(address = number, "recipient opted back in");
        }
        Ok(removed)
    }

    /// `Suppressed` naming every listed recipient among `recipients` (checked addresses or
    /// numbers, normalised here), in the order given; `Ok` when none is listed.
    pub(super) async fn check_suppressed(&self, recipients: &[String]) -> Result<(), CommsError> {
        let normalised: Vec<String> = recipients
            .iter()
            .filter_map(|r| suppression::normalise(r).map(|(_, a)| a))
            .collect();
        let named = self.suppression_check.listed(normalised).await?;
        if named.is_empty() {
            return Ok(());
        }
        Err(CommsError::Suppressed(named))
    }

    pub(super) async fn list_suppressions(
        &self,
        filter: SuppressionFilter,
        page: Page,
    ) -> Result<(Vec<Suppression>, i64), CommsError> {
        let contains = filter
            .contains
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_lowercase);
        if contains.as_deref().is_some_and(|c| c.contains('\0')) {
            return Err(CommsError::Invalid(
                "Invalid address filter: it contains a NUL character".into(),
            ));
        }
        let store_filter = store::SuppressionFilter {
            channel: filter.channel.map(Channel::as_str),
            reason: filter.reason.map(Reason::as_str),
            contains: contains.as_deref(),
        };
        let mut pooled = self.pool.read().await?;
        let (rows, total) = store::list(
            &mut pooled.conn(),
            store_filter,
            page.offset(),
            page.limit(),
        )
        .await?;
        Ok((rows.into_iter().map(Suppression::from).collect(), total))
    }

    pub(super) async fn remove_suppression(&self, raw: &str) -> Result<Suppression, CommsError> {
        let (_, address) = suppression::normalise(raw).ok_or_else(|| {
            CommsError::Invalid(format!(
                "Invalid address: {raw} (an email address or an E.164 number)"
            ))
        })?;
        let mut pooled = self.pool.get().await?;
        let removed = store::remove(&mut pooled.conn(), &address)
            .await?
            .ok_or(CommsError::SuppressionNotFound(address))?;
        tracing::info!(address = removed.address, "suppression removed");
        Ok(removed.into())
    }
}

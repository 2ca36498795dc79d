//! The payment service: checkout through Stripe, the rows its signed events write, refunds,
//! cancels, and the caller-scoped reads.

mod billing;
mod detached;
mod events;
mod listing;
mod refund;

pub use billing::Portal;

use actix_web::web::Bytes;
use chrono::NaiveDateTime;
use kernel::cache::ReadCache;
use kernel::pagination::Page;
use kernel::{DbPool, FieldError};
use serde_json::Value;

use crate::config::PaymentConfig;
use crate::error::PaymentError;
use crate::store::{
    self, DisputeRow, InvoiceRow, ListedTransaction, SubscriptionRow, TransactionRow,
};
use crate::stripe::{CheckoutParams, Stripe, signature};

/// One page of transactions and the number that match.
#[derive(Debug)]
pub struct TransactionPage {
    pub rows: Vec<ListedTransaction>,
    pub total: i64,
}

/// Who asks: a user (sees their own rows), or anyone (no auth module, the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Anyone,
    User(i64),
}

impl Caller {
    fn user(self) -> Option<i64> {
        match self {
            Caller::Anyone => None,
            Caller::User(id) => Some(id),
        }
    }

    /// A row of another user is a 404, never a 403.
    fn sees(self, owner: Option<i64>) -> bool {
        match self {
            Caller::Anyone => true,
            Caller::User(id) => owner == Some(id),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct CheckoutRequest {
    pub price_id: Option<String>,
    pub quantity: Option<i64>,
    pub mode: Option<String>,
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub session_id: String,
    pub checkout_url: String,
}

/// Stripe's own refund reasons; any other text is kept as the refund's description only.
pub const REFUND_REASONS: [&str; 3] = ["requested_by_customer", "duplicate", "fraudulent"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub is_test_mode: bool,
    pub enabled: bool,
    pub total_transactions: i64,
    pub total_revenue_cents: i64,
    pub active_subscriptions: i64,
}

/// What a webhook delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookReceipt {
    pub event_type: String,
    pub duplicate: bool,
}

pub const TRANSACTION_STATUSES: [&str; 6] = [
    "succeeded",
    "pending",
    "failed",
    "refunded",
    "partially_refunded",
    "canceled",
];
pub const SUBSCRIPTION_STATUSES: [&str; 6] = [
    "active",
    "past_due",
    "canceled",
    "incomplete",
    "trialing",
    "unpaid",
];
pub const DISPUTE_STATUSES: [&str; 7] = [
    "warning_issued",
    "needs_response",
    "under_review",
    "won",
    "lost",
    "warning_closed",
    "charge_refunded",
];
/// The longest refund reason kept.
pub const MAX_REASON_CHARS: usize = 500;

/// A `status` filter must name one of `known` (422 otherwise, before it reaches a query).
fn check_status(status: Option<&str>, known: &[&str]) -> Result<(), PaymentError> {
    match status {
        Some(s) if !known.contains(&s) => Err(PaymentError::Invalid(FieldError::new(
            "status",
            format!("status must be one of {}", known.join(", ")),
        ))),
        _ => Ok(()),
    }
}

/// The dispute statuses `status=open` means.
pub const OPEN_DISPUTES: [&str; 3] = ["warning_issued", "needs_response", "under_review"];

pub(crate) struct PaymentServiceImpl {
    pool: DbPool,
    config: PaymentConfig,
    stripe: Option<Stripe>,
    /// Pages of transactions as answered (`READ_CACHE`), emptied by every write to them in this
    /// process.
    pages: ReadCache<PageKey, Bytes>,
    /// Verified webhook events on their way to the database, a batch at a time.
    events: events::EventWriter,
}

/// A page of transactions: whose (`None`: everyone's), of which status, offset and limit.
type PageKey = (Option<i64>, Option<String>, i64, i64);

/// The most pages of transactions kept (a full cache is emptied and refilled).
const CACHED_PAGES: usize = 4096;

fn page_key(caller: Caller, status: Option<&str>, page: Page) -> PageKey {
    (
        caller.user(),
        status.map(str::to_owned),
        page.offset(),
        page.limit(),
    )
}

fn now() -> NaiveDateTime {
    kernel::time::now()
}

fn idempotency_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Every operation of the payment module, as the HTTP handlers and the CLI use it.
#[async_trait::async_trait]
pub trait PaymentService: Send + Sync {
    fn config(&self) -> &PaymentConfig;

    /// Creates a Stripe checkout session; a user's first checkout creates their Stripe customer.
    async fn checkout(
        &self,
        caller: Caller,
        email: Option<String>,
        request: CheckoutRequest,
    ) -> Result<Checkout, PaymentError>;

    /// Verifies a delivery on its raw bytes, then applies the event and records its id in one
    /// transaction (a failure rolls both back and answers 500, so that Stripe retries).
    async fn webhook(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
    ) -> Result<WebhookReceipt, PaymentError>;

    /// A saved delivery fed back (`keel payment replay-webhooks`): verified like a live one but
    /// at the time it was signed (saved events are older than the tolerance), or with `trust`
    /// not verified at all.
    async fn replay(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        trust: bool,
    ) -> Result<WebhookReceipt, PaymentError>;

    /// The user of the payment customer with this e-mail address (the CLI's `--user`).
    async fn user_by_email(&self, email: &str) -> Result<Option<i64>, PaymentError>;

    /// One page of the caller's transactions, newest first, read now.
    async fn transactions(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<TransactionPage, PaymentError>;

    /// The same page as the API answers it (`TransactionList`'s JSON), from each row's stored
    /// JSON (see `view`), through the read cache.
    async fn transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<Bytes, PaymentError>;

    /// [`transactions_json`](Self::transactions_json)' page when the read cache holds it: memory
    /// only, so callers ask here first, without a unit of work.
    fn cached_transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Option<Bytes>;

    async fn transaction(&self, caller: Caller, id: i64) -> Result<TransactionRow, PaymentError>;

    /// Refunds all or part of a charge: the new refund row.
    async fn refund(
        &self,
        caller: Caller,
        id: i64,
        amount: Option<i64>,
        reason: Option<String>,
    ) -> Result<TransactionRow, PaymentError>;

    async fn subscriptions(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<SubscriptionRow>, PaymentError>;

    /// Asks Stripe to cancel at the period's end; the row as updated.
    async fn cancel(&self, caller: Caller, id: i64) -> Result<SubscriptionRow, PaymentError>;

    async fn disputes(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<DisputeRow>, PaymentError>;

    async fn dispute(&self, caller: Caller, id: i64) -> Result<DisputeRow, PaymentError>;

    /// Opens a Stripe billing portal session for the caller's Stripe customer (409 without one),
    /// returning to `return_url` when it is on an allowed origin, else to
    /// `PAYMENT_PORTAL_RETURN_URL`.
    async fn portal(
        &self,
        caller: Caller,
        return_url: Option<&str>,
    ) -> Result<Portal, PaymentError>;

    /// One page of the caller's invoices (those of their Stripe customers), newest first.
    async fn invoices(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<(Vec<InvoiceRow>, i64), PaymentError>;

    /// The status summary: of the caller's own rows for a user, of every row for
    /// [`Caller::Anyone`] (an administrator, the CLI, a deployment without auth).
    async fn summary(&self, caller: Caller) -> Result<Summary, PaymentError>;

    /// Forgets processed event ids older than Stripe's retry window (3 days): the cleanup task.
    async fn forget_old_events(&self) -> Result<usize, PaymentError>;
}

impl PaymentServiceImpl {
    pub(crate) fn new(
        pool: DbPool,
        config: PaymentConfig,
        http: kernel::http_client::HttpClient,
        read_cache: bool,
    ) -> Self {
        let stripe = config
            .secret_key
            .as_deref()
            .map(|key| Stripe::new(http, &config.api_base, key, config.timeout));
        PaymentServiceImpl {
            events: events::EventWriter::new(pool.clone()),
            pool,
            config,
            stripe,
            pages: ReadCache::new(read_cache, CACHED_PAGES),
        }
    }

    fn stripe(&self) -> Result<&Stripe, PaymentError> {
        self.stripe.as_ref().ok_or(PaymentError::NotConfigured)
    }

    /// The user's Stripe customer, created on their first checkout.
    async fn customer_for(
        &self,
        stripe: &Stripe,
        user: i64,
        email: Option<&str>,
    ) -> Result<String, PaymentError> {
        {
            let mut pooled = self.pool.read().await?;
            if let Some(id) = store::customer_of_user(&mut pooled.conn(), user).await? {
                return Ok(id);
            }
        }
        let id = stripe
            .create_customer(email, Some(user), &format!("customer-of-user-{user}"))
            .await?;
        // Two first checkouts at once get the same customer from Stripe (same idempotency key):
        // the one that stores it second finds it stored.
        let mut pooled = self.pool.get().await?;
        match store::upsert_customer(&mut pooled.conn(), &id, Some(user), email, now()).await {
            Err(e) if kernel::db::is_unique_violation(&e) => {}
            other => other?,
        }
        Ok(id)
    }

    fn verify(&self, header: Option<&str>, body: &[u8], now: i64) -> Result<(), PaymentError> {
        let secret = self
            .config
            .webhook_secret
            .as_deref()
            .ok_or(PaymentError::InvalidPayload)?;
        signature::verify(secret, header, body, now).map_err(|_| PaymentError::InvalidPayload)
    }

    async fn apply(&self, body: &[u8]) -> Result<WebhookReceipt, PaymentError> {
        let event: Value =
            serde_json::from_slice(body).map_err(|_| PaymentError::InvalidPayload)?;
        let event_type = crate::webhook::kind(&event)
            .ok_or(PaymentError::InvalidPayload)?
            .to_owned();
        let processed = self.events.apply(event).await?;
        if processed {
            self.pages.invalidate();
        }
        Ok(WebhookReceipt {
            event_type,
            duplicate: !processed,
        })
    }
}

#[async_trait::async_trait]
impl PaymentService for PaymentServiceImpl {
    fn config(&self) -> &PaymentConfig {
        &self.config
    }

    async fn checkout(
        &self,
        caller: Caller,
        email: Option<String>,
        request: CheckoutRequest,
    ) -> Result<Checkout, PaymentError> {
        let invalid = |field: &str, message: &str| {
            PaymentError::Invalid(FieldError::new(field, message.to_owned()))
        };
        let price_id = request
            .price_id
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| invalid("price_id", "price_id is required"))?;
        let mode = request.mode.unwrap_or_default();
        if mode != "payment" && mode != "subscription" {
            return Err(invalid("mode", "mode must be payment or subscription"));
        }
        let quantity = request.quantity.unwrap_or(1);
        if quantity < 1 {
            return Err(invalid("quantity", "quantity must be 1 or more"));
        }
        let stripe = self.stripe()?;
        let pages = &self.config.public_base_url;
        let success_url = request
            .success_url
            .or_else(|| self.config.success_url.clone())
            .unwrap_or_else(|| {
                format!("{pages}/payment/success?session_id={{CHECKOUT_SESSION_ID}}")
            });
        let cancel_url = request
            .cancel_url
            .or_else(|| self.config.cancel_url.clone())
            .unwrap_or_else(|| format!("{pages}/payment/cancel"));
        let customer = match caller.user() {
            None => None,
            Some(user) => Some(self.customer_for(stripe, user, email.as_deref()).await?),
        };
        let session = stripe
            .create_checkout_session(
                &CheckoutParams {
                    mode,
                    price_id,
                    quantity,
                    success_url,
                    cancel_url,
                    customer,
                    client_reference_id: caller.user().map(|u| u.to_string()),
                    user_id: caller.user(),
                },
                &idempotency_key(),
            )
            .await?;
        Ok(Checkout {
            session_id: session.id,
            checkout_url: session.url,
        })
    }

    async fn webhook(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
    ) -> Result<WebhookReceipt, PaymentError> {
        self.verify(signature_header, body, chrono::Utc::now().timestamp())?;
        self.apply(body).await
    }

    async fn replay(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        trust: bool,
    ) -> Result<WebhookReceipt, PaymentError> {
        if !trust {
            let signed_at = signature_header
                .and_then(|h| h.split(',').find_map(|part| part.trim().strip_prefix("t=")))
                .and_then(|t| t.parse().ok())
                .ok_or(PaymentError::InvalidPayload)?;
            self.verify(signature_header, body, signed_at)?;
        }
        self.apply(body).await
    }

    async fn user_by_email(&self, email: &str) -> Result<Option<i64>, PaymentError> {
        let mut pooled = self.pool.read().await?;
        Ok(store::user_by_email(&mut pooled.conn(), email).await?)
    }

    async fn transactions(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<TransactionPage, PaymentError> {
        check_status(status, &TRANSACTION_STATUSES)?;
        let mut pooled = self.pool.read().await?;
        let (user, offset, limit) = (caller.user(), page.offset(), page.limit());
        let (rows, total) =
            store::list_transactions(&mut pooled.conn(), user, status, offset, limit).await?;
        Ok(TransactionPage { rows, total })
    }

    async fn transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<Bytes, PaymentError> {
        check_status(status, &TRANSACTION_STATUSES)?;
        self.pages
            .get_or_load(page_key(caller, status, page), || {
                self.transaction_page_json(caller.user(), status, page)
            })
            .await
    }

    fn cached_transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Option<Bytes> {
        self.pages.get(&page_key(caller, status, page)).ok()
    }

    async fn transaction(&self, caller: Caller, id: i64) -> Result<TransactionRow, PaymentError> {
        let mut pooled = self.pool.read().await?;
        store::find_transaction(&mut pooled.conn(), id)
            .await?
            .filter(|t| caller.sees(t.user_id))
            .ok_or(PaymentError::NotFound("Transaction"))
    }

    async fn refund(
        &self,
        caller: Caller,
        id: i64,
        amount: Option<i64>,
        reason: Option<String>,
    ) -> Result<TransactionRow, PaymentError> {
        self.refund_charge(caller, id, amount, reason).await
    }

    async fn subscriptions(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<SubscriptionRow>, PaymentError> {
        check_status(status, &SUBSCRIPTION_STATUSES)?;
        let mut pooled = self.pool.read().await?;
        Ok(store::list_subscriptions(&mut pooled.conn(), caller.user(), status).await?)
    }

    async fn cancel(&self, caller: Caller, id: i64) -> Result<SubscriptionRow, PaymentError> {
        let sub = {
            let mut pooled = self.pool.read().await?;
            store::find_subscription(&mut pooled.conn(), id)
                .await?
                .filter(|s| caller.sees(s.user_id))
                .ok_or(PaymentError::NotFound("Subscription"))?
        };
        let stripe = self.stripe()?;
        stripe
            .cancel_at_period_end(&sub.provider_subscription_id, &idempotency_key())
            .await?;
        let mut pooled = self.pool.get().await?;
        let mut conn = pooled.conn();
        let mut updated = sub;
        updated.cancel_at_period_end = true;
        updated.updated_at = now();
        store::put_subscription(&mut conn, &updated).await?;
        Ok(updated)
    }

    async fn disputes(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<DisputeRow>, PaymentError> {
        let statuses: Option<Vec<&str>> = match status {
            None => None,
            Some("open") => Some(OPEN_DISPUTES.to_vec()),
            Some(one) => {
                check_status(Some(one), &DISPUTE_STATUSES)?;
                Some(vec![one])
            }
        };
        let mut pooled = self.pool.read().await?;
        Ok(store::list_disputes(&mut pooled.conn(), caller.user(), statuses.as_deref()).await?)
    }

    async fn dispute(&self, caller: Caller, id: i64) -> Result<DisputeRow, PaymentError> {
        let mut pooled = self.pool.read().await?;
        let mut conn = pooled.conn();
        let dispute = store::find_dispute(&mut conn, id)
            .await?
            .ok_or(PaymentError::NotFound("Dispute"))?;
        let owner = match dispute.transaction_id {
            Some(t) => store::find_transaction(&mut conn, t)
                .await?
                .and_then(|t| t.user_id),
            None => None,
        };
        if caller.sees(owner) {
            Ok(dispute)
        } else {
            Err(PaymentError::NotFound("Dispute"))
        }
    }

    async fn portal(
        &self,
        caller: Caller,
        return_url: Option<&str>,
    ) -> Result<Portal, PaymentError> {
        self.open_portal(caller, return_url).await
    }

    async fn invoices(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<(Vec<InvoiceRow>, i64), PaymentError> {
        self.list_invoices(caller, status, page).await
    }

    async fn summary(&self, caller: Caller) -> Result<Summary, PaymentError> {
        let mut pooled = self.pool.read().await?;
        let mut conn = pooled.conn();
        let (total_transactions, total_revenue_cents) =
            store::totals(&mut conn, caller.user()).await?;
        let active_subscriptions =
            store::count_active_subscriptions(&mut conn, caller.user()).await?;
        Ok(Summary {
            is_test_mode: self.config.is_test_mode(),
            enabled: self.stripe.is_some(),
            total_transactions,
            total_revenue_cents,
            active_subscriptions,
        })
    }

    async fn forget_old_events(&self) -> Result<usize, PaymentError> {
        let before = now() - chrono::Duration::days(3);
        let mut pooled = self.pool.get().await?;
        Ok(store::forget_events(&mut pooled.conn(), before).await?)
    }
}

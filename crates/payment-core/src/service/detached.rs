//! The service as the module hands it out (to its handlers, its CLI and its cleanup task):
//! every call a unit of work ([`Detached`]), so that a request dropped mid-call (the client went
//! away) cannot leave a Stripe call made but its row not written, or a webhook's event applied
//! but not recorded. The one exception is a shallow page of transactions, a read of bounded cost
//! that runs on the caller's task ([`Detached::read`]). Each method copies its borrowed arguments
//! and forwards to the wrapped service; a method added to [`PaymentService`] without a line here
//! does not compile.

use actix_web::web::Bytes;
use kernel::pagination::Page;
use kernel::unit::Detached;

use super::{
    Caller, Checkout, CheckoutRequest, PaymentService, Portal, Summary, TransactionPage,
    WebhookReceipt,
};
use crate::config::PaymentConfig;
use crate::error::PaymentError;
use crate::store::{DisputeRow, InvoiceRow, SubscriptionRow, TransactionRow};

/// The rows a page of transactions may end at and still be read on the caller's task
/// ([`Detached::read`]): its statement walks the index from the newest row to the page's last,
/// a thousand entries at most. A deeper page runs as a unit of work, off the HTTP worker.
const READ_INLINE_ROWS: i64 = 1_000;

/// Whether `page` ends within [`READ_INLINE_ROWS`].
fn shallow(page: Page) -> bool {
    page.offset().saturating_add(page.limit()) <= READ_INLINE_ROWS
}

#[async_trait::async_trait]
impl PaymentService for Detached<dyn PaymentService> {
    /// A setting: no unit.
    fn config(&self) -> &PaymentConfig {
        self.inner().config()
    }

    async fn checkout(
        &self,
        caller: Caller,
        email: Option<String>,
        request: CheckoutRequest,
    ) -> Result<Checkout, PaymentError> {
        self.run(move |s| async move { s.checkout(caller, email, request).await })
            .await
    }

    async fn webhook(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
    ) -> Result<WebhookReceipt, PaymentError> {
        let signature = signature_header.map(str::to_owned);
        let body = body.to_vec();
        self.run(move |s| async move { s.webhook(signature.as_deref(), &body).await })
            .await
    }

    async fn replay(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        trust: bool,
    ) -> Result<WebhookReceipt, PaymentError> {
        let signature = signature_header.map(str::to_owned);
        let body = body.to_vec();
        self.run(move |s| async move { s.replay(signature.as_deref(), &body, trust).await })
            .await
    }

    async fn user_by_email(&self, email: &str) -> Result<Option<i64>, PaymentError> {
        let email = email.to_owned();
        self.run(move |s| async move { s.user_by_email(&email).await })
            .await
    }

    async fn transactions(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<TransactionPage, PaymentError> {
        let status = status.map(str::to_owned);
        self.read_when(shallow(page), move |s| async move {
            s.transactions(caller, status.as_deref(), page).await
        })
        .await
    }

    async fn transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<Bytes, PaymentError> {
        let status = status.map(str::to_owned);
        self.read_when(shallow(page), move |s| async move {
            s.transactions_json(caller, status.as_deref(), page).await
        })
        .await
    }

    /// Memory only: no unit.
    fn cached_transactions_json(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Option<Bytes> {
        self.inner().cached_transactions_json(caller, status, page)
    }

    async fn transaction(&self, caller: Caller, id: i64) -> Result<TransactionRow, PaymentError> {
        self.run(move |s| async move { s.transaction(caller, id).await })
            .await
    }

    async fn refund(
        &self,
        caller: Caller,
        id: i64,
        amount: Option<i64>,
        reason: Option<String>,
    ) -> Result<TransactionRow, PaymentError> {
        self.run(move |s| async move { s.refund(caller, id, amount, reason).await })
            .await
    }

    async fn subscriptions(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<SubscriptionRow>, PaymentError> {
        let status = status.map(str::to_owned);
        self.run(move |s| async move { s.subscriptions(caller, status.as_deref()).await })
            .await
    }

    async fn cancel(&self, caller: Caller, id: i64) -> Result<SubscriptionRow, PaymentError> {
        self.run(move |s| async move { s.cancel(caller, id).await })
            .await
    }

    async fn disputes(
        &self,
        caller: Caller,
        status: Option<&str>,
    ) -> Result<Vec<DisputeRow>, PaymentError> {
        let status = status.map(str::to_owned);
        self.run(move |s| async move { s.disputes(caller, status.as_deref()).await })
            .await
    }

    async fn dispute(&self, caller: Caller, id: i64) -> Result<DisputeRow, PaymentError> {
        self.run(move |s| async move { s.dispute(caller, id).await })
            .await
    }

    async fn portal(
        &self,
        caller: Caller,
        return_url: Option<&str>,
    ) -> Result<Portal, PaymentError> {
        let return_url = return_url.map(str::to_owned);
        self.run(move |s| async move { s.portal(caller, return_url.as_deref()).await })
            .await
    }

    async fn invoices(
        &self,
        caller: Caller,
        status: Option<&str>,
        page: Page,
    ) -> Result<(Vec<InvoiceRow>, i64), PaymentError> {
        let status = status.map(str::to_owned);
        self.run(move |s| async move { s.invoices(caller, status.as_deref(), page).await })
            .await
    }

    async fn summary(&self, caller: Caller) -> Result<Summary, PaymentError> {
        self.run(move |s| async move { s.summary(caller).await })
            .await
    }

    async fn forget_old_events(&self) -> Result<usize, PaymentError> {
        self.run(move |s| async move { s.forget_old_events().await })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_within_the_first_thousand_rows_are_read_inline() {
        let page = |page, page_size| Page { page, page_size };
        assert!(shallow(page(1, 20)));
        assert!(shallow(page(10, 100)));
        assert!(!shallow(page(11, 100)));
        assert!(!shallow(page(i64::MAX, 100)));
    }
}

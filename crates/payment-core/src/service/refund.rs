//! Refunding all or part of a charge through Stripe, and its refund row.

use kernel::{FieldError, write_tx};

use super::{Caller, MAX_REASON_CHARS, PaymentService, PaymentServiceImpl, REFUND_REASONS};
use super::{idempotency_key, now};
use crate::error::PaymentError;
use crate::store::{self, NewTransaction, TransactionRow};
use crate::stripe::RefundParams;

impl PaymentServiceImpl {
    /// [`PaymentService::refund`].
    pub(super) async fn refund_charge(
        &self,
        caller: Caller,
        id: i64,
        amount: Option<i64>,
        reason: Option<String>,
    ) -> Result<TransactionRow, PaymentError> {
        if let Some(reason) = &reason
            && (reason.contains('\0') || reason.chars().count() > MAX_REASON_CHARS)
        {
            return Err(PaymentError::Invalid(FieldError::new(
                "reason",
                format!("reason must be at most {MAX_REASON_CHARS} characters, without NUL"),
            )));
        }
        let charge = self.transaction(caller, id).await?;
        if charge.kind == "refund" {
            return Err(PaymentError::BadRequest(
                "A refund cannot be refunded".into(),
            ));
        }
        let left = charge.amount - charge.amount_refunded;
        if charge.status == "refunded" || left <= 0 {
            return Err(PaymentError::Conflict(
                "Transaction already fully refunded".into(),
            ));
        }
        if !matches!(charge.status.as_str(), "succeeded" | "partially_refunded") {
            return Err(PaymentError::BadRequest(format!(
                "Only a succeeded charge can be refunded (this one is {})",
                charge.status
            )));
        }
        let amount = amount.unwrap_or(left);
        if amount < 1 || amount > left {
            return Err(PaymentError::Invalid(FieldError::new(
                "amount",
                format!("amount must be between 1 and {left} (what is not yet refunded)"),
            )));
        }
        let stripe = self.stripe()?;
        let known = reason
            .as_deref()
            .filter(|r| REFUND_REASONS.contains(r))
            .map(str::to_owned);
        let refund = stripe
            .create_refund(
                &RefundParams {
                    payment_intent: charge.payment_intent_id.clone(),
                    charge: if charge.payment_intent_id.is_none() {
                        charge.charge_id.clone()
                    } else {
                        None
                    },
                    amount: Some(amount),
                    reason: known,
                    metadata: Vec::new(),
                },
                &idempotency_key(),
            )
            .await?;
        let row = write_tx!(&self.pool, PaymentError, |tx| {
            let Some(mut parent) = store::find_transaction(tx, charge.id).await? else {
                return Err(PaymentError::NotFound("Transaction"));
            };
            if let Some(existing) = store::find_by_provider_id(tx, &refund.id).await? {
                return Ok(existing); // the charge.refunded event was faster
            }
            let now = now();
            parent.amount_refunded = (parent.amount_refunded + refund.amount).min(parent.amount);
            parent.status = if parent.amount_refunded >= parent.amount {
                "refunded".into()
            } else {
                "partially_refunded".into()
            };
            parent.updated_at = now;
            store::save_transaction(tx, &parent).await?;
            let new = NewTransaction {
                user_id: parent.user_id,
                provider_customer_id: parent.provider_customer_id.clone(),
                kind: "refund".to_owned(),
                status: refund.status.clone(),
                amount: refund.amount,
                amount_refunded: 0,
                currency: refund.currency.clone(),
                description: reason.clone().unwrap_or_default(),
                provider_transaction_id: refund.id.clone(),
                payment_intent_id: parent.payment_intent_id.clone(),
                charge_id: parent.charge_id.clone(),
                parent_id: Some(parent.id),
                created_at: now,
                updated_at: now,
            };
            Ok(store::insert_transaction(tx, &new).await?)
        })?;
        self.pages.invalidate();
        Ok(row)
    }
}

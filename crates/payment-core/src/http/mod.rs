//! Handlers of `/api/v1/payment` (one file per resource), the built-in `/payment/...` pages, and
//! their bodies.

pub mod checkout;
pub mod disputes;
pub mod invoices;
pub mod pages;
pub mod portal;
pub mod status;
pub mod subscriptions;
pub mod transactions;
pub mod webhook;

use std::sync::Arc;

use kernel::identity::{self, Access, need};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::service::{Caller, PaymentService};

pub struct PaymentState {
    pub service: Arc<dyn PaymentService>,
}

/// The rows a caller sees: a user's own, or every row on an open deployment.
fn caller(access: &Access) -> Caller {
    match access.user_id() {
        Some(id) => Caller::User(id),
        None => Caller::Anyone,
    }
}

/// Every route but the webhook needs an active user when auth is mounted (spec, Payment 1).
type PaymentUser = identity::Caller<need::User>;

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatusQuery {
    pub status: Option<String>,
}

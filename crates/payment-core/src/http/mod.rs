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

use kernel::ApiError;
use kernel::identity::{self, Access, need};
use kernel::pagination::{Page, PageParams};
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

/// A page of a list and the status it shows, read from the query string in one pass (two
/// extractors would each parse all of it).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatusPage {
    /// 1-based page number (default 1).
    #[param(minimum = 1)]
    pub page: Option<i64>,
    /// Items per page (default 20, at most 100).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<i64>,
    pub status: Option<String>,
}

impl StatusPage {
    /// The page, checked as [`PageParams::resolve`] checks it, and the status (an empty one
    /// is none).
    pub fn resolve(self) -> Result<(Page, Option<String>), ApiError> {
        let page = PageParams {
            page: self.page,
            page_size: self.page_size,
        }
        .resolve()?;
        Ok((page, self.status.filter(|s| !s.is_empty())))
    }
}

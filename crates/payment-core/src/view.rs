//! A transaction as a list shows it, written as JSON once, when the transaction is written, and
//! stored with it (`payment_transactions.api_json`): a page then copies each row's stored text
//! into the answer instead of reading eight columns into strings and escaping them again on every
//! request (the blog keeps its posts the same way).
//!
//! The stored text is the JSON object of every field of a transaction response but `id`, in its
//! order. A page writes `{"id":N,` and then the stored object's members. A row whose text is
//! missing (stored before the column existed, or changed by a writer that does not write it,
//! which a trigger turns into NULL) is written from its columns instead, through the same
//! [`Shown`].

use actix_web::web::Bytes;
use chrono::NaiveDateTime;
pub use kernel::json::is_spliceable;
use kernel::json::{open_with_id, push_int, push_str, push_time};

use crate::store::{ListedTransaction, NewTransaction, TransactionRow};

/// The fields of a transaction that its stored JSON holds, borrowed from a row.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    pub provider_transaction_id: &'a str,
    pub kind: &'a str,
    pub status: &'a str,
    pub amount: i64,
    pub currency: &'a str,
    pub description: &'a str,
    pub created_at: &'a NaiveDateTime,
}

impl Shown<'_> {
    /// The JSON object stored with the transaction, written by hand (see `kernel::json`).
    pub fn to_json(self) -> String {
        let mut out =
            Vec::with_capacity(160 + self.provider_transaction_id.len() + self.description.len());
        out.extend_from_slice(b"{\"provider_transaction_id\":");
        push_str(&mut out, self.provider_transaction_id);
        out.extend_from_slice(b",\"type\":");
        push_str(&mut out, self.kind);
        out.extend_from_slice(b",\"status\":");
        push_str(&mut out, self.status);
        out.extend_from_slice(b",\"amount\":");
        push_int(&mut out, self.amount);
        out.extend_from_slice(b",\"currency\":");
        push_str(&mut out, self.currency);
        out.extend_from_slice(b",\"description\":");
        push_str(&mut out, self.description);
        out.extend_from_slice(b",\"created_at\":");
        push_time(&mut out, self.created_at);
        out.push(b'}');
        // Only whole strings and ASCII were written.
        String::from_utf8(out).unwrap_or_default()
    }
}

macro_rules! shown_from {
    ($row:ty) => {
        impl<'a> From<&'a $row> for Shown<'a> {
            fn from(t: &'a $row) -> Self {
                Shown {
                    provider_transaction_id: &t.provider_transaction_id,
                    kind: &t.kind,
                    status: &t.status,
                    amount: t.amount,
                    currency: &t.currency,
                    description: &t.description,
                    created_at: &t.created_at,
                }
            }
        }
    };
}
shown_from!(NewTransaction);
shown_from!(TransactionRow);
shown_from!(ListedTransaction);

/// A page as `TransactionListResponse` serializes, from each row's id and stored JSON (each
/// [spliceable](is_spliceable), as [`Shown::to_json`] writes it).
pub fn page_json<'a>(
    rows: impl ExactSizeIterator<Item = (i64, &'a str)>,
    total: i64,
    page: i64,
    page_size: i64,
) -> Bytes {
    let mut out = Vec::with_capacity(64 + rows.len() * 220);
    out.extend_from_slice(b"{\"transactions\":[");
    for (i, (id, stored)) in rows.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        open_with_id(&mut out, id, stored);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"total\":");
    push_int(&mut out, total);
    out.extend_from_slice(b",\"page\":");
    push_int(&mut out, page);
    out.extend_from_slice(b",\"page_size\":");
    push_int(&mut out, page_size);
    out.push(b'}');
    out.into()
}

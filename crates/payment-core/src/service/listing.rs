//! The page of transactions as the API answers it, from each row's stored JSON (see
//! [`crate::view`]), and the JSON the module writes for rows that lack it when it starts.

use actix_web::web::Bytes;
use kernel::pagination::Page;
use kernel::write_tx;

use super::PaymentServiceImpl;
use crate::error::PaymentError;
use crate::store;
use crate::view::{self, Shown};

impl PaymentServiceImpl {
    /// One page of `user`'s transactions (`None`: everyone's) as JSON. A row without usable
    /// stored JSON is written from its columns, all such rows read in one more query.
    pub(super) async fn transaction_page_json(
        &self,
        user: Option<i64>,
        status: Option<&str>,
        page: Page,
    ) -> Result<Bytes, PaymentError> {
        let mut pooled = self.pool.read().await?;
        let conn = &mut pooled.conn();
        let (mut rows, total) =
            store::list_transaction_json(conn, user, status, page.offset(), page.limit()).await?;
        let missing: Vec<i64> = rows
            .iter()
            .filter(|(_, json)| !json.as_deref().is_some_and(view::is_spliceable))
            .map(|(id, _)| *id)
            .collect();
        if !missing.is_empty() {
            let full = store::listed_by_ids(conn, &missing).await?;
            for (id, json) in &mut rows {
                if let Ok(at) = full.binary_search_by_key(id, |f| f.id) {
                    *json = Some(Shown::from(&full[at]).to_json());
                }
            }
        }
        // A row deleted between the two statements (PostgreSQL reads no snapshot) is left out.
        let shown: Vec<(i64, &str)> = rows
            .iter()
            .filter_map(|(id, json)| {
                Some((*id, json.as_deref().filter(|j| view::is_spliceable(j))?))
            })
            .collect();
        Ok(view::page_json(
            shown.into_iter(),
            total,
            page.page,
            page.page_size,
        ))
    }

    /// Writes the JSON of every transaction that lacks it (stored before the column existed, or
    /// changed by a writer that does not write it), in batches; returns how many it wrote. Runs
    /// when the module starts, so that pages read one statement again.
    pub(crate) async fn render_missing(&self) -> Result<usize, PaymentError> {
        const BATCH: i64 = 500;
        let mut after_id = 0;
        let mut rendered = 0;
        loop {
            let ids = {
                let mut pooled = self.pool.get().await?;
                store::unrendered_transactions(&mut pooled.conn(), after_id, BATCH).await?
            };
            let Some(&last) = ids.last() else {
                return Ok(rendered);
            };
            after_id = last;
            // As they are now: another instance may have written them since they were listed.
            rendered += write_tx!(&self.pool, PaymentError, |tx| {
                Ok(store::render_transactions(tx, &ids).await?)
            })?;
            if (ids.len() as i64) < BATCH {
                return Ok(rendered);
            }
        }
    }
}

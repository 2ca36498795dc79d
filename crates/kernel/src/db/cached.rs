//! [`Cached`]: a statement prepared once per connection, though diesel would prepare it anew on
//! every call.
//!
//! diesel caches a prepared statement only when its SQL text cannot vary between calls of the
//! same Rust query. It refuses every `UPDATE` (a changeset may skip `None` fields), every insert
//! of a struct with optional fields (`DEFAULT` for a `None`), `ON CONFLICT ... DO UPDATE`,
//! `eq_any` (one bind per element on some backends) and every `sql()` fragment. On PostgreSQL
//! such a statement costs a second round trip (parse and describe, then execute) and a fresh
//! plan each time. The cache is keyed by the SQL text and the bind types, so caching one is never
//! wrong: the wrapper only promises that the texts it produces are few (a bounded number of
//! shapes), so that the per-connection cache stays small. Never wrap a statement whose text
//! grows with its input (a list of values, one bind per element).
//!
//! It matters on PostgreSQL, where diesel-async asks the statement itself. diesel's synchronous
//! SQLite connection asks through a reference, which does not forward the answer, so there the
//! statement is still prepared on each call: in process, without a round trip.

use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::QueryResult;

/// A statement of few distinct SQL texts, cached by its text like any other (see the module).
#[derive(Debug, Clone, Copy)]
pub struct Cached<Q>(pub Q);

impl<Q> QueryId for Cached<Q> {
    type QueryId = ();
    // Keyed by its SQL text, never by its Rust type.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Cached<Q> {
    type SqlType = Q::SqlType;
}

impl<Q: QueryFragment<DB>, DB: Backend> QueryFragment<DB> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q, Conn> diesel::RunQueryDsl<Conn> for Cached<Q> {}

#[cfg(all(test, feature = "postgres"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::{Arc, Mutex};

    use diesel::connection::{Instrumentation, InstrumentationEvent};
    use diesel::{ExpressionMethods, QueryDsl};
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    use super::Cached;

    diesel::table! {
        cached_probe (id) {
            id -> Integer,
            n -> Integer,
        }
    }

    /// Counts the statements a connection puts in its cache.
    fn cache_counter() -> (Arc<Mutex<usize>>, impl Instrumentation) {
        let cached = Arc::new(Mutex::new(0));
        let seen = Arc::clone(&cached);
        let instrumentation = move |event: InstrumentationEvent<'_>| {
            if matches!(event, InstrumentationEvent::CacheQuery { .. }) {
                *seen.lock().unwrap() += 1;
            }
        };
        (cached, instrumentation)
    }

    #[tokio::test]
    async fn a_wrapped_update_is_prepared_once_and_a_bare_one_every_time_on_postgres() {
        let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
            return; // PostgreSQL half: needs TEST_DATABASE_URL
        };
        let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
        diesel::sql_query(
            "CREATE TEMPORARY TABLE cached_probe (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        let (cached, instrumentation) = cache_counter();
        conn.set_instrumentation(instrumentation);
        for n in 0..3 {
            let update = diesel::update(cached_probe::table.filter(cached_probe::id.eq(1)))
                .set(cached_probe::n.eq(n));
            update.execute(&mut conn).await.unwrap();
        }
        assert_eq!(
            *cached.lock().unwrap(),
            0,
            "diesel caches no UPDATE by itself"
        );
        for n in 0..3 {
            let update = diesel::update(cached_probe::table.filter(cached_probe::id.eq(1)))
                .set(cached_probe::n.eq(n));
            Cached(update).execute(&mut conn).await.unwrap();
        }
        assert_eq!(*cached.lock().unwrap(), 1, "prepared once, then reused");
    }
}

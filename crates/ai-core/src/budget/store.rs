//! The queries of the daily counts (`ai_usage`).

use chrono::NaiveDateTime;
use diesel::upsert::excluded;
use diesel::{ExpressionMethods, OptionalExtension, QueryDsl, QueryResult};
use kernel::{DbConn, with_conn};

use crate::schema::ai_usage;

/// Tokens counted for `user_id` on `day` (`YYYY-MM-DD`); 0 when none.
pub async fn used(conn: &mut DbConn<'_>, user_id: &str, day: &str) -> QueryResult<i64> {
    let tokens: Option<i64> = with_conn!(conn, |c| {
        ai_usage::table
            .find((user_id, day))
            .select(ai_usage::tokens)
            .get_result(c)
            .await
            .optional()
    })?;
    Ok(tokens.unwrap_or(0))
}

/// Adds `tokens` to the count of `user_id` on `day`, creating it: one statement
/// (`INSERT ... ON CONFLICT DO UPDATE SET tokens = tokens + excluded.tokens`), so concurrent
/// additions all land.
pub async fn add(
    conn: &mut DbConn<'_>,
    user_id: &str,
    day: &str,
    tokens: i64,
    now: NaiveDateTime,
) -> QueryResult<()> {
    with_conn!(conn, |c| {
        diesel::insert_into(ai_usage::table)
            .values((
                ai_usage::user_id.eq(user_id),
                ai_usage::day.eq(day),
                ai_usage::tokens.eq(tokens),
                ai_usage::updated_at.eq(now),
            ))
            .on_conflict((ai_usage::user_id, ai_usage::day))
            .do_update()
            .set((
                ai_usage::tokens.eq(ai_usage::tokens + excluded(ai_usage::tokens)),
                ai_usage::updated_at.eq(excluded(ai_usage::updated_at)),
            ))
            .execute(c)
            .await
            .map(drop)
    })
}

/// Forgets the counts of days before `day`; how many.
pub async fn forget_before(conn: &mut DbConn<'_>, day: &str) -> QueryResult<usize> {
    with_conn!(conn, |c| {
        diesel::delete(ai_usage::table.filter(ai_usage::day.lt(day)))
            .execute(c)
            .await
    })
}

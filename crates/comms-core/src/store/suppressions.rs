//! The suppression list's SQL.

use chrono::NaiveDateTime;
use diesel::expression_methods::EscapeExpressionMethods;
use diesel::{
    ExpressionMethods, Insertable, OptionalExtension, QueryDsl, QueryResult, Queryable, Selectable,
    SelectableHelper, TextExpressionMethods,
};
use kernel::time::StoredTime;
use kernel::{DbConn, with_conn};

use crate::schema::comms_suppressions;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = comms_suppressions)]
pub struct SuppressionRow {
    pub id: i64,
    pub channel: String,
    pub address: String,
    pub reason: String,
    pub detail: Option<String>,
    pub provider_id: Option<String>,
    #[diesel(deserialize_as = StoredTime)]
    pub created_at: NaiveDateTime,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = comms_suppressions)]
pub struct NewSuppressionRow<'a> {
    pub channel: &'a str,
    pub address: &'a str,
    pub reason: &'a str,
    pub detail: Option<&'a str>,
    pub provider_id: Option<&'a str>,
    pub created_at: NaiveDateTime,
}

/// Which entries a list shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct SuppressionFilter<'a> {
    pub channel: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// Entries whose address contains this text (already lower-case).
    pub contains: Option<&'a str>,
}

/// Adds an entry unless its address is already listed (the first reason stays): whether it was
/// added.
pub async fn add(conn: &mut DbConn<'_>, new: &NewSuppressionRow<'_>) -> QueryResult<bool> {
    with_conn!(conn, |c| {
        diesel::insert_into(comms_suppressions::table)
            .values(new)
            .on_conflict(comms_suppressions::address)
            .do_nothing()
            .execute(c)
            .await
            .map(|n| n > 0)
    })
}

/// The entries of these addresses.
pub async fn find_any(
    conn: &mut DbConn<'_>,
    addresses: &[String],
) -> QueryResult<Vec<SuppressionRow>> {
    if addresses.is_empty() {
        return Ok(Vec::new());
    }
    // One statement text whatever the number of addresses, prepared once per connection: the
    // sends checked together ask with all their recipients at once.
    with_conn!(
        conn,
        postgres | c | {
            comms_suppressions::table
                .select(SuppressionRow::as_select())
                .filter(comms_suppressions::address.eq_any(addresses))
                .load(c)
                .await
        },
        sqlite | c | {
            comms_suppressions::table
                .select(SuppressionRow::as_select())
                .filter(kernel::db::in_texts(comms_suppressions::address, addresses))
                .load(c)
                .await
        }
    )
}

/// Removes the entry of `address`: the removed entry, if there was one.
pub async fn remove(conn: &mut DbConn<'_>, address: &str) -> QueryResult<Option<SuppressionRow>> {
    with_conn!(conn, |c| {
        diesel::delete(comms_suppressions::table.filter(comms_suppressions::address.eq(address)))
            .returning(SuppressionRow::as_returning())
            .get_result(c)
            .await
            .optional()
    })
}

/// `text` as a LIKE pattern that matches it anywhere, its wildcards escaped with `\`.
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}

/// One page of the list, newest first, and the number of entries that match.
pub async fn list(
    conn: &mut DbConn<'_>,
    filter: SuppressionFilter<'_>,
    offset: i64,
    limit: i64,
) -> QueryResult<(Vec<SuppressionRow>, i64)> {
    let pattern = filter.contains.map(contains_pattern);
    // Built twice (rows and count): boxed queries cannot be cloned.
    macro_rules! filtered {
        () => {{
            let mut query = comms_suppressions::table.into_boxed();
            if let Some(channel) = filter.channel {
                query = query.filter(comms_suppressions::channel.eq(channel));
            }
            if let Some(reason) = filter.reason {
                query = query.filter(comms_suppressions::reason.eq(reason));
            }
            if let Some(pattern) = &pattern {
                query = query.filter(comms_suppressions::address.like(pattern).escape('\\'));
            }
            query
        }};
    }
    with_conn!(conn, |c| {
        let rows = filtered!()
            .order((
                comms_suppressions::created_at.desc(),
                comms_suppressions::id.desc(),
            ))
            .offset(offset)
            .limit(limit)
            .select(SuppressionRow::as_select())
            .load(c)
            .await?;
        let total = filtered!().count().get_result(c).await?;
        Ok((rows, total))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn wildcards_are_escaped() {
        assert_eq!(super::contains_pattern("a_b%c\\d"), "%a\\_b\\%c\\\\d%");
    }
}

//! [`Rendered`]: a select list whose SQL text is written once per process, though diesel writes
//! it again for every statement it sends.
//!
//! diesel-async builds a statement's text on every call, also when the statement is already
//! prepared on the connection. In a select list each column costs its table's and its own quoted
//! name, and each name is escaped into a fresh string: for the eleven columns of a user,
//! `GET /auth/me` spent about a sixth of keel's instructions on them (docs/performance.md).
//! `.select(Rendered(Row::as_select()))` writes the same text once, keeps it by type, and copies it
//! into each statement.
//!
//! The text is kept by type, so it is kept only for an expression whose type fixes its text, as
//! diesel itself marks it (`QueryId::HAS_STATIC_QUERY_ID`: columns, tuples of them, `as_select()`);
//! any other (an `sql()` fragment, a boxed expression) is written each time, as without the
//! wrapper. A select list of columns holds no bind parameters; one that does is refused when
//! first written, since its parameters would not be sent.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{OnceLock, PoisonError, RwLock};

use diesel::backend::Backend;
use diesel::expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping};
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::result::{Error, QueryResult};

/// A select list (any expression without bind parameters) whose text is written once.
#[derive(Debug, Clone, Copy)]
pub struct Rendered<E>(pub E);

impl<E: Expression> Expression for Rendered<E> {
    type SqlType = E::SqlType;
}

impl<E: ValidGrouping<GB>, GB> ValidGrouping<GB> for Rendered<E> {
    type IsAggregate = E::IsAggregate;
}

impl<E: SelectableExpression<QS>, QS> SelectableExpression<QS> for Rendered<E> {}

impl<E: AppearsOnTable<QS>, QS> AppearsOnTable<QS> for Rendered<E> {}

impl<E: QueryId> QueryId for Rendered<E> {
    type QueryId = E::QueryId;
    const HAS_STATIC_QUERY_ID: bool = E::HAS_STATIC_QUERY_ID;
}

/// The texts written so far, by the types of the expression and the backend.
fn texts() -> &'static RwLock<HashMap<TypeId, Box<str>>> {
    static TEXTS: OnceLock<RwLock<HashMap<TypeId, Box<str>>>> = OnceLock::new();
    TEXTS.get_or_init(Default::default)
}

impl<E, DB> QueryFragment<DB> for Rendered<E>
where
    E: QueryFragment<DB> + QueryId + 'static,
    DB: Backend + Default + 'static,
    DB::QueryBuilder: Default,
{
    fn walk_ast<'b>(&'b self, mut pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        if !E::HAS_STATIC_QUERY_ID {
            // Its text may differ between two values of its type: nothing to keep.
            return self.0.walk_ast(pass);
        }
        let key = TypeId::of::<(E, DB)>();
        if let Some(text) = texts()
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            pass.push_sql(text);
            return Ok(());
        }
        let text = render::<E, DB>(&self.0)?;
        pass.push_sql(&text);
        texts()
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, text);
        Ok(())
    }
}

/// `e`'s text, if it holds no bind parameter.
fn render<E, DB>(e: &E) -> QueryResult<Box<str>>
where
    E: QueryFragment<DB>,
    DB: Backend + Default,
    DB::QueryBuilder: Default,
{
    // Written through `write!`, not `to_string`, which would panic on an expression that fails.
    let mut shown = String::new();
    write!(shown, "{}", diesel::debug_query::<DB, _>(e))
        .map_err(|_| Error::QueryBuilderError("a Rendered select list cannot be written".into()))?;
    match shown.strip_suffix(" -- binds: []") {
        Some(text) => Ok(text.into()),
        None => Err(Error::QueryBuilderError(
            format!("a Rendered select list holds bind parameters: {shown}").into(),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use diesel::backend::Backend;
    use diesel::query_builder::QueryFragment;
    use diesel::{ExpressionMethods, QueryDsl, Queryable, Selectable, SelectableHelper};

    use super::Rendered;

    diesel::table! {
        rendered_probe (id) {
            id -> BigInt,
            name -> Text,
            note -> Nullable<Text>,
        }
    }

    #[derive(Debug, PartialEq, Queryable, Selectable)]
    #[diesel(table_name = rendered_probe)]
    struct Probe {
        id: i64,
        name: String,
        note: Option<String>,
    }

    fn text<DB, Q>(query: &Q) -> String
    where
        DB: Backend + Default,
        DB::QueryBuilder: Default,
        Q: QueryFragment<DB>,
    {
        diesel::debug_query::<DB, _>(query).to_string()
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_statement_is_the_same_text_with_the_same_parameters_on_postgres() {
        use diesel::pg::Pg;
        let plain = rendered_probe::table
            .filter(rendered_probe::id.eq(7))
            .select(Probe::as_select());
        let rendered = rendered_probe::table
            .filter(rendered_probe::id.eq(7))
            .select(Rendered(Probe::as_select()));
        for _ in 0..2 {
            // Written, then copied from the kept text.
            assert_eq!(text::<Pg, _>(&rendered), text::<Pg, _>(&plain));
        }
        assert!(text::<Pg, _>(&plain).ends_with("-- binds: [7]"));
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn rows_load_through_it_on_sqlite() {
        use diesel::sqlite::{Sqlite, SqliteConnection};
        use diesel::{Connection, RunQueryDsl};
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        diesel::sql_query(
            "CREATE TABLE rendered_probe (id BIGINT PRIMARY KEY, name TEXT NOT NULL, note TEXT)",
        )
        .execute(&mut conn)
        .unwrap();
        diesel::sql_query("INSERT INTO rendered_probe VALUES (1, 'one', NULL), (2, 'two', 'x')")
            .execute(&mut conn)
            .unwrap();
        let query = rendered_probe::table
            .order(rendered_probe::id.desc())
            .select(Rendered(Probe::as_select()));
        assert_eq!(
            text::<Sqlite, _>(&query),
            text::<Sqlite, _>(
                &rendered_probe::table
                    .order(rendered_probe::id.desc())
                    .select(Probe::as_select())
            )
        );
        let rows: Vec<Probe> = query.load(&mut conn).unwrap();
        assert_eq!(
            rows,
            [
                Probe {
                    id: 2,
                    name: "two".into(),
                    note: Some("x".into())
                },
                Probe {
                    id: 1,
                    name: "one".into(),
                    note: None
                },
            ]
        );
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_list_whose_type_does_not_fix_its_text_is_written_each_time() {
        use diesel::dsl::sql;
        use diesel::sql_types::BigInt;
        use diesel::sqlite::Sqlite;
        for literal in ["1", "2"] {
            let query = rendered_probe::table.select(Rendered(sql::<BigInt>(literal)));
            assert_eq!(
                text::<Sqlite, _>(&query),
                format!("SELECT {literal} FROM `rendered_probe` -- binds: []")
            );
        }
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_select_list_with_a_parameter_is_refused() {
        use diesel::sqlite::Sqlite;
        let refused = super::render::<_, Sqlite>(&rendered_probe::name.eq("x")).unwrap_err();
        assert!(refused.to_string().contains("bind parameters"), "{refused}");
        let columns = super::render::<_, Sqlite>(&Probe::as_select()).unwrap();
        assert_eq!(
            &*columns,
            r#"`rendered_probe`.`id`, `rendered_probe`.`name`, `rendered_probe`.`note`"#
        );
    }
}

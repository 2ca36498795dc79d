//! `with_conn!` and `write_tx!` on both backends: one source, commit on Ok, rollback on Err.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use diesel::{ExpressionMethods, QueryDsl, QueryResult};
use diesel_async::SimpleAsyncConnection;
use kernel::testing::TestDb;
use kernel::{DbConn, DbError, DbPool, with_conn, write_tx};

diesel::table! {
    notes (id) {
        id -> BigInt,
        title -> Text,
    }
}

#[derive(Debug, thiserror::Error)]
enum NoteError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Query(#[from] diesel::result::Error),
    #[error("refused")]
    Refused,
}

async fn pool(db: &TestDb) -> DbPool {
    let pool = DbPool::connect(&db.url, 4).await.unwrap();
    let ddl = match db.backend {
        kernel::db::Backend::Postgres => {
            "CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, title TEXT NOT NULL UNIQUE)"
        }
        kernel::db::Backend::Sqlite => {
            "CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, title TEXT NOT NULL UNIQUE)"
        }
    };
    let mut pooled = pool.get().await.unwrap();
    match pooled.conn() {
        DbConn::Postgres(c) => c.batch_execute(ddl).await.unwrap(),
        DbConn::Sqlite(c) => c.batch_execute(ddl).await.unwrap(),
    }
    pool
}

async fn insert(conn: &mut DbConn<'_>, title: &str) -> QueryResult<i64> {
    with_conn!(conn, |c| {
        diesel::insert_into(notes::table)
            .values(notes::title.eq(title))
            .returning(notes::id)
            .get_result(c)
            .await
    })
}

async fn count(conn: &mut DbConn<'_>) -> QueryResult<i64> {
    with_conn!(conn, |c| notes::table.count().get_result(c).await)
}

async fn backend_name(conn: &mut DbConn<'_>) -> &'static str {
    with_conn!(conn, postgres | _c | "postgres", sqlite | _c | "sqlite")
}

kernel::backend_tests! { transactions_commit_and_roll_back, concurrent_write_transactions_all_succeed }

async fn transactions_commit_and_roll_back(db: TestDb) {
    let pool = pool(&db).await;
    let ids = write_tx!(&pool, NoteError, |tx| {
        let a = insert(tx, "a").await?;
        let b = insert(tx, "b").await?;
        Ok((a, b))
    })
    .unwrap();
    assert!(ids.0 < ids.1);
    let failed = write_tx!(&pool, NoteError, |tx| {
        insert(tx, "c").await?;
        Err::<(), _>(NoteError::Refused)
    });
    assert!(matches!(failed, Err(NoteError::Refused)));
    let duplicate = write_tx!(&pool, NoteError, |tx| {
        insert(tx, "d").await?;
        insert(tx, "a").await?;
        Ok(())
    });
    assert!(matches!(&duplicate, Err(NoteError::Query(e)) if kernel::db::is_unique_violation(e)));
    let mut pooled = pool.get().await.unwrap();
    assert_eq!(
        count(&mut pooled.conn()).await.unwrap(),
        2,
        "c and d were rolled back"
    );
    let expected = match db.backend {
        kernel::db::Backend::Postgres => "postgres",
        kernel::db::Backend::Sqlite => "sqlite",
    };
    assert_eq!(backend_name(&mut pooled.conn()).await, expected);
}

/// Read-then-write transactions from many tasks at once: SQLite needs `BEGIN IMMEDIATE` for this.
async fn concurrent_write_transactions_all_succeed(db: TestDb) {
    let pool = pool(&db).await;
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                write_tx!(&pool, NoteError, |tx| {
                    let n = count(tx).await?;
                    insert(tx, &format!("note-{i}-{n}")).await?;
                    Ok(())
                })
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let mut pooled = pool.get().await.unwrap();
    assert_eq!(count(&mut pooled.conn()).await.unwrap(), 40);
}

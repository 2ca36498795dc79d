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
    with_conn!(&mut pooled.conn(), |c| c.batch_execute(ddl).await).unwrap();
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

kernel::backend_tests! {
    transactions_commit_and_roll_back,
    concurrent_write_transactions_all_succeed,
    snapshot_reads_on_sqlite_do_not_see_a_later_commit,
}

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

/// `read_snapshot!`: on SQLite its statements read one snapshot, so a commit by another connection
/// between two of them is not seen until the next snapshot; on PostgreSQL each statement reads its
/// own (no transaction), so the second count sees it.
async fn snapshot_reads_on_sqlite_do_not_see_a_later_commit(db: TestDb) {
    let pool = pool(&db).await;
    let writer = DbPool::connect(&db.url, 1).await.unwrap();
    let (before, after) = kernel::read_snapshot!(&pool, NoteError, |conn| {
        let before = count(conn).await?;
        write_tx!(&writer, NoteError, |tx| {
            insert(tx, "meanwhile").await?;
            Ok(())
        })?;
        let after = count(conn).await?;
        Ok((before, after))
    })
    .unwrap();
    assert_eq!(before, 0);
    let expected = match db.backend {
        kernel::db::Backend::Sqlite => 0,
        kernel::db::Backend::Postgres => 1,
    };
    assert_eq!(after, expected, "{:?}", db.backend);
    let fresh = kernel::read_snapshot!(&pool, NoteError, |conn| Ok(count(conn).await?)).unwrap();
    assert_eq!(fresh, 1);
}

/// A PostgreSQL connection killed under the pool (`pg_terminate_backend`): the query on it fails
/// as a lost connection (503 with `Retry-After`, not 500), and the pool serves again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_postgres_connections_are_503_and_the_pool_recovers() {
    let Some(db) = TestDb::postgres().await else {
        eprintln!("TEST_DATABASE_URL is not set: PostgreSQL run skipped");
        return;
    };
    let pool = pool(&db).await;
    let admin = DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    let pid: i32 = match pooled.conn() {
        DbConn::Postgres(c) => {
            use diesel_async::RunQueryDsl;
            diesel::select(diesel::dsl::sql::<diesel::sql_types::Integer>(
                "pg_backend_pid()",
            ))
            .get_result(c)
            .await
            .unwrap()
        }
        _ => unreachable!("a PostgreSQL database, checked out with `get`"),
    };
    {
        let mut killer = admin.get().await.unwrap();
        let DbConn::Postgres(c) = killer.conn() else {
            unreachable!("a PostgreSQL database")
        };
        c.batch_execute(&format!("SELECT pg_terminate_backend({pid})"))
            .await
            .unwrap();
    }
    let failed = count(&mut pooled.conn()).await.map_err(DbError::from);
    let error = failed.expect_err("the killed connection cannot answer");
    assert!(error.is_connection_lost(), "{error:?}");
    let api = kernel::ApiError::from(error);
    assert_eq!(api.status().as_u16(), 503);
    drop(pooled);
    // The pool serves again. The killed connection may go back to the pool before its
    // background task has seen the socket close (checkouts run no test query), so one more
    // checkout may meet it and answer 503 once; then it is discarded.
    let mut lost = 0;
    for _ in 0..8 {
        let mut pooled = pool.get().await.unwrap();
        match count(&mut pooled.conn()).await.map_err(DbError::from) {
            Ok(rows) => assert_eq!(rows, 0),
            Err(e) if e.is_connection_lost() => lost += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(lost <= 1, "{lost} checkouts met the killed connection");
}

/// A unit of work whose caller is dropped mid-query (a timeout here, on a single-threaded runtime
/// like actix-web's workers): run as a unit (`kernel::unit::run`, what `Detached` services do),
/// it finishes on its own task without a panic, and the pool serves every connection afterwards.
/// Without it, dropping the query future on SQLite panics ("can call blocking only when running
/// on the multi-threaded runtime").
#[tokio::test(flavor = "current_thread")]
async fn units_dropped_mid_query_finish_on_their_own_task() {
    for db in [Some(TestDb::sqlite().await), TestDb::postgres().await]
        .into_iter()
        .flatten()
    {
        let pool = pool(&db).await;
        let blocker = DbPool::connect(&db.url, 1).await.unwrap();
        let mut held = blocker.get().await.unwrap();
        match held.conn() {
            DbConn::Sqlite(c) => c.batch_execute("BEGIN IMMEDIATE").await.unwrap(),
            DbConn::Postgres(c) => c
                .batch_execute("BEGIN; LOCK TABLE notes IN EXCLUSIVE MODE")
                .await
                .unwrap(),
            DbConn::PostgresShared(_) => unreachable!("checked out with `get`"),
        }
        let unit_pool = pool.clone();
        let unit = kernel::unit::run(async move {
            let mut pooled = unit_pool.get().await?;
            insert(&mut pooled.conn(), "waited")
                .await
                .map_err(DbError::from)
        });
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(200), unit).await;
        assert!(timed_out.is_err(), "the insert waited on the lock");
        match held.conn() {
            DbConn::Sqlite(c) => c.batch_execute("ROLLBACK").await.unwrap(),
            DbConn::Postgres(c) => c.batch_execute("ROLLBACK").await.unwrap(),
            DbConn::PostgresShared(_) => unreachable!("checked out with `get`"),
        }
        drop(held);
        // The dropped unit completes on its own.
        let mut stored = 0;
        for _ in 0..100 {
            let mut pooled = pool.get().await.unwrap();
            stored = count(&mut pooled.conn()).await.unwrap();
            if stored == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(stored, 1, "{:?}", db.backend);
        for i in 0..8 {
            let mut pooled = pool.get().await.unwrap();
            insert(&mut pooled.conn(), &format!("after {i}"))
                .await
                .unwrap();
        }
    }
}

/// On SQLite, units of work run on a few threads kept for database work: a unit that waits for
/// something other than the database (here, for every other unit) leaves its thread to the
/// others meanwhile, and write transactions from many more units than threads all commit. With
/// a thread held by each waiting unit, they would never all reach the barrier.
#[tokio::test(flavor = "current_thread")]
async fn many_more_units_than_threads_wait_and_write_together() {
    const UNITS: usize = 64;
    for db in [Some(TestDb::sqlite().await), TestDb::postgres().await]
        .into_iter()
        .flatten()
    {
        let pool = pool(&db).await;
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(UNITS));
        let units: Vec<_> = (0..UNITS)
            .map(|i| {
                let (pool, barrier) = (pool.clone(), barrier.clone());
                kernel::db::spawn_unit(async move {
                    barrier.wait().await;
                    write_tx!(&pool, NoteError, |tx| {
                        let n = count(tx).await?;
                        insert(tx, &format!("unit-{i}-{n}")).await?;
                        Ok(())
                    })
                })
            })
            .collect();
        let finished = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            for unit in units {
                unit.await.unwrap().unwrap();
            }
        })
        .await;
        assert!(
            finished.is_ok(),
            "the units did not all get past the barrier"
        );
        let mut pooled = pool.get().await.unwrap();
        assert_eq!(count(&mut pooled.conn()).await.unwrap(), UNITS as i64);
    }
}

/// A write transaction whose future is dropped between two statements, outside any unit of work
/// (a caller that times out, on a single-threaded runtime): no panic, nothing of it is stored,
/// SQLite's write lock is released at once, and every connection of the pool works afterwards.
#[tokio::test(flavor = "current_thread")]
async fn transactions_dropped_between_statements_roll_back() {
    for db in [Some(TestDb::sqlite().await), TestDb::postgres().await]
        .into_iter()
        .flatten()
    {
        let pool = pool(&db).await;
        let dropped = async {
            write_tx!(&pool, NoteError, |tx| {
                insert(tx, "half").await?;
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                insert(tx, "never").await?;
                Ok(())
            })
        };
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(100), dropped).await;
        assert!(timed_out.is_err(), "the transaction was still sleeping");
        // A writer on another pool gets the lock without waiting out the busy timeout, and one
        // of the same pool its turn (`SqlitePool::write_turn`).
        let other = DbPool::connect(&db.url, 1).await.unwrap();
        write_tx!(&other, NoteError, |tx| {
            insert(tx, "after").await?;
            Ok(())
        })
        .unwrap();
        write_tx!(&pool, NoteError, |tx| {
            insert(tx, "after, here").await?;
            Ok(())
        })
        .unwrap();
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(pool.get().await.unwrap());
        }
        for pooled in &mut held {
            assert_eq!(
                count(&mut pooled.conn()).await.unwrap(),
                2,
                "{:?}",
                db.backend
            );
        }
    }
}

/// SQLite: a write transaction that finds another of its pool open waits for its turn without
/// blocking its thread (`SqlitePool::write_turn`), so on one thread the first one finishes and
/// the second then commits. Blocked in SQLite's busy handler instead, the second would hold the
/// thread until its busy timeout and fail with `database is locked`.
#[tokio::test(flavor = "current_thread")]
async fn a_writer_waits_for_its_turn_without_blocking_its_thread() {
    let db = TestDb::sqlite().await;
    let pool = pool(&db).await;
    let (first, second) = tokio::join!(
        async {
            write_tx!(&pool, NoteError, |tx| {
                insert(tx, "first").await?;
                // The transaction stays open while the second one starts.
                tokio::task::yield_now().await;
                insert(tx, "first, again").await?;
                Ok(())
            })
        },
        async {
            write_tx!(&pool, NoteError, |tx| {
                insert(tx, "second").await?;
                Ok(())
            })
        },
    );
    first.unwrap();
    second.unwrap();
    let mut pooled = pool.get().await.unwrap();
    assert_eq!(count(&mut pooled.conn()).await.unwrap(), 3);
}

/// SQLite: the pool's connections make no checkpoints of their own (`wal_autocheckpoint=0`);
/// the pool's checkpointer makes them after its writes, holding the pool's turn, so the
/// pages reach the database file without anyone asking, and the next writes start the WAL over
/// instead of growing it (`kernel::db::checkpoint`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_checkpoints_between_its_writes_and_the_wal_starts_over() {
    #[derive(diesel::QueryableByName)]
    struct Setting {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        wal_autocheckpoint: i64,
    }
    let db = TestDb::sqlite().await;
    let pool = pool(&db).await;
    let mut pooled = pool.get().await.unwrap();
    let setting: Setting = with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query("PRAGMA wal_autocheckpoint")
            .get_result(c)
            .await
    })
    .unwrap();
    assert_eq!(setting.wal_autocheckpoint, 0);
    drop(pooled);

    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let size = |suffix: &str| {
        std::fs::metadata(format!("{path}{suffix}"))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    // 50 transactions of four 4 KB rows: about 800 KB of pages, far below SQLite's own
    // threshold (1,000 pages), so only the pool's checkpointer copies them into the file.
    let write = |batch: usize| {
        let pool = pool.clone();
        async move {
            for n in 0..50 {
                write_tx!(&pool, NoteError, |tx| {
                    for row in 0..4 {
                        let title = format!("{batch}.{n}.{row}.{}", "x".repeat(4096));
                        insert(tx, &title).await?;
                    }
                    Ok(())
                })
                .unwrap();
            }
        }
    };
    write(1).await;
    let written = size("-wal");
    assert!(written > 800_000, "the WAL holds {written} bytes");
    // Whether a checkpoint has copied every frame of the WAL into the file: the WAL index (the
    // `-shm` file, native byte order) holds the WAL's last frame (`mxFrame`, at byte 16 of its
    // header) and the frames checkpointed so far (`nBackfill`, at byte 96). Waiting for the
    // file's size alone would let the next writes begin while a checkpoint is still copying.
    let backfilled = || {
        let shm = std::fs::read(format!("{path}-shm")).unwrap_or_default();
        let word = |at: usize| {
            shm.get(at..at + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        matches!((word(16), word(96)), (Some(last), Some(copied)) if last > 0 && copied == last)
    };
    let checkpointed = || async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !backfilled() {
            assert!(
                std::time::Instant::now() < deadline,
                "no whole checkpoint: the database file holds {} bytes",
                size("")
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    checkpointed().await;
    assert!(
        size("") > 800_000,
        "the database file holds {} bytes",
        size("")
    );
    // Each whole checkpoint lets the next writes go over the WAL's start. Whether the first
    // write after it does depends on the moment (a checkpoint still holding the WAL then makes
    // it append), so seven more rounds are written: starting over, the WAL stays a round or
    // two long; never starting over, it would hold all eight.
    for batch in 2..=8 {
        write(batch).await;
        checkpointed().await;
    }
    let again = size("-wal");
    assert!(
        again < 4 * written,
        "the WAL grew from {written} to {again} bytes in seven rounds: it did not start over"
    );
    let mut pooled = pool.get().await.unwrap();
    assert_eq!(count(&mut pooled.conn()).await.unwrap(), 1600);
}

/// SQLite: between its checkpoints the pool's checkpointer keeps a read transaction open, so
/// that the process holds the WAL index's read mark 0 (the lock of reads of a checkpointed
/// database) while no read of the pool runs, and takes it again after the checkpoints of the
/// pool's writes. Read from the kernel's table of file locks (`/proc/locks`): a POSIX read
/// lock of this process on byte 123 of the `-shm` file (SQLite's first lock byte, 120, and
/// three locks before the read marks).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_holds_the_first_read_mark_between_its_reads() {
    use std::os::unix::fs::MetadataExt;

    let db = TestDb::sqlite().await;
    let pool = pool(&db).await;
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    let inode = std::fs::metadata(format!("{path}-shm"))
        .unwrap()
        .ino()
        .to_string();
    let pid = std::process::id().to_string();
    let held = || {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        locks.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(1) == Some(&"POSIX")
                && fields.get(3) == Some(&"READ")
                && fields.get(4) == Some(&pid.as_str())
                && fields
                    .get(5)
                    .is_some_and(|file| file.rsplit(':').next() == Some(inode.as_str()))
                && fields.get(6..8) == Some(&["123", "123"][..])
        })
    };
    let held_soon = || async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !held() {
            assert!(
                std::time::Instant::now() < deadline,
                "read mark 0 is not held between reads"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    held_soon().await;
    // Writes, and the checkpoints after them, which end the transaction and begin it again.
    for n in 0..20 {
        write_tx!(&pool, NoteError, |tx| Ok(
            insert(tx, &format!("note {n}")).await?
        ))
        .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    held_soon().await;
    let mut pooled = pool.get().await.unwrap();
    assert_eq!(count(&mut pooled.conn()).await.unwrap(), 20);
}

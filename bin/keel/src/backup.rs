//! `keel backup PATH` and `keel restore PATH`: copies of the embedded SQLite database.
//!
//! - **Backup** runs `VACUUM INTO` on its own connection: SQLite copies one read snapshot of the
//!   database (WAL mode lets the server keep writing meanwhile), so the copy holds every write
//!   committed before the backup began and none half-done. The copy is written beside `PATH` and
//!   renamed into place once complete, so `PATH` is never a partial file.
//! - **Restore** replaces the database with a backup. A running `keel serve` or `keel worker` holds
//!   a shared lock (`flock`) on the database file for as long as it runs ([`hold`]); restore takes
//!   the exclusive lock without waiting, and refuses when it cannot. The backup is checked (an
//!   SQLite file, `PRAGMA quick_check` ok, a Keel database) on a copy before anything is touched,
//!   the old database is kept as `<database>.before-restore` with its WAL (commits a crashed
//!   server had not yet checkpointed into the file), and no `-wal`/`-shm` file of the old
//!   database stays beside the restored one (SQLite would replay the old WAL over it).
//! - On PostgreSQL both refuse and name the tools that do the job: `pg_dump` and `pg_restore`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Instant;

use kernel::db::Backend;
use kernel::diesel::connection::SimpleConnection;
use kernel::diesel::dsl::sql;
use kernel::diesel::sql_types::{BigInt, Text};
use kernel::diesel::sqlite::SqliteConnection;
use kernel::diesel::{Connection, RunQueryDsl};

use crate::cli::CliError;

const PG_BACKUP: &str = "DATABASE_URL names a PostgreSQL database: back it up with PostgreSQL's \
    own tool, e.g. `pg_dump --format=custom --file keel.dump \"$DATABASE_URL\"` (keel backup \
    copies the embedded SQLite database only)";
const PG_RESTORE: &str = "DATABASE_URL names a PostgreSQL database: restore it with PostgreSQL's \
    own tool, e.g. `pg_restore --clean --if-exists --dbname \"$DATABASE_URL\" keel.dump`, with \
    every keel process stopped (keel restore replaces the embedded SQLite database only)";

/// The SQLite file that `DATABASE_URL` names, or why backup and restore do not apply to it.
fn sqlite_file(database_url: &str, postgres: &str) -> Result<PathBuf, CliError> {
    let (backend, path) =
        kernel::db::parse_url(database_url).map_err(|e| CliError::Failed(e.to_string()))?;
    match backend {
        Backend::Postgres => Err(CliError::Failed(postgres.to_owned())),
        Backend::Sqlite if path == ":memory:" => Err(CliError::Failed(
            "DATABASE_URL names an in-memory SQLite database: there is no file to copy".to_owned(),
        )),
        Backend::Sqlite => Ok(PathBuf::from(path)),
    }
}

/// The lock a running server or worker holds on the SQLite database file (dropped at exit), so
/// that `keel restore` can tell the database is in use. `None` on PostgreSQL. The file (and its
/// folder) is created when missing: an empty file is an empty SQLite database, which the
/// migrations then fill.
pub fn hold(database_url: &str) -> Result<Option<File>, CliError> {
    let Ok((Backend::Sqlite, path)) = kernel::db::parse_url(database_url) else {
        return Ok(None);
    };
    if path == ":memory:" {
        return Ok(None);
    }
    let path = Path::new(&path);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.lock_shared()?;
    Ok(Some(file))
}

/// `keel backup PATH`.
pub async fn backup(database_url: &str, target: PathBuf) -> Result<(), CliError> {
    let source = sqlite_file(database_url, PG_BACKUP)?;
    let started = Instant::now();
    let (source, target, bytes) = tokio::task::spawn_blocking(move || {
        copy_live(&source, &target).map(|n| (source, target, n))
    })
    .await
    .map_err(|e| CliError::Failed(format!("the backup stopped: {e}")))??;
    println!(
        "backed up {} to {} ({bytes} bytes, {:.1} s)",
        source.display(),
        target.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A sibling of `path` with `suffix` added to its file name.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Removes the `-wal` and `-shm` files of the SQLite database at `path`, where they exist.
fn remove_wal(path: &Path) -> Result<(), CliError> {
    for suffix in ["-wal", "-shm"] {
        let stale = beside(path, suffix);
        if stale.exists() {
            std::fs::remove_file(&stale)?;
        }
    }
    Ok(())
}

fn copy_live(source: &Path, target: &Path) -> Result<u64, CliError> {
    if !source.is_file() {
        return Err(CliError::Failed(format!(
            "no database at {} (DATABASE_URL): nothing to back up",
            source.display()
        )));
    }
    if target.exists() {
        return Err(CliError::Failed(format!(
            "{} exists: choose a new file name (a backup never overwrites one)",
            target.display()
        )));
    }
    let partial = beside(target, &format!(".partial-{}", std::process::id()));
    let result = vacuum_into(source, &partial).and_then(|()| {
        std::fs::rename(&partial, target)?;
        Ok(std::fs::metadata(target)?.len())
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

fn vacuum_into(source: &Path, target: &Path) -> Result<(), CliError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        CliError::Failed(format!("backup of {}: {what}: {e}", source.display()))
    };
    let mut conn = SqliteConnection::establish(&source.to_string_lossy())
        .map_err(|e| failed("cannot open the database", &e))?;
    // Wait for a writer's lock instead of failing at once (VACUUM INTO only reads).
    conn.batch_execute("PRAGMA busy_timeout = 30000")
        .map_err(|e| failed("cannot set the busy timeout", &e))?;
    kernel::diesel::sql_query("VACUUM INTO ?")
        .bind::<Text, _>(target.to_string_lossy().into_owned())
        .execute(&mut conn)
        .map_err(|e| failed("VACUUM INTO failed", &e))?;
    Ok(())
}

/// Checks that `path` is an intact SQLite database made by Keel.
fn verify_backup(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 16];
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    std::io::Read::read_exact(&mut file, &mut header)
        .map_err(|_| "not an SQLite database (too short)".to_owned())?;
    if &header != b"SQLite format 3\0" {
        return Err("not an SQLite database".to_owned());
    }
    let mut conn =
        SqliteConnection::establish(&path.to_string_lossy()).map_err(|e| e.to_string())?;
    let check: String = kernel::diesel::select(sql::<Text>(
        "(SELECT quick_check FROM pragma_quick_check() LIMIT 1)",
    ))
    .get_result(&mut conn)
    .map_err(|e| e.to_string())?;
    if check != "ok" {
        return Err(format!("damaged: quick_check says {check:?}"));
    }
    let migrated: i64 = kernel::diesel::select(sql::<BigInt>(
        "(SELECT count(*) FROM sqlite_master WHERE name = '__diesel_schema_migrations')",
    ))
    .get_result(&mut conn)
    .map_err(|e| e.to_string())?;
    if migrated == 0 {
        return Err("not a Keel database (it has no migrations table)".to_owned());
    }
    Ok(())
}

/// `keel restore PATH`.
pub async fn restore(database_url: &str, backup: PathBuf) -> Result<(), CliError> {
    let database = sqlite_file(database_url, PG_RESTORE)?;
    let shown = database.clone();
    let kept = tokio::task::spawn_blocking(move || replace(&database, &backup))
        .await
        .map_err(|e| CliError::Failed(format!("the restore stopped: {e}")))??;
    match kept {
        Some(old) => println!(
            "restored {} (the database it replaced is kept as {})",
            shown.display(),
            old.display()
        ),
        None => println!("restored {}", shown.display()),
    }
    Ok(())
}

fn replace(database: &Path, backup: &Path) -> Result<Option<PathBuf>, CliError> {
    if !backup.is_file() {
        return Err(CliError::Failed(format!(
            "no backup at {}",
            backup.display()
        )));
    }
    // The lock first: nothing is touched while a server or worker holds the database.
    let lock = if database.exists() {
        let file = OpenOptions::new().read(true).write(true).open(database)?;
        match file.try_lock() {
            Ok(()) => Some(file),
            Err(TryLockError::WouldBlock) => {
                return Err(CliError::Failed(format!(
                    "{} is in use by a running keel server or worker: stop every keel process \
                     that uses it, then restore",
                    database.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(e.into()),
        }
    } else {
        if let Some(dir) = database.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        None
    };
    let incoming = beside(database, &format!(".restoring-{}", std::process::id()));
    let staged = std::fs::copy(backup, &incoming)
        .map_err(CliError::from)
        .and_then(|_| {
            verify_backup(&incoming).map_err(|why| {
                CliError::Failed(format!("{} cannot be restored: {why}", backup.display()))
            })
        });
    if let Err(e) = staged {
        let _ = std::fs::remove_file(&incoming);
        return Err(e);
    }
    let kept = match lock {
        Some(_) => {
            // The old database goes aside with its WAL, which holds the commits that a server
            // stopped without its last checkpoint (a crash, a kill) had not yet copied into the
            // file: `<database>.before-restore` opens as the whole old database. Its index of
            // the WAL (`-shm`) is rebuilt by SQLite on opening.
            let old = beside(database, ".before-restore");
            remove_wal(&old)?;
            std::fs::rename(database, &old)?;
            let wal = beside(database, "-wal");
            if wal.exists() {
                std::fs::rename(&wal, beside(&old, "-wal"))?;
            }
            Some(old)
        }
        None => None,
    };
    // What is left of the old database's WAL would be replayed over the restored file.
    remove_wal(database)?;
    std::fs::rename(&incoming, database)?;
    drop(lock);
    Ok(kept)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn postgres_and_memory_databases_are_refused_with_the_tools_to_use() {
        let err = sqlite_file("postgres://u@h/db", PG_BACKUP).unwrap_err();
        assert!(err.to_string().contains("pg_dump"), "{err}");
        let err = sqlite_file("postgres://u@h/db", PG_RESTORE).unwrap_err();
        assert!(err.to_string().contains("pg_restore"), "{err}");
        assert!(sqlite_file("sqlite::memory:", PG_BACKUP).is_err());
        assert_eq!(
            sqlite_file("sqlite://data/keel.db", PG_BACKUP).unwrap(),
            PathBuf::from("data/keel.db")
        );
    }

    #[test]
    fn a_file_that_is_not_a_keel_database_is_not_restored() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, b"hello, this is not a database at all").unwrap();
        assert!(verify_backup(&junk).unwrap_err().contains("not an SQLite"));
        let empty = dir.path().join("other.db");
        let mut conn = SqliteConnection::establish(&empty.to_string_lossy()).unwrap();
        conn.batch_execute("CREATE TABLE t (x INTEGER)").unwrap();
        drop(conn);
        assert!(verify_backup(&empty).unwrap_err().contains("not a Keel"));
        let target = dir.path().join("keel.db");
        std::fs::write(&target, b"").unwrap();
        let err = replace(&target, &junk).unwrap_err();
        assert!(err.to_string().contains("cannot be restored"), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"", "untouched");
    }

    /// A database left as a crash leaves it (commits still in its WAL): after a restore,
    /// `<database>.before-restore` holds those commits, and the restored database none of them.
    #[test]
    fn the_old_database_is_kept_with_its_wal() {
        let dir = tempfile::tempdir().unwrap();
        let migrated = |path: &Path, rows: &[&str]| {
            let mut conn = SqliteConnection::establish(&path.to_string_lossy()).unwrap();
            conn.batch_execute(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; \
                 CREATE TABLE __diesel_schema_migrations (version TEXT); CREATE TABLE t (x TEXT);",
            )
            .unwrap();
            for row in rows {
                conn.batch_execute(&format!("INSERT INTO t VALUES ('{row}')"))
                    .unwrap();
            }
            conn
        };
        let rows = |path: &Path| -> String {
            let mut conn = SqliteConnection::establish(&path.to_string_lossy()).unwrap();
            kernel::diesel::select(sql::<Text>(
                "(SELECT group_concat(x, ',') FROM (SELECT x FROM t ORDER BY x))",
            ))
            .get_result(&mut conn)
            .unwrap()
        };
        let backup = dir.path().join("backup.db");
        drop(migrated(&backup, &["restored"]));
        // The files of a live database with uncheckpointed commits, copied as a crash leaves them.
        let live = dir.path().join("live.db");
        let conn = migrated(&live, &["a", "b"]);
        let wal = beside(&live, "-wal");
        assert!(
            std::fs::metadata(&wal).unwrap().len() > 0,
            "the commits are in the WAL"
        );
        let db = dir.path().join("keel.db");
        std::fs::copy(&live, &db).unwrap();
        std::fs::copy(&wal, beside(&db, "-wal")).unwrap();
        drop(conn);

        let kept = replace(&db, &backup).unwrap().unwrap();
        assert!(
            !beside(&db, "-wal").exists(),
            "no WAL of the old database stays"
        );
        assert_eq!(rows(&kept), "a,b", "the old database, whole");
        assert_eq!(rows(&db), "restored");
    }

    #[test]
    fn a_held_database_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let url = format!("sqlite://{}", db.display());
        let held = hold(&url).unwrap();
        assert!(held.is_some());
        let err = replace(&db, &db).unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
        assert!(hold("postgres://u@h/db").unwrap().is_none());
    }
}

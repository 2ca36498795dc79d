//! Shared plumbing of Keel's modules.
//!
//! Module crates depend on this crate only, never on each other. What one module needs from another
//! crosses through a trait defined here: [`identity::Authenticator`] (implemented by auth-core) and
//! [`jobs::JobQueue`] (implemented by tasks-core).

pub mod config;
pub mod crypto;
pub mod db;
pub mod error;
pub mod health;
pub mod http;
pub mod identity;
pub mod jobs;
pub mod pagination;
pub mod time;

#[cfg(feature = "testing")]
pub mod testing;

// Re-exported so that the `with_conn!`/`write_tx!` macros resolve them from any crate.
pub use diesel;
pub use diesel_async;

pub use config::ConfigError;
pub use crypto::init_crypto;
pub use db::{DbConn, DbError, DbPool, MigrationSet};
pub use error::{ApiError, FieldError};
pub use identity::{Authenticator, Principal, Role};

//! Shared plumbing of Keel's modules.
//!
//! Module crates depend on this crate only, never on each other. What one module needs from another
//! crosses as a capability ([`capability`]): a trait defined here, such as
//! [`identity::Authenticator`] or [`jobs::JobQueue`], that one module provides and others use. How
//! a module plugs into the server is [`module`]: the [`Module`] trait, the dependencies every
//! module is built with ([`Deps`]), and the list entry a server loops over.

pub mod cache;
pub mod capability;
pub mod client_addr;
pub mod config;
#[cfg(feature = "http-client")]
pub mod crypto;
pub mod db;
pub mod error;
pub mod health;
pub mod http;
#[cfg(feature = "http-client")]
pub mod http_client;
pub mod identity;
pub mod jobs;
pub mod json;
pub mod mail;
pub mod metrics;
pub mod module;
pub mod openapi;
pub mod pagination;
pub mod peer;
pub mod plans;
#[cfg(feature = "redis")]
pub mod redis;
pub mod signals;
pub mod time;
pub mod unit;
pub mod validation;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(not(any(feature = "postgres", feature = "sqlite")))]
compile_error!(
    "kernel needs a database backend: enable its `postgres` or `sqlite` feature (or both)"
);

// Re-exported so that the `with_conn!`/`write_tx!` macros resolve them from any crate.
pub use diesel;
pub use diesel_async;

pub use config::ConfigError;
#[cfg(feature = "http-client")]
pub use crypto::init_crypto;
pub use db::{DbConn, DbError, DbPool, MigrationSet};
pub use error::{ApiError, FieldError};
pub use identity::{Authenticator, Principal, Role};
pub use module::{BuildModule, Deps, Module, ModuleConfig, ModuleError};
pub use time::Timestamp;

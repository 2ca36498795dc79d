//! The Keel server: composes the enabled modules into one HTTP JSON service.
//!
//! `main` parses the command line ([`cli`]) and calls [`app::Application::build`]; tests build the
//! same application on port 0 (the `testing` module, feature `testing`).

pub mod app;
mod backup;
pub mod cli;
pub mod config;
pub mod health;
pub mod listener;
pub mod metrics;
pub mod modules;
mod probe;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
mod worker;

pub use app::{Application, StartError};
pub use config::Config;

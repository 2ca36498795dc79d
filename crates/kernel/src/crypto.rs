//! Process-wide TLS set-up.

/// Installs rustls' ring crypto provider for every TLS client of the process (reqwest with
/// `rustls-no-provider` panics without one). Idempotent: call it in `main` and in test helpers.
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

//! Cross-module flows live in `flows.rs`. The fault, two-instance and security tests
//! (`faults.rs`, `instances.rs`, `security.rs`) run real `keel` processes through [`support`].

pub mod support;

/// The path of the `keel` binary this package builds (`keel-under-test`, the same `main` as
/// `bin/keel`). A macro so that `env!` is read in the test crate, where Cargo sets it.
#[macro_export]
macro_rules! keel_bin {
    () => {
        env!("CARGO_BIN_EXE_keel-under-test")
    };
}

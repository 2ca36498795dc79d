//! The `keel` binary, built by this package so that its tests run real `keel` processes of the
//! same build (`CARGO_BIN_EXE_keel-under-test`). Exactly `bin/keel`'s `main`.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    keel::cli::main_entry().await
}

/// mimalloc instead of glibc's allocator: request handling allocates from every worker and blocking
/// thread at once, and SQLite allocates through the same malloc (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// tokio's multi-threaded runtime (not actix's): the migration harness needs it.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    keel::cli::main_entry().await
}

/// mimalloc instead of glibc's allocator: request handling allocates from every worker and blocking
/// thread at once, and SQLite allocates through the same malloc (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// tokio's multi-threaded runtime (not actix's): the migration harness needs it.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    kernel::config::load_dotenv();
    kernel::init_crypto();
    let matches = keel::cli::command().get_matches();
    match keel::cli::run(matches).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

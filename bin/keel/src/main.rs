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

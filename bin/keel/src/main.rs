use clap::Parser;

// tokio's multi-threaded runtime (not actix's): the migration harness needs it.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    kernel::config::load_dotenv();
    kernel::init_crypto();
    let cli = keel::cli::Cli::parse();
    match keel::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

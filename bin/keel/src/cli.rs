//! The command line: `keel serve` (default), `keel migrate`, `keel worker`, `keel backup` and
//! `keel restore`, and each compiled module's own commands (`keel users ...`, `keel blog ...`,
//! `keel tasks ...`), which the modules declare and run themselves.

use clap::{ArgMatches, FromArgMatches, Subcommand};

use crate::app::{self, Application};
use crate::config::Config;
use crate::{backup, modules, probe, worker};

/// The server's own commands.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Run the HTTP server (the default command).
    Serve,
    /// Apply the enabled modules' database migrations, then exit.
    Migrate,
    /// Run background-task workers (WORKER_PROCESSES processes) until SIGTERM or SIGINT: every
    /// enabled module's tasks, on the task runner's queues.
    Worker {
        /// Comma-separated queues to work (default: every queue).
        #[arg(long)]
        queues: Option<String>,
    },
    /// Copy the embedded SQLite database to PATH while the server keeps serving (a consistent
    /// snapshot; PATH must not exist). On PostgreSQL, use pg_dump.
    Backup {
        /// The new file to write.
        path: std::path::PathBuf,
    },
    /// Exit 0 when this configuration's server (HOST, PORT) answers 200 on /health/live: a
    /// container HEALTHCHECK that needs no HTTP client in the image.
    Healthcheck {
        /// Ask /health/ready (database and Redis reachable) instead.
        #[arg(long)]
        ready: bool,
        /// Ask this http:// URL instead.
        #[arg(long)]
        url: Option<String>,
    },
    /// Replace the embedded SQLite database with the backup at PATH (refused while a keel server
    /// or worker uses the database; the old one is kept as DATABASE.before-restore). On
    /// PostgreSQL, use pg_restore.
    Restore {
        /// The backup to restore.
        path: std::path::PathBuf,
    },
}

/// `keel` with the server's commands and every compiled module's.
pub fn command() -> clap::Command {
    let base = clap::Command::new("keel")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Keel: a modular HTTP JSON service");
    let base = ServerCommand::augment_subcommands(base);
    modules::compiled()
        .iter()
        .flat_map(|e| (e.commands)())
        .fold(base, clap::Command::subcommand)
}

/// A command-line failure: printed to stderr, exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Start(#[from] app::StartError),
    #[error(transparent)]
    Config(#[from] kernel::ConfigError),
    #[error("{0}")]
    Failed(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The body of `keel`'s `main` (the binary keeps only its allocator and runtime): reads `.env`,
/// parses the command line and runs it; a failure is printed to stderr with exit status 1.
pub async fn main_entry() -> std::process::ExitCode {
    kernel::config::load_dotenv();
    kernel::init_crypto();
    match run(command().get_matches()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

pub async fn run(matches: ArgMatches) -> Result<(), CliError> {
    let config = Config::from_env()?;
    crate::telemetry::init(config.log_format);
    let module_command = matches
        .subcommand()
        .filter(|(name, _)| !ServerCommand::has_subcommand(name));
    if let Some((name, sub)) = module_command {
        return module_command_run(config, name, sub).await;
    }
    let command = match matches.subcommand() {
        None => ServerCommand::Serve,
        Some(_) => ServerCommand::from_arg_matches(&matches)
            .map_err(|e| CliError::Failed(e.to_string()))?,
    };
    match command {
        ServerCommand::Serve => serve(config).await,
        ServerCommand::Migrate => {
            app::open_database(&config).await?;
            println!(
                "migrations applied to {}",
                kernel::db::parse_url(&config.database_url)
                    .map(|(b, _)| b.name())
                    .unwrap_or("database")
            );
            Ok(())
        }
        ServerCommand::Worker { queues } => {
            let _held = backup::hold(&config.database_url)?;
            worker::run(config, queues).await
        }
        ServerCommand::Healthcheck { ready, url } => probe::run(&config, ready, url),
        ServerCommand::Backup { path } => backup::backup(&config.database_url, path).await,
        ServerCommand::Restore { path } => backup::restore(&config.database_url, path).await,
    }
}

async fn serve(config: Config) -> Result<(), CliError> {
    let host = config.host.clone();
    let modules = config.modules.join(", ");
    // Held until the server stops: `keel restore` refuses to replace the database meanwhile.
    let _held = backup::hold(&config.database_url)?;
    let application = Application::build(config).await?;
    tracing::info!(
        "Keel listening on http://{host}:{} (modules: {modules}; docs at /docs)",
        application.port()
    );
    application.run_until_stopped().await?;
    tracing::info!("Keel stopped");
    Ok(())
}

/// `keel <module command> ...`: builds the enabled modules (and the command's own, mounted or
/// not) over the database, then lets the module run it.
pub(crate) async fn module_command_run(
    mut config: Config,
    name: &str,
    matches: &ArgMatches,
) -> Result<(), CliError> {
    let owner = modules::compiled()
        .into_iter()
        .find(|e| (e.commands)().iter().any(|c| c.get_name() == name))
        .ok_or_else(|| CliError::Failed(format!("unknown command {name}")))?;
    if !config.is_enabled(owner.name) {
        config.modules.push(owner.name);
    }
    let composed = app::build_modules(&config).await?;
    let module = composed
        .module(owner.name)
        .ok_or_else(|| CliError::Failed(format!("module {} did not build", owner.name)))?;
    module
        .run_command(name, matches)
        .await
        .map_err(CliError::Failed)
}

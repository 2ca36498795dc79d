//! The command line: `keel serve` (default), `keel migrate`, `keel users ...`.

use clap::{Parser, Subcommand};

use crate::app::{self, Application};
use crate::config::Config;

#[derive(Debug, Parser)]
#[command(name = "keel", version, about = "Keel: a modular HTTP JSON service")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (the default command).
    Serve,
    /// Apply the enabled modules' database migrations, then exit.
    Migrate,
    /// Manage user accounts (talks to the database directly).
    #[cfg(feature = "auth")]
    #[command(subcommand)]
    Users(UsersCommand),
    /// Export and import blog posts (talks to the database directly).
    #[cfg(feature = "blog")]
    #[command(subcommand)]
    Blog(BlogCommand),
    /// Run background-task workers (WORKER_PROCESSES processes) until SIGTERM or SIGINT.
    #[cfg(feature = "tasks")]
    Worker {
        /// Comma-separated queues to work (default: every queue).
        #[arg(long)]
        queues: Option<String>,
    },
    /// Inspect and enqueue background tasks (needs the Redis backend).
    #[cfg(feature = "tasks")]
    #[command(subcommand)]
    Tasks(TasksCommand),
}

#[cfg(feature = "tasks")]
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Registered tasks per queue, and queue depths.
    List,
    /// Enqueue a task; prints its id.
    Enqueue {
        name: String,
        /// The queue (default: the task's own).
        #[arg(long)]
        queue: Option<String>,
        /// Arguments as JSON: an array (positional), an object (keyword) or {"args": [...], "kwargs": {...}}.
        #[arg(long)]
        args: Option<String>,
    },
    /// A task's state and result.
    Result {
        id: String,
        /// Wait until the task has finished.
        #[arg(long)]
        wait: bool,
        /// The longest wait, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
}

#[cfg(feature = "blog")]
#[derive(Debug, Subcommand)]
pub enum BlogCommand {
    /// Write every post (or those of one status) to a file: a zip of Markdown files or a JSON array.
    Export {
        /// markdown or json.
        #[arg(long, default_value = "markdown")]
        format: String,
        /// Where to write the export.
        #[arg(long)]
        out: std::path::PathBuf,
        /// Only posts of this status: draft, published or archived.
        #[arg(long)]
        status: Option<String>,
    },
    /// Read posts from a .md, .markdown, .zip or .json file.
    Import {
        file: std::path::PathBuf,
        /// What to do with a post whose slug exists: skip, overwrite or fail (nothing kept).
        #[arg(long, default_value = "skip")]
        on_conflict: String,
    },
}

#[cfg(feature = "auth")]
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create an account.
    Create {
        #[arg(long)]
        email: String,
        /// The password (or set KEEL_USER_PASSWORD, which keeps it out of the shell history).
        #[arg(long, env = "KEEL_USER_PASSWORD", hide_env_values = true)]
        password: String,
        #[arg(long)]
        full_name: Option<String>,
        /// user, moderator or admin.
        #[arg(long, default_value = "user")]
        role: String,
    },
    /// List accounts.
    List {
        #[arg(long, default_value_t = 1)]
        page: i64,
        #[arg(long, default_value_t = 100)]
        page_size: i64,
    },
    /// Give an account a role: user, moderator or admin.
    SetRole { email: String, role: String },
    /// Allow an account to log in again.
    Activate { email: String },
    /// Stop an account from logging in (its tokens stop working at once).
    Deactivate { email: String },
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

pub async fn run(cli: Cli) -> Result<(), CliError> {
    let config = Config::from_env()?;
    crate::telemetry::init(config.log_format);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::Migrate => {
            app::open_database(&config).await?;
            println!(
                "migrations applied to {}",
                kernel::db::parse_url(&config.database_url)
                    .map(|(b, _)| b.name())
                    .unwrap_or("database")
            );
            Ok(())
        }
        #[cfg(feature = "auth")]
        Command::Users(command) => users(config, command).await,
        #[cfg(feature = "blog")]
        Command::Blog(command) => blog(config, command).await,
        #[cfg(feature = "tasks")]
        Command::Worker { queues } => worker(config, queues).await,
        #[cfg(feature = "tasks")]
        Command::Tasks(command) => tasks(config, command).await,
    }
}

async fn serve(config: Config) -> Result<(), CliError> {
    let host = config.host.clone();
    let modules: Vec<&str> = config.modules.iter().map(|m| m.name()).collect();
    let modules = modules.join(", ");
    let application = Application::build(config).await?;
    tracing::info!(
        "Keel listening on http://{host}:{} (modules: {modules}; docs at /docs)",
        application.port()
    );
    application.run_until_stopped().await?;
    tracing::info!("Keel stopped");
    Ok(())
}

#[cfg(feature = "auth")]
async fn users(config: Config, command: UsersCommand) -> Result<(), CliError> {
    use auth_core::{AuthModule, Registration, UserPatch};
    use kernel::Role;

    kernel::init_crypto();
    let pool = app::open_database(&config).await?;
    let module = AuthModule::build(pool, &config.auth, None, config.max_json_bytes)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let service = module.service();
    let fail = |e: auth_core::AuthError| CliError::Failed(describe(e));
    let parse_role = |raw: &str| {
        Role::parse(&raw.to_ascii_lowercase()).ok_or_else(|| {
            CliError::Failed(format!(
                "unknown role {raw:?}: use user, moderator or admin"
            ))
        })
    };
    let find = async |email: &str| {
        service
            .find_by_email(email)
            .await
            .map_err(fail)?
            .ok_or_else(|| CliError::Failed(format!("no user with e-mail {email}")))
    };
    match command {
        UsersCommand::Create {
            email,
            password,
            full_name,
            role,
        } => {
            let role = parse_role(&role)?;
            let input = Registration {
                email: Some(email),
                password: Some(password),
                full_name,
                is_active: Some(true),
            };
            let user = service.create_user(input, role).await.map_err(fail)?;
            println!(
                "created user {} <{}> with role {}",
                user.id, user.email, user.role
            );
        }
        UsersCommand::List { page, page_size } => {
            let page = kernel::pagination::PageParams {
                page: Some(page),
                page_size: Some(page_size),
            }
            .resolve()
            .map_err(|e| CliError::Failed(e.detail().to_string()))?;
            let (users, total) = service.list_users(page).await.map_err(fail)?;
            println!(
                "{:>6}  {:<40}  {:<10}  {:<8}  full name",
                "id", "email", "role", "active"
            );
            for u in &users {
                println!(
                    "{:>6}  {:<40}  {:<10}  {:<8}  {}",
                    u.id,
                    u.email,
                    u.role,
                    u.is_active,
                    u.full_name.as_deref().unwrap_or("")
                );
            }
            println!("{} of {total} users (page {})", users.len(), page.page);
        }
        UsersCommand::SetRole { email, role } => {
            let role = parse_role(&role)?;
            let user = find(&email).await?;
            let patch = UserPatch {
                role: Some(role),
                ..Default::default()
            };
            let user = service
                .update_user(None, user.id, patch)
                .await
                .map_err(fail)?;
            println!("{} is now {}", user.email, user.role);
        }
        UsersCommand::Activate { email } | UsersCommand::Deactivate { email }
            if email.is_empty() =>
        {
            return Err(CliError::Failed("an e-mail address is required".into()));
        }
        UsersCommand::Activate { email } => {
            set_active(&*service, find(&email).await?.id, true).await?
        }
        UsersCommand::Deactivate { email } => {
            set_active(&*service, find(&email).await?.id, false).await?
        }
    }
    Ok(())
}

#[cfg(feature = "auth")]
async fn set_active(
    service: &dyn auth_core::AuthService,
    id: i64,
    active: bool,
) -> Result<(), CliError> {
    let patch = auth_core::UserPatch {
        is_active: Some(active),
        ..Default::default()
    };
    let user = service
        .update_user(None, id, patch)
        .await
        .map_err(|e| CliError::Failed(describe(e)))?;
    let state = if user.is_active { "active" } else { "inactive" };
    println!("{} is now {state}", user.email);
    Ok(())
}

#[cfg(feature = "auth")]
fn describe(e: auth_core::AuthError) -> String {
    match e {
        auth_core::AuthError::Invalid(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

#[cfg(feature = "blog")]
async fn blog(config: Config, command: BlogCommand) -> Result<(), CliError> {
    use blog_core::{
        BlogModule, ExportFormat, ExportOptions, ImportOptions, OnConflict, PostStatus,
    };
    use std::sync::Arc;

    let pool = app::open_database(&config).await?;
    let auth_mounted = config.is_enabled(crate::Module::Auth);
    let service = BlogModule::build(pool, config.blog.clone(), auth_mounted).service();
    match command {
        BlogCommand::Export {
            format,
            out,
            status,
        } => {
            let format = ExportFormat::parse(&format).ok_or_else(|| {
                CliError::Failed(format!("unknown format {format:?}: use markdown or json"))
            })?;
            let status = match status {
                None => None,
                Some(raw) => Some(PostStatus::parse(&raw).ok_or_else(|| {
                    CliError::Failed(format!(
                        "unknown status {raw:?}: use draft, published or archived"
                    ))
                })?),
            };
            let posts = service
                .export_to_path(ExportOptions { format, status }, &out)
                .await
                .map_err(|e| CliError::Failed(e.to_string()))?;
            println!("exported {posts} posts to {}", out.display());
        }
        BlogCommand::Import { file, on_conflict } => {
            let on_conflict = OnConflict::parse(&on_conflict).ok_or_else(|| {
                CliError::Failed(format!(
                    "unknown --on-conflict {on_conflict:?}: use skip, overwrite or fail"
                ))
            })?;
            // Drawn on stderr when it is a terminal; hidden otherwise.
            let bar = indicatif::ProgressBar::new(0).with_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} posts ({eta} left)")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let progress_bar = bar.clone();
            let options = ImportOptions {
                on_conflict,
                progress: Some(Arc::new(move |p: blog_core::ImportProgress| {
                    progress_bar.set_length(p.total as u64);
                    progress_bar.set_position(p.processed as u64);
                })),
                ..Default::default()
            };
            let outcome = service.import_path(&file, options).await;
            bar.finish_and_clear();
            let result = outcome.map_err(|e| CliError::Failed(e.to_string()))?;
            println!(
                "imported {}: {} created, {} updated, {} skipped, {} failed",
                file.display(),
                result.created,
                result.updated,
                result.skipped,
                result.failed
            );
            for e in &result.errors {
                println!(
                    "  {} ({}): {}",
                    e.file,
                    if e.slug.is_empty() { "-" } else { &e.slug },
                    e.message
                );
            }
        }
    }
    Ok(())
}

/// `keel worker`: one worker in this process, or with `WORKER_PROCESSES` > 1 that many child
/// processes (each `keel worker` with one process), stopped together on SIGTERM/SIGINT.
#[cfg(feature = "tasks")]
async fn worker(config: Config, queues: Option<String>) -> Result<(), CliError> {
    let processes = config.tasks.worker_processes;
    if processes > 1 {
        return supervise_workers(processes, queues).await;
    }
    let module = app::build_tasks(&config).await?;
    let queues = queues
        .as_deref()
        .map(tasks_core::cli::parse_queue_list)
        .unwrap_or_default();
    let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
    tracing::info!(queues = ?queues, "worker started");
    module
        .run_worker_until_signal(&queues)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))
}

/// Starts `processes` single-process workers and forwards SIGTERM to them when stopped.
#[cfg(feature = "tasks")]
async fn supervise_workers(processes: usize, queues: Option<String>) -> Result<(), CliError> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let exe = std::env::current_exe()?;
    let mut children = Vec::with_capacity(processes);
    for _ in 0..processes {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("worker").env("WORKER_PROCESSES", "1");
        if let Some(q) = &queues {
            cmd.args(["--queues", q]);
        }
        children.push(cmd.spawn()?);
    }
    tracing::info!(processes, "worker processes started");
    tasks_core::wait_for_stop_signal().await;
    for child in &children {
        if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }
    let mut failed = 0;
    for mut child in children {
        if !child.wait().await.is_ok_and(|s| s.success()) {
            failed += 1;
        }
    }
    match failed {
        0 => Ok(()),
        n => Err(CliError::Failed(format!(
            "{n} worker processes did not stop cleanly"
        ))),
    }
}

#[cfg(feature = "tasks")]
async fn tasks(config: Config, command: TasksCommand) -> Result<(), CliError> {
    let module = app::build_tasks(&config).await?;
    let fail = |e: tasks_core::TasksError| CliError::Failed(e.to_string());
    let json = match command {
        TasksCommand::List => serde_json::to_string_pretty(&module.cli_list().await.map_err(fail)?),
        TasksCommand::Enqueue { name, queue, args } => serde_json::to_string_pretty(
            &module
                .cli_enqueue(&name, queue.as_deref(), args.as_deref())
                .await
                .map_err(fail)?,
        ),
        TasksCommand::Result { id, wait, timeout } => {
            let wait = wait.then(|| std::time::Duration::from_secs(timeout));
            serde_json::to_string_pretty(&module.cli_result(&id, wait).await.map_err(fail)?)
        }
    };
    println!("{}", json.map_err(|e| CliError::Failed(e.to_string()))?);
    Ok(())
}

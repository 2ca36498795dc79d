//! `keel users ...`: account management from the command line, through the same service as the
//! API (talks to the database directly).

use clap::{ArgMatches, FromArgMatches, Subcommand};
use kernel::Role;

use crate::error::AuthError;
use crate::service::{AuthService, Registration, UserPatch};

/// The command's name: `keel users`.
pub const COMMAND: &str = "users";

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
    /// Print a password-reset link for an account (single-use, expiring like a mailed one);
    /// for deployments without a mailer, or a user whose mail does not arrive.
    ResetLink { email: String },
}

/// `keel users`.
pub fn command() -> clap::Command {
    UsersCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about("Manage user accounts (talks to the database directly)")
            .subcommand_required(true),
    )
}

/// Runs `keel users <matches>`.
pub async fn run(service: &dyn AuthService, matches: &ArgMatches) -> Result<(), String> {
    let command = UsersCommand::from_arg_matches(matches).map_err(|e| e.to_string())?;
    let find = async |email: &str| {
        service
            .find_by_email(email)
            .await
            .map_err(describe)?
            .ok_or_else(|| format!("no user with e-mail {email}"))
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
            let user = service.create_user(input, role).await.map_err(describe)?;
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
            .map_err(|e| e.detail().to_string())?;
            let (users, total) = service.list_users(page).await.map_err(describe)?;
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
                .map_err(describe)?;
            println!("{} is now {}", user.email, user.role);
        }
        UsersCommand::Activate { email } => {
            set_active(service, find(&email).await?.id, true).await?
        }
        UsersCommand::Deactivate { email } => {
            set_active(service, find(&email).await?.id, false).await?
        }
        UsersCommand::ResetLink { email } => {
            let (user, issued) = service.reset_link(&email).await.map_err(|e| match e {
                AuthError::UserNotFound => format!("no user with e-mail {email}"),
                other => describe(other),
            })?;
            println!("{}", issued.link);
            eprintln!(
                "a password-reset link for {}: it works once, until {} UTC (token {})",
                user.email,
                issued.expires_at.format("%Y-%m-%d %H:%M"),
                issued.token
            );
        }
    }
    Ok(())
}

fn parse_role(raw: &str) -> Result<Role, String> {
    Role::parse(&raw.to_ascii_lowercase())
        .ok_or_else(|| format!("unknown role {raw:?}: use user, moderator or admin"))
}

async fn set_active(service: &dyn AuthService, id: i64, active: bool) -> Result<(), String> {
    let patch = UserPatch {
        is_active: Some(active),
        ..Default::default()
    };
    let user = service
        .update_user(None, id, patch)
        .await
        .map_err(describe)?;
    let state = if user.is_active { "active" } else { "inactive" };
    println!("{} is now {state}", user.email);
    Ok(())
}

fn describe(e: AuthError) -> String {
    match e {
        AuthError::Invalid(fields) => fields
            .iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

//! `keel comms ...`: send from the command line and read the message log, through the same service
//! as the API (so the same rules and the same error texts).

use std::path::PathBuf;

use clap::{ArgMatches, FromArgMatches, Subcommand};
use kernel::pagination::Page;

use crate::Channel;
use crate::domain::suppression::Reason;
use crate::service::{
    CallRequest, CommsService, EmailRequest, ListFilter, SmsRequest, SuppressionFilter, Viewer,
};

/// The command's name: `keel comms`.
pub const COMMAND: &str = "comms";

#[derive(Debug, Subcommand)]
pub enum CommsCommand {
    /// Send an email (text, HTML from a file, or both).
    Email {
        /// A recipient (repeat for several).
        #[arg(long, required = true)]
        to: Vec<String>,
        #[arg(long)]
        subject: String,
        #[arg(long)]
        text: Option<String>,
        /// A file holding the HTML body.
        #[arg(long)]
        html_file: Option<PathBuf>,
        /// Overrides RESEND_FROM_EMAIL.
        #[arg(long)]
        from: Option<String>,
    },
    /// Send an SMS.
    Sms {
        #[arg(long)]
        to: String,
        #[arg(long)]
        body: String,
        /// Overrides TWILIO_PHONE_NUMBER.
        #[arg(long)]
        from: Option<String>,
    },
    /// Start a voice call that plays the TwiML at a URL.
    Call {
        #[arg(long)]
        to: String,
        #[arg(long)]
        twiml_url: String,
        /// Seconds to let it ring (5 to 600).
        #[arg(long)]
        timeout: Option<i64>,
    },
    /// List the message log, newest first.
    Messages {
        /// email, sms or voice.
        #[arg(long)]
        channel: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// The suppression list: recipients no longer sent to.
    Suppressions {
        #[command(subcommand)]
        action: SuppressionsCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum SuppressionsCommand {
    /// List the entries, newest first.
    List {
        /// email or sms.
        #[arg(long)]
        channel: Option<String>,
        /// hard_bounce, complaint, unsubscribed or stop.
        #[arg(long)]
        reason: Option<String>,
        /// Only addresses containing this text.
        #[arg(long)]
        search: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Take an address or number off the list (sends to it reach the provider again).
    Remove {
        /// An email address or an E.164 number.
        address: String,
    },
}

/// `keel comms`.
pub fn command() -> clap::Command {
    CommsCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about("Send email, SMS and calls, and read the message log")
            .subcommand_required(true),
    )
}

/// Runs `keel comms <matches>`: prints the provider's id and status, or the API's error text.
pub async fn run(service: &dyn CommsService, matches: &ArgMatches) -> Result<(), String> {
    let text = |e: crate::CommsError| e.to_string();
    match CommsCommand::from_arg_matches(matches).map_err(|e| e.to_string())? {
        CommsCommand::Email {
            to,
            subject,
            text: body,
            html_file,
            from,
        } => {
            let html = match html_file {
                None => None,
                Some(path) => Some(
                    tokio::fs::read_to_string(&path)
                        .await
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                ),
            };
            let request = EmailRequest {
                to,
                subject: Some(subject),
                text: body,
                html,
                from_email: from,
                ..EmailRequest::default()
            };
            let receipt = service.send_email(None, request).await.map_err(text)?;
            println!("{} sent", receipt.id);
        }
        CommsCommand::Sms { to, body, from } => {
            let request = SmsRequest {
                to: Some(to),
                body: Some(body),
                from_number: from,
            };
            let receipt = service.send_sms(None, request).await.map_err(text)?;
            println!(
                "{} {} ({} segment{})",
                receipt.sid,
                receipt.provider_status,
                receipt.segments,
                if receipt.segments == 1 { "" } else { "s" }
            );
        }
        CommsCommand::Call {
            to,
            twiml_url,
            timeout,
        } => {
            let request = CallRequest {
                to: Some(to),
                twiml_url: Some(twiml_url),
                from_number: None,
                timeout,
            };
            let receipt = service.make_call(None, request).await.map_err(text)?;
            println!("{} {}", receipt.sid, receipt.status);
        }
        CommsCommand::Messages {
            channel,
            status,
            limit,
        } => {
            let channel = match channel {
                None => None,
                Some(raw) => Some(
                    Channel::parse(&raw)
                        .ok_or_else(|| format!("Unknown channel: {raw} (email, sms or voice)"))?,
                ),
            };
            let page = Page {
                page: 1,
                page_size: limit.clamp(1, 1000),
            };
            let filter = ListFilter { channel, status };
            let (messages, total) = service
                .messages(Viewer::All, filter, page)
                .await
                .map_err(text)?;
            for m in &messages {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}{}",
                    m.id,
                    kernel::time::format(&m.created_at),
                    m.channel.as_str(),
                    m.recipients.join(","),
                    m.provider_id.as_deref().unwrap_or("-"),
                    m.status,
                    m.error
                        .as_deref()
                        .map(|e| format!("\t{e}"))
                        .unwrap_or_default()
                );
            }
            println!("{} of {total} messages", messages.len());
        }
        CommsCommand::Suppressions { action } => suppressions(service, action).await?,
    }
    Ok(())
}

/// `keel comms suppressions list|remove`.
async fn suppressions(
    service: &dyn CommsService,
    action: SuppressionsCommand,
) -> Result<(), String> {
    let text = |e: crate::CommsError| e.to_string();
    match action {
        SuppressionsCommand::List {
            channel,
            reason,
            search,
            limit,
        } => {
            let channel = match channel {
                None => None,
                Some(raw) => Some(
                    Channel::parse(&raw)
                        .filter(|c| *c != Channel::Voice)
                        .ok_or_else(|| format!("Unknown channel: {raw} (email or sms)"))?,
                ),
            };
            let reason = match reason {
                None => None,
                Some(raw) => Some(Reason::parse(&raw).ok_or_else(|| {
                    format!("Unknown reason: {raw} (hard_bounce, complaint, unsubscribed or stop)")
                })?),
            };
            let page = Page {
                page: 1,
                page_size: limit.clamp(1, 1000),
            };
            let filter = SuppressionFilter {
                channel,
                reason,
                contains: search,
            };
            let (entries, total) = service.suppressions(filter, page).await.map_err(text)?;
            for s in &entries {
                println!(
                    "{}\t{}\t{}\t{}\t{}{}",
                    s.id,
                    kernel::time::format(&s.created_at),
                    s.channel.as_str(),
                    s.address,
                    s.reason.as_str(),
                    s.detail
                        .as_deref()
                        .map(|d| format!("\t{d}"))
                        .unwrap_or_default()
                );
            }
            println!("{} of {total} suppressions", entries.len());
        }
        SuppressionsCommand::Remove { address } => {
            let removed = service.unsuppress(address).await.map_err(text)?;
            println!(
                "{} removed ({} since {})",
                removed.address,
                removed.reason.as_str(),
                kernel::time::format(&removed.created_at)
            );
        }
    }
    Ok(())
}

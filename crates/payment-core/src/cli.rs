//! `keel payment ...`: the status summary, transactions, invoices, a refund, and feeding saved
//! Stripe events back through the webhook's handler (recovery after an outage).

use std::path::PathBuf;

use clap::{ArgMatches, FromArgMatches, Subcommand};
use kernel::pagination::Page;
use serde_json::Value;

use crate::service::{Caller, PaymentService};

/// The command's name: `keel payment`.
pub const COMMAND: &str = "payment";

#[derive(Debug, Subcommand)]
pub enum PaymentCommand {
    /// Totals and whether Stripe is configured.
    Status,
    /// Transactions, newest first.
    Transactions {
        /// Only the transactions of the customer with this e-mail address.
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Invoices (from Stripe's invoice events), newest first, with their hosted pages.
    Invoices {
        /// Only the invoices of the customer with this e-mail address.
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Refund a charge, in full or in part (smallest currency unit).
    Refund {
        id: i64,
        #[arg(long)]
        amount: Option<i64>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Feed saved deliveries through the webhook's handler. The file holds a JSON array (or one
    /// JSON value per line) of `{"body": "<raw event>", "signature": "<Stripe-Signature>"}`, or,
    /// with --trust, of events themselves.
    ReplayWebhooks {
        file: PathBuf,
        /// Apply events without checking their signatures.
        #[arg(long)]
        trust: bool,
    },
}

/// `keel payment`.
pub fn command() -> clap::Command {
    PaymentCommand::augment_subcommands(
        clap::Command::new(COMMAND)
            .about(
                "Payment status, transactions, invoices, refunds, and replaying saved Stripe events",
            )
            .subcommand_required(true),
    )
}

/// Everyone's rows, or (`--user EMAIL`) those of the user of the customer with that address.
async fn caller_of(service: &dyn PaymentService, user: Option<String>) -> Result<Caller, String> {
    Ok(match user {
        None => Caller::Anyone,
        Some(email) => Caller::User(
            service
                .user_by_email(&email)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("no payment customer with the address {email}"))?,
        ),
    })
}

/// Runs `keel payment <matches>`.
pub async fn run(service: &dyn PaymentService, matches: &ArgMatches) -> Result<(), String> {
    let text = |e: crate::PaymentError| e.to_string();
    match PaymentCommand::from_arg_matches(matches).map_err(|e| e.to_string())? {
        PaymentCommand::Status => {
            let s = service.summary(Caller::Anyone).await.map_err(text)?;
            println!(
                "stripe: {}{}\ntransactions: {}\nrevenue (cents): {}\nactive subscriptions: {}",
                if s.enabled {
                    "configured"
                } else {
                    "STRIPE_SECRET_KEY is not set"
                },
                if s.is_test_mode { " (test mode)" } else { "" },
                s.total_transactions,
                s.total_revenue_cents,
                s.active_subscriptions
            );
        }
        PaymentCommand::Transactions {
            user,
            status,
            limit,
        } => {
            let caller = caller_of(service, user).await?;
            let page = Page {
                page: 1,
                page_size: limit.clamp(1, 1000),
            };
            let list = service
                .transactions(caller, status.as_deref(), page)
                .await
                .map_err(text)?;
            let (rows, total) = (&list.rows, list.total);
            for t in rows {
                println!(
                    "{}\t{}\t{}\t{}\t{} {}\t{}",
                    t.id,
                    kernel::time::format(&t.created_at),
                    t.kind,
                    t.status,
                    t.amount,
                    t.currency,
                    t.provider_transaction_id
                );
            }
            println!("{} of {total} transactions", rows.len());
        }
        PaymentCommand::Invoices {
            user,
            status,
            limit,
        } => {
            let caller = caller_of(service, user).await?;
            let page = Page {
                page: 1,
                page_size: limit.clamp(1, 1000),
            };
            let (rows, total) = service
                .invoices(caller, status.as_deref(), page)
                .await
                .map_err(text)?;
            for i in &rows {
                println!(
                    "{}\t{}\t{}\t{}\t{} {}\t{}\t{}",
                    i.id,
                    kernel::time::format(&i.invoice_created),
                    i.number.as_deref().unwrap_or("-"),
                    i.status,
                    i.amount_due,
                    i.currency,
                    i.provider_invoice_id,
                    i.hosted_invoice_url.as_deref().unwrap_or("-")
                );
            }
            println!("{} of {total} invoices", rows.len());
        }
        PaymentCommand::Refund { id, amount, reason } => {
            let refund = service
                .refund(Caller::Anyone, id, amount, reason)
                .await
                .map_err(text)?;
            println!(
                "refund {} ({}): {} {} {}",
                refund.id,
                refund.provider_transaction_id,
                refund.amount,
                refund.currency,
                refund.status
            );
        }
        PaymentCommand::ReplayWebhooks { file, trust } => {
            let content = tokio::fs::read_to_string(&file)
                .await
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let entries: Vec<Value> = match serde_json::from_str::<Value>(&content) {
                Ok(Value::Array(items)) => items,
                Ok(other) => vec![other],
                Err(_) => content
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(serde_json::from_str)
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("{}: not JSON: {e}", file.display()))?,
            };
            let (mut processed, mut duplicates, mut refused) = (0, 0, 0);
            for (i, entry) in entries.iter().enumerate() {
                let (body, signature) = match entry.get("body").and_then(Value::as_str) {
                    Some(body) => (
                        body.to_owned(),
                        entry
                            .get("signature")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    ),
                    None => (entry.to_string(), None),
                };
                match service
                    .replay(signature.as_deref(), body.as_bytes(), trust)
                    .await
                {
                    Ok(r) if r.duplicate => duplicates += 1,
                    Ok(_) => processed += 1,
                    Err(e) => {
                        refused += 1;
                        eprintln!("entry {i}: {e}");
                    }
                }
            }
            println!("{processed} processed, {duplicates} already processed, {refused} refused");
            if refused > 0 {
                return Err(format!("{refused} entries were refused"));
            }
        }
    }
    Ok(())
}

//! `provider-sim`: Stripe, Resend, Twilio and LLM APIs on 127.0.0.1 for local demos. Prints the
//! settings that point Keel at it (stdout, `.env` format) and serves until Ctrl-C.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use provider_sim::{ProviderSim, SimConfig};

/// Stand-ins for Stripe, Resend, Twilio and the LLM chat APIs.
#[derive(Parser, Debug)]
#[command(name = "provider-sim", version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "PROVIDER_SIM_ADDR", default_value = "127.0.0.1:9900")]
    addr: String,
    /// Where Stripe events are delivered (Keel's payment webhook route).
    #[arg(
        long,
        env = "PROVIDER_SIM_WEBHOOK_URL",
        default_value = "http://127.0.0.1:8000/api/v1/payment/webhook"
    )]
    webhook_url: String,
    /// Where Resend email events are delivered (Keel's Resend webhook route).
    #[arg(
        long,
        env = "PROVIDER_SIM_RESEND_WEBHOOK_URL",
        default_value = "http://127.0.0.1:8000/api/v1/comms/webhooks/resend"
    )]
    resend_webhook_url: String,
    /// Where incoming SMS (STOP, START, ...) are delivered (Keel's Twilio inbound route).
    #[arg(
        long,
        env = "PROVIDER_SIM_TWILIO_SMS_URL",
        default_value = "http://127.0.0.1:8000/api/v1/comms/webhooks/twilio/inbound"
    )]
    twilio_sms_url: String,
    /// Pause between streamed LLM chunks, in milliseconds.
    #[arg(long, default_value_t = 0)]
    chunk_delay_ms: u64,
    /// Do not send charge.refunded / customer.subscription.* events after API refunds and
    /// subscription changes.
    #[arg(long)]
    no_auto_events: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = SimConfig {
        addr: args.addr.clone(),
        webhook_url: Some(args.webhook_url.clone()),
        resend_webhook_url: Some(args.resend_webhook_url.clone()),
        twilio_sms_url: Some(args.twilio_sms_url.clone()),
        stripe_auto_events: !args.no_auto_events,
        chunk_delay: Duration::from_millis(args.chunk_delay_ms),
        callback_delay: Duration::from_millis(500),
        ..SimConfig::default()
    };
    let sim = match ProviderSim::start(config) {
        Ok(sim) => sim,
        Err(e) => {
            eprintln!("provider-sim: cannot listen on {}: {e}", args.addr);
            return ExitCode::FAILURE;
        }
    };
    eprintln!("provider-sim listening on {}", sim.base_url());
    eprintln!("  Stripe events go to {}", args.webhook_url);
    eprintln!("  Resend events go to {}", args.resend_webhook_url);
    eprintln!("  incoming SMS go to {}", args.twilio_sms_url);
    eprintln!(
        "  outbox: {}/outbox   control API: {}/_sim/...",
        sim.base_url(),
        sim.base_url()
    );
    eprintln!("  settings for Keel (stdout):");
    for (key, value) in sim.settings() {
        println!("{key}={}", env_value(&value));
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("provider-sim: {e}");
    }
    sim.stop().await;
    ExitCode::SUCCESS
}

/// A value as a `.env` line and a shell both read it: double-quoted when it holds anything but
/// plain characters (the sender `Keel <noreply@example.com>` does).
fn env_value(value: &str) -> String {
    let plain = value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-.:/@+%,=".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

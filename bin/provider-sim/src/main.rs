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
    /// Where Stripe events are delivered (Keel's payment webhook route); empty: nowhere.
    #[arg(
        long,
        env = "PROVIDER_SIM_WEBHOOK_URL",
        default_value = "http://127.0.0.1:8000/api/v1/payment/webhook"
    )]
    webhook_url: String,
    /// Where Resend email events are delivered (Keel's Resend webhook route); empty: nowhere.
    #[arg(
        long,
        env = "PROVIDER_SIM_RESEND_WEBHOOK_URL",
        default_value = "http://127.0.0.1:8000/api/v1/comms/webhooks/resend"
    )]
    resend_webhook_url: String,
    /// Where incoming SMS (STOP, START, ...) are delivered (Keel's Twilio inbound route); empty:
    /// nowhere.
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

/// A delivery address of the command line: an empty one turns those deliveries off.
fn delivery_url(url: &str) -> Option<String> {
    Some(url.trim().to_owned()).filter(|u| !u.is_empty())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = SimConfig {
        addr: args.addr.clone(),
        webhook_url: delivery_url(&args.webhook_url),
        resend_webhook_url: delivery_url(&args.resend_webhook_url),
        twilio_sms_url: delivery_url(&args.twilio_sms_url),
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
    let shown = |url: &str| delivery_url(url).unwrap_or_else(|| "nowhere".to_owned());
    eprintln!("  Stripe events go to {}", shown(&args.webhook_url));
    eprintln!("  Resend events go to {}", shown(&args.resend_webhook_url));
    eprintln!("  incoming SMS go to {}", shown(&args.twilio_sms_url));
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

//! Incoming messages: what Twilio posts to a number's "A message comes in" webhook when someone
//! texts it, signed like a status callback. Twilio's opt-out handling is simulated: an opt-out
//! keyword (STOP, ...) adds the sender to the opted-out numbers (later SMS to it fail with
//! 21610), an opt-in keyword (START, ...) takes it off, and either carries `OptOutType` as with
//! Advanced Opt-Out.

use super::{API_VERSION, post_signed};
use crate::delivery::{CallbackOptions, Delivery};
use crate::ids;
use crate::state::{Sim, lock};

/// Twilio's default opt-out keywords.
const OPT_OUT: [&str; 8] = [
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "REVOKE",
    "OPTOUT",
];
/// Twilio's default opt-in keywords.
const OPT_IN: [&str; 3] = ["START", "YES", "UNSTOP"];
/// Twilio's default help keywords.
const HELP: [&str; 2] = ["HELP", "INFO"];

/// The `OptOutType` of a body: `STOP`, `START`, `HELP` for a keyword alone (any case).
fn opt_out_type(body: &str) -> Option<&'static str> {
    let word = body.trim().to_ascii_uppercase();
    if OPT_OUT.contains(&word.as_str()) {
        Some("STOP")
    } else if OPT_IN.contains(&word.as_str()) {
        Some("START")
    } else if HELP.contains(&word.as_str()) {
        Some("HELP")
    } else {
        None
    }
}

/// Posts the message `body` from `from` to `to` (default the test number `+15005550006`) to
/// `options.url` or the configured SMS webhook URL, signed with the auth token. `Err` when there
/// is no URL.
pub async fn inbound_sms(
    sim: &Sim,
    from: &str,
    to: Option<&str>,
    body: &str,
    options: &CallbackOptions,
) -> Result<Vec<Delivery>, String> {
    if let Some(delay) = options.delay {
        tokio::time::sleep(delay).await;
    }
    let url = options
        .url
        .clone()
        .or_else(|| sim.config.twilio_sms_url.clone())
        .ok_or_else(|| "no Twilio SMS webhook URL configured".to_owned())?;
    let to = to.unwrap_or("+15005550006");
    let kind = opt_out_type(body);
    {
        let mut outbox = lock(&sim.outbox);
        match kind {
            Some("STOP") => {
                outbox.opted_out.insert(from.to_owned());
            }
            Some("START") => {
                outbox.opted_out.remove(from);
            }
            _ => {}
        }
    }
    let sid = ids::twilio("SM");
    let mut params: Vec<(String, String)> = [
        ("ToCountry", "US"),
        ("SmsMessageSid", sid.as_str()),
        ("NumMedia", "0"),
        ("SmsSid", sid.as_str()),
        ("SmsStatus", "received"),
        ("Body", body),
        ("FromCountry", "US"),
        ("To", to),
        ("NumSegments", "1"),
        ("MessageSid", sid.as_str()),
        ("AccountSid", sim.config.twilio_account_sid.as_str()),
        ("From", from),
        ("ApiVersion", API_VERSION),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if let Some(kind) = kind {
        params.push(("OptOutType".to_owned(), kind.to_owned()));
    }
    Ok(post_signed(sim, &url, params, &sid, "received", options).await)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keywords_as_twilio_reads_them() {
        assert_eq!(super::opt_out_type(" stop "), Some("STOP"));
        assert_eq!(super::opt_out_type("Unstop"), Some("START"));
        assert_eq!(super::opt_out_type("help"), Some("HELP"));
        assert_eq!(super::opt_out_type("stop please"), None);
    }
}

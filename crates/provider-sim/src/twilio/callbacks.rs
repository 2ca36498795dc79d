//! Status callbacks: a message's or call's status posted to its `StatusCallback`, form-encoded and
//! signed with `X-Twilio-Signature`, with the delivery knobs.

use super::API_VERSION;
use crate::delivery::{self, CallbackOptions, Delivery};
use crate::journal::Provider;
use crate::signing;
use crate::state::{Sim, lock};

/// An auth token that is not the account's, for `wrong_secret`.
const WRONG_TOKEN: &str = "ffffffffffffffffffffffffffffffff";

/// Sets the status of a message or call and posts its status callback, signed, with the knobs
/// of `options`. One delivery, two with `duplicate`.
pub async fn status_callback(
    sim: &Sim,
    sid: &str,
    status: &str,
    options: &CallbackOptions,
) -> Result<Vec<Delivery>, String> {
    if let Some(delay) = options.delay {
        tokio::time::sleep(delay).await;
    }
    let account = sim.config.twilio_account_sid.clone();
    let (url, params) = {
        let mut outbox = lock(&sim.outbox);
        if let Some(sms) = outbox.sms.iter_mut().find(|m| m.sid == sid) {
            sms.status = status.to_owned();
            let mut params = vec![
                ("MessageSid", sid.to_owned()),
                ("SmsSid", sid.to_owned()),
                ("AccountSid", account),
                ("To", sms.to.clone()),
                ("MessageStatus", status.to_owned()),
                ("SmsStatus", status.to_owned()),
                ("ApiVersion", API_VERSION.to_owned()),
            ];
            if let Some(from) = &sms.from {
                params.push(("From", from.clone()));
            }
            if let Some(service) = &sms.messaging_service_sid {
                params.push(("MessagingServiceSid", service.clone()));
            }
            if matches!(status, "failed" | "undelivered") {
                // Twilio's status callbacks carry the code only (30003: unreachable handset).
                let code = options
                    .error_code
                    .clone()
                    .or_else(|| sms.error_code.clone())
                    .unwrap_or_else(|| "30003".to_owned());
                params.push(("ErrorCode", code));
            }
            (sms.status_callback.clone(), params)
        } else if let Some(call) = outbox.calls.iter_mut().find(|c| c.sid == sid) {
            call.status = status.to_owned();
            let mut params = vec![
                ("CallSid", sid.to_owned()),
                ("AccountSid", account),
                ("To", call.to.clone()),
                ("From", call.from.clone()),
                ("CallStatus", status.to_owned()),
                ("Direction", "outbound-api".to_owned()),
                ("ApiVersion", API_VERSION.to_owned()),
                ("Timestamp", chrono::Utc::now().to_rfc2822()),
                ("CallbackSource", "call-progress-events".to_owned()),
            ];
            if status == "completed" {
                params.push(("CallDuration", "7".to_owned()));
            }
            (call.status_callback.clone(), params)
        } else {
            return Err(format!("No message or call {sid}"));
        }
    };
    let url = options
        .url
        .clone()
        .or(url)
        .ok_or_else(|| format!("{sid} has no StatusCallback"))?;
    let params: Vec<(String, String)> =
        params.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    Ok(post_signed(sim, &url, params, sid, status, options).await)
}

/// Signs `params` for `url` as Twilio does (`X-Twilio-Signature`) and POSTs them as a form (twice
/// with `duplicate`), with the knobs of `options`; `id` and `kind` label the deliveries.
pub(super) async fn post_signed(
    sim: &Sim,
    url: &str,
    mut params: Vec<(String, String)>,
    id: &str,
    kind: &str,
    options: &CallbackOptions,
) -> Vec<Delivery> {
    let token = if options.wrong_secret {
        WRONG_TOKEN
    } else {
        &sim.config.twilio_auth_token
    };
    let signature = signing::twilio(token, url, &params);
    if options.tamper {
        for (key, value) in &mut params {
            if key == "To" {
                value.push('0');
            }
        }
    }
    let body = serde_urlencoded::to_string(&params).unwrap_or_default();
    let mut headers = vec![
        (
            "content-type".to_owned(),
            "application/x-www-form-urlencoded; charset=utf-8".to_owned(),
        ),
        ("user-agent".to_owned(), "TwilioProxy/1.1".to_owned()),
    ];
    if !options.no_signature {
        headers.push(("x-twilio-signature".to_owned(), signature));
    }
    let copies = if options.duplicate { 2 } else { 1 };
    let mut out = Vec::new();
    for _ in 0..copies {
        let delivery = delivery::post(
            &sim.client,
            Provider::Twilio,
            url,
            headers.clone(),
            body.clone(),
            Some(id.to_owned()),
            Some(kind.to_owned()),
        )
        .await;
        sim.record_delivery(delivery.clone());
        out.push(delivery);
    }
    out
}

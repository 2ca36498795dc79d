//! Twilio: `Messages.json` and `Calls.json` under `/2010-04-01/Accounts/{sid}/` with basic auth,
//! form bodies with PascalCase keys, 201 JSON bodies, Twilio error bodies, and status callbacks
//! signed with `X-Twilio-Signature`; incoming messages (STOP and START included) in `inbound`.

mod callbacks;
mod inbound;

use std::sync::Arc;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use base64::Engine;
use serde_json::{Value, json};

use crate::journal::Provider;
use crate::outbox::{Call, Sms};
use crate::state::{Reply, Sim, lock};
use crate::{form, ids};

use callbacks::post_signed;
pub use callbacks::status_callback;
pub use inbound::inbound_sms;

const API_VERSION: &str = "2010-04-01";
/// Twilio's error for a message to a number that opted out.
const UNSUBSCRIBED: &str = "21610";

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(
        "/2010-04-01/Accounts/{sid}/{rest:.*}",
        web::route().to(dispatch),
    );
}

/// Twilio's error body.
fn error(status: u16, code: u32, message: &str) -> Reply {
    Reply::json(
        status,
        json!({
            "code": code,
            "message": message,
            "more_info": format!("https://www.twilio.com/docs/errors/{code}"),
            "status": status,
        }),
    )
}

pub fn fault_reply(status: u16, code: Option<&str>, message: Option<&str>) -> Reply {
    let (default_code, default_message) = match status {
        400 => (21211, "The 'To' number is not a valid phone number."),
        401 => (20003, "Authenticate"),
        404 => (20404, "The requested resource was not found"),
        429 => (20429, "Too Many Requests"),
        503 => (20503, "Service Unavailable"),
        _ => (20500, "Internal Server Error"),
    };
    let code = code.and_then(|c| c.parse().ok()).unwrap_or(default_code);
    error(status, code, message.unwrap_or(default_message))
}

fn auth_error() -> Reply {
    error(401, 20003, "Authenticate").header("www-authenticate", "Basic realm=\"Twilio API\"")
}

async fn dispatch(
    sim: web::Data<Sim>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> HttpResponse {
    let action = match sim.begin(Provider::Twilio, &req, &body).await {
        Ok(action) => action,
        Err(response) => return response,
    };
    let (sid, rest) = path.into_inner();
    let reply = if authenticated(&sim, &req, &sid) {
        let params = form::pairs(&body);
        match (req.method().as_str(), rest.as_str()) {
            ("POST", "Messages.json") => create_message(&sim, &params),
            ("POST", "Calls.json") => create_call(&sim, &params),
            ("GET", r) => fetch(&sim, r),
            _ => not_found(req.path()),
        }
    } else {
        auth_error()
    };
    sim.finish(reply, action)
}

fn not_found(path: &str) -> Reply {
    error(
        404,
        20404,
        &format!("The requested resource {path} was not found"),
    )
}

fn authenticated(sim: &Sim, req: &HttpRequest, path_sid: &str) -> bool {
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(encoded) = header.strip_prefix("Basic ") else {
        return false;
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&decoded);
    let Some((user, password)) = text.split_once(':') else {
        return false;
    };
    let config = &sim.config;
    user == config.twilio_account_sid
        && password == config.twilio_auth_token
        && path_sid == config.twilio_account_sid
}

fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn all<'a>(params: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    params
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// E.164: `+`, then 2 to 15 digits, the first not 0.
fn is_e164(number: &str) -> bool {
    number.strip_prefix('+').is_some_and(|digits| {
        (2..=15).contains(&digits.len())
            && digits.chars().all(|c| c.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

/// A sender: E.164, a short code, or an alphanumeric sender id.
fn is_sender(from: &str) -> bool {
    is_e164(from)
        || (from.len() >= 3 && from.len() <= 6 && from.chars().all(|c| c.is_ascii_digit()))
        || (from.len() <= 11
            && from.chars().any(|c| c.is_ascii_alphabetic())
            && from.chars().all(|c| c.is_ascii_alphanumeric() || c == ' '))
}

/// Twilio's magic test numbers that fail in a known way.
fn magic_to(to: &str) -> Option<Reply> {
    match to {
        "+15005550001" => Some(error(
            400,
            21211,
            &format!("The 'To' number {to} is not a valid phone number."),
        )),
        "+15005550004" => Some(error(
            400,
            21610,
            "Attempt to send to unsubscribed recipient",
        )),
        "+15005550009" => Some(error(
            400,
            21614,
            &format!("'To' number {to} is not a valid mobile number"),
        )),
        _ => None,
    }
}

/// Segments of a body: GSM-7 (approximated by printable ASCII) 160 in one, 153 per segment
/// beyond; anything else is UCS-2, 70 in one, 67 per segment beyond.
fn segments(body: &str) -> u32 {
    let gsm = body
        .chars()
        .all(|c| c.is_ascii() && (!c.is_ascii_control() || c == '\n' || c == '\r'));
    let (single, multi) = if gsm { (160, 153) } else { (70, 67) };
    let n = u32::try_from(body.chars().count()).unwrap_or(u32::MAX);
    if n <= single { 1 } else { n.div_ceil(multi) }
}

fn rfc2822_now() -> String {
    chrono::Utc::now().to_rfc2822()
}

fn uri(sim: &Sim, kind: &str, sid: &str) -> String {
    format!(
        "/{API_VERSION}/Accounts/{}/{kind}/{sid}",
        sim.config.twilio_account_sid
    )
}

fn create_message(sim: &Arc<Sim>, params: &[(String, String)]) -> Reply {
    let Some(to) = param(params, "To") else {
        return error(400, 21604, "A 'To' phone number is required.");
    };
    if !is_e164(to) {
        return error(
            400,
            21211,
            &format!("The 'To' number {to} is not a valid phone number."),
        );
    }
    if let Some(reply) = magic_to(to) {
        return reply;
    }
    let from = param(params, "From");
    let service = param(params, "MessagingServiceSid");
    match (from, service) {
        (None, None) => return error(400, 21603, "A 'From' phone number is required."),
        (Some(from), _) if !is_sender(from) => {
            return error(
                400,
                21212,
                &format!(
                    "The 'From' number {from} is not a valid phone number, shortcode, or alphanumeric sender ID."
                ),
            );
        }
        _ => {}
    }
    let body = param(params, "Body").unwrap_or("");
    let media = all(params, "MediaUrl");
    if body.is_empty() && media.is_empty() {
        return error(400, 21602, "Message body is required.");
    }
    if body.chars().count() > 1600 {
        return error(
            400,
            21617,
            "The concatenated message body exceeds the 1600 character limit.",
        );
    }
    // A number that replied STOP: refused at once when sent from a number; through a messaging
    // service accepted, then failed with 21610 in its status callback.
    let opted_out = lock(&sim.outbox).opted_out.contains(to);
    if opted_out && from.is_some() {
        return error(400, 21610, "Attempt to send to unsubscribed recipient");
    }
    let sid = ids::twilio("SM");
    let now = rfc2822_now();
    let status = if from.is_some() { "queued" } else { "accepted" };
    let sms = Sms {
        sid: sid.clone(),
        to: to.to_owned(),
        from: from.map(str::to_owned),
        messaging_service_sid: service.map(str::to_owned),
        body: body.to_owned(),
        media_urls: media.iter().map(|m| (*m).to_owned()).collect(),
        status: status.to_owned(),
        num_segments: segments(body),
        status_callback: param(params, "StatusCallback").map(str::to_owned),
        date_created: now,
        error_code: opted_out.then(|| UNSUBSCRIBED.to_owned()),
    };
    lock(&sim.outbox).sms.push(sms.clone());
    if sms.status_callback.is_some() || sim.callback_options().url.is_some() {
        let lifecycle = if opted_out {
            vec!["failed"]
        } else {
            vec!["sent", "delivered"]
        };
        spawn_lifecycle(sim.clone(), sid, lifecycle);
    }
    Reply::json(201, message_json(sim, &sms))
}

fn message_json(sim: &Sim, sms: &Sms) -> Value {
    let uri = uri(sim, "Messages", &sms.sid);
    json!({
        "sid": sms.sid,
        "account_sid": sim.config.twilio_account_sid,
        "to": sms.to,
        "from": sms.from,
        "body": sms.body,
        "status": sms.status,
        "direction": "outbound-api",
        "date_created": sms.date_created,
        "date_updated": sms.date_created,
        "date_sent": null,
        "num_segments": sms.num_segments.to_string(),
        "num_media": sms.media_urls.len().to_string(),
        "price": null,
        "price_unit": "USD",
        "error_code": null,
        "error_message": null,
        "messaging_service_sid": sms.messaging_service_sid,
        "api_version": API_VERSION,
        "uri": format!("{uri}.json"),
        "subresource_uris": {"media": format!("{uri}/Media.json"), "feedback": format!("{uri}/Feedback.json")},
    })
}

fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace))
}

fn create_call(sim: &Arc<Sim>, params: &[(String, String)]) -> Reply {
    let Some(to) = param(params, "To") else {
        return error(400, 21201, "No 'To' number is specified");
    };
    if !is_e164(to) {
        return error(
            400,
            21211,
            &format!("The 'To' number {to} is not a valid phone number."),
        );
    }
    if let Some(reply) = magic_to(to) {
        return reply;
    }
    let Some(from) = param(params, "From") else {
        return error(400, 21213, "No 'From' number is specified");
    };
    if !is_e164(from) {
        return error(
            400,
            21212,
            &format!("The 'From' number {from} is not a valid phone number."),
        );
    }
    let url = param(params, "Url");
    let twiml = param(params, "Twiml");
    let application = param(params, "ApplicationSid");
    match [url, twiml, application]
        .iter()
        .filter(|v| v.is_some())
        .count()
    {
        0 => return error(400, 21205, "Url parameter is required."),
        1 => {}
        _ => {
            return error(
                400,
                21205,
                "Only one of Url, Twiml or ApplicationSid may be given.",
            );
        }
    }
    if let Some(url) = url.filter(|u| !is_http_url(u)) {
        return error(400, 21205, &format!("Url is not a valid URL: {url}"));
    }
    if let Some(callback) = param(params, "StatusCallback").filter(|u| !is_http_url(u)) {
        return error(
            400,
            21609,
            &format!("StatusCallback is not a valid URL: {callback}"),
        );
    }
    let mut events: Vec<String> = all(params, "StatusCallbackEvent")
        .iter()
        .flat_map(|v| v.split([' ', ',']))
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect();
    if events.is_empty() {
        events.push("completed".to_owned());
    }
    let sid = ids::twilio("CA");
    let call = Call {
        sid: sid.clone(),
        to: to.to_owned(),
        from: from.to_owned(),
        url: url.map(str::to_owned),
        twiml: twiml.map(str::to_owned),
        application_sid: application.map(str::to_owned),
        status: "queued".to_owned(),
        status_callback: param(params, "StatusCallback").map(str::to_owned),
        status_callback_events: events.clone(),
        date_created: rfc2822_now(),
    };
    lock(&sim.outbox).calls.push(call.clone());
    if call.status_callback.is_some() || sim.callback_options().url.is_some() {
        let lifecycle = [
            ("initiated", "initiated"),
            ("ringing", "ringing"),
            ("answered", "in-progress"),
            ("completed", "completed"),
        ];
        let statuses = lifecycle
            .iter()
            .filter(|(e, _)| events.iter().any(|x| x == e))
            .map(|(_, s)| *s)
            .collect();
        spawn_lifecycle(sim.clone(), sid, statuses);
    }
    Reply::json(201, call_json(sim, &call))
}

/// `(555) 123-4567` for North American numbers, the number itself otherwise.
fn formatted(number: &str) -> String {
    match number.strip_prefix("+1") {
        Some(d) if d.len() == 10 => format!("({}) {}-{}", &d[..3], &d[3..6], &d[6..]),
        _ => number.to_owned(),
    }
}

fn call_json(sim: &Sim, call: &Call) -> Value {
    let uri = uri(sim, "Calls", &call.sid);
    json!({
        "sid": call.sid,
        "account_sid": sim.config.twilio_account_sid,
        "to": call.to,
        "to_formatted": formatted(&call.to),
        "from": call.from,
        "from_formatted": formatted(&call.from),
        "status": call.status,
        "direction": "outbound-api",
        "parent_call_sid": null,
        "phone_number_sid": null,
        "date_created": call.date_created,
        "date_updated": call.date_created,
        "start_time": null,
        "end_time": null,
        "duration": null,
        "price": null,
        "price_unit": "USD",
        "answered_by": null,
        "caller_name": null,
        "forwarded_from": null,
        "group_sid": null,
        "queue_time": "0",
        "trunk_sid": null,
        "annotation": null,
        "api_version": API_VERSION,
        "uri": format!("{uri}.json"),
        "subresource_uris": {
            "notifications": format!("{uri}/Notifications.json"),
            "recordings": format!("{uri}/Recordings.json"),
            "events": format!("{uri}/Events.json"),
        },
    })
}

/// `GET Messages/{sid}.json` or `Calls/{sid}.json`.
fn fetch(sim: &Sim, rest: &str) -> Reply {
    let found = match rest.strip_suffix(".json").and_then(|r| r.split_once('/')) {
        Some(("Messages", sid)) => lock(&sim.outbox)
            .sms
            .iter()
            .find(|m| m.sid == sid)
            .map(|m| message_json(sim, m)),
        Some(("Calls", sid)) => lock(&sim.outbox)
            .calls
            .iter()
            .find(|c| c.sid == sid)
            .map(|c| call_json(sim, c)),
        _ => None,
    };
    found.map_or_else(
        || {
            not_found(&format!(
                "/{API_VERSION}/Accounts/{}/{rest}",
                sim.config.twilio_account_sid
            ))
        },
        |body| Reply::json(200, body),
    )
}

/// Moves a message or call through `statuses` in the background, posting a callback for each
/// with the simulator's current callback knobs.
fn spawn_lifecycle(sim: Arc<Sim>, sid: String, mut statuses: Vec<&'static str>) {
    if sim.callback_options().out_of_order {
        statuses.reverse();
    }
    tokio::spawn(async move {
        for status in statuses {
            let options = sim.callback_options();
            if options.delay.is_none() {
                tokio::time::sleep(sim.config.callback_delay).await;
            }
            let _ = status_callback(&sim, &sid, status, &options).await;
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_and_segments() {
        assert!(super::is_e164("+15551234567"));
        assert!(!super::is_e164(" 15551234567"));
        assert!(!super::is_e164("+0123"));
        assert!(super::is_sender("Keel"));
        assert_eq!(super::segments(&"a".repeat(160)), 1);
        assert_eq!(super::segments(&"a".repeat(161)), 2);
        assert_eq!(super::segments(&"日".repeat(71)), 2);
        assert_eq!(super::formatted("+15551234567"), "(555) 123-4567");
    }
}

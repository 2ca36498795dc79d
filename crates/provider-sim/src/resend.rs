//! Resend: `POST /emails` (and `/emails/batch`, `GET /emails/{id}`) with a bearer key,
//! Resend's validation errors and idempotency keys; accepted emails land in the outbox. Webhook
//! events (`email.sent`, `email.delivered`, ...) are signed the Svix way and posted to the
//! configured webhook URL, automatically after each send and on demand.

use std::sync::Arc;

use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::delivery::{self, CallbackOptions, Delivery};
use crate::journal::Provider;
use crate::outbox::Email;
use crate::state::{Reply, Sim, lock, now};
use crate::{ids, signing};

/// A `whsec_` secret that is not the endpoint's, for `wrong_secret`.
const WRONG_SECRET: &str = "whsec_bm90LXRoZS1lbmRwb2ludC1zZWNyZXQh";
/// Another secret, whose signature comes first with `two_signatures`.
const ROTATED_SECRET: &str = "whsec_YS1yb3RhdGVkLW91dC1vbGQtc2VjcmV0";

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/emails", web::post().to(send))
        .route("/emails/batch", web::post().to(send_batch))
        .route("/emails/{id}", web::get().to(get));
}

/// Resend's error body: exactly `statusCode`, `message`, `name`.
fn error(status: u16, name: &str, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"statusCode": status, "message": message, "name": name}),
    )
}

pub fn fault_reply(status: u16, code: Option<&str>, message: Option<&str>) -> Reply {
    let (name, default_message) = match status {
        400 => ("validation_error", "Invalid request."),
        401 => (
            "missing_api_key",
            "Missing API key in the authorization header.",
        ),
        403 => ("invalid_api_key", "API key is invalid."),
        404 => ("not_found", "The requested endpoint does not exist."),
        409 => (
            "concurrent_idempotent_requests",
            "Same idempotency key used while original request is still in progress.",
        ),
        422 => ("validation_error", "Invalid request."),
        429 => (
            "rate_limit_exceeded",
            "Too many requests. You can only make 2 requests per second. See rate limit response headers for more information. Or contact support to increase rate limit.",
        ),
        _ => ("application_error", "An unexpected error occurred."),
    };
    let mut reply = error(
        status,
        code.unwrap_or(name),
        message.unwrap_or(default_message),
    );
    if status == 429 {
        reply = reply
            .header("ratelimit-limit", "2")
            .header("ratelimit-remaining", "0")
            .header("ratelimit-reset", "1");
    }
    reply
}

async fn send(sim: web::Data<Sim>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(&sim, &req, &body, false).await
}

async fn send_batch(sim: web::Data<Sim>, req: HttpRequest, body: Bytes) -> HttpResponse {
    handle(&sim, &req, &body, true).await
}

async fn handle(sim: &Arc<Sim>, req: &HttpRequest, body: &Bytes, batch: bool) -> HttpResponse {
    let action = match sim.begin(Provider::Resend, req, body).await {
        Ok(action) => action,
        Err(response) => return response,
    };
    let reply = respond(sim, req, body, batch).unwrap_or_else(|e| e);
    sim.finish(reply, action)
}

fn respond(sim: &Arc<Sim>, req: &HttpRequest, body: &[u8], batch: bool) -> Result<Reply, Reply> {
    authenticate(sim, req)?;
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = String::from_utf8_lossy(body).into_owned();
    if let Some(key) = &key {
        if key.is_empty() || key.len() > 256 {
            return Err(error(
                400,
                "invalid_idempotency_key",
                "The key must be between 1-256 chars.",
            ));
        }
        if let Some((stored_body, response)) = lock(&sim.resend_idempotency).get(key) {
            if *stored_body != text {
                return Err(error(
                    409,
                    "invalid_idempotent_request",
                    "Same idempotency key used with a different request payload. Change your idempotency key or try to use the same request payload as the original request.",
                ));
            }
            return Ok(Reply::json(200, response.clone()));
        }
    }
    let parsed: Value = serde_json::from_slice(body)
        .map_err(|e| error(422, "validation_error", &format!("Invalid JSON body: {e}")))?;
    let response = if batch {
        let items = parsed.as_array().ok_or_else(|| {
            error(
                422,
                "validation_error",
                "The request body must be an array of emails.",
            )
        })?;
        if items.len() > 100 {
            return Err(error(
                422,
                "validation_error",
                "Too many emails in the batch. The maximum is 100.",
            ));
        }
        let emails = items.iter().map(validate).collect::<Result<Vec<_>, _>>()?;
        let ids: Vec<Value> = emails.iter().map(|e| json!({"id": e.id})).collect();
        let mut outbox = lock(&sim.outbox);
        for email in &emails {
            outbox.add_email(email.clone());
        }
        drop(outbox);
        for email in emails {
            spawn_lifecycle(sim.clone(), email);
        }
        json!({"data": ids})
    } else {
        let email = validate(&parsed)?;
        let response = json!({"id": email.id});
        lock(&sim.outbox).add_email(email.clone());
        spawn_lifecycle(sim.clone(), email);
        response
    };
    if let Some(key) = key {
        lock(&sim.resend_idempotency).insert(key, (text, response.clone()));
    }
    Ok(Reply::json(200, response))
}

fn authenticate(sim: &Sim, req: &HttpRequest) -> Result<(), Reply> {
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let key = header.strip_prefix("Bearer ").map(str::trim).unwrap_or("");
    if key.is_empty() {
        return Err(error(
            401,
            "missing_api_key",
            "Missing API key in the authorization header.",
        ));
    }
    if key != sim.config.resend_api_key {
        return Err(error(403, "invalid_api_key", "API key is invalid."));
    }
    Ok(())
}

/// Whether `text` is `a@b.c` or `Name <a@b.c>`.
fn is_address(text: &str) -> bool {
    let text = text.trim();
    let addr = match (text.rfind('<'), text.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => text,
    };
    let Some((local, domain)) = addr.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !addr
            .chars()
            .any(|c| c.is_whitespace() || c == '<' || c == '>')
        && !domain.contains('@')
}

/// A string-or-list field as a list; `Err` when it has another type or a bad address.
fn addresses(email: &Value, field: &str) -> Result<Vec<String>, Reply> {
    let invalid = || {
        error(
            422,
            "validation_error",
            &format!(
                "Invalid `{field}` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format."
            ),
        )
    };
    let list: Vec<String> = match &email[field] {
        Value::Null => Vec::new(),
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(invalid))
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid()),
    };
    if list.iter().any(|a| !is_address(a)) {
        return Err(invalid());
    }
    Ok(list)
}

fn validate(email: &Value) -> Result<Email, Reply> {
    let missing = |field: &str| {
        error(
            422,
            "missing_required_field",
            &format!("Missing `{field}` field."),
        )
    };
    if !email.is_object() {
        return Err(error(
            422,
            "validation_error",
            "The email must be a JSON object.",
        ));
    }
    let from = email["from"].as_str().ok_or_else(|| missing("from"))?;
    if !is_address(from) {
        return Err(error(
            422,
            "validation_error",
            "Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format.",
        ));
    }
    let to = addresses(email, "to")?;
    if to.is_empty() {
        return Err(missing("to"));
    }
    if to.len() > 50 {
        return Err(error(
            422,
            "validation_error",
            "Too many recipients in the `to` field. The maximum is 50.",
        ));
    }
    let subject = email["subject"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| missing("subject"))?;
    let html = email["html"].as_str().map(str::to_owned);
    let text = email["text"].as_str().map(str::to_owned);
    if html.is_none() && text.is_none() {
        return Err(error(
            422,
            "missing_required_field",
            "Missing `html` or `text` field.",
        ));
    }
    if let Some(tags) = email["tags"].as_array() {
        let valid = |v: &Value| {
            v.as_str().is_some_and(|s| {
                !s.is_empty()
                    && s.len() <= 256
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
        };
        if !tags.iter().all(|t| valid(&t["name"]) && valid(&t["value"])) {
            return Err(error(
                422,
                "validation_error",
                "Tags should only contain ASCII letters, numbers, underscores, or dashes, and be at most 256 characters long.",
            ));
        }
    }
    let attachments = email["attachments"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if attachments.iter().any(|a| {
        a["filename"].as_str().is_none() || (a["content"].is_null() && a["path"].is_null())
    }) {
        return Err(error(
            422,
            "invalid_attachment",
            "Attachment must have a `filename` and either `content` or `path`.",
        ));
    }
    Ok(Email {
        id: ids::uuid(),
        from: from.to_owned(),
        to,
        cc: addresses(email, "cc")?,
        bcc: addresses(email, "bcc")?,
        reply_to: addresses(email, "reply_to")?,
        subject: subject.to_owned(),
        html,
        text,
        tags: email["tags"].clone(),
        headers: email["headers"].clone(),
        attachments: attachments.len(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        last_event: None,
    })
}

async fn get(sim: web::Data<Sim>, req: HttpRequest, path: web::Path<String>) -> HttpResponse {
    let action = match sim.begin(Provider::Resend, &req, &Bytes::new()).await {
        Ok(action) => action,
        Err(response) => return response,
    };
    let reply = match authenticate(&sim, &req) {
        Err(e) => e,
        Ok(()) => {
            let id = path.into_inner();
            let found = lock(&sim.outbox).email(&id).cloned();
            match found {
                Some(e) => Reply::json(
                    200,
                    json!({
                        "object": "email", "id": e.id, "from": e.from, "to": e.to, "cc": e.cc, "bcc": e.bcc,
                        "reply_to": e.reply_to, "subject": e.subject, "html": e.html, "text": e.text,
                        "created_at": e.created_at,
                        "last_event": e.last_event.as_deref().unwrap_or("delivered"),
                    }),
                ),
                None => error(404, "not_found", "Email not found"),
            }
        }
    };
    sim.finish(reply, action)
}

/// Whether `address` (bare or `Name <a@b>`) is Resend's test address `{kind}@resend.dev`,
/// labels (`{kind}+label@resend.dev`) included.
fn is_test_address(address: &str, kind: &str) -> bool {
    let address = address.trim();
    let bare = match (address.rfind('<'), address.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => address,
    };
    bare.rsplit_once('@').is_some_and(|(local, domain)| {
        domain.eq_ignore_ascii_case("resend.dev")
            && local
                .split('+')
                .next()
                .is_some_and(|l| l.eq_ignore_ascii_case(kind))
    })
}

/// The events that follow a send, as Resend's test addresses behave: `bounced@resend.dev`
/// bounces, `complained@resend.dev` is delivered then marked as spam, anything else is delivered.
fn lifecycle(email: &Email) -> Vec<&'static str> {
    let any = |kind: &str| email.to.iter().any(|a| is_test_address(a, kind));
    if any("bounced") {
        vec!["email.sent", "email.bounced"]
    } else if any("complained") {
        vec!["email.sent", "email.delivered", "email.complained"]
    } else {
        vec!["email.sent", "email.delivered"]
    }
}

/// Posts the events of an email's lifecycle in the background, each after the callback delay,
/// with the simulator's current callback knobs. Nothing happens without a webhook URL.
fn spawn_lifecycle(sim: Arc<Sim>, email: Email) {
    let options = sim.callback_options();
    if options.url.is_none() && sim.config.resend_webhook_url.is_none() {
        return;
    }
    let mut events = lifecycle(&email);
    if options.out_of_order {
        events.reverse();
    }
    tokio::spawn(async move {
        for kind in events {
            let options = sim.callback_options();
            if options.delay.is_none() {
                tokio::time::sleep(sim.config.callback_delay).await;
            }
            let _ = deliver(&sim, &email, kind, &options).await;
        }
    });
}

/// The event body as Resend sends it (`bounce_type` for `email.bounced`, default `Permanent`).
fn event(email: &Email, kind: &str, bounce_type: Option<&str>) -> Value {
    let mut data = json!({
        "created_at": email.created_at,
        "email_id": email.id,
        "from": email.from,
        "to": email.to,
        "subject": email.subject,
    });
    // Sent as a list of {name, value}; Resend's events carry them as one object of names.
    if let Some(tags) = email.tags.as_array().filter(|t| !t.is_empty()) {
        let named = tags
            .iter()
            .filter_map(|t| Some((t["name"].as_str()?, t["value"].clone())));
        data["tags"] = named
            .map(|(name, value)| (name.to_owned(), value))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    if kind == "email.bounced" {
        let kind = bounce_type.unwrap_or("Permanent");
        let (message, sub_type) = if kind.eq_ignore_ascii_case("permanent") {
            (
                "The recipient's mail server permanently rejected the email.",
                "General",
            )
        } else {
            (
                "The recipient's mail server temporarily rejected the email.",
                "MailboxFull",
            )
        };
        data["bounce"] = json!({"message": message, "type": kind, "subType": sub_type});
    }
    json!({
        "type": kind,
        "created_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": data,
    })
}

/// Posts one event about an email in the outbox.
pub async fn event_for(
    sim: &Sim,
    email_id: &str,
    kind: &str,
    options: &CallbackOptions,
) -> Result<Vec<Delivery>, String> {
    let email = lock(&sim.outbox)
        .email(email_id)
        .cloned()
        .ok_or_else(|| format!("No email {email_id}"))?;
    deliver(sim, &email, kind, options).await
}

/// Signs `kind`'s event about `email` the Svix way and POSTs it (twice with `duplicate`) to the
/// webhook URL, with the knobs of `options`.
async fn deliver(
    sim: &Sim,
    email: &Email,
    kind: &str,
    options: &CallbackOptions,
) -> Result<Vec<Delivery>, String> {
    if let Some(delay) = options.delay {
        tokio::time::sleep(delay).await;
    }
    let url = options
        .url
        .clone()
        .or_else(|| sim.config.resend_webhook_url.clone())
        .ok_or_else(|| "no Resend webhook URL configured".to_owned())?;
    if let Some(stored) = lock(&sim.outbox).email_mut(&email.id) {
        stored.last_event = Some(kind.strip_prefix("email.").unwrap_or(kind).to_owned());
    }
    let event = event(email, kind, options.bounce_type.as_deref());
    let body = event.to_string();
    let msg_id = ids::stripe("msg_");
    let timestamp = now() - if options.stale { 600 } else { 0 };
    let secret = if options.wrong_secret {
        WRONG_SECRET
    } else {
        &sim.config.resend_webhook_secret
    };
    let mut signature = signing::svix(secret, &msg_id, timestamp, body.as_bytes());
    if options.two_signatures {
        let other = signing::svix(ROTATED_SECRET, &msg_id, timestamp, body.as_bytes());
        signature = format!("{other} {signature}");
    }
    let sent = if options.tamper {
        let mut changed = event;
        changed["data"]["subject"] = json!(format!("{} (changed)", email.subject));
        changed.to_string()
    } else {
        body
    };
    let mut headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("svix-id".to_owned(), msg_id),
        ("svix-timestamp".to_owned(), timestamp.to_string()),
    ];
    if !options.no_signature {
        headers.push(("svix-signature".to_owned(), signature));
    }
    let copies = if options.duplicate { 2 } else { 1 };
    let mut out = Vec::new();
    for _ in 0..copies {
        let delivery = delivery::post(
            &sim.client,
            Provider::Resend,
            &url,
            headers.clone(),
            sent.clone(),
            Some(email.id.clone()),
            Some(kind.to_owned()),
        )
        .await;
        sim.record_delivery(delivery.clone());
        out.push(delivery);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn addresses_in_both_forms() {
        assert!(super::is_address("a@example.com"));
        assert!(super::is_address("Keel <noreply@example.com>"));
        assert!(!super::is_address("not-an-address"));
        assert!(!super::is_address("a@b"));
        assert!(!super::is_address("Name <a@b.c"));
    }

    #[test]
    fn resend_test_addresses() {
        assert!(super::is_test_address("bounced@resend.dev", "bounced"));
        assert!(super::is_test_address(
            "X <Bounced+a1@resend.dev>",
            "bounced"
        ));
        assert!(!super::is_test_address("bounced@example.com", "bounced"));
        assert!(!super::is_test_address("delivered@resend.dev", "bounced"));
    }
}

//! Handlers of `/api/v1/comms`, a file per resource, and their request and response bodies.

pub mod email;
pub mod info;
pub mod messages;
pub mod sms;
pub mod suppressions;
pub mod voice;
pub mod webhooks;

use std::sync::Arc;

use actix_web::HttpRequest;
use kernel::Role;
use kernel::identity::{self, Access, need};

use crate::service::{CommsService, Viewer};

pub use email::send_email;
pub use info::{health, status, version};
pub use messages::{get_message, list_messages};
pub use sms::send_sms;
pub use suppressions::{list_suppressions, remove_suppression};
pub use voice::make_call;
pub use webhooks::{resend_webhook, twilio_inbound, twilio_status};

pub struct CommsState {
    pub service: Arc<dyn CommsService>,
}

/// The sends and the message log need an active user when auth is mounted (they spend money).
type Sender = identity::Caller<need::User>;

/// The suppression list is the administrators' (or anyone's on an open deployment).
type Administrator = identity::Caller<need::Admin>;

/// The sender of a send, and who may read which messages: an administrator (or anyone on an open
/// deployment) every message, any other user their own.
fn sender(access: &Access) -> Option<i64> {
    access.user_id()
}

fn viewer(access: &Access) -> Viewer {
    match access.user_id() {
        Some(id) if !access.has_role(Role::Admin) => Viewer::User(id),
        _ => Viewer::All,
    }
}

fn header(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

//! The rules of the contract, without I/O: recipients, numbers, URLs, SMS segments, and the order
//! of delivery statuses.

use serde::{Deserialize, Serialize};

pub mod suppression;

/// A communications channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = comms::Channel)]
pub enum Channel {
    Email,
    Sms,
    Voice,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Sms, Channel::Voice];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "email",
            Channel::Sms => "sms",
            Channel::Voice => "voice",
        }
    }

    pub fn parse(raw: &str) -> Option<Channel> {
        Channel::ALL.into_iter().find(|c| c.as_str() == raw)
    }

    /// How error texts name the channel (`Email provider error: ...`).
    pub fn title(self) -> &'static str {
        match self {
            Channel::Email => "Email",
            Channel::Sms => "SMS",
            Channel::Voice => "Voice",
        }
    }

    pub fn provider(self) -> &'static str {
        match self {
            Channel::Email => "resend",
            Channel::Sms | Channel::Voice => "twilio",
        }
    }
}

/// Resend's limit on recipients of one email.
pub const MAX_RECIPIENTS: usize = 50;
pub const MAX_SUBJECT_CHARS: usize = 998;
pub const MAX_SMS_CHARS: usize = 1600;
pub const MAX_TAG_CHARS: usize = 256;
pub const CALL_TIMEOUT_RANGE: std::ops::RangeInclusive<u32> = 5..=600;
pub const DEFAULT_CALL_TIMEOUT: u32 = 30;
/// Characters of a message kept in the log as its preview.
pub const PREVIEW_CHARS: usize = 200;

/// Checks an e-mail address (`local@domain.tld`, as Resend accepts them); the error names it.
pub fn check_address(address: &str) -> Result<(), String> {
    let invalid = || format!("Invalid email address: {address}");
    let (local, domain) = address.rsplit_once('@').ok_or_else(invalid)?;
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local
            .chars()
            .all(|c| c.is_ascii_graphic() && !"<>()[],;:\\\"@".contains(c));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = domain.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if local_ok && domain_ok {
        Ok(())
    } else {
        Err(invalid())
    }
}

/// Checks a sender: a bare address or `Name <address>`.
pub fn check_sender(sender: &str) -> Result<(), String> {
    let trimmed = sender.trim();
    let valid = match trimmed.strip_suffix('>').and_then(|s| s.rsplit_once('<')) {
        Some((name, address)) => {
            !name.contains(['<', '>', '\n', '\r']) && check_address(address).is_ok()
        }
        None => check_address(trimmed).is_ok(),
    };
    if valid {
        Ok(())
    } else {
        Err(format!("Invalid email address: {sender}"))
    }
}

/// Checks an E.164 number: `+`, then 2 to 15 digits, the first not 0.
pub fn check_phone(number: &str) -> Result<(), String> {
    let digits = number.strip_prefix('+').unwrap_or("");
    let ok = (2..=15).contains(&digits.len())
        && digits.chars().all(|c| c.is_ascii_digit())
        && !digits.starts_with('0');
    if ok {
        Ok(())
    } else {
        Err(format!("Invalid phone number: {number}"))
    }
}

/// Checks that a TwiML URL is an absolute http(s) URL with a host.
pub fn check_twiml_url(url: &str) -> Result<(), String> {
    let why = if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it contains spaces or control characters")
    } else {
        match url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
        {
            None => Some("it must be an absolute http or https URL"),
            Some(rest) => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or("");
                let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
                if host.is_empty() || host.starts_with(':') {
                    Some("it has no host")
                } else {
                    None
                }
            }
        }
    };
    match why {
        Some(why) => Err(format!("Invalid twiml_url: {why}")),
        None => Ok(()),
    }
}

/// The Resend tag that carries an email's reference (see [`new_reference`]): Resend sends an
/// email's tags back in each of its events, which find their message by it. Reserved: a send's
/// own tags may not use the name.
pub const REFERENCE_TAG: &str = "keel_message";

/// A new email's reference, keel's own name for it in the message log: a UUIDv7, whose text
/// sorts by the time it was made, so that the log's index of references grows at one end (a
/// random key would write a page of that index of its own for every send).
pub fn new_reference() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Checks a tag's name or value: ASCII letters, digits, `_` and `-`, 1 to 256 characters.
pub fn check_tag_part(what: &str, value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= MAX_TAG_CHARS
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid tag {what}: {value:?} (ASCII letters, digits, _ and -, at most {MAX_TAG_CHARS} characters)"
        ))
    }
}

/// GSM 03.38's basic character set (one septet each).
const GSM_BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?\
    ¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/// Its extension table (an escape and the character: two septets each).
const GSM_EXTENSION: &str = "^{}\\[~]|€\u{0c}";

/// The number of segments an SMS body takes: GSM-7 (extension characters count twice) 160 in one
/// and 153 per segment beyond; any other character makes it UCS-2, 70 in one and 67 beyond.
pub fn sms_segments(body: &str) -> u32 {
    let septets: Option<usize> = body.chars().try_fold(0, |n, c| {
        if GSM_BASIC.contains(c) {
            Some(n + 1)
        } else if GSM_EXTENSION.contains(c) {
            Some(n + 2)
        } else {
            None
        }
    });
    let (units, single, per_part) = match septets {
        Some(septets) => (septets, 160, 153),
        None => (body.encode_utf16().count(), 70, 67),
    };
    let segments = if units <= single {
        1
    } else {
        units.div_ceil(per_part)
    };
    u32::try_from(segments).unwrap_or(u32::MAX)
}

/// The first `PREVIEW_CHARS` characters of a text.
pub fn preview(text: &str) -> String {
    text.chars().take(PREVIEW_CHARS).collect()
}

/// Where a delivery status stands in its lifecycle: a status only ever replaces one of a lower
/// rank, so a late or replayed event never moves a message backwards. `None` for a status this
/// module does not know (it is then not stored).
pub fn status_rank(status: &str) -> Option<u8> {
    Some(match status {
        "queued" | "accepted" | "scheduled" => 0,
        "sending" | "initiated" => 1,
        "sent" | "ringing" => 2,
        "delivery_delayed" | "in-progress" | "answered" => 3,
        "delivered" | "undelivered" | "failed" | "bounced" | "completed" | "busy" | "no-answer"
        | "canceled" => 4,
        "read" | "complained" => 5,
        _ => return None,
    })
}

/// Every known status of a lower rank than `status`: the ones it may replace.
pub fn statuses_below(status: &str) -> Vec<&'static str> {
    const ALL: [&str; 20] = [
        "queued",
        "accepted",
        "scheduled",
        "sending",
        "initiated",
        "sent",
        "ringing",
        "delivery_delayed",
        "in-progress",
        "answered",
        "delivered",
        "undelivered",
        "failed",
        "bounced",
        "completed",
        "busy",
        "no-answer",
        "canceled",
        "read",
        "complained",
    ];
    let Some(rank) = status_rank(status) else {
        return Vec::new();
    };
    ALL.into_iter()
        .filter(|s| status_rank(s).is_some_and(|r| r < rank))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_follow_the_spec_table() {
        let gsm = |n: usize| "a".repeat(n);
        assert_eq!(sms_segments(&gsm(1)), 1);
        assert_eq!(sms_segments(&gsm(160)), 1);
        assert_eq!(sms_segments(&gsm(161)), 2);
        assert_eq!(sms_segments(&gsm(306)), 2);
        assert_eq!(sms_segments(&gsm(307)), 3);
        assert_eq!(sms_segments(&gsm(459)), 3);
        assert_eq!(sms_segments(&gsm(460)), 4);
    }

    #[test]
    fn extension_characters_count_twice_and_others_make_ucs2() {
        assert_eq!(sms_segments(&"€".repeat(80)), 1);
        assert_eq!(sms_segments(&"[".repeat(81)), 2);
        assert_eq!(sms_segments(&format!("{}é", "a".repeat(159))), 1);
        assert_eq!(sms_segments(&"ş".repeat(70)), 1);
        assert_eq!(sms_segments(&"ş".repeat(71)), 2);
        // An emoji is two UTF-16 units.
        assert_eq!(sms_segments(&"😀".repeat(35)), 1);
        assert_eq!(sms_segments(&"😀".repeat(36)), 2);
        assert_eq!(sms_segments(&"😀".repeat(67)), 2);
    }

    #[test]
    fn numbers_addresses_and_urls() {
        assert!(check_phone("+15005550006").is_ok());
        for bad in [
            "15005550006",
            "+0123",
            "+1",
            "+1234567890123456",
            "+1 500",
            "",
        ] {
            assert_eq!(
                check_phone(bad),
                Err(format!("Invalid phone number: {bad}"))
            );
        }
        assert!(check_address("a.b+c@example.co.uk").is_ok());
        for bad in ["a", "a@b", "@b.com", "a@-b.com", "a b@c.com", "a@b..com"] {
            assert!(check_address(bad).is_err(), "{bad}");
        }
        assert!(check_sender("Keel <hello@example.com>").is_ok());
        assert!(check_sender("hello@example.com").is_ok());
        assert!(check_sender("Keel <nope>").is_err());
        assert!(check_twiml_url("https://example.com/twiml.xml").is_ok());
        for bad in ["ftp://x", "https://", "/relative", "https:// x"] {
            assert!(check_twiml_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn statuses_only_move_forward() {
        assert!(statuses_below("delivered").contains(&"sent"));
        assert!(!statuses_below("sent").contains(&"delivered"));
        assert!(!statuses_below("delivered").contains(&"delivered"));
        assert!(statuses_below("complained").contains(&"delivered"));
        assert!(statuses_below("nonsense").is_empty());
    }
}

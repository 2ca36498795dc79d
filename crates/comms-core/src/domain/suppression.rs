//! The suppression list's rules, without I/O: which events suppress, how addresses and numbers
//! are written in it, and Twilio's opt-out and opt-in keywords.

use serde::{Deserialize, Serialize};

use super::{Channel, check_address, check_phone};

/// Why a recipient is suppressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = comms::SuppressionReason)]
pub enum Reason {
    /// Resend reported a permanent (hard) bounce.
    HardBounce,
    /// Resend reported a spam complaint.
    Complaint,
    /// Twilio refused or failed an SMS with error 21610 (the recipient unsubscribed).
    Unsubscribed,
    /// The recipient replied STOP (or another opt-out keyword) to an SMS.
    Stop,
}

impl Reason {
    pub const ALL: [Reason; 4] = [
        Reason::HardBounce,
        Reason::Complaint,
        Reason::Unsubscribed,
        Reason::Stop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::HardBounce => "hard_bounce",
            Reason::Complaint => "complaint",
            Reason::Unsubscribed => "unsubscribed",
            Reason::Stop => "stop",
        }
    }

    pub fn parse(raw: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == raw)
    }
}

/// Twilio's error code for a message to a recipient who unsubscribed (replied STOP).
pub const TWILIO_UNSUBSCRIBED: &str = "21610";

/// The bare address of `Name <a@b.c>` or `a@b.c`, lower-case, when it is a valid address.
pub fn email(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let bare = match raw.strip_suffix('>').and_then(|s| s.rsplit_once('<')) {
        Some((_, inner)) => inner.trim(),
        None => raw,
    };
    let lower = bare.to_lowercase();
    check_address(&lower).ok().map(|()| lower)
}

/// A number in E.164 (`+` and digits), once spaces, dashes, dots and parentheses are dropped.
pub fn phone(raw: &str) -> Option<String> {
    let compact: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    check_phone(&compact).ok().map(|()| compact)
}

/// An address or a number as the list writes it, with the channel it belongs to: an email
/// address has an `@`, anything else must be an E.164 number.
pub fn normalise(raw: &str) -> Option<(Channel, String)> {
    if raw.contains('@') {
        email(raw).map(|a| (Channel::Email, a))
    } else {
        phone(raw).map(|n| (Channel::Sms, n))
    }
}

/// Whether a Resend bounce type is a permanent one (`Permanent`, or `hard` as some senders
/// write it); transient and undetermined bounces do not suppress.
pub fn is_hard_bounce(kind: &str) -> bool {
    let kind = kind.trim();
    kind.eq_ignore_ascii_case("permanent") || kind.eq_ignore_ascii_case("hard")
}

/// What an inbound SMS asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keyword {
    /// Stop sending to this number.
    OptOut,
    /// Send to it again.
    OptIn,
}

/// Twilio's default opt-out keywords.
pub const OPT_OUT_KEYWORDS: [&str; 8] = [
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
pub const OPT_IN_KEYWORDS: [&str; 3] = ["START", "YES", "UNSTOP"];

/// The keyword of an inbound SMS: Twilio's `OptOutType` (`STOP`, `START`, `HELP`; sent with
/// Advanced Opt-Out, custom keywords included) when present, else the body when it is one of the
/// default keywords alone (any case, surrounding spaces and a final `.` or `!` ignored).
pub fn keyword(opt_out_type: Option<&str>, body: &str) -> Option<Keyword> {
    if let Some(kind) = opt_out_type.map(str::trim).filter(|k| !k.is_empty()) {
        return match kind.to_ascii_uppercase().as_str() {
            "STOP" => Some(Keyword::OptOut),
            "START" => Some(Keyword::OptIn),
            _ => None,
        };
    }
    let word = body
        .trim()
        .trim_end_matches(['.', '!'])
        .trim()
        .to_ascii_uppercase();
    if OPT_OUT_KEYWORDS.contains(&word.as_str()) {
        Some(Keyword::OptOut)
    } else if OPT_IN_KEYWORDS.contains(&word.as_str()) {
        Some(Keyword::OptIn)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_numbers_are_written_one_way() {
        assert_eq!(email(" Ada@Example.COM "), Some("ada@example.com".into()));
        assert_eq!(
            email("Ada <ADA@example.com>"),
            Some("ada@example.com".into())
        );
        assert_eq!(email("nope"), None);
        assert_eq!(phone("+1 (500) 555-0010"), Some("+15005550010".into()));
        assert_eq!(phone("15005550010"), None);
        assert_eq!(normalise("A@B.co"), Some((Channel::Email, "a@b.co".into())));
        assert_eq!(
            normalise("+15005550010"),
            Some((Channel::Sms, "+15005550010".into()))
        );
        assert_eq!(normalise("a\0@b.co"), None);
        assert_eq!(normalise(""), None);
    }

    #[test]
    fn keywords_follow_twilio() {
        for out in [
            "STOP",
            "stop",
            " Stop. ",
            "stopall",
            "UNSUBSCRIBE",
            "cancel",
            "End",
            "quit",
        ] {
            assert_eq!(keyword(None, out), Some(Keyword::OptOut), "{out}");
        }
        for back in ["START", "unstop", "Yes!"] {
            assert_eq!(keyword(None, back), Some(Keyword::OptIn), "{back}");
        }
        for other in ["please stop", "stop it", "HELP", "", "STOP STOP"] {
            assert_eq!(keyword(None, other), None, "{other}");
        }
        assert_eq!(keyword(Some("STOP"), "arrête"), Some(Keyword::OptOut));
        assert_eq!(keyword(Some("START"), "STOP"), Some(Keyword::OptIn));
        assert_eq!(keyword(Some("HELP"), "STOP"), None);
        assert!(is_hard_bounce("Permanent") && is_hard_bounce("hard"));
        assert!(!is_hard_bounce("Transient") && !is_hard_bounce("Undetermined"));
    }
}

//! Rules with no I/O: e-mail normalisation and the field limits of registration.

use kernel::FieldError;

pub const PASSWORD_MIN_CHARS: usize = 8;
/// bcrypt reads at most 72 bytes; longer passwords are refused rather than silently truncated.
pub const PASSWORD_MAX_BYTES: usize = 72;
pub const FULL_NAME_MAX_CHARS: usize = 100;

pub const MSG_INVALID_EMAIL: &str = "Invalid email format";
pub const MSG_PASSWORD_SHORT: &str = "Password too short";
pub const MSG_PASSWORD_LONG: &str = "Password too long";
pub const MSG_FULL_NAME: &str = "Full name must be 1 to 100 characters";
pub const MSG_REQUIRED: &str = "Field required";
/// PostgreSQL cannot store a NUL character, so no text field accepts one.
pub const MSG_NUL: &str = "Must not contain NUL characters";

/// A syntactically valid e-mail address: trimmed, with its domain lower-cased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    /// As stored and shown: the local part as given, the domain lower-cased.
    pub address: String,
    /// The whole address lower-cased: the key for uniqueness and look-ups.
    pub key: String,
}

impl Email {
    pub fn parse(raw: &str) -> Option<Email> {
        let raw = raw.trim();
        if raw.len() > 254 {
            return None;
        }
        let (local, domain) = raw.rsplit_once('@')?;
        if !valid_local(local) || !valid_domain(domain) {
            return None;
        }
        let address = format!("{local}@{}", domain.to_lowercase());
        let key = address.to_lowercase();
        Some(Email { address, key })
    }
}

/// The look-up key of an address as typed at login (no validation: unknown is unknown).
pub fn email_key(raw: &str) -> String {
    raw.trim().to_lowercase()
}

fn valid_local(local: &str) -> bool {
    !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && !"@<>()[]\\,;:\"".contains(c))
}

fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.chars().count() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
        && labels
            .last()
            .is_some_and(|tld| tld.chars().count() >= 2 && tld.chars().all(char::is_alphabetic))
}

/// The address a mail is asked for (`password/forgot`, `verify/request`): a NUL or an invalid
/// address is a 422 on `email`, whether or not an account has it.
pub fn parse_requested_email(raw: &str) -> Result<Email, Vec<FieldError>> {
    if raw.contains('\0') {
        return Err(vec![FieldError::new("email", MSG_NUL)]);
    }
    Email::parse(raw).ok_or_else(|| vec![FieldError::new("email", MSG_INVALID_EMAIL)])
}

/// Checks a password against the length rules.
pub fn check_password(password: &str, errors: &mut Vec<FieldError>) {
    if password.contains('\0') {
        errors.push(FieldError::new("password", MSG_NUL));
    } else if password.chars().count() < PASSWORD_MIN_CHARS {
        errors.push(FieldError::new("password", MSG_PASSWORD_SHORT));
    } else if password.len() > PASSWORD_MAX_BYTES {
        errors.push(FieldError::new("password", MSG_PASSWORD_LONG));
    }
}

/// Checks an optional full name: 1 to 100 characters when given (surrounding spaces ignored).
pub fn check_full_name(full_name: Option<&str>, errors: &mut Vec<FieldError>) -> Option<String> {
    let name = full_name?.trim();
    let len = name.chars().count();
    if name.contains('\0') {
        errors.push(FieldError::new("full_name", MSG_NUL));
        None
    } else if len == 0 || len > FULL_NAME_MAX_CHARS {
        errors.push(FieldError::new("full_name", MSG_FULL_NAME));
        None
    } else {
        Some(name.to_owned())
    }
}

/// A validated registration.
#[derive(Debug, Clone)]
pub struct NewAccount {
    pub email: Email,
    pub password: String,
    pub full_name: Option<String>,
    pub is_active: bool,
    pub role: kernel::Role,
}

/// Validates the fields of a registration, listing every failing field at once.
pub fn validate_registration(
    email: Option<&str>,
    password: Option<&str>,
    full_name: Option<&str>,
    is_active: Option<bool>,
) -> Result<NewAccount, Vec<FieldError>> {
    let mut errors = Vec::new();
    let parsed_email = match email {
        None => {
            errors.push(FieldError::new("email", MSG_REQUIRED));
            None
        }
        Some(raw) => {
            let parsed = Email::parse(raw);
            if parsed.is_none() {
                errors.push(FieldError::new("email", MSG_INVALID_EMAIL));
            }
            parsed
        }
    };
    match password {
        None => errors.push(FieldError::new("password", MSG_REQUIRED)),
        Some(p) => check_password(p, &mut errors),
    }
    let full_name = check_full_name(full_name, &mut errors);
    match (parsed_email, password) {
        (Some(email), Some(password)) if errors.is_empty() => Ok(NewAccount {
            email,
            password: password.to_owned(),
            full_name,
            is_active: is_active.unwrap_or(true),
            role: kernel::Role::User,
        }),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_trimmed_and_domains_lowercased() {
        let e = Email::parse("  Ada.Lovelace@Example.COM ");
        assert_eq!(
            e,
            Some(Email {
                address: "Ada.Lovelace@example.com".to_owned(),
                key: "ada.lovelace@example.com".to_owned()
            })
        );
    }

    #[test]
    fn invalid_emails_are_refused() {
        for bad in [
            "",
            "plain",
            "@example.com",
            "a@",
            "a@b",
            "a b@example.com",
            "a@exa mple.com",
            "a@-x.com",
            "a@x.c",
            "a..b@example.com",
            "a@@example.com",
        ] {
            assert!(Email::parse(bad).is_none(), "{bad:?} should be invalid");
        }
        for good in ["a@b.co", "first.last+tag@sub.example.org", "ü@bücher.de"] {
            assert!(Email::parse(good).is_some(), "{good:?} should be valid");
        }
    }

    #[test]
    fn every_failing_field_is_listed() {
        let errors = validate_registration(Some("nope"), Some("short"), Some(""), None)
            .err()
            .unwrap_or_default();
        assert_eq!(
            errors,
            vec![
                FieldError::new("email", MSG_INVALID_EMAIL),
                FieldError::new("password", MSG_PASSWORD_SHORT),
                FieldError::new("full_name", MSG_FULL_NAME),
            ]
        );
    }

    #[test]
    fn passwords_over_72_bytes_are_refused() {
        let mut errors = Vec::new();
        check_password(&"é".repeat(37), &mut errors); // 37 characters, 74 bytes
        assert_eq!(errors, vec![FieldError::new("password", MSG_PASSWORD_LONG)]);
        let mut errors = Vec::new();
        check_password(&"a".repeat(72), &mut errors);
        assert!(errors.is_empty());
    }

    #[test]
    fn requested_addresses_are_checked_like_registered_ones() {
        assert_eq!(
            parse_requested_email(" Ada@Example.com").map(|e| e.key),
            Ok("ada@example.com".to_owned())
        );
        assert_eq!(
            parse_requested_email("a\0@example.com").err(),
            Some(vec![FieldError::new("email", MSG_NUL)])
        );
        assert_eq!(
            parse_requested_email("nope").err(),
            Some(vec![FieldError::new("email", MSG_INVALID_EMAIL)])
        );
    }

    #[test]
    fn missing_fields_are_required() {
        let errors = validate_registration(None, None, None, None)
            .err()
            .unwrap_or_default();
        assert_eq!(
            errors,
            vec![
                FieldError::new("email", MSG_REQUIRED),
                FieldError::new("password", MSG_REQUIRED)
            ]
        );
    }
}

//! The checks of a send's request, in the order a client would fix them (each error names the
//! field and what to change).

use crate::domain;
use crate::error::CommsError;

use super::EmailRequest;

pub(super) fn required(field: &str, value: Option<String>) -> Result<String, CommsError> {
    value
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| CommsError::Invalid(format!("Field required: {field}")))
}

pub(super) fn check_all(
    values: &[String],
    check: fn(&str) -> Result<(), String>,
) -> Result<(), CommsError> {
    values
        .iter()
        .try_for_each(|v| check(v.trim()))
        .map_err(CommsError::Invalid)
}

/// Refuses a NUL character, which no provider delivers and PostgreSQL cannot store.
pub(super) fn check_no_nul(field: &str, value: Option<&str>) -> Result<(), CommsError> {
    match value {
        Some(v) if v.contains('\0') => Err(CommsError::Invalid(format!(
            "Invalid {field}: it contains a NUL character"
        ))),
        _ => Ok(()),
    }
}

/// Checks an email against the contract's rules, in the order a client would fix them.
pub(super) fn check_email(request: &EmailRequest) -> Result<(), CommsError> {
    check_no_nul("subject", request.subject.as_deref())?;
    check_no_nul("text", request.text.as_deref())?;
    check_no_nul("html", request.html.as_deref())?;
    check_no_nul("from_email", request.from_email.as_deref())?;
    if request.to.is_empty() {
        return Err(CommsError::Invalid("Field required: to".into()));
    }
    if request.to.len() > domain::MAX_RECIPIENTS {
        return Err(CommsError::Invalid(format!(
            "Too many recipients: {} (max {})",
            request.to.len(),
            domain::MAX_RECIPIENTS
        )));
    }
    check_all(&request.to, domain::check_address)?;
    check_all(&request.cc, domain::check_address)?;
    check_all(&request.bcc, domain::check_address)?;
    check_all(&request.reply_to, domain::check_address)?;
    let subject = request.subject.as_deref().unwrap_or("");
    if subject.trim().is_empty() {
        return Err(CommsError::Invalid("Field required: subject".into()));
    }
    let length = subject.chars().count();
    if length > domain::MAX_SUBJECT_CHARS {
        return Err(CommsError::Invalid(format!(
            "Subject too long: {length} characters (max {})",
            domain::MAX_SUBJECT_CHARS
        )));
    }
    let has = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.trim().is_empty());
    if !has(&request.text) && !has(&request.html) {
        return Err(CommsError::Invalid(
            "Either text or html content is required".into(),
        ));
    }
    if let Some(from) = &request.from_email {
        domain::check_sender(from).map_err(CommsError::Invalid)?;
    }
    for (name, value) in &request.tags {
        domain::check_tag_part("name", name).map_err(CommsError::Invalid)?;
        if name == domain::REFERENCE_TAG {
            return Err(CommsError::Invalid(format!(
                "Reserved tag name: {name} (keel names each email with it; choose another name)"
            )));
        }
        domain::check_tag_part("value", value).map_err(CommsError::Invalid)?;
    }
    Ok(())
}

pub(super) fn check_body(body: &str) -> Result<(), CommsError> {
    let length = body.chars().count();
    if length > domain::MAX_SMS_CHARS {
        return Err(CommsError::Invalid(format!(
            "Message too long: {length} characters (max {})",
            domain::MAX_SMS_CHARS
        )));
    }
    Ok(())
}

pub(super) fn trimmed(values: Vec<String>) -> Vec<String> {
    values.into_iter().map(|v| v.trim().to_owned()).collect()
}

//! Request validation with garde: derive `garde::Validate` on a request type, give each rule the
//! message the API must show (`#[garde(custom(..))]` for texts of the contract), and turn a failed
//! validation into the `detail` envelope here, one `{field, message}` per failing field.

use actix_web::http::StatusCode;

use crate::{ApiError, FieldError};

/// The failing fields of a garde report, in the order garde found them. Nested fields are named
/// by their path (`to[1]`, `tags[0].name`).
pub fn field_errors(report: &garde::Report) -> Vec<FieldError> {
    report
        .iter()
        .map(|(path, error)| {
            let field = path.to_string();
            let field = if field.is_empty() {
                "body".to_owned()
            } else {
                field
            };
            FieldError::new(field, error.message())
        })
        .collect()
}

/// Validates `value`; on failure an error with `status` whose `detail` joins the messages (`;`)
/// and whose `errors` lists every failing field.
pub fn check<T>(value: &T, status: StatusCode) -> Result<(), ApiError>
where
    T: garde::Validate,
    T::Context: Default,
{
    let Err(report) = value.validate() else {
        return Ok(());
    };
    let errors = field_errors(&report);
    let detail = errors
        .iter()
        .map(|e| e.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Err(ApiError::new(status, detail).field("errors", serde_json::json!(errors)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_blank(value: &str, _: &()) -> garde::Result {
        match value.trim().is_empty() {
            true => Err(garde::Error::new("subject must not be blank")),
            false => Ok(()),
        }
    }

    #[derive(garde::Validate)]
    struct Message {
        #[garde(custom(no_blank))]
        subject: String,
        #[garde(length(chars, max = 3))]
        tags: String,
    }

    #[test]
    fn failures_name_their_fields_with_the_given_messages() {
        let bad = Message {
            subject: " ".into(),
            tags: "abcd".into(),
        };
        let err = check(&bad, StatusCode::BAD_REQUEST).err();
        let err = err.map(|e| (e.status(), e.detail().clone()));
        let (status, detail) = err.unwrap_or((StatusCode::OK, serde_json::Value::Null));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            detail
                .as_str()
                .is_some_and(|d| d.starts_with("subject must not be blank; ")),
            "{detail}"
        );
        let good = Message {
            subject: "Hi".into(),
            tags: "abc".into(),
        };
        assert!(check(&good, StatusCode::BAD_REQUEST).is_ok());
    }
}

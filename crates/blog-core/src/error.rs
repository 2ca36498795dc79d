//! `BlogError` and its one mapping to `ApiError`.

use actix_web::http::StatusCode;
use kernel::{ApiError, DbError, FieldError};
use serde_json::json;

use crate::domain::post::summary;
use crate::domain::upload::UploadError;
use crate::service::ImportResult;

pub const POST_NOT_FOUND: &str = "Post not found";
pub const TAG_NOT_FOUND: &str = "Tag not found";

#[derive(Debug, thiserror::Error)]
pub enum BlogError {
    /// 422 naming every failing field.
    #[error("invalid fields: {}", summary(.0))]
    Invalid(Vec<FieldError>),
    /// 422: `tag_slugs` names a tag that does not exist.
    #[error("Unknown tag: {0}")]
    UnknownTag(String),
    #[error("{POST_NOT_FOUND}")]
    PostNotFound,
    #[error("{TAG_NOT_FOUND}")]
    TagNotFound,
    #[error("Post slug already exists: {0}")]
    PostSlugTaken(String),
    #[error("Tag already exists: {0}")]
    TagTaken(String),
    /// 400: the uploaded file cannot be read as a whole.
    #[error(transparent)]
    Upload(#[from] UploadError),
    /// 413: the upload is over `BLOG_IMPORT_MAX_BYTES`.
    #[error("Upload too large: the limit is {0} bytes (BLOG_IMPORT_MAX_BYTES)")]
    UploadTooLarge(usize),
    /// 422: a request without a file.
    #[error("{0}")]
    MissingFile(String),
    /// 409 under `on_conflict=fail`: nothing of the batch was kept.
    #[error("Post slug already exists: {slug}")]
    ImportConflict {
        slug: String,
        result: Box<ImportResult>,
    },
    /// 409: a publication in the future without a task queue to run it.
    #[error(
        "Scheduled publishing needs the tasks module (add tasks to KEEL_MODULES); publish without `at` to publish now"
    )]
    SchedulingUnavailable,
    /// 409: only a draft can be scheduled.
    #[error("Only a draft can be scheduled: this post is {0}")]
    NotSchedulable(crate::domain::post::PostStatus),
    /// 503: the task queue refused the publication's task (nothing was changed).
    #[error("The task queue cannot take the scheduled publication now: {0}")]
    QueueUnavailable(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("internal: {0}")]
    Internal(String),
}

impl From<diesel::result::Error> for BlogError {
    fn from(e: diesel::result::Error) -> Self {
        BlogError::Db(DbError::Query(e))
    }
}

impl From<std::io::Error> for BlogError {
    fn from(e: std::io::Error) -> Self {
        BlogError::Internal(e.to_string())
    }
}

impl From<BlogError> for ApiError {
    fn from(e: BlogError) -> Self {
        match e {
            BlogError::Invalid(errors) => ApiError::invalid_fields(summary(&errors), errors),
            BlogError::UnknownTag(slug) => {
                let message = format!("Unknown tag: {slug}");
                ApiError::invalid_fields(
                    message.clone(),
                    vec![FieldError::new("tag_slugs", message)],
                )
            }
            BlogError::PostNotFound => ApiError::not_found(POST_NOT_FOUND),
            BlogError::TagNotFound => ApiError::not_found(TAG_NOT_FOUND),
            e @ (BlogError::PostSlugTaken(_) | BlogError::TagTaken(_)) => {
                ApiError::conflict(e.to_string())
            }
            BlogError::Upload(e) => ApiError::bad_request(e.to_string()),
            e @ BlogError::UploadTooLarge(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
            }
            BlogError::MissingFile(message) => {
                ApiError::invalid_fields(message.clone(), vec![FieldError::new("file", message)])
            }
            BlogError::ImportConflict { slug, result } => {
                let mut error = ApiError::conflict(format!("Post slug already exists: {slug}"));
                for (key, value) in [
                    ("created", json!(result.created)),
                    ("updated", json!(result.updated)),
                    ("skipped", json!(result.skipped)),
                    ("failed", json!(result.failed)),
                    ("errors", json!(result.errors)),
                ] {
                    error = error.field(key, value);
                }
                error
            }
            e @ (BlogError::SchedulingUnavailable | BlogError::NotSchedulable(_)) => {
                ApiError::conflict(e.to_string())
            }
            e @ BlogError::QueueUnavailable(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            BlogError::Db(e) => ApiError::from(e),
            BlogError::Internal(e) => ApiError::internal(e),
        }
    }
}

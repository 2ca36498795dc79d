//! Export (a JSON array or a zip of Markdown files, streamed from a temporary file) and import
//! (a multipart upload).

use actix_multipart::{Multipart, MultipartError};
use actix_web::http::header::{
    self, ContentDisposition, DispositionParam, DispositionType, HeaderValue, RETRY_AFTER,
};
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, get, post, web};
use futures_util::StreamExt;
use kernel::{ApiError, FieldError};
use std::sync::Arc;
use tokio::io::AsyncReadExt;

use super::dto::{ExportQuery, ImportQuery, ImportUpload};
use super::posts::parse_status;
use super::{BlogState, Editor};
use crate::domain::export::{ExportFormat, ExportedPost};
use crate::error::BlogError;
use crate::service::{ExportOptions, ImportOptions, ImportResult, OnConflict};

/// Room for the multipart framing around the file when the request's length is checked before
/// reading it.
const MULTIPART_OVERHEAD: u64 = 64 * 1024;
const CHUNK: usize = 64 * 1024;

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(ExportQuery),
    responses(
        (status = 200, description = "An attachment: blog-export.zip (one <slug>.md per post) or blog-export.json",
            content(
                (Vec<ExportedPost> = "application/json"),
                (String = "application/zip"),
            )),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 422, description = "Unknown format or status_filter"),
    )
)]
#[get("/export")]
pub async fn export(
    _editor: Editor,
    state: web::Data<BlogState>,
    query: web::Query<ExportQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let format = match query
        .format
        .as_deref()
        .map(str::trim)
        .filter(|f| !f.is_empty())
    {
        None => ExportFormat::Markdown,
        Some(raw) => ExportFormat::parse(raw).ok_or_else(|| {
            BlogError::Invalid(vec![FieldError::new(
                "format",
                "format must be markdown or json",
            )])
        })?,
    };
    let status = parse_status("status_filter", query.status_filter.as_deref())?;
    let export = state
        .service
        .export(ExportOptions { format, status })
        .await?;
    let disposition = ContentDisposition {
        disposition: DispositionType::Attachment,
        parameters: vec![DispositionParam::Filename(export.file_name().to_owned())],
    };
    let content_type = export.content_type();
    let len = export.len;
    let file = tokio::fs::File::from_std(export.file);
    // Read the temporary file in chunks; it is removed when the stream (and the file) is dropped.
    let body = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_DISPOSITION, disposition))
        .no_chunking(len)
        .streaming(body))
}

fn multipart_error(e: MultipartError) -> ApiError {
    match e {
        MultipartError::ContentTypeMissing
        | MultipartError::ContentTypeParse
        | MultipartError::ContentTypeIncompatible
        | MultipartError::BoundaryMissing => {
            ApiError::unprocessable("Content-Type must be multipart/form-data with one file field")
        }
        other => ApiError::bad_request(format!("Invalid multipart body: {other}")),
    }
}

/// The first file of a multipart body (its name and bytes); 413 past `limit` bytes.
async fn read_upload(
    req: &HttpRequest,
    payload: web::Payload,
    limit: usize,
) -> Result<(String, Vec<u8>), ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64 + MULTIPART_OVERHEAD) {
        return Err(BlogError::UploadTooLarge(limit).into());
    }
    let mut multipart = Multipart::new(req.headers(), payload);
    let mut upload: Option<(String, Vec<u8>)> = None;
    let mut other_bytes = 0usize;
    while let Some(field) = multipart.next().await {
        let mut field = field.map_err(multipart_error)?;
        let file_name = field
            .content_disposition()
            .and_then(|cd| cd.get_filename())
            .map(str::to_owned);
        match (&upload, file_name) {
            (None, Some(name)) => {
                let mut bytes = Vec::new();
                while let Some(chunk) = field.next().await {
                    let chunk = chunk.map_err(multipart_error)?;
                    if bytes.len() + chunk.len() > limit {
                        return Err(BlogError::UploadTooLarge(limit).into());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                upload = Some((name, bytes));
            }
            _ => {
                // Other fields are read and dropped, within the same limit.
                while let Some(chunk) = field.next().await {
                    other_bytes += chunk.map_err(multipart_error)?.len();
                    if other_bytes > limit {
                        return Err(BlogError::UploadTooLarge(limit).into());
                    }
                }
            }
        }
    }
    upload.ok_or_else(|| {
        BlogError::MissingFile("file is required: send one file as multipart/form-data".to_owned())
            .into()
    })
}

/// Seconds a client is asked to wait when every import slot is taken.
const IMPORT_RETRY_AFTER_SECONDS: u32 = 5;

#[utoipa::path(
    tag = "blog",
    security(("bearer" = [])),
    params(ImportQuery),
    request_body(content = ImportUpload, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "What was created, updated, skipped and failed", body = ImportResult),
        (status = 400, description = "Unsupported file type, invalid UTF-8, malformed JSON, a corrupt zip or a zip over a safety limit"),
        (status = 401, description = "Not authenticated"),
        (status = 403, description = "Insufficient permissions"),
        (status = 409, description = "on_conflict=fail met an existing slug: nothing was kept; the body also carries the ImportResult so far"),
        (status = 413, description = "The upload is over BLOG_IMPORT_MAX_BYTES"),
        (status = 422, description = "Unknown on_conflict, or no file"),
        (status = 503, description = "BLOG_IMPORT_CONCURRENCY imports are already running: retry after Retry-After seconds"),
    )
)]
#[post("/import")]
pub async fn import(
    editor: Editor,
    state: web::Data<BlogState>,
    query: web::Query<ImportQuery>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<web::Json<ImportResult>, ApiError> {
    let on_conflict = match query
        .on_conflict
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        None => OnConflict::Skip,
        Some(raw) => OnConflict::parse(raw).ok_or_else(|| {
            BlogError::Invalid(vec![FieldError::new(
                "on_conflict",
                "on_conflict must be skip, overwrite or fail",
            )])
        })?,
    };
    // Taken before the upload is read, held until the import is done: each one holds its upload
    // in memory, so only a few run at once.
    let running = state.imports.clone().try_acquire_owned().map_err(|_| {
        ApiError::service_unavailable("Too many imports in progress: try again shortly")
            .header(RETRY_AFTER, HeaderValue::from(IMPORT_RETRY_AFTER_SECONDS))
    })?;
    let (file_name, bytes) = read_upload(&req, payload, state.import_max_bytes).await?;
    let options = ImportOptions {
        on_conflict,
        author: editor.0,
        progress: None,
        // The slot stays taken until the import itself is done, even if the client leaves.
        slot: Some(Arc::new(running)),
    };
    let result = state
        .service
        .import_bytes(&file_name, bytes, options)
        .await?;
    Ok(web::Json(result))
}

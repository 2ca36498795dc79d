//! Page parameters shared by every paginated list: `page` (1-based, default 1) and `page_size`
//! (default 20, 1..=100). Values outside the range are a 422 naming the parameter.

use serde::Deserialize;

use crate::{ApiError, FieldError};

pub const DEFAULT_PAGE_SIZE: i64 = 20;
pub const MAX_PAGE_SIZE: i64 = 100;

/// The raw query parameters, as sent.
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// 1-based page number (default 1).
    #[param(minimum = 1)]
    pub page: Option<i64>,
    /// Items per page (default 20, at most 100).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<i64>,
}

/// Validated page parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub page: i64,
    pub page_size: i64,
}

impl Page {
    pub fn offset(&self) -> i64 {
        (self.page - 1).saturating_mul(self.page_size)
    }

    pub fn limit(&self) -> i64 {
        self.page_size
    }
}

impl PageParams {
    /// Validates the parameters: `page >= 1`, `1 <= page_size <= 100`.
    pub fn resolve(self) -> Result<Page, ApiError> {
        let page = self.page.unwrap_or(1);
        let page_size = self.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        let mut errors = Vec::new();
        if page < 1 {
            errors.push(FieldError::new("page", "page must be 1 or more"));
        }
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            errors.push(FieldError::new(
                "page_size",
                format!("page_size must be between 1 and {MAX_PAGE_SIZE}"),
            ));
        }
        if errors.is_empty() {
            Ok(Page { page, page_size })
        } else {
            let detail = errors
                .iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            Err(ApiError::invalid_fields(detail, errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(page: Option<i64>, page_size: Option<i64>) -> PageParams {
        PageParams { page, page_size }
    }

    #[test]
    fn defaults_and_offsets() {
        let p = params(None, None).resolve().ok();
        assert_eq!(
            p,
            Some(Page {
                page: 1,
                page_size: 20
            })
        );
        let p = params(Some(3), Some(100))
            .resolve()
            .map(|p| p.offset())
            .ok();
        assert_eq!(p, Some(200));
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        assert!(params(Some(0), None).resolve().is_err());
        assert!(params(None, Some(0)).resolve().is_err());
        assert!(params(None, Some(101)).resolve().is_err());
    }
}

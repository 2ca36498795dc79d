//! What each module reports to `GET /health`.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Healthy,
    Degraded,
    Unhealthy,
}

/// One module's health: a status and a short human-readable detail.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ModuleHealth {
    pub status: HealthStatus,
    pub detail: String,
}

impl ModuleHealth {
    pub fn healthy(detail: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::Healthy,
            detail: detail.into(),
        }
    }

    pub fn unhealthy(detail: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::Unhealthy,
            detail: detail.into(),
        }
    }
}

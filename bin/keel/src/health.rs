//! `GET /health` (every enabled module), `/health/live` and `/health/ready`.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, get, web};
use kernel::health::{HealthStatus, ModuleHealth};
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthResponse {
    pub status: HealthStatus,
    pub version: String,
    pub modules: BTreeMap<String, ModuleHealth>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProbeResponse {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Healthy when every module is, unhealthy when none is, degraded in between.
pub fn overall(modules: &BTreeMap<String, ModuleHealth>) -> HealthStatus {
    let healthy = modules
        .values()
        .filter(|m| m.status == HealthStatus::Healthy)
        .count();
    let unhealthy = modules
        .values()
        .filter(|m| m.status == HealthStatus::Unhealthy)
        .count();
    if unhealthy == 0 && healthy == modules.len() {
        HealthStatus::Healthy
    } else if healthy == 0 && !modules.is_empty() {
        HealthStatus::Unhealthy
    } else {
        HealthStatus::Degraded
    }
}

#[utoipa::path(
    tag = "health",
    responses(
        (status = 200, description = "Healthy or degraded", body = HealthResponse),
        (status = 503, description = "Unhealthy", body = HealthResponse),
    )
)]
#[get("/health")]
pub async fn health(state: web::Data<AppState>) -> HttpResponse {
    let mut modules = BTreeMap::new();
    modules.insert("database".to_owned(), database_health(&state).await);
    #[cfg(feature = "auth")]
    if let Some(auth) = &state.auth {
        modules.insert("auth".to_owned(), auth.health().await);
    }
    #[cfg(feature = "blog")]
    if let Some(blog) = &state.blog {
        modules.insert("blog".to_owned(), blog.health().await);
    }
    #[cfg(feature = "tasks")]
    if let Some(tasks) = &state.tasks {
        modules.insert("tasks".to_owned(), tasks.health().await);
    }
    let status = overall(&modules);
    let body = HealthResponse {
        status,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        modules,
    };
    match status {
        HealthStatus::Unhealthy => HttpResponse::ServiceUnavailable().json(body),
        _ => HttpResponse::Ok().json(body),
    }
}

async fn database_health(state: &AppState) -> ModuleHealth {
    match state.pool.ping().await {
        Ok(()) => ModuleHealth::healthy(format!("{} reachable", state.pool.backend().name())),
        Err(e) => {
            ModuleHealth::unhealthy(format!("{} unreachable: {e}", state.pool.backend().name()))
        }
    }
}

#[utoipa::path(tag = "health", responses((status = 200, body = ProbeResponse)))]
#[get("/health/live")]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(ProbeResponse {
        status: "alive".to_owned(),
        detail: None,
    })
}

#[utoipa::path(
    tag = "health",
    responses(
        (status = 200, description = "The database (and Redis, when the task queue uses it) answers", body = ProbeResponse),
        (status = 503, description = "A dependency does not answer", body = ProbeResponse),
    )
)]
#[get("/health/ready")]
pub async fn ready(state: web::Data<AppState>) -> HttpResponse {
    let mut problems = Vec::new();
    if let Err(e) = state.pool.ping().await {
        problems.push(format!("database unreachable: {e}"));
    }
    #[cfg(feature = "tasks")]
    if let Some(tasks) = &state.tasks {
        let queue = tasks.health().await;
        if queue.status == HealthStatus::Unhealthy {
            problems.push(format!("task queue unreachable: {}", queue.detail));
        }
    }
    if problems.is_empty() {
        HttpResponse::Ok().json(ProbeResponse {
            status: "ready".to_owned(),
            detail: None,
        })
    } else {
        HttpResponse::ServiceUnavailable().json(ProbeResponse {
            status: "not ready".to_owned(),
            detail: Some(problems.join("; ")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(statuses: &[HealthStatus]) -> BTreeMap<String, ModuleHealth> {
        statuses
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let h = ModuleHealth {
                    status: *s,
                    detail: String::new(),
                };
                (i.to_string(), h)
            })
            .collect()
    }

    #[test]
    fn overall_status_aggregates_modules() {
        use HealthStatus::*;
        assert_eq!(overall(&modules(&[Healthy, Healthy])), Healthy);
        assert_eq!(overall(&modules(&[Healthy, Unhealthy])), Degraded);
        assert_eq!(overall(&modules(&[Unhealthy, Unhealthy])), Unhealthy);
    }
}

//! `GET /health` (every enabled module), `/health/live` and `/health/ready`.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, get, web};
use kernel::health::{HealthStatus, ModuleHealth};
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::Composed;

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
pub async fn health(state: web::Data<Composed>) -> HttpResponse {
    // Each check on a task of its own: a caller that leaves does not cut a query short.
    let checks = state.modules.iter().map(|m| {
        let module = m.clone();
        let name = m.name().to_owned();
        async move {
            let health = kernel::db::spawn_unit(async move { module.health().await })
                .await
                .unwrap_or_else(|e| ModuleHealth::unhealthy(format!("health check failed: {e}")));
            (name, health)
        }
    });
    let mut modules: BTreeMap<String, ModuleHealth> = futures_util::future::join_all(checks)
        .await
        .into_iter()
        .collect();
    modules.insert("database".to_owned(), database_health(&state).await);
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

async fn database_health(state: &Composed) -> ModuleHealth {
    match ping(&state.pool).await {
        Ok(()) => ModuleHealth::healthy(format!("{} reachable", state.pool.backend().name())),
        Err(e) => {
            ModuleHealth::unhealthy(format!("{} unreachable: {e}", state.pool.backend().name()))
        }
    }
}

/// `SELECT 1` on a task of its own (a unit of work: see `kernel::db::spawn_unit`).
async fn ping(pool: &kernel::DbPool) -> Result<(), String> {
    let pool = pool.clone();
    match kernel::db::spawn_unit(async move { pool.ping().await }).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
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
pub async fn ready(state: web::Data<Composed>) -> HttpResponse {
    let mut problems = Vec::new();
    if let Err(e) = ping(&state.pool).await {
        problems.push(format!("database unreachable: {e}"));
    }
    let checks = state.modules.iter().map(|m| {
        let module = m.clone();
        async move {
            kernel::db::spawn_unit(async move { module.ready().await })
                .await
                .unwrap_or_else(|e| Err(format!("readiness check failed: {e}")))
        }
    });
    for result in futures_util::future::join_all(checks).await {
        if let Err(why) = result {
            problems.push(why);
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

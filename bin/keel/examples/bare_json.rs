//! The baseline of the benchmarks: a bare actix-web JSON handler with nothing else in the way.
//! `cargo run --release -p keel --example bare_json -- 127.0.0.1:8099`, then `GET /`.

use actix_web::{App, HttpServer, get, web};

#[get("/")]
async fn index() -> web::Json<serde_json::Value> {
    web::Json(serde_json::json!({"id": 1, "email": "bench@example.com", "is_active": true}))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8099".to_owned());
    HttpServer::new(|| App::new().service(index))
        .bind(addr)?
        .run()
        .await
}

//! The baseline of the benchmarks: a bare actix-web handler with nothing else in the way.
//! `cargo run --release -p keel --example bare_json -- 127.0.0.1:8099 [FILE]`, then any request
//! (`GET /`, or the method and path of the endpoint it stands in for, such as a `POST`): 200 with
//! a small JSON object, or the bytes of FILE (a response body of Keel's, captured) from memory, so
//! that an endpoint can be compared with the same body served with no work at all, by the same
//! load tool sending the same requests.

use actix_web::http::header::ContentType;
use actix_web::{App, HttpResponse, HttpServer, web};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8099".to_owned());
    let body = match args.next() {
        Some(file) => web::Bytes::from(std::fs::read(file)?),
        None => {
            web::Bytes::from_static(br#"{"id":1,"email":"bench@example.com","is_active":true}"#)
        }
    };
    HttpServer::new(move || {
        let body = body.clone();
        // The request's own body is read (and dropped): actix closes a connection whose request
        // body was left unread, which would cost every POST a new connection.
        App::new().default_service(web::to(move |_request_body: web::Bytes| {
            let body = body.clone();
            async move {
                HttpResponse::Ok()
                    .insert_header(ContentType::json())
                    .body(body)
            }
        }))
    })
    .bind(addr)?
    .run()
    .await
}

//! The client's connection, watched for its close.
//!
//! actix-web keeps polling a handler whose client has gone away until the handler answers (it
//! notices a closed connection only when it writes). A handler that holds a request open on
//! purpose (a result that waits for its job) asks [`PeerConnection::closed`] instead, and stops
//! waiting when the client closes its side. The server records the connection when it accepts
//! it ([`record`], in an `on_connect` hook): a duplicate of the socket's descriptor, which costs
//! one system call and one file descriptor per connection, and nothing per request. `keel serve`
//! records connections only when a mounted module asks for it
//! ([`crate::module::Module::watches_clients`]).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use actix_web::HttpRequest;
use actix_web::dev::Extensions;

/// The connection a request came on (a duplicate of its socket's descriptor).
#[derive(Clone)]
pub struct PeerConnection(Arc<OwnedFd>);

/// Records the accepted connection `stream` in its connection data (for
/// [`PeerConnection::of`]). Call it from the server's `on_connect` hook.
pub fn record(stream: &impl AsFd, extensions: &mut Extensions) {
    if let Ok(fd) = stream.as_fd().try_clone_to_owned() {
        extensions.insert(PeerConnection(Arc::new(fd)));
    }
}

/// [`record`] for `HttpServer::on_connect`, whose connection comes as `&dyn Any`: a TCP stream
/// is recorded, anything else is not.
pub fn record_any(connection: &dyn std::any::Any, extensions: &mut Extensions) {
    if let Some(stream) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        record(stream, extensions);
    }
}

impl PeerConnection {
    /// The connection of `req`, when the server recorded it.
    pub fn of(req: &HttpRequest) -> Option<PeerConnection> {
        req.conn_data::<PeerConnection>().cloned()
    }

    /// Resolves when the client has closed its side of the connection, or the connection broke.
    /// Never resolves while that cannot be told: the client already sent more (a pipelined
    /// request), or the descriptor cannot be watched.
    pub async fn closed(&self) {
        match self.watch().await {
            Some(()) => {}
            None => std::future::pending().await,
        }
    }

    async fn watch(&self) -> Option<()> {
        let socket = std::net::TcpStream::from(self.0.try_clone().ok()?);
        // Shared with the server's descriptor, which is non-blocking already.
        socket.set_nonblocking(true).ok()?;
        let socket = tokio::net::TcpStream::from_std(socket).ok()?;
        let mut byte = [0u8; 1];
        match socket.peek(&mut byte).await {
            // End of stream: the client closed its side.
            Ok(0) | Err(_) => Some(()),
            Ok(_) => None,
        }
    }
}

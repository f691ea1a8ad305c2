//! The one HTTP/1 accept loop of the local servers (the fault proxy and the benchmark's
//! Lambda Runtime API; the dev server can use it too): accept on a loopback listener, serve each
//! connection on its own task with a handler that also gets the peer's address.
//!
//! Plain hyper rather than axum on purpose: a handler that returns `Err` makes hyper close the
//! connection without an answer, which is how the fault proxy drops connections.

use std::future::Future;
use std::net::SocketAddr;

use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves `handler` on `listener` until `shutdown` completes. A failed accept (the peer went
/// away first) skips that connection; a handler's `Err` closes its connection unanswered.
pub async fn serve<H, Fut, B, E>(
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, E>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(_) => continue,
            },
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handler(req, peer));
            // A connection ends with an error when the client or the handler drops it; there
            // is nobody to tell.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A listener on a free loopback port, and its address.
pub async fn bind_loopback() -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

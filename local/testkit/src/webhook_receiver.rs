//! A webhook receiver on a loopback port, for the tests and `make dev`: it records every
//! delivery (headers and body) and answers from a script (statuses in turn, then 200), echoing
//! the request's body in a 2xx answer when asked to (which is how an endpoint confirms itself
//! by answering its `webhook.confirm` delivery with the token).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Response;
use tokio::sync::oneshot;

use crate::http_server::{bind_loopback, serve};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    /// Its path.
    pub path: String,
    /// Its headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: String,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Script {
    statuses: VecDeque<u16>,
    echo: bool,
    received: Vec<Received>,
    /// The `Location` of every 3xx answer, when set.
    location: Option<String>,
}

/// The running receiver; stops when dropped.
pub struct WebhookReceiver {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    _stop: oneshot::Sender<()>,
}

impl WebhookReceiver {
    /// Starts a receiver that answers `statuses` in turn (then 200), echoing the body of a
    /// 2xx answer when `echo`.
    pub async fn start(statuses: &[u16], echo: bool) -> std::io::Result<Self> {
        let (listener, addr) = bind_loopback().await?;
        let script = Arc::new(Mutex::new(Script {
            statuses: statuses.iter().copied().collect(),
            echo,
            received: Vec::new(),
            location: None,
        }));
        let (stop, stopped) = oneshot::channel::<()>();
        let shared = script.clone();
        tokio::spawn(serve(
            listener,
            move |req: hyper::Request<hyper::body::Incoming>, _peer| {
                let script = shared.clone();
                async move {
                    let path = req.uri().path().to_string();
                    let headers = req
                        .headers()
                        .iter()
                        .map(|(n, v)| {
                            (
                                n.as_str().to_string(),
                                v.to_str().unwrap_or_default().to_string(),
                            )
                        })
                        .collect();
                    let body = req.into_body().collect().await?.to_bytes();
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let (status, answer, location) = {
                        let mut script = script.lock().expect("receiver lock");
                        let status = script.statuses.pop_front().unwrap_or(200);
                        let answer = if script.echo && (200..300).contains(&status) {
                            body.clone()
                        } else {
                            String::new()
                        };
                        script.received.push(Received {
                            path,
                            headers,
                            body,
                            at: std::time::Instant::now(),
                        });
                        let location = script
                            .location
                            .clone()
                            .filter(|_| (300..400).contains(&status));
                        (status, answer, location)
                    };
                    let mut response = Response::builder().status(status);
                    if let Some(location) = location {
                        response = response.header(hyper::header::LOCATION, location);
                    }
                    Ok::<_, hyper::Error>(
                        response
                            .body(Full::new(Bytes::from(answer)))
                            .expect("a response"),
                    )
                }
            },
            async move {
                let _ = stopped.await;
            },
        ));
        Ok(Self {
            addr,
            script,
            _stop: stop,
        })
    }

    /// From now on, every 3xx answer redirects to `location`.
    pub fn redirect_to(&self, location: &str) {
        if let Ok(mut script) = self.script.lock() {
            script.location = Some(location.to_string());
        }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL (plain http: the local mode) at `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Its `host:port`, for `WEBHOOK_ALLOWED_LOCAL_TARGETS`.
    pub fn target(&self) -> String {
        self.addr.to_string()
    }

    /// Everything it received so far.
    pub fn received(&self) -> Vec<Received> {
        self.script.lock().expect("receiver lock").received.clone()
    }
}

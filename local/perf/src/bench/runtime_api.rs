//! A local Lambda Runtime API (version 2018-06-01): the HTTP interface a `provided.al2023`
//! bootstrap polls for its next event and posts its answer to. Running a release bootstrap
//! under it is the Docker-free stand-in for `sam local invoke`: the same binary, the same
//! protocol, the same environment variables as on AWS.
//!
//! Endpoints served: `GET /runtime/invocation/next`, `POST /runtime/invocation/{id}/response`,
//! `POST /runtime/invocation/{id}/error` and `POST /runtime/init/error`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use fleet_testkit::http_server;
use fleet_testkit::outcome::Outcome;
use tokio::sync::{mpsc, oneshot};

const PREFIX: &str = "/2018-06-01/runtime";

/// Why an invocation got no outcome.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeApiError {
    /// Nothing answered in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The bootstrap reported an initialization error (and exits).
    #[error("init error: {0}")]
    InitError(String),
    /// The API server is gone.
    #[error("the runtime API stopped")]
    Stopped,
    /// Binding the listener failed.
    #[error("cannot listen on loopback: {0}")]
    Bind(#[from] std::io::Error),
}

struct Pending {
    request_id: String,
    event: Bytes,
    deadline: SystemTime,
}

struct State {
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Pending>>,
    answers: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    init_error: Mutex<Option<String>>,
    function_arn: String,
    /// Run once, when the bootstrap first asks for an event (see [`RuntimeApi::before_first_event`]).
    first_poll: Mutex<Option<FirstPollHook>>,
}

type FirstPollHook = Box<dyn FnOnce() + Send>;

/// One runtime API on a free loopback port, serving one function's invocations in order.
pub struct RuntimeApi {
    addr: SocketAddr,
    state: Arc<State>,
    sender: mpsc::UnboundedSender<Pending>,
    next_id: AtomicU64,
    server: tokio::task::JoinHandle<()>,
}

impl RuntimeApi {
    /// Starts serving on `127.0.0.1:0` for the function `function_name`.
    pub async fn start(function_name: &str) -> Result<Self, RuntimeApiError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            queue: tokio::sync::Mutex::new(receiver),
            answers: Mutex::new(HashMap::new()),
            init_error: Mutex::new(None),
            function_arn: format!("arn:aws:lambda:us-east-1:000000000000:function:{function_name}"),
            first_poll: Mutex::new(None),
        });
        let served = state.clone();
        let (listener, addr) = http_server::bind_loopback().await?;
        let server = tokio::spawn(http_server::serve(
            listener,
            move |req, _| route(served.clone(), req),
            std::future::pending(),
        ));
        Ok(Self {
            addr,
            state,
            sender,
            next_id: AtomicU64::new(1),
            server,
        })
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API` for the bootstrap (`127.0.0.1:PORT`).
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Queues `event` and waits up to `timeout` for the bootstrap's answer. The bootstrap
    /// sees `timeout` as the invocation's deadline.
    pub async fn invoke(
        &self,
        event: &[u8],
        timeout: Duration,
    ) -> Result<Outcome, RuntimeApiError> {
        let request_id = format!(
            "00000000-0000-4000-8000-{:012x}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        self.state
            .answers
            .lock()
            .expect("answers lock")
            .insert(request_id.clone(), tx);
        self.sender
            .send(Pending {
                request_id: request_id.clone(),
                event: Bytes::copy_from_slice(event),
                deadline: SystemTime::now() + timeout,
            })
            .map_err(|_| RuntimeApiError::Stopped)?;
        let answer = tokio::time::timeout(timeout, rx).await;
        self.state
            .answers
            .lock()
            .expect("answers lock")
            .remove(&request_id);
        match answer {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(_)) => Err(self
                .init_error()
                .map_or(RuntimeApiError::Stopped, RuntimeApiError::InitError)),
            Err(_) => Err(self.init_error().map_or(
                RuntimeApiError::Timeout(timeout),
                RuntimeApiError::InitError,
            )),
        }
    }

    /// Runs `hook` when the bootstrap first polls `/next`: there Lambda's Init phase ends and
    /// the first invocation begins. The poll is answered only after `hook` returned, so the
    /// invocation already runs under whatever it set (a CPU quota, in the benchmarks).
    pub fn before_first_event(&self, hook: impl FnOnce() + Send + 'static) {
        *self.state.first_poll.lock().expect("hook lock") = Some(Box::new(hook));
    }

    /// The initialization error the bootstrap reported, if any.
    pub fn init_error(&self) -> Option<String> {
        self.state.init_error.lock().expect("init lock").clone()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

type Answer = Response<Full<Bytes>>;

fn answer(status: StatusCode, body: &str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response
}

async fn route(state: Arc<State>, req: Request<Incoming>) -> Result<Answer, Infallible> {
    let path = req.uri().path().to_string();
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return Ok(answer(
            StatusCode::NOT_FOUND,
            r#"{"errorMessage":"unknown path"}"#,
        ));
    };
    let method = req.method().clone();
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Ok(answer(
                StatusCode::BAD_REQUEST,
                r#"{"errorMessage":"unreadable body"}"#,
            ))
        }
    };
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    Ok(match (method, segments.as_slice()) {
        (Method::GET, ["invocation", "next"]) => next_invocation(&state).await,
        (Method::POST, ["invocation", id, "response"]) => {
            let value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            deliver(&state, id, Outcome::Response(value))
        }
        (Method::POST, ["invocation", id, "error"]) => {
            let (error_type, message) = error_fields(&body);
            deliver(
                &state,
                id,
                Outcome::Error {
                    error_type,
                    message,
                },
            )
        }
        (Method::POST, ["init", "error"]) => {
            let (error_type, message) = error_fields(&body);
            *state.init_error.lock().expect("init lock") = Some(format!("{error_type}: {message}"));
            // The bootstrap exits after this; nobody will answer what is waiting.
            state.answers.lock().expect("answers lock").clear();
            answer(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
        }
        _ => answer(StatusCode::NOT_FOUND, r#"{"errorMessage":"unknown path"}"#),
    })
}

async fn next_invocation(state: &State) -> Answer {
    let hook = state.first_poll.lock().expect("hook lock").take();
    if let Some(hook) = hook {
        hook();
    }
    let pending = state.queue.lock().await.recv().await;
    let Some(pending) = pending else {
        return answer(
            StatusCode::GONE,
            r#"{"errorMessage":"runtime API stopped"}"#,
        );
    };
    let deadline_ms = pending
        .deadline
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut response = Response::new(Full::new(pending.event));
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    };
    set("lambda-runtime-aws-request-id", pending.request_id.clone());
    set("lambda-runtime-deadline-ms", deadline_ms.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        state.function_arn.clone(),
    );
    set("lambda-runtime-trace-id", trace_header(&pending.request_id));
    set("content-type", "application/json".to_string());
    response
}

/// The `Lambda-Runtime-Trace-Id` of an invocation: sampled (a bootstrap given an
/// `AWS_XRAY_DAEMON_ADDRESS` sends its subsegments there), with a root and a parent (Lambda's
/// function segment) derived from the request id, so a test can tell which trace is whose.
pub fn trace_header(request_id: &str) -> String {
    let hex = request_id.replace('-', "");
    format!(
        "Root=1-00000000-{};Parent={};Sampled=1",
        &hex[hex.len() - 24..],
        &hex[hex.len() - 16..]
    )
}

fn deliver(state: &State, request_id: &str, outcome: Outcome) -> Answer {
    match state
        .answers
        .lock()
        .expect("answers lock")
        .remove(request_id)
    {
        Some(waiter) => {
            let _ = waiter.send(outcome);
            answer(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
        }
        // Lambda answers 400 for an unknown or already-answered request id.
        None => answer(
            StatusCode::BAD_REQUEST,
            r#"{"errorMessage":"unknown request id"}"#,
        ),
    }
}

fn error_fields(body: &[u8]) -> (String, String) {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("errorType"), field("errorMessage"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal runtime client, speaking the protocol the way lambda_runtime does.
    async fn poll_and_answer(api: String, reply: &'static str, path_suffix: &'static str) {
        let client = reqwest::Client::new();
        let next = client
            .get(format!("http://{api}{PREFIX}/invocation/next"))
            .send()
            .await
            .unwrap();
        let id = next.headers()["lambda-runtime-aws-request-id"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(next.headers().contains_key("lambda-runtime-deadline-ms"));
        let event: Value = next.json().await.unwrap();
        assert_eq!(event["hello"], "world");
        let status = client
            .post(format!(
                "http://{api}{PREFIX}/invocation/{id}/{path_suffix}"
            ))
            .body(reply)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 202);
    }

    #[tokio::test]
    async fn delivers_an_event_and_returns_the_posted_response() {
        let api = RuntimeApi::start("f").await.unwrap();
        let client = tokio::spawn(poll_and_answer(
            api.address(),
            r#"{"statusCode":201}"#,
            "response",
        ));
        let outcome = api
            .invoke(br#"{"hello":"world"}"#, Duration::from_secs(5))
            .await
            .unwrap();
        client.await.unwrap();
        assert_eq!(outcome.status(), 201);
    }

    #[tokio::test]
    async fn a_posted_error_is_a_502_outcome() {
        let api = RuntimeApi::start("f").await.unwrap();
        let client = tokio::spawn(poll_and_answer(
            api.address(),
            r#"{"errorType":"Boom","errorMessage":"it broke"}"#,
            "error",
        ));
        let outcome = api
            .invoke(br#"{"hello":"world"}"#, Duration::from_secs(5))
            .await
            .unwrap();
        client.await.unwrap();
        assert_eq!(
            outcome,
            Outcome::Error {
                error_type: "Boom".into(),
                message: "it broke".into()
            }
        );
        assert_eq!(outcome.status(), 502);
    }

    #[tokio::test]
    async fn no_answer_is_a_timeout() {
        let api = RuntimeApi::start("f").await.unwrap();
        let err = api
            .invoke(b"{}", Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(err, RuntimeApiError::Timeout(_)), "{err}");
    }
}

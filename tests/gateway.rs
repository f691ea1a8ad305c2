//! Every route of template.yaml wired to its function's handler (as the dev server wires
//! them), for the hostile-input suites: send a request to any route key and check the answer
//! against `docs/openapi.yaml`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use fleet_testkit::functions::{handler_for, handler_of, Handler};
use shared::FleetTable;

use crate::api_doc::api_doc;
use crate::{answer, metered, template, Answer, ApiRequest};

/// The template's routes, each with its handler on one table, and a tally of what was sent.
pub struct Gateway {
    handlers: BTreeMap<String, Handler>,
    sent: AtomicUsize,
    statuses: Mutex<BTreeMap<u16, usize>>,
}

impl Gateway {
    /// Every HttpApi route of template.yaml, served on `table`.
    pub fn new(table: &FleetTable) -> Self {
        let handlers = template()
            .routes
            .iter()
            .map(|r| {
                let handler = handler_for(&r.code_uri, table)
                    .unwrap_or_else(|| panic!("{} has no handler", r.function));
                (r.route_key(), handler)
            })
            .collect();
        Self {
            handlers,
            sent: AtomicUsize::new(0),
            statuses: Mutex::new(BTreeMap::new()),
        }
    }

    /// Every HttpApi route of template.yaml on `table`, the functions named in `routers` (by
    /// `CodeUri`) served by the Router given there instead of one built from the environment:
    /// the firmware and webhooks functions on a test's own moto bucket and queue.
    pub fn with_routers(table: &FleetTable, routers: BTreeMap<&str, axum::Router>) -> Self {
        let handlers: BTreeMap<&str, Handler> = routers
            .into_iter()
            .map(|(code_uri, router)| (code_uri, handler_of(router)))
            .collect();
        let handlers = template()
            .routes
            .iter()
            .map(|r| {
                let handler = match handlers.get(r.code_uri.as_str()) {
                    Some(handler) => handler.clone(),
                    None => handler_for(&r.code_uri, table)
                        .unwrap_or_else(|| panic!("{} has no handler", r.function)),
                };
                (r.route_key(), handler)
            })
            .collect();
        Self {
            handlers,
            sent: AtomicUsize::new(0),
            statuses: Mutex::new(BTreeMap::new()),
        }
    }

    /// The route keys served.
    pub fn route_keys(&self) -> Vec<String> {
        self.handlers.keys().cloned().collect()
    }

    /// Sends `request` to `route_key`'s handler and counts it.
    pub async fn send(&self, route_key: &str, request: ApiRequest) -> Answer {
        let handler = &self.handlers[route_key];
        let (response, used) = metered(handler(request.build())).await;
        let answer = answer(response, used);
        self.sent.fetch_add(1, Ordering::Relaxed);
        *self
            .statuses
            .lock()
            .expect("tally")
            .entry(answer.status)
            .or_default() += 1;
        answer
    }

    /// Requests sent so far.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }

    /// Answers so far by status.
    pub fn statuses(&self) -> BTreeMap<u16, usize> {
        self.statuses.lock().expect("tally").clone()
    }
}

/// The checks every answer to a hostile request must pass: no 5xx, a status documented for the
/// route, and a body that is what docs/openapi.yaml says that status carries (for every 4xx,
/// the error contract `{"error":{"code","message","field"?}}`).
pub fn check_answer(route_key: &str, answer: &Answer) -> Result<(), String> {
    if answer.status >= 500 {
        return Err(format!("{route_key}: {} {}", answer.status, answer.body));
    }
    if (400..500).contains(&answer.status) && !answer.body["error"]["code"].is_string() {
        return Err(format!(
            "{route_key}: {} without the error contract: {}",
            answer.status, answer.body
        ));
    }
    api_doc().check_response(route_key, answer.status, &answer.body)
}

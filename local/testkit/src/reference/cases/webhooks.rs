//! The cases of webhooks (issue 41): an owner's endpoints (AP-W1 to AP-W8), an endpoint's
//! delivery log and redelivery (AP-W9, AP-W10), the delivery worker's attempt (AP-W11) and an
//! alarm stream batch fanned out to endpoints (AP-W12), on fixtures of their own owners (no
//! other case reads them). Deliveries go to a real SQS queue of moto's server
//! (`webhook_queue::queue_for_table`): the one the environment names, or a server this process
//! starts.

use std::collections::HashMap;

use serde_json::json;
use shared::model::alarm::severity::Severity;
use shared::model::entities::webhook::WebhookItem;
use shared::model::entities::webhook_delivery::{DeliveryState, WebhookDeliveryItem};
use shared::model::entities::Entity;
use shared::model::ids::{DeviceId, UserId};
use shared::model::pattern_id::PatternId;
use shared::model::timestamp::Timestamp;
use shared::model::webhook::target::TargetPolicy;
use shared::model::webhook::{time_prefix, DeliveryId, WebhookEvent, WebhookId, MAX_RATE_LIMIT};
use shared::ops::alarms::notify::{AlarmRecord, StreamRecord};
use shared::ops::pattern::BudgetScale;
use shared::ops::webhooks::deliveries::{
    new_delivery, prepare_attempt, record_attempt, AttemptOutcome, Plan, RetrySchedule,
};
use shared::ops::webhooks::endpoints::{self, WebhookChanges};
use shared::ops::webhooks::{alarm_notices, delivery_log, DeliveryMessage};
use shared::{FleetError, FleetTable};

use super::common::{
    active_alarm, found, now, one, put_fixtures, route, PatternCase, RouteCall, FIXTURE_CALLS,
};
use crate::api_event::ApiEvent;
use crate::moto_server::endpoint_or_process_server;
use crate::webhook_queue::{create_queue, queue_for_table, register_queue, sqs_client};

/// Template logical id of the function the calls go to.
const WEBHOOKS: &str = "WebhooksFunction";
/// The owner of the fixture endpoint every read, change and delivery case works on.
pub(super) const WEBHOOK_OWNER: &str = "ref-webhooker";
/// Its id.
const ENDPOINT: &str = "wh_reference-endpoint";
/// Its confirmation token.
const TOKEN: &str = "whconf_reference-token";
/// The URL of every fixture endpoint and of the created ones (never sent to: the cases
/// record an attempt's answer, they make none).
const URL: &str = "https://hooks.example.com/device-fleet";
/// Each call of AP-W5 deletes the one endpoint of such an owner (`-{i}`; the run's: `-run`).
const DELETED_OWNER: &str = "ref-webhook-deleted";
/// Each call of AP-W1 is a new owner's first endpoint (`-{i}`; the run's: `-run`).
const NEW_OWNER: &str = "ref-webhook-new";

fn owner() -> Result<UserId, FleetError> {
    Ok(UserId::parse(WEBHOOK_OWNER)?)
}

fn endpoint_id() -> Result<WebhookId, FleetError> {
    Ok(WebhookId::parse(ENDPOINT)?)
}

/// The `n`-th delivered delivery of the fixture endpoint, which a redelivery takes (`run`:
/// the run's own).
fn delivered(n: &str) -> String {
    format!("msg_{}redeliver-{n}", time_prefix(now()))
}

/// The fixture endpoint's one pending delivery, which AP-W11's run attempts.
fn pending() -> String {
    format!("msg_{}attempt", time_prefix(now()))
}

/// The SQS endpoint the reference deliveries go to: `AWS_ENDPOINT_URL_SQS`, or the moto server
/// of this process.
fn sqs_endpoint() -> Result<String, FleetError> {
    endpoint_or_process_server("AWS_ENDPOINT_URL_SQS")
        .map_err(|e| FleetError::internal(format!("moto's server for the webhook cases: {e}")))
}

/// An endpoint of `owner` with `id`, confirmed and enabled, as the fixtures are written.
fn endpoint_item(owner: UserId, id: WebhookId) -> Result<WebhookItem, FleetError> {
    Ok(WebhookItem {
        confirmed: true,
        confirmation_token: TOKEN.into(),
        rate_limit: MAX_RATE_LIMIT,
        ..WebhookItem::new(
            owner,
            id,
            URL.into(),
            vec![WebhookEvent::AlarmRaised],
            now(),
        )?
    })
}

/// A delivery of the fixture endpoint with `id`, in `state`: a `webhook.test` as the service
/// makes one, then moved to `state`.
fn delivery_item(id: &str, state: DeliveryState) -> Result<WebhookDeliveryItem, FleetError> {
    let endpoint = endpoint_item(owner()?, endpoint_id()?)?;
    let made = new_delivery(
        &endpoint,
        WebhookEvent::WebhookTest,
        json!({}),
        &DeliveryId::parse(id)?,
        now(),
    );
    Ok(WebhookDeliveryItem {
        state,
        attempts: u32::from(state != DeliveryState::Pending),
        last_status: (state == DeliveryState::Delivered).then_some(200),
        // Far enough ahead that DynamoDB would keep them for any run.
        ttl: Timestamp::now().plus_seconds(30 * 86_400).epoch_seconds(),
        ..made
    })
}

/// The webhook cases' fixtures and queue: the queue (created on the SQS endpoint and
/// registered for `table`); the fixture endpoint with its deliveries (one delivered per
/// redelivery call, one pending for the attempt); one endpoint per deletion call.
pub(crate) async fn seed_webhook_fixtures(table: &FleetTable) -> Result<(), FleetError> {
    let endpoint = sqs_endpoint()?;
    let queue = create_queue(&sqs_client(&endpoint), &format!("ref-{}", table.name()))
        .await
        .map_err(|e| FleetError::internal(format!("SQS CreateQueue: {e:?}")))?;
    register_queue(table.name(), &endpoint, queue.url());
    let shards = &table.config.shards;
    let mut items = vec![endpoint_item(owner()?, endpoint_id()?)?.to_item(shards)?];
    let deleted = (0..FIXTURE_CALLS)
        .map(|i| i.to_string())
        .chain(["run".to_string()]);
    for n in deleted.clone() {
        let item = endpoint_item(
            UserId::parse(format!("{DELETED_OWNER}-{n}"))?,
            endpoint_id()?,
        )?;
        items.push(item.to_item(shards)?);
    }
    for n in deleted {
        items.push(delivery_item(&delivered(&n), DeliveryState::Delivered)?.to_item(shards)?);
    }
    items.push(delivery_item(&pending(), DeliveryState::Pending)?.to_item(shards)?);
    put_fixtures(table, items).await
}

/// A call to the webhooks function answering `expected`.
const fn call(
    request: &'static str,
    expected: u16,
    events: super::common::Events,
) -> Option<RouteCall> {
    Some(RouteCall {
        request,
        function: WEBHOOKS,
        expected,
        events,
    })
}

/// The path of the fixture endpoint, with `rest` after it.
fn endpoint_path(rest: &str) -> String {
    format!("/me/webhooks/{ENDPOINT}{rest}")
}

/// An event of the fixture owner on the fixture endpoint's `rest`.
fn on_endpoint(id: PatternId, rest: &str) -> ApiEvent {
    ApiEvent::new(route(id), endpoint_path(rest))
        .caller(WEBHOOK_OWNER)
        .param("webhookId", ENDPOINT)
}

/// CreateWebhook: a new owner's first endpoint, and its confirmation queued.
pub(super) const CREATE_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::CreateWebhook,
    workload: "a new owner's first endpoint (its confirmation queued)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let body = json!({"url": URL, "events": ["alarm.raised"]});
            let changes = WebhookChanges::parse(&body, &TargetPolicy::strict(), true)?;
            let owner = UserId::parse(format!("{NEW_OWNER}-run"))?;
            let created =
                endpoints::create_webhook(table, &queue_for_table(table), &owner, changes).await?;
            found(!created.webhook.confirmed, PatternId::CreateWebhook)
        })
    },
    call: call("POST /me/webhooks", 201, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::CreateWebhook), "/me/webhooks")
                .caller(&format!("{NEW_OWNER}-{i}"))
                .json(&json!({"url": URL, "events": ["alarm.raised"]}))
                .to_bytes()
        })
    }),
};

/// ListWebhooks: the fixture owner's one endpoint.
pub(super) const LIST_WEBHOOKS: PatternCase = PatternCase {
    id: PatternId::ListWebhooks,
    workload: "an owner's one endpoint",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let listed = endpoints::list_webhooks(table, &owner()?).await?;
            found(listed.len() == 1, PatternId::ListWebhooks)
        })
    },
    call: call("GET /me/webhooks", 200, |_, _| {
        super::common::every_call(
            ApiEvent::new(route(PatternId::ListWebhooks), "/me/webhooks").caller(WEBHOOK_OWNER),
        )
    }),
};

/// GetWebhook: the fixture endpoint.
pub(super) const GET_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::GetWebhook,
    workload: "one endpoint",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let shown = endpoints::get_webhook(table, &owner()?, &endpoint_id()?).await?;
            found(shown.confirmed, PatternId::GetWebhook)
        })
    },
    call: call("GET /me/webhooks/{webhookId}", 200, |_, _| {
        super::common::every_call(on_endpoint(PatternId::GetWebhook, ""))
    }),
};

/// UpdateWebhook: a new description.
pub(super) const UPDATE_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::UpdateWebhook,
    workload: "an endpoint's description changed (its URL kept)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let body = json!({"description": "the reference endpoint"});
            let changes = WebhookChanges::parse(&body, &TargetPolicy::strict(), false)?;
            let changed = endpoints::update_webhook(
                table,
                &queue_for_table(table),
                &owner()?,
                &endpoint_id()?,
                changes,
            )
            .await?;
            found(changed.confirmed, PatternId::UpdateWebhook)
        })
    },
    call: call(
        "PATCH /me/webhooks/{webhookId} (description)",
        200,
        |_, _| {
            Box::new(|i| {
                on_endpoint(PatternId::UpdateWebhook, "")
                    .json(&json!({"description": format!("call {i}")}))
                    .to_bytes()
            })
        },
    ),
};

/// DeleteWebhook: an owner's one endpoint.
pub(super) const DELETE_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::DeleteWebhook,
    workload: "an owner's one endpoint deleted",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let owner = UserId::parse(format!("{DELETED_OWNER}-run"))?;
            endpoints::delete_webhook(table, &owner, &endpoint_id()?).await
        })
    },
    call: call("DELETE /me/webhooks/{webhookId}", 204, |_, _| {
        Box::new(|i| {
            ApiEvent::new(route(PatternId::DeleteWebhook), endpoint_path(""))
                .caller(&format!("{DELETED_OWNER}-{i}"))
                .param("webhookId", ENDPOINT)
                .to_bytes()
        })
    }),
};

/// RotateWebhookSecret: the fixture endpoint's secret.
pub(super) const ROTATE_WEBHOOK_SECRET: PatternCase = PatternCase {
    id: PatternId::RotateWebhookSecret,
    workload: "an endpoint's secret rotated",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let rotated = endpoints::rotate_secret(table, &owner()?, &endpoint_id()?).await?;
            found(
                rotated.secret.reveal().starts_with("whsec_"),
                PatternId::RotateWebhookSecret,
            )
        })
    },
    call: call(
        "POST /me/webhooks/{webhookId}/rotate-secret",
        200,
        |_, _| {
            super::common::every_call(on_endpoint(
                PatternId::RotateWebhookSecret,
                "/rotate-secret",
            ))
        },
    ),
};

/// ConfirmWebhook: the fixture endpoint's token posted (again: it is confirmed already).
pub(super) const CONFIRM_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::ConfirmWebhook,
    workload: "an endpoint confirmed with its token",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let confirmed =
                endpoints::confirm_webhook(table, &owner()?, &endpoint_id()?, TOKEN).await?;
            found(confirmed.confirmed, PatternId::ConfirmWebhook)
        })
    },
    call: call("POST /me/webhooks/{webhookId}/confirm", 200, |_, _| {
        super::common::every_call(
            on_endpoint(PatternId::ConfirmWebhook, "/confirm").json(&json!({"token": TOKEN})),
        )
    }),
};

/// TestWebhook: a `webhook.test` delivery queued.
pub(super) const TEST_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::TestWebhook,
    workload: "a webhook.test delivery queued",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            endpoints::send_test(table, &queue_for_table(table), &owner()?, &endpoint_id()?)
                .await?;
            Ok(())
        })
    },
    call: call("POST /me/webhooks/{webhookId}/test", 202, |_, _| {
        super::common::every_call(on_endpoint(PatternId::TestWebhook, "/test"))
    }),
};

/// The delivery log's scale: one page over every log partition.
fn log_pages(_: &shared::model::shard::ShardCounts) -> BudgetScale {
    BudgetScale {
        shards: u32::from(shared::model::entities::webhook_delivery::DELIVERY_LOG_SHARDS),
        ..BudgetScale::one()
    }
}

/// WebhookDeliveries: the newest 50 of the fixture endpoint's log.
pub(super) const WEBHOOK_DELIVERIES: PatternCase = PatternCase {
    id: PatternId::WebhookDeliveries,
    workload: "an endpoint's newest 50 deliveries (of 400 and more, over 16 partitions)",
    scale: log_pages,
    run: |table, _| {
        Box::pin(async move {
            let page =
                delivery_log::list_deliveries(table, &owner()?, &endpoint_id()?, 50, None).await?;
            found(page.items.len() == 50, PatternId::WebhookDeliveries)
        })
    },
    call: call(
        "GET /me/webhooks/{webhookId}/deliveries?limit=50",
        200,
        |_, _| {
            super::common::every_call(
                on_endpoint(PatternId::WebhookDeliveries, "/deliveries").query("limit", "50"),
            )
        },
    ),
};

/// RedeliverWebhook: a delivered delivery sent again.
pub(super) const REDELIVER_WEBHOOK: PatternCase = PatternCase {
    id: PatternId::RedeliverWebhook,
    workload: "a delivered delivery sent again under its webhook-id",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let view = delivery_log::redeliver(
                table,
                &queue_for_table(table),
                &owner()?,
                &endpoint_id()?,
                &DeliveryId::parse(&delivered("run"))?,
            )
            .await?;
            found(
                view.status == DeliveryState::Pending,
                PatternId::RedeliverWebhook,
            )
        })
    },
    call: call(
        "POST /me/webhooks/{webhookId}/deliveries/{deliveryId}/retry",
        202,
        |_, _| {
            Box::new(|i| {
                let delivery = delivered(&i.to_string());
                on_endpoint(
                    PatternId::RedeliverWebhook,
                    &format!("/deliveries/{delivery}/retry"),
                )
                .param("deliveryId", &delivery)
                .to_bytes()
            })
        },
    ),
};

/// DeliveryAttempt: the pending delivery's attempt, answered 200.
pub(super) const DELIVERY_ATTEMPT: PatternCase = PatternCase {
    id: PatternId::DeliveryAttempt,
    workload: "a delivery's attempt answered 200 (the HTTP request itself not made)",
    scale: one,
    run: |table, _| {
        Box::pin(async move {
            let message = DeliveryMessage {
                owner: owner()?,
                webhook_id: endpoint_id()?,
                delivery_id: DeliveryId::parse(&pending())?,
            };
            let at = Timestamp::now();
            let Plan::Send(attempt) = prepare_attempt(table, &message, at).await? else {
                return found(false, PatternId::DeliveryAttempt);
            };
            let answered = AttemptOutcome {
                status: Some(200),
                error: None,
                latency_ms: 12,
                body_prefix: String::new(),
            };
            record_attempt(
                table,
                &queue_for_table(table),
                &attempt,
                &answered,
                &RetrySchedule::default(),
                1,
                at,
            )
            .await?;
            Ok(())
        })
    },
    call: None,
};

/// AlarmWebhooks: one raise of an alarm of the fixture owner's, fanned out to its endpoint.
pub(super) const ALARM_WEBHOOKS: PatternCase = PatternCase {
    id: PatternId::AlarmWebhooks,
    workload: "a stream batch of one alarm raised, to its fleet's one subscribed endpoint",
    scale: |_| BudgetScale {
        shards: 1,
        batch_items: 1,
        devices: 1,
        ..BudgetScale::one()
    },
    run: |table, _| {
        Box::pin(async move {
            let alarm = active_alarm(
                owner()?,
                DeviceId::parse("ref-webhooker-dev-0")?,
                "offline",
                None,
                Severity::Major,
                now(),
            );
            let record = AlarmRecord {
                sequence_number: "1".into(),
                old_image: HashMap::new(),
                new_image: alarm.to_item(&table.config.shards)?,
            };
            let made = alarm_notices::deliver_alarm_transitions(
                table,
                &queue_for_table(table),
                &[StreamRecord::Alarm(record, json!({}))],
            )
            .await?;
            found(made.queued == 1, PatternId::AlarmWebhooks)
        })
    },
    call: None,
};

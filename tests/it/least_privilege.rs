//! Least privilege, proven: every sample event is replayed through its function with a client
//! that records what IAM would be asked to allow (actions, including a transaction's inner
//! actions, on the table or each index by name). Each function's policy in `template.yaml`
//! must grant exactly that: a missing grant would be an AccessDenied in production, an extra
//! one a privilege no code path uses. An index wildcard (`index/*`) grants every index, so it
//! counts as used only where the code uses every index; otherwise the policy names them.

use std::collections::{BTreeMap, BTreeSet};

use fleet_testkit::functions::invoke;
use fleet_testkit::iam::{index, Grant, GrantRecorder, INDEXES, TABLE};
use fleet_tests::*;

/// The grants a function's policy statements give on the table and its indexes, in the
/// recorder's terms. Grants on other resources (the table's stream, the alarm bus, the dead-letter queue) are not
/// DynamoDB calls the code makes: [`only_alarm_watch_publishes_and_only_the_alarm_consumers_read_the_stream_and_send_dead_letters`]
/// checks them.
fn granted(function: &str) -> BTreeSet<Grant> {
    let table = &template().table.logical_id;
    let definition = &template().function_definitions[function];
    let mut grants = BTreeSet::new();
    for statement in &definition.policy {
        assert_eq!(
            statement.effect, "Allow",
            "{function}: only Allow statements"
        );
        for resource in &statement.resources {
            let resource = if resource == table {
                TABLE.to_string()
            } else if *resource == format!("{table}/index/*") {
                INDEXES.to_string()
            } else if let Some(name) = resource.strip_prefix(&format!("{table}/index/")) {
                assert!(
                    shared::model::schema::INDEXES
                        .iter()
                        .any(|i| i.name == name),
                    "{function}: no index {name}"
                );
                index(name)
            } else if outside_the_table(table, resource) {
                continue;
            } else {
                panic!("{function}: unexpected resource {resource}");
            };
            for action in &statement.actions {
                grants.insert((action.clone(), resource.clone()));
            }
        }
    }
    grants
}

#[tokio::test]
async fn every_function_is_granted_exactly_the_dynamodb_actions_its_code_uses() {
    let (mut table, _) = demo_table().await;
    table.config.retention_days = SAMPLE_RETENTION_DAYS;
    let recorders: BTreeMap<&String, GrantRecorder> = template()
        .functions
        .keys()
        .map(|f| (f, GrantRecorder::default()))
        .collect();
    for sample in sample_events() {
        let mut recorded = table.clone();
        recorded.client = recorders[&sample.function].client(&table.client);
        let response = invoke(template(), &recorded, &sample.function, &sample.text)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", sample.file));
        assert_eq!(
            response["statusCode"], sample.status,
            "{}: {response}",
            sample.file
        );
    }
    // The worker also carries on the history of a moved device that did not fit its request:
    // a move given no time at all leaves its whole history to the scheduled run.
    let bob = shared::model::ids::UserId::parse("demo-bob").unwrap();
    let acme = shared::model::ids::OrgId::parse(fleet_testkit::demo_orgs::DEMO_ORG_ID).unwrap();
    let moved = shared::ops::devices::r#move::move_device_until(
        &table,
        &shared::model::ids::DeviceId::parse("thermo-office").unwrap(),
        &bob,
        &shared::model::ids::UserId::org_fleet(&acme),
        std::time::Instant::now(),
    )
    .await
    .expect("a move left to the worker");
    assert_eq!(
        moved.history.status,
        shared::ops::devices::r#move::HistoryStatus::Moving
    );
    let scheduled = sample_events()
        .into_iter()
        .find(|s| s.file == "scheduled-rollouts.json")
        .expect("the worker's scheduled sample");
    let mut recorded = table.clone();
    recorded.client = recorders[&scheduled.function].client(&table.client);
    let run = invoke(template(), &recorded, &scheduled.function, &scheduled.text)
        .await
        .expect("the worker's run");
    assert_eq!(
        run["body"]["moves"][0]["history"]["status"], "moved",
        "{run}"
    );
    // The webhook functions have no samples yet (their routes need the delivery queue): their
    // whole flow runs here, on moto's SQS, through the recorded clients.
    let recorded = |function: &str| {
        let mut recorded = table.clone();
        recorded.client = recorders[&function.to_string()].client(&table.client);
        recorded
    };
    webhook_flow(
        recorded("WebhooksFunction"),
        recorded("WebhookDeliveryFunction"),
    )
    .await;
    for (function, recorder) in &recorders {
        if PROVEN_ELSEWHERE.contains(&function.as_str()) {
            continue;
        }
        let used = recorder.grants();
        let granted = granted(function);
        let every_index = |action: &str| {
            shared::model::schema::INDEXES
                .iter()
                .map(|i| (action.to_string(), index(i.name)))
                .collect::<BTreeSet<Grant>>()
        };
        let missing: Vec<_> = used
            .iter()
            .filter(|(action, resource)| {
                let by_name = granted.contains(&(action.clone(), resource.clone()));
                let by_wildcard = resource.starts_with(&format!("{TABLE}/index/"))
                    && granted.contains(&(action.clone(), INDEXES.to_string()));
                !(by_name || by_wildcard)
            })
            .collect();
        let unused: Vec<_> = granted
            .iter()
            .filter(|(action, resource)| {
                if resource == INDEXES {
                    !every_index(action).is_subset(&used)
                } else {
                    !used.contains(&(action.clone(), resource.clone()))
                }
            })
            .collect();
        assert!(
            missing.is_empty() && unused.is_empty(),
            "{function}: used but not granted {missing:?}; granted but unused {unused:?}"
        );
    }
}

/// The table's stream and the alarm bus: resources no DynamoDB call of the code names.
fn outside_the_table(table: &str, resource: &str) -> bool {
    resource == format!("{table}.StreamArn")
        || resource == format!("{table}/stream/*")
        || resource == "AlarmBus"
        || resource == "AlarmTransitionsDeadLetterQueue"
        || resource == "FirmwareBucket"
        || resource == "FirmwareBucket/*"
        || resource == "WebhookDeliveryQueue"
        || resource == "WebhookDeliveryDeadLetterQueue"
}

/// The firmware function's samples cannot reach its S3 work (the replay has no S3 server), so
/// its grants are proven by [`the_firmware_function_is_granted_exactly_what_its_routes_use`],
/// which runs every route on moto's S3.
const PROVEN_ELSEWHERE: &[&str] = &["FirmwareFunction"];

#[test]
fn only_alarm_watch_publishes_and_only_the_alarm_consumers_read_the_stream_and_send_dead_letters() {
    let table = &template().table.logical_id;
    let mut stream_readers = BTreeSet::new();
    let mut publishers = BTreeSet::new();
    let mut dead_letter_senders = BTreeSet::new();
    let mut webhook_queue_users = BTreeSet::new();
    for (function, definition) in &template().function_definitions {
        for statement in &definition.policy {
            for resource in &statement.resources {
                for action in &statement.actions {
                    if action.starts_with("events:") {
                        assert_eq!(action, "events:PutEvents", "{function}");
                        assert_eq!(
                            resource, "AlarmBus",
                            "{function}: PutEvents on the bus only"
                        );
                        publishers.insert(function.clone());
                    }
                    if resource == "WebhookDeliveryQueue" {
                        webhook_queue_users.insert((function.clone(), action.clone()));
                        continue;
                    }
                    if resource == "WebhookDeliveryDeadLetterQueue" {
                        assert_eq!(
                            (function.as_str(), action.as_str()),
                            ("WebhookDeliveryFunction", "sqs:SendMessage"),
                            "the delivery stream's failures only"
                        );
                        dead_letter_senders.insert(function.clone());
                        continue;
                    }
                    if action.starts_with("sqs:") || resource == "AlarmTransitionsDeadLetterQueue" {
                        assert_eq!(action, "sqs:SendMessage", "{function}");
                        assert_eq!(
                            resource, "AlarmTransitionsDeadLetterQueue",
                            "{function}: SendMessage to the stream's dead-letter queue only"
                        );
                        dead_letter_senders.insert(function.clone());
                    }
                    if resource == &format!("{table}.StreamArn") {
                        assert!(
                            [
                                "dynamodb:DescribeStream",
                                "dynamodb:GetRecords",
                                "dynamodb:GetShardIterator"
                            ]
                            .contains(&action.as_str()),
                            "{function}: {action} on the stream"
                        );
                        stream_readers.insert(function.clone());
                    }
                    if resource == &format!("{table}/stream/*") {
                        assert_eq!(action, "dynamodb:ListStreams", "{function}");
                    }
                }
            }
        }
    }
    let only = BTreeSet::from(["AlarmWatchFunction".to_string()]);
    assert_eq!(publishers, only);
    // The delivery worker reads the alarm items' stream too, through a mapping of its own.
    let readers = BTreeSet::from([
        "AlarmWatchFunction".to_string(),
        "WebhookDeliveryFunction".to_string(),
    ]);
    assert_eq!(stream_readers, readers);
    assert_eq!(dead_letter_senders, readers);
    // The webhook delivery queue: the API and the worker (an alarm's deliveries) send, the
    // worker is its event source (receive, delete, attributes) and delays retries; nothing
    // else touches it.
    let expected: BTreeSet<(String, String)> = [
        ("WebhooksFunction", "sqs:SendMessage"),
        ("WebhookDeliveryFunction", "sqs:SendMessage"),
        ("WebhookDeliveryFunction", "sqs:ReceiveMessage"),
        ("WebhookDeliveryFunction", "sqs:DeleteMessage"),
        ("WebhookDeliveryFunction", "sqs:GetQueueAttributes"),
        ("WebhookDeliveryFunction", "sqs:ChangeMessageVisibility"),
    ]
    .into_iter()
    .map(|(f, a)| (f.to_string(), a.to_string()))
    .collect();
    assert_eq!(webhook_queue_users, expected);
}

/// Every webhook route and the delivery worker once: create (the confirmation delivered and
/// answered with its token), list, read, change, rotate, confirm, test, the delivery log, a
/// redelivery, delete.
async fn webhook_flow(api: shared::FleetTable, worker_table: shared::FleetTable) {
    use fleet_testkit::webhook_queue::{create_queue, pump, sqs_client};
    use fleet_testkit::webhook_receiver::WebhookReceiver;
    use serde_json::json;
    use shared::model::webhook::target::TargetPolicy;
    use shared::ops::webhooks::deliveries::RetrySchedule;

    let moto = fleet_testkit::moto_server::MotoServer::start_default().expect("moto's server");
    let queue = create_queue(&sqs_client(moto.endpoint()), "least-privilege")
        .await
        .unwrap();
    let receiver = WebhookReceiver::start(&[], true).await.unwrap();
    let policy = TargetPolicy::local(&receiver.target());
    let worker = webhooks::worker::DeliveryWorker::new(
        worker_table,
        queue.clone(),
        policy.clone(),
        RetrySchedule::default(),
    )
    .unwrap();
    let state = webhooks::WebhooksState {
        table: api,
        queue: queue.clone(),
        policy,
    };
    let call = |request: ApiRequest| {
        let router = webhooks::router(state.clone());
        async move {
            let response = gateway(router)
                .handle(request.caller("lp-owner").build())
                .await;
            answer(response, Default::default())
        }
    };
    let created = call(
        ApiRequest::post("/me/webhooks")
            .json(json!({"url": receiver.url("/"), "events": ["alarm.raised"]})),
    )
    .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let id = created.body["webhookId"].as_str().unwrap().to_string();
    while receiver.received().is_empty() {
        pump(&worker, &queue, 1).await.unwrap();
    }
    let path = format!("/me/webhooks/{id}");
    let token = serde_json::from_str::<serde_json::Value>(&receiver.received()[0].body).unwrap()
        ["data"]["confirmationToken"]
        .clone();
    for (request, status) in [
        (ApiRequest::get("/me/webhooks"), 200),
        (ApiRequest::get(&path), 200),
        (
            ApiRequest::patch(&path).json(json!({"description": "ops"})),
            200,
        ),
        (ApiRequest::post(&format!("{path}/rotate-secret")), 200),
        (
            ApiRequest::post(&format!("{path}/confirm")).json(json!({"token": token})),
            200,
        ),
        (ApiRequest::post(&format!("{path}/test")), 202),
    ] {
        let a = call(request).await;
        assert_eq!(a.status, status, "{:?}", a.body);
    }
    while receiver.received().len() < 2 {
        pump(&worker, &queue, 1).await.unwrap();
    }
    // The delivery log, and a redelivery of the test delivery once it was delivered.
    let log = call(ApiRequest::get(&format!("{path}/deliveries"))).await;
    assert_eq!(log.status, 200, "{:?}", log.body);
    let test_delivery = receiver.received()[1]
        .header("webhook-id")
        .unwrap()
        .to_string();
    loop {
        let retry = call(ApiRequest::post(&format!(
            "{path}/deliveries/{test_delivery}/retry"
        )))
        .await;
        if retry.status == 202 {
            break;
        }
        // Still pending: its attempt is being recorded.
        assert_eq!(retry.status, 409, "{:?}", retry.body);
        pump(&worker, &queue, 1).await.unwrap();
    }
    while receiver.received().len() < 3 {
        pump(&worker, &queue, 1).await.unwrap();
    }
    // An alarm transition from the table's stream: its fleet's endpoints are read.
    let batch = std::fs::read_to_string(
        fleet_testkit::repo_root().join("events/stream/alarm-stream-raised.json"),
    )
    .unwrap();
    let answer = worker
        .handle(serde_json::from_str(&batch).unwrap())
        .await
        .unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    assert_eq!(call(ApiRequest::delete(&path)).await.status, 204);
}

#[tokio::test]
async fn the_firmware_function_is_granted_exactly_what_its_routes_use() {
    use base64::Engine as _;
    use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
    use serde_json::json;

    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let images = local_firmware_images(moto.endpoint(), "firmware-images");
    create_versioned_bucket(&images).await.unwrap();
    let table = fresh_table().await;
    let recorder = GrantRecorder::default();
    let mut recorded = table.clone();
    recorded.client = recorder.client(&table.client);
    let state = firmware::FirmwareState {
        table: recorded,
        images,
    };
    let send = |request: ApiRequest| {
        let state = state.clone();
        async move {
            let response = gateway(firmware::router(state))
                .handle(request.build())
                .await;
            answer(response, Default::default())
        }
    };
    // Every route, and the check of an uploaded image (its conditional update).
    let public = base64::engine::general_purpose::STANDARD.encode(
        ed25519_dalek::SigningKey::from_bytes(&[1u8; 32])
            .verifying_key()
            .to_bytes(),
    );
    let a = send(
        ApiRequest::put("/me/firmware-keys/gateway")
            .caller("u")
            .json(json!({"publicKey": public})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let bytes = vec![7u8; 1000];
    let sha256: String = <sha2::Sha256 as sha2::Digest>::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let a = send(ApiRequest::post("/me/firmware").caller("u").json(
        json!({"deviceType": "thermostat", "version": "1.0.0", "sha256": sha256, "size": 1000}),
    ))
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    let id = a.body["firmwareId"].as_str().unwrap().to_string();
    let put = reqwest::Client::new()
        .put(a.body["uploadUrl"].as_str().unwrap())
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let a = send(ApiRequest::get(&format!("/me/firmware/{id}")).caller("u")).await;
    assert_eq!(a.body["status"], "ready", "{:?}", a.body);
    let a = send(ApiRequest::get("/me/firmware").caller("u")).await;
    assert_eq!(a.status, 200);
    let a = send(ApiRequest::delete(&format!("/me/firmware/{id}")).caller("u")).await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    // A rollout's cancel (its start is device-updates', so not recorded here).
    let a = device_updates(
        &table,
        ApiRequest::post("/me/rollouts")
            .caller("u")
            .json(json!({"type": "thermostat", "desired": {"on": true}})),
    )
    .await;
    assert_eq!(a.status, 202, "{:?}", a.body);
    let rollout = a.body["rollout"]["rolloutId"].as_str().unwrap().to_string();
    let a = send(ApiRequest::post(&format!("/me/rollouts/{rollout}/cancel")).caller("u")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    // The rollouts' list, and a device's firmware (its item and offer in one batch read).
    let a = send(ApiRequest::get("/me/rollouts").caller("u")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    register_device(&table, "u", "lp-valve").await;
    let a = send(ApiRequest::get("/me/devices/lp-valve/firmware").caller("u")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);

    let function = "FirmwareFunction";
    assert_eq!(
        recorder.grants(),
        granted(function),
        "{function}: the DynamoDB grants are exactly those its routes use"
    );
    // The bucket: objects written (presigned PUTs are signed by this role), read (HEAD and
    // GET of the check) and deleted; the bucket listed only so a HEAD of an image not yet
    // uploaded is a 404. Besides, the functions that delete an organization (its route,
    // the worker finishing it) delete its images, and only that
    // (`org_deletion::deleting_an_organization_deletes_its_firmware_packages_keys_and_images`
    // and `...interrupted_deletion_finished_by_the_worker...` use it on moto's S3). No other
    // function touches it.
    let mut on_bucket = BTreeSet::new();
    for (name, definition) in &template().function_definitions {
        for statement in &definition.policy {
            for resource in statement
                .resources
                .iter()
                .filter(|r| r.starts_with("FirmwareBucket"))
            {
                for action in &statement.actions {
                    on_bucket.insert((name.clone(), action.clone(), resource.clone()));
                }
            }
        }
    }
    let expected: BTreeSet<(String, String, String)> = [
        (function, "s3:PutObject", "FirmwareBucket/*"),
        (function, "s3:GetObject", "FirmwareBucket/*"),
        (function, "s3:DeleteObject", "FirmwareBucket/*"),
        (function, "s3:ListBucket", "FirmwareBucket"),
        (
            "DeviceUpdatesFunction",
            "s3:DeleteObject",
            "FirmwareBucket/*",
        ),
        (
            "RolloutWorkerFunction",
            "s3:DeleteObject",
            "FirmwareBucket/*",
        ),
        // A firmware offer's download URL is presigned by the ingest role
        // (`firmware_rollouts::an_open_stage_is_offered_the_image_...` downloads through one).
        ("IngestFunction", "s3:GetObject", "FirmwareBucket/*"),
    ]
    .into_iter()
    .map(|(f, a, r)| (f.to_string(), a.to_string(), r.to_string()))
    .collect();
    assert_eq!(on_bucket, expected);
}

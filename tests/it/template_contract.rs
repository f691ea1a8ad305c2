//! `template.yaml` is the one source of truth for the table: these tests fail when it and the
//! key-design crate disagree on any attribute or index name, and when a route in the template
//! is not served by its function's code.

use std::collections::BTreeSet;

use fleet_testkit::functions::handler_for;
use fleet_tests::*;
use serde_json::Value;
use shared::model::schema::{self, INDEXES, KEY_ATTRIBUTES};
use shared::observe::emf;

#[test]
fn table_keys_attributes_and_ttl_match_the_key_design() {
    let table = &template().table;
    let declared: BTreeSet<&str> = table.attributes.iter().map(|(n, _)| n.as_str()).collect();
    let expected: BTreeSet<&str> = KEY_ATTRIBUTES.into_iter().map(|a| a.name()).collect();
    assert_eq!(declared, expected, "AttributeDefinitions");
    assert!(
        table.attributes.iter().all(|(_, t)| t == "S"),
        "all key attributes are strings"
    );
    let base: Vec<(&str, &str)> = table
        .key_schema
        .iter()
        .map(|k| (k.attribute.as_str(), k.key_type.as_str()))
        .collect();
    assert_eq!(
        base,
        [(schema::PK.name(), "HASH"), (schema::SK.name(), "RANGE")]
    );
    assert_eq!(table.ttl_attribute.as_deref(), Some(schema::TTL.name()));
    assert_eq!(table.billing_mode, "PAY_PER_REQUEST");
}

#[test]
fn indexes_match_the_key_design_including_projections() {
    let table = &template().table;
    assert_eq!(table.indexes.len(), INDEXES.len(), "number of GSIs");
    for spec in INDEXES {
        let index = table
            .indexes
            .iter()
            .find(|i| i.name == spec.name)
            .unwrap_or_else(|| panic!("template has no index {}", spec.name));
        let keys: Vec<(&str, &str)> = index
            .key_schema
            .iter()
            .map(|k| (k.attribute.as_str(), k.key_type.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                (spec.partition_key.name(), "HASH"),
                (spec.sort_key.name(), "RANGE")
            ],
            "{}",
            spec.name
        );
        assert_eq!(index.projection_type, "INCLUDE", "{}", spec.name);
        let projected: BTreeSet<&str> = index
            .non_key_attributes
            .iter()
            .map(String::as_str)
            .collect();
        let expected: BTreeSet<&str> = spec.projected.iter().map(|a| a.name()).collect();
        assert_eq!(projected, expected, "{} projection", spec.name);
    }
}

#[tokio::test]
async fn every_template_route_is_served_by_its_function() {
    let table = fresh_table().await;
    for route in &template().routes {
        let Some(handler) = handler_for(&route.code_uri, &table) else {
            panic!("{} ({}) has no handler", route.route_key(), route.function);
        };
        // An unauthenticated request reaches the route's code (401 for JWT routes), never the
        // function's "no route" answer.
        let request = ApiRequest::new(&route.route_key(), &route.path).build();
        let response = handler(request).await;
        let body = String::from_utf8_lossy(response.body().as_ref()).into_owned();
        assert!(!body.contains("no_route"), "{}: {body}", route.route_key());
        if route.authorized {
            assert_eq!(response.status(), 401, "{}", route.route_key());
        }
    }
}

/// An organization's fleet is served by the code that serves a person's: each
/// `/orgs/{orgId}/...` twin of a `/me/...` route is on the same function, so its IAM policy,
/// memory and alarms are the ones the `/me` route was measured with.
#[test]
fn every_me_fleet_route_has_its_org_twin_on_the_same_function() {
    let routes = &template().routes;
    let function_of = |route_key: &str| {
        routes
            .iter()
            .find(|r| r.route_key() == route_key)
            .map(|r| r.function.as_str())
    };
    let mut twins = 0;
    for route in routes {
        let Some(rest) = route.path.strip_prefix("/me/") else {
            continue;
        };
        let twin = format!("{} /orgs/{{orgId}}/{rest}", route.method);
        assert_eq!(
            function_of(&twin),
            Some(route.function.as_str()),
            "{twin}: the twin of {}",
            route.route_key()
        );
        twins += 1;
    }
    assert!(twins >= 26, "only {twins} twins");
}

#[tokio::test]
async fn the_table_created_from_the_template_has_the_declared_schema() {
    let table = fresh_table().await;
    let described = table
        .client
        .describe_table()
        .table_name(table.name())
        .send()
        .await
        .unwrap();
    let t = described.table().unwrap();
    let mut names: Vec<&str> = t
        .global_secondary_indexes()
        .iter()
        .filter_map(|g| g.index_name())
        .collect();
    names.sort();
    assert_eq!(names, [schema::GSI1, schema::GSI2, schema::GSI3]);
    let ttl = table
        .client
        .describe_time_to_live()
        .table_name(table.name())
        .send()
        .await
        .unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some(schema::TTL.name()));
}

/// The template as plain YAML, for the operational resources the local stack ignores.
fn raw_template() -> yaml_serde::Value {
    let text = std::fs::read_to_string(fleet_testkit::template::default_template_path()).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

/// An alarm's namespace, metric, and dimension names and values as text.
type Alarm = (String, String, Vec<(String, String)>);

/// Every `AWS::CloudWatch::Alarm`.
fn alarms() -> Vec<Alarm> {
    let doc = raw_template();
    let resources = doc["Resources"].as_mapping().unwrap();
    resources
        .values()
        // Single-metric alarms; the metric-math ones are checked by our_metrics_*.
        .filter(|r| {
            r["Type"].as_str() == Some("AWS::CloudWatch::Alarm")
                && r["Properties"]["Metrics"].is_null()
        })
        .map(|r| {
            let p = &r["Properties"];
            let dims = p["Dimensions"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|d| {
                    let value = match &d["Value"] {
                        yaml_serde::Value::Tagged(t) => t.value.as_str().unwrap_or("").to_string(),
                        other => other.as_str().unwrap_or("").to_string(),
                    };
                    (d["Name"].as_str().unwrap().to_string(), value)
                })
                .collect();
            (
                p["Namespace"].as_str().unwrap().to_string(),
                p["MetricName"].as_str().unwrap().to_string(),
                dims,
            )
        })
        .collect()
}

#[test]
fn the_table_and_every_index_alarm_on_read_and_write_throttling() {
    let alarms = alarms();
    let table = &template().table.logical_id;
    for metric in ["ReadThrottleEvents", "WriteThrottleEvents"] {
        let on = |index: Option<&str>| {
            alarms.iter().any(|(ns, m, dims)| {
                ns == "AWS/DynamoDB"
                    && m == metric
                    && dims.contains(&("TableName".into(), table.clone()))
                    && match index {
                        Some(i) => dims.contains(&("GlobalSecondaryIndexName".into(), i.into())),
                        None => dims.len() == 1,
                    }
            })
        };
        assert!(on(None), "no {metric} alarm on the table");
        for index in INDEXES {
            assert!(on(Some(index.name)), "no {metric} alarm on {}", index.name);
        }
    }
}

#[test]
fn every_function_alarms_on_errors_and_p99_duration_and_keeps_bounded_logs() {
    let alarms = alarms();
    let doc = raw_template();
    assert_eq!(
        doc["Globals"]["Function"]["Tracing"].as_str(),
        Some("Active"),
        "X-Ray tracing for every function"
    );
    let resources = doc["Resources"].as_mapping().unwrap();
    for function in template().function_definitions.keys() {
        for metric in ["Errors", "Duration"] {
            assert!(
                alarms.iter().any(|(ns, m, dims)| ns == "AWS/Lambda"
                    && m == metric
                    && dims == &[("FunctionName".to_string(), function.clone())]),
                "{function}: no {metric} alarm"
            );
        }
        let log_group = resources.values().find(|r| {
            r["Type"].as_str() == Some("AWS::Logs::LogGroup")
                && matches!(&r["Properties"]["LogGroupName"], yaml_serde::Value::Tagged(t)
                    if t.value.as_str() == Some(&format!("/aws/lambda/${{{function}}}")))
        });
        let log_group = log_group.unwrap_or_else(|| panic!("{function}: no log group"));
        assert!(
            !log_group["Properties"]["RetentionInDays"].is_null(),
            "{function}: log retention"
        );
    }
}

/// The text of a scalar or of a one-argument intrinsic (`!Ref X`, `!GetAtt X.Arn`, `!Sub s`).
fn text(value: &yaml_serde::Value) -> String {
    match value {
        yaml_serde::Value::Tagged(t) => t.value.as_str().unwrap_or("").to_string(),
        other => other.as_str().unwrap_or("").to_string(),
    }
}

/// The one resource of `kind`.
fn only(doc: &yaml_serde::Value, kind: &str) -> (String, yaml_serde::Value) {
    let found: Vec<_> = doc["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .map(|(name, r)| (name.as_str().unwrap().to_string(), r.clone()))
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found.into_iter().next().unwrap()
}

/// Every metric the functions write (shared::observe::emf), by name.
fn emitted_metrics() -> BTreeSet<&'static str> {
    emf::REQUEST_METRICS
        .iter()
        .chain(&emf::RUN_METRICS)
        .chain(&emf::FIGURE_METRICS)
        .chain(&emf::DELIVERY_METRICS)
        .chain(std::iter::once(&emf::DEFERRED_METRIC))
        .map(|(name, _)| *name)
        .collect()
}

/// A metric of our namespace as a chart or alarm names it: its name and dimension names.
type OurMetric = (String, Vec<String>);

/// The dashboard's body as JSON (placeholders `${X}` kept as text) and our metrics in it:
/// explicit `["DeviceFleet", name, dim, value, ...]` rows and `SEARCH` expressions.
fn dashboard() -> (Value, Vec<OurMetric>) {
    let (_, board) = only(&raw_template(), "AWS::CloudWatch::Dashboard");
    let body: Value = serde_json::from_str(&text(&board["Properties"]["DashboardBody"]))
        .expect("DashboardBody is JSON");
    let mut ours = Vec::new();
    for widget in body["widgets"].as_array().unwrap() {
        // A Logs Insights widget has a query, no metrics (checked on its own below).
        let Some(rows) = widget["properties"]["metrics"].as_array() else {
            assert_eq!(widget["type"], "log", "{widget}");
            continue;
        };
        for row in rows {
            let row = row.as_array().unwrap();
            if row[0] == "DeviceFleet" {
                let dims = row[2..]
                    .iter()
                    .filter_map(Value::as_str)
                    .step_by(2)
                    .map(String::from)
                    .collect();
                ours.push((row[1].as_str().unwrap().to_string(), dims));
            }
            if let Some(expr) = row[0]["expression"]
                .as_str()
                .filter(|e| e.contains("SEARCH"))
            {
                let schema = &expr[expr.find('{').unwrap() + 1..expr.find('}').unwrap()];
                let mut parts = schema.split(',');
                assert_eq!(parts.next(), Some(emf::NAMESPACE), "{expr}");
                let name = expr
                    .split("MetricName=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                ours.push((name.to_string(), parts.map(String::from).collect()));
            }
        }
    }
    (body, ours)
}

/// Our namespace's metrics every alarm watches (single-metric and metric-math alarms).
fn our_alarmed_metrics() -> Vec<(String, OurMetric)> {
    let doc = raw_template();
    let mut found = Vec::new();
    for (name, r) in doc["Resources"].as_mapping().unwrap() {
        if r["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let p = &r["Properties"];
        let mut stats: Vec<&yaml_serde::Value> = vec![p];
        if let Some(metrics) = p["Metrics"].as_sequence() {
            stats.extend(metrics.iter().map(|m| &m["MetricStat"]["Metric"]));
        }
        for m in stats {
            if m["Namespace"].as_str() == Some(emf::NAMESPACE) {
                let dims = m["Dimensions"]
                    .as_sequence()
                    .unwrap()
                    .iter()
                    .map(|d| (d["Name"].as_str().unwrap().to_string(), text(&d["Value"])))
                    .collect::<Vec<_>>();
                found.push((
                    name.as_str().unwrap().to_string(),
                    (
                        m["MetricName"].as_str().unwrap().to_string(),
                        dims.iter().map(|(n, _)| n.clone()).collect(),
                    ),
                ));
                // Alarms pin the function; a metric without it would mix stacks.
                assert!(
                    dims.iter().any(|(n, v)| n == emf::DIM_FUNCTION
                        && template().function_definitions.contains_key(v)),
                    "{}: {dims:?}",
                    name.as_str().unwrap()
                );
            }
        }
    }
    found
}

/// A renamed metric or dimension in shared::observe::emf would leave a chart or an alarm empty
/// without any error: every one they name must be one the code writes, with a dimension set
/// the code writes.
#[test]
fn our_metrics_in_the_dashboard_and_alarms_are_ones_the_code_writes() {
    let emitted = emitted_metrics();
    let sets: [Vec<String>; 2] = [
        vec![emf::DIM_FUNCTION.into(), emf::DIM_ROUTE.into()],
        vec![emf::DIM_FUNCTION.into()],
    ];
    let (_, charted) = dashboard();
    let alarmed = our_alarmed_metrics();
    for (metric, dims) in charted.iter().chain(alarmed.iter().map(|(_, m)| m)) {
        assert!(
            emitted.contains(metric.as_str()),
            "{metric} is never written"
        );
        assert!(
            sets.contains(dims),
            "{metric}: dimensions {dims:?} are never written"
        );
    }
    let charted: BTreeSet<&str> = charted.iter().map(|(m, _)| m.as_str()).collect();
    for needed in [
        "Requests",
        "Status5xx",
        "Latency",
        "ReadUnits",
        "WriteUnits",
        "EventsAccepted",
        "EventsFailed",
        "RunDuration",
        "ColdStart",
        "WebhookAttempts",
        "WebhookDelivered",
        "WebhookLatency",
        "WebhookLag",
        "WebhookDeferred",
    ] {
        assert!(
            charted.contains(needed),
            "the dashboard has no {needed} chart"
        );
    }
    let alarm_on = |metric: &str| alarmed.iter().filter(|(_, (m, _))| m == metric).count();
    assert_eq!(alarm_on("EventsFailed"), 1, "partial ingest failures alarm");
    assert_eq!(alarm_on("RunFailures"), 1, "daily run failure alarm");
    // The 5xx share: errors and requests of each of the three API functions.
    assert_eq!(
        alarm_on("Status5xx"),
        3,
        "5xx share alarm over every API function"
    );
    assert_eq!(
        alarm_on("Requests"),
        3,
        "5xx share alarm over every API function"
    );
}

/// Issue 41's per-endpoint figures (success rate, latency, backlog) are a Logs Insights table
/// over the delivery worker's log group (a custom metric per endpoint would cost $0.30 a month
/// each): its query reads the worker's log group, breaks down by the properties the worker's
/// documents carry, and names only metrics the worker writes.
#[test]
fn the_dashboard_breaks_webhook_deliveries_down_per_endpoint_from_the_workers_documents() {
    let (body, _) = dashboard();
    let logs: Vec<&Value> = body["widgets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["type"] == "log")
        .collect();
    assert_eq!(logs.len(), 1, "one per-endpoint table");
    let query = logs[0]["properties"]["query"].as_str().unwrap();
    assert!(
        query.starts_with("SOURCE '/aws/lambda/${WebhookDeliveryFunction}' |"),
        "{query}"
    );
    assert!(
        query.contains("by webhookId, ownerId"),
        "per endpoint: {query}"
    );
    for property in ["webhookId", "ownerId"] {
        assert!(emf::DELIVERY_PROPERTIES.contains(&property));
    }
    let written: BTreeSet<&str> = emf::DELIVERY_METRICS
        .iter()
        .chain(std::iter::once(&emf::DEFERRED_METRIC))
        .map(|(name, _)| *name)
        .collect();
    let named: BTreeSet<&str> = query
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| word.starts_with("Webhook") && *word != "WebhookDeliveryFunction")
        .collect();
    assert_eq!(named, written, "the query's metrics are the worker's");
}

#[test]
fn the_dashboard_charts_throttling_and_latency_quantiles_per_index_and_route() {
    let (body, _) = dashboard();
    let text = body.to_string();
    for index in INDEXES {
        for metric in ["ReadThrottleEvents", "WriteThrottleEvents"] {
            let charted = body["widgets"].as_array().unwrap().iter().any(|w| {
                w["properties"]["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|row| {
                        row[0] == "AWS/DynamoDB"
                            && row[1] == metric
                            && row.as_array().unwrap().contains(&Value::from(index.name))
                    })
            });
            assert!(charted, "no {metric} chart for {}", index.name);
        }
    }
    for quantile in ["'p50'", "'p99'"] {
        assert!(text.contains(quantile), "no latency {quantile}");
    }
}

/// checkov CKV_AWS_95: requests API Gateway itself rejects (no or bad JWT, throttled) reach no
/// function log; the access log is their only record. Default route throttling bounds what
/// one client can send before a function runs.
#[test]
fn the_http_api_logs_every_request_with_bounded_retention_and_throttles_every_route() {
    let doc = raw_template();
    let (_, api) = only(&doc, "AWS::Serverless::HttpApi");
    let p = &api["Properties"];
    let destination = text(&p["AccessLogSettings"]["DestinationArn"]);
    let group = destination
        .strip_suffix(".Arn")
        .expect("GetAtt <LogGroup>.Arn");
    let group = &doc["Resources"][group];
    assert_eq!(group["Type"].as_str(), Some("AWS::Logs::LogGroup"));
    assert!(
        !group["Properties"]["RetentionInDays"].is_null(),
        "access logs kept forever"
    );
    let format: Value = serde_json::from_str(p["AccessLogSettings"]["Format"].as_str().unwrap())
        .expect("the access log format is one JSON object per line");
    for field in ["requestId", "routeKey", "status", "authorizerError", "ip"] {
        assert!(format.get(field).is_some(), "access log without {field}");
    }
    let format_text = format.to_string();
    assert!(
        !format_text.contains("header") && !format_text.contains("$context.authorizer.claims"),
        "the access log must not carry headers or claims (tokens)"
    );
    for setting in ["ThrottlingBurstLimit", "ThrottlingRateLimit"] {
        let parameter = text(&p["DefaultRouteSettings"][setting]);
        let default = doc["Parameters"][parameter.as_str()]["Default"]
            .as_f64()
            .unwrap_or_else(|| panic!("{setting} is not a parameter with a default"));
        assert!(default >= 1.0, "{setting} default {default}");
    }
}

/// Lambda keeps one resource-based policy per function, at most 20,480 bytes, and SAM adds a
/// statement to it for each HttpApi event (the API's permission to invoke that route). With
/// every organization twin the device-updates function has 39 of them: this holds each
/// function's policy, estimated as Lambda stores it for samconfig.toml's stack in the region
/// with the longest name, under the limit (a deploy past it fails on the last permissions).
#[test]
fn each_functions_invoke_permissions_fit_lambdas_policy_size_limit() {
    const LIMIT: usize = 20_480;
    let samconfig =
        std::fs::read_to_string(fleet_testkit::repo_root().join("samconfig.toml")).unwrap();
    let stack = samconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("stack_name = "))
        .map(|v| v.trim_matches('"').to_string())
        .expect("samconfig.toml names the stack");
    let (region, account, api, suffix) = (
        "ap-southeast-2",
        "123456789012",
        "abcdefghij",
        "A".repeat(12),
    );
    let doc = raw_template();
    for (id, resource) in doc["Resources"].as_mapping().unwrap() {
        let id = id.as_str().unwrap();
        let Some(events) = resource["Properties"]["Events"].as_mapping() else {
            continue;
        };
        let mut statements = Vec::new();
        for (event, spec) in events {
            if spec["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let event = event.as_str().unwrap();
            let method = spec["Properties"]["Method"]
                .as_str()
                .unwrap()
                .to_uppercase();
            // SAM's source ARN names the route with each path parameter as `*`.
            let path: Vec<&str> = spec["Properties"]["Path"]
                .as_str()
                .unwrap()
                .split('/')
                .map(|s| if s.starts_with('{') { "*" } else { s })
                .collect();
            statements.push(serde_json::json!({
                "Sid": format!("{stack}-{id}{event}Permission-{suffix}"),
                "Effect": "Allow",
                "Principal": {"Service": "apigateway.amazonaws.com"},
                "Action": "lambda:InvokeFunction",
                "Resource": format!("arn:aws:lambda:{region}:{account}:function:{stack}-{id}-{suffix}"),
                "Condition": {"ArnLike": {"AWS:SourceArn":
                    format!("arn:aws:execute-api:{region}:{account}:{api}/*/{method}{}", path.join("/"))}},
            }));
        }
        if statements.is_empty() {
            continue;
        }
        let policy =
            serde_json::json!({"Version": "2012-10-17", "Id": "default", "Statement": statements});
        let size = policy.to_string().len();
        println!(
            "{id}: {} invoke permissions, {size} of {LIMIT} bytes",
            statements.len()
        );
        assert!(
            size < LIMIT,
            "{id}: {} HttpApi events make a {size}-byte resource policy, over Lambda's {LIMIT}",
            statements.len()
        );
    }
}

/// Every queue is encrypted at rest, explicitly (checkov CKV_AWS_27): SQS-managed keys
/// (`SqsManagedSseEnabled: true`) or a KMS key. The alarm dead-letter queue holds stream
/// records that could not be read: alarm transitions of people's devices.
#[test]
fn every_queue_is_encrypted_at_rest_explicitly() {
    let doc = raw_template();
    let queues: Vec<_> = doc["Resources"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::SQS::Queue"))
        .collect();
    assert!(
        queues
            .iter()
            .any(|(name, _)| name.as_str() == Some("AlarmTransitionsDeadLetterQueue")),
        "the alarm dead-letter queue is a queue of the template"
    );
    for (name, queue) in queues {
        let properties = &queue["Properties"];
        assert!(
            properties["SqsManagedSseEnabled"].as_bool() == Some(true)
                || !properties["KmsMasterKeyId"].is_null(),
            "{name:?}: not encrypted explicitly"
        );
    }
}

/// A deleted image (a package's DELETE, an organization's deletion) is a delete marker in the
/// versioned image bucket: its version is gone only because the bucket's lifecycle expires
/// noncurrent versions and then the markers left alone.
#[test]
fn the_image_bucket_expires_what_deletes_leave_behind() {
    let doc = raw_template();
    let bucket = &doc["Resources"]["FirmwareBucket"]["Properties"];
    assert_eq!(
        bucket["VersioningConfiguration"]["Status"].as_str(),
        Some("Enabled")
    );
    let rules = bucket["LifecycleConfiguration"]["Rules"]
        .as_sequence()
        .expect("FirmwareBucket has lifecycle rules");
    let whole_bucket = |rule: &&yaml_serde::Value| {
        rule["Status"].as_str() == Some("Enabled")
            && rule["Prefix"].is_null()
            && rule["Filter"].is_null()
    };
    assert!(
        rules
            .iter()
            .filter(whole_bucket)
            .any(|r| r["NoncurrentVersionExpiration"]["NoncurrentDays"]
                .as_u64()
                .is_some()),
        "an enabled rule on the whole bucket expires noncurrent versions: {rules:?}"
    );
    assert!(
        rules
            .iter()
            .filter(whole_bucket)
            .any(|r| r["ExpiredObjectDeleteMarker"].as_bool() == Some(true)),
        "an enabled rule on the whole bucket removes expired delete markers: {rules:?}"
    );
}

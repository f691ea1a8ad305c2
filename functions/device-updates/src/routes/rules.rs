//! Alarm rules: `POST /me/rules`, `PATCH|DELETE /me/rules/{ruleId}`.

use crate::adapters::{if_match_version, insert_etag, json_value, Answer};
use axum::body::Bytes;
use axum::extract::State;
use lambda_http::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use shared::http::api;
use shared::http::api::{json_response, parse_json_body, ApiError, MAX_BODY_BYTES};
use shared::http::fleet::{AdminRole, Fleet};
use shared::http::gateway::PathParams;
use shared::model::alarm::ids::RuleId;
use shared::model::alarm::rule::RuleDefinition;
use shared::model::alarm::MAX_RULES_PER_OWNER;
use shared::ops::alarms::rules;
use shared::FleetTable;

#[derive(Deserialize)]
pub(crate) struct RulePath {
    #[serde(rename = "ruleId")]
    rule_id: String,
}

/// A rule id from the path: one that cannot be a rule's is no rule of the caller's (404).
fn rule_id(path: &RulePath) -> Result<RuleId, ApiError> {
    RuleId::parse(&path.rule_id).map_err(|_| ApiError::not_found("rule"))
}

/// `POST /me/rules`.
pub(crate) async fn create_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let body: serde_json::Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let definition = RuleDefinition::parse(&body)?;
    let rule = rules::create_rule(&table, &fleet.owner, definition).await?;
    let mut response = json_response(
        StatusCode::CREATED,
        &json_value(&RuleWithLimitAnswer {
            rule: &rule,
            limit: MAX_RULES_PER_OWNER,
        }),
    );
    insert_etag(&mut response, rule.version);
    if let Ok(value) =
        HeaderValue::from_str(&format!("{}/rules/{}", fleet.base_path(), rule.rule_id))
    {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// `PATCH /me/rules/{ruleId}` (If-Match: the rule's version).
pub(crate) async fn update_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RulePath>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let id = rule_id(&path)?;
    let expected = if_match_version(&headers)?;
    let body: serde_json::Value = parse_json_body(&headers, &body, MAX_BODY_BYTES)?;
    let rule = rules::update_rule(&table, &fleet.owner, &id, expected, &body).await?;
    let mut response = json_response(StatusCode::OK, &json_value(&RuleAnswer { rule: &rule }));
    insert_etag(&mut response, rule.version);
    Ok(response)
}

/// `DELETE /me/rules/{ruleId}`.
pub(crate) async fn delete_rule(
    fleet: Fleet<AdminRole>,
    State(table): State<FleetTable>,
    PathParams(path): PathParams<RulePath>,
) -> Answer {
    rules::delete_rule(&table, &fleet.owner, &rule_id(&path)?).await?;
    Ok(api::empty_response(StatusCode::NO_CONTENT))
}

/// `{"rule": ...}`.
#[derive(Serialize)]
struct RuleAnswer<T> {
    rule: T,
}

/// `{"rule": ..., "limit": n}`: a new rule and how many rules one owner may keep.
#[derive(Serialize)]
struct RuleWithLimitAnswer<T> {
    rule: T,
    limit: usize,
}

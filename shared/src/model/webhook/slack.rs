//! The Slack shape of a delivery (`"format": "slack"`): Slack's incoming webhooks take
//! `{"text": ...}` and ignore anything else, so the standard body is rendered as one line of
//! text. Every value that comes from a user (device and rule names, ids) is escaped as Slack's
//! `mrkdwn` asks (`&`, `<`, `>`), so a device named `<!channel>` cannot page a whole channel.

use serde_json::{json, Value};

/// Slack's escaping of text: `&` `<` `>` as entities.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The Slack message for a standard body (`{"type", "timestamp", "data", "ownerId" | "orgId"}`).
pub fn slack_message(standard: &Value) -> Value {
    let data = &standard["data"];
    let text_of = |v: &Value| escape(v.as_str().unwrap_or("?"));
    let device = match (data["deviceName"].as_str(), data["deviceId"].as_str()) {
        (Some(name), Some(id)) if name != id => format!("{} ({})", escape(name), escape(id)),
        (_, Some(id)) => escape(id),
        (Some(name), None) => escape(name),
        (None, None) => "a device".to_string(),
    };
    let what = match data["ruleName"].as_str() {
        Some(rule) => escape(rule),
        None => "offline".to_string(),
    };
    let reading = data["reading"]["value"]
        .as_f64()
        .map(|v| format!(", reading {v}"))
        .unwrap_or_default();
    let fleet = match standard["orgId"].as_str() {
        Some(org) => format!(" [organization {}]", escape(org)),
        None => String::new(),
    };
    let text = match standard["type"].as_str().unwrap_or_default() {
        "alarm.raised" => format!(
            ":rotating_light: Alarm raised on {device}: {what} ({}{reading}){}",
            text_of(&data["severity"]),
            data["reminder"]
                .as_u64()
                .map(|n| format!(", reminder {n}"))
                .unwrap_or_default()
        ),
        "alarm.acknowledged" => format!(":eyes: Alarm acknowledged on {device}: {what}"),
        "alarm.cleared" => format!(":white_check_mark: Alarm cleared on {device}: {what}"),
        "device.offline" => format!(
            ":warning: {device} is offline (last seen {})",
            text_of(&data["reading"]["lastSeen"])
        ),
        "device.online" => format!(":white_check_mark: {device} is back online"),
        "webhook.test" => "A test delivery from Device Fleet".to_string(),
        "webhook.confirm" => format!(
            "Device Fleet: to confirm this webhook ({}), enter the token {} in the console or POST it to /confirm",
            text_of(&data["webhookId"]),
            text_of(&data["confirmationToken"])
        ),
        "webhook.disabled" => format!(
            ":no_entry: Device Fleet disabled the webhook {} ({}): {}",
            text_of(&data["webhookId"]),
            escape(data["url"].as_str().unwrap_or_default()),
            escape(data["reason"].as_str().unwrap_or_default())
        ),
        other => format!("Device Fleet: {}", escape(other)),
    };
    json!({ "text": format!("{text}{fleet}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_cannot_mention_a_channel_or_link() {
        let body = json!({"type": "alarm.raised", "ownerId": "u", "data": {
            "deviceId": "d-1", "deviceName": "<!channel> & <https://evil|click>",
            "ruleName": "Too <b>hot</b>", "severity": "critical",
            "reading": {"value": 9.5}}});
        let text = slack_message(&body)["text"].as_str().unwrap().to_string();
        assert_eq!(
            text,
            ":rotating_light: Alarm raised on &lt;!channel&gt; &amp; &lt;https://evil|click&gt; (d-1): \
             Too &lt;b&gt;hot&lt;/b&gt; (critical, reading 9.5)"
        );
        assert!(!text.contains('<') && !text.contains('>'));
    }

    #[test]
    fn each_event_reads_as_a_line_with_its_fleet() {
        let offline = json!({"type": "device.offline", "orgId": "o1", "data": {
            "deviceId": "d-1", "reading": {"lastSeen": "2026-11-28T10:00:00.000Z"}}});
        assert_eq!(
            slack_message(&offline)["text"],
            ":warning: d-1 is offline (last seen 2026-11-28T10:00:00.000Z) [organization o1]"
        );
        let confirm = json!({"type": "webhook.confirm", "ownerId": "u", "data": {
            "webhookId": "wh_1", "confirmationToken": "whconf_abc"}});
        assert!(slack_message(&confirm)["text"]
            .as_str()
            .unwrap()
            .contains("token whconf_abc"));
    }
}

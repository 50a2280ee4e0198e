//! What a notification says, per format: pure functions of the notice.
//! A payload carries only the notice's own fields (which name objects and
//! never hold a Secret's value); credentials go in headers
//! ([`super::request`]), never here.

use serde_json::{Value, json};
use tether_core::notice::{Notice, Severity};

use super::route::Format;

/// The version of the JSON schema; it changes only when a field is
/// removed or its meaning changes (new fields may appear in any version).
pub const JSON_VERSION: u32 = 1;

/// The body of a request in `format`.
pub fn body(format: Format, notice: &Notice) -> Vec<u8> {
    let value = match format {
        Format::Json => json(notice),
        Format::Slack => slack(notice),
    };
    serde_json::to_vec(&value).expect("a JSON value serializes")
}

/// The `json` format, version [`JSON_VERSION`]: every field is always
/// present (`null` when unknown, `{}` for no labels).
///
/// ```json
/// {"version": 1, "idempotencyKey": "…", "event": "state-changed",
///  "severity": "Warning", "namespace": "shop", "name": "web",
///  "labels": {"team": "payments"}, "message": "…", "revision": "3f2a…",
///  "state": "AppliedButFailing", "previousState": "Converged",
///  "at": "2025-01-01T00:00:00Z"}
/// ```
pub fn json(notice: &Notice) -> Value {
    json!({
        "version": JSON_VERSION,
        "idempotencyKey": notice.key,
        "event": notice.kind,
        "severity": notice.severity,
        "namespace": notice.namespace,
        "name": notice.name,
        "labels": notice.labels,
        "message": notice.message,
        "revision": notice.revision,
        "state": notice.state,
        "previousState": notice.previous_state,
        "at": notice.at,
    })
}

/// The `slack` format: a `text` for notifications and clients without
/// blocks, and `blocks` — a header (app and event), the message, the
/// state, revision and severity as fields, and when and which key.
pub fn slack(notice: &Notice) -> Value {
    let app = format!("{}/{}", notice.namespace, notice.name);
    let mark = match notice.severity {
        Severity::Warning => ":warning: ",
        Severity::Normal => "",
    };
    let text = format!(
        "{mark}{}: {}: {}",
        escape(&app),
        notice.kind,
        escape(&notice.message)
    );
    let mut fields = Vec::new();
    let state = match (notice.previous_state, notice.state) {
        (Some(before), Some(after)) => Some(format!("{before} → {after}")),
        (None, Some(after)) => Some(after.to_string()),
        (Some(before), None) => Some(format!("{before} → ?")),
        (None, None) => None,
    };
    if let Some(state) = state {
        fields.push(field("State", &state));
    }
    if let Some(revision) = &notice.revision {
        fields.push(field("Revision", &format!("`{}`", escape(short(revision)))));
    }
    fields.push(field("Severity", notice.severity.as_str()));
    json!({
        "text": text,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "emoji": true,
                "text": clip(&format!("{app}: {}", notice.kind), 150)}},
            {"type": "section", "text": {"type": "mrkdwn",
                "text": clip(&escape(&notice.message), 3000)}},
            {"type": "section", "fields": fields},
            {"type": "context", "elements": [{"type": "mrkdwn",
                "text": escape(&format!("{} · key {}", notice.at, notice.key))}]},
        ],
    })
}

fn field(title: &str, value: &str) -> Value {
    json!({"type": "mrkdwn", "text": format!("*{title}*\n{value}")})
}

/// Slack's three control characters, escaped as its docs ask.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A commit id to 12 characters, as people quote them.
fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// At most `limit` characters (Slack rejects longer texts), ending in `…`
/// when cut.
fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(limit - 1).collect();
    clipped.push('…');
    clipped
}

#[cfg(test)]
mod tests {
    use tether_core::OperationalState;
    use tether_core::notice::NoticeKind;

    use super::*;

    pub(crate) fn state_changed() -> Notice {
        Notice {
            kind: NoticeKind::StateChanged,
            severity: Severity::Warning,
            namespace: "shop".into(),
            name: "web".into(),
            labels: [("team".to_string(), "payments".to_string())].into(),
            message: "Deployment shop/web: 0/3 replicas available <since 5m>".into(),
            revision: Some("3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39".into()),
            state: Some(OperationalState::AppliedButFailing),
            previous_state: Some(OperationalState::Converged),
            at: "2025-01-01T00:00:00Z".into(),
            key: "6c1b-uid/state-changed/2025-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn the_json_payload_is_the_documented_schema() {
        let expected = json!({
            "version": 1,
            "idempotencyKey": "6c1b-uid/state-changed/2025-01-01T00:00:00Z",
            "event": "state-changed",
            "severity": "Warning",
            "namespace": "shop",
            "name": "web",
            "labels": {"team": "payments"},
            "message": "Deployment shop/web: 0/3 replicas available <since 5m>",
            "revision": "3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39",
            "state": "AppliedButFailing",
            "previousState": "Converged",
            "at": "2025-01-01T00:00:00Z",
        });
        assert_eq!(json(&state_changed()), expected);
        let bytes = body(Format::Json, &state_changed());
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), expected);
    }

    #[test]
    fn the_json_payload_has_every_field_even_when_unknown() {
        let mut notice = state_changed();
        notice.kind = NoticeKind::DriftDetected;
        (notice.revision, notice.state, notice.previous_state) = (None, None, None);
        notice.labels.clear();
        let payload = json(&notice);
        assert_eq!(payload["event"], "drift-detected");
        assert_eq!(payload["labels"], json!({}));
        for field in ["revision", "state", "previousState"] {
            assert_eq!(payload[field], Value::Null, "{field}");
        }
    }

    #[test]
    fn the_slack_payload_has_text_a_header_the_message_and_the_fields() {
        let expected = json!({
            "text": ":warning: shop/web: state-changed: Deployment shop/web: 0/3 replicas available &lt;since 5m&gt;",
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "emoji": true,
                    "text": "shop/web: state-changed"}},
                {"type": "section", "text": {"type": "mrkdwn",
                    "text": "Deployment shop/web: 0/3 replicas available &lt;since 5m&gt;"}},
                {"type": "section", "fields": [
                    {"type": "mrkdwn", "text": "*State*\nConverged → AppliedButFailing"},
                    {"type": "mrkdwn", "text": "*Revision*\n`3f2a9c1d8e7b`"},
                    {"type": "mrkdwn", "text": "*Severity*\nWarning"},
                ]},
                {"type": "context", "elements": [{"type": "mrkdwn",
                    "text": "2025-01-01T00:00:00Z · key 6c1b-uid/state-changed/2025-01-01T00:00:00Z"}]},
            ],
        });
        assert_eq!(slack(&state_changed()), expected);
    }

    #[test]
    fn a_slack_header_is_clipped_to_what_slack_accepts() {
        let mut notice = state_changed();
        notice.name = "x".repeat(300);
        notice.severity = Severity::Normal;
        let payload = slack(&notice);
        let header = payload["blocks"][0]["text"]["text"].as_str().unwrap();
        assert_eq!(header.chars().count(), 150);
        assert!(header.ends_with('…'));
        assert!(payload["text"].as_str().unwrap().starts_with("shop/xxx"));
    }
}

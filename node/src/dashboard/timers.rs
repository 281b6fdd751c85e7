//! `/timers`: timer messages not yet due and open transactions (half
//! messages neither committed nor rolled back), per broker and topic,
//! from each broker's runtime info.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::html::{error_box, esc, num, table};
use super::Dash;

/// A runtime-info value holding a JSON object of topic → count.
fn counts(json: Option<&String>) -> Result<BTreeMap<String, u64>, String> {
    let Some(json) = json else {
        return Ok(BTreeMap::new());
    };
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("unreadable figures: {e}"))?;
    let object = value
        .as_object()
        .ok_or_else(|| "unreadable figures: not an object".to_owned())?;
    Ok(object
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
        .collect())
}

pub(super) async fn page(State(d): State<Arc<Dash>>, headers: HeaderMap) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let brokers = match ctx.admin.cluster().await {
        Ok(b) => b,
        Err(e) => {
            return ctx.page(
                "Timers and transactions",
                &error_box(&format!("Cannot read the cluster: {e}")),
            )
        }
    };
    let mut timers = Vec::new();
    let mut halves = Vec::new();
    let mut body = String::new();
    for b in &brokers {
        let who = format!("{} ({})", b.broker_name, b.addr);
        for (key, rows) in [
            ("sluicePendingTimers", &mut timers),
            ("sluicePendingHalfMessages", &mut halves),
        ] {
            match counts(b.runtime.get(key)) {
                Ok(c) => rows.extend(c.into_iter().map(|(t, n)| vec![esc(&who), esc(&t), num(n)])),
                Err(e) => body.push_str(&error_box(&format!("{who}: {e}"))),
            }
        }
    }
    let total = |rows: &[Vec<String>]| rows.len();
    let _ = write!(
        body,
        "<h2>Timer messages not yet due</h2>{}<h2>Open transactions (half messages)</h2>{}",
        if total(&timers) == 0 {
            "<p>None.</p>".to_owned()
        } else {
            table(&["Broker", "Topic", "Pending"], &timers)
        },
        if total(&halves) == 0 {
            "<p>None.</p>".to_owned()
        } else {
            table(&["Broker", "Topic", "Open"], &halves)
        },
    );
    ctx.page("Timers and transactions", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_objects_and_refuse_garbage_without_panicking() {
        let c = counts(Some(&r#"{"T":3,"U":1}"#.to_owned())).expect("object");
        assert_eq!(c["T"], 3);
        assert!(counts(None).expect("absent").is_empty());
        assert!(counts(Some(&"[1]".to_owned())).is_err());
        assert!(counts(Some(&"{".to_owned())).is_err());
    }
}

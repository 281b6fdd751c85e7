//! `/topics`: every topic with its queues' min/max offsets and TPS (from
//! two samples of the summed max offsets), a create form, and delete
//! behind a confirmation page.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use sluice_client::admin::TopicOptions;

use super::html::{csrf_field, error_box, esc, num, parse_form, table, url};
use super::wire::{queue_offsets, total, QueueRow};
use super::{lock, Dash, Posted};

/// Samples older than this give no rate.
const SAMPLE_MAX_AGE_MS: u64 = 10 * 60 * 1000;

/// Messages per second since the last sample of `topic`, updating the
/// sample when at least a second has passed.
fn tps(d: &Dash, topic: &str, sum_max: i64) -> Option<f64> {
    let now = d.now_ms();
    let mut samples = lock(&d.samples);
    let prev = samples.get(topic).copied();
    let fresh = prev.is_none_or(|(at, _)| now.saturating_sub(at) >= 1000);
    if fresh {
        samples.insert(topic.to_owned(), (now, sum_max));
    }
    let (at, before) = prev?;
    let dt = now.saturating_sub(at);
    if !(1000..=SAMPLE_MAX_AGE_MS).contains(&dt) {
        return None;
    }
    #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
    let rate = sum_max.saturating_sub(before).max(0) as f64 * 1000.0 / dt as f64;
    Some(rate)
}

fn queues_cell(rows: &[QueueRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|q| vec![esc(&q.broker), num(q.queue), num(q.min), num(q.max)])
        .collect();
    table(&["Broker", "Queue", "Min offset", "Max offset"], &cells)
}

pub(super) async fn page(State(d): State<Arc<Dash>>, headers: HeaderMap) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let mut body = create_form(&ctx.csrf);
    let topics = match ctx.admin.list_topics().await {
        Ok(t) => t,
        Err(e) => {
            body.push_str(&error_box(&format!("Cannot list topics: {e}")));
            return ctx.page("Topics", &body);
        }
    };
    let now = d.now_ms();
    lock(&d.samples).retain(|_, (at, _)| now.saturating_sub(*at) <= SAMPLE_MAX_AGE_MS);
    let mut rows = Vec::new();
    for topic in &topics {
        let link = format!(
            "<a href=\"/messages?topic={}\" id=\"topic-{}\">{}</a>",
            url(topic),
            esc(topic),
            esc(topic)
        );
        let delete = format!(
            "<a href=\"/topics/delete?topic={}\">delete…</a>",
            url(topic)
        );
        match queue_offsets(&ctx.admin, topic).await {
            Ok(queues) => {
                let sum_max = total(queues.iter().map(|q| q.max));
                let stored = total(queues.iter().map(|q| q.max.saturating_sub(q.min)));
                let rate = tps(&d, topic, sum_max).map_or("—".to_owned(), |r| format!("{r:.1}"));
                rows.push(vec![
                    link,
                    num(queues.len()),
                    num(stored),
                    num(rate),
                    queues_cell(&queues),
                    delete,
                ]);
            }
            Err(e) => rows.push(vec![
                link,
                "—".into(),
                "—".into(),
                "—".into(),
                esc(&e.to_string()),
                delete,
            ]),
        }
    }
    let _ = write!(body, "<h2>{} topics</h2>", topics.len());
    body.push_str(&table(
        &[
            "Topic",
            "Queues",
            "Messages held",
            "TPS",
            "Queues (offsets)",
            "",
        ],
        &rows,
    ));
    ctx.page("Topics", &body)
}

fn create_form(csrf: &str) -> String {
    format!(
        "<form method=post action=/topics/create id=create-topic><fieldset><legend>Create topic</legend>{}\
         <label>Name <input name=topic id=new-topic required maxlength=127 pattern=\"[A-Za-z0-9_%|-]+\"></label> \
         <label>Queues <input name=queues type=number min=1 max=1024 value=8></label> \
         <button id=create-button>Create</button></fieldset></form>",
        csrf_field(csrf)
    )
}

pub(super) async fn create(Posted { form, ctx, .. }: Posted) -> Response {
    let topic = form.get("topic").map_or("", |t| t.trim());
    let queues = form
        .get("queues")
        .map_or(Ok(8), |q| q.trim().parse::<i32>());
    let Ok(queues) = queues else {
        return ctx.page(
            "Create topic",
            &error_box("The queue count must be a number."),
        );
    };
    let options = TopicOptions {
        queues,
        ..TopicOptions::default()
    };
    let body = match ctx.admin.create_topic(topic, &options).await {
        Ok(()) => format!(
            "<p class=ok>Topic <b>{}</b> created with {queues} queues.</p><p><a href=/topics>Back to topics</a></p>",
            esc(topic)
        ),
        Err(e) => format!(
            "{}<p><a href=/topics>Back to topics</a></p>",
            error_box(&format!("Cannot create topic {topic:?}: {e}"))
        ),
    };
    ctx.page("Create topic", &body)
}

pub(super) async fn confirm_delete(
    State(d): State<Arc<Dash>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let q = parse_form(query.unwrap_or_default().as_bytes());
    let topic = q.get("topic").map_or("", String::as_str);
    let body = format!(
        "<p>Delete topic <b>{t}</b> from every broker and name server? Its messages \
         can no longer be consumed.</p><form method=post action=/topics/delete>{}\
         <input type=hidden name=topic value=\"{t}\"><button id=confirm-delete>Delete {t}</button> \
         <a href=/topics>Cancel</a></form>",
        csrf_field(&ctx.csrf),
        t = esc(topic)
    );
    ctx.page("Delete topic", &body)
}

pub(super) async fn delete(Posted { form, ctx, .. }: Posted) -> Response {
    let topic = form.get("topic").map_or("", String::as_str);
    let body = match ctx.admin.delete_topic(topic).await {
        Ok(()) => format!(
            "<p class=ok>Topic <b>{}</b> deleted.</p><p><a href=/topics>Back to topics</a></p>",
            esc(topic)
        ),
        Err(e) => error_box(&format!("Cannot delete topic {topic:?}: {e}")),
    };
    ctx.page("Delete topic", &body)
}

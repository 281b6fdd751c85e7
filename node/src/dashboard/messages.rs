//! `/messages`: look a message up by topic and key, by message id, or by
//! topic, queue and offset; show its properties and a body preview
//! (escaped, truncated, non-UTF-8 as hex); and for a dead letter
//! (`%DLQ%group`), resend a copy to `%RETRY%group`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use sluice_client::MessageExt;
use sluice_core::message::DLQ_GROUP_TOPIC_PREFIX;

use super::html::{csrf_field, error_box, esc, format_time, num, parse_form, table, url};
use super::wire::{message_at, resend_to_retry};
use super::{Ctx, Dash, Posted};

/// Most body characters (UTF-8) or bytes (hex) shown.
const PREVIEW_CHARS: usize = 4096;
const PREVIEW_HEX_BYTES: usize = 1024;
/// Most messages a key lookup shows.
const KEY_MATCHES_MAX: i32 = 32;

/// The body as escaped text (or hex when it is not UTF-8), truncated.
pub fn preview(body: &[u8]) -> String {
    if let Ok(text) = std::str::from_utf8(body) {
        let shown: String = text.chars().take(PREVIEW_CHARS).collect();
        let more = if shown.len() < text.len() {
            format!("\n… ({} bytes in all)", body.len())
        } else {
            String::new()
        };
        return format!("<pre class=body>{}{}</pre>", esc(&shown), esc(&more));
    }
    let mut hex = String::new();
    for (i, b) in body.iter().take(PREVIEW_HEX_BYTES).enumerate() {
        let sep = if i % 32 == 31 { "\n" } else { " " };
        let _ = write!(hex, "{b:02x}{sep}");
    }
    if body.len() > PREVIEW_HEX_BYTES {
        let _ = write!(hex, "\n… ({} bytes in all)", body.len());
    }
    format!("<p>Not UTF-8; hex:</p><pre class=body>{}</pre>", esc(&hex))
}

fn forms(q: &BTreeMap<String, String>) -> String {
    let v = |k: &str| esc(q.get(k).map_or("", String::as_str));
    format!(
        "<form method=get action=/messages id=by-key><fieldset><legend>By key</legend>\
         <label>Topic <input name=topic value=\"{t}\" required></label> \
         <label>Key <input name=key value=\"{k}\" required id=lookup-key></label> \
         <button id=lookup-button>Find</button></fieldset></form>\
         <form method=get action=/messages id=by-id><fieldset><legend>By message id</legend>\
         <label>Id <input name=id value=\"{i}\" required size=40></label> \
         <label>Topic (for a client id) <input name=topic value=\"{t}\"></label> \
         <button>Find</button></fieldset></form>\
         <form method=get action=/messages id=by-offset><fieldset><legend>By queue offset</legend>\
         <label>Topic <input name=topic value=\"{t}\" required></label> \
         <label>Broker <input name=broker value=\"{b}\" placeholder=\"first\"></label> \
         <label>Queue <input name=queue type=number min=0 value=\"{qu}\" required></label> \
         <label>Offset <input name=offset type=number min=0 value=\"{o}\" required></label> \
         <button>Show</button></fieldset></form>",
        t = v("topic"),
        k = v("key"),
        i = v("id"),
        b = v("broker"),
        qu = v("queue"),
        o = v("offset"),
    )
}

fn render(ctx: &Ctx, m: &MessageExt) -> String {
    let facts = vec![
        vec![esc("Message id"), esc(m.msg_id())],
        vec![esc("Offset id"), esc(&m.offset_msg_id)],
        vec![esc("Topic"), esc(&m.topic)],
        vec![
            esc("Broker / queue / offset"),
            esc(&format!(
                "{} / {} / {}",
                m.broker_name, m.queue_id, m.queue_offset
            )),
        ],
        vec![esc("Stored (UTC)"), esc(&format_time(m.store_timestamp_ms))],
        vec![
            esc("Born (UTC)"),
            esc(&format!(
                "{} from {}",
                format_time(m.born_timestamp_ms),
                m.born_host
            )),
        ],
        vec![esc("Reconsumed"), num(m.reconsume_times)],
        vec![esc("Body size"), num(m.body.len())],
    ];
    let props: Vec<Vec<String>> = m
        .properties
        .iter()
        .map(|(k, v)| vec![esc(k), esc(v)])
        .collect();
    let mut out = format!(
        "<section class=message><h2>{}</h2>{}<h3>Properties</h3>{}<h3>Body</h3>{}",
        esc(m.msg_id()),
        table(&["", ""], &facts),
        table(&["Key", "Value"], &props),
        preview(&m.body)
    );
    if let Some(group) = m.topic.strip_prefix(DLQ_GROUP_TOPIC_PREFIX) {
        let _ = write!(
            out,
            "<form method=post action=/messages/resend>{}<input type=hidden name=id value=\"{}\">\
             <input type=hidden name=topic value=\"{}\"><button>Resend to %RETRY%{}</button> \
             (group <a href=\"/groups/{}\">{}</a> consumes it again)</form>",
            csrf_field(&ctx.csrf),
            esc(&m.offset_msg_id),
            esc(&m.topic),
            esc(group),
            url(group),
            esc(group)
        );
    }
    out.push_str("</section>");
    out
}

async fn lookup(ctx: &Ctx, q: &BTreeMap<String, String>) -> String {
    let get = |k: &str| q.get(k).map_or("", |v| v.trim());
    let (topic, key, id) = (get("topic"), get("key"), get("id"));
    let found = if !key.is_empty() {
        ctx.admin.query_by_key(topic, key, KEY_MATCHES_MAX).await
    } else if !id.is_empty() {
        let topic = (!topic.is_empty()).then_some(topic);
        ctx.admin
            .view_message(id, topic)
            .await
            .map(|m| m.into_iter().collect())
    } else if !get("offset").is_empty() {
        let (Ok(queue), Ok(offset)) = (get("queue").parse::<i32>(), get("offset").parse::<i64>())
        else {
            return error_box("Queue and offset must be numbers.");
        };
        message_at(&ctx.admin, topic, get("broker"), queue, offset)
            .await
            .map(|m| m.into_iter().collect())
    } else {
        return String::new();
    };
    match found {
        Ok(list) if list.is_empty() => "<p class=err>No message found.</p>".to_owned(),
        Ok(list) => {
            let mut out = format!("<h2>{} found</h2>", list.len());
            for m in &list {
                out.push_str(&render(ctx, m));
            }
            out
        }
        Err(e) => error_box(&format!("Lookup failed: {e}")),
    }
}

pub(super) async fn page(
    State(d): State<Arc<Dash>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let q = parse_form(query.unwrap_or_default().as_bytes());
    let body = format!("{}{}", forms(&q), lookup(&ctx, &q).await);
    ctx.page("Messages", &body)
}

pub(super) async fn resend(Posted { form, ctx, .. }: Posted) -> Response {
    let id = form.get("id").map_or("", String::as_str);
    let topic = form.get("topic").map_or("", String::as_str);
    let body = match ctx.admin.view_message(id, Some(topic)).await {
        Ok(Some(m)) => match m.topic.strip_prefix(DLQ_GROUP_TOPIC_PREFIX) {
            Some(group) => match resend_to_retry(&ctx.admin, &m, group).await {
                Ok((retry, offset)) => format!(
                    "<p class=ok>Stored a copy in <b>{}</b> at offset {offset}; group \
                     <a href=\"/groups/{}\">{}</a> consumes it again.</p>",
                    esc(&retry),
                    url(group),
                    esc(group)
                ),
                Err(e) => error_box(&format!("Cannot resend: {e}")),
            },
            None => error_box("Only a message of a %DLQ% topic can be resent to its retry topic."),
        },
        Ok(None) => error_box("No such message."),
        Err(e) => error_box(&format!("Cannot read the message: {e}")),
    };
    ctx.page("Resend dead letter", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_escape_truncate_and_hex() {
        assert_eq!(
            preview(b"<b>hi</b>"),
            "<pre class=body>&lt;b&gt;hi&lt;/b&gt;</pre>"
        );
        let long = "x".repeat(PREVIEW_CHARS + 10);
        assert!(
            preview(long.as_bytes()).contains(&format!("({} bytes in all)", PREVIEW_CHARS + 10))
        );
        let hex = preview(&[0xff, 0x00, 0x3c]);
        assert!(hex.contains("ff 00 3c"), "{hex}");
    }
}

//! `/groups` (every subscription group with its total lag) and
//! `/groups/{group}` (members, per-queue committed offset and lag, and a
//! reset-offset-by-time form).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::html::{csrf_field, error_box, esc, format_time, num, parse_time, table, url};
use super::wire::{groups, lag, members, total};
use super::{Ctx, Dash, Posted};

pub(super) async fn list(State(d): State<Arc<Dash>>, headers: HeaderMap) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let names = match groups(&ctx.admin).await {
        Ok(g) => g,
        Err(e) => return ctx.page("Groups", &error_box(&format!("Cannot list groups: {e}"))),
    };
    let mut rows = Vec::new();
    for g in &names {
        let link = format!("<a href=\"/groups/{}\">{}</a>", url(g), esc(g));
        let (queues, lag) = match ctx.admin.group_progress(g, None).await {
            Ok(p) => (num(p.len()), num(total(p.iter().map(lag)))),
            Err(e) => ("—".to_owned(), esc(&e.to_string())),
        };
        rows.push(vec![link, queues, lag]);
    }
    let body = format!(
        "<h2>{} groups</h2>{}",
        names.len(),
        table(&["Group", "Queues with offsets", "Lag (messages)"], &rows)
    );
    ctx.page("Groups", &body)
}

pub(super) async fn page(
    State(d): State<Arc<Dash>>,
    headers: HeaderMap,
    Path(group): Path<String>,
) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let body = group_body(&ctx, &group).await;
    ctx.page(&format!("Group {group}"), &body)
}

async fn group_body(ctx: &Ctx, group: &str) -> String {
    let mut body = String::new();
    match members(&ctx.admin, group).await {
        Ok(m) if m.is_empty() => body.push_str("<h2>Members</h2><p>No live consumer.</p>"),
        Ok(m) => {
            let rows: Vec<Vec<String>> = m.iter().map(|c| vec![esc(c)]).collect();
            let _ = write!(
                body,
                "<h2>Members ({})</h2>{}",
                m.len(),
                table(&["Client id"], &rows)
            );
        }
        Err(e) => body.push_str(&error_box(&format!("Cannot list members: {e}"))),
    }
    let progress = match ctx.admin.group_progress(group, None).await {
        Ok(p) => p,
        Err(e) => {
            body.push_str(&error_box(&format!("Cannot read offsets: {e}")));
            Vec::new()
        }
    };
    let all = total(progress.iter().map(lag));
    let rows: Vec<Vec<String>> = progress
        .iter()
        .map(|p| {
            vec![
                esc(&p.queue.topic),
                esc(&p.queue.broker_name),
                num(p.queue.queue_id),
                num(p.broker_offset),
                num(p.consumer_offset),
                num(lag(p)),
                esc(&format_time(p.last_timestamp_ms)),
            ]
        })
        .collect();
    let _ = write!(
        body,
        "<h2>Offsets</h2><p>Total lag: <b id=total-lag>{all}</b> messages</p>{}",
        table(
            &[
                "Topic",
                "Broker",
                "Queue",
                "Max offset",
                "Committed",
                "Lag",
                "Last consumed (UTC)"
            ],
            &rows
        )
    );
    let topics: BTreeSet<&str> = progress.iter().map(|p| p.queue.topic.as_str()).collect();
    body.push_str(&reset_form(ctx, group, &topics));
    body
}

fn reset_form(ctx: &Ctx, group: &str, topics: &BTreeSet<&str>) -> String {
    let options = topics.iter().fold(String::new(), |mut out, t| {
        let _ = write!(out, "<option value=\"{0}\">{0}</option>", esc(t));
        out
    });
    format!(
        "<h2>Reset offsets</h2><form method=post action=\"/groups/{}/reset\" id=reset-form><fieldset>{}\
         <label>Topic <input name=topic list=group-topics required id=reset-topic></label>\
         <datalist id=group-topics>{options}</datalist> \
         <label>To the first message stored at or after <input name=time id=reset-time required \
         placeholder=\"2026-01-31T12:00 (UTC), ms, earliest or latest\"></label> \
         <button id=reset-button>Reset</button></fieldset></form>\
         <p>Times are UTC. Live consumers of the group are told and restart their queues there.</p>",
        url(group),
        csrf_field(&ctx.csrf)
    )
}

pub(super) async fn reset(Path(group): Path<String>, Posted { form, ctx, .. }: Posted) -> Response {
    let topic = form.get("topic").map_or("", |t| t.trim());
    let title = format!("Reset {group}");
    let Some(time) = form.get("time").and_then(|t| parse_time(t)) else {
        return ctx.page(
            &title,
            &error_box(
                "The time must be YYYY-MM-DDTHH:MM[:SS] (UTC), milliseconds, earliest or latest.",
            ),
        );
    };
    let back = format!(
        "<p><a href=\"/groups/{}\">Back to the group</a></p>",
        url(&group)
    );
    let body = match ctx.admin.reset_offset_by_time(&group, topic, time).await {
        Ok(offsets) => {
            let rows: Vec<Vec<String>> = offsets
                .iter()
                .map(|(q, o)| vec![esc(&q.broker_name), num(q.queue_id), num(o)])
                .collect();
            format!(
                "<p class=ok>Offsets of <b>{}</b> on <b>{}</b> reset.</p>{}{back}",
                esc(&group),
                esc(topic),
                table(&["Broker", "Queue", "New offset"], &rows)
            )
        }
        Err(e) => format!("{}{back}", error_box(&format!("Cannot reset: {e}"))),
    };
    ctx.page(&title, &body)
}

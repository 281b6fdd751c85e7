//! The long admin verbs that touch every broker: `sluice offset reset` and
//! `sluice topic delete`. Each reports its steps on stderr as they finish
//! ("reset 8/16 queues on broker-a (1/2 brokers)"), unless `--json`;
//! stdout carries only the result, as scripts expect.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::json;
use sluice_client::admin::Step;
use sluice_client::{Admin, TlsTransport};
use sluice_core::{Clock, SystemClock};

use crate::endpoint::{client, Endpoint};
use crate::verbs::Output;

/// `sluice offset ...`
#[derive(clap::Subcommand, Debug)]
pub enum OffsetCmd {
    /// Move a group's offsets to the first message stored at or after a
    /// time. Stop the group's consumers first.
    Reset {
        /// Consumer group.
        #[arg(long)]
        group: String,
        /// Topic.
        #[arg(long)]
        topic: String,
        /// Milliseconds since the epoch, or `now`.
        #[arg(long)]
        timestamp: String,
    },
}

/// The stderr line for a step of an offset reset.
pub fn reset_line(step: &Step) -> String {
    let mut line = match step.queues {
        Some((done, total)) => format!("reset {done}/{total} queues on {}", step.target),
        None => format!("reset queues on {}", step.target),
    };
    let _ = write!(line, " ({}/{} brokers)", step.done, step.total);
    line
}

/// The stderr line for a step of a topic delete.
pub fn delete_line(topic: &str, step: &Step) -> String {
    let place = if step.namesrv {
        "name server"
    } else {
        "broker"
    };
    format!(
        "deleted {topic} on {place} {} ({}/{})",
        step.target, step.done, step.total
    )
}

/// Prints a step on stderr unless the output is JSON.
fn report(out: Output, line: &str) {
    if !out.json {
        eprintln!("{line}");
    }
}

/// Runs `sluice offset`.
pub async fn offset(cmd: OffsetCmd, endpoint: &Endpoint, out: Output) -> anyhow::Result<()> {
    let OffsetCmd::Reset {
        group,
        topic,
        timestamp,
    } = cmd;
    let ms: i64 = if timestamp == "now" {
        i64::try_from(SystemClock::new().wall_ms()).unwrap_or(i64::MAX)
    } else {
        timestamp.parse().with_context(|| {
            format!("--timestamp `{timestamp}` is not ms since the epoch or `now`")
        })?
    };
    let admin = Admin::new(client(endpoint));
    let reset = admin
        .reset_offset_by_time_with_progress(&group, &topic, ms, |s| report(out, &reset_line(s)))
        .await;
    admin.client().shutdown().await;
    let reset = reset.with_context(|| format!("resetting {group} on {topic}"))?;
    let mut human = String::new();
    let mut rows = Vec::new();
    for (q, o) in &reset {
        let _ = writeln!(human, "{}:{}:{} -> {o}", q.topic, q.broker_name, q.queue_id);
        rows.push(json!({"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id, "offset": o}));
    }
    out.print(
        &human,
        &json!({"group": group, "timestamp": ms, "queues": rows}),
    );
    Ok(())
}

/// `sluice topic delete`: from every broker, then every name server.
pub async fn delete_topic(
    admin: &Admin<TlsTransport, SystemClock>,
    topic: &str,
    out: Output,
) -> anyhow::Result<()> {
    admin
        .delete_topic_with_progress(topic, |s| report(out, &delete_line(topic, s)))
        .await
        .with_context(|| format!("deleting topic {topic}"))?;
    out.print(
        &format!("deleted topic {topic}\n"),
        &json!({"topic": topic, "deleted": true}),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(target: &str, namesrv: bool, done: usize, queues: Option<(usize, usize)>) -> Step {
        Step {
            target: target.to_owned(),
            namesrv,
            done,
            total: 3,
            queues,
        }
    }

    #[test]
    fn reset_steps_count_queues_and_brokers() {
        assert_eq!(
            reset_line(&step("broker-a", false, 1, Some((8, 24)))),
            "reset 8/24 queues on broker-a (1/3 brokers)"
        );
        assert_eq!(
            reset_line(&step("broker-b", false, 2, None)),
            "reset queues on broker-b (2/3 brokers)"
        );
    }

    #[test]
    fn delete_steps_name_brokers_and_name_servers() {
        assert_eq!(
            delete_line("T", &step("broker-a", false, 1, None)),
            "deleted T on broker broker-a (1/3)"
        );
        assert_eq!(
            delete_line("T", &step("127.0.0.1:9876", true, 3, None)),
            "deleted T on name server 127.0.0.1:9876 (3/3)"
        );
    }
}

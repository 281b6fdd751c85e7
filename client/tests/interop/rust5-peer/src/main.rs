//! rust5-peer: Sluice's RocketMQ 5 gRPC endpoint driven by the official
//! RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0, apache/rocketmq-clients),
//! one subcommand per feature:
//!
//!   rust5-peer produce        --endpoint HOST:PORT --topic T [--count N] [--body-prefix P]
//!                             [--tag TAG] [--keys K1,K2] [--prop K=V]... [--group G]...
//!                             [--delay-secs S]
//!   rust5-peer transaction    --endpoint HOST:PORT --topic T [--commit N] [--rollback N]
//!                             [--check-commit N] [--check-rollback N] [--prop K=V]...
//!                             [--wait-secs W]
//!   rust5-peer simple-consume --endpoint HOST:PORT --topic T --group G --expect N
//!                             [--filter TAGS] [--invisible-secs S] [--await-secs A]
//!                             [--batch B] [--skip-first-ack] [--ack-stale]
//!                             [--linger-secs L] [--wait-secs W]
//!
//! Every outcome is one JSON object per stdout line (`"event"` says which);
//! the test asserts on them. Any failure prints an `error` event and exits
//! non-zero. The client logs to stderr (slog, its own format).
//!
//! The 5.0.0 client has no `ChangeInvisibleDuration` (nor push consumer):
//! the invisible duration is chosen per receive (`--invisible-secs`).

mod consume;
mod produce;
mod transaction;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use rocketmq::conf::ClientOption;
use rocketmq::model::message::MessageView;
use serde_json::{json, Value};

/// Parsed `--flag value` arguments (and bare `--switch`es) of one subcommand.
pub(crate) struct Args {
    values: BTreeMap<String, Vec<String>>,
    switches: Vec<String>,
}

/// Flags that take no value.
const SWITCHES: &[&str] = &["--skip-first-ack", "--ack-stale"];

impl Args {
    fn parse(raw: &[String]) -> Result<Self> {
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut switches = Vec::new();
        let mut it = raw.iter();
        while let Some(flag) = it.next() {
            if !flag.starts_with("--") {
                bail!("unexpected argument {flag:?}");
            }
            if SWITCHES.contains(&flag.as_str()) {
                switches.push(flag.clone());
                continue;
            }
            let value = it.next().with_context(|| format!("{flag} needs a value"))?;
            values.entry(flag.clone()).or_default().push(value.clone());
        }
        Ok(Self { values, switches })
    }

    /// The last value of `flag`, if given.
    pub(crate) fn opt(&self, flag: &str) -> Option<&str> {
        self.values
            .get(flag)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value of a repeatable `flag`.
    pub(crate) fn all(&self, flag: &str) -> &[String] {
        self.values.get(flag).map_or(&[], Vec::as_slice)
    }

    /// The value of a required `flag`.
    pub(crate) fn req(&self, flag: &str) -> Result<&str> {
        self.opt(flag)
            .with_context(|| format!("{flag} is required"))
    }

    /// `flag` as a number, or `default`.
    pub(crate) fn num<N: std::str::FromStr>(&self, flag: &str, default: N) -> Result<N> {
        match self.opt(flag) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| anyhow!("{flag} {v:?} is not a number")),
        }
    }

    /// Whether the switch `flag` was given.
    pub(crate) fn has(&self, flag: &str) -> bool {
        self.switches.iter().any(|s| s == flag)
    }
}

/// Prints one JSON event line.
pub(crate) fn emit(event: &str, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        map.insert("event".to_owned(), Value::from(event));
    }
    println!("{fields}");
}

/// Milliseconds since the epoch on this machine's clock.
#[allow(
    clippy::disallowed_methods,
    reason = "the peer reports wall-clock times; the workspace's Clock seam is not here"
)]
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Client options for the endpoint `--endpoint`.
pub(crate) fn client_option(args: &Args) -> Result<ClientOption> {
    let mut option = ClientOption::default();
    option.set_access_url(args.req("--endpoint")?);
    option.set_enable_tls(false);
    Ok(option)
}

/// A client error with its kind, operation, context (the server's status
/// code and message) and source.
pub(crate) fn client_error(what: &str, e: &rocketmq::error::ClientError) -> anyhow::Error {
    anyhow!("{what}: {e}")
}

/// Everything a received (or checked-back) message says, as JSON.
pub(crate) fn message_json(m: &MessageView) -> Value {
    let properties: serde_json::Map<String, Value> = m
        .properties()
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    json!({
        "message_id": m.message_id(),
        "topic": m.topic(),
        "body": String::from_utf8_lossy(m.body()),
        "tag": m.tag(),
        "keys": m.keys(),
        "properties": properties,
        "message_group": m.message_group(),
        "delivery_timestamp": m.delivery_timestamp(),
        "born_timestamp": m.born_timestamp(),
        "delivery_attempt": m.delivery_attempt(),
    })
}

async fn run(words: &[String]) -> Result<()> {
    let Some((command, flags)) = words.split_first() else {
        bail!("usage: rust5-peer <produce|transaction|simple-consume> --endpoint HOST:PORT ...");
    };
    let args = Args::parse(flags)?;
    match command.as_str() {
        "produce" => produce::run(&args).await,
        "transaction" => transaction::run(&args).await,
        "simple-consume" => consume::run(&args).await,
        other => bail!("unknown subcommand {other:?}"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    match run(&words).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            emit("error", json!({ "message": format!("{e:#}") }));
            ExitCode::FAILURE
        }
    }
}

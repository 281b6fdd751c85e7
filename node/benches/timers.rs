//! Timer benchmark: parks `TIMERS` messages (default 1 M) in the timer
//! topic of an in-process broker on a real disk, with due times shuffled
//! over a `WINDOW_MS` window (default 60 s) starting `LEAD_MS` after the
//! start (default 20 s), and reports the parking rate, how fast the index
//! takes them in, the index's memory (bytes it holds, and the process's
//! anonymous RSS) and the delivery lag on the broker's clock (re-put store
//! time minus due time) as p50 / p99 / max, plus any early delivery.
//!
//! Messages are parked through the store as the send path would park them
//! (no network), so this measures the timer machinery, not the RPC layer.
//! Run: `cargo bench -p sluice-node --bench timers` (env: `TIMERS`,
//! `WINDOW_MS`, `LEAD_MS`, `PRECISION_MS`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use sluice_core::disk::MmapDisk;
use sluice_core::message::{keys, MessageInput, Properties, StoredRecord};
use sluice_core::store::TagsFilter;
use sluice_core::{Clock, FlushMode, QueueOffset, StoreConfig, SystemClock};
use sluice_net::TokioTransport;
use sluice_node::broker::{Broker, BrokerConfig, TIMER_TOPIC};

const REAL_TOPIC: &str = "BenchTimers";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `VmRSS` and `RssAnon` of this process, in KiB.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a sorted sample"
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run())
}

#[expect(clippy::too_many_lines, reason = "one measurement, told in order")]
#[expect(clippy::cast_precision_loss, reason = "rates and sizes for display")]
async fn run() -> anyhow::Result<()> {
    let timers = env_u64("TIMERS", 1_000_000);
    let window_ms = env_u64("WINDOW_MS", 60_000).max(1);
    let lead_ms = env_u64("LEAD_MS", 20_000);
    let precision_ms = env_u64("PRECISION_MS", 1_000);
    let dir = tempfile::tempdir()?;
    let config = BrokerConfig {
        listen: "127.0.0.1:0".to_owned(),
        listen_vip: false,
        namesrv_addrs: Vec::new(),
        timer_precision_ms: precision_ms,
        store: StoreConfig {
            root: "store".to_owned(),
            flush_mode: FlushMode::Async,
            commit_log_segment_bytes: 256 << 20,
            ..StoreConfig::default()
        },
        ..BrokerConfig::default()
    };
    let clock = SystemClock::new();
    let broker = Broker::open(MmapDisk::new(dir.path())?, clock.clone(), config).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(Arc::clone(&broker).serve(
        TokioTransport,
        async move {
            let _ = stopped.await;
        },
        |_| {},
    ));
    let (rss0, anon0) = rss_kib();

    // Park: shuffled due times over the window (a stride coprime with
    // most sizes), as the send path stores them.
    let start_ms = clock.wall_ms();
    let first_due_ms = start_ms + lead_ms;
    let t0 = clock.monotonic();
    for i in 0..timers {
        let k = (i.wrapping_mul(7_919)) % timers;
        let due_ms = first_due_ms + k * window_ms / timers;
        let mut props = Properties::new();
        props.insert(keys::TIMER_OUT_MS, &due_ms.to_string())?;
        props.insert(keys::REAL_TOPIC, REAL_TOPIC)?;
        props.insert(keys::REAL_QID, "0")?;
        props.insert(keys::KEYS, &format!("k{i}"))?;
        let msg = MessageInput {
            topic: TIMER_TOPIC.to_owned(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp_ms: i64::try_from(start_ms)?,
            born_host: "127.0.0.1:1".parse()?,
            store_host: "127.0.0.1:2".parse()?,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::copy_from_slice(&due_ms.to_be_bytes()),
            properties: Bytes::from(props.encode()),
        };
        broker.store().put(msg, false).await?;
    }
    let parked_s = clock.monotonic().saturating_sub(t0).as_secs_f64();
    while broker.timers().pending() < timers {
        if clock.wall_ms() >= first_due_ms {
            bail!(
                "the index took in only {} timers before the first was due",
                broker.timers().pending()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let indexed_s = clock.monotonic().saturating_sub(t0).as_secs_f64();
    let held = broker.timers().bytes_held();
    let (rss1, anon1) = rss_kib();
    println!("timers                 {timers}");
    println!(
        "window                 {window_ms} ms, first due {lead_ms} ms after start, precision {precision_ms} ms"
    );
    println!(
        "parked                 {parked_s:.2} s = {:.0} timers/s (store puts)",
        timers as f64 / parked_s
    );
    println!(
        "indexed (all pending)  {indexed_s:.2} s = {:.0} timers/s end to end",
        timers as f64 / indexed_s
    );
    println!("index bytes held       {held} B (wheel slots + per-topic counts)");
    println!(
        "process RSS            {rss0} KiB -> {rss1} KiB; anonymous {anon0} KiB -> {anon1} KiB"
    );

    // Delivery: wait for every re-put, then read the lag of each.
    let deadline_ms = first_due_ms + window_ms + 120_000;
    loop {
        let delivered = broker.store().max_offset(REAL_TOPIC, 0).get();
        if delivered >= timers {
            break;
        }
        if clock.wall_ms() > deadline_ms {
            bail!("only {delivered} of {timers} delivered in time");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (rss2, anon2) = rss_kib();
    let mut lags = Vec::with_capacity(usize::try_from(timers)?);
    let mut at = QueueOffset::new(0);
    loop {
        let got = broker
            .store()
            .get(REAL_TOPIC, 0, at, 1_024, 16 << 20, &TagsFilter::default())?;
        if got.messages.is_empty() {
            break;
        }
        for raw in &got.messages {
            let rec = StoredRecord::decode(raw)?;
            let due: [u8; 8] = rec.body.get(..8).context("body")?.try_into()?;
            let due_ms = i64::try_from(u64::from_be_bytes(due))?;
            lags.push(rec.store_timestamp_ms - due_ms);
        }
        at = got.next_begin_offset;
    }
    lags.sort_unstable();
    let early = lags.iter().filter(|&&l| l < 0).count();
    println!("delivered              {} (early: {early})", lags.len());
    println!(
        "delivery lag           p50 {} ms, p99 {} ms, max {} ms (re-put store time - due time)",
        percentile(&lags, 0.50),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(0)
    );
    println!("process RSS delivered  {rss2} KiB; anonymous {anon2} KiB");
    let _ = stop.send(());
    serving.await??;
    Ok(())
}

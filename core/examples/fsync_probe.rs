//! Probes the disk's sync rate, the ceiling of SYNC flush: writes 4 KiB and
//! calls `fdatasync` (`File::sync_data`) in a loop on a temporary file in the
//! current directory, then prints syncs per second and latency percentiles.
//! Like `fio --rw=write --bs=4k --fdatasync=1 --overwrite=1 --size=64m`.
//!
//! `cargo run --release -p sluice-core --example fsync_probe [seconds]`

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

/// Size of each write before a sync.
const WRITE_BYTES: usize = 4096;
/// The file is overwritten in place from the start once this size is
/// reached, so the probe measures data syncs, not file growth.
const FILE_BYTES: u64 = 64 << 20;
const RUN_SECS_DEFAULT: u64 = 5;

/// The probe's one reading of the wall clock. clippy.toml bans
/// `Instant::now` outside the clock seam for determinism; this tool exists
/// to measure real time.
#[expect(
    clippy::disallowed_methods,
    reason = "benchmark tool measures wall time"
)]
fn now() -> Instant {
    Instant::now()
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * p / 100]
}

fn main() -> std::io::Result<()> {
    let run_secs = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(RUN_SECS_DEFAULT);
    let run = Duration::from_secs(run_secs);
    let tmp = tempfile::Builder::new()
        .prefix(".fsync-probe-")
        .tempfile_in(".")?;
    let mut file = OpenOptions::new().write(true).open(tmp.path())?;
    let block = vec![0xA5u8; WRITE_BYTES];
    // Lay the whole file out first (as fio's --overwrite=1 does), so each
    // timed sync carries data only, never a block allocation.
    for _ in 0..FILE_BYTES / WRITE_BYTES as u64 {
        file.write_all(&block)?;
    }
    file.sync_all()?;
    file.seek(SeekFrom::Start(0))?;
    let mut latencies = Vec::new();
    let mut pos = 0u64;
    let start = now();
    while start.elapsed() < run {
        if pos + WRITE_BYTES as u64 > FILE_BYTES {
            pos = 0;
            file.seek(SeekFrom::Start(0))?;
        }
        let t = now();
        file.write_all(&block)?;
        file.sync_data()?;
        latencies.push(t.elapsed());
        pos += WRITE_BYTES as u64;
    }
    let total = start.elapsed();
    let syncs = latencies.len();
    latencies.sort_unstable();
    let per_sec = u128::try_from(syncs).unwrap_or(u128::MAX) * 1_000_000 / total.as_micros().max(1);
    println!(
        "fsync_probe: {syncs} x (4 KiB write + fdatasync) in {:.2} s on {}: {per_sec} syncs/s, p50 {:?}, p99 {:?}, max {:?}",
        total.as_secs_f64(),
        std::env::current_dir()?.display(),
        percentile(&latencies, 50),
        percentile(&latencies, 99),
        latencies.last().copied().unwrap_or_default(),
    );
    Ok(())
}

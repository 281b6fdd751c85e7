//! The open-loop schedule: request slot `k` is due at `start + k ×
//! interval`. A pacer thread releases one semaphore permit per due slot;
//! a sender takes a permit, claims the next slot and measures latency from
//! that slot's time, so a send held up by a slow broker (or a full window)
//! is charged for the whole wait: no coordinated omission.
//!
//! The pacer is a thread because tokio's timer has 1 ms resolution, which
//! would add up to a millisecond of schedule lag to every send at the rates
//! measured here; a thread sleep is late by the kernel's timer slack
//! (~50 µs), which the run reports as schedule lag.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::stamp::Stamper;

/// Longest the pacer sleeps at once, so that a stop is noticed promptly.
const SLEEP_MAX: Duration = Duration::from_millis(20);

/// A fixed-rate schedule of request slots shared by all senders.
pub struct Schedule {
    start: Duration,
    end: Duration,
    interval_ns: f64,
    permits: Semaphore,
    next_slot: AtomicU64,
    stopped: AtomicBool,
}

impl Schedule {
    /// Slots from `start` to `end` at `per_s` requests per second.
    pub fn new(start: Duration, end: Duration, per_s: f64) -> Self {
        Self {
            start,
            end,
            interval_ns: 1e9 / per_s,
            permits: Semaphore::new(0),
            next_slot: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        }
    }

    /// When slot `k` is due.
    pub fn slot_time(&self, k: u64) -> Duration {
        #[expect(clippy::cast_precision_loss, reason = "slot counts far below 2^52")]
        let offset_ns = (k as f64) * self.interval_ns;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "non-negative and below the run length in ns"
        )]
        let offset = Duration::from_nanos(offset_ns as u64);
        self.start + offset
    }

    /// Slots due in `[from, self.end)`.
    pub fn slots_between(&self, from: Duration) -> u64 {
        let first = self.slots_before(from);
        self.slots_before(self.end).saturating_sub(first)
    }

    /// Slots due before `t`.
    fn slots_before(&self, t: Duration) -> u64 {
        if t <= self.start {
            return 0;
        }
        #[expect(clippy::cast_precision_loss, reason = "ns since start as f64")]
        let since_ns = t.saturating_sub(self.start).as_nanos() as f64;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "non-negative, bounded by the run length"
        )]
        let n = (since_ns / self.interval_ns).ceil() as u64;
        n
    }

    /// Waits for a due slot and claims it; `None` once the schedule is over.
    pub async fn next(&self) -> Option<(u64, Duration)> {
        let permit = self.permits.acquire().await.ok()?;
        permit.forget();
        let k = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let at = self.slot_time(k);
        (at < self.end).then_some((k, at))
    }

    /// Ends the schedule early; waiting senders return `None`.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.permits.close();
    }

    /// Releases permits as slots fall due until `end` (every slot before
    /// `end`, however late the thread wakes), then enough for each waiting
    /// sender to see the end; [`Schedule::stop`] ends it early.
    #[expect(
        clippy::disallowed_methods,
        reason = "the bench pacer: a thread with sub-millisecond sleeps (tokio's timer has 1 ms resolution)"
    )]
    pub fn spawn(self: &Arc<Self>, stamper: Stamper) -> anyhow::Result<()> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("bench-pacer".to_owned())
            .spawn(move || {
                let mut released = 0_u64;
                loop {
                    if me.stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let now = stamper.now();
                    // Past the end, release what fell due before it (a late
                    // wake-up must not drop the last slots; they go out late
                    // and are charged for it).
                    let due = me.slots_before((now + Duration::from_nanos(1)).min(me.end));
                    if due > released {
                        let add = usize::try_from(due - released).unwrap_or(usize::MAX);
                        me.permits.add_permits(
                            add.min(Semaphore::MAX_PERMITS - me.permits.available_permits()),
                        );
                        released = due;
                    }
                    if now >= me.end {
                        break;
                    }
                    let next = me.slot_time(released).min(me.end);
                    let wait = next.saturating_sub(stamper.now()).min(SLEEP_MAX);
                    if !wait.is_zero() {
                        std::thread::sleep(wait);
                    }
                }
                // Senders still waiting take one of these each, claim a
                // slot at or past the end and stop; the slots released above
                // are taken first, in order.
                me.permits
                    .add_permits(Semaphore::MAX_PERMITS - me.permits.available_permits());
            })
            .map(drop)
            .map_err(|e| anyhow::anyhow!("cannot start the pacer thread: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fall_on_the_fixed_grid() {
        let s = Schedule::new(Duration::from_secs(10), Duration::from_secs(12), 1000.0);
        assert_eq!(s.slot_time(0), Duration::from_secs(10));
        assert_eq!(s.slot_time(1500), Duration::from_millis(11_500));
        assert_eq!(s.slots_between(Duration::ZERO), 2000);
        assert_eq!(s.slots_between(Duration::from_secs(11)), 1000);
        assert_eq!(s.slots_before(Duration::from_micros(10_000_500)), 1);
    }

    #[tokio::test]
    async fn senders_get_due_slots_in_order_then_none() {
        let stamper = Stamper::new();
        let start = stamper.now();
        let s = Arc::new(Schedule::new(
            start,
            start + Duration::from_millis(50),
            200.0,
        ));
        s.spawn(stamper).expect("pacer");
        let mut slots = Vec::new();
        while let Some((k, at)) = s.next().await {
            slots.push((k, at));
        }
        assert_eq!(slots.len(), 10, "{slots:?}");
        assert!(slots
            .windows(2)
            .all(|w| w[0].0 + 1 == w[1].0 && w[0].1 < w[1].1));
    }
}

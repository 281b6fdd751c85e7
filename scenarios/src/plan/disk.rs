//! Plans of the disk scenarios: a full device, failing reads, lost
//! ConsumeQueues, offsets lost in a crash.

use rand::Rng;

use super::{push_crash, push_restart, workload, Fault, Plan, TimedFault};
use crate::rng::{substream, Salt};

/// How often the offset-persistence scenario's broker persists committed
/// offsets; its crash lands between two persistences.
pub const OFFSET_PERSIST_MS: u64 = 1_000;

impl Plan {
    /// Scenario `disk_full_recovers_service`: the broker's device fills up
    /// for 0.3–1.5 s while producers send (re-sending an unacknowledged id
    /// up to twice) and long-polling consumers read, then frees up. With
    /// tiny segments, sends needing a new CommitLog segment fail while it
    /// is full; the broker serves again once space returns, without a
    /// restart. In a third of the plans the broker also crashes while the
    /// disk is full (with power loss or not) and is restarted before space
    /// returns: it must start on the full disk, or fail to and be started
    /// again by its supervisor, and lose nothing either way.
    pub fn disk_full(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.retries_max = 2;
        workload.fail_backoff_ms = 200;
        workload.long_poll_consumers = true;
        let mut rng = substream(seed, Salt::Faults);
        let at_ms = rng.random_range(20..=workload.expected_ms().max(60) / 3);
        let free_ms = at_ms + rng.random_range(300..=1_500);
        let mut faults = vec![
            TimedFault {
                at_ms,
                fault: Fault::FillBrokerDisk,
            },
            TimedFault {
                at_ms: free_ms,
                fault: Fault::FreeBrokerDisk,
            },
        ];
        if rng.random_bool(1.0 / 3.0) {
            let crash_ms = rng.random_range(at_ms + 10..=u64::midpoint(at_ms, free_ms));
            push_crash(&mut faults, crash_ms, rng.random_bool(0.5));
            push_restart(&mut faults, rng.random_range(crash_ms + 20..free_ms));
            faults.sort_by_key(|f| f.at_ms);
        }
        let mut plan = Self::new(seed, workload, faults, None);
        plan.tuning.tiny_files = true;
        plan
    }

    /// Scenario `commit_log_read_eio`: 1–3 times while producers send and
    /// long-polling consumers and a two-member consumer group read, the
    /// broker's next 1–3 reads of its CommitLog fail with EIO. A pull that
    /// hits one gets an error and is retried; nothing is lost or skipped.
    /// In half the seeds the broker also crashes and the first 1–4 reads
    /// of its restart fail: the start fails and is retried by the
    /// supervisor — recovery never takes an unreadable record for the end
    /// of the log and cuts acknowledged records.
    pub fn read_eio(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.long_poll_consumers = true;
        // A push consumer moves on to the next offset a pull names even
        // when it returned nothing: a pull answered past an unreadable
        // message would lose it for the group.
        workload.queues = workload.queues.max(2);
        workload.group_members = 2;
        let mut rng = substream(seed, Salt::Faults);
        let window_ms = workload.expected_ms().max(60);
        let mut faults: Vec<TimedFault> = (0..rng.random_range(1..=3))
            .map(|_| TimedFault {
                at_ms: rng.random_range(20..=window_ms),
                fault: Fault::FailBrokerReads {
                    count: rng.random_range(1..=3),
                },
            })
            .collect();
        if rng.random_bool(0.5) {
            // In the second half of the sends, so the topic exists and
            // acknowledged records are there to lose. Each failed start
            // costs a supervisor restart (1 s): at most four.
            let crash_ms = rng.random_range(window_ms / 2..=window_ms);
            push_crash(&mut faults, crash_ms, rng.random_bool(0.5));
            let restart_ms = crash_ms + rng.random_range(20..=500);
            // Armed while the broker is down, in the order listed: its
            // restart makes the first reads.
            faults.push(TimedFault {
                at_ms: restart_ms,
                fault: Fault::FailBrokerReads {
                    count: rng.random_range(1..=4),
                },
            });
            push_restart(&mut faults, restart_ms);
        }
        faults.sort_by_key(|f| f.at_ms);
        Self::new(seed, workload, faults, None)
    }

    /// Scenario `consume_queue_lost_rebuilt`: while long-polling consumers
    /// read, the broker crashes (mostly with power loss); while it is down
    /// every ConsumeQueue and index file is deleted, or (per seed) only
    /// each queue's first ConsumeQueue file; it restarts and rebuilds them
    /// from the CommitLog. Offsets read before the crash
    /// must hold the same messages when the drain reads them again.
    pub fn consume_queue_lost(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.long_poll_consumers = true;
        let mut rng = substream(seed, Salt::Faults);
        let at_ms = rng.random_range(20..=workload.expected_ms().max(60));
        let mut faults = Vec::new();
        push_crash(&mut faults, at_ms, rng.random_bool(0.75));
        faults.push(TimedFault {
            at_ms: at_ms + 1,
            fault: Fault::LoseConsumeQueues {
                first_only: rng.random_bool(0.5),
            },
        });
        push_restart(&mut faults, at_ms + rng.random_range(50..=2_000));
        // Many small files: every queue spans several, so losing only the
        // first leaves later ones behind.
        let mut plan = Self::new(seed, workload, faults, None);
        plan.tuning.tiny_files = true;
        plan
    }

    /// Scenario `offsets_lost_in_broker_crash`: a consumer group of 2–3
    /// members consumes (committing every 0.5 s) while slow producers
    /// send for several seconds; the broker persists committed offsets
    /// every [`OFFSET_PERSIST_MS`] and loses power 40–90 % of the way
    /// from one of those persistences to the next — after later commits —
    /// then restarts. The group may re-read from the older persisted
    /// offsets, but nothing acknowledged is lost and no commit skips.
    pub fn offsets_lost_in_crash(seed: u64) -> Self {
        let mut workload = workload(seed);
        workload.queues = workload.queues.max(2);
        workload.group_members = substream(seed, Salt::Group).random_range(2..=3);
        // Slow producers: they still send for a while after the restart,
        // long enough for the group to rebalance on the new broker life.
        workload.send_gap_ms_max = workload.send_gap_ms_max.max(60);
        workload.messages_per_producer = workload.messages_per_producer.max(100);
        let mut rng = substream(seed, Salt::Faults);
        let at_ms = OFFSET_PERSIST_MS * rng.random_range(1..=2)
            + rng.random_range(OFFSET_PERSIST_MS * 2 / 5..=OFFSET_PERSIST_MS * 9 / 10);
        let mut faults = Vec::new();
        push_crash(&mut faults, at_ms, true);
        push_restart(&mut faults, at_ms + rng.random_range(50..=1_000));
        let mut plan = Self::new(seed, workload, faults, None);
        plan.tuning.offset_persist_interval_ms = Some(OFFSET_PERSIST_MS);
        plan
    }
}

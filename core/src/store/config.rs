//! Store configuration with RocketMQ's defaults, named with units last.

use crate::consume_queue::CQ_ENTRIES_PER_SEGMENT_DEFAULT;
use crate::index::{INDEX_ENTRIES_DEFAULT, INDEX_SLOTS_DEFAULT};
use crate::message::BODY_BYTES_MAX;

/// When a put is acknowledged relative to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushMode {
    /// Acknowledge after the record is durable (group commit). Consumers
    /// only see durable records, so nothing they read can vanish in a crash.
    Sync,
    /// Acknowledge after the record is in the page cache; a periodic flush
    /// makes it durable. Consumers see it at once.
    Async,
}

/// How a put waits for the disk in SYNC flush mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Return once appended (RocketMQ's `WAIT=false`).
    No,
    /// Return once durable. `company`: the caller knows more writers are
    /// right behind it (requests already read on its connection): the sync
    /// then lets them append first and covers them too, instead of syncing
    /// this one record alone (group commit across a pipelining client's
    /// requests). A caller that knows of none leaves it `false`, and a lone
    /// writer syncs at once.
    Durable { company: bool },
}

impl Wait {
    /// Whether the put waits for durability at all.
    pub fn durable(self) -> bool {
        matches!(self, Self::Durable { .. })
    }
}

impl From<bool> for Wait {
    /// `true` waits for durability (no company known), `false` does not.
    fn from(wait: bool) -> Self {
        if wait {
            Self::Durable { company: false }
        } else {
            Self::No
        }
    }
}

/// What retention may delete early (before `file_reserved_ms`) while the
/// disk is fuller than `disk_used_ratio_max`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DiskPressureRetention {
    /// Only segments every record of which has been consumed: each
    /// ConsumeQueue's entries in the segment lie below the floor the broker
    /// reports for that queue (the lowest committed offset of the groups
    /// with offsets on it). A queue no group has offsets on counts as
    /// unconsumed, and with no floor registered nothing is deleted early.
    /// When nothing may go, puts stay refused above
    /// `disk_used_ratio_reject` until space returns.
    #[default]
    Consumed,
    /// RocketMQ's behaviour: the oldest segments go whatever their
    /// consumption, so acknowledged messages no consumer has read may be
    /// lost. An explicit operator choice.
    Force,
}

/// Configuration of a [`crate::store::MessageStore`].
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Directory (relative to the disk root) holding the store.
    pub root: String,
    /// CommitLog segment size (RocketMQ: 1 GiB).
    pub commit_log_segment_bytes: u64,
    /// ConsumeQueue entries per segment (RocketMQ: 300,000).
    pub cq_entries_per_segment: u64,
    /// Hash slots per index file.
    pub index_slots: u32,
    /// Entries per index file.
    pub index_entries: u32,
    /// Flush mode.
    pub flush_mode: FlushMode,
    /// Largest accepted message body.
    pub body_bytes_max: usize,
    /// Records older than this may be deleted (RocketMQ: 72 h).
    pub file_reserved_ms: u64,
    /// Above this used-disk ratio the oldest segments may be deleted before
    /// their age is up, as `disk_pressure_retention` allows (RocketMQ: 0.75).
    pub disk_used_ratio_max: f64,
    /// Which segments disk-pressure retention may delete early.
    pub disk_pressure_retention: DiskPressureRetention,
    /// Above this used-disk ratio puts are refused (RocketMQ: 0.90).
    pub disk_used_ratio_reject: f64,
    /// Segments deleted per retention pass at most (RocketMQ: 10).
    pub retention_segments_per_pass_max: usize,
    /// A checkpoint syncs the key index only when this long has passed
    /// since the index was last synced (0: at every checkpoint). Between
    /// those, checkpoints cover the CommitLog and the ConsumeQueues only,
    /// and an abnormal restart re-indexes the records after the index's own
    /// cursor. Syncing the index writes back every hash-slot page a key
    /// touched (they are spread over the whole slot table: ~20 MB for a
    /// default file), so at every 1 s checkpoint it was most of the
    /// broker's write-back. RocketMQ syncs an index file only when full.
    pub index_sync_interval_ms: u64,
    /// ... or when the CommitLog has grown by this much since: bounds the
    /// re-indexing an abnormal restart does (0: at every checkpoint).
    pub index_sync_lag_bytes: u64,
    /// On an abnormal restart, how many bytes before the checkpoint are
    /// re-verified (CRC and offsets) to catch corruption of older data.
    pub recovery_verify_bytes: u64,
    /// Start even when corruption is found, truncating the log at the first
    /// damaged record. Loses every record after it: an explicit operator
    /// choice, never a default.
    pub repair_truncate_corrupt: bool,
    /// The store belongs to a replicated broker group: it opens as a
    /// follower (its log a byte-for-byte copy of a master's, so it writes
    /// no pad of its own) and takes puts only after
    /// [`become_writer`](crate::store::MessageStore::become_writer).
    pub replicated: bool,
    /// The simulation's mutant, never set in production: ConsumeQueue
    /// entries recovery rebuilds or re-derives from the CommitLog point
    /// each (after a queue's first) at the record of the offset before — a
    /// wrong rebuild the oracle must catch.
    pub mutant_shifted_rebuild: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            root: String::new(),
            commit_log_segment_bytes: 1 << 30,
            cq_entries_per_segment: CQ_ENTRIES_PER_SEGMENT_DEFAULT,
            index_slots: INDEX_SLOTS_DEFAULT,
            index_entries: INDEX_ENTRIES_DEFAULT,
            flush_mode: FlushMode::Async,
            body_bytes_max: BODY_BYTES_MAX,
            file_reserved_ms: 72 * 3600 * 1000,
            disk_used_ratio_max: 0.75,
            disk_pressure_retention: DiskPressureRetention::Consumed,
            disk_used_ratio_reject: 0.90,
            retention_segments_per_pass_max: 10,
            index_sync_interval_ms: 10_000,
            index_sync_lag_bytes: 256 << 20,
            recovery_verify_bytes: 64 << 20,
            repair_truncate_corrupt: false,
            replicated: false,
            mutant_shifted_rebuild: false,
        }
    }
}

impl StoreConfig {
    /// Small segments and indexes, so tests roll over constantly.
    pub fn for_tests() -> Self {
        Self {
            commit_log_segment_bytes: 64 * 1024,
            cq_entries_per_segment: 64,
            index_slots: 64,
            index_entries: 256,
            flush_mode: FlushMode::Sync,
            ..Self::default()
        }
    }
}

//! sluice-core: the storage engine and message model of Sluice, with no
//! async runtime. Module map:
//!
//! - `disk`   — the `Disk`/`Segment` seam (`MmapDisk` in production)
//! - `clock`  — the `Clock` seam (`SystemClock` in production)
//! - `testing` — feature `testing` only: the doubles `SimDisk` and `ManualClock`
//! - `error`  — the crate's one `Error` type
//! - `message` — the stored-record codec, properties, batch bodies, message ids, topics
//! - `offset` — `CommitLogOffset` (bytes) and `QueueOffset` (entries), kept apart by type
//! - `commit_log` — the sequential log: put lock, segments, group commit, record scan
//! - `consume_queue` — per topic/queue arrays of 20-byte entries, built by dispatch
//! - `index`  — index files: `topic#key` and `UNIQ_KEY` to CommitLog offsets
//! - `checkpoint` — the safe point recovery trusts
//! - `buggify` — fault points for rare legal paths, inert outside the simulation
//! - `stats`  — the store's figures and the shared latency histogram
//! - `store`  — `MessageStore`, the broker's facade: put, get, query, recovery, retention

pub mod civil;
pub mod clock;
pub mod disk;
pub mod error;
pub mod message;

pub mod buggify;
pub mod checkpoint;
pub mod commit_log;
pub mod consume_queue;
pub mod index;
pub mod offset;
mod segment_chain;
pub mod stats;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use clock::{Clock, SystemClock};
pub use error::{Error, Result};
pub use offset::{CommitLogOffset, NegativeOffset, QueueOffset};
pub use store::{
    DiskPressureRetention, FlushMode, GetResult, GetStatus, MessageStore, StoreConfig, Wait,
};

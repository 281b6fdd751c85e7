//! What a `SimDisk` did: its operations and the faults it injected.

/// Counters of operations and injected faults, so a simulation can report
/// which fault classes actually fired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimDiskStats {
    /// Segment writes that reached a file (`write_with` is one).
    pub writes: u64,
    /// Segment syncs that ran (successful or not).
    pub syncs: u64,
    /// Syncs failed with injected EIO.
    pub eio_injected: u64,
    /// Reads failed with injected EIO.
    pub read_eio_injected: u64,
    /// Bytes read from segments (`slice`, and `read_at` through it).
    pub read_bytes: u64,
    /// Creations refused for lack of space (or an injected failure).
    pub enospc: u64,
    /// Files deleted from outside the process (`remove_under`), as an
    /// operator's mistake or a lost directory would.
    pub files_lost: u64,
    /// Power losses simulated.
    pub power_losses: u64,
    /// Dirty pages fully persisted at a power loss.
    pub pages_persisted: u64,
    /// Dirty pages lost at a power loss.
    pub pages_lost: u64,
    /// Dirty pages torn at sector granularity at a power loss.
    pub pages_torn: u64,
    /// Dirty pages with garbage sectors after a power loss.
    pub pages_garbage: u64,
}

//! Simulation and test doubles for the disk and clock seams, compiled only
//! with the `testing` feature so no production build carries them: `SimDisk`
//! (seeded page-level crash, EIO and ENOSPC faults) and `ManualClock`. Both
//! validate paths and read time through the same seams as production.

mod manual_clock;
mod sim_disk;
mod sim_file;
mod sim_stats;

pub use manual_clock::ManualClock;
pub use sim_disk::{
    CrashWeights, SimDisk, SimDiskConfig, SimDiskStats, SimSegment, SyncDelay, PAGE_BYTES,
    SECTOR_BYTES,
};

//! sluice-core: the storage engine and message model of Sluice, with no
//! async runtime. Module map:
//!
//! - `disk`   — the `Disk`/`Segment` seam (`MmapDisk` in production, `SimDisk` in simulation)
//! - `clock`  — the `Clock` seam (`SystemClock`, `ManualClock`)
//! - `error`  — the crate's one `Error` type
//! - `message` — the stored-record codec, properties, batch bodies, message ids, topics

pub mod clock;
pub mod disk;
pub mod error;
pub mod message;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, Result};

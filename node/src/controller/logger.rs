//! Routes raft-rs's `slog` records into `tracing` (target
//! `sluice_node::controller::raft`), with their key-values, so the
//! controller needs no slog backend and no logging thread.

use std::fmt::{self, Write as _};

use slog::{Drain, Level, OwnedKVList, Record, KV};

/// A `slog` logger that writes through `tracing`; raft's info-level
/// chatter (every vote, every term change) becomes debug.
pub fn tracing_logger(id: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("controller" => id))
}

struct TracingDrain;

struct Fields(String);

impl slog::Serializer for Fields {
    fn emit_arguments(&mut self, key: slog::Key, value: &fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut fields = Fields(String::new());
        let _ = record.kv().serialize(record, &mut fields);
        let _ = values.serialize(record, &mut fields);
        let message = record.msg();
        let fields = fields.0;
        match record.level() {
            Level::Critical | Level::Error => {
                tracing::error!(target: "sluice_node::controller::raft", "{message}{fields}");
            }
            Level::Warning => {
                tracing::warn!(target: "sluice_node::controller::raft", "{message}{fields}");
            }
            Level::Info | Level::Debug => {
                tracing::debug!(target: "sluice_node::controller::raft", "{message}{fields}");
            }
            Level::Trace => {
                tracing::trace!(target: "sluice_node::controller::raft", "{message}{fields}");
            }
        }
        Ok(())
    }
}

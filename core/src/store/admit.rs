//! What a put must pass before anything is appended: a store that takes
//! writes now, and a message it may store.

use std::sync::atomic::Ordering;

use crate::clock::Clock;
use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::message::{validate_topic, MessageInput};

use super::MessageStore;

impl<D: Disk, C: Clock> MessageStore<D, C> {
    pub(super) fn check_put(&self, msg: &MessageInput) -> Result<()> {
        self.check_writable()?;
        self.check_message(msg)
    }

    /// Whether this store takes puts now: open, the writer, not fenced,
    /// not refusing for a full disk.
    pub(super) fn check_writable(&self) -> Result<()> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        if self.log.is_follower() {
            return Err(Error::NotWriter);
        }
        self.log.check_writable()?;
        if self.disk_full.load(Ordering::Acquire) && !self.space_returned() {
            return Err(Error::DiskFull {
                reason: format!(
                    "disk use above {:.0}%",
                    self.config.disk_used_ratio_reject * 100.0
                ),
            });
        }
        Ok(())
    }

    /// Whether `msg` may be stored: its body within the limit, its topic
    /// a valid name.
    pub(super) fn check_message(&self, msg: &MessageInput) -> Result<()> {
        self.check_body(msg)?;
        validate_topic(&msg.topic).map_err(|e| Error::MessageRejected {
            reason: e.to_string(),
        })
    }

    pub(super) fn check_body(&self, msg: &MessageInput) -> Result<()> {
        if msg.body.len() > self.config.body_bytes_max {
            return Err(Error::MessageRejected {
                reason: format!(
                    "body of {} bytes exceeds the {} byte limit",
                    msg.body.len(),
                    self.config.body_bytes_max
                ),
            });
        }
        Ok(())
    }
}

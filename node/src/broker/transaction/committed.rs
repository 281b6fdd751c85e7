//! Closing the crash window between a commit and its op record: before a
//! transaction is committed or checked, the real topic's index is asked
//! (by `UNIQ_KEY`) for a COMMIT record whose prepared-transaction offset
//! points at a copy of the same origin. If one exists, only the missing op
//! record is written.

use sluice_core::disk::Disk;
use sluice_core::message::{strip_seal, sys_flag, Properties, StoredRecord};
use sluice_core::{Clock, CommitLogOffset};

use super::records;
use crate::broker::Broker;

/// Candidates read per lookup (records of the real topic with the same
/// `UNIQ_KEY`; more than one only after a user reused a key).
const CANDIDATES_MAX: usize = 16;

impl<D: Disk, C: Clock> Broker<D, C> {
    /// True when the real message of the transaction `origin` (whose
    /// half `rec` is) is already stored.
    pub(crate) fn commit_already_stored(&self, rec: &StoredRecord, origin: u64) -> bool {
        if self.config().mutant_commit_lookup_misses {
            return false;
        }
        let Ok(props) = Properties::parse(strip_seal(&rec.properties)) else {
            return false;
        };
        let (Some(topic), Some(uniq)) = (
            props.get(sluice_core::message::keys::REAL_TOPIC),
            props.uniq_key(),
        ) else {
            return false;
        };
        let Ok(found) = self.store().query_by_key(
            topic,
            uniq,
            CANDIDATES_MAX,
            rec.born_timestamp_ms.min(rec.store_timestamp_ms),
            i64::MAX,
        ) else {
            return false;
        };
        found
            .iter()
            .filter_map(|raw| StoredRecord::decode(raw).ok())
            .filter(|r| r.transaction_type() == sys_flag::TRANSACTION_COMMIT)
            .any(|r| {
                let half = u64::try_from(r.prepared_transaction_offset)
                    .ok()
                    .and_then(|at| {
                        self.store()
                            .read_at(CommitLogOffset::new(at))
                            .ok()
                            .flatten()
                    })
                    .and_then(|raw| StoredRecord::decode(&raw).ok());
                half.as_ref()
                    .and_then(|h| records::half_copy(h).ok())
                    .is_some_and(|copy| copy.origin == origin)
            })
    }
}

//! The epoch history of a broker group's CommitLog: which master epoch
//! wrote which part of the log, as `(epoch, start offset)` entries in
//! ascending order. A replica that (re)joins compares its history with the
//! master's to find where the two logs stop agreeing, and truncates there.
//! Persisted atomically as `config/epochs.json`.

use serde::{Deserialize, Serialize};

/// Epoch history file, relative to the disk root.
pub const EPOCHS_FILE: &str = "config/epochs.json";

/// One epoch: master epoch `epoch` wrote the log from `start` on (until the
/// next entry's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEntry {
    /// The master epoch.
    pub epoch: u32,
    /// CommitLog offset of the epoch's first byte.
    pub start: u64,
}

/// The ordered epoch history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochHistory {
    /// Entries by ascending epoch and start.
    pub entries: Vec<EpochEntry>,
}

impl EpochHistory {
    /// Parses the file content; `None` gives an empty history.
    pub fn load(json: Option<&[u8]>) -> Result<Self, String> {
        let Some(json) = json else {
            return Ok(Self::default());
        };
        let h: Self = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        h.check()?;
        Ok(h)
    }

    /// Serialises for the file.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Fails unless epochs strictly increase and starts never decrease.
    pub fn check(&self) -> Result<(), String> {
        for w in self.entries.windows(2) {
            if w[1].epoch <= w[0].epoch || w[1].start < w[0].start {
                return Err(format!(
                    "epoch history out of order: {:?} then {:?}",
                    w[0], w[1]
                ));
            }
        }
        Ok(())
    }

    /// The newest epoch, 0 for an empty history.
    pub fn last_epoch(&self) -> u32 {
        self.entries.last().map_or(0, |e| e.epoch)
    }

    /// Starts epoch `epoch` at `start`; entries that start after `start`
    /// (a tail this log no longer has) are dropped first. Fails when
    /// `epoch` is not newer than every remaining entry.
    pub fn begin(&mut self, epoch: u32, start: u64) -> Result<(), String> {
        self.entries.retain(|e| e.start <= start);
        if self.last_epoch() >= epoch {
            return Err(format!(
                "epoch {epoch} is not newer than the history's last epoch {}",
                self.last_epoch()
            ));
        }
        self.entries.push(EpochEntry { epoch, start });
        Ok(())
    }

    /// End of `epoch` in a log ending at `log_end`: the next epoch's start,
    /// or the log's end. `None` when the epoch is not in the history.
    fn end_of(&self, epoch: u32, log_end: u64) -> Option<u64> {
        let i = self.entries.iter().position(|e| e.epoch == epoch)?;
        let end = self.entries.get(i + 1).map_or(log_end, |n| n.start);
        Some(end.min(log_end))
    }
}

/// Where a replica's log (history `local`, ending at `local_end`) stops
/// agreeing with its master's (`master`, ending at `master_end`): the end
/// of the newest epoch both hold, capped by both logs' ends. The replica
/// truncates to it and copies from there. `None` when the histories share
/// no epoch while the replica holds data: it cannot follow this master
/// without being wiped.
pub fn divergence_point(
    local: &EpochHistory,
    local_end: u64,
    master: &EpochHistory,
    master_end: u64,
) -> Option<u64> {
    if local_end == 0 {
        return Some(0);
    }
    for entry in local.entries.iter().rev() {
        let (Some(mine), Some(theirs)) = (
            local.end_of(entry.epoch, local_end),
            master.end_of(entry.epoch, master_end),
        ) else {
            continue;
        };
        let same_start = master
            .entries
            .iter()
            .any(|m| m.epoch == entry.epoch && m.start == entry.start);
        if same_start {
            return Some(mine.min(theirs));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(entries: &[(u32, u64)]) -> EpochHistory {
        EpochHistory {
            entries: entries
                .iter()
                .map(|&(epoch, start)| EpochEntry { epoch, start })
                .collect(),
        }
    }

    #[test]
    fn an_up_to_date_replica_keeps_everything() {
        let m = h(&[(1, 0), (2, 500)]);
        assert_eq!(divergence_point(&m, 800, &m, 900), Some(800));
    }

    #[test]
    fn a_replica_ahead_of_a_new_epoch_is_cut_at_its_start() {
        // The replica copied epoch 1 up to 700; the new master (epoch 2)
        // only had 500 of it when it took over.
        let local = h(&[(1, 0)]);
        let master = h(&[(1, 0), (2, 500)]);
        assert_eq!(divergence_point(&local, 700, &master, 900), Some(500));
        // A replica behind the epoch boundary keeps all it has.
        assert_eq!(divergence_point(&local, 300, &master, 900), Some(300));
    }

    #[test]
    fn a_deposed_master_drops_what_it_wrote_in_its_lost_epoch() {
        // The old master wrote epoch 2 from 500 to 800; meanwhile epoch 3
        // started at 600 on another broker that had epoch 2 up to 600.
        let local = h(&[(1, 0), (2, 500)]);
        let master = h(&[(1, 0), (2, 500), (3, 600)]);
        assert_eq!(divergence_point(&local, 800, &master, 1000), Some(600));
        // An epoch the master never saw is skipped: 4 was never adopted.
        let local = h(&[(1, 0), (2, 500), (4, 700)]);
        assert_eq!(divergence_point(&local, 900, &master, 1000), Some(600));
    }

    #[test]
    fn an_epoch_with_another_start_is_not_common_history() {
        let local = h(&[(1, 0), (2, 400)]);
        let master = h(&[(1, 0), (2, 450)]);
        assert_eq!(divergence_point(&local, 900, &master, 1000), Some(400));
    }

    #[test]
    fn no_shared_epoch_means_the_replica_cannot_follow() {
        assert_eq!(
            divergence_point(&h(&[(5, 0)]), 100, &h(&[(1, 0)]), 900),
            None
        );
        assert_eq!(divergence_point(&h(&[]), 100, &h(&[(1, 0)]), 900), None);
        assert_eq!(divergence_point(&h(&[]), 0, &h(&[(1, 0)]), 900), Some(0));
    }

    #[test]
    fn begin_drops_a_cut_tail_and_refuses_an_old_epoch() {
        let mut hist = h(&[(1, 0), (2, 500), (3, 900)]);
        hist.begin(4, 600).expect("newer epoch");
        assert_eq!(hist, h(&[(1, 0), (2, 500), (4, 600)]));
        assert!(hist.begin(4, 700).is_err());
        assert!(hist.begin(2, 700).is_err());
    }

    #[test]
    fn a_history_out_of_order_is_refused_on_load() {
        assert!(EpochHistory::load(Some(
            br#"{"entries":[{"epoch":2,"start":0},{"epoch":1,"start":5}]}"#
        ))
        .is_err());
        assert!(EpochHistory::load(Some(b"junk")).is_err());
        let ok = h(&[(1, 0), (3, 10)]);
        assert_eq!(EpochHistory::load(Some(&ok.to_json())).expect("load"), ok);
    }
}

//! The broker's side of the saved window (`saved`): when a lone broker
//! saves it, and how an open reads it back — trusted only when the log
//! still holds what it names — or falls back to the rebuild.

use sluice_core::disk::Disk;
use sluice_core::Clock;

use super::ring::identity;
use super::saved::{File, Witness, WINDOW_FILE};
use super::{original_of, Broker};

impl<D: Disk, C: Clock> Broker<D, C> {
    /// True when this broker saves its window: a lone broker (a replicated
    /// one rebuilds it from the log when it becomes master, since its log
    /// may have been cut and refilled by another master meanwhile).
    fn saves_dedupe(&self) -> bool {
        self.dedupe.enabled()
            && self.ha.is_none()
            && self.config.dedupe_save_interval_ms > 0
            && !self.config.mutant_dedupe_not_rebuilt
    }

    /// Opens the window of a lone broker: from its saved file and the log
    /// written since, when the file is intact and the log still holds what
    /// it names; else rebuilt from the log. A broker that does not save its
    /// window deletes a file left from an earlier configuration.
    pub(in crate::broker) fn open_dedupe(&self) {
        if !self.saves_dedupe() {
            if let Err(e) = self.disk.remove(WINDOW_FILE) {
                tracing::warn!(error = %e, "could not delete a saved dedupe window");
            }
            if self.ha.is_none() {
                self.rebuild_dedupe();
            }
            return;
        }
        match self.restore_dedupe() {
            Ok(replayed) => tracing::info!(
                keys = self.dedupe.len(),
                producer_lanes = self.dedupe.sequences().lanes(),
                replayed,
                "dedupe window read from its file and the log since"
            ),
            Err(why) => {
                tracing::info!(why, "dedupe window not restored from its file");
                self.rebuild_dedupe();
            }
        }
    }

    /// Installs the saved window and replays the log from its `from`;
    /// returns the records replayed, or why the file was not used (the
    /// window is then left for the caller to rebuild).
    fn restore_dedupe(&self) -> std::result::Result<u64, &'static str> {
        let bytes = match self.disk.read_small(WINDOW_FILE) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err("no file"),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the saved dedupe window");
                return Err("unreadable");
            }
        };
        let (file, lanes, newest_answer) = self.dedupe.load(&bytes)?;
        let written = self.store.commit_log().written().get();
        if file.covered_end > written || file.from > written {
            return Err("the log ends before records the file names (a cut tail)");
        }
        if let Some(witness) = file.witness(newest_answer) {
            if !self.holds_witness(&file, witness) {
                return Err("the log no longer holds the newest record the file names");
            }
        }
        if !self.dedupe.install(&file, &lanes) {
            return Err("a send was in flight");
        }
        let now = self.now_ms();
        let mut replayed = 0_u64;
        let from = if self.config.mutant_dedupe_saved_not_replayed {
            written
        } else {
            file.from
        };
        let stopped = self.store.visit_from(from, |r| {
            replayed += 1;
            self.dedupe.recovered(r, now);
        });
        if stopped < written {
            return Err("the log from the file's position is not whole");
        }
        Ok(replayed)
    }

    /// True when the record `witness` names is in the log unchanged.
    fn holds_witness(&self, file: &File, witness: Witness) -> bool {
        let original = witness.original();
        let Ok(at) = u64::try_from(original.phys_offset) else {
            return false;
        };
        self.store
            .record_at(at, |rec| {
                original_of(rec).is_some_and(|sent| {
                    let same_key = match witness {
                        Witness::Key(id, _) => {
                            identity(file.ring.secret, sent.topic, sent.key) == id
                        }
                        Witness::Answer(_) => true,
                    };
                    same_key
                        && sent.original.phys_offset == original.phys_offset
                        && sent.original.end == original.end
                })
            })
            .unwrap_or(false)
    }

    /// Saves the window of a lone broker when due: it changed since the
    /// last save, and sends paused (none checked since the previous call),
    /// or `dedupe_save_interval_ms` passed since the last save, or the
    /// broker is `stopping`.
    pub(in crate::broker) async fn save_dedupe(&self, stopping: bool) {
        if !self.saves_dedupe() {
            return;
        }
        let now_ms = u64::try_from(self.clock.monotonic().as_millis()).unwrap_or(u64::MAX);
        let interval_ms = self.config.dedupe_save_interval_ms;
        if !self.dedupe.save_due(now_ms, interval_ms, stopping) {
            return;
        }
        let written = self.store.commit_log().written().get();
        let (bytes, token) = self.dedupe.save(written);
        match self.disk.replace_atomically(WINDOW_FILE, &bytes).await {
            Ok(()) => self.dedupe.mark_saved(token, now_ms),
            Err(e) => tracing::warn!(error = %e, "could not save the dedupe window"),
        }
    }
}

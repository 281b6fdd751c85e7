//! The key index: `topic#key` (each KEYS entry) and `topic#UNIQ_KEY` hashed
//! into index files under `index/`, each named by the physical offset of its
//! first entry. A query returns candidate offsets; the store re-reads each
//! record and keeps only true matches, so hash collisions and entries
//! beyond a recovered log end can never surface as results.

mod index_file;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::disk::Disk;
use crate::error::{Error, Result};
use crate::message::{java_string_hash, java_string_hash_extend};
use crate::offset::{parse_segment_name, segment_name, CommitLogOffset};
use crate::segment_chain::join;
use index_file::{index_file_bytes, IndexFile};

/// Hash slots per index file by default (RocketMQ: 5 million).
pub const INDEX_SLOTS_DEFAULT: u32 = 5_000_000;
/// Entries per index file by default (RocketMQ: 20 million).
pub const INDEX_ENTRIES_DEFAULT: u32 = 20_000_000;

type Files<D> = BTreeMap<u64, Arc<IndexFile<<D as Disk>::Seg>>>;

/// Where the index stood at a checkpoint: the newest file and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IndexMark {
    /// Name (first physical offset) of the newest file, if any.
    pub newest_file: Option<u64>,
    /// That file's entry count (plus one).
    pub count: u32,
}

/// All index files of a store.
pub struct IndexService<D: Disk> {
    disk: D,
    dir: String,
    slots: u32,
    entries: u32,
    files: Mutex<Files<D>>,
}

/// The index hash of `topic#key`.
pub fn index_key_hash(topic: &str, key: &str) -> i32 {
    java_string_hash_extend(topic_key_prefix(topic), key)
}

/// The hash of `topic#`, which each key's hash extends
/// ([`java_string_hash_extend`]`(prefix, key)` is [`index_key_hash`]).
pub(crate) fn topic_key_prefix(topic: &str) -> i32 {
    java_string_hash_extend(java_string_hash(topic), "#")
}

/// Removes an index file but keeps it open in `held`, so the unlink only
/// drops its name: freeing its blocks and cached pages (0.2 s for a 420 MB
/// file, on a start with no checkpoint) waits for [`drop_beside`], which
/// does it on the disk's helper thread, beside recovery's walk.
fn remove_holding<D: Disk>(disk: &D, path: &str, held: &mut Vec<D::Seg>) -> Result<()> {
    // A file that does not open (damaged) is only removed.
    let open = disk.open_segment(path).ok().flatten();
    disk.remove(path)
        .map_err(|e| Error::io("remove", path, e))?;
    held.extend(open);
    Ok(())
}

/// Drops removed files on the disk's helper thread, all in one job; handed
/// back (no helper), they are dropped here, as before.
fn drop_beside<D: Disk>(disk: &D, held: Vec<D::Seg>) {
    if !held.is_empty() {
        let _ = disk.run_beside(Box::new(move || drop(held)));
    }
}

impl<D: Disk> IndexService<D> {
    /// Opens the index as of checkpoint `mark`: files newer than the mark
    /// are removed and the newest kept file is cut back to the mark's count
    /// (re-dispatch re-adds what follows). Without a mark, every file is
    /// removed and the index is rebuilt by re-dispatch.
    pub(crate) fn open(
        disk: D,
        dir: &str,
        slots: u32,
        entries: u32,
        mark: IndexMark,
    ) -> Result<Self> {
        let mut files = BTreeMap::new();
        let mut removed = Vec::new();
        let names = disk.list(dir).map_err(|e| Error::io("list", dir, e))?;
        for name in names {
            let Some(start) = parse_segment_name(&name) else {
                continue;
            };
            let path = join(dir, &name);
            let keep_up_to = mark.newest_file;
            if keep_up_to.is_none_or(|newest| start > newest) {
                remove_holding(&disk, &path, &mut removed)?;
                continue;
            }
            let seg = disk
                .open_segment(&path)
                .map_err(|e| Error::io("open", &path, e))?
                .ok_or_else(|| Error::Corrupt {
                    path: path.clone(),
                    offset: 0,
                    reason: "index file listed but missing",
                })?;
            let count_max = if Some(start) == keep_up_to {
                mark.count
            } else {
                u32::MAX
            };
            let file = IndexFile::open(seg, path, slots, entries, count_max)?;
            files.insert(start, Arc::new(file));
        }
        drop_beside(&disk, removed);
        Ok(Self {
            disk,
            dir: dir.to_owned(),
            slots,
            entries,
            files: Mutex::new(files),
        })
    }

    /// Indexes one record's keys (its `UNIQ_KEY` and `KEYS`, each as
    /// `topic#key`): the topic is hashed once and the keys go in eight at a
    /// time through [`put_run`](Self::put_run) — one lock and one header
    /// write per file. Keys that fill the current file go on in one new file
    /// named by the record; keys past that one (a record with more keys
    /// than a whole file holds) are not indexed.
    pub(crate) fn put_keys<'k>(
        &self,
        topic: &str,
        keys: impl IntoIterator<Item = &'k str>,
        phys: CommitLogOffset,
        store_ts_ms: i64,
    ) -> Result<()> {
        let prefix = topic_key_prefix(topic);
        let mut entries = [(0i32, phys, store_ts_ms); 8];
        let mut n = 0;
        for key in keys {
            entries[n].0 = java_string_hash_extend(prefix, key);
            n += 1;
            if n == entries.len() {
                self.put_run(&entries)?;
                n = 0;
            }
        }
        self.put_run(&entries[..n])
    }

    /// Indexes the keys of a run of records of one topic in log order
    /// (`(hash, phys, store_ts_ms)`, see [`topic_key_prefix`]; each record's
    /// keys next to each other) with one lock and one header write per file
    /// instead of per record. Rolls to a new file named by the record whose
    /// keys no longer fit; the keys of a record that fill a whole file of
    /// its own are not indexed past it (a second file named by the same
    /// record cannot exist).
    pub(crate) fn put_run(&self, entries: &[(i32, CommitLogOffset, i64)]) -> Result<()> {
        let mut rest = entries;
        while let Some(&(_, phys, _)) = rest.first() {
            let last = self
                .lock()
                .iter()
                .next_back()
                .map(|(start, f)| (*start, Arc::clone(f)));
            let file = match last {
                Some((_, f)) if !f.is_full() => f,
                // A full file named by this record: its keys filled one
                // whole file (now, or in an earlier attempt to dispatch it).
                Some((start, _)) if start == phys.0 => {
                    let own = rest.iter().take_while(|e| e.1 == phys).count();
                    tracing::warn!(
                        phys = phys.0,
                        unindexed = own,
                        "a record has more keys than an index file holds: the rest are not indexed"
                    );
                    rest = &rest[own..];
                    continue;
                }
                _ => self.roll(phys)?,
            };
            let put = file.put_entries(rest)?;
            rest = &rest[put..];
        }
        Ok(())
    }

    /// Creates the file the next entries go to, if there is none, named by
    /// `next_phys` (no earlier record is indexed into it). Called at open so
    /// the first put does not pay for allocating a large index file.
    pub(crate) fn ensure_writable(&self, next_phys: CommitLogOffset) -> Result<()> {
        self.writable(next_phys).map(|_| ())
    }

    fn writable(&self, phys: CommitLogOffset) -> Result<Arc<IndexFile<D::Seg>>> {
        let files = self.lock();
        match files.values().next_back() {
            Some(f) if !f.is_full() => Ok(Arc::clone(f)),
            _ => {
                drop(files);
                self.roll(phys)
            }
        }
    }

    fn roll(&self, phys: CommitLogOffset) -> Result<Arc<IndexFile<D::Seg>>> {
        let path = join(&self.dir, &segment_name(phys.0));
        let seg = self
            .disk
            .create_segment(&path, index_file_bytes(self.slots, self.entries))
            .map_err(|e| Error::io("create", &path, e))?;
        let file = Arc::new(IndexFile::create(seg, path, self.slots, self.entries)?);
        self.lock().insert(phys.0, Arc::clone(&file));
        Ok(file)
    }

    /// Candidate offsets for `topic#key` stored in `[begin_ms, end_ms]`,
    /// newest first, at most `max`.
    pub fn query(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<CommitLogOffset>> {
        let hash = index_key_hash(topic, key);
        let files: Vec<_> = self.lock().values().rev().cloned().collect();
        let mut out = Vec::new();
        for f in files {
            if out.len() >= max {
                break;
            }
            let (b, e) = f.time_range();
            if e + 1000 < begin_ms || b > end_ms {
                continue;
            }
            for p in f.query(hash, begin_ms, end_ms, max - out.len())? {
                out.push(CommitLogOffset(p));
            }
        }
        Ok(out)
    }

    /// True when the file named `start` is loaded.
    pub(crate) fn has_file(&self, start: u64) -> bool {
        self.lock().contains_key(&start)
    }

    /// The mark to record in a checkpoint.
    pub(crate) fn mark(&self) -> IndexMark {
        let files = self.lock();
        match files.iter().next_back() {
            Some((start, f)) => IndexMark {
                newest_file: Some(*start),
                count: f.count(),
            },
            None => IndexMark::default(),
        }
    }

    /// Makes every index file durable.
    pub(crate) async fn sync(&self) -> Result<()> {
        let files: Vec<_> = self.lock().values().cloned().collect();
        for f in files {
            f.sync().await?;
        }
        Ok(())
    }

    /// Removes files whose every entry is below `log_min`, keeping the
    /// newest file.
    pub(crate) fn remove_below(&self, log_min: CommitLogOffset) -> Result<usize> {
        let mut files = self.lock();
        let newest = files.keys().next_back().copied();
        let doomed: Vec<u64> = files
            .iter()
            .filter(|(s, f)| {
                Some(**s) != newest && u64::try_from(f.end_phys()).unwrap_or(0) < log_min.0
            })
            .map(|(s, _)| *s)
            .collect();
        for s in &doomed {
            files.remove(s);
            let path = join(&self.dir, &segment_name(*s));
            self.disk
                .remove(&path)
                .map_err(|e| Error::io("remove", &path, e))?;
        }
        Ok(doomed.len())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files<D>> {
        self.files
            .lock()
            .expect("invariant: index lock not poisoned")
    }
}

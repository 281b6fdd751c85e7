//! `LogStore`: raft-rs's `Storage` over the hard state, the conf state, the
//! latest snapshot (its data is the encoded state machine) and the log
//! entries after it, and their encoding as one small file that is replaced
//! atomically. Invariant: `entries[0].index == snapshot index + 1`, and the
//! file ends with a CRC of everything before it, checked before any use.

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

const MAGIC: &[u8; 8] = b"SLCTRL01";
/// Largest file this store reads or writes (the disk's small-file bound).
pub const FILE_BYTES_MAX: usize = 64 << 20;

/// Raft's durable state, kept in memory and persisted as a whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogStore {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    entries: Vec<Entry>,
}

impl LogStore {
    /// A fresh store whose voters are `voters` (every controller starts
    /// from the same configuration, so none needs a conf change).
    pub fn new(voters: Vec<u64>) -> Self {
        let conf_state = ConfState::from((voters, Vec::<u64>::new()));
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().set_conf_state(conf_state.clone());
        Self {
            hard_state: HardState::default(),
            conf_state,
            snapshot,
            entries: Vec::new(),
        }
    }

    fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    fn first(&self) -> u64 {
        self.snapshot_index() + 1
    }

    fn last(&self) -> u64 {
        self.snapshot_index() + self.entries.len() as u64
    }

    /// Entries kept after the snapshot.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    /// The state machine encoded in the latest snapshot (empty at first).
    pub fn snapshot_data(&self) -> &[u8] {
        &self.snapshot.data
    }

    /// The latest snapshot's index: the state machine was applied up to it.
    pub fn snapshot_applied_index(&self) -> u64 {
        self.snapshot_index()
    }

    /// Appends `entries`, first dropping any stored entries they replace.
    pub fn append(&mut self, entries: &[Entry]) -> Result<(), String> {
        let Some(head) = entries.first() else {
            return Ok(());
        };
        if head.index < self.first() || head.index > self.last() + 1 {
            return Err(format!(
                "append at {} outside [{}, {}]",
                head.index,
                self.first(),
                self.last() + 1
            ));
        }
        let keep = usize::try_from(head.index - self.first()).unwrap_or(usize::MAX);
        self.entries.truncate(keep);
        self.entries.extend_from_slice(entries);
        Ok(())
    }

    /// Records raft's hard state.
    pub fn set_hard_state(&mut self, hard_state: HardState) {
        self.hard_state = hard_state;
    }

    /// Records a newer commit index.
    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    /// Replaces everything with a snapshot received from the leader.
    pub fn apply_snapshot(&mut self, snapshot: Snapshot) {
        let meta = snapshot.get_metadata();
        self.hard_state.term = self.hard_state.term.max(meta.term);
        self.hard_state.commit = meta.index;
        self.conf_state = meta.get_conf_state().clone();
        self.entries.clear();
        self.snapshot = snapshot;
    }

    /// Folds the entries up to `applied` into a snapshot holding `data`, the
    /// state machine as applied up to there.
    pub fn compact(&mut self, applied: u64, data: Vec<u8>) -> Result<(), String> {
        if applied <= self.snapshot_index() {
            return Ok(());
        }
        let term = self.term(applied).map_err(|e| e.to_string())?;
        let drop = usize::try_from(applied - self.snapshot_index()).unwrap_or(usize::MAX);
        self.entries.drain(..drop.min(self.entries.len()));
        let meta = self.snapshot.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(self.conf_state.clone());
        self.snapshot.data = data.into();
        Ok(())
    }

    /// The file contents: magic, length-prefixed protobufs, CRC.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let mut out = MAGIC.to_vec();
        let parts: [&dyn protobuf::Message; 3] =
            [&self.hard_state, &self.conf_state, &self.snapshot];
        for part in parts {
            put_bytes(&mut out, &part.write_to_bytes().map_err(|e| e.to_string())?);
        }
        let count = u32::try_from(self.entries.len()).map_err(|_| "too many entries")?;
        out.extend_from_slice(&count.to_be_bytes());
        for entry in &self.entries {
            put_bytes(
                &mut out,
                &entry.write_to_bytes().map_err(|e| e.to_string())?,
            );
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        if out.len() > FILE_BYTES_MAX {
            return Err(format!(
                "raft state of {} bytes over {FILE_BYTES_MAX}",
                out.len()
            ));
        }
        Ok(out)
    }

    /// Reads a file written by `encode`; any damage is an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < MAGIC.len() + 4 || bytes.len() > FILE_BYTES_MAX {
            return Err(format!("{} bytes is no raft state", bytes.len()));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let crc = u32::from_be_bytes(crc.try_into().map_err(|_| "short crc")?);
        if crc32fast::hash(body) != crc {
            return Err("crc mismatch".into());
        }
        let mut reader = Reader { rest: body };
        if reader.take(MAGIC.len())? != MAGIC {
            return Err("bad magic".into());
        }
        let parse = |bytes: &[u8], what: &str| format!("bad {what}: {bytes:?}");
        let hard_state =
            HardState::parse_from_bytes(reader.bytes()?).map_err(|_| parse(&[], "hard state"))?;
        let conf_state =
            ConfState::parse_from_bytes(reader.bytes()?).map_err(|_| parse(&[], "conf state"))?;
        let snapshot =
            Snapshot::parse_from_bytes(reader.bytes()?).map_err(|_| parse(&[], "snapshot"))?;
        let count = u32::from_be_bytes(reader.take(4)?.try_into().map_err(|_| "short count")?);
        let mut entries = Vec::new();
        for _ in 0..count {
            entries
                .push(Entry::parse_from_bytes(reader.bytes()?).map_err(|_| parse(&[], "entry"))?);
        }
        if !reader.rest.is_empty() {
            return Err("trailing bytes".into());
        }
        let store = Self {
            hard_state,
            conf_state,
            snapshot,
            entries,
        };
        for (offset, entry) in store.entries.iter().enumerate() {
            if entry.index != store.first() + offset as u64 {
                return Err(format!("entry {} out of sequence", entry.index));
            }
        }
        Ok(store)
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("invariant: parts are under the file bound");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if len > self.rest.len() {
            return Err(format!(
                "truncated: {len} bytes wanted, {} left",
                self.rest.len()
            ));
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| "short length")?);
        self.take(usize::try_from(len).unwrap_or(usize::MAX))
    }
}

impl Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState {
            hard_state: self.hard_state.clone(),
            conf_state: self.conf_state.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let from = usize::try_from(low - self.first()).unwrap_or(usize::MAX);
        let to = usize::try_from(high - self.first()).unwrap_or(usize::MAX);
        let mut entries = self.entries[from..to].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index == self.snapshot_index() {
            return Ok(self.snapshot.get_metadata().term);
        }
        if index < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if index > self.last() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let offset = usize::try_from(index - self.first()).unwrap_or(usize::MAX);
        Ok(self.entries[offset].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: format!("e{index}").into_bytes().into(),
            ..Entry::default()
        }
    }

    fn store_with(n: u64) -> LogStore {
        let mut store = LogStore::new(vec![1, 2, 3]);
        let entries: Vec<Entry> = (1..=n).map(|i| entry(i, 1)).collect();
        store.append(&entries).expect("appends");
        store
    }

    #[test]
    fn encoded_store_decodes_to_the_same_store() {
        let mut store = store_with(5);
        store.compact(3, b"state".to_vec()).expect("compacts");
        store.set_hard_state(HardState {
            term: 4,
            vote: 2,
            commit: 5,
            ..HardState::default()
        });
        let decoded = LogStore::decode(&store.encode().expect("encodes")).expect("decodes");
        assert_eq!(decoded, store);
        assert_eq!(decoded.snapshot_data(), b"state");
        assert_eq!(decoded.entry_count(), 2);
        assert_eq!(decoded.term(3), Ok(1));
        assert!(decoded
            .entries(1, 3, None, GetEntriesContext::empty(false))
            .is_err());
    }

    #[test]
    fn any_flipped_or_missing_byte_is_refused() {
        let bytes = store_with(3).encode().expect("encodes");
        for at in [0, 9, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(LogStore::decode(&bad).is_err(), "flip at {at}");
        }
        assert!(LogStore::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(LogStore::decode(&[]).is_err());
    }

    #[test]
    fn append_replaces_a_conflicting_tail_and_refuses_gaps() {
        let mut store = store_with(5);
        store.append(&[entry(4, 2)]).expect("replaces tail");
        assert_eq!(store.last_index(), Ok(4));
        assert_eq!(store.term(4), Ok(2));
        assert!(store.append(&[entry(9, 2)]).is_err(), "gap");
    }

    #[test]
    fn compaction_keeps_only_entries_after_the_snapshot() {
        let mut store = store_with(10);
        store.compact(8, b"s".to_vec()).expect("compacts");
        assert_eq!(store.first_index(), Ok(9));
        assert_eq!(store.entry_count(), 2);
        assert_eq!(store.snapshot(0, 0).map(|s| s.get_metadata().index), Ok(8));
        assert!(matches!(
            store.term(5),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
    }
}

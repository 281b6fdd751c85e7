//! Where a consumer keeps its progress: on the brokers (clustering) or in a
//! local file written atomically (broadcasting, where every member has its
//! own progress).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::Transport;

use super::api;
use crate::error::{Error, Result};
use crate::instance::{lock, ClientInstance};
use crate::message::MessageQueue;

/// A small file replaced atomically: the local offset store's medium.
pub trait OffsetFile: Send + Sync + 'static {
    /// The file's contents; `None` when it does not exist.
    fn load(&self) -> io::Result<Option<Vec<u8>>>;
    /// Replaces the contents atomically and durably.
    fn store(&self, data: Vec<u8>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>>;
    /// Where it lives, for messages.
    fn describe(&self) -> String;
}

/// An [`OffsetFile`] on a core [`Disk`] (an `MmapDisk` in production, a
/// `SimDisk` in simulation): tmp + sync + rename + directory sync.
pub struct DiskOffsetFile<D: Disk> {
    disk: D,
    path: String,
}

impl<D: Disk> DiskOffsetFile<D> {
    /// The file `path` (relative to the disk's root).
    pub fn new(disk: D, path: impl Into<String>) -> Self {
        Self {
            disk,
            path: path.into(),
        }
    }
}

impl<D: Disk> OffsetFile for DiskOffsetFile<D> {
    fn load(&self) -> io::Result<Option<Vec<u8>>> {
        self.disk.read_small(&self.path)
    }

    fn store(&self, data: Vec<u8>) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + '_>> {
        Box::pin(async move { self.disk.replace_atomically(&self.path, &data).await })
    }

    fn describe(&self) -> String {
        self.path.clone()
    }
}

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct OffsetFileBody {
    offsets: Vec<OffsetEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OffsetEntry {
    topic: String,
    broker_name: String,
    queue_id: i32,
    offset: i64,
}

/// The consumer's view of its offsets: an in-memory table in front of the
/// brokers or a local file.
pub(crate) struct OffsetStore {
    table: Mutex<BTreeMap<MessageQueue, i64>>,
    file: Option<Arc<dyn OffsetFile>>,
}

impl OffsetStore {
    /// Offsets kept on the brokers.
    pub(crate) fn remote() -> Self {
        Self {
            table: Mutex::new(BTreeMap::new()),
            file: None,
        }
    }

    /// Offsets kept in `file`, loaded now. A corrupt file is an error, not
    /// a silent restart from scratch.
    pub(crate) fn local(file: Arc<dyn OffsetFile>) -> Result<Self> {
        let io_err = |source| Error::Io {
            path: file.describe(),
            source,
        };
        let mut table = BTreeMap::new();
        if let Some(bytes) = file.load().map_err(io_err)? {
            let body: OffsetFileBody = serde_json::from_slice(&bytes)
                .map_err(|e| Error::decode("local offset file", e))?;
            for e in body.offsets {
                table.insert(
                    MessageQueue {
                        topic: e.topic,
                        broker_name: e.broker_name,
                        queue_id: e.queue_id,
                    },
                    e.offset,
                );
            }
        }
        Ok(Self {
            table: Mutex::new(table),
            file: Some(file),
        })
    }

    /// The stored offset of `mq`: from the table if local, else the broker.
    pub(crate) async fn read<T: Transport, C: Clock>(
        &self,
        client: &ClientInstance<T, C>,
        group: &str,
        mq: &MessageQueue,
    ) -> Result<Option<i64>> {
        if self.file.is_some() {
            return Ok(lock(&self.table).get(mq).copied());
        }
        let offset = api::committed_offset(client, group, mq).await?;
        if let Some(o) = offset {
            lock(&self.table).insert(mq.clone(), o);
        }
        Ok(offset)
    }

    /// Records progress in memory; with `increase_only`, never moves back.
    pub(crate) fn update(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let mut table = lock(&self.table);
        let entry = table.entry(mq.clone()).or_insert(offset);
        if !increase_only || offset > *entry {
            *entry = offset;
        }
    }

    /// The in-memory offset of `mq`.
    pub(crate) fn current(&self, mq: &MessageQueue) -> Option<i64> {
        lock(&self.table).get(mq).copied()
    }

    /// Forgets `mq` (no longer assigned; local stores keep it on file).
    pub(crate) fn remove(&self, mq: &MessageQueue) {
        if self.file.is_none() {
            lock(&self.table).remove(mq);
        }
    }

    /// Writes the offsets of `mqs` (or, locally, the whole table) out.
    pub(crate) async fn persist<T: Transport, C: Clock>(
        &self,
        client: &ClientInstance<T, C>,
        group: &str,
        mqs: &[MessageQueue],
    ) -> Result<()> {
        if let Some(file) = &self.file {
            let body = OffsetFileBody {
                offsets: lock(&self.table)
                    .iter()
                    .map(|(q, o)| OffsetEntry {
                        topic: q.topic.clone(),
                        broker_name: q.broker_name.clone(),
                        queue_id: q.queue_id,
                        offset: *o,
                    })
                    .collect(),
            };
            let bytes = serde_json::to_vec_pretty(&body)
                .map_err(|e| Error::decode("local offset file", e))?;
            return file.store(bytes).await.map_err(|source| Error::Io {
                path: file.describe(),
                source,
            });
        }
        let mut first_error = None;
        for mq in mqs {
            let Some(offset) = self.current(mq) else {
                continue;
            };
            if let Err(e) = api::commit_offset(client, group, mq, offset).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

//! Checks that depend on when things happened, not only on what: a fenced
//! broker acknowledges nothing sent after the fence was visible, and a
//! long-polling consumer receives every acknowledged message within a
//! bound (no lost wake-up). Pure functions over timed history entries.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Entry, Event, MessageId};
use crate::oracle::Violation;

/// Messages acknowledged although they were sent after the client had seen
/// the broker fenced (an event matching `fenced`) and before `until_ms`
/// (the end of that process life). A fenced store must refuse every put.
pub fn acks_after_fence(
    entries: &[Entry],
    fenced: impl Fn(&Event) -> bool,
    until_ms: u64,
) -> Vec<MessageId> {
    let Some(start) = entries.iter().position(|e| fenced(&e.event)) else {
        return Vec::new();
    };
    let invoked_while_fenced: BTreeSet<&MessageId> = entries[start..]
        .iter()
        .filter(|e| e.at_ms < until_ms)
        .filter_map(|e| match &e.event {
            Event::SendInvoke { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    entries[start..]
        .iter()
        .filter_map(|e| match &e.event {
            Event::SendOk { id, .. } if invoked_while_fenced.contains(id) => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// When a long-polling consumer was cut off from the broker, and the
/// delivery bounds that apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeupBounds {
    /// An acknowledged message reaches a connected consumer within this.
    pub delivery_ms_max: u64,
    /// The consumer was cut off over `[start, end)` (a partition).
    pub cut_ms: Option<(u64, u64)>,
    /// Longest a request in flight when the cut began can hang before it
    /// times out (request timeout plus the long-poll hold). Until then, and
    /// until the cut ends, the consumer cannot be expected to receive.
    pub stall_ms_max: u64,
}

/// Acknowledged messages a long-polling consumer received late or never:
/// `(id, acked at, delivered at)`. A lost wake-up shows up here as a
/// delivery one whole hold time after the ack.
pub fn late_deliveries(
    entries: &[Entry],
    bounds: WakeupBounds,
) -> Vec<(MessageId, u64, Option<u64>)> {
    let mut delivered: BTreeMap<&MessageId, u64> = BTreeMap::new();
    for e in entries {
        if let Event::Delivered { records, .. } = &e.event {
            for (_, id) in records {
                delivered.entry(id).or_insert(e.at_ms);
            }
        }
    }
    let mut late = Vec::new();
    for e in entries {
        let Event::SendOk { id, .. } = &e.event else {
            continue;
        };
        let mut deadline = e.at_ms + bounds.delivery_ms_max;
        if let Some((start, end)) = bounds.cut_ms {
            let blind_until = end.max(start + bounds.stall_ms_max);
            if deadline >= start && e.at_ms < blind_until {
                deadline = deadline.max(blind_until + bounds.delivery_ms_max);
            }
        }
        let at = delivered.get(id).copied();
        if at.is_none_or(|t| t > deadline) {
            late.push((id.clone(), e.at_ms, at));
        }
    }
    late
}

/// Delayed messages read before their delay had passed: earlier than their
/// first send plus the delay, less `allowance_ms` (the forward steps of the
/// broker's clock). Every read counts — a long poll reads a delivery within
/// milliseconds, so an early delivery shows as an early read.
pub fn early_deliveries(entries: &[Entry], allowance_ms: u64) -> Vec<Violation> {
    let mut first_invoke: BTreeMap<&MessageId, u64> = BTreeMap::new();
    let mut delay: BTreeMap<&MessageId, u64> = BTreeMap::new();
    let mut out = Vec::new();
    let mut reported = BTreeSet::new();
    for e in entries {
        match &e.event {
            Event::Deferred { id, delay_ms } => {
                delay.insert(id, *delay_ms);
            }
            Event::SendInvoke { id, .. } => {
                first_invoke.entry(id).or_insert(e.at_ms);
            }
            Event::Poll { records, .. }
            | Event::Delivered { records, .. }
            | Event::Consumed { records, .. } => {
                for (_, id) in records {
                    let (Some(sent), Some(d)) = (first_invoke.get(id), delay.get(id)) else {
                        continue;
                    };
                    let due_ms = sent + d;
                    if e.at_ms + allowance_ms < due_ms && reported.insert(id) {
                        out.push(Violation::EarlyDelivery {
                            id: id.clone(),
                            due_ms,
                            read_ms: e.at_ms,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

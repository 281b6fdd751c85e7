//! The window on its ring against a plain model of the same rules: a map
//! from each key to its claim or its newest store, and every store in
//! order, expired from the front (a store whose key was stored again since
//! drops nothing when it expires).

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use super::super::{Claim, DedupeWindow, Original, Ticket};

const WINDOW_MS: u64 = 200;
const CAP: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Pending,
    Stored { seq: u64, original: Original },
}

#[derive(Default)]
struct Model {
    slots: BTreeMap<(u8, u8), Slot>,
    order: VecDeque<(i64, u64, (u8, u8))>,
    next_seq: u64,
}

impl Model {
    fn expire(&mut self, now_ms: i64) {
        let cutoff = now_ms - i64::try_from(WINDOW_MS).expect("small");
        while let Some(&(at, seq, id)) = self.order.front() {
            if at >= cutoff && self.order.len() <= CAP {
                break;
            }
            self.order.pop_front();
            if matches!(self.slots.get(&id), Some(Slot::Stored { seq: s, .. }) if *s == seq) {
                self.slots.remove(&id);
            }
        }
    }

    fn claim(&mut self, id: (u8, u8), now_ms: i64) -> Found {
        self.expire(now_ms);
        match self.slots.get(&id) {
            Some(Slot::Stored { original, .. }) => Found::Stored(*original),
            Some(Slot::Pending) => Found::InFlight,
            None => {
                self.slots.insert(id, Slot::Pending);
                Found::Claimed
            }
        }
    }

    fn stored(&mut self, id: (u8, u8), original: Original, at_ms: i64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.slots.insert(id, Slot::Stored { seq, original });
        self.order.push_back((at_ms, seq, id));
        self.expire(at_ms);
    }

    fn release(&mut self, id: (u8, u8)) {
        if self.slots.get(&id) == Some(&Slot::Pending) {
            self.slots.remove(&id);
        }
    }

    fn len(&self) -> usize {
        let stored = |s: &&Slot| matches!(s, Slot::Stored { .. });
        self.slots.values().filter(stored).count()
    }
}

/// A claim's answer without its ticket.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Stored(Original),
    InFlight,
    Claimed,
}

fn found(claim: &Claim) -> Found {
    match claim {
        Claim::Stored(o) => Found::Stored(*o),
        Claim::InFlight => Found::InFlight,
        Claim::Claimed(_) => Found::Claimed,
    }
}

/// Steps on the window: by key (`Stored`, `Release`, as a rebuild and the
/// tests record keys) and by the ticket of the key's standing claim, as
/// the send path does (`StoredClaim`, `ReleaseClaim`; nothing when the key
/// has no claim standing).
#[derive(Clone, Debug)]
enum Op {
    Claim(u8, u8),
    Stored(u8, u8),
    Release(u8, u8),
    StoredClaim(u8, u8),
    ReleaseClaim(u8, u8),
}

fn op() -> impl Strategy<Value = (Op, i64)> {
    let id = (0u8..3, 0u8..6);
    let op = prop_oneof![
        3 => id.clone().prop_map(|(t, k)| Op::Claim(t, k)),
        3 => id.clone().prop_map(|(t, k)| Op::Stored(t, k)),
        1 => id.clone().prop_map(|(t, k)| Op::Release(t, k)),
        3 => id.clone().prop_map(|(t, k)| Op::StoredClaim(t, k)),
        1 => id.prop_map(|(t, k)| Op::ReleaseClaim(t, k)),
    ];
    (op, 0i64..60)
}

fn original(i: usize) -> Original {
    Original {
        store_host: "127.0.0.1:10911".parse().expect("addr"),
        phys_offset: i64::try_from(i).expect("small"),
        queue_id: 0,
        queue_offset: i64::try_from(i).expect("small"),
        end: u64::try_from(i).expect("small") + 10,
    }
}

proptest! {
    /// Every claim answers as the model does, and the stored-key count
    /// agrees after every step.
    #[test]
    fn the_ring_answers_every_claim_as_the_plain_model_does(
        ops in proptest::collection::vec(op(), 1..200)
    ) {
        let window = DedupeWindow::new(WINDOW_MS, CAP);
        let mut model = Model::default();
        let mut tickets: BTreeMap<(u8, u8), Ticket> = BTreeMap::new();
        let mut now = 0i64;
        for (i, (op, dt)) in ops.into_iter().enumerate() {
            now += dt;
            match op {
                Op::Claim(t, k) => {
                    let got = window.claim(&format!("T{t}"), &format!("K{k}"), now);
                    prop_assert_eq!(found(&got), model.claim((t, k), now), "step {}", i);
                    if let Claim::Claimed(ticket) = got {
                        tickets.insert((t, k), ticket);
                    }
                }
                Op::Stored(t, k) => {
                    window.stored(&format!("T{t}"), &format!("K{k}"), None, original(i), now);
                    model.stored((t, k), original(i), now);
                    tickets.remove(&(t, k));
                }
                Op::Release(t, k) => {
                    window.release(&format!("T{t}"), &format!("K{k}"));
                    model.release((t, k));
                    tickets.remove(&(t, k));
                }
                Op::StoredClaim(t, k) => {
                    if let Some(ticket) = tickets.remove(&(t, k)) {
                        window.stored_claim(ticket, None, original(i), now);
                        model.stored((t, k), original(i), now);
                    }
                }
                Op::ReleaseClaim(t, k) => {
                    if let Some(ticket) = tickets.remove(&(t, k)) {
                        window.release_claim(ticket);
                        model.release((t, k));
                    }
                }
            }
            prop_assert_eq!(window.len(), model.len(), "step {}", i);
        }
    }
}

//! The window on its generations against a plain model of the rules it
//! promises: every store in order, and the claims in flight. A key whose
//! newest store is within the window and has at most `CAP` stores after it
//! must be answered from the window; one past the window must not be; one
//! further back may be either (it is remembered until its generation
//! goes). Claims are exact, and the window never holds more than twice the
//! cap.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::super::{Claim, DedupeWindow, Original, Ticket};

const WINDOW_MS: u64 = 200;
const CAP: usize = 5;

#[derive(Default)]
struct Model {
    /// Every store: its time, key and original.
    stores: Vec<(i64, (u8, u8), Original)>,
    pending: BTreeSet<(u8, u8)>,
}

/// What the window may answer for a key.
enum Expect {
    /// Must answer from the window with this original.
    Stored(Original),
    /// May answer with this original or as if it were absent.
    Either(Original),
    Absent,
}

impl Model {
    fn expect(&self, id: (u8, u8), now_ms: i64) -> Expect {
        let cutoff = now_ms - i64::try_from(WINDOW_MS).expect("small");
        let Some(at) = self.stores.iter().rposition(|s| s.1 == id) else {
            return Expect::Absent;
        };
        let (at_ms, _, original) = self.stores[at];
        let later = self.stores.len() - 1 - at;
        if at_ms < cutoff {
            Expect::Absent
        } else if later <= CAP {
            Expect::Stored(original)
        } else {
            Expect::Either(original)
        }
    }

    /// Checks the window's answer to a claim and follows it.
    fn claim(&mut self, id: (u8, u8), now_ms: i64, got: &Found) -> Result<(), String> {
        let absent = if self.pending.contains(&id) {
            Found::InFlight
        } else {
            Found::Claimed
        };
        let ok = match self.expect(id, now_ms) {
            Expect::Stored(o) => *got == Found::Stored(o),
            Expect::Either(o) => *got == Found::Stored(o) || *got == absent,
            Expect::Absent => *got == absent,
        };
        if *got == Found::Claimed {
            self.pending.insert(id);
        }
        if ok {
            Ok(())
        } else {
            Err(format!("{id:?} at {now_ms}: got {got:?}"))
        }
    }

    fn stored(&mut self, id: (u8, u8), original: Original, at_ms: i64) {
        self.pending.remove(&id);
        self.stores.push((at_ms, id, original));
    }

    fn release(&mut self, id: (u8, u8)) {
        self.pending.remove(&id);
    }
}

/// A claim's answer without its ticket.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
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
    /// Every claim answers within what the model allows, and the window
    /// never holds more than two generations.
    #[test]
    fn the_window_answers_every_claim_within_its_promise(
        ops in proptest::collection::vec(op(), 1..300)
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
                    let checked = model.claim((t, k), now, &found(&got));
                    prop_assert!(checked.is_ok(), "step {}: {:?}", i, checked);
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
            prop_assert!(window.len() <= 2 * CAP, "step {}: {} keys", i, window.len());
        }
    }
}

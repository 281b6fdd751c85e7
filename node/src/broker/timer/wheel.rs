//! The time wheel: per non-empty slot (one per `precision_ms` of wall
//! time) the head of its backward-linked unit list in the timer log and
//! its unit count. Memory is O(slots in the window): a slot costs the
//! same whether it holds one timer or a million. Invariant: a slot is
//! handed out by [`Wheel::take_due`] only once its whole span has passed
//! on the caller's clock, so no unit in it can be early.

use std::collections::BTreeMap;

use super::log::NO_PREV;

/// One slot's list head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotHead {
    /// Position of the newest unit of the slot (the list runs backwards).
    pub last_pos: u64,
    /// Units linked into the slot.
    pub units: u64,
}

/// Non-empty slots, keyed by their start (wall ms, a multiple of the
/// precision).
#[derive(Debug)]
pub struct Wheel {
    precision_ms: u64,
    slots: BTreeMap<u64, SlotHead>,
    units: u64,
}

impl Wheel {
    /// An empty wheel of `precision_ms` slots.
    pub fn new(precision_ms: u64) -> Self {
        assert!(precision_ms > 0, "invariant: precision is positive");
        Self {
            precision_ms,
            slots: BTreeMap::new(),
            units: 0,
        }
    }

    /// The slot holding time `ms`.
    pub fn slot_of(&self, ms: u64) -> u64 {
        ms - ms % self.precision_ms
    }

    /// Slot width.
    pub fn precision_ms(&self) -> u64 {
        self.precision_ms
    }

    /// Links the unit at `pos` into `slot`; returns the previous head (the
    /// unit's `prev_pos`).
    pub fn link(&mut self, slot: u64, pos: u64) -> u64 {
        debug_assert_eq!(slot % self.precision_ms, 0, "slot start");
        self.units += 1;
        let head = self.slots.entry(slot).or_insert(SlotHead {
            last_pos: NO_PREV,
            units: 0,
        });
        let prev = head.last_pos;
        head.last_pos = pos;
        head.units += 1;
        prev
    }

    /// Whether `slot` is pending (its `prev` chain not yet taken).
    pub fn head(&self, slot: u64) -> Option<SlotHead> {
        self.slots.get(&slot).copied()
    }

    /// The earliest pending slot.
    pub fn first(&self) -> Option<(u64, SlotHead)> {
        self.slots.first_key_value().map(|(&k, &v)| (k, v))
    }

    /// Takes the earliest slot if it ended at or before `now_ms` (every
    /// time it covers is `< slot + precision ≤ now`).
    pub fn take_due(&mut self, now_ms: u64) -> Option<(u64, SlotHead)> {
        let (&slot, _) = self.slots.first_key_value()?;
        if slot.saturating_add(self.precision_ms) > now_ms {
            return None;
        }
        self.take(slot).map(|h| (slot, h))
    }

    /// Removes `slot` whatever its time.
    pub fn take(&mut self, slot: u64) -> Option<SlotHead> {
        let head = self.slots.remove(&slot)?;
        self.units -= head.units;
        Some(head)
    }

    /// Puts back the not yet delivered rest of a slot (`units` units ending
    /// at `last_pos`).
    pub fn restore(&mut self, slot: u64, head: SlotHead) {
        assert!(
            !self.slots.contains_key(&slot),
            "invariant: a slot is restored only after it was taken"
        );
        self.units += head.units;
        self.slots.insert(slot, head);
    }

    /// Pending units in all slots.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Non-empty slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes the wheel's slots hold, roughly (map nodes included).
    pub fn bytes_held(&self) -> usize {
        // A BTreeMap node of 11 (u64, SlotHead) pairs is ~ 300 bytes; 32
        // bytes an entry is a fair upper estimate.
        self.slots.len() * 32 + std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_never_yields_a_slot_early() {
        let mut w = Wheel::new(1_000);
        let due = 12_345;
        let slot = w.slot_of(due);
        assert_eq!(slot, 12_000);
        w.link(slot, 0);
        // Every time before the slot's end is refused, even past the due
        // time itself, since other units of the slot may be due later.
        for now in [0, 11_999, 12_000, 12_345, 12_999] {
            assert_eq!(w.take_due(now), None, "yielded at {now}");
        }
        let (got, head) = w.take_due(13_000).expect("due at the slot's end");
        assert_eq!((got, head.units), (12_000, 1));
        assert!(
            got + w.precision_ms() > due,
            "the slot covered the due time"
        );
        assert_eq!(w.take_due(u64::MAX), None, "taken once");
    }

    #[test]
    fn memory_stays_bounded_by_slots_not_timers() {
        let mut w = Wheel::new(1_000);
        // A million timers spread over 60 one-second slots.
        for i in 0..1_000_000_u64 {
            let slot = w.slot_of(1_000_000 + (i % 60) * 1_000 + i % 997);
            w.link(slot, i * 56);
        }
        assert_eq!(w.units(), 1_000_000);
        assert_eq!(w.slots(), 60);
        assert!(
            w.bytes_held() < 4 * 1024,
            "{} bytes for 60 slots",
            w.bytes_held()
        );
    }

    #[test]
    fn slots_link_backwards_and_come_out_in_time_order() {
        let mut w = Wheel::new(100);
        assert_eq!(w.link(500, 0), NO_PREV);
        assert_eq!(w.link(200, 56), NO_PREV);
        assert_eq!(w.link(500, 112), 0, "second unit of 500 links to the first");
        let (s, h) = w.take_due(10_000).expect("due");
        assert_eq!((s, h.last_pos, h.units), (200, 56, 1));
        let (s, h) = w.take_due(10_000).expect("due");
        assert_eq!((s, h.last_pos, h.units), (500, 112, 2));
        w.restore(
            500,
            SlotHead {
                last_pos: 0,
                units: 1,
            },
        );
        assert_eq!(w.units(), 1);
        assert_eq!(w.first().map(|(s, _)| s), Some(500));
    }
}

//! The oracle on hand-made histories: a valid one passes, and each kind of
//! bad history trips exactly the check meant for it.

use super::*;
use crate::history::{Entry, Injected};

const SURVIVE: OracleConfig = OracleConfig {
    acked_must_survive: true,
};

fn invoke(producer: u32, id: &str, queue: i32) -> Event {
    Event::SendInvoke {
        producer,
        id: id.into(),
        queue,
    }
}

fn ok(id: &str, queue: i32, queue_offset: u64) -> Event {
    Event::SendOk {
        id: id.into(),
        queue,
        queue_offset,
    }
}

fn fail(id: &str) -> Event {
    Event::SendFail {
        id: id.into(),
        reason: "refused".into(),
    }
}

fn info(id: &str) -> Event {
    Event::SendInfo {
        id: id.into(),
        reason: "timeout".into(),
    }
}

fn poll(queue: i32, records: &[(u64, &str)]) -> Event {
    Event::Poll {
        queue,
        records: records
            .iter()
            .map(|(o, id)| (*o, (*id).to_owned()))
            .collect(),
    }
}

/// Two acked sends, one failed, one indeterminate that was stored, drained.
fn valid() -> Vec<Event> {
    vec![
        invoke(0, "a", 0),
        ok("a", 0, 0),
        invoke(0, "b", 0),
        fail("b"),
        invoke(0, "c", 0),
        info("c"),
        invoke(0, "d", 0),
        ok("d", 0, 2),
        poll(0, &[(0, "a"), (1, "c"), (2, "d")]),
    ]
}

fn violations(events: &[Event]) -> Vec<Violation> {
    check(events, SURVIVE).violations
}

#[test]
fn valid_history_passes_and_is_summarised() {
    let v = check(&valid(), SURVIVE);
    assert_eq!(v.violations, vec![]);
    assert_eq!(
        v.summary,
        Summary {
            invoked: 4,
            acked: 2,
            failed: 1,
            indeterminate: 1,
            recovered: 1,
            read: 3,
            duplicated: 0,
        }
    );
}

#[test]
fn acked_message_missing_from_the_drain_is_lost() {
    let mut h = valid();
    h.pop();
    h.push(poll(0, &[(0, "a"), (1, "c")]));
    assert_eq!(
        violations(&h),
        vec![Violation::LostAck {
            id: "d".into(),
            queue: 0,
            queue_offset: 2
        }]
    );
}

#[test]
fn lost_acks_are_allowed_when_the_mode_does_not_promise_durability() {
    let mut h = valid();
    h.pop();
    h.push(poll(0, &[(0, "a"), (1, "c")]));
    let v = check(
        &h,
        OracleConfig {
            acked_must_survive: false,
        },
    );
    assert_eq!(v.violations, vec![]);
}

#[test]
fn acked_message_read_at_another_offset_is_moved() {
    let h = vec![
        invoke(0, "a", 0),
        ok("a", 0, 1),
        invoke(1, "x", 0),
        info("x"),
        poll(0, &[(0, "a"), (1, "x")]),
    ];
    let v = violations(&h);
    assert!(
        v.contains(&Violation::InconsistentOffset {
            queue: 0,
            queue_offset: 1,
            ids: ("a".into(), "x".into())
        }),
        "{v:?}"
    );
    let h = vec![invoke(0, "a", 0), ok("a", 0, 1), poll(0, &[(0, "a")])];
    assert_eq!(
        violations(&h),
        vec![Violation::MovedAck {
            id: "a".into(),
            acked: (0, 1),
            seen: vec![(0, 0)]
        }]
    );
}

#[test]
fn never_sent_and_failed_sends_must_not_be_read() {
    let mut h = valid();
    h.push(poll(0, &[(3, "ghost")]));
    assert_eq!(
        violations(&h),
        vec![Violation::NeverSent {
            id: "ghost".into(),
            at: (0, 3)
        }]
    );
    let mut h = valid();
    h.push(poll(0, &[(3, "b")]));
    assert_eq!(
        violations(&h),
        vec![Violation::FailedSendVisible {
            id: "b".into(),
            at: (0, 3)
        }]
    );
}

#[test]
fn two_values_at_one_offset_are_inconsistent() {
    let mut h = valid();
    h.push(poll(0, &[(1, "a")]));
    let v = violations(&h);
    assert!(
        v.contains(&Violation::InconsistentOffset {
            queue: 0,
            queue_offset: 1,
            ids: ("c".into(), "a".into())
        }),
        "{v:?}"
    );
}

#[test]
fn holes_in_a_queue_are_gaps() {
    let h = vec![
        invoke(0, "a", 0),
        ok("a", 0, 0),
        invoke(0, "b", 0),
        ok("b", 0, 2),
        poll(0, &[(0, "a"), (2, "b")]),
    ];
    assert_eq!(
        violations(&h),
        vec![Violation::Gap {
            queue: 0,
            missing: 1
        }]
    );
    let h = vec![invoke(0, "a", 3), ok("a", 3, 1), poll(3, &[(1, "a")])];
    assert_eq!(
        violations(&h),
        vec![Violation::Gap {
            queue: 3,
            missing: 0
        }]
    );
}

#[test]
fn duplicates_need_an_indeterminate_send() {
    let h = vec![
        invoke(0, "a", 0),
        ok("a", 0, 0),
        poll(0, &[(0, "a"), (1, "a")]),
    ];
    assert_eq!(
        violations(&h),
        vec![Violation::Duplicate {
            id: "a".into(),
            at: vec![(0, 0), (0, 1)]
        }]
    );
    let h = vec![invoke(0, "a", 0), info("a"), poll(0, &[(0, "a"), (1, "a")])];
    assert_eq!(violations(&h), vec![]);
}

#[test]
fn out_of_order_acks_of_one_producer_break_fifo() {
    let h = vec![
        invoke(0, "a", 0),
        ok("a", 0, 1),
        invoke(0, "b", 0),
        ok("b", 0, 0),
        poll(0, &[(0, "b"), (1, "a")]),
    ];
    assert_eq!(
        violations(&h),
        vec![Violation::NonFifo {
            producer: 0,
            queue: 0,
            earlier: "a".into(),
            later: "b".into()
        }]
    );
    let two_producers = vec![
        invoke(0, "a", 0),
        ok("a", 0, 1),
        invoke(1, "b", 0),
        ok("b", 0, 0),
        poll(0, &[(0, "b"), (1, "a")]),
    ];
    assert_eq!(violations(&two_producers), vec![], "FIFO is per producer");
}

#[test]
fn unfinished_drain_is_a_liveness_failure() {
    let mut h = valid();
    h.push(Event::DrainIncomplete {
        queue: 1,
        reason: "timeout".into(),
    });
    assert_eq!(
        violations(&h),
        vec![Violation::DrainIncomplete {
            queue: 1,
            reason: "timeout".into()
        }]
    );
}

fn at(at_ms: u64, event: Event) -> Entry {
    Entry { at_ms, event }
}

#[test]
fn acks_sent_after_the_fence_was_seen_are_reported() {
    let fenced =
        |e: &Event| matches!(e, Event::SendInfo { reason, .. } if reason.starts_with("timeout"));
    let entries = vec![
        at(1, invoke(0, "a", 0)),
        at(2, info("a")),
        at(3, invoke(1, "b", 0)),
        at(4, ok("b", 0, 0)),
        at(50, invoke(1, "c", 0)),
        at(51, ok("c", 0, 1)),
    ];
    assert_eq!(acks_after_fence(&entries, fenced, 10), vec!["b".to_owned()]);
    assert_eq!(
        acks_after_fence(&entries, fenced, 100),
        vec!["b".to_owned(), "c".to_owned()]
    );
    assert_eq!(
        acks_after_fence(&entries[2..], fenced, 100),
        Vec::<String>::new()
    );
}

#[test]
fn a_retried_indeterminate_send_may_be_stored_twice_but_its_ack_must_survive() {
    let retried = vec![
        invoke(0, "a", 0),
        info("a"),
        invoke(0, "a", 0),
        ok("a", 0, 1),
        poll(0, &[(0, "a"), (1, "a")]),
    ];
    assert_eq!(violations(&retried), vec![]);
    let lost = vec![
        invoke(0, "a", 0),
        info("a"),
        invoke(0, "a", 0),
        ok("a", 0, 1),
        poll(0, &[(0, "a")]),
    ];
    assert_eq!(
        violations(&lost),
        vec![Violation::MovedAck {
            id: "a".into(),
            acked: (0, 1),
            seen: vec![(0, 0)]
        }]
    );
    let timed_out_then_refused = vec![
        invoke(0, "a", 0),
        info("a"),
        invoke(0, "a", 0),
        fail("a"),
        poll(0, &[(0, "a")]),
    ];
    assert_eq!(
        violations(&timed_out_then_refused),
        vec![],
        "the first attempt may have been stored"
    );
    let retried_without_cause = vec![
        invoke(0, "a", 0),
        fail("a"),
        invoke(0, "a", 0),
        ok("a", 0, 0),
        poll(0, &[(0, "a"), (1, "a")]),
    ];
    assert_eq!(
        violations(&retried_without_cause),
        vec![Violation::Duplicate {
            id: "a".into(),
            at: vec![(0, 0), (0, 1)]
        }]
    );
}

fn delivered(queue: i32, records: &[(u64, &str)]) -> Event {
    Event::Delivered {
        queue,
        records: records
            .iter()
            .map(|(o, id)| (*o, (*id).to_owned()))
            .collect(),
    }
}

#[test]
fn deliveries_past_the_bound_or_missing_are_late() {
    let bounds = WakeupBounds {
        delivery_ms_max: 100,
        cut_ms: Some((1_000, 2_000)),
        stall_ms_max: 1_500,
    };
    let entries = vec![
        at(10, ok("prompt", 0, 0)),
        at(20, delivered(0, &[(0, "prompt")])),
        at(30, ok("slow", 0, 1)),
        at(3_030, delivered(0, &[(1, "slow")])),
        at(1_500, ok("cut", 0, 2)),
        at(2_400, delivered(0, &[(2, "cut")])),
        at(2_450, ok("stalled", 0, 3)),
        at(2_590, delivered(0, &[(3, "stalled")])),
        at(2_600, ok("never", 0, 4)),
    ];
    assert_eq!(
        late_deliveries(&entries, bounds),
        vec![
            ("slow".to_owned(), 30, Some(3_030)),
            ("never".to_owned(), 2_600, None)
        ]
    );
}

fn deferred(id: &str, delay_ms: u64) -> Event {
    Event::Deferred {
        id: id.into(),
        delay_ms,
    }
}

#[test]
fn a_delayed_message_must_be_read_somewhere_but_not_where_it_was_acked() {
    // "d" was acked at offset 7 of the schedule queue and lands at 1.
    let h = vec![
        invoke(0, "a", 0),
        ok("a", 0, 0),
        deferred("d", 1_000),
        invoke(0, "d", 0),
        ok("d", 0, 7),
        invoke(0, "b", 0),
        ok("b", 0, 1),
        poll(0, &[(0, "a"), (1, "b"), (2, "d")]),
    ];
    // Stored after "b" although acked before it: no FIFO break either.
    assert_eq!(violations(&h), vec![]);
    let lost = vec![
        deferred("d", 1_000),
        invoke(0, "d", 0),
        ok("d", 0, 7),
        poll(0, &[]),
    ];
    assert_eq!(
        violations(&lost),
        vec![Violation::LostAck {
            id: "d".into(),
            queue: 0,
            queue_offset: 7
        }]
    );
}

#[test]
fn a_delayed_message_may_repeat_only_after_a_crash() {
    let twice = vec![
        deferred("d", 1_000),
        invoke(0, "d", 0),
        ok("d", 0, 0),
        poll(0, &[(0, "d"), (1, "d")]),
    ];
    assert_eq!(
        violations(&twice),
        vec![Violation::Duplicate {
            id: "d".into(),
            at: vec![(0, 0), (0, 1)]
        }]
    );
    let mut crashed = twice.clone();
    crashed.insert(
        3,
        Event::Fault {
            fault: Injected::Planned(Fault::CrashBroker { power_loss: true }),
        },
    );
    assert_eq!(violations(&crashed), vec![]);
}

#[test]
fn a_delayed_message_read_before_its_delay_less_the_allowance_is_early() {
    let entries = vec![
        at(0, deferred("d", 5_000)),
        at(100, invoke(0, "d", 0)),
        at(110, ok("d", 0, 0)),
        // A retry's invoke does not move the due time later.
        at(200, invoke(0, "d", 0)),
        at(4_000, delivered(0, &[(0, "d")])),
    ];
    assert_eq!(
        early_deliveries(&entries, 0),
        vec![Violation::EarlyDelivery {
            id: "d".into(),
            due_ms: 5_100,
            read_ms: 4_000
        }]
    );
    // Within the clock's forward steps, or on time: fine.
    assert_eq!(early_deliveries(&entries, 1_100), vec![]);
    let on_time = vec![
        at(0, deferred("d", 5_000)),
        at(100, invoke(0, "d", 0)),
        at(5_100, delivered(0, &[(0, "d")])),
    ];
    assert_eq!(early_deliveries(&on_time, 0), vec![]);
}

fn decided(id: &str, commit: bool) -> Event {
    Event::TxnDecided {
        id: id.into(),
        commit,
    }
}

#[test]
fn committed_transactions_must_be_read_and_rolled_back_ones_never() {
    let h = vec![
        deferred("c", 0),
        decided("c", true),
        invoke(0, "c", 0),
        ok("c", 0, 0),
        deferred("r", 0),
        decided("r", false),
        invoke(0, "r", 0),
        ok("r", 0, 1),
        poll(0, &[(0, "c")]),
    ];
    assert_eq!(violations(&h), vec![]);
    let visible = vec![
        deferred("r", 0),
        decided("r", false),
        invoke(0, "r", 0),
        info("r"),
        poll(0, &[(0, "r")]),
    ];
    assert_eq!(
        violations(&visible),
        vec![Violation::RolledBackVisible {
            id: "r".into(),
            at: (0, 0)
        }]
    );
    let lost = vec![
        deferred("c", 0),
        decided("c", true),
        invoke(0, "c", 0),
        ok("c", 0, 4),
        poll(0, &[]),
    ];
    assert_eq!(
        violations(&lost),
        vec![Violation::LostAck {
            id: "c".into(),
            queue: 0,
            queue_offset: 4
        }]
    );
}

#[test]
fn a_committed_transaction_is_read_once_even_after_a_crash() {
    let h = vec![
        deferred("c", 0),
        decided("c", true),
        invoke(0, "c", 0),
        ok("c", 0, 0),
        Event::Fault {
            fault: Injected::Planned(Fault::CrashBroker { power_loss: true }),
        },
        poll(0, &[(0, "c"), (1, "c")]),
    ];
    let twice = vec![Violation::CommittedTwice {
        id: "c".into(),
        at: vec![(0, 0), (0, 1)],
    }];
    assert_eq!(violations(&h), twice);
    // A half whose send was indeterminate still opens one transaction at
    // most: its check-back commits it once (a second copy is a second
    // commit); one copy passes.
    let mut indeterminate = h.clone();
    indeterminate[3] = info("c");
    assert_eq!(violations(&indeterminate), twice);
    indeterminate[5] = poll(0, &[(0, "c")]);
    assert_eq!(violations(&indeterminate), vec![]);
}

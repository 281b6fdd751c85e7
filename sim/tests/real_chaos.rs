//! Real chaos: a name server with its controller and a SYNC-replicated
//! broker group (master + 2 replicas) as separate `sluice-node` processes,
//! each in its own network namespace, under a seeded schedule of real
//! faults — nftables partitions, one-way drops and loss, a throttled link,
//! `SIGSTOP` of the master past the controller's timeout, `kill -9` of
//! master and replicas, a full data filesystem, wall-clock steps — then
//! healed and drained; the history the production client recorded is
//! judged by the simulation's own oracle. Skips (passing, with a message)
//! where namespaces are unavailable. `SLUICE_CHAOS_SECONDS` and
//! `SLUICE_CHAOS_SEED` make a longer run by hand (docs/chaos.md).

use sim::history::{Event, Injected};
use sim::oracle::Violation;
use sim::real::{self, schedule::Class, Report};

/// A run that acknowledged fewer messages than this did not exercise
/// the faults under load.
const ACKED_MIN: usize = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_processes_under_real_faults_lose_no_acknowledged_message() {
    if let Some(why) = real::unavailable() {
        println!("skipping real chaos: {why}");
        return;
    }
    let config = real::config_from_env();
    println!("real chaos: {config:?}");
    let report = real::run(config)
        .await
        .expect("the chaos run could not run");
    println!("{}", report.summary());
    if !report.verdict.violations.is_empty() {
        let path = std::env::temp_dir().join(format!("sluice-chaos-{}.history", config.seed));
        let text: Vec<String> = report
            .entries
            .iter()
            .map(|e| format!("{} {:?}", e.at_ms, e.event))
            .collect();
        let _ = std::fs::write(&path, text.join("\n"));
        println!("history written to {}", path.display());
    }
    faults_were_injected_and_recorded(&report);
    assert!(
        report.acked_after_heal > 0,
        "no send was acknowledged after the heal: the group never recovered"
    );
    assert!(
        report.verdict.summary.acked >= ACKED_MIN,
        "only {} sends acknowledged",
        report.verdict.summary.acked
    );
    assert!(
        report.verdict.violations.is_empty(),
        "the oracle found {} violations:\n{}",
        report.verdict.violations.len(),
        report.summary()
    );
    the_oracle_sees_a_corrupted_history(&report);
}

/// Every class the machine can inject was injected, every step applied,
/// and the history holds each injection.
fn faults_were_injected_and_recorded(report: &Report) {
    assert!(
        report.failed_steps.is_empty(),
        "steps not applied: {:?}",
        report.failed_steps
    );
    for class in Class::ALL {
        if report.skipped.contains_key(&class) {
            continue;
        }
        let injected = report.injected.get(&class).copied().unwrap_or(0);
        let recorded = report
            .events
            .iter()
            .filter(|e| {
                matches!(e, Event::Fault { fault: Injected::Real { class: c, .. } }
                    if *c == format!("{class:?}"))
            })
            .count();
        assert!(injected > 0, "no {class:?} fault was injected");
        assert_eq!(
            usize::try_from(injected).ok(),
            Some(recorded),
            "{class:?}: injected {injected}, recorded {recorded}"
        );
    }
}

/// The same oracle fails the run's own history once one acknowledged
/// message is struck from every read, and once a read is moved onto
/// another message's offset: it really judges this history.
fn the_oracle_sees_a_corrupted_history(report: &Report) {
    let acked = report.events.iter().rev().find_map(|e| match e {
        Event::SendOk {
            id,
            queue,
            queue_offset,
        } => Some((id.clone(), *queue, *queue_offset)),
        _ => None,
    });
    let (id, queue, offset) = acked.expect("an acknowledged send");
    let struck: Vec<Event> = report
        .events
        .iter()
        .map(|e| match e {
            Event::Poll { queue, records } => Event::Poll {
                queue: *queue,
                records: records.iter().filter(|(_, r)| *r != id).cloned().collect(),
            },
            Event::Delivered { queue, records } => Event::Delivered {
                queue: *queue,
                records: records.iter().filter(|(_, r)| *r != id).cloned().collect(),
            },
            other => other.clone(),
        })
        .collect();
    let verdict = real::judge(&struck);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| matches!(v, Violation::LostAck { id: lost, .. } if *lost == id)),
        "striking {id} from the reads went unnoticed: {:?}",
        verdict.violations
    );
    let mut moved = report.events.clone();
    moved.push(Event::Poll {
        queue,
        records: vec![(offset, "p0-never-sent".to_owned())],
    });
    let verdict = real::judge(&moved);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| matches!(v, Violation::InconsistentOffset { .. })),
        "a second message at ({queue}, {offset}) went unnoticed"
    );
}

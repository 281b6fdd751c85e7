use bytes::Bytes;
use sluice_core::message::{sys_flag, MessageInput, Properties, RecordStamp};

use super::saved::{File, Witness};
use super::*;

fn original(offset: i64) -> Original {
    Original {
        store_host: "127.0.0.1:10911".parse().expect("addr"),
        phys_offset: offset,
        queue_id: 1,
        queue_offset: offset,
        end: 100 + u64::try_from(offset).expect("small"),
    }
}

/// Claims `key` on `topic` and stores it as `original(offset)` at `at_ms`.
fn store(w: &DedupeWindow, topic: &str, key: &str, offset: i64, at_ms: i64) {
    assert!(
        matches!(w.claim(topic, key, at_ms), Claim::Claimed(_)),
        "{key} is new"
    );
    w.stored(topic, key, None, original(offset), at_ms);
}

#[test]
fn a_stored_key_is_a_hit_with_the_original_and_other_keys_or_topics_miss() {
    let w = DedupeWindow::new(60_000, 10);
    store(&w, "T", "K1", 5, 1_000);
    assert_eq!(w.claim("T", "K1", 2_000), Claim::Stored(original(5)));
    assert!(matches!(w.claim("T", "K2", 2_000), Claim::Claimed(_)));
    // The window is per topic: the same key on another topic is new.
    assert!(matches!(w.claim("U", "K1", 2_000), Claim::Claimed(_)));
}

#[test]
fn a_claim_in_flight_is_seen_and_a_released_claim_is_forgotten() {
    let w = DedupeWindow::new(60_000, 10);
    assert!(matches!(w.claim("T", "K", 0), Claim::Claimed(_)));
    assert_eq!(w.claim("T", "K", 1), Claim::InFlight);
    w.release("T", "K");
    assert!(matches!(w.claim("T", "K", 2), Claim::Claimed(_)));
    // Release never drops a stored key.
    w.stored("T", "K", None, original(3), 2);
    w.release("T", "K");
    assert_eq!(w.claim("T", "K", 3), Claim::Stored(original(3)));
}

#[test]
fn a_key_expires_once_older_than_the_window_by_the_clock() {
    let w = DedupeWindow::new(10_000, 10);
    store(&w, "T", "K", 7, 1_000);
    assert_eq!(w.claim("T", "K", 11_000), Claim::Stored(original(7)));
    assert!(matches!(w.claim("T", "K", 11_001), Claim::Claimed(_)));
    assert_eq!(w.len(), 0);
}

/// The cap is per generation: the newest `cap` keys are always
/// remembered, a full generation turns over to make room, and the one
/// before it goes whole.
#[test]
fn past_the_key_cap_the_oldest_generation_goes_whole() {
    let w = DedupeWindow::new(600_000, 3);
    for (i, key) in ["A", "B", "C", "D", "E", "F"].into_iter().enumerate() {
        let i = i64::try_from(i).expect("small");
        store(&w, "T", key, i, 1_000 + i);
    }
    assert_eq!(w.len(), 6, "two full generations: A B C, D E F");
    assert_eq!(w.claim("T", "A", 2_000), Claim::Stored(original(0)));
    store(&w, "T", "G", 6, 1_006);
    assert_eq!(w.len(), 4, "A B C went together");
    for key in ["A", "B", "C"] {
        assert!(
            matches!(w.claim("T", key, 2_000), Claim::Claimed(_)),
            "{key} was in the oldest generation"
        );
        w.release("T", key);
    }
    for (i, key) in ["D", "E", "F", "G"].into_iter().enumerate() {
        let i = i64::try_from(i).expect("small") + 3;
        assert_eq!(w.claim("T", key, 2_000), Claim::Stored(original(i)));
    }
}

/// A key stored again replaces its older item, in whichever generation
/// that is; a key released and claimed again is claimed anew.
#[test]
fn a_key_stored_again_is_answered_with_its_newest_original() {
    let w = DedupeWindow::new(600_000, 2);
    store(&w, "T", "A", 1, 1_000);
    store(&w, "T", "B", 2, 1_001);
    // A and B fill the first generation; C turns it over.
    store(&w, "T", "C", 3, 1_002);
    w.stored("T", "A", None, original(4), 1_003);
    assert_eq!(w.len(), 3, "A moved to the current generation");
    assert_eq!(w.claim("T", "A", 1_004), Claim::Stored(original(4)));
    // D turns over again: B goes, A and C stay (A's newer item is newer).
    store(&w, "T", "D", 5, 1_005);
    assert_eq!(w.claim("T", "A", 1_006), Claim::Stored(original(4)));
    assert_eq!(w.claim("T", "C", 1_006), Claim::Stored(original(3)));
    assert!(matches!(w.claim("T", "B", 1_006), Claim::Claimed(_)));
    assert_eq!(w.claim("T", "B", 1_007), Claim::InFlight);
    w.release("T", "B");
    assert!(matches!(w.claim("T", "B", 1_008), Claim::Claimed(_)));
}

/// Time expiry is exact per key, and a generation all older than the
/// window is dropped.
#[test]
fn an_expired_key_in_a_standing_generation_is_not_answered() {
    let w = DedupeWindow::new(10_000, 100);
    store(&w, "T", "Old", 1, 1_000);
    store(&w, "T", "New", 2, 5_000);
    assert!(
        matches!(w.claim("T", "Old", 11_001), Claim::Claimed(_)),
        "Old is past the window; New keeps the generation"
    );
    assert_eq!(w.claim("T", "New", 11_001), Claim::Stored(original(2)));
    w.stored("T", "Old", None, original(3), 11_002);
    assert_eq!(w.claim("T", "Old", 11_003), Claim::Stored(original(3)));
    assert!(matches!(w.claim("T", "New", 15_001), Claim::Claimed(_)));
    assert_eq!(w.claim("T", "Old", 15_001), Claim::Stored(original(3)));
    assert_eq!(w.len(), 2, "Old and New are one generation");
    assert!(matches!(w.claim("T", "Other", 21_003), Claim::Claimed(_)));
    assert_eq!(w.len(), 0, "all of it past the window");
}

#[test]
fn a_zero_window_or_cap_disables_dedupe() {
    assert!(!DedupeWindow::new(0, 10).enabled());
    assert!(!DedupeWindow::new(10, 0).enabled());
    assert!(DedupeWindow::new(10, 1).enabled());
}

fn record(
    topic: &str,
    props: &[(&str, &str)],
    queue_offset: i64,
    phys: i64,
    at: i64,
) -> StoredRecord {
    let mut p = Properties::new();
    for (k, v) in props {
        p.insert(k, v).expect("fits");
    }
    let msg = MessageInput {
        topic: topic.to_owned(),
        queue_id: 2,
        flag: 0,
        sys_flag: 0,
        born_timestamp_ms: 1,
        born_host: "127.0.0.1:5".parse().expect("addr"),
        store_host: "10.0.0.1:10911".parse().expect("addr"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from_static(b"b"),
        properties: Bytes::from(p.encode()),
    };
    let stamp = RecordStamp {
        queue_offset,
        phys_offset: phys,
        store_timestamp_ms: at,
    };
    let raw = msg.encode_to_vec(&stamp).expect("encodes");
    StoredRecord::decode(&Bytes::from(raw)).expect("decodes")
}

#[test]
fn rebuild_takes_the_first_record_of_each_key_and_answers_as_the_send_did() {
    let first = record("T", &[(keys::UNIQ_KEY, "K")], 4, 1_000, 5_000);
    let again = record("T", &[(keys::UNIQ_KEY, "K")], 9, 2_000, 5_001);
    let parked = record(
        SCHEDULE_TOPIC,
        &[
            (keys::UNIQ_KEY, "D"),
            (keys::REAL_TOPIC, "T"),
            (keys::REAL_QID, "3"),
        ],
        0,
        3_000,
        5_002,
    );
    let delivered = record(
        "T",
        &[
            (keys::UNIQ_KEY, "E"),
            (keys::REAL_TOPIC, "T"),
            (keys::REAL_QID, "3"),
        ],
        10,
        4_000,
        5_003,
    );
    let send_back = record("%RETRY%g", &[(keys::UNIQ_KEY, "R")], 0, 5_000, 5_004);
    let no_key = record("T", &[(keys::KEYS, "biz")], 11, 6_000, 5_005);
    let mut half = record("T", &[(keys::UNIQ_KEY, "H")], 0, 7_000, 5_006);
    half.sys_flag = sys_flag::TRANSACTION_PREPARED;
    let w = DedupeWindow::new(600_000, 100);
    w.rebuild(
        [
            &first, &again, &parked, &delivered, &send_back, &no_key, &half,
        ],
        6_000,
    );
    let Claim::Stored(k) = w.claim("T", "K", 6_000) else {
        panic!("K rebuilt");
    };
    assert_eq!((k.queue_id, k.queue_offset), (2, 4));
    assert_eq!(k.msg_id(), offset_msg_id(first.store_host, 1_000));
    assert_eq!(k.end, 1_000 + u64::from(first.total_size));
    let Claim::Stored(d) = w.claim("T", "D", 6_000) else {
        panic!("the parked delayed message rebuilt under its real topic");
    };
    assert_eq!((d.queue_id, d.queue_offset), (3, 0));
    for (topic, key) in [("T", "E"), ("%RETRY%g", "R"), ("T", "H")] {
        assert!(
            matches!(w.claim(topic, key, 6_000), Claim::Claimed(_)),
            "{key} not rebuilt"
        );
    }
    assert_eq!(w.len(), 2);
}

#[test]
fn rebuild_keeps_the_window_and_the_cap() {
    let old = record("T", &[(keys::UNIQ_KEY, "Old")], 0, 0, 1_000);
    let keys_in: Vec<StoredRecord> = (0..5)
        .map(|i| {
            let key = format!("K{i}");
            record(
                "T",
                &[(keys::UNIQ_KEY, key.as_str())],
                i + 1,
                (i + 1) * 1_000,
                50_000 + i,
            )
        })
        .collect();
    let w = DedupeWindow::new(10_000, 2);
    store(&w, "T", "Before", 99, 54_000);
    w.rebuild(std::iter::once(&old).chain(keys_in.iter()), 55_000);
    // Old is past the window (its generation goes at once); with 2 keys a
    // generation, K0 K1 | K2 K3 | K4 keeps the last two.
    assert_eq!(w.len(), 3);
    assert!(
        matches!(w.claim("T", "Old", 55_000), Claim::Claimed(_)),
        "past the window"
    );
    for key in ["K0", "K1"] {
        assert!(
            matches!(w.claim("T", key, 55_000), Claim::Claimed(_)),
            "{key} dropped by the cap"
        );
    }
    for key in ["K2", "K3", "K4"] {
        assert!(
            matches!(w.claim("T", key, 55_000), Claim::Stored(_)),
            "{key}"
        );
    }
    assert!(
        matches!(w.claim("T", "Before", 55_000), Claim::Claimed(_)),
        "rebuild replaced it"
    );
}

#[test]
fn rebuild_recovers_stamped_numbers_older_than_the_window_over_the_longer_span() {
    let stamped = [
        (keys::UNIQ_KEY, "S1"),
        (keys::SLUICE_PRODUCER_ID, "P"),
        (keys::SLUICE_SEQUENCE, "broker-a@2/7"),
    ];
    let rec = record("T", &stamped, 4, 1_000, 1_000);
    let w = DedupeWindow::new(10_000, 100).with_sequences(10, 3_600_000);
    assert_eq!(w.rebuild_since_ms(4_000_000), 400_000, "the longer span");
    w.rebuild([&rec], 55_000);
    assert!(
        matches!(w.claim("T", "S1", 55_000), Claim::Claimed(_)),
        "past the window"
    );
    w.release("T", "S1");
    let stamp = Stamp::of(&Properties::parse(&rec.properties).expect("props"));
    let Seen::Known(o) = w.seen("T", stamp.as_ref()) else {
        panic!("the stamped number was rebuilt");
    };
    assert_eq!((o.queue_id, o.queue_offset), (2, 4));
    // Stamps are off with the window, and spans then are the window's.
    let off = DedupeWindow::new(0, 100).with_sequences(10, 3_600_000);
    off.rebuild([&rec], 55_000);
    assert_eq!(off.seen("T", stamp.as_ref()), Seen::New);
    let short = DedupeWindow::new(10_000, 100).with_sequences(0, 3_600_000);
    assert_eq!(short.rebuild_since_ms(4_000_000), 3_990_000);
}

/// A rebuild forgets stored keys but not the claims of sends still being
/// stored: a retry racing one still waits, and its ticket still records it.
#[test]
fn a_rebuild_keeps_the_claims_in_flight_and_their_tickets() {
    let w = DedupeWindow::new(60_000, 10);
    store(&w, "T", "Stored", 1, 1_000);
    let Claim::Claimed(ticket) = w.claim("T", "Flying", 1_000) else {
        panic!("Flying is new");
    };
    w.rebuild(std::iter::empty(), 1_001);
    assert!(matches!(w.claim("T", "Stored", 1_002), Claim::Claimed(_)));
    assert_eq!(w.claim("T", "Flying", 1_002), Claim::InFlight);
    w.stored_claim(ticket, None, original(2), 1_003);
    assert_eq!(w.claim("T", "Flying", 1_004), Claim::Stored(original(2)));
    // A ticket whose claim ended records nothing again.
    w.release_claim(ticket);
    w.stored_claim(ticket, None, original(3), 1_005);
    assert_eq!(w.claim("T", "Flying", 1_006), Claim::Stored(original(2)));
}

fn stamp(producer: &str, lane: &str, seq: u64) -> Stamp {
    Stamp {
        producer: producer.to_owned(),
        lane: lane.to_owned(),
        seq,
    }
}

/// A window with keys in both generations (one stored again, one expired
/// by the clock at 20,000), and stamped numbers in two lanes.
fn saved_window() -> DedupeWindow {
    let w = DedupeWindow::new(10_000, 3).with_sequences(10, 60_000);
    store(&w, "T", "Expired", 1, 9_000);
    for (i, key) in ["A", "B", "C", "D"].into_iter().enumerate() {
        let i = i64::try_from(i).expect("small");
        store(&w, "T", key, 10 + i, 12_000 + i);
    }
    // A again, into the current generation.
    w.stored("T", "A", None, original(20), 12_010);
    for seq in 1..=3 {
        let at = i64::try_from(seq).expect("small");
        w.sequences()
            .stored("T", &stamp("P", "b@0", seq), original(30 + at));
    }
    w.sequences()
        .stored("U", &stamp("Q", "b@1", 7), original(40));
    w
}

/// What a window answers for the keys and numbers of [`saved_window`]
/// at `now` (claims taken are released again).
fn answers(w: &DedupeWindow, now: i64) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["Expired", "A", "B", "C", "D", "Never"] {
        let claim = w.claim("T", key, now);
        out.push(format!("{key}: {claim:?}").replace(char::is_numeric, "#"));
        if let Claim::Stored(o) = claim {
            out.push(format!("{key} at {}", o.phys_offset));
        } else {
            w.release("T", key);
        }
    }
    for (topic, s) in [
        ("T", stamp("P", "b@0", 1)),
        ("T", stamp("P", "b@0", 3)),
        ("T", stamp("P", "b@0", 4)),
        ("U", stamp("Q", "b@1", 7)),
        ("U", stamp("P", "b@0", 1)),
    ] {
        out.push(format!("{topic} {s:?}: {:?}", w.seen(topic, Some(&s))));
    }
    out
}

/// Read back into a fresh window (another process: another secret until
/// the file's is taken), a saved window answers every key and number as
/// the window it was saved from, expiry by the clock included.
#[test]
fn a_saved_window_read_back_answers_every_key_and_number_as_before() {
    let w = saved_window();
    let (bytes, _) = w.save(5_000);
    let file = File::decode(&bytes).expect("intact");
    assert_eq!(file.from, 5_000, "no claim in flight: from the written end");
    assert_eq!(
        file.covered_end,
        original(40).end,
        "the furthest record named"
    );
    let back = DedupeWindow::new(10_000, 3).with_sequences(10, 60_000);
    let (file, lanes, newest) = back.load(&bytes).expect("loads");
    assert_eq!(newest, Some(original(40)));
    assert_eq!(
        file.witness(newest),
        Some(Witness::Answer(original(40))),
        "the lanes' answer ends furthest"
    );
    assert!(back.install(&file, &lanes));
    for now in [12_100, 20_000, 22_001] {
        assert_eq!(answers(&back, now), answers(&w, now), "at {now}");
    }
    assert_eq!(back.sequences().lanes(), 2);
}

/// The claims in flight when a save is taken may still store their records
/// below the written end: the file replays from the lowest position one
/// was taken at. (A save that took the written end alone would lose the
/// key of a send answered after the save.)
#[test]
fn a_save_taken_while_a_claim_stands_replays_from_where_that_claim_was_taken() {
    let w = DedupeWindow::new(10_000, 3);
    store(&w, "T", "A", 1, 1_000);
    assert!(matches!(
        w.claim_at("T", "B", 1_001, 700),
        Claim::Claimed(_)
    ));
    assert!(matches!(
        w.claim_at("T", "C", 1_001, 800),
        Claim::Claimed(_)
    ));
    let (bytes, _) = w.save(900);
    assert_eq!(File::decode(&bytes).expect("intact").from, 700);
    // Once the claims end, the written end is where the replay starts.
    w.stored("T", "B", None, original(2), 1_002);
    w.stored("T", "C", None, original(3), 1_002);
    let (bytes, _) = w.save(950);
    assert_eq!(File::decode(&bytes).expect("intact").from, 950);
    // Installing needs no claim in flight (they hash with the old secret).
    let back = DedupeWindow::new(10_000, 3);
    let (file, lanes, _) = back.load(&bytes).expect("loads");
    assert!(matches!(back.claim("T", "Z", 1_003), Claim::Claimed(_)));
    assert!(!back.install(&file, &lanes));
    back.release("T", "Z");
    assert!(back.install(&file, &lanes));
    assert_eq!(back.claim("T", "B", 1_003), Claim::Stored(original(2)));
}

/// A file that is cut short, has any byte changed, or was saved under
/// other parameters is refused, without a panic; the window is untouched.
#[test]
fn a_cut_corrupt_or_foreign_file_is_refused() {
    let w = saved_window();
    let (bytes, _) = w.save(5_000);
    let back = DedupeWindow::new(10_000, 3).with_sequences(10, 60_000);
    for len in 0..bytes.len() {
        assert!(back.load(&bytes[..len]).is_err(), "cut at {len}");
    }
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x20;
        assert!(back.load(&bad).is_err(), "byte {at} changed");
    }
    for other in [
        DedupeWindow::new(10_001, 3).with_sequences(10, 60_000),
        DedupeWindow::new(10_000, 4).with_sequences(10, 60_000),
        DedupeWindow::new(10_000, 3).with_sequences(9, 60_000),
    ] {
        assert_eq!(
            other.load(&bytes).err(),
            Some("saved under other parameters")
        );
    }
    assert!(back.load(&bytes).is_ok());
    assert_eq!(back.len(), 0);
}

/// The save is due when the window changed since the last save and sends
/// paused, or when the interval says so.
#[test]
fn a_save_is_due_after_a_change_once_sends_pause_or_the_interval_passes() {
    let w = DedupeWindow::new(10_000, 3);
    assert!(
        !w.save_due(100, 1_000, false),
        "first look: no pause seen yet"
    );
    assert!(w.save_due(200, 1_000, false), "never saved, and paused");
    let (_, token) = w.save(0);
    w.mark_saved(token, 200);
    assert!(!w.save_due(5_000, 1_000, true), "nothing changed since");
    store(&w, "T", "A", 1, 1_000);
    assert!(
        !w.save_due(300, 1_000, false),
        "sends arrived since the last look"
    );
    assert!(w.save_due(400, 1_000, false), "paused");
    let (_, token) = w.save(0);
    w.mark_saved(token, 400);
    for (i, key) in ["B", "C", "D"].into_iter().enumerate() {
        let at = 500 + 100 * u64::try_from(i).expect("small");
        store(&w, "T", key, 2, 1_001);
        assert!(
            !w.save_due(at, 1_000, false),
            "sending, not due yet at {at}"
        );
    }
    store(&w, "T", "E", 3, 1_002);
    assert!(
        w.save_due(1_400, 1_000, false),
        "the interval passed under load"
    );
    assert!(w.save_due(1_401, 1_000, true), "stopping");
    // A pause saves only after a burst: cap / IDLE_SAVE_SHARE claims.
    let cap = 4 * usize::try_from(IDLE_SAVE_SHARE).expect("small");
    let w = DedupeWindow::new(10_000, cap);
    let (_, token) = w.save(0);
    w.mark_saved(token, 0);
    for i in 0..3 {
        store(&w, "T", &format!("K{i}"), i, 1_000);
    }
    assert!(!w.save_due(100, 1_000, false), "sending");
    assert!(
        !w.save_due(200, 1_000, false),
        "paused after 3 claims: too few"
    );
    assert!(
        w.save_due(1_000, 1_000, false),
        "sparse sends wait for the interval"
    );
    let (_, token) = w.save(0);
    w.mark_saved(token, 1_000);
    for i in 0..4 {
        store(&w, "T", &format!("L{i}"), i, 1_000);
    }
    assert!(!w.save_due(1_100, 1_000, false), "sending");
    assert!(w.save_due(1_200, 1_000, false), "paused after a burst of 4");
}

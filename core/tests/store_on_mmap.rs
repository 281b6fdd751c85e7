//! The store on real mapped files: rollover, restart after a clean
//! shutdown and after a process crash (the page cache survives, the abort
//! marker forces verification), with every message read back intact.

mod support;

use sluice_core::disk::MmapDisk;
use sluice_core::{FlushMode, MessageStore, StoreConfig, SystemClock};
use support::{block_on, msg, queue_bodies};

#[test]
fn mmap_store_survives_clean_restart_and_process_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StoreConfig {
        flush_mode: FlushMode::Sync,
        ..StoreConfig::for_tests()
    };
    let open = || {
        let disk = MmapDisk::new(dir.path()).expect("disk");
        block_on(MessageStore::open(disk, SystemClock::new(), cfg.clone())).expect("open")
    };
    let want: Vec<Vec<u8>> = (0..1_500)
        .map(|i| format!("payload-{i}-{}", "z".repeat(i % 300)).into_bytes())
        .collect();
    let store = open();
    for b in &want[..1_000] {
        block_on(store.put(msg("T", 0, b, Some("k"), None), true)).expect("put");
    }
    assert!(store.commit_log().chain_segments() > 2);
    block_on(store.shutdown()).expect("shutdown");
    drop(store);

    let store = open();
    assert_eq!(queue_bodies(&store, "T", 0), want[..1_000].to_vec());
    for b in &want[1_000..] {
        block_on(store.put(msg("T", 0, b, Some("k"), None), true)).expect("put");
    }
    drop(store); // no shutdown: a process crash

    let store = open();
    assert_eq!(queue_bodies(&store, "T", 0), want);
    assert_eq!(
        store
            .query_by_key("T", "k", 10, 0, i64::MAX)
            .expect("query")
            .len(),
        10
    );
}

/// A lone `SYNC_FLUSH` writer's put completes in the poll that starts it:
/// the append, the msync (on the caller's thread for a short range) and the
/// durability answer, with no hop to a sync thread and back and no yield
/// for company that is not there. On a broker that is one task, on the
/// connection's reader, for the whole send (issue 20, one sync sender).
#[test]
fn a_lone_sync_flush_put_completes_in_one_poll() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = StoreConfig {
        flush_mode: FlushMode::Sync,
        ..StoreConfig::for_tests()
    };
    let disk = MmapDisk::new(dir.path()).expect("disk");
    let store = block_on(MessageStore::open(disk, SystemClock::new(), cfg)).expect("open");
    // The first put may create the segment (a wait on the allocator).
    block_on(store.put(msg("T", 0, b"first", None, None), true)).expect("put");
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..20 {
        let put = store.put(msg("T", 0, format!("m{i}").as_bytes(), None, None), true);
        let polled = std::pin::pin!(put).poll(&mut cx);
        assert!(
            matches!(polled, Poll::Ready(Ok(_))),
            "put {i} did not complete in one poll"
        );
    }
    assert_eq!(
        store.commit_log().durable(),
        store.commit_log().written(),
        "every put was answered durable"
    );
}

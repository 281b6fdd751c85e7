//! Orderly-consumption queue locks in a real `sluice-node standalone`
//! process: a queue is held by one client at a time, an unlock frees it,
//! and a lock that is not renewed expires after the configured time.

mod support;

use std::time::Duration;

use bytes::Bytes;
use sluice_net::body::{self, LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use sluice_net::remoting::{request_code, response_code};
use sluice_net::RemotingCommand;
use support::{Client, Node};

fn queue(queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: "Locked".into(),
        broker_name: "broker-a".into(),
        queue_id,
    }
}

async fn lock_call(c: &Client, code: i32, client_id: &str, ids: &[i32]) -> Vec<i32> {
    let request = LockBatchRequestBody {
        consumer_group: "og".into(),
        client_id: client_id.into(),
        only_this_broker: true,
        mq_set: ids.iter().copied().map(queue).collect(),
    };
    let json = body::encode(&request, "LockBatchRequestBody").expect("encode");
    let r = c
        .call(
            RemotingCommand::request(code).with_body(Bytes::from(json)),
            Duration::from_secs(5),
        )
        .await
        .expect("lock call");
    assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
    if code == request_code::UNLOCK_BATCH_MQ {
        return Vec::new();
    }
    let answer: LockBatchResponseBody =
        body::decode(&r.body, "LockBatchResponseBody").expect("decode");
    let mut got: Vec<i32> = answer.lock_ok_mq_set.iter().map(|q| q.queue_id).collect();
    got.sort_unstable();
    got
}

#[test]
fn queue_locks_are_exclusive_released_and_expire_in_a_real_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", "lock_expiry_ms = 1000\n");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // Two clients on two connections, as two consumer processes would be.
        let c1 = Client::new(&node.broker);
        let c2 = Client::new(&node.broker);
        let lock = request_code::LOCK_BATCH_MQ;
        assert_eq!(lock_call(&c1, lock, "c1", &[0, 1]).await, vec![0, 1]);
        assert_eq!(
            lock_call(&c2, lock, "c2", &[1, 2]).await,
            vec![2],
            "queue 1 is c1's"
        );
        // Renewing keeps what c1 holds and gets nothing of c2's.
        assert_eq!(lock_call(&c1, lock, "c1", &[0, 1, 2]).await, vec![0, 1]);
        lock_call(&c2, request_code::UNLOCK_BATCH_MQ, "c2", &[2]).await;
        assert_eq!(
            lock_call(&c1, lock, "c1", &[2]).await,
            vec![2],
            "unlock freed queue 2"
        );
        // c1 stops renewing; after the 1 s expiry c2 takes everything.
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        assert_eq!(lock_call(&c2, lock, "c2", &[0, 1, 2]).await, vec![0, 1, 2]);
        assert!(lock_call(&c1, lock, "c1", &[0]).await.is_empty());
    });
}

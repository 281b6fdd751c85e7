#![recursion_limit = "512"]
//! rust-peer: Sluice interop scenarios on the crates.io RocketMQ Rust client
//! (`rocketmq-client-rust` 1.0.0), one subcommand per feature:
//!
//!   rust-peer <scenario> --namesrv HOST:PORT [--ca CA.pem --other-ca CA.pem]
//!             [--access-key KEY --secret-key SECRET]
//!
//! Each scenario makes its own topic and group names, prints one
//! `PASS <scenario>: ...` or `FAIL <scenario>: ...` line, and exits 0 only
//! on PASS. `rust-peer all` runs every plain scenario in one process;
//! `rust-peer list` prints every name. With `--ca` every client speaks TLS
//! and verifies the server against that CA; with `--access-key` every
//! client signs its requests (RocketMQ ACL 1.0). The secured scenarios
//! (`tls-roundtrip`, `acl-roundtrip`) need those flags and a node that
//! enforces them (see secure.rs). The client's own log goes to stderr at
//! `RUST_LOG`'s level (default `warn`).
//!
//! Scenarios that need the broker to act on a timer assume the node runs
//! with short settings (see client/tests/interop_rust.rs): delay levels
//! "1s 2s 1s 1s ...", transaction check-back after ~1 s.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cheetah_string::CheetahString;
use parking_lot::Mutex;
use rocketmq_client_rust::{
    ClientConfig, ClientError, ClientResult, ClientRuntime, ClientRuntimeConfig,
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeOrderlyContext,
    ConsumeOrderlyStatus, DefaultLitePullConsumer, DefaultMQProducer, DefaultMQPushConsumer,
    LocalTransactionState, MQPushConsumer, MessageSelector, MessageUtil, SendStatus,
    TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_protocol::protocol::heartbeat::message_model::MessageModel;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use rocketmq_transport::api::RPCHook;

mod secure;

use secure::{AclKeys, TlsTrust};

/// Every scenario, in the order `all` runs them.
const SCENARIOS: &[&str] = &[
    "sync-send",
    "async-send",
    "oneway-send",
    "batch-send",
    "orderly",
    "broadcasting",
    "lite-pull",
    "sql-filter",
    "transaction",
    "delay",
    "retry-dlq",
    "query",
    "request-reply",
];

/// Scenarios against a node that enforces TLS or ACL, each needing its
/// flags; not part of `all`.
const SECURED_SCENARIOS: &[&str] = &["tls-roundtrip", "acl-roundtrip"];

/// Longest any one scenario may take.
const SCENARIO_BUDGET: Duration = Duration::from_secs(30);

type Outcome = Result<String, String>;

fn fail<T>(msg: impl Into<String>) -> Result<T, String> {
    Err(msg.into())
}

fn ce(what: &str) -> impl FnOnce(ClientError) -> String + '_ {
    // The Display form is only the error's public message ("Argument is
    // invalid" for every client exception); the causes say what happened.
    move |e| {
        let mut text = format!("{what}: {e}");
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            text.push_str(&format!(": {c}"));
            cause = c.source();
        }
        text
    }
}

fn millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

struct Rt {
    owner: RuntimeOwner,
    client: Arc<ClientRuntime>,
    tel: rocketmq_observability::TelemetryRuntimeGuard,
}

impl Rt {
    fn new(scope: &str) -> ClientResult<Self> {
        let owner = RuntimeOwner::plan(RuntimeConfig {
            thread_name: format!("rust-peer-{scope}"),
            ..Default::default()
        })
        .expect("runtime config")
        .build()
        .map_err(|e| ClientError::internal("runtime", e))?;
        // The client's own log goes to stderr, at RUST_LOG's level (warn
        // when unset).
        let mut tc = rocketmq_observability::TelemetryBootstrapConfig::default();
        tc.logging.filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
        tc.logging.console.ansi = false;
        let tel = rocketmq_observability::install_global(&tc)
            .map_err(|e| ClientError::internal("telemetry", e))?;
        let client = ClientRuntime::try_new(
            owner.root_context().component("client"),
            ClientRuntimeConfig::default(),
            tel.handle(),
        )?;
        Ok(Self { owner, client, tel })
    }
}

/// What every scenario gets: the client runtime, the name server, a
/// suffix that makes its names unique, and how its clients secure their
/// connections (`--ca`) and sign their requests (`--access-key`).
struct Env {
    client: Arc<ClientRuntime>,
    ns: String,
    uniq: String,
    instances: AtomicUsize,
    tls: Option<TlsTrust>,
    acl: Option<AclKeys>,
}

impl Env {
    fn name(&self, what: &str) -> String {
        format!("{what}_{}", self.uniq)
    }

    /// A client config with its own instance name (so two clients in this
    /// process never share a client instance) and the shortest route and
    /// heartbeat periods it accepts.
    fn config(&self) -> ClientConfig {
        let n = self.instances.fetch_add(1, Ordering::Relaxed);
        let mut c = ClientConfig::new();
        c.set_instance_name(CheetahString::from_string(format!(
            "rust-peer-{}-{n}",
            self.uniq
        )));
        c.set_namesrv_addr(CheetahString::from_string(self.ns.clone()));
        // The client's floor for both (10 s; its defaults are 30 s).
        c.set_poll_name_server_interval(10_000);
        c.set_heartbeat_broker_interval(10_000);
        if let Some(tls) = &self.tls {
            secure::trust(&mut c, &tls.ca);
        }
        c
    }

    /// The request signer every client gets, if `--access-key` was given.
    fn signer(&self) -> Option<Arc<dyn RPCHook>> {
        self.acl.as_ref().map(AclKeys::signer)
    }

    async fn producer(&self, group: &str) -> Result<DefaultMQProducer, String> {
        self.producer_with(group, self.config(), self.signer())
            .await
    }

    /// A started producer with this config and signer (none: unsigned).
    async fn producer_with(
        &self,
        group: &str,
        config: ClientConfig,
        signer: Option<Arc<dyn RPCHook>>,
    ) -> Result<DefaultMQProducer, String> {
        let mut b = DefaultMQProducer::builder(self.client.clone())
            .client_config(config)
            .name_server_addr(self.ns.clone())
            .producer_group(group.to_owned())
            .send_msg_timeout(5000);
        if let Some(signer) = signer {
            b = b.rpc_hook(signer);
        }
        let mut p = b.build();
        p.start().await.map_err(ce("producer start"))?;
        Ok(p)
    }

    fn push_builder(&self, group: &str) -> rocketmq_client_rust::DefaultMQPushConsumerBuilder {
        DefaultMQPushConsumer::builder(self.client.clone())
            .client_config(self.config())
            .name_server_addr(self.ns.clone())
            .consumer_group(group.to_owned())
            .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
            .rpc_hook(self.signer())
    }
}

/// Messages a consumer received, with when.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<(MessageExt, Instant)>>>);

impl Sink {
    fn push(&self, m: &MessageExt) {
        self.0.lock().push((m.clone(), Instant::now()));
    }
    fn len(&self) -> usize {
        self.0.lock().len()
    }
    fn msgs(&self) -> Vec<MessageExt> {
        self.0.lock().iter().map(|(m, _)| m.clone()).collect()
    }
    fn timed(&self) -> Vec<(MessageExt, Instant)> {
        self.0.lock().clone()
    }
    fn count_body(&self, body: &str) -> usize {
        self.0
            .lock()
            .iter()
            .filter(|(m, _)| body_of(m) == body)
            .count()
    }
}

/// A push consumer (clustering unless `model` says otherwise) that records
/// every message and acknowledges it.
async fn collecting_consumer(
    env: &Env,
    group: &str,
    topic: &str,
    selector: Option<MessageSelector>,
    model: MessageModel,
    sink: Sink,
) -> Result<DefaultMQPushConsumer, String> {
    let mut c = env.push_builder(group).message_model(model).build();
    match selector {
        Some(s) => c
            .subscribe_with_selector(topic, Some(s))
            .await
            .map_err(ce("subscribe"))?,
        None => c.subscribe(topic, "*").await.map_err(ce("subscribe"))?,
    }
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt],
              _c: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            for m in msgs {
                sink.push(m);
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    c.start().await.map_err(ce("consumer start"))?;
    Ok(c)
}

/// Polls `cond` every 50 ms until it holds or `limit` passes.
async fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn body_of(m: &MessageExt) -> String {
    String::from_utf8_lossy(m.message.body_slice()).into_owned()
}

fn tags_of(m: &MessageExt) -> String {
    m.message.tags().unwrap_or_default().to_owned()
}

fn keys_of(m: &MessageExt) -> Vec<String> {
    m.message.keys().unwrap_or_default()
}

fn prop_of(m: &MessageExt, k: &str) -> Option<String> {
    m.message.property(k).map(str::to_owned)
}

/// A message with tag, key and one user property `idx`.
fn msg(topic: &str, i: usize, prefix: &str) -> Result<Message, String> {
    Message::builder()
        .topic(topic)
        .tags(format!("Tag{}", i % 3))
        .key(format!("key-{prefix}-{i}"))
        .body(format!("{prefix}-{i}"))
        .raw_property("idx", i.to_string())
        .and_then(|b| b.build())
        .map_err(|e| format!("build message: {e}"))
}

/// Checks the consumed set is exactly `prefix-0 .. prefix-(n-1)`, each with
/// the tag, key and property [`msg`] gave it.
fn check_intact(got: &[MessageExt], prefix: &str, n: usize) -> Result<(), String> {
    let mut seen = BTreeMap::new();
    for m in got {
        let body = body_of(m);
        let Some(i) = body
            .strip_prefix(&format!("{prefix}-"))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            return fail(format!("unexpected body {body:?}"));
        };
        if tags_of(m) != format!("Tag{}", i % 3) {
            return fail(format!("{body}: tags {:?}", tags_of(m)));
        }
        if keys_of(m) != [format!("key-{prefix}-{i}")] {
            return fail(format!("{body}: keys {:?}", keys_of(m)));
        }
        if prop_of(m, "idx") != Some(i.to_string()) {
            return fail(format!("{body}: property idx {:?}", prop_of(m, "idx")));
        }
        *seen.entry(i).or_insert(0usize) += 1;
    }
    let missing: Vec<usize> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() {
        return fail(format!("missing {missing:?} of {n}"));
    }
    Ok(())
}

/// Consumes `topic` from the first offset until `n` distinct bodies arrived.
async fn consume_all(env: &Env, topic: &str, n: usize) -> Result<Vec<MessageExt>, String> {
    let sink = Sink::default();
    let mut c = collecting_consumer(
        env,
        &env.name("cg"),
        topic,
        None,
        MessageModel::Clustering,
        sink.clone(),
    )
    .await?;
    let ok = wait_for(Duration::from_secs(20), || {
        sink.msgs()
            .iter()
            .map(body_of)
            .collect::<BTreeSet<_>>()
            .len()
            >= n
    })
    .await;
    c.shutdown().await;
    let got = sink.msgs();
    if !ok {
        return fail(format!(
            "consumer received {} distinct of {n}: {:?}",
            got.iter().map(body_of).collect::<BTreeSet<_>>().len(),
            got.iter().map(body_of).collect::<Vec<_>>()
        ));
    }
    Ok(got)
}

fn ok_status(r: &Option<rocketmq_client_rust::SendResult>) -> Result<(), String> {
    match r {
        Some(r) if r.send_status == SendStatus::SendOk && r.msg_id.is_some() => Ok(()),
        Some(r) => fail(format!("send result {r}")),
        None => fail("send returned no result"),
    }
}

// ---------------------------------------------------------------- scenarios

async fn sync_send(env: &Env) -> Outcome {
    const N: usize = 20;
    let topic = env.name("RpSync");
    let mut p = env.producer(&env.name("pg")).await?;
    for i in 0..N {
        let r = p.send(msg(&topic, i, "sync")?).await.map_err(ce("send"))?;
        ok_status(&r)?;
    }
    let got = consume_all(env, &topic, N).await?;
    check_intact(&got, "sync", N)?;
    p.shutdown().await;
    Ok(format!("{N} sync sends acked SEND_OK and consumed intact"))
}

async fn async_send(env: &Env) -> Outcome {
    const N: usize = 20;
    let topic = env.name("RpAsync");
    let mut p = env.producer(&env.name("pg")).await?;
    // The first send creates the topic; the rest are in flight together.
    ok_status(&p.send(msg(&topic, 0, "async")?).await.map_err(ce("send"))?)?;
    let oks = Arc::new(AtomicUsize::new(1));
    let errs: Arc<Mutex<Vec<String>>> = Arc::default();
    for i in 1..N {
        let (oks, errs) = (oks.clone(), errs.clone());
        p.send_with_callback(msg(&topic, i, "async")?, move |r, e| match (r, e) {
            (Some(r), None) if r.send_status == SendStatus::SendOk => {
                oks.fetch_add(1, Ordering::SeqCst);
            }
            (r, e) => errs.lock().push(format!("result {r:?} error {e:?}")),
        })
        .await
        .map_err(ce("send_with_callback"))?;
    }
    if !wait_for(Duration::from_secs(15), || {
        oks.load(Ordering::SeqCst) + errs.lock().len() >= N
    })
    .await
    {
        return fail(format!(
            "{} of {N} callbacks ran",
            oks.load(Ordering::SeqCst) + errs.lock().len()
        ));
    }
    if !errs.lock().is_empty() {
        return fail(format!("failed callbacks: {:?}", errs.lock()));
    }
    let got = consume_all(env, &topic, N).await?;
    check_intact(&got, "async", N)?;
    p.shutdown().await;
    Ok(format!(
        "{N} async sends called back SEND_OK and consumed intact"
    ))
}

async fn oneway_send(env: &Env) -> Outcome {
    const N: usize = 20;
    let topic = env.name("RpOneway");
    let mut p = env.producer(&env.name("pg")).await?;
    // A sync send first so the topic exists (a oneway send has no answer
    // to learn from).
    ok_status(
        &p.send(msg(&topic, 0, "oneway")?)
            .await
            .map_err(ce("send"))?,
    )?;
    for i in 1..N {
        p.send_oneway(msg(&topic, i, "oneway")?)
            .await
            .map_err(ce("send_oneway"))?;
    }
    let got = consume_all(env, &topic, N).await?;
    check_intact(&got, "oneway", N)?;
    p.shutdown().await;
    Ok(format!("{N} oneway sends consumed intact"))
}

async fn batch_send(env: &Env) -> Outcome {
    const N: usize = 16;
    let topic = env.name("RpBatch");
    let mut p = env.producer(&env.name("pg")).await?;
    let batch: Vec<Message> = (0..N)
        .map(|i| msg(&topic, i, "batch"))
        .collect::<Result<_, _>>()?;
    let r = p.send_batch(batch).await.map_err(ce("send_batch"))?;
    if r.send_status != SendStatus::SendOk {
        return fail(format!("batch send result {r}"));
    }
    let ids: Vec<String> = r
        .msg_id
        .as_ref()
        .map(|s| s.as_str().split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    if ids.len() != N {
        return fail(format!(
            "batch send result carries {} message ids, want {N}: {r}",
            ids.len()
        ));
    }
    let got = consume_all(env, &topic, N).await?;
    if got.len() != N {
        return fail(format!("consumed {} messages, want exactly {N}", got.len()));
    }
    check_intact(&got, "batch", N)?;
    // Each stored message is its own: distinct offsets (offset message ids).
    let offsets: BTreeSet<i64> = got.iter().map(|m| m.commit_log_offset).collect();
    if offsets.len() != N {
        return fail(format!(
            "{N} messages share {} commit log offsets",
            offsets.len()
        ));
    }
    // Released Apache brokers (4.9.x through 5.3.3) append the batch request's
    // own properties, its UNIQ_KEY included, to every stored message, so
    // consumers see the batch's id rather than each message's (apache/rocketmq
    // #9416, fixed after 5.3.3). Either is accepted; anything else is not.
    let batch_uniq: BTreeSet<String> = got.iter().filter_map(|m| prop_of(m, "UNIQ_KEY")).collect();
    let own: BTreeSet<String> = ids.iter().cloned().collect();
    if batch_uniq != own && batch_uniq.len() != 1 {
        return fail(format!(
            "consumed UNIQ_KEYs {batch_uniq:?}: neither the sent ids {own:?} nor one batch id"
        ));
    }
    let id_note = if batch_uniq == own {
        "its own UNIQ_KEY"
    } else {
        "the batch's UNIQ_KEY (as Apache <= 5.3.3)"
    };
    p.shutdown().await;
    Ok(format!("one batch of {N} consumed as {N} messages, each with its own tag, key, property, body and offset; each carries {id_note}"))
}

async fn orderly(env: &Env) -> Outcome {
    const KEYS: usize = 4;
    const PER_KEY: usize = 15;
    let topic = env.name("RpOrderly");
    let mut p = env.producer(&env.name("pg")).await?;
    let mut queue_of_key: HashMap<String, i32> = HashMap::new();
    // Interleave keys so a queue sees several keys' messages mixed.
    for seq in 0..PER_KEY {
        for k in 0..KEYS {
            let key = format!("order-{k}");
            let m = Message::builder()
                .topic(topic.as_str())
                .tags("order")
                .sharding_key(key.as_str())
                .body(format!("{key}:{seq}"))
                .build()
                .map_err(|e| format!("build: {e}"))?;
            let r = p
                .send_with_selector(
                    m,
                    |mqs: &[MessageQueue], _m: &Message, key: &String| {
                        let h = key
                            .bytes()
                            .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
                        mqs.get(h % mqs.len().max(1)).cloned()
                    },
                    key.clone(),
                )
                .await
                .map_err(ce("send_with_selector"))?;
            ok_status(&r)?;
            let q = r
                .and_then(|r| r.message_queue)
                .map(|q| q.queue_id())
                .unwrap_or(-1);
            if *queue_of_key.entry(key.clone()).or_insert(q) != q {
                return fail(format!(
                    "{key} went to queues {} and {q}",
                    queue_of_key[&key]
                ));
            }
        }
    }
    let seen: Arc<Mutex<Vec<(String, usize, i32)>>> = Arc::default();
    let s = seen.clone();
    let mut c = env.push_builder(&env.name("cg")).build();
    c.subscribe(topic.as_str(), "*")
        .await
        .map_err(ce("subscribe"))?;
    c.register_message_listener_orderly(
        move |msgs: &[&MessageExt],
              _c: &mut ConsumeOrderlyContext|
              -> ClientResult<ConsumeOrderlyStatus> {
            for m in msgs {
                let body = body_of(m);
                let (k, seq) = body.split_once(':').unwrap_or((body.as_str(), "x"));
                s.lock()
                    .push((k.to_owned(), seq.parse().unwrap_or(usize::MAX), m.queue_id));
            }
            Ok(ConsumeOrderlyStatus::Success)
        },
    );
    c.start().await.map_err(ce("consumer start"))?;
    let done = wait_for(Duration::from_secs(20), || {
        seen.lock().len() >= KEYS * PER_KEY
    })
    .await;
    c.shutdown().await;
    let seen = seen.lock().clone();
    if !done {
        return fail(format!(
            "orderly consumer got {} of {}",
            seen.len(),
            KEYS * PER_KEY
        ));
    }
    for k in 0..KEYS {
        let key = format!("order-{k}");
        let mine: Vec<&(String, usize, i32)> =
            seen.iter().filter(|(kk, _, _)| *kk == key).collect();
        let seqs: Vec<usize> = mine.iter().map(|(_, s, _)| *s).collect();
        if seqs != (0..PER_KEY).collect::<Vec<_>>() {
            return fail(format!("{key} consumed in order {seqs:?}"));
        }
        if mine.iter().any(|(_, _, q)| *q != queue_of_key[&key]) {
            return fail(format!("{key} consumed from several queues"));
        }
    }
    p.shutdown().await;
    Ok(format!(
        "{KEYS} sharding keys x {PER_KEY}: each key on one queue ({:?}), consumed in send order",
        queue_of_key.values().collect::<BTreeSet<_>>()
    ))
}

async fn broadcasting(env: &Env) -> Outcome {
    const N: usize = 10;
    let topic = env.name("RpBroadcast");
    let group = env.name("cg");
    let mut p = env.producer(&env.name("pg")).await?;
    for i in 0..N {
        ok_status(&p.send(msg(&topic, i, "bc")?).await.map_err(ce("send"))?)?;
    }
    let (a, b) = (Sink::default(), Sink::default());
    let mut ca = collecting_consumer(
        env,
        &group,
        &topic,
        None,
        MessageModel::Broadcasting,
        a.clone(),
    )
    .await?;
    let mut cb = collecting_consumer(
        env,
        &group,
        &topic,
        None,
        MessageModel::Broadcasting,
        b.clone(),
    )
    .await?;
    let done = wait_for(Duration::from_secs(20), || a.len() >= N && b.len() >= N).await;
    ca.shutdown().await;
    cb.shutdown().await;
    if !done {
        return fail(format!(
            "broadcast consumers got {} and {} of {N}",
            a.len(),
            b.len()
        ));
    }
    check_intact(&a.msgs(), "bc", N).map_err(|e| format!("consumer A: {e}"))?;
    check_intact(&b.msgs(), "bc", N).map_err(|e| format!("consumer B: {e}"))?;
    p.shutdown().await;
    Ok(format!("two consumers of one group each received all {N}"))
}

async fn lite_pull(env: &Env) -> Outcome {
    const N: usize = 20;
    let topic = env.name("RpLitePull");
    let mut p = env.producer(&env.name("pg")).await?;
    for i in 0..N {
        ok_status(&p.send(msg(&topic, i, "lite")?).await.map_err(ce("send"))?)?;
    }
    let c = DefaultLitePullConsumer::builder(env.client.clone())
        .name_server_addr(env.ns.clone())
        .instance_name(format!("rust-peer-{}-lite", env.uniq))
        .consumer_group(env.name("lpg"))
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .pull_batch_size(8)
        .auto_commit(true)
        .build()
        .map_err(ce("lite pull build"))?;
    c.subscribe(topic.as_str()).await.map_err(ce("subscribe"))?;
    c.start().await.map_err(ce("lite pull start"))?;
    let end = Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while got.iter().map(body_of).collect::<BTreeSet<_>>().len() < N && Instant::now() < end {
        got.extend(c.poll_with_timeout(500).await);
    }
    // This client's lite-pull shutdown waits out 5 s task timeouts; the
    // verdict does not depend on it.
    let _ = tokio::time::timeout(Duration::from_secs(2), c.shutdown()).await;
    check_intact(&got, "lite", N)?;
    p.shutdown().await;
    Ok(format!("lite-pull consumer polled all {N} intact"))
}

async fn sql_filter(env: &Env) -> Outcome {
    const N: usize = 20;
    let topic = env.name("RpSql");
    let mut p = env.producer(&env.name("pg")).await?;
    // One queue (the one the first send, which creates the topic, went
    // to), so the sentinel (sent last) comes after everything else.
    let first = p.send(msg(&topic, 0, "sql")?).await.map_err(ce("send"))?;
    ok_status(&first)?;
    let mq = first
        .and_then(|r| r.message_queue)
        .ok_or("the first send's result names no queue")?;
    for i in 1..N {
        let color = if i % 2 == 0 { "red" } else { "blue" };
        let m = Message::builder()
            .topic(topic.as_str())
            .tags(if i % 4 == 0 { "TagX" } else { "TagY" })
            .body(format!("sql-{i}"))
            .raw_property("a", i.to_string())
            .and_then(|b| b.raw_property("color", color))
            .and_then(|b| b.build())
            .map_err(|e| format!("build: {e}"))?;
        ok_status(&p.send_to_queue(m, mq.clone()).await.map_err(ce("send"))?)?;
    }
    let sentinel = Message::builder()
        .topic(topic.as_str())
        .tags("TagZ")
        .body("sql-sentinel")
        .raw_property("a", "1000")
        .and_then(|b| b.raw_property("color", "red"))
        .and_then(|b| b.build())
        .map_err(|e| format!("build: {e}"))?;
    ok_status(
        &p.send_to_queue(sentinel, mq.clone())
            .await
            .map_err(ce("send"))?,
    )?;
    let expr = "(a BETWEEN 5 AND 14 AND color = 'red') OR a >= 1000 OR TAGS = 'TagX'";
    let want: BTreeSet<String> = (1..N)
        .filter(|i| ((5..=14).contains(i) && i % 2 == 0) || i % 4 == 0)
        .map(|i| format!("sql-{i}"))
        .chain(["sql-sentinel".to_owned()])
        .collect();
    let sink = Sink::default();
    let mut c = collecting_consumer(
        env,
        &env.name("cg"),
        &topic,
        Some(MessageSelector::by_sql(expr)),
        MessageModel::Clustering,
        sink.clone(),
    )
    .await?;
    let done = wait_for(Duration::from_secs(20), || {
        sink.count_body("sql-sentinel") > 0
    })
    .await;
    // Whatever was pulled with or before the sentinel is being consumed now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.shutdown().await;
    let got: BTreeSet<String> = sink.msgs().iter().map(body_of).collect();
    if !done {
        return fail(format!("the sentinel never arrived; got {got:?}"));
    }
    if got != want {
        return fail(format!("SQL92 `{expr}` delivered {got:?}, want {want:?}"));
    }
    p.shutdown().await;
    Ok(format!(
        "SQL92 `{expr}` delivered exactly the {} matching messages",
        want.len()
    ))
}

struct TxListener {
    checked: Arc<Mutex<Vec<String>>>,
}

impl TransactionListener for TxListener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn std::any::Any + Send + Sync)>,
    ) -> LocalTransactionState {
        match msg.tags().as_ref().map(|t| t.as_str()) {
            Some("commit") => LocalTransactionState::CommitMessage,
            Some("rollback") => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let tags = tags_of(msg);
        self.checked.lock().push(tags.clone());
        match tags.as_str() {
            "rollback" => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::CommitMessage,
        }
    }
}

async fn transaction(env: &Env) -> Outcome {
    let topic = env.name("RpTx");
    let checked: Arc<Mutex<Vec<String>>> = Arc::default();
    // A plain message first so the topic exists and the consumer is live
    // before any half message resolves.
    let mut plain = env.producer(&env.name("pg")).await?;
    ok_status(
        &plain
            .send(
                Message::builder()
                    .topic(topic.as_str())
                    .tags("plain")
                    .body("tx-plain")
                    .build_unchecked(),
            )
            .await
            .map_err(ce("send"))?,
    )?;
    let sink = Sink::default();
    let mut c = collecting_consumer(
        env,
        &env.name("cg"),
        &topic,
        None,
        MessageModel::Clustering,
        sink.clone(),
    )
    .await?;
    if !wait_for(Duration::from_secs(15), || sink.count_body("tx-plain") > 0).await {
        return fail("the consumer never received the plain warm-up message");
    }
    let mut tp = TransactionMQProducer::builder(env.client.clone())
        .client_config(env.config())
        .name_server_addr(env.ns.clone())
        .producer_group(env.name("txpg"))
        .transaction_listener(TxListener {
            checked: checked.clone(),
        })
        .build();
    tp.start().await.map_err(ce("transaction producer start"))?;
    for state in ["commit", "rollback", "unknown"] {
        let m = Message::builder()
            .topic(topic.as_str())
            .tags(state)
            .body(format!("tx-{state}"))
            .build_unchecked();
        let r = tp
            .send_message_in_transaction::<(), _>(m, None)
            .await
            .map_err(ce("send_message_in_transaction"))?;
        match r.send_result.as_ref() {
            Some(s) if s.send_status == SendStatus::SendOk => {}
            other => return fail(format!("{state}: half send result {other:?}")),
        }
    }
    let done = wait_for(Duration::from_secs(25), || {
        sink.count_body("tx-commit") > 0 && sink.count_body("tx-unknown") > 0
    })
    .await;
    // A rolled-back message that was going to leak would come with the others.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.shutdown().await;
    tp.shutdown().await;
    plain.shutdown().await;
    let bodies: Vec<String> = sink.msgs().iter().map(body_of).collect();
    let checked = checked.lock().clone();
    if !done {
        return fail(format!(
            "consumer got {bodies:?}; want tx-commit and tx-unknown (check-back asked about {checked:?})"
        ));
    }
    if sink.count_body("tx-rollback") > 0 {
        return fail(format!("the rolled-back message was delivered: {bodies:?}"));
    }
    if !checked.iter().any(|t| t == "unknown") {
        return fail(format!(
            "unknown was delivered but check-back never asked about it (asked {checked:?})"
        ));
    }
    if sink.count_body("tx-commit") != 1 || sink.count_body("tx-unknown") != 1 {
        return fail(format!("duplicates: {bodies:?}"));
    }
    Ok(format!("commit delivered, rollback never, unknown delivered after check-back (checked {checked:?})"))
}

async fn delay(env: &Env) -> Outcome {
    let topic = env.name("RpDelay");
    let mut p = env.producer(&env.name("pg")).await?;
    ok_status(
        &p.send(
            Message::builder()
                .topic(topic.as_str())
                .tags("warm")
                .body("delay-warm")
                .build_unchecked(),
        )
        .await
        .map_err(ce("send"))?,
    )?;
    let sink = Sink::default();
    let mut c = collecting_consumer(
        env,
        &env.name("cg"),
        &topic,
        None,
        MessageModel::Clustering,
        sink.clone(),
    )
    .await?;
    if !wait_for(Duration::from_secs(15), || {
        sink.count_body("delay-warm") > 0
    })
    .await
    {
        return fail("the consumer never received the warm-up message");
    }
    // Level 2 is 2 s in the test node's delay_levels ("1s 2s ...").
    const LEVEL_2_MS: u64 = 2000;
    const DELIVER_IN_MS: u64 = 3000;
    let sent = Instant::now();
    let sent_wall = millis();
    let r = p
        .send(
            Message::builder()
                .topic(topic.as_str())
                .tags("lvl")
                .body("delay-level")
                .delay_level(2)
                .build_unchecked(),
        )
        .await
        .map_err(ce("send delay level"))?;
    ok_status(&r)?;
    let r = p
        .send(
            Message::builder()
                .topic(topic.as_str())
                .tags("at")
                .body("delay-deliver-time")
                .deliver_time_ms(sent_wall + DELIVER_IN_MS)
                .build_unchecked(),
        )
        .await
        .map_err(ce("send deliver time"))?;
    ok_status(&r)?;
    let done = wait_for(Duration::from_secs(20), || {
        sink.count_body("delay-level") > 0 && sink.count_body("delay-deliver-time") > 0
    })
    .await;
    c.shutdown().await;
    p.shutdown().await;
    if !done {
        return fail(format!(
            "got {:?}",
            sink.msgs().iter().map(body_of).collect::<Vec<_>>()
        ));
    }
    let mut report = Vec::new();
    for (m, at) in sink.timed() {
        let want = match body_of(&m).as_str() {
            "delay-level" => LEVEL_2_MS,
            "delay-deliver-time" => DELIVER_IN_MS,
            _ => continue,
        };
        let after = at.duration_since(sent).as_millis() as u64;
        if after < want {
            return fail(format!(
                "{} delivered {after} ms after the send, before its {want} ms",
                body_of(&m)
            ));
        }
        report.push(format!("{} after {after} ms (>= {want})", body_of(&m)));
    }
    Ok(format!("not delivered early: {}", report.join(", ")))
}

async fn retry_dlq(env: &Env) -> Outcome {
    const MAX_RECONSUME: i32 = 2;
    let topic = env.name("RpRetry");
    let group = env.name("cg");
    let dlq = format!("%DLQ%{group}");
    let mut p = env.producer(&env.name("pg")).await?;
    let r = p
        .send(
            Message::builder()
                .topic(topic.as_str())
                .tags("doomed")
                .key("doomed-key")
                .body("retry-me")
                .build_unchecked(),
        )
        .await
        .map_err(ce("send"))?;
    ok_status(&r)?;
    let uniq = r
        .and_then(|r| r.msg_id)
        .map(|s| s.to_string())
        .unwrap_or_default();
    let attempts: Arc<Mutex<Vec<(i32, String)>>> = Arc::default();
    let a = attempts.clone();
    let mut c = env
        .push_builder(&group)
        .max_reconsume_times(MAX_RECONSUME)
        .build();
    c.subscribe(topic.as_str(), "*")
        .await
        .map_err(ce("subscribe"))?;
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt],
              _c: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            for m in msgs {
                a.lock().push((m.reconsume_times, body_of(m)));
            }
            Ok(ConsumeConcurrentlyStatus::ReconsumeLater)
        },
    );
    c.start().await.map_err(ce("consumer start"))?;
    let want: Vec<i32> = (0..=MAX_RECONSUME).collect();
    let all_tries = wait_for(Duration::from_secs(25), || {
        attempts.lock().len() > MAX_RECONSUME as usize
    })
    .await;
    // Then the DLQ: read it with a consumer of its own group.
    let dlq_sink = Sink::default();
    let mut d = collecting_consumer(
        env,
        &env.name("dlqg"),
        &dlq,
        None,
        MessageModel::Clustering,
        dlq_sink.clone(),
    )
    .await?;
    let in_dlq = wait_for(Duration::from_secs(15), || {
        dlq_sink.count_body("retry-me") > 0
    })
    .await;
    // One more round would have come by now if the broker retried past the limit.
    c.shutdown().await;
    d.shutdown().await;
    p.shutdown().await;
    let attempts = attempts.lock().clone();
    let times: Vec<i32> = attempts.iter().map(|(t, _)| *t).collect();
    if !all_tries {
        return fail(format!(
            "consumer saw reconsume_times {times:?}, want {want:?}"
        ));
    }
    if times != want {
        return fail(format!(
            "reconsume_times seen {times:?}, want exactly {want:?}"
        ));
    }
    if !in_dlq {
        return fail(format!(
            "after {times:?} the message never appeared in {dlq}"
        ));
    }
    let m = &dlq_sink.msgs()[0];
    if prop_of(m, "UNIQ_KEY").as_deref() != Some(uniq.as_str()) || keys_of(m) != ["doomed-key"] {
        return fail(format!(
            "DLQ message lost its identity: uniq {:?} keys {:?}",
            prop_of(m, "UNIQ_KEY"),
            keys_of(m)
        ));
    }
    Ok(format!(
        "consumed with reconsume_times {times:?}, then found in {dlq} with its key and id"
    ))
}

async fn query(env: &Env) -> Outcome {
    let topic = env.name("RpQuery");
    let key = env.name("qkey");
    let mut p = env.producer(&env.name("pg")).await?;
    let begin = millis().saturating_sub(60_000);
    let mut sent = Vec::new();
    for i in 0..3 {
        let m = Message::builder()
            .topic(topic.as_str())
            .tags("q")
            .key(key.as_str())
            .body(format!("query-{i}"))
            .build_unchecked();
        let r = p.send(m).await.map_err(ce("send"))?;
        ok_status(&r)?;
        let r = r.expect("checked");
        sent.push((
            r.msg_id.map(|s| s.to_string()).unwrap_or_default(),
            r.offset_msg_id.unwrap_or_default(),
        ));
    }
    // Other messages with another key must not match.
    ok_status(
        &p.send(
            Message::builder()
                .topic(topic.as_str())
                .key("other")
                .body("query-other")
                .build_unchecked(),
        )
        .await
        .map_err(ce("send"))?,
    )?;
    // The index is written as the store dispatches: retry for a while.
    let end = Instant::now() + Duration::from_secs(15);
    let by_key = loop {
        let r = p
            .query_message(&topic, &key, 32, begin, millis() + 60_000)
            .await;
        match r {
            Ok(q) if q.message_list().len() >= 3 => break q,
            other if Instant::now() >= end => {
                return fail(format!(
                    "query by key: {}",
                    match other {
                        Ok(q) => format!("{} messages", q.message_list().len()),
                        Err(e) => e.to_string(),
                    }
                ))
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    };
    let bodies: BTreeSet<String> = by_key.message_list().iter().map(body_of).collect();
    let want: BTreeSet<String> = (0..3).map(|i| format!("query-{i}")).collect();
    if bodies != want {
        return fail(format!("query by key returned {bodies:?}, want {want:?}"));
    }
    for (i, (uniq, offset_id)) in sent.iter().enumerate() {
        let want = format!("query-{i}");
        let m = p
            .view_message(&topic, offset_id)
            .await
            .map_err(ce("view by offset msg id"))?;
        if body_of(&m) != want {
            return fail(format!(
                "view {offset_id} (offset id) gave {:?}",
                body_of(&m)
            ));
        }
        let m = p
            .view_message(&topic, uniq)
            .await
            .map_err(ce("view by uniq msg id"))?;
        if body_of(&m) != want {
            return fail(format!("view {uniq} (uniq id) gave {:?}", body_of(&m)));
        }
    }
    p.shutdown().await;
    Ok(
        "query by key found exactly its 3 messages; each found again by offset id and by uniq id"
            .into(),
    )
}

async fn request_reply(env: &Env) -> Outcome {
    let topic = env.name("RpRequest");
    let mut requester = env.producer(&env.name("reqpg")).await?;
    ok_status(
        &requester
            .send(
                Message::builder()
                    .topic(topic.as_str())
                    .tags("warm")
                    .body("rr-warm")
                    .build_unchecked(),
            )
            .await
            .map_err(ce("send"))?,
    )?;
    // The responder: a consumer that replies through its own producer.
    let responder = Arc::new(env.producer(&env.name("resppg")).await?);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<Message, String>>();
    let seen = Sink::default();
    let s = seen.clone();
    let mut c = env.push_builder(&env.name("respcg")).build();
    c.subscribe(topic.as_str(), "*")
        .await
        .map_err(ce("subscribe"))?;
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt],
              _c: &ConsumeConcurrentlyContext|
              -> ClientResult<ConsumeConcurrentlyStatus> {
            for m in msgs {
                s.push(m);
                if body_of(m) == "rr-warm" {
                    continue;
                }
                let reply = MessageUtil::create_reply_message(
                    &m.message,
                    format!("reply-to:{}", body_of(m)).as_bytes(),
                )
                .map_err(|e| {
                    format!(
                        "create_reply_message: {e} (request properties {:?})",
                        m.message.properties()
                    )
                });
                let _ = tx.send(reply);
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    c.start().await.map_err(ce("responder start"))?;
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let e2 = errors.clone();
    let r2 = responder.clone();
    let sent: Arc<Mutex<Vec<String>>> = Arc::default();
    let s2 = sent.clone();
    let replier = tokio::spawn(async move {
        while let Some(reply) = rx.recv().await {
            match reply {
                Ok(m) => match r2.send(m).await {
                    Ok(r) => s2
                        .lock()
                        .push(format!("{:?}", r.map(|r| (r.send_status, r.queue_offset)))),
                    Err(e) => e2.lock().push(format!("send reply: {e}")),
                },
                Err(e) => e2.lock().push(e),
            }
        }
    });
    if !wait_for(Duration::from_secs(15), || seen.count_body("rr-warm") > 0).await {
        return fail("the responder never received the warm-up message");
    }
    let mut replies = Vec::new();
    for i in 0..3 {
        let req = Message::builder()
            .topic(topic.as_str())
            .tags("req")
            .body(format!("request-{i}"))
            .build_unchecked();
        match requester.request(req, 8000).await {
            Ok(reply) => {
                let body = reply
                    .get_body()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                if body != format!("reply-to:request-{i}") {
                    return fail(format!("request-{i}: reply body {body:?}"));
                }
                replies.push(body);
            }
            Err(e) => {
                return fail(format!(
                    "request-{i}: {}; the responder saw {:?}, sent replies {:?}, errors {:?}",
                    ce("request")(e),
                    seen.msgs().iter().map(body_of).collect::<Vec<_>>(),
                    sent.lock(),
                    errors.lock()
                ))
            }
        }
    }
    c.shutdown().await;
    replier.abort();
    requester.shutdown().await;
    Ok(format!("3 requests answered by the responder: {replies:?}"))
}

async fn run(env: &Env, scenario: &str) -> Outcome {
    match scenario {
        "sync-send" => sync_send(env).await,
        "async-send" => async_send(env).await,
        "oneway-send" => oneway_send(env).await,
        "batch-send" => batch_send(env).await,
        "orderly" => orderly(env).await,
        "broadcasting" => broadcasting(env).await,
        "lite-pull" => lite_pull(env).await,
        "sql-filter" => sql_filter(env).await,
        "transaction" => transaction(env).await,
        "delay" => delay(env).await,
        "retry-dlq" => retry_dlq(env).await,
        "query" => query(env).await,
        "request-reply" => request_reply(env).await,
        "tls-roundtrip" => secure::tls_roundtrip(env).await,
        "acl-roundtrip" => secure::acl_roundtrip(env).await,
        other => Err(format!(
            "unknown scenario {other:?}; one of {SCENARIOS:?} or {SECURED_SCENARIOS:?}"
        )),
    }
}

/// The value after `name` on the command line.
fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

async fn bounded<F: Future<Output = Outcome>>(f: F) -> Outcome {
    tokio::time::timeout(SCENARIO_BUDGET, f)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "did not finish within {} s",
                SCENARIO_BUDGET.as_secs()
            ))
        })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scenario = args.get(1).cloned().unwrap_or_else(|| "help".into());
    if scenario == "list" {
        for s in SCENARIOS.iter().chain(SECURED_SCENARIOS) {
            println!("{s}");
        }
        return;
    }
    let Some(ns) = flag(&args, "--namesrv") else {
        eprintln!(
            "usage: rust-peer <{}|all|list> --namesrv HOST:PORT \
             [--ca CA.pem --other-ca CA.pem] [--access-key KEY --secret-key SECRET]",
            SCENARIOS
                .iter()
                .chain(SECURED_SCENARIOS)
                .copied()
                .collect::<Vec<_>>()
                .join("|")
        );
        std::process::exit(2);
    };
    let tls = flag(&args, "--ca").map(|ca| TlsTrust {
        ca,
        other_ca: flag(&args, "--other-ca"),
    });
    let acl = flag(&args, "--access-key").map(|access_key| AclKeys {
        access_key,
        secret_key: flag(&args, "--secret-key").unwrap_or_default(),
    });
    // Rebalance every 2 s instead of 20 s, so a queue (say of a retry topic
    // that appears after the consumer starts) is picked up within a scenario's
    // budget. Set before any client thread exists.
    if std::env::var_os("rocketmq.client.rebalance.waitInterval").is_none() {
        std::env::set_var("rocketmq.client.rebalance.waitInterval", "2000");
    }
    // Broadcasting consumers keep offsets in local files, by default under
    // $HOME/.rocketmq_offsets (which this client does not create); keep them
    // out of $HOME.
    if std::env::var_os("rocketmq.client.localOffsetStoreDir").is_none() {
        let dir = std::env::temp_dir().join(format!("rust-peer-offsets-{}", std::process::id()));
        std::env::set_var("rocketmq.client.localOffsetStoreDir", &dir);
    }
    if let Some(dir) = std::env::var_os("rocketmq.client.localOffsetStoreDir") {
        let _ = std::fs::create_dir_all(dir);
    }
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = tokio_rt.block_on(async {
        let rt = match Rt::new(&scenario) {
            Ok(rt) => rt,
            Err(e) => {
                println!("FAIL {scenario}: client runtime: {e}");
                return 1;
            }
        };
        let env = Env {
            client: rt.client.clone(),
            ns,
            uniq: format!("{}_{}", std::process::id(), millis() % 100_000_000),
            instances: AtomicUsize::new(0),
            tls,
            acl,
        };
        let list: Vec<&str> = if scenario == "all" {
            SCENARIOS.to_vec()
        } else {
            vec![scenario.as_str()]
        };
        let mut code = 0;
        for s in list {
            let t0 = Instant::now();
            match bounded(run(&env, s)).await {
                Ok(detail) => println!("PASS {s} ({:.1} s): {detail}", t0.elapsed().as_secs_f64()),
                Err(why) => {
                    println!("FAIL {s} ({:.1} s): {why}", t0.elapsed().as_secs_f64());
                    code = 1;
                }
            }
        }
        // Shutting the client down can wait on timers; the verdict is out.
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = rt.client.shutdown().await;
            let _ = rt.owner.shutdown_tasks().await;
        })
        .await;
        let _ = rt.tel.shutdown();
        code
    });
    std::process::exit(code);
}

//! Shared by the dashboard tests: an HTTP session (cookie kept by hand,
//! redirects not followed), the CSRF token of a page, a wire admin client,
//! and the data the pages are checked against (a topic with messages on
//! two queues, a group that consumed part of them, a dead letter).

#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use sluice_client::admin::TopicOptions;
use sluice_client::{Admin, ClientConfig, ClientInstance, TokioTransport};
use sluice_core::message::{keys, Properties};
use sluice_core::SystemClock;
use sluice_net::body::{self, ConsumerData, HeartbeatData, SubscriptionData};
use sluice_net::header::{SendMessageRequestHeaderV2, UpdateConsumerOffsetRequestHeader};
use sluice_net::remoting::request_code;
use sluice_net::RemotingCommand;

use crate::support::Client;

/// The topic the pages are checked against: queue 0 holds 3 messages,
/// queue 1 holds 2.
pub const TOPIC: &str = "DashOrders";
/// The group: committed 1 on queue 0, nothing on queue 1 — lag 2 + 2.
pub const GROUP: &str = "DashGroup";
/// The business key of the message on queue 0 at offset 1.
pub const KEY: &str = "order-7";
/// Its body: markup that must come back escaped.
pub const BODY: &str = "hello <dashboard> & friends";
/// The key of the dead letter in `%DLQ%DashGroup`.
pub const DEAD_KEY: &str = "dead-1";
/// Its body.
pub const DEAD_BODY: &str = "poison pill";

/// One browser-like HTTP session.
pub struct Web {
    agent: ureq::Agent,
    pub base: String,
    pub cookie: Option<String>,
}

/// A response: status, `Location`, body.
pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

impl Web {
    pub fn new(base: &str) -> Self {
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
            base: base.to_owned(),
            cookie: None,
        }
    }

    fn keep(&mut self, r: ureq::http::Response<ureq::Body>) -> Page {
        let header = |name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(set) = header("set-cookie") {
            let pair = set.split(';').next().unwrap_or_default().to_owned();
            self.cookie = Some(pair);
        }
        let status = r.status().as_u16();
        let location = header("location");
        let body = r.into_body().read_to_string().expect("body");
        Page {
            status,
            location,
            body,
        }
    }

    pub fn get(&mut self, path: &str) -> Page {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            req = req.header("cookie", c);
        }
        let r = req.call().expect("GET");
        self.keep(r)
    }

    pub fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let mut req = self.agent.post(format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            req = req.header("cookie", c);
        }
        let r = req.send_form(form.iter().copied()).expect("POST");
        self.keep(r)
    }

    /// The CSRF token in a page's forms.
    pub fn csrf(page: &Page) -> String {
        let at = page
            .body
            .find("name=csrf value=\"")
            .expect("a form with a CSRF token")
            + "name=csrf value=\"".len();
        page.body[at..]
            .split('"')
            .next()
            .unwrap_or_default()
            .to_owned()
    }

    /// Logs in with `access_key`/`secret_key` (ACL on); returns the answer.
    pub fn login(&mut self, access_key: &str, secret_key: &str) -> Page {
        let form = self.get("/login");
        assert_eq!(form.status, 200, "{}", form.body);
        let csrf = Self::csrf(&form);
        self.post(
            "/login",
            &[
                ("csrf", &csrf),
                ("access_key", access_key),
                ("secret_key", secret_key),
            ],
        )
    }
}

/// The part of `html` from `from` to the end of its table row.
pub fn row<'a>(html: &'a str, from: &str) -> &'a str {
    let at = html
        .find(from)
        .unwrap_or_else(|| panic!("{from} not in page"));
    let rest = &html[at..];
    let end = rest.find("</table></td>").unwrap_or(rest.len());
    &rest[..end]
}

/// An admin client over the wire (signed when `credentials` is given).
pub fn admin(
    namesrv: &str,
    credentials: Option<(&str, &str)>,
) -> Admin<TokioTransport, SystemClock> {
    let mut config = ClientConfig::new(namesrv).with_instance_name("dash-test");
    if let Some((ak, sk)) = credentials {
        config = config.with_credentials(ak, sk);
    }
    Admin::new(ClientInstance::new(
        TokioTransport,
        SystemClock::new(),
        config,
    ))
}

/// Whether the name servers route `topic`.
pub async fn topic_exists(admin: &Admin<TokioTransport, SystemClock>, topic: &str) -> bool {
    admin.route(topic).await.is_ok()
}

/// A send of `body` to `topic`/`queue` with `props`; `max_reconsume`
/// set sends a retry whose attempts are exhausted (stored as a dead letter).
pub async fn send(
    c: &Client,
    topic: &str,
    queue: i32,
    body: &str,
    props: &[(&str, &str)],
    max_reconsume: Option<i32>,
) {
    let mut p = Properties::new();
    for (k, v) in props {
        p.insert(k, v).expect("property");
    }
    let h = SendMessageRequestHeaderV2 {
        a: "dash-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(String::from_utf8(p.encode()).expect("utf8")),
        j: Some(i32::from(max_reconsume.is_some())),
        k: Some(false),
        l: max_reconsume,
        m: Some(false),
        n: None,
    };
    let cmd = RemotingCommand::request_with_header(request_code::SEND_MESSAGE_V2, &h)
        .with_body(Bytes::copy_from_slice(body.as_bytes()));
    let r = c.call(cmd, Duration::from_secs(10)).await.expect("send");
    assert_eq!(r.code, 0, "send refused: {:?}", r.remark);
}

/// `GROUP` joins (a live member subscribed to `TOPIC`) and commits `offset`
/// on `queue`.
pub async fn consume(c: &Client, queue: i32, offset: i64) {
    let sub = |topic: &str| SubscriptionData {
        topic: topic.into(),
        sub_string: "*".into(),
        expression_type: Some("TAG".into()),
        sub_version: 1,
        ..SubscriptionData::default()
    };
    let hb = HeartbeatData {
        client_id: "127.0.0.1@dash-test".into(),
        producer_data_set: Vec::new(),
        consumer_data_set: vec![ConsumerData {
            group_name: GROUP.into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            subscription_data_set: vec![sub(TOPIC), sub(&format!("%RETRY%{GROUP}"))],
            unit_mode: false,
        }],
    };
    let json = body::encode(&hb, "HeartbeatData").expect("encode");
    let cmd = RemotingCommand::request(request_code::HEART_BEAT).with_body(Bytes::from(json));
    let r = c
        .call(cmd, Duration::from_secs(10))
        .await
        .expect("heartbeat");
    assert_eq!(r.code, 0);
    let h = UpdateConsumerOffsetRequestHeader {
        consumer_group: GROUP.into(),
        topic: TOPIC.into(),
        queue_id: queue,
        commit_offset: offset,
    };
    let cmd = RemotingCommand::request_with_header(request_code::UPDATE_CONSUMER_OFFSET, &h);
    let r = c.call(cmd, Duration::from_secs(10)).await.expect("commit");
    assert_eq!(r.code, 0);
}

/// Creates `TOPIC` (2 queues), stores 3 + 2 messages (the key `KEY` at
/// queue 0 offset 1), makes `GROUP` commit 1 on queue 0, and stores one
/// dead letter of `GROUP`. `c` must stay open for the member to stay.
pub async fn seed(admin: &Admin<TokioTransport, SystemClock>, c: &Client) {
    let options = TopicOptions {
        queues: 2,
        ..TopicOptions::default()
    };
    admin
        .create_topic(TOPIC, &options)
        .await
        .expect("create topic");
    let key_prop = [(keys::KEYS, KEY), (keys::TAGS, "t")];
    send(c, TOPIC, 0, "first", &[], None).await;
    send(c, TOPIC, 0, BODY, &key_prop, None).await;
    send(c, TOPIC, 0, "third", &[], None).await;
    send(c, TOPIC, 1, "q1-a", &[], None).await;
    send(c, TOPIC, 1, "q1-b", &[], None).await;
    consume(c, 0, 1).await;
    // A retry past its attempts (max 0) is stored in %DLQ%DashGroup.
    let retry = format!("%RETRY%{GROUP}");
    let dead = [(keys::KEYS, DEAD_KEY), (keys::RETRY_TOPIC, TOPIC)];
    send(c, &retry, 0, DEAD_BODY, &dead, Some(0)).await;
    // The broker created the DLQ topic for it and registers it with the
    // name server in the background (Apache's registers a created topic
    // before it answers): pages look routes up there, so wait for it.
    let dlq = format!("%DLQ%{GROUP}");
    for _ in 0..100 {
        if topic_exists(admin, &dlq).await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{dlq} never reached the name server");
}

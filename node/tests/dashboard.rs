//! The web dashboard over HTTP against a live `sluice-node standalone`:
//! every page shows what the wire says, changes need the session's CSRF
//! token, and with ACL on the pages need a login whose key the wire
//! checks.

mod dashboard_support;
mod support;

use dashboard_support::{
    admin, row, seed, topic_exists, Web, BODY, DEAD_BODY, DEAD_KEY, GROUP, KEY, TOPIC,
};
use sluice_client::admin::QueueProgress;
use support::{Client, Node, ACL_TOML};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn pages_show_topic_offsets_group_lag_and_messages_by_key_id_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let wire = admin(&node.namesrv, None);
    let client = Client::new(&node.broker);
    rt.block_on(seed(&wire, &client));
    let mut web = Web::new(&node.http);

    let cluster = web.get("/");
    assert_eq!(cluster.status, 200);
    assert!(
        cluster.body.contains("<td>broker-a</td>"),
        "{}",
        cluster.body
    );
    assert!(cluster.body.contains("ASYNC_MASTER"));
    assert!(
        cluster.body.contains("/api/stats"),
        "the live chart polls /api/stats"
    );

    let topics = web.get("/topics");
    let dash = row(&topics.body, &format!("id=\"topic-{TOPIC}\""));
    let queue = |q: i32, min: i64, max: i64| {
        format!("<td>broker-a</td><td class=n>{q}</td><td class=n>{min}</td><td class=n>{max}</td>")
    };
    assert!(dash.contains(&queue(0, 0, 3)), "queue 0 holds 3: {dash}");
    assert!(dash.contains(&queue(1, 0, 2)), "queue 1 holds 2: {dash}");

    let groups = web.get("/groups");
    assert!(
        groups.body.contains(&format!("href=\"/groups/{GROUP}\"")),
        "{}",
        groups.body
    );
    let group = web.get(&format!("/groups/{GROUP}"));
    assert!(
        group.body.contains("id=total-lag>4<"),
        "lag 2 + 2: {}",
        group.body
    );
    assert!(
        group.body.contains("127.0.0.1@dash-test"),
        "the member is listed"
    );

    let by_key = web.get(&format!("/messages?topic={TOPIC}&key={KEY}"));
    assert!(
        by_key
            .body
            .contains("hello &lt;dashboard&gt; &amp; friends"),
        "{}",
        by_key.body
    );
    assert!(!by_key.body.contains(BODY), "the body is escaped");
    assert!(by_key.body.contains("<td>KEYS</td><td>order-7</td>"));

    let by_offset = web.get(&format!("/messages?topic={TOPIC}&queue=0&offset=2"));
    assert!(
        by_offset.body.contains("<pre class=body>third</pre>"),
        "{}",
        by_offset.body
    );
    let id_at = by_key
        .body
        .find("<td>Offset id</td><td>")
        .expect("offset id")
        + 22;
    let id: String = by_key.body[id_at..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    let by_id = web.get(&format!("/messages?id={id}"));
    assert!(
        by_id.body.contains("hello &lt;dashboard&gt;"),
        "{}",
        by_id.body
    );

    let timers = web.get("/timers");
    assert_eq!(timers.status, 200);
    assert!(timers.body.contains("Timer messages not yet due"));
    drop(client);
}

#[test]
fn changes_need_the_sessions_csrf_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let wire = admin(&node.namesrv, None);
    let mut web = Web::new(&node.http);
    let page = web.get("/topics");
    let csrf = Web::csrf(&page);
    assert!(web.cookie.is_some(), "a session cookie was set");

    let missing = web.post("/topics/create", &[("topic", "NoToken"), ("queues", "2")]);
    assert_eq!(missing.status, 403);
    let wrong = web.post(
        "/topics/create",
        &[
            ("topic", "NoToken"),
            ("queues", "2"),
            ("csrf", &"0".repeat(64)),
        ],
    );
    assert_eq!(wrong.status, 403);
    let mut stranger = Web::new(&node.http);
    let no_session = stranger.post("/topics/create", &[("topic", "NoToken"), ("csrf", &csrf)]);
    assert_eq!(
        no_session.status, 403,
        "a token without its session is refused"
    );
    assert!(
        !rt.block_on(topic_exists(&wire, "NoToken")),
        "nothing was created"
    );

    let made = web.post(
        "/topics/create",
        &[("topic", "WithToken"), ("queues", "2"), ("csrf", &csrf)],
    );
    assert_eq!(made.status, 200);
    assert!(made.body.contains("class=ok"), "{}", made.body);
    assert!(rt.block_on(topic_exists(&wire, "WithToken")));

    let confirm = web.get("/topics/delete?topic=WithToken");
    assert!(confirm.body.contains("id=confirm-delete"));
    let refused = web.post("/topics/delete", &[("topic", "WithToken")]);
    assert_eq!(refused.status, 403);
    assert!(rt.block_on(topic_exists(&wire, "WithToken")), "still there");
    let deleted = web.post("/topics/delete", &[("topic", "WithToken"), ("csrf", &csrf)]);
    assert!(deleted.body.contains("deleted"), "{}", deleted.body);
    assert!(!rt.block_on(topic_exists(&wire, "WithToken")));
}

#[test]
fn a_dead_letter_resent_to_the_retry_topic_is_stored_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let wire = admin(&node.namesrv, None);
    let client = Client::new(&node.broker);
    rt.block_on(seed(&wire, &client));
    let mut web = Web::new(&node.http);
    let dlq = format!("%25DLQ%25{GROUP}");
    let page = web.get(&format!("/messages?topic={dlq}&key={DEAD_KEY}"));
    assert!(page.body.contains(DEAD_BODY), "{}", page.body);
    assert!(page.body.contains(&format!("Resend to %RETRY%{GROUP}")));
    let id_at = page
        .body
        .find("type=hidden name=id value=\"")
        .expect("resend form")
        + 27;
    let id: String = page.body[id_at..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let topic = format!("%DLQ%{GROUP}");
    let refused = web.post("/messages/resend", &[("id", &id), ("topic", &topic)]);
    assert_eq!(refused.status, 403);
    let retry = format!("%RETRY%{GROUP}");
    assert!(
        rt.block_on(client.drain(&retry, 0)).is_empty(),
        "nothing resent yet"
    );

    let csrf = Web::csrf(&page);
    let done = web.post(
        "/messages/resend",
        &[("id", &id), ("topic", &topic), ("csrf", &csrf)],
    );
    assert!(done.body.contains("class=ok"), "{}", done.body);
    let stored = rt.block_on(client.drain(&retry, 0));
    assert_eq!(stored.len(), 1);
    assert_eq!(&stored[0].body[..], DEAD_BODY.as_bytes());
}

#[test]
fn with_acl_pages_need_a_login_and_the_wire_refuses_a_non_admin_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start_with_config(dir.path(), "async", ACL_TOML);
    let rt = runtime();
    let root = admin(&node.namesrv, Some(("root", "root-secret")));
    let mut web = Web::new(&node.http);

    let page = web.get("/topics");
    assert_eq!(page.status, 303);
    assert_eq!(page.location.as_deref(), Some("/login"));
    let bad = web.login("app", "wrong-secret");
    assert_eq!(bad.status, 401, "{}", bad.body);
    assert_eq!(web.get("/topics").status, 303, "still logged out");

    let before = web.cookie.clone();
    let ok = web.login("app", "app-secret");
    assert_eq!(ok.status, 303, "{}", ok.body);
    assert_ne!(web.cookie, before, "the session id changes at login");
    let topics = web.get("/topics");
    assert_eq!(topics.status, 200);
    assert!(
        !topics.body.contains("app-secret"),
        "the secret is never in a page"
    );
    let csrf = Web::csrf(&topics);
    let refused = web.post(
        "/topics/create",
        &[("topic", "AppMade"), ("queues", "2"), ("csrf", &csrf)],
    );
    assert!(refused.body.contains("class=err"), "{}", refused.body);
    assert!(refused.body.contains("Cannot create topic"));
    assert!(
        !rt.block_on(topic_exists(&root, "AppMade")),
        "the broker refused it"
    );

    let mut admin_web = Web::new(&node.http);
    assert_eq!(admin_web.login("root", "root-secret").status, 303);
    let csrf = Web::csrf(&admin_web.get("/topics"));
    let made = admin_web.post(
        "/topics/create",
        &[("topic", "RootMade"), ("queues", "2"), ("csrf", &csrf)],
    );
    assert!(made.body.contains("class=ok"), "{}", made.body);
    assert!(rt.block_on(topic_exists(&root, "RootMade")));
}

/// The TPS cell of `TOPIC`'s row on the topics page.
fn tps_cell(web: &mut Web) -> String {
    let page = web.get("/topics");
    let dash = row(&page.body, &format!("id=\"topic-{TOPIC}\""));
    // Queues, messages held, then TPS.
    dash.split("<td class=n>")
        .nth(3)
        .and_then(|c| c.split("</td>").next())
        .expect("TPS cell")
        .to_owned()
}

#[test]
fn topics_page_shows_tps_from_two_views() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let wire = admin(&node.namesrv, None);
    let client = Client::new(&node.broker);
    rt.block_on(seed(&wire, &client));
    let mut web = Web::new(&node.http);
    assert_eq!(tps_cell(&mut web), "—", "one view gives no rate");
    #[expect(
        clippy::disallowed_methods,
        reason = "the rate needs a second of wall time between two views"
    )]
    std::thread::sleep(std::time::Duration::from_millis(1100));
    rt.block_on(async {
        for i in 0..6 {
            dashboard_support::send(&client, TOPIC, 1, &format!("more {i}"), &[], None).await;
        }
    });
    let tps: f64 = tps_cell(&mut web).parse().expect("a rate");
    assert!(
        tps > 0.0 && tps <= 6.0 / 1.1,
        "6 messages in at least 1.1 s: {tps}"
    );
}

#[test]
fn resetting_a_groups_offsets_needs_the_token_and_moves_them_on_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = runtime();
    let wire = admin(&node.namesrv, None);
    let client = Client::new(&node.broker);
    rt.block_on(seed(&wire, &client));
    let lag = |rt: &tokio::runtime::Runtime| -> i64 {
        let progress = rt.block_on(wire.group_progress(GROUP, Some(TOPIC)));
        progress
            .expect("progress")
            .iter()
            .map(QueueProgress::lag)
            .sum()
    };
    assert_eq!(lag(&rt), 4);
    let mut web = Web::new(&node.http);
    let page = web.get(&format!("/groups/{GROUP}"));
    assert!(page.body.contains("id=reset-form"));
    let path = format!("/groups/{GROUP}/reset");
    let refused = web.post(&path, &[("topic", TOPIC), ("time", "latest")]);
    assert_eq!(refused.status, 403);
    assert_eq!(lag(&rt), 4, "nothing moved");

    let csrf = Web::csrf(&page);
    let done = web.post(
        &path,
        &[("topic", TOPIC), ("time", "latest"), ("csrf", &csrf)],
    );
    assert!(done.body.contains("class=ok"), "{}", done.body);
    assert_eq!(lag(&rt), 0, "the offsets moved to the end of each queue");
    let bad = web.post(
        &path,
        &[("topic", TOPIC), ("time", "yesterday"), ("csrf", &csrf)],
    );
    assert!(bad.body.contains("The time must be"), "{}", bad.body);
    drop(client);
}

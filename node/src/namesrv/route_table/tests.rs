//! Unit tests of the route table: registration of masters and slaves, queue
//! data ownership, unregistration, expiry on a manual clock, and removal
//! when a connection closes.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::testing::ManualClock;
use sluice_net::body::{
    DataVersion, TopicConfig, TopicConfigSerializeWrapper, PERM_READ, PERM_WRITE,
};

use super::*;

const CLUSTER: &str = "DefaultCluster";
const EXPIRY: Duration = Duration::from_secs(120);

fn topics(counter: i64, list: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
    TopicConfigSerializeWrapper {
        topic_config_table: list
            .iter()
            .map(|(name, queues)| {
                (
                    (*name).to_owned(),
                    TopicConfig {
                        topic_name: (*name).to_owned(),
                        read_queue_nums: *queues,
                        write_queue_nums: *queues,
                        perm: PERM_READ | PERM_WRITE,
                        topic_filter_type: "SINGLE_TAG".into(),
                        topic_sys_flag: 0,
                        order: false,
                        attributes: BTreeMap::new(),
                    },
                )
            })
            .collect(),
        data_version: DataVersion {
            timestamp: 1,
            counter,
            state_version: 0,
        },
    }
}

fn registration(
    name: &str,
    addr: &str,
    id: i64,
    connection: ConnectionId,
    topics: TopicConfigSerializeWrapper,
) -> Registration {
    Registration {
        cluster: CLUSTER.into(),
        broker_name: name.into(),
        broker_addr: addr.into(),
        broker_id: id,
        ha_server_addr: format!("{addr}-ha"),
        topics,
        filter_servers: Vec::new(),
        connection,
        master_epoch: None,
    }
}

fn table() -> (RouteTable<ManualClock>, ManualClock) {
    let clock = ManualClock::new(1_000);
    (RouteTable::new(clock.clone()), clock)
}

fn addrs(route: &TopicRouteData) -> BTreeMap<i64, String> {
    assert_eq!(route.broker_datas.len(), 1, "{route:?}");
    route.broker_datas[0].broker_addrs.clone()
}

#[test]
fn route_lists_master_and_slave_by_broker_id() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    let slave = routes.register(registration("a", "s:1", 1, 2, topics(1, &[("T", 4)])));
    assert_eq!(slave.master_addr.as_deref(), Some("m:1"));
    assert_eq!(slave.master_ha_server_addr.as_deref(), Some("m:1-ha"));
    let route = routes.route("T").expect("routed");
    assert_eq!(
        addrs(&route),
        BTreeMap::from([(0, "m:1".to_owned()), (1, "s:1".to_owned())])
    );
    assert_eq!(route.broker_datas[0].cluster, CLUSTER);
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
}

#[test]
fn master_learns_no_master_address() {
    let (mut routes, _) = table();
    let outcome = routes.register(registration("a", "m:1", 0, 1, topics(1, &[])));
    assert_eq!(outcome, RegisterOutcome::default());
}

#[test]
fn slave_registered_before_its_master_learns_no_master() {
    let (mut routes, _) = table();
    let outcome = routes.register(registration("a", "s:1", 1, 1, topics(1, &[])));
    assert_eq!(outcome.master_addr, None);
}

#[test]
fn only_the_master_sets_queue_data() {
    let (mut routes, _) = table();
    routes.register(registration("a", "s:1", 1, 1, topics(1, &[("T", 8)])));
    assert!(
        routes.route("T").is_none(),
        "a slave's topics are not routed"
    );
    routes.register(registration("a", "m:1", 0, 2, topics(1, &[("T", 4)])));
    routes.register(registration(
        "a",
        "s:1",
        1,
        1,
        topics(2, &[("T", 8), ("U", 2)]),
    ));
    let route = routes.route("T").expect("routed");
    assert_eq!(route.queue_datas[0].read_queue_nums, 4, "slave ignored");
    assert!(routes.route("U").is_none());
}

#[test]
fn master_updates_queue_data_when_its_version_changes() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    routes.register(registration(
        "a",
        "m:1",
        0,
        1,
        topics(2, &[("T", 16), ("U", 1)]),
    ));
    assert_eq!(
        routes.route("T").expect("T").queue_datas[0].read_queue_nums,
        16
    );
    assert!(routes.route("U").is_some());
    assert_eq!(routes.topics(), vec!["T".to_owned(), "U".to_owned()]);
}

#[test]
fn broker_changing_role_keeps_one_entry_per_address() {
    let (mut routes, _) = table();
    routes.register(registration("a", "x:1", 1, 1, topics(1, &[])));
    routes.register(registration("a", "x:1", 0, 1, topics(1, &[("T", 1)])));
    let route = routes.route("T").expect("routed");
    assert_eq!(addrs(&route), BTreeMap::from([(0, "x:1".to_owned())]));
}

#[test]
fn unregistering_the_master_keeps_the_slave_route() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    routes.register(registration("a", "s:1", 1, 2, topics(1, &[])));
    routes.unregister("a", "m:1", 0);
    let route = routes.route("T").expect("slave still serves reads");
    assert_eq!(addrs(&route), BTreeMap::from([(1, "s:1".to_owned())]));
    assert_eq!(routes.live_brokers(), vec!["s:1".to_owned()]);
    routes.unregister("a", "s:1", 1);
    assert!(routes.route("T").is_none());
    assert!(routes.cluster_info().broker_addr_table.is_empty());
    assert!(routes.cluster_info().cluster_addr_table.is_empty());
    assert!(routes.topics().is_empty());
}

#[test]
fn unregister_with_a_stale_address_leaves_the_new_holder() {
    let (mut routes, _) = table();
    routes.register(registration("a", "new:1", 0, 1, topics(1, &[("T", 4)])));
    routes.unregister("a", "old:1", 0);
    let route = routes.route("T").expect("routed");
    assert_eq!(addrs(&route), BTreeMap::from([(0, "new:1".to_owned())]));
}

#[test]
fn silent_broker_expires_after_the_expiry() {
    let (mut routes, clock) = table();
    routes.register(registration("a", "m:1", 0, 7, topics(1, &[("T", 4)])));
    routes.register(registration("b", "m:2", 0, 8, topics(1, &[("T", 4)])));
    clock.advance(Duration::from_secs(60));
    routes.register(registration("b", "m:2", 0, 8, topics(1, &[("T", 4)])));
    clock.advance(Duration::from_secs(60)); // a: 120 s silent, b: 60 s
    assert!(
        routes.remove_expired(EXPIRY).is_empty(),
        "exactly 120 s is not expired"
    );
    clock.advance(Duration::from_millis(1));
    let removed = routes.remove_expired(EXPIRY);
    assert_eq!(
        removed,
        vec![RemovedBroker {
            broker_addr: "m:1".into(),
            connection: 7
        }]
    );
    let route = routes.route("T").expect("b still routes T");
    assert_eq!(route.broker_datas[0].broker_name, "b");
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(routes.live_brokers(), vec!["m:2".to_owned()]);
}

#[test]
fn data_version_query_counts_as_heard_from() {
    let (mut routes, clock) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(3, &[])));
    clock.advance(Duration::from_secs(100));
    let same = DataVersion {
        timestamp: 1,
        counter: 3,
        state_version: 0,
    };
    assert!(!routes.version_changed("m:1", &same));
    assert!(routes.version_changed("m:1", &DataVersion::default()));
    assert!(routes.touch("m:1"));
    clock.advance(Duration::from_secs(100));
    assert!(routes.remove_expired(EXPIRY).is_empty());
}

#[test]
fn closed_connection_drops_only_its_brokers() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    routes.register(registration("a", "s:1", 1, 2, topics(1, &[])));
    let removed = routes.remove_connection(1);
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0].broker_addr, "m:1");
    assert!(!routes.connection_in_use(1));
    assert!(routes.connection_in_use(2));
    let route = routes.route("T").expect("slave remains");
    assert_eq!(addrs(&route), BTreeMap::from([(1, "s:1".to_owned())]));
}

#[test]
fn re_registration_on_a_new_connection_survives_the_old_one_closing() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    routes.register(registration("a", "m:1", 0, 2, topics(1, &[("T", 4)])));
    assert!(routes.remove_connection(1).is_empty());
    assert!(routes.route("T").is_some());
}

#[test]
fn topics_by_cluster_lists_only_that_clusters_topics() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    let mut other = registration("b", "m:2", 0, 2, topics(1, &[("U", 4)]));
    other.cluster = "Other".into();
    routes.register(other);
    assert_eq!(routes.topics_by_cluster(CLUSTER), vec!["T".to_owned()]);
    assert_eq!(routes.topics_by_cluster("Other"), vec!["U".to_owned()]);
    assert!(routes.topics_by_cluster("nope").is_empty());
    let info = routes.cluster_info();
    assert_eq!(info.cluster_addr_table[CLUSTER], vec!["a".to_owned()]);
    assert_eq!(info.broker_addr_table["b"].cluster, "Other");
}

#[test]
fn deleted_topic_has_no_route() {
    let (mut routes, _) = table();
    routes.register(registration("a", "m:1", 0, 1, topics(1, &[("T", 4)])));
    assert!(routes.delete_topic("T"));
    assert!(routes.route("T").is_none());
    assert!(!routes.delete_topic("T"));
}

#[test]
fn a_deposed_master_registering_an_older_epoch_does_not_take_the_route_back() {
    let (mut t, _) = table();
    let mut old = registration("b", "10.0.0.1:10911", 0, 1, topics(1, &[("T", 4)]));
    old.master_epoch = Some(1);
    t.register(old.clone());
    let mut new = registration("b", "10.0.0.2:10911", 0, 2, topics(1, &[("T", 4)]));
    new.master_epoch = Some(2);
    t.register(new);
    // The old master, isolated from the controllers, registers again.
    t.register(old);
    let route = t.route("T").expect("routed");
    assert_eq!(addrs(&route)[&0], "10.0.0.2:10911");
}

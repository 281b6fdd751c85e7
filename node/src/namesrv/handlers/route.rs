//! Route queries: `GET_ROUTEINFO_BY_TOPIC` (105), `GET_BROKER_CLUSTER_INFO`
//! (106), `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206), `GET_TOPICS_BY_CLUSTER`
//! (224) and `DELETE_TOPIC_IN_NAMESRV` (216). Integer-keyed maps are written
//! in the JSON style the requesting client's `version` can parse.

use sluice_core::Clock;
use sluice_net::body::{self, JsonStyle, TopicList};
use sluice_net::header::{
    DeleteTopicRequestHeader, GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader,
};
use sluice_net::remoting::response_code;
use sluice_net::{RemotingCommand, RequestContext};

use super::{decode_header, encoded};
use crate::dispatch::{Refusal, Reply};
use crate::namesrv::kv_config::ORDER_TOPIC_CONFIG_NAMESPACE;
use crate::namesrv::state::State;

/// The topic's brokers (by ID) and queues, or `TOPIC_NOT_EXIST`.
pub(super) async fn route_by_topic<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: GetRouteInfoRequestHeader = decode_header(request, "GET_ROUTEINFO_BY_TOPIC")?;
    let Some(mut route) = state.routes().route(&header.topic) else {
        return Err(Refusal::new(
            response_code::TOPIC_NOT_EXIST,
            format!(
                "No topic route info in name server for the topic: {}",
                header.topic
            ),
        ));
    };
    if state.config.order_message_enable {
        route.order_topic_conf = state
            .kv()
            .get(ORDER_TOPIC_CONFIG_NAMESPACE, &header.topic)
            .map(str::to_owned);
    }
    let style = JsonStyle::for_client(
        request.version,
        header.accept_standard_json_only.unwrap_or(false),
    );
    Ok(RemotingCommand::success().with_body(encoded(route.to_json(style))?))
}

/// Every broker set by name and every cluster's broker names.
pub(super) async fn cluster_info<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let info = state.routes().cluster_info();
    let style = JsonStyle::for_client(request.version, false);
    Ok(RemotingCommand::success().with_body(encoded(info.to_json(style))?))
}

/// Every routed topic.
pub(super) async fn all_topics<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    _request: &RemotingCommand,
) -> Reply {
    let list = TopicList {
        topic_list: state.routes().topics(),
        broker_addr: None,
    };
    Ok(RemotingCommand::success().with_body(encoded(body::encode(&list, "TopicList"))?))
}

/// Topics served by some broker set of the cluster (empty for an unknown one).
pub(super) async fn topics_by_cluster<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: GetTopicsByClusterRequestHeader = decode_header(request, "GET_TOPICS_BY_CLUSTER")?;
    let list = TopicList {
        topic_list: state.routes().topics_by_cluster(&header.cluster),
        broker_addr: None,
    };
    Ok(RemotingCommand::success().with_body(encoded(body::encode(&list, "TopicList"))?))
}

/// Forgets a topic's routes (after it was deleted on the brokers).
pub(super) async fn delete_topic<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: DeleteTopicRequestHeader = decode_header(request, "DELETE_TOPIC_IN_NAMESRV")?;
    state.routes().delete_topic(&header.topic);
    Ok(RemotingCommand::success())
}

//! Broker membership: `REGISTER_BROKER` (103), `UNREGISTER_BROKER` (104) and
//! `QUERY_DATA_VERSION` (322). A registration is checked whole (header,
//! CRC, body) before the route table changes.

use sluice_core::Clock;
use sluice_net::body::{self, DataVersion, RegisterBrokerBody};
use sluice_net::header::{
    BrokerIdentityRequestHeader, QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
};
use sluice_net::{RemotingCommand, RequestContext};

use super::{decode_header, encoded, system_error};
use crate::dispatch::Reply;
use crate::namesrv::kv_config::ORDER_TOPIC_CONFIG_NAMESPACE;
use crate::namesrv::route_table::Registration;
use crate::namesrv::state::State;

/// Java's `UtilAll.crc32`: the CRC-32 with its top bit cleared.
fn java_crc32(bytes: &[u8]) -> i32 {
    let masked = crc32fast::hash(bytes) & 0x7FFF_FFFF;
    i32::try_from(masked).expect("invariant: the top bit is cleared")
}

/// Answers the registration: the slave learns its master, and every broker
/// gets the `ORDER_TOPIC_CONFIG` table.
pub(super) async fn register_broker<C: Clock>(
    state: &State<C>,
    ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: RegisterBrokerRequestHeader = decode_header(request, "REGISTER_BROKER")?;
    for (field, value) in [
        ("brokerName", &header.broker_name),
        ("brokerAddr", &header.broker_addr),
        ("clusterName", &header.cluster_name),
    ] {
        if value.is_empty() {
            return Err(system_error(format!("REGISTER_BROKER: `{field}` is empty")));
        }
    }
    if header.broker_id < 0 {
        return Err(system_error(format!(
            "REGISTER_BROKER: `brokerId` {} is negative",
            header.broker_id
        )));
    }
    if header.compressed == Some(true) {
        return Err(system_error(
            "REGISTER_BROKER: compressed registration bodies are not supported; \
             set compressedRegister=false on the broker",
        ));
    }
    if let Some(expected) = header.body_crc32.filter(|crc| *crc != 0) {
        let actual = java_crc32(&request.body);
        // Java brokers clear the top bit; accept a plain CRC-32 as well.
        let plain = i32::from_be_bytes(crc32fast::hash(&request.body).to_be_bytes());
        if expected != actual && expected != plain {
            return Err(system_error(format!(
                "REGISTER_BROKER: body crc32 {actual} does not match bodyCrc32 {expected}"
            )));
        }
    }
    let registered: RegisterBrokerBody = if request.body.is_empty() {
        RegisterBrokerBody::default()
    } else {
        body::decode(&request.body, "RegisterBrokerBody")
            .map_err(|error| system_error(format!("REGISTER_BROKER: bad body: {error}")))?
    };
    let outcome = state.routes().register(Registration {
        cluster: header.cluster_name,
        broker_name: header.broker_name,
        broker_addr: header.broker_addr,
        broker_id: header.broker_id,
        ha_server_addr: header.ha_server_addr,
        topics: registered.topic_config_serialize_wrapper,
        filter_servers: registered.filter_server_list,
        connection: ctx.connection.id(),
        master_epoch: header.master_epoch,
    });
    let order_topics = state.kv().namespace(ORDER_TOPIC_CONFIG_NAMESPACE);
    let mut response = RemotingCommand::success().with_header(&RegisterBrokerResponseHeader {
        ha_server_addr: outcome.master_ha_server_addr,
        master_addr: outcome.master_addr,
    });
    if let Some(table) = order_topics {
        response = response.with_body(encoded(body::encode(&table, "KvTable"))?);
    }
    Ok(response)
}

/// Drops one broker at once (a broker shutting down cleanly).
pub(super) async fn unregister_broker<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: BrokerIdentityRequestHeader = decode_header(request, "UNREGISTER_BROKER")?;
    state
        .routes()
        .unregister(&header.broker_name, &header.broker_addr, header.broker_id);
    Ok(RemotingCommand::success())
}

/// Tells a broker whether its topic config changed since it registered; an
/// unchanged broker counts as heard from, as in Java.
pub(super) async fn query_data_version<C: Clock>(
    state: &State<C>,
    _ctx: &RequestContext,
    request: &RemotingCommand,
) -> Reply {
    let header: BrokerIdentityRequestHeader = decode_header(request, "QUERY_DATA_VERSION")?;
    let version: DataVersion = body::decode(&request.body, "DataVersion")
        .map_err(|error| system_error(format!("QUERY_DATA_VERSION: bad body: {error}")))?;
    let mut routes = state.routes();
    let changed = routes.version_changed(&header.broker_addr, &version);
    if !changed {
        routes.touch(&header.broker_addr);
    }
    let known = routes.data_version(&header.broker_addr);
    drop(routes);
    let mut response =
        RemotingCommand::success().with_header(&QueryDataVersionResponseHeader { changed });
    if let Some(known) = known {
        response = response.with_body(encoded(body::encode(&known, "DataVersion"))?);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_crc32_clears_the_top_bit() {
        // crc32("123456789") = 0xCBF43926, whose top bit is set.
        assert_eq!(java_crc32(b"123456789"), 0x4BF4_3926);
    }
}

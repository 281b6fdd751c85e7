//! One session per 5.x client: an in-process remoting connection to the
//! broker (the broker registers, times out and calls back this client as
//! it does a 4.x one), the client's last Settings, and its Telemetry
//! stream, down which the broker's transaction check-backs go.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::disk::Disk;
use sluice_core::Clock;
use sluice_net::body::{self, ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use sluice_net::remoting::{request_code as rc, response_code};
use sluice_net::rpc::{local_pair, LocalEnd};
use sluice_net::{ConnectionHandle, HandlerTable, RemotingCommand, RequestContext};
use tokio::sync::mpsc;
use tonic::Status;

use super::proto::{self, ClientType, Code};
use super::{status, Caller};
use crate::broker::handlers::{notify_ids_changed, unguarded_routes, BrokerRoutes};
use crate::broker::{Broker, CONSUME_POP};

/// A session nobody has heard from for this long is ended (5.x clients
/// heartbeat every 10 s; the broker expires 4.x channels at 120 s).
const SESSION_IDLE_MAX: Duration = Duration::from_secs(120);

/// Where the broker's check-backs for a session go: its Telemetry stream.
pub(super) type TelemetrySink = mpsc::Sender<Result<proto::TelemetryCommand, Status>>;

/// One 5.x client.
pub struct Session {
    /// `x-mq-client-id`.
    pub client_id: String,
    /// The broker's side of the session's connection (what handlers see).
    connection: ConnectionHandle,
    /// The client's side (closed with the session).
    client_side: ConnectionHandle,
    settings: Mutex<Option<proto::Settings>>,
    telemetry: Arc<Mutex<Option<TelemetrySink>>>,
    last_seen: Mutex<Duration>,
}

/// Every session of one endpoint.
pub struct Sessions<D: Disk, C: Clock> {
    broker: Arc<Broker<D, C>>,
    routes: BrokerRoutes<D, C>,
    map: Mutex<BTreeMap<String, Arc<Session>>>,
}

impl<D: Disk, C: Clock> Sessions<D, C> {
    /// No sessions yet.
    pub fn new(broker: Arc<Broker<D, C>>) -> Self {
        Self {
            routes: unguarded_routes(Arc::clone(&broker)),
            broker,
            map: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Session>>> {
        self.map
            .lock()
            .expect("invariant: sessions lock not poisoned")
    }

    /// The caller's session, opened on first contact; ends sessions idle
    /// past [`SESSION_IDLE_MAX`].
    pub(super) fn get(&self, caller: &Caller) -> Arc<Session> {
        let now = self.broker.clock().monotonic();
        let mut map = self.lock();
        if let Some(s) = map.get(&caller.client_id) {
            *s.last_seen.lock().expect("invariant: not poisoned") = now;
            return Arc::clone(s);
        }
        let idle: Vec<String> = map
            .iter()
            .filter(|(_, s)| {
                now.saturating_sub(*s.last_seen.lock().expect("not poisoned")) > SESSION_IDLE_MAX
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if let Some(s) = map.remove(&id) {
                self.close(&s);
            }
        }
        let session = Arc::new(self.open(caller, now));
        map.insert(caller.client_id.clone(), Arc::clone(&session));
        session
    }

    fn open(&self, caller: &Caller, now: Duration) -> Session {
        let telemetry: Arc<Mutex<Option<TelemetrySink>>> = Arc::default();
        let sink = Arc::clone(&telemetry);
        let converter = Arc::clone(&self.broker);
        let callbacks = HandlerTable::new().with(
            rc::CHECK_TRANSACTION_STATE,
            move |_ctx: RequestContext, req: RemotingCommand| {
                let sink = sink.lock().expect("not poisoned").clone();
                let command = super::telemetry::check_back(&*converter, &req);
                async move {
                    if let (Some(sink), Some(command)) = (sink, command) {
                        let _ = sink.send(Ok(command)).await;
                    }
                    None // oneway
                }
            },
        );
        let (connection, client_side) = local_pair(
            &self.broker.config().rpc(),
            LocalEnd {
                addr: self.broker.store_host(),
                handler: Arc::new(self.routes.clone()),
            },
            LocalEnd {
                addr: caller.addr,
                handler: Arc::new(callbacks),
            },
        );
        Session {
            client_id: caller.client_id.clone(),
            connection,
            client_side,
            settings: Mutex::new(None),
            telemetry,
            last_seen: Mutex::new(now),
        }
    }

    /// Ends the session of `client_id`: its registrations go, as when a
    /// 4.x client's connection closes.
    pub(super) fn end(&self, client_id: &str) {
        let session = self.lock().remove(client_id);
        if let Some(s) = session {
            self.close(&s);
        }
    }

    fn close(&self, session: &Session) {
        for group in self
            .broker
            .clients()
            .remove_connection(session.connection.id())
        {
            notify_ids_changed(&self.broker, &group);
        }
        session.client_side.close();
        session.connection.close();
    }

    /// Runs the remoting request `cmd` as `session` (no framing: straight
    /// to the broker's handler, with the session's connection as context).
    pub(super) async fn invoke(&self, session: &Session, cmd: &RemotingCommand) -> RemotingCommand {
        let ctx = RequestContext {
            connection: session.connection.clone(),
            queued_behind: false,
        };
        let answer = self.routes.answer(&ctx, cmd).await;
        if self.routes.answers_may_leave() {
            return answer;
        }
        RemotingCommand::response(
            response_code::SYSTEM_ERROR,
            "[sluice] the store cannot hold what this answer acknowledges",
        )
    }

    /// Registers the session as its settings (or the heartbeat) say: a
    /// producer under each topic it publishes to (5.x producers have no
    /// group; the topic is their group, as in Apache), a consumer in its
    /// group as a POP consumer.
    pub(super) async fn heartbeat(
        &self,
        session: &Session,
        request: &proto::HeartbeatRequest,
    ) -> proto::Status {
        let data = session.heartbeat_data(request);
        let cmd = RemotingCommand::request(rc::HEART_BEAT).with_body(
            match body::encode(&data, "HeartbeatData") {
                Ok(b) => b,
                Err(e) => return status(Code::InternalServerError, e.to_string()),
            },
        );
        let answer = self.invoke(session, &cmd).await;
        if answer.code == response_code::SUCCESS {
            super::ok()
        } else {
            status(
                Code::InternalServerError,
                answer
                    .remark
                    .unwrap_or_else(|| format!("heartbeat refused ({})", answer.code)),
            )
        }
    }

    /// The broker this endpoint serves.
    pub(super) fn broker(&self) -> &Arc<Broker<D, C>> {
        &self.broker
    }
}

impl Session {
    /// The client's latest Settings.
    pub(super) fn settings(&self) -> Option<proto::Settings> {
        self.settings.lock().expect("not poisoned").clone()
    }

    /// Keeps the client's Settings.
    pub(super) fn set_settings(&self, settings: proto::Settings) {
        *self.settings.lock().expect("not poisoned") = Some(settings);
    }

    /// Where check-backs go from now on (a new stream replaces the old).
    pub(super) fn set_telemetry(&self, sink: Option<TelemetrySink>) {
        *self.telemetry.lock().expect("not poisoned") = sink;
    }

    fn heartbeat_data(&self, request: &proto::HeartbeatRequest) -> HeartbeatData {
        let settings = self.settings();
        let client_type = settings
            .as_ref()
            .and_then(|s| s.client_type)
            .unwrap_or(request.client_type);
        let mut data = HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: Vec::new(),
            consumer_data_set: Vec::new(),
        };
        if client_type == ClientType::Producer as i32 {
            let topics = match settings.as_ref().and_then(|s| s.pub_sub.as_ref()) {
                Some(proto::settings::PubSub::Publishing(p)) => {
                    p.topics.iter().map(|t| t.name.clone()).collect()
                }
                _ => Vec::new(),
            };
            data.producer_data_set = topics
                .into_iter()
                .map(|group_name| ProducerData { group_name })
                .collect();
            return data;
        }
        let group = request.group.as_ref().map(|g| g.name.clone()).or_else(|| {
            match settings.as_ref().and_then(|s| s.pub_sub.as_ref()) {
                Some(proto::settings::PubSub::Subscription(s)) => {
                    s.group.as_ref().map(|g| g.name.clone())
                }
                _ => None,
            }
        });
        if let Some(group_name) = group {
            data.consumer_data_set.push(ConsumerData {
                group_name,
                consume_type: CONSUME_POP.to_owned(),
                message_model: "CLUSTERING".to_owned(),
                consume_from_where: "CONSUME_FROM_LAST_OFFSET".to_owned(),
                subscription_data_set: subscriptions(settings.as_ref()),
                unit_mode: false,
            });
        }
        data
    }
}

/// The subscriptions a consumer's Settings name, as 4.x subscription data.
fn subscriptions(settings: Option<&proto::Settings>) -> Vec<SubscriptionData> {
    let Some(proto::settings::PubSub::Subscription(s)) = settings.and_then(|s| s.pub_sub.as_ref())
    else {
        return Vec::new();
    };
    s.subscriptions
        .iter()
        .filter_map(|e| {
            let topic = e.topic.as_ref()?.name.clone();
            let (expression_type, sub_string) = super::convert::filter_of(e.expression.as_ref());
            Some(SubscriptionData {
                class_filter_mode: false,
                topic,
                tags_set: Vec::new(),
                code_set: Vec::new(),
                sub_version: 0,
                expression_type: Some(expression_type.to_owned()),
                sub_string,
            })
        })
        .collect()
}

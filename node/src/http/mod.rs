//! The node's HTTP port (`metrics_listen`): Prometheus `/metrics`, the
//! live chart's `/api/stats`, and the dashboard under `/` (merged in by
//! the binary). This module builds the routes over a broker; the binary
//! binds the listener (only `node/src/bin` chooses real IO). Nothing here
//! runs in the simulation.

pub mod exposition;

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use sluice_core::disk::Disk;
use sluice_core::Clock;

use crate::broker::Broker;
pub use exposition::NodeLabels;

/// The Prometheus text format's content type.
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

struct Metrics<D: Disk, C: Clock> {
    broker: Arc<Broker<D, C>>,
    node: NodeLabels,
    cap: usize,
}

/// `/metrics` (Prometheus text) and `/api/stats` (the same snapshot as
/// JSON) for `broker`.
pub fn metrics_router<D: Disk, C: Clock>(broker: Arc<Broker<D, C>>) -> Router {
    let config = broker.config();
    let node = NodeLabels {
        cluster: config.cluster_name.clone(),
        node_type: "broker",
        node_id: format!("{}:{}", config.broker_name, config.broker_id),
    };
    let cap = config.metrics_series_cap;
    let state = Arc::new(Metrics { broker, node, cap });
    Router::new()
        .route("/metrics", get(scrape::<D, C>))
        .route("/api/stats", get(stats_json::<D, C>))
        .with_state(state)
}

async fn scrape<D: Disk, C: Clock>(State(m): State<Arc<Metrics<D, C>>>) -> impl IntoResponse {
    let text = exposition::encode(m.broker.figures(m.cap), &m.node);
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text)
}

async fn stats_json<D: Disk, C: Clock>(State(m): State<Arc<Metrics<D, C>>>) -> impl IntoResponse {
    let json = serde_json::to_string(&m.broker.figures(m.cap)).unwrap_or_else(|_| "{}".into());
    ([(header::CONTENT_TYPE, "application/json")], json)
}

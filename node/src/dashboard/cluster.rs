//! `/`: every broker (name, id, address, role, epoch, in-sync set, disk
//! use, flush and dispatch lag) and the live throughput chart.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::html::{error_box, esc, num, table, CHART};
use super::Dash;

fn figure(runtime: &BTreeMap<String, String>, key: &str) -> Option<u64> {
    runtime.get(key).and_then(|v| v.trim().parse().ok())
}

/// Bytes in a short human form.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut whole = n;
    let mut tenths = 0;
    while whole >= 1024 && unit + 1 < UNITS.len() {
        tenths = (whole % 1024) * 10 / 1024;
        whole /= 1024;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{whole}.{tenths} {}", UNITS[unit])
    }
}

fn or_dash(v: Option<String>) -> String {
    v.map_or_else(|| "—".to_owned(), |s| esc(&s))
}

/// Whether a broker registered as `addr` is the one listening on
/// `listen` in this process (same port; a wildcard host matches any).
fn is_local(addr: &str, listen: &str) -> bool {
    let port = |a: &str| a.rsplit(':').next().map(str::to_owned);
    addr == listen
        || (port(addr) == port(listen)
            && (listen.starts_with("0.0.0.0:") || listen.starts_with("[::]:")))
}

pub(super) async fn page(State(d): State<Arc<Dash>>, headers: HeaderMap) -> Response {
    let ctx = match d.page_ctx(&headers) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let mut body = String::new();
    match ctx.admin.cluster().await {
        Ok(brokers) => {
            let mut rows = Vec::new();
            for b in &brokers {
                let rt = &b.runtime;
                let max = figure(rt, "commitLogMaxOffset");
                let used = max.zip(figure(rt, "commitLogMinOffset"));
                let flush = max.zip(figure(rt, "commitLogDurableOffset"));
                let dispatch = figure(rt, "dispatchBehindBytes").or_else(|| {
                    let read = d.config.dispatch_behind.as_ref()?;
                    is_local(&b.addr, &d.config.broker_listen).then(|| read())
                });
                rows.push(vec![
                    esc(&b.cluster),
                    esc(&b.broker_name),
                    num(b.broker_id),
                    esc(&b.addr),
                    or_dash(rt.get("brokerRole").cloned()),
                    or_dash(rt.get("masterEpoch").cloned()),
                    or_dash(rt.get("inSyncReplicas").cloned()),
                    or_dash(used.map(|(max, min)| bytes(max.saturating_sub(min)))),
                    or_dash(flush.map(|(max, d)| bytes(max.saturating_sub(d)))),
                    or_dash(dispatch.map(bytes)),
                    or_dash(rt.get("brokerVersionDesc").cloned()),
                ]);
            }
            if rt_missing(&brokers) {
                body.push_str(&error_box(
                    "Some brokers did not answer GET_BROKER_RUNTIME_INFO (down, or refused by ACL).",
                ));
            }
            body.push_str(&table(
                &[
                    "Cluster",
                    "Broker",
                    "ID",
                    "Address",
                    "Role",
                    "Epoch",
                    "In-sync",
                    "Disk use",
                    "Flush lag",
                    "Dispatch lag",
                    "Version",
                ],
                &rows,
            ));
        }
        Err(e) => body.push_str(&error_box(&format!("Cannot read the cluster: {e}"))),
    }
    body.push_str(CHART);
    ctx.page("Cluster", &body)
}

fn rt_missing(brokers: &[sluice_client::admin::BrokerView]) -> bool {
    brokers.iter().any(|b| b.runtime.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_local_addresses() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
        assert!(is_local("10.0.0.1:10911", "0.0.0.0:10911"));
        assert!(is_local("127.0.0.1:10911", "127.0.0.1:10911"));
        assert!(!is_local("127.0.0.1:10912", "127.0.0.1:10911"));
    }
}

//! The state every request handler shares.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::accounting::RequestMetrics;
use crate::audit::AuditLog;
use crate::faults::Faults;
use crate::store::Store;

/// Everything a request handler needs.
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) faults: Faults,
    pub(crate) addr: SocketAddr,
    pub(crate) bookmark_interval: Duration,
    pub(crate) default_watch_timeout: Duration,
    pub(crate) max_request_body_bytes: usize,
    pub(crate) request_log: Option<Mutex<Vec<String>>>,
    /// `apiserver_request_total`, served on `/metrics`.
    pub(crate) metrics: RequestMetrics,
    /// The audit log, when one was asked for; `None` inside once closed.
    pub(crate) audit: Option<Mutex<Option<AuditLog>>>,
}

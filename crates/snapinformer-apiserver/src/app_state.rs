//! The state every request handler shares.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}

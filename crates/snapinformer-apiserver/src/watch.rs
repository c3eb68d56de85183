//! Watch streams: chunked JSON events, one per line, fed from the store's bounded history.
//!
//! Each watch runs in its own task that copies batches of events out of the shared history
//! (a few pointer copies under the store lock) and pushes encoded chunks into a small bounded
//! channel that the HTTP body drains. Writers never wait for watchers: a watcher that falls so
//! far behind that its position leaves the history gets an ERROR event with a 410 Expired
//! Status and its stream ends, as the real server cuts off unresponsive watchers.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::app_state::AppState;
use crate::error::ApiError;
use crate::faults::Faults;
use crate::render::metadata_only;
use crate::request::{Query, Repr, Target, filter_of, parse_int64, parse_rv};
use crate::resource::ResourceKind;
use crate::store::{Event, EventType, Filter, ObjKey, StoredObject};
use crate::table;

/// Events copied from the history per lock.
const BATCH: usize = 1024;
/// Encoded bytes gathered before a chunk is sent.
const CHUNK: usize = 256 * 1024;

/// The longest watch a request can ask for (`timeoutSeconds`): one year.
const MAX_WATCH_TIMEOUT_SECS: u64 = 365 * 24 * 3600;

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Synthetic ADDED events for the current state (at least `min_rv`), then changes.
    Initial { min_rv: u64, end_bookmark: bool },
    /// Changes after this version.
    After(u64),
}

/// Everything a watch task needs.
struct WatchSpec {
    kind: ResourceKind,
    filter: Filter,
    start: Start,
    bookmarks: bool,
    timeout: Duration,
    repr: Repr,
    forced_410: bool,
}

fn boolean(query: &Query, key: &str) -> Option<bool> {
    match query.get(key).map(String::as_str) {
        Some("true" | "1") => Some(true),
        Some("false" | "0") => Some(false),
        _ => None,
    }
}

/// Answers a watch request: HTTP 200 with a chunked stream, or a Status for bad parameters.
pub(crate) fn serve(
    state: &Arc<AppState>,
    target: &Target,
    query: &Query,
    repr: Repr,
) -> Result<Response, ApiError> {
    let filter = filter_of(target, query)?;
    let rv_text = query.get("resourceVersion").map(String::as_str).unwrap_or("");
    let rv_match = query.get("resourceVersionMatch").map(String::as_str).unwrap_or("");
    let bookmarks = boolean(query, "allowWatchBookmarks").unwrap_or(false);
    let send_initial = boolean(query, "sendInitialEvents");
    if send_initial == Some(true) {
        if rv_match != "NotOlderThan" {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !bookmarks {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                "allowWatchBookmarks",
                "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
            ));
        }
    } else if !rv_match.is_empty() && send_initial.is_none() {
        return Err(ApiError::invalid(
            "ListOptions",
            "",
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let rv = if rv_text.is_empty() { None } else { Some(parse_rv(rv_text)?) };
    let start = match (send_initial, rv) {
        (Some(true), rv) => Start::Initial { min_rv: rv.unwrap_or(0), end_bookmark: true },
        (Some(false), None | Some(0)) => Start::After(state.store.current_rv()),
        (None, None | Some(0)) => Start::Initial { min_rv: 0, end_bookmark: false },
        (_, Some(rv)) => Start::After(rv),
    };
    // Like the real server, an absent or zero timeoutSeconds means the default (and so does a
    // negative one here); a huge one is capped, so that the deadline stays representable.
    let timeout = match query.get("timeoutSeconds").map(String::as_str) {
        Some(t) if !t.is_empty() => parse_int64(t)?,
        _ => 0,
    };
    let timeout = match u64::try_from(timeout) {
        Ok(secs) if secs > 0 => Duration::from_secs(secs.min(MAX_WATCH_TIMEOUT_SECS)),
        _ => state.default_watch_timeout,
    };
    let spec = WatchSpec {
        kind: target.kind,
        filter,
        start,
        bookmarks,
        timeout,
        repr,
        forced_410: state.faults.take_watch_410(),
    };
    let (tx, mut rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(run(state.clone(), spec, tx));
    let stream = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|chunk| chunk.map(Ok::<Bytes, Infallible>))
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    let content_type =
        if repr == Repr::Protobuf { crate::protobuf::WATCH_MEDIA_TYPE } else { "application/json" };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    Ok(response)
}

/// Appends one event: a JSON line, or a length-prefixed protobuf frame whose object is already
/// enveloped protobuf.
fn push_event(out: &mut Vec<u8>, repr: Repr, etype: &str, object: &[u8]) {
    if repr == Repr::Protobuf {
        out.extend_from_slice(&crate::protobuf::watch_frame(etype, object));
        return;
    }
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(etype.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
}

/// A JSON object (a bookmark, a `Status`) in the watch's representation.
fn encode_value(value: &serde_json::Value, repr: Repr) -> Vec<u8> {
    if repr == Repr::Protobuf
        && let Some(bytes) = crate::protobuf::encode(value)
    {
        return bytes;
    }
    serde_json::to_vec(value).unwrap_or_default()
}

fn error_event(error: &ApiError, repr: Repr) -> Bytes {
    let mut out = Vec::new();
    push_event(&mut out, repr, "ERROR", &encode_value(&error.to_status(), repr));
    Bytes::from(out)
}

fn bookmark(kind: ResourceKind, rv: u64, initial_end: bool, repr: Repr) -> Vec<u8> {
    let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": kind.kind(), "apiVersion": kind.api_version(), "metadata": meta});
    let mut out = Vec::new();
    push_event(&mut out, repr, "BOOKMARK", &encode_value(&object, repr));
    out
}

/// Encodes an object in the watch's representation (a one-row Table, with its column
/// definitions, when the watch asked for Tables). Plain objects are borrowed, not copied.
fn encode_object(kind: ResourceKind, obj: &StoredObject, repr: Repr) -> Cow<'_, [u8]> {
    match repr {
        Repr::Object => Cow::Borrowed(&obj.json[..]),
        Repr::Protobuf => match obj.protobuf(kind) {
            Some(bytes) => Cow::Owned(bytes),
            None => Cow::Borrowed(&obj.json[..]),
        },
        Repr::Table(include) => {
            let value = obj.value();
            let t = table::table(
                kind,
                vec![table::row(kind, &value, include)],
                json!({"resourceVersion": obj.rv.to_string()}),
            );
            Cow::Owned(serde_json::to_vec(&t).unwrap_or_default())
        }
        Repr::Metadata => {
            Cow::Owned(serde_json::to_vec(&metadata_only(&obj.value())).unwrap_or_default())
        }
    }
}

fn too_old(cursor: u64, oldest: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {cursor} ({oldest})"))
}

/// Whether the watch goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Gathers encoded events into chunks for the HTTP body and applies the watch-cut faults.
struct Emitter<'a> {
    tx: &'a mpsc::Sender<Bytes>,
    faults: &'a Faults,
    out: Vec<u8>,
    sent: u64,
    cut_after: Option<u64>,
    cut_probability: f64,
    /// JSON lines or protobuf frames.
    repr: Repr,
}

impl<'a> Emitter<'a> {
    fn new(tx: &'a mpsc::Sender<Bytes>, faults: &'a Faults, repr: Repr) -> Self {
        let (cut_after, cut_probability) = faults.watch_cut();
        Self {
            tx,
            faults,
            out: Vec::with_capacity(CHUNK),
            sent: 0,
            cut_after,
            cut_probability,
            repr,
        }
    }

    /// Adds one event; sends a chunk when enough has gathered; stops after a fault cut.
    async fn event(&mut self, etype: &str, object: &[u8]) -> Flow {
        push_event(&mut self.out, self.repr, etype, object);
        self.sent += 1;
        let cut = self.cut_after.is_some_and(|n| self.sent >= n)
            || (self.cut_probability > 0.0 && rand::random::<f64>() < self.cut_probability);
        if cut {
            self.faults.count_cut();
            self.flush().await;
            return Flow::Stop;
        }
        if self.out.len() >= CHUNK { self.flush().await } else { Flow::Continue }
    }

    /// Adds bytes that are not counted as an event (bookmarks).
    fn extra(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// Sends what has gathered; `Stop` when the client is gone.
    async fn flush(&mut self) -> Flow {
        if self.out.is_empty() {
            return Flow::Continue;
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.out, Vec::with_capacity(CHUNK)));
        if self.tx.send(chunk).await.is_ok() { Flow::Continue } else { Flow::Stop }
    }

    /// Sends a final ERROR event.
    async fn error(&mut self, error: &ApiError) {
        if self.flush().await == Flow::Continue {
            let _ = self.tx.send(error_event(error, self.repr)).await;
        }
    }
}

/// The event type a watcher with `filter` sees for `event`, if any: an object entering the
/// selection is ADDED, one leaving it is DELETED.
fn visible_type(event: &Event, filter: &Filter) -> Option<EventType> {
    let was_matching = event.prev.as_ref().is_some_and(|p| p.matches(filter));
    let now_matching = event.obj.matches(filter);
    match (event.etype, was_matching, now_matching) {
        (EventType::Deleted, false, false) => None,
        (EventType::Deleted, _, _) => Some(EventType::Deleted),
        (_, true, true) => Some(EventType::Modified),
        (_, false, true) => Some(EventType::Added),
        (_, true, false) => Some(EventType::Deleted),
        (_, false, false) => None,
    }
}

/// Streams the initial state of a watch as ADDED events; returns the snapshot's version.
async fn initial_events(
    state: &AppState,
    spec: &WatchSpec,
    emitter: &mut Emitter<'_>,
    min_rv: u64,
    end_bookmark: bool,
) -> Option<u64> {
    let store = &state.store;
    if min_rv > 0 && !store.wait_for_rv(min_rv, Duration::from_secs(3)).await {
        emitter.error(&ApiError::too_large_resource_version(min_rv, store.current_rv())).await;
        return None;
    }
    let (map, rv) = store.snapshot(spec.kind);
    let lower = match &spec.filter.namespace {
        Some(ns) => std::ops::Bound::Included(ObjKey::new(ns, "")),
        None => std::ops::Bound::Unbounded,
    };
    let items = map
        .range((lower, std::ops::Bound::Unbounded))
        .take_while(|(k, _)| spec.filter.namespace.as_ref().is_none_or(|ns| *ns == k.namespace));
    for (_, obj) in items {
        if obj.matches(&spec.filter) {
            let encoded = encode_object(spec.kind, obj, spec.repr);
            if emitter.event("ADDED", &encoded).await == Flow::Stop {
                return None;
            }
        }
    }
    if end_bookmark {
        emitter.extra(&bookmark(spec.kind, rv, true, spec.repr));
    }
    Some(rv)
}

/// The watch task.
async fn run(state: Arc<AppState>, spec: WatchSpec, tx: mpsc::Sender<Bytes>) {
    let store = &state.store;
    let (mut rv_rx, mut epoch_rx) = store.subscribe();
    let epoch = *epoch_rx.borrow_and_update();
    // `default_watch_timeout` is the caller's: keep even `Duration::MAX` from overflowing.
    let now = Instant::now();
    let deadline = now
        .checked_add(spec.timeout)
        .unwrap_or_else(|| now + Duration::from_secs(MAX_WATCH_TIMEOUT_SECS));
    let mut emitter = Emitter::new(&tx, &state.faults, spec.repr);

    if spec.forced_410 {
        let current = store.current_rv();
        emitter.error(&too_old(current.saturating_sub(1), current)).await;
        return;
    }
    let mut cursor = match spec.start {
        Start::After(rv) => rv,
        Start::Initial { min_rv, end_bookmark } => {
            match initial_events(&state, &spec, &mut emitter, min_rv, end_bookmark).await {
                Some(rv) => rv,
                None => return,
            }
        }
    };
    if emitter.flush().await == Flow::Stop {
        return;
    }

    let bookmark_every = state.bookmark_interval.max(Duration::from_millis(10));
    let mut next_bookmark = Instant::now() + bookmark_every;
    loop {
        if *epoch_rx.borrow_and_update() != epoch {
            return;
        }
        rv_rx.borrow_and_update();
        let events = match store.events_after(cursor, BATCH) {
            Ok(events) => events,
            Err(oldest) => {
                emitter.error(&too_old(cursor, oldest)).await;
                return;
            }
        };
        if events.is_empty() {
            tokio::select! {
                changed = rv_rx.changed() => if changed.is_err() { return },
                _ = epoch_rx.changed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tokio::time::sleep_until(next_bookmark), if spec.bookmarks => {
                    next_bookmark = Instant::now() + bookmark_every;
                    emitter.extra(&bookmark(spec.kind, cursor, false, spec.repr));
                    if emitter.flush().await == Flow::Stop {
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
            continue;
        }
        for event in &events {
            cursor = event.rv;
            if event.kind != spec.kind {
                continue;
            }
            let Some(etype) = visible_type(event, &spec.filter) else { continue };
            let encoded = encode_object(spec.kind, &event.obj, spec.repr);
            if emitter.event(etype.as_str(), &encoded).await == Flow::Stop {
                return;
            }
        }
        if emitter.flush().await == Flow::Stop || Instant::now() >= deadline {
            return;
        }
    }
}

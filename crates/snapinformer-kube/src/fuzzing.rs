//! Fuzzing support (cargo feature `fuzzing`, off by default; not a stable API).
//!
//! Two checks on arbitrary bytes from the server, each called by a libFuzzer target in `fuzz/`
//! at the repository root and by the smoke tests in `tests/fuzz_smoke.rs` (which enable this
//! feature through a dev-dependency of the crate on itself):
//!
//! - [`decode_watch_event`]: the bytes are a watch response body. They are decoded by the
//!   reflector's own line decoder, read in chunks of two sizes (the results must not depend on
//!   how the body arrives); every decoded object goes through the code that handles objects
//!   (key, store, queue: an object without a name must be an error, never a panic); then the
//!   events are replayed to a [`Reflector`](crate::Reflector) after a fixed list, and the
//!   deltas it queued are checked against a model of the reflector's rules.
//! - [`decode_list`]: the bytes are a list response (`ObjectList<Pod>`): its objects are
//!   checked the same way, and a reflector that receives it as its list must queue exactly its
//!   named objects (nothing if it does not decode or asks to be continued).
//!
//! Each call builds its own current-thread tokio runtime with a paused clock, so backoffs and
//! `Retry-After` waits of any length take no time.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, future::BoxFuture, io::BufReader, io::Cursor};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Resource,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
};
use snapinformer_core::{DeltaFifo, DeltaType, Queue};
use snapinformer_store::{IndexFn, StoreBuilder};

use crate::{
    BackoffConfig, Error, ListWatch, NextAction, Reflector, ReflectorConfig, Step, WatchStream,
    access,
    access::{display_key, has_name},
    listwatch::watch_events,
    transform,
};

type Item = Result<WatchEvent<Pod>, kube::Error>;

/// A list/watch that answers every list with the same bytes and the first watch with the
/// given events; later watches end at once.
struct ScriptLw {
    list: Vec<u8>,
    watch: Mutex<Option<Vec<Item>>>,
}

impl ListWatch<Pod> for ScriptLw {
    fn list(&self, _: &ListParams) -> BoxFuture<'_, Result<ObjectList<Pod>, kube::Error>> {
        let list = serde_json::from_slice(&self.list).map_err(kube::Error::SerdeError);
        Box::pin(async move { list })
    }

    fn watch(
        &self,
        _: &WatchParams,
        _: &str,
    ) -> BoxFuture<'_, Result<WatchStream<Pod>, kube::Error>> {
        let items = self.watch.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
        Box::pin(async move { Ok(futures::stream::iter(items).boxed()) })
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

/// What the store would hold: key to resource version.
type State = BTreeMap<String, Option<String>>;

/// Checks everything the crate does with one decoded object: key extraction (an error exactly
/// when the name is missing or empty), the log key, the transforms, the store and the queue.
fn check_object(obj: &Pod) {
    let access = access::<Pod>();
    let named = has_name(obj);
    let key = access.key(obj);
    assert_eq!(key.is_ok(), named, "a key exactly for named objects: {:?}", obj.metadata);
    let shown = display_key(obj);
    if let Ok(key) = &key {
        let meta = obj.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        let want = match meta.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        };
        assert_eq!(key, &want, "key");
        assert_eq!(&shown, key, "display key");
    }
    let mut stripped = obj.clone();
    transform::strip_managed_fields_and_last_applied(&mut stripped);
    assert_eq!(access.key(&stripped).ok(), key.as_ref().ok().cloned(), "transforms keep the key");

    let (mut writer, reader) = StoreBuilder::new(access)
        .covering_index("owner", IndexFn::owner_uid(access))
        .index("app", IndexFn::label(access, "app"))
        .build()
        .expect("distinct index names");
    let obj = Arc::new(obj.clone());
    match writer.add(obj.clone()) {
        Ok(()) => {
            let key = key.as_ref().expect("the store accepted a nameless object");
            let snap = reader.snapshot();
            assert!(snap.get_by_key(key).is_some(), "stored under its key");
            for uid in (access.owner_uids)(&obj) {
                assert_eq!(snap.by_index("owner", uid).expect("owner index").len(), 1);
            }
            assert!(writer.delete(&obj).expect("named").is_some(), "deleted by its key");
        }
        Err(e) => assert!(key.is_err(), "the store refused a named object: {e}"),
    }
    let queue = DeltaFifo::without_known_objects(access);
    assert_eq!(queue.add(obj.clone()).is_ok(), named, "queued exactly when named");
    assert_eq!(queue.update(obj).is_ok(), named, "queued exactly when named");
}

fn check_item(item: &Item) {
    match item {
        Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
            check_object(o)
        }
        Ok(WatchEvent::Bookmark(b)) => drop(b.metadata.annotations.get(crate::INITIAL_EVENTS_END)),
        Ok(WatchEvent::Error(status)) => check_error(Error::WatchErrorEvent(status.clone())),
        Err(kube::Error::Api(status)) => {
            check_error(Error::WatchStream(kube::Error::Api(status.clone())))
        }
        Err(_) => {}
    }
}

/// The error classification and the backoff it leads to must not panic on any `Status`.
fn check_error(error: Error) {
    let _ = (error.is_expired(), error.is_too_large_resource_version(), error.is_throttled());
    let _ = (error.code(), error.to_string());
    let mut backoff = crate::Backoff::new(BackoffConfig::default());
    let delay = backoff.next_delay(error.retry_after());
    if let Some(wait) = error.retry_after() {
        assert!(delay >= wait, "the backoff honours Retry-After");
    }
}

/// A fixed list: `default/a` at 1 and `default/b` at 2, list version 2.
const LIST: &str = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"2"},"items":[
{"metadata":{"name":"a","namespace":"default","resourceVersion":"1"}},
{"metadata":{"name":"b","namespace":"default","resourceVersion":"2"}}]}"#;

/// How the model expects the reflector to leave a watch after an item that is not an object
/// event (`None`: the model leaves the decision to the reflector, which must relist or
/// re-watch).
fn expected_exit(item: &Item) -> Option<NextAction> {
    match item {
        Err(kube::Error::SerdeError(_)) => Some(NextAction::Relist),
        Ok(WatchEvent::Error(status)) => {
            let error = Error::WatchErrorEvent(status.clone());
            Some(match error.code() {
                _ if error.is_expired() => NextAction::Relist,
                None | Some(429 | 500..=599) => NextAction::Rewatch,
                Some(_) => NextAction::Relist,
            })
        }
        _ => None,
    }
}

fn decode_body(body: &[u8], chunk: usize, max_line: usize) -> Vec<Item> {
    let reader = BufReader::with_capacity(chunk, Cursor::new(body.to_vec()));
    futures::executor::block_on(watch_events::<Pod, _>(reader, max_line).collect())
}

fn describe(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Ok(e) => format!("{e:?}"),
            Err(e) => format!("error: {e}"),
        })
        .collect()
}

/// The watch-event target: `data[0]` picks the read size, `data[1]` the line limit, the rest is
/// the watch response body. Panics on any violation.
pub fn decode_watch_event(data: &[u8]) {
    let [a, b, body @ ..] = data else { return };
    let chunk = 1 + usize::from(*a % 64);
    let max_line = 64 + 16 * usize::from(*b);
    let items = decode_body(body, 4096, max_line);
    assert_eq!(
        describe(&decode_body(body, chunk, max_line)),
        describe(&items),
        "decoding depends on how the body is read (chunk {chunk})"
    );
    let terminated_lines = body.split(|b| *b == b'\n').count();
    assert!(items.len() <= terminated_lines, "more items than lines");
    for item in &items {
        check_item(item);
    }

    // The model: the list, then the object events up to the first item that is not one.
    let list: ObjectList<Pod> = serde_json::from_str(LIST).expect("the fixed list");
    let listed = named_state(&list.items);
    let mut applied = listed.clone();
    let mut exit = None;
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) if has_name(o) => {
                let key = display_key(o);
                applied.insert(key, o.metadata.resource_version.clone());
            }
            Ok(WatchEvent::Deleted(o)) if has_name(o) => {
                applied.remove(&display_key(o));
            }
            Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)) => {}
            Ok(WatchEvent::Bookmark(_)) => {}
            _ => {
                exit = Some((i, expected_exit(item)));
                break;
            }
        }
    }
    let events = exit.map_or(items.len(), |(i, _)| i);
    let lw = ScriptLw { list: LIST.as_bytes().to_vec(), watch: Mutex::new(Some(items)) };
    let (state, session_exit) = reflect(lw, events + 12);
    if let Some((i, want)) = exit {
        let got = session_exit.unwrap_or_else(|| panic!("item {i} did not end the watch"));
        assert!(matches!(got, NextAction::Relist | NextAction::Rewatch), "item {i}: {got:?}");
        if let Some(want) = want {
            assert_eq!(got, want, "how item {i} ends the watch");
        }
        let want = if got == NextAction::Relist { &listed } else { &applied };
        assert_eq!(&state, want, "queued state after item {i} ended the watch ({got:?})");
    } else {
        assert_eq!(session_exit, None, "the watch ended without a failure");
        assert_eq!(state, applied, "queued state after the watch");
    }
}

/// The list target: `data` is a list response body. Panics on any violation.
pub fn decode_list(data: &[u8]) {
    let decoded = serde_json::from_slice::<ObjectList<Pod>>(data);
    let want = match &decoded {
        Ok(list) => {
            for obj in &list.items {
                check_object(obj);
            }
            let paged = list.metadata.continue_.as_deref().is_some_and(|c| !c.is_empty());
            if paged { State::new() } else { named_state(&list.items) }
        }
        Err(_) => State::new(),
    };
    let lw = ScriptLw { list: data.to_vec(), watch: Mutex::new(None) };
    let (state, _) = reflect(lw, 8);
    assert_eq!(state, want, "queued state after the list");
}

fn named_state(items: &[Pod]) -> State {
    items
        .iter()
        .filter(|o| has_name(*o))
        .map(|o| (display_key(o), o.metadata.resource_version.clone()))
        .collect()
}

/// Steps a reflector over `lw` `steps` times, then drains its queue into a state. Also returns
/// how the first watch ended, if a failure ended it.
fn reflect(lw: ScriptLw, steps: usize) -> (State, Option<NextAction>) {
    runtime().block_on(async move {
        let queue: Arc<DeltaFifo<Pod>> = Arc::new(DeltaFifo::without_known_objects(access()));
        let config = ReflectorConfig::new()
            .name("fuzz")
            .watch_list(false)
            .page_size(None)
            .short_watch(Duration::ZERO)
            .backoff(BackoffConfig::new().initial(Duration::from_millis(10)).jitter(0.0));
        let mut reflector = Reflector::new(lw, queue.clone() as Arc<dyn Queue<Pod>>, config);
        let mut watches = 0;
        let mut exit = None;
        for _ in 0..steps {
            let step = reflector.step().await.expect("the queue stays open");
            match step {
                Step::WatchOpened { .. } => watches += 1,
                Step::Failed { next, .. }
                    if watches == 1 && exit.is_none() && next != NextAction::Continue =>
                {
                    exit = Some(next);
                }
                _ => {}
            }
            if watches > 1 && exit.is_none() {
                // The first watch ended without a failure; later ones are empty.
                break;
            }
        }
        let mut state = State::new();
        while !queue.is_empty() {
            let batch = queue.pop_batch(usize::MAX).await.expect("open");
            for delta in &batch.deltas {
                match delta.kind {
                    DeltaType::Deleted => drop(state.remove(&*delta.key)),
                    _ => {
                        let obj = delta.object.object().expect("an object");
                        assert!(has_name(&**obj), "only named objects are queued");
                        state.insert(delta.key.to_string(), obj.metadata.resource_version.clone());
                    }
                }
            }
            queue.done(&batch);
        }
        (state, exit)
    })
}

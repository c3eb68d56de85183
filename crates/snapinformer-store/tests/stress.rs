//! Concurrency stress test: one writer applying random batches while many reader threads take
//! snapshots, hold a random number of them for random times and drop them in random order.
//!
//! The store has no synchronisation of its own beyond `arc-swap` (publication) and a
//! `std::sync::mpsc` channel (background reclamation), and the crate forbids `unsafe`, so there
//! is nothing for loom to model; this test checks the composition under real threads instead.
//!
//! The writer keeps a naive model (persistent maps, so recording it is O(1)) and, before every
//! publication, appends the model the publication will show to a shared log keyed by publication
//! number. (The log is keyed by [`Snapshot::publication`] rather than [`Snapshot::sequence`]:
//! a batch that only sets a resource version publishes without advancing the sequence; the
//! recorded sequence is checked too.) Readers look up the model of each snapshot they take and
//! check length, resource version, sequence, `list_keys`, `list`, `get`/`get_by_key` (the very
//! `Arc` the writer stored), `index_values`, `index_keys`, `by_index`/`by_index_refs` on a key
//! index, a covering index and the namespace index; they check a held snapshot again when they
//! drop it (it must not have changed while the writer went on), and that successive snapshots
//! of one thread never go back in publication order. At the end every object must have been
//! freed: no old version leaks, whether the writer or the reclaimer thread drops them.
//!
//! Runs on both backends, with background reclamation on and off. The default size takes a few
//! seconds in a debug build; `STRESS_SCALE=<n>` multiplies the writer's batches, and
//! `STRESS_SEED=<n>` fixes the random seed (interleavings still vary). The long run:
//!
//! ```sh
//! CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true STRESS_SCALE=20 \
//!     cargo test --release -p snapinformer-store --test stress
//! ```

use std::{
    borrow::Cow,
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use rand::{Rng, SeedableRng, rngs::StdRng};
use snapinformer_store::{
    Backend, Chunked, Hamt, IndexFn, Indexers, NAMESPACE_INDEX, Object, ObjectAccess, OwnerUids,
    Reader, Snapshot, StoreBuilder, Writer,
};

/// Names the writer draws from: small enough that updates and deletes hit existing keys often.
const NAME_SPACE: u64 = 160;
/// Reader threads.
const READERS: usize = 8;
/// Writer batches at scale 1.
const BATCHES: u64 = 5000;

// ----- objects -------------------------------------------------------------------------------

/// Counts live objects of one run; every object holds it, so a leak of an old version (or of
/// anything that holds objects) shows as a non-zero count at the end.
#[derive(Debug)]
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Live(counter.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct SObj {
    name: String,
    ns: Option<String>,
    rv: String,
    node: String,
    owners: Vec<String>,
    labels: BTreeMap<String, String>,
    _live: Live,
}

impl Object for SObj {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        self.ns.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        Some(&self.rv)
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        Some(&self.labels)
    }
    fn owner_uids(&self) -> OwnerUids<'_> {
        self.owners.iter().map(String::as_str).collect()
    }
}

impl SObj {
    fn key(&self) -> String {
        match &self.ns {
            Some(ns) if !ns.is_empty() => format!("{ns}/{}", self.name),
            _ => self.name.clone(),
        }
    }
}

fn node_of(o: &SObj) -> Option<&str> {
    Some(o.node.as_str()).filter(|n| !n.is_empty())
}

/// The store's indexes: a key index, a covering index and a multi-valued key index (plus the
/// namespace index every store has).
fn indexers() -> Indexers<SObj> {
    Indexers::new()
        .with("node", IndexFn::field(node_of))
        .with_covering("owner", IndexFn::owner_uid(ObjectAccess::of()))
        .with(
            "labels",
            IndexFn::new(|o: &SObj| {
                o.labels.iter().map(|(k, v)| Cow::Owned(format!("{k}={v}"))).collect()
            }),
        )
}

const INDEXES: [&str; 4] = [NAMESPACE_INDEX, "node", "owner", "labels"];

/// Index values computed naively, independently of the store's index functions.
fn model_values(index: &str, o: &SObj) -> Vec<String> {
    match index {
        NAMESPACE_INDEX => vec![o.ns.clone().unwrap_or_default()],
        "node" => node_of(o).map(str::to_owned).into_iter().collect(),
        "owner" => o.owners.clone(),
        "labels" => o.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        other => panic!("unknown index {other}"),
    }
}

// ----- randomness ----------------------------------------------------------------------------

fn scale() -> u64 {
    std::env::var("STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

fn base_seed() -> u64 {
    std::env::var("STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

// ----- the model -----------------------------------------------------------------------------

/// What one publication must show.
#[derive(Clone, Default)]
struct ModelState {
    items: imbl::OrdMap<String, Arc<SObj>>,
    rv: Option<String>,
    sequence: u64,
}

/// Models by publication number, appended by the writer before each publication.
///
/// Old entries are pruned so that long runs stay in bounded memory: each reader announces a
/// floor (a publication it will never look below) before taking a snapshot, and the writer
/// drops the entries below the lowest floor.
struct Log {
    /// `(publication of entries[0], entries)`.
    entries: Mutex<(u64, std::collections::VecDeque<Arc<ModelState>>)>,
    /// The last publication the writer made visible.
    published: AtomicU64,
    /// Per reader: the lowest publication it may still look up.
    floors: Vec<AtomicU64>,
}

impl Log {
    fn new(readers: usize) -> Self {
        Log {
            entries: Mutex::default(),
            published: AtomicU64::new(0),
            floors: (0..readers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn record(&self, publication: u64, state: &ModelState) {
        let mut guard = self.entries.lock().unwrap();
        let (base, entries) = &mut *guard;
        assert_eq!(*base + entries.len() as u64, publication, "recorded in order");
        entries.push_back(Arc::new(state.clone()));
    }

    /// Called by the writer after each publication.
    fn published(&self, publication: u64) {
        self.published.store(publication, Ordering::SeqCst);
        if !publication.is_multiple_of(64) {
            return;
        }
        let floor = self.floors.iter().map(|f| f.load(Ordering::SeqCst)).min().unwrap_or(0);
        let mut guard = self.entries.lock().unwrap();
        let (base, entries) = &mut *guard;
        // Keep the latest entry whatever the floors say.
        while *base < floor && entries.len() > 1 {
            entries.pop_front();
            *base += 1;
        }
    }

    /// Called by reader `reader` before taking a snapshot: the snapshot's publication is at
    /// least the last one published now, so nothing below it is needed any more by this reader.
    fn announce(&self, reader: usize) {
        let floor = self.published.load(Ordering::SeqCst);
        self.floors[reader].store(floor, Ordering::SeqCst);
    }

    fn len(&self) -> u64 {
        let guard = self.entries.lock().unwrap();
        guard.0 + guard.1.len() as u64
    }

    fn get(&self, publication: u64) -> Arc<ModelState> {
        let guard = self.entries.lock().unwrap();
        let (base, entries) = &*guard;
        publication
            .checked_sub(*base)
            .and_then(|i| entries.get(i as usize))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "snapshot of publication {publication}, log holds {base}..{}",
                    base + entries.len() as u64
                )
            })
    }
}

/// Checks every read of `snap` against `model`. Objects are compared by identity: the store
/// must hand out the very `Arc` it was given.
fn check<B: Backend>(snap: &Snapshot<SObj, B>, model: &ModelState) {
    let p = snap.publication();
    assert_eq!(snap.len(), model.items.len(), "len at publication {p}");
    assert_eq!(snap.is_empty(), model.items.is_empty());
    assert_eq!(snap.resource_version(), model.rv.as_deref(), "resource version at {p}");
    assert_eq!(snap.sequence(), model.sequence, "sequence at {p}");
    let mut keys: Vec<String> = snap.list_keys().iter().map(|k| k.to_string()).collect();
    keys.sort();
    assert!(keys.iter().eq(model.items.keys()), "list_keys at {p}");
    let listed = snap.list();
    assert_eq!(listed.len(), model.items.len(), "list at {p}");
    for o in &listed {
        let want = model.items.get(&o.key()).unwrap_or_else(|| panic!("list: extra {}", o.key()));
        assert!(Arc::ptr_eq(o, want), "list returns the stored object for {} at {p}", o.key());
    }
    for (k, o) in model.items.iter() {
        let got = snap.get_by_key(k).unwrap_or_else(|| panic!("get_by_key {k} missing at {p}"));
        assert!(Arc::ptr_eq(got, o), "get_by_key {k} at {p}");
        assert!(Arc::ptr_eq(snap.get(o).unwrap().unwrap(), o), "get {k} at {p}");
    }
    for absent in ["no-such-key", "ns-1/no-such-name"] {
        assert!(snap.get_by_key(absent).is_none());
    }
    for index in INDEXES {
        let mut buckets: BTreeMap<String, BTreeSet<&String>> = BTreeMap::new();
        for (k, o) in model.items.iter() {
            for v in model_values(index, o) {
                buckets.entry(v).or_default().insert(k);
            }
        }
        let values: Vec<String> =
            snap.index_values(index).unwrap().iter().map(|v| v.to_string()).collect();
        let mut sorted = values.clone();
        sorted.sort();
        assert!(sorted.iter().eq(buckets.keys()), "index_values {index} at {p}");
        for (value, keys) in &buckets {
            let mut got: Vec<String> =
                snap.index_keys(index, value).unwrap().iter().map(|k| k.to_string()).collect();
            got.sort();
            assert!(got.iter().eq(keys.iter().copied()), "index_keys {index}={value} at {p}");
            let objs = snap.by_index(index, value).unwrap();
            assert_eq!(objs.len(), keys.len(), "by_index {index}={value} at {p}");
            for o in &objs {
                let want = &model.items[&o.key()];
                assert!(Arc::ptr_eq(o, want), "by_index {index}={value}: {} at {p}", o.key());
            }
            assert_eq!(snap.by_index_refs(index, value).unwrap().len(), keys.len());
        }
        assert!(snap.by_index(index, "no-such-value").unwrap().is_empty());
        assert!(snap.index_keys(index, "no-such-value").unwrap().is_empty());
    }
}

// ----- the writer ----------------------------------------------------------------------------

struct WriterState<B: Backend> {
    writer: Writer<SObj, B>,
    model: ModelState,
    rng: StdRng,
    next_rv: u64,
    live: Arc<AtomicUsize>,
    log: Arc<Log>,
    publications: u64,
}

/// Sets the flag when dropped, also when the writer panics, so readers always stop.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl<B: Backend> WriterState<B> {
    fn random_obj(&mut self) -> SObj {
        let r = &mut self.rng;
        let name = format!("obj-{}", r.random_range(0..NAME_SPACE));
        let ns = match name.len() % 3 {
            0 => None,
            n => Some(format!("ns-{n}")),
        };
        self.next_rv += 1;
        let owner = r.random_range(0..6);
        let owners =
            (0..r.random_range(0..3)).map(|i| format!("uid-{}", (owner + i) % 6)).collect();
        let mut labels = BTreeMap::new();
        if r.random_ratio(70, 100) {
            labels.insert("app".to_owned(), format!("app-{}", r.random_range(0..5)));
        }
        if r.random_ratio(30, 100) {
            labels.insert("tier".to_owned(), "web".to_owned());
        }
        SObj {
            name,
            ns,
            rv: self.next_rv.to_string(),
            node: if r.random_ratio(10, 100) {
                String::new()
            } else {
                format!("node-{}", r.random_range(0..8))
            },
            owners,
            labels,
            _live: Live::new(&self.live),
        }
    }

    /// An existing object with only a new resource version (the common watch update).
    fn touched(&mut self) -> Option<SObj> {
        if self.model.items.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..self.model.items.len() as u64) as usize;
        let (_, o) = self.model.items.iter().nth(i)?;
        self.next_rv += 1;
        Some(SObj {
            name: o.name.clone(),
            ns: o.ns.clone(),
            rv: self.next_rv.to_string(),
            node: o.node.clone(),
            owners: o.owners.clone(),
            labels: o.labels.clone(),
            _live: Live::new(&self.live),
        })
    }

    fn existing_key(&mut self) -> Option<String> {
        if self.model.items.is_empty() {
            return None;
        }
        let i = self.rng.random_range(0..self.model.items.len() as u64) as usize;
        self.model.items.keys().nth(i).cloned()
    }

    /// Applies an upsert to the model; returns the object it replaced.
    fn model_upsert(&mut self, o: &Arc<SObj>) -> Option<Arc<SObj>> {
        self.model.rv = Some(o.rv.clone());
        self.model.sequence += 1;
        self.model.items.insert(o.key(), o.clone())
    }

    fn model_delete(&mut self, key: &str) -> Option<Arc<SObj>> {
        self.model.sequence += 1;
        self.model.items.remove(key)
    }

    /// Records the model the next publication will show.
    fn record(&mut self) {
        self.publications += 1;
        self.log.record(self.publications, &self.model);
    }

    fn published(&self) {
        assert_eq!(self.writer.snapshot().publication(), self.publications, "one per batch");
        self.log.published(self.publications);
    }

    /// One random step: a batch (most of the time), a replace, or a single-change method.
    fn step(&mut self) {
        let roll = self.rng.random_range(0..100);
        if roll < 2 {
            // Replace (a relist): a random population, possibly empty, at an explicit version.
            let n = self.rng.random_range(0..NAME_SPACE);
            let mut objs: BTreeMap<String, Arc<SObj>> = BTreeMap::new();
            for _ in 0..n {
                let o = Arc::new(self.random_obj());
                objs.insert(o.key(), o);
            }
            self.next_rv += 1;
            let rv = self.next_rv.to_string();
            self.model.items = objs.iter().map(|(k, o)| (k.clone(), o.clone())).collect();
            self.model.rv = Some(rv.clone());
            self.model.sequence += 1;
            self.record();
            self.writer.replace(objs.into_values(), rv).unwrap();
            self.published();
        } else if roll < 8 {
            // Single-change methods, each publishing at once.
            match self.rng.random_range(0..3) {
                0 => {
                    let o = Arc::new(self.random_obj());
                    self.model_upsert(&o);
                    self.record();
                    self.writer.add(o).unwrap();
                }
                1 => {
                    let key = self.existing_key().unwrap_or_else(|| "ns-1/absent".into());
                    let want = self.model_delete(&key);
                    self.record();
                    let got = self.writer.delete_key(&key);
                    assert_eq!(got.is_some(), want.is_some(), "delete_key {key}");
                }
                _ => {
                    let Some(o) = self.touched() else { return };
                    let o = Arc::new(o);
                    self.model_upsert(&o);
                    self.record();
                    self.writer.update(o).unwrap();
                }
            }
            self.published();
        } else {
            // A batch of 1 to 24 changes, published once.
            let n = 1 + self.rng.random_range(0..24);
            let mut staged: Vec<Staged> = Vec::new();
            for _ in 0..n {
                let roll = self.rng.random_range(0..100);
                let s = if roll < 35 {
                    let o = Arc::new(self.random_obj());
                    let replaced = self.model_upsert(&o);
                    Staged::Upsert(o, replaced)
                } else if roll < 70 {
                    match self.touched() {
                        Some(o) => {
                            let o = Arc::new(o);
                            let replaced = self.model_upsert(&o);
                            Staged::Upsert(o, replaced)
                        }
                        None => continue,
                    }
                } else if roll < 85 {
                    let Some(key) = self.existing_key() else { continue };
                    let old = self.model_delete(&key).expect("existing key");
                    // A delete with the final state reports its version.
                    if !old.rv.is_empty() {
                        self.model.rv = Some(old.rv.clone());
                    }
                    Staged::Delete(old)
                } else if roll < 95 {
                    let key = if self.rng.random_ratio(50, 100) {
                        format!("obj-{}", NAME_SPACE + self.rng.random_range(0..10))
                    } else {
                        self.existing_key().unwrap_or_default()
                    };
                    self.model_delete(&key);
                    Staged::DeleteKey(key)
                } else {
                    // A bookmark: only the version moves.
                    self.next_rv += 1;
                    let rv = self.next_rv.to_string();
                    self.model.rv = Some(rv.clone());
                    Staged::Version(rv)
                };
                staged.push(s);
            }
            if staged.is_empty() {
                return;
            }
            self.record();
            let mut batch = self.writer.batch();
            for s in staged {
                match s {
                    Staged::Upsert(o, want) => {
                        let key = o.key();
                        let got = batch.upsert(o).unwrap();
                        // The very object the model replaced (or none), not an equal copy.
                        assert!(
                            match (&got, &want) {
                                (Some(g), Some(w)) => Arc::ptr_eq(g, w),
                                (None, None) => true,
                                _ => false,
                            },
                            "batch upsert of {key} returned {:?}, the model replaced {:?}",
                            got.map(|g| g.rv.clone()),
                            want.map(|w| w.rv.clone()),
                        );
                    }
                    Staged::Delete(o) => {
                        let removed = batch.delete(&o).unwrap();
                        assert!(removed.is_some_and(|r| Arc::ptr_eq(&r, &o)), "batch delete");
                    }
                    Staged::DeleteKey(k) => drop(batch.delete_key(&k)),
                    Staged::Version(rv) => batch.set_resource_version(rv),
                }
            }
            batch.commit();
            self.published();
        }
    }
}

enum Staged {
    /// The object, and the one the model says it replaces.
    Upsert(Arc<SObj>, Option<Arc<SObj>>),
    Delete(Arc<SObj>),
    DeleteKey(String),
    Version(String),
}

// ----- readers -------------------------------------------------------------------------------

#[derive(Default)]
struct ReaderStats {
    snapshots: AtomicU64,
    checks: AtomicU64,
    max_held: AtomicUsize,
}

fn reader_loop<B: Backend>(
    id: usize,
    reader: Reader<SObj, B>,
    log: Arc<Log>,
    done: Arc<AtomicBool>,
    stats: Arc<ReaderStats>,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut held: Vec<(Snapshot<SObj, B>, Arc<ModelState>, Instant)> = Vec::new();
    let mut last_publication = 0;
    while !done.load(Ordering::Acquire) {
        log.announce(id);
        let snap = reader.snapshot();
        stats.snapshots.fetch_add(1, Ordering::Relaxed);
        assert!(snap.publication() >= last_publication, "publications never go back");
        last_publication = snap.publication();
        let model = log.get(snap.publication());
        // Check some snapshots at once (checking is much slower than taking one, and readers
        // that only check would mostly see consecutive publications).
        if rng.random_ratio(25, 100) {
            check(&snap, &model);
            stats.checks.fetch_add(1, Ordering::Relaxed);
        }
        if rng.random_ratio(40, 100) {
            let hold = Duration::from_micros(rng.random_range(0..20_000));
            held.push((snap, model, Instant::now() + hold));
            stats.max_held.fetch_max(held.len(), Ordering::Relaxed);
        }
        // Drop the expired ones in random order, checking each once more: it must still show
        // exactly its publication, whatever the writer did since.
        let now = Instant::now();
        let mut i = 0;
        while i < held.len() {
            let expired = held[i].2 <= now || held.len() > 32;
            if expired && rng.random_ratio(70, 100) {
                let (snap, model, _) = held.swap_remove(i);
                check(&snap, &model);
                stats.checks.fetch_add(1, Ordering::Relaxed);
            } else {
                i += 1;
            }
        }
        if rng.random_ratio(10, 100) {
            thread::sleep(Duration::from_micros(rng.random_range(0..500)));
        } else {
            thread::yield_now();
        }
    }
    for (snap, model, _) in held.drain(..) {
        check(&snap, &model);
    }
}

/// Waits for every thread until `deadline`, then fails (leaving stuck threads behind) rather
/// than hang; re-raises the first panic.
fn join_all(handles: Vec<(String, thread::JoinHandle<()>)>, deadline: Instant) {
    for (name, handle) in handles {
        while !handle.is_finished() {
            assert!(Instant::now() < deadline, "{name} did not finish before the deadline");
            thread::sleep(Duration::from_millis(5));
        }
        if let Err(panic) = handle.join() {
            eprintln!("{name} panicked");
            std::panic::resume_unwind(panic);
        }
    }
}

fn run<B: Backend>(background_reclaim: bool) {
    let seed = base_seed();
    let batches = BATCHES * scale();
    let label = format!("{} reclaim={background_reclaim} seed={seed}", B::NAME);
    eprintln!("stress: {label}, {batches} writer steps, {READERS} readers");
    let started = Instant::now();
    let live = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Log::new(READERS));
    let (writer, reader) = StoreBuilder::new(ObjectAccess::<SObj>::of())
        .backend::<B>()
        .indexers(indexers())
        .background_reclaim(background_reclaim)
        .build()
        .unwrap();
    log.record(0, &ModelState::default());
    let done = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ReaderStats::default());
    let mut handles = Vec::new();
    for i in 0..READERS {
        let (reader, log, done, stats) = (reader.clone(), log.clone(), done.clone(), stats.clone());
        let seed = seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
        let handle = thread::Builder::new()
            .name(format!("reader-{i}"))
            .spawn(move || reader_loop(i, reader, log, done, stats, seed))
            .unwrap();
        handles.push((format!("reader-{i}"), handle));
    }
    let writer_handle = {
        let (log, live, done) = (log.clone(), live.clone(), done.clone());
        thread::Builder::new()
            .name("writer".into())
            .spawn(move || {
                let _stop = SetOnDrop(done);
                let mut w = WriterState {
                    writer,
                    model: ModelState::default(),
                    rng: StdRng::seed_from_u64(seed),
                    next_rv: 0,
                    live,
                    log,
                    publications: 0,
                };
                for _ in 0..batches {
                    w.step();
                    if w.rng.random_ratio(5, 100) {
                        thread::yield_now();
                    }
                }
                // The final state once more, from the writer's side.
                let model = w.log.get(w.publications);
                check(&w.writer.snapshot(), &model);
                // Dropping the writer joins the reclaimer thread, if any.
            })
            .unwrap()
    };
    handles.insert(0, ("writer".into(), writer_handle));
    let deadline = Instant::now() + Duration::from_secs(120 * scale());
    join_all(handles, deadline);
    let publications = log.len() - 1;
    // Every version is gone once the log, the readers and the writer are: nothing leaked.
    drop(log);
    let last = reader.snapshot();
    let remaining = last.len();
    drop(last);
    drop(reader);
    assert_eq!(
        live.load(Ordering::Relaxed),
        0,
        "{label}: objects still alive after everything was dropped ({remaining} in the last version)"
    );
    eprintln!(
        "stress: {label}: {publications} publications, {} snapshots taken, {} checked, up to {} \
         held by one reader, {:.2} s",
        stats.snapshots.load(Ordering::Relaxed),
        stats.checks.load(Ordering::Relaxed),
        stats.max_held.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    assert!(stats.checks.load(Ordering::Relaxed) > 0, "readers checked snapshots");
}

#[test]
fn chunked_readers_see_exactly_their_publication_while_the_writer_runs() {
    run::<Chunked>(false);
}

#[test]
fn chunked_with_background_reclaim_readers_see_exactly_their_publication() {
    run::<Chunked>(true);
}

#[test]
fn hamt_readers_see_exactly_their_publication_while_the_writer_runs() {
    run::<Hamt>(false);
}

#[test]
fn hamt_with_background_reclaim_readers_see_exactly_their_publication() {
    run::<Hamt>(true);
}

//! Three designs for a compact pod cache, measured side by side against plain `Arc<Pod>`s
//! (issue 14). Each design is built from the same realistic StatefulSet pods (the `store`
//! scenario's generator, plus the three managedFields entries a real cluster writes):
//!
//! - `plain`: `k8s_openapi` `Pod`s in `Arc`s (what the store holds today).
//! - `A hash-consed`: `snapinformer_compact::CompactPod`: the pod as a hash-consed JSON tree,
//!   hot fields at hand (the design chosen).
//! - `B encoded`: each pod's JSON re-encoded as compact bytes whose strings are ids in one
//!   shared dictionary, hot fields kept decoded; other fields decoded on access.
//! - `C projection`: only the fields a controller declares (name, namespace, UID,
//!   resourceVersion, labels, owner UID, node, phase, images), strings interned.
//!
//! Figures: decode from JSON per pod, heap per pod with `--pods` pods held, and in a store of
//! 20,000 pods (as the criterion benches): apply 1000 updates (freeing the replaced objects),
//! owner lookup of 1000 pods materialised (the form a controller can read every field of), a
//! borrowed scan of every pod's node and phase.
//!
//! `cargo run --release -p snapinformer-sim --example compact_designs -- --pods 200000`

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use snapinformer_compact::{CompactPod, Interner, Str};
use snapinformer_sim::pods::{self, Shape};
use snapinformer_store::{IndexFn, Object, ObjectAccess, OwnerUids, StoreBuilder};

#[global_allocator]
static ALLOC: snapinformer_arena::Metered<mimalloc::MiMalloc> =
    snapinformer_arena::Metered::new(mimalloc::MiMalloc);

const STORE_PODS: usize = 20_000;

/// The store scenario's realistic pod `i`, with managedFields added, as JSON.
fn pod_json(shape: &Shape, i: usize, rv: u64, node: usize) -> Vec<u8> {
    let pod = pods::make_pod(shape, i, rv, node);
    let mut v = serde_json::to_value(&pod).expect("pods encode");
    let owner_uid = pods::owner_uid(i / shape.per_owner);
    let ip = format!("10.1.{}.{}", (i / 250) % 250, i % 250);
    v["metadata"]["managedFields"] = serde_json::json!([
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-30T07:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:apps.kubernetes.io/pod-index": {},
            "f:controller-revision-hash": {}, "f:statefulset.kubernetes.io/pod-name": {}, "f:tier": {}},
            "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{owner_uid}\"}}"): {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {},
                "f:name": {}, "f:ports": {}, "f:resources": {}, "f:terminationMessagePath": {}, "f:volumeMounts": {}},
                "k:{\"name\":\"sidecar\"}": {".": {}, "f:env": {}, "f:image": {}, "f:name": {}}},
                "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:tolerations": {}, "f:volumes": {}}}},
        {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1", "subresource": "binding",
         "time": "2026-11-30T07:00:01Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:nodeName": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
         "time": format!("2026-11-30T07:{:02}:{:02}Z", (i / 60) % 60, i % 60), "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {},
            "f:podIP": {}, "f:podIPs": {".": {}, format!("k:{{\"ip\":\"{ip}\"}}"): {".": {}, "f:ip": {}}}, "f:startTime": {}}}}
    ]);
    serde_json::to_vec(&v).expect("values encode")
}

// ----- design B: dictionary-encoded bytes -----------------------------------------------------

#[derive(Default)]
struct Dict {
    ids: HashMap<Arc<str>, u32>,
    strs: Vec<Arc<str>>,
}

impl Dict {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let a: Arc<str> = Arc::from(s);
        let id = self.strs.len() as u32;
        self.strs.push(a.clone());
        self.ids.insert(a, id);
        id
    }
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn read_varint(b: &mut &[u8]) -> u64 {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let byte = b[0];
        *b = &b[1..];
        n |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return n;
        }
        shift += 7;
    }
}

fn encode(v: &serde_json::Value, d: &mut Dict, out: &mut Vec<u8>) {
    use serde_json::Value as J;
    match v {
        J::Null => out.push(0),
        J::Bool(b) => out.push(1 + u8::from(*b)),
        J::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.push(3);
                varint(out, u);
            } else if let Some(i) = n.as_i64() {
                out.push(4);
                out.extend_from_slice(&i.to_le_bytes());
            } else {
                out.push(5);
                out.extend_from_slice(&n.as_f64().unwrap_or_default().to_le_bytes());
            }
        }
        J::String(s) => {
            out.push(6);
            varint(out, u64::from(d.id(s)));
        }
        J::Array(a) => {
            out.push(7);
            varint(out, a.len() as u64);
            a.iter().for_each(|x| encode(x, d, out));
        }
        J::Object(o) => {
            out.push(8);
            varint(out, o.len() as u64);
            for (k, x) in o {
                varint(out, u64::from(d.id(k)));
                encode(x, d, out);
            }
        }
    }
}

fn decode(b: &mut &[u8], d: &Dict) -> serde_json::Value {
    use serde_json::Value as J;
    let tag = b[0];
    *b = &b[1..];
    match tag {
        0 => J::Null,
        1 | 2 => J::Bool(tag == 2),
        3 => J::from(read_varint(b)),
        4 => {
            let i = i64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            *b = &b[8..];
            J::from(i)
        }
        5 => {
            let f = f64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            *b = &b[8..];
            J::from(f)
        }
        6 => J::String(d.strs[read_varint(b) as usize].to_string()),
        7 => {
            let n = read_varint(b) as usize;
            J::Array((0..n).map(|_| decode(b, d)).collect())
        }
        _ => {
            let n = read_varint(b) as usize;
            J::Object(
                (0..n)
                    .map(|_| {
                        let k = d.strs[read_varint(b) as usize].to_string();
                        (k, decode(b, d))
                    })
                    .collect(),
            )
        }
    }
}

/// Hot fields (designs B and C keep the same ones decoded).
struct Hot {
    name: Str,
    namespace: Str,
    uid: Str,
    rv: Str,
    labels: Option<Arc<BTreeMap<String, String>>>,
    owner_uid: Option<Str>,
    node: Option<Str>,
    phase: Option<Str>,
}

struct EncodedPod {
    hot: Hot,
    bytes: Box<[u8]>,
}

struct Projection {
    hot: Hot,
    #[allow(dead_code)]
    images: Arc<[Str]>,
}

macro_rules! hot_object {
    ($t:ty) => {
        impl Object for $t {
            fn name(&self) -> Option<&str> {
                Some(&self.hot.name)
            }
            fn namespace(&self) -> Option<&str> {
                Some(&self.hot.namespace)
            }
            fn resource_version(&self) -> Option<&str> {
                Some(&self.hot.rv)
            }
            fn uid(&self) -> Option<&str> {
                Some(&self.hot.uid)
            }
            fn labels(&self) -> Option<&BTreeMap<String, String>> {
                self.hot.labels.as_deref()
            }
            fn owner_uids(&self) -> OwnerUids<'_> {
                self.hot.owner_uid.as_deref().into_iter().collect()
            }
        }
    };
}
hot_object!(EncodedPod);
hot_object!(Projection);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PMeta {
    name: String,
    namespace: String,
    uid: String,
    resource_version: String,
    labels: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<POwner>>,
}
#[derive(Deserialize)]
struct POwner {
    uid: String,
}
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PSpec {
    node_name: Option<String>,
    containers: Vec<PContainer>,
}
#[derive(Deserialize)]
struct PContainer {
    image: Option<String>,
}
#[derive(Deserialize)]
struct PStatus {
    phase: Option<String>,
}
#[derive(Deserialize)]
struct PPod {
    metadata: PMeta,
    spec: PSpec,
    status: PStatus,
}

fn hot_from_pmeta(m: PMeta, node: Option<String>, phase: Option<String>, i: &mut Interner) -> Hot {
    Hot {
        name: i.str(&m.name),
        namespace: i.str(&m.namespace),
        uid: i.str(&m.uid),
        rv: i.str(&m.resource_version),
        labels: m.labels.map(|l| i.labels(l)),
        owner_uid: m.owner_references.and_then(|o| o.into_iter().next()).map(|o| i.str(&o.uid)),
        node: node.map(|n| i.str(&n)),
        phase: phase.map(|p| i.str(&p)),
    }
}

fn decode_b(json: &[u8], i: &mut Interner, d: &mut Dict) -> EncodedPod {
    let v: serde_json::Value = serde_json::from_slice(json).expect("valid JSON");
    let p: PPod = serde_json::from_value(v.clone()).expect("a pod");
    let hot = hot_from_pmeta(p.metadata, p.spec.node_name, p.status.phase, i);
    let mut out = Vec::with_capacity(1024);
    encode(&v, d, &mut out);
    EncodedPod { hot, bytes: out.into_boxed_slice() }
}

fn decode_c(json: &[u8], i: &mut Interner) -> Projection {
    let p: PPod = serde_json::from_slice(json).expect("a pod");
    let images: Arc<[Str]> =
        p.spec.containers.iter().filter_map(|c| c.image.as_deref()).map(|s| i.str(s)).collect();
    let hot = hot_from_pmeta(p.metadata, p.spec.node_name, p.status.phase, i);
    Projection { hot, images }
}

// ----- the measurement ---------------------------------------------------------------------------

#[derive(Default, Debug)]
struct Figures {
    decode_us: f64,
    heap_per_pod: f64,
    apply_1000_ms: f64,
    owner_1000_us: f64,
    scan_us: f64,
}

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs one design: `make(json)` builds an object; `mat(obj)` materialises it (returns
/// something a controller can read every field of); `hot(obj)` reads node and phase.
fn run<T: Object>(
    name: &str,
    heap_pods: usize,
    make: &mut dyn FnMut(&[u8]) -> T,
    mat: &dyn Fn(&Arc<T>) -> usize,
    hot: fn(&T) -> (Option<&str>, Option<&str>),
) -> Figures {
    let mut f = Figures::default();
    let shape = Shape::for_objects(heap_pods, 1000);
    // Heap per pod with `heap_pods` held (JSON made and dropped a chunk at a time).
    let h0 = ALLOC.allocated();
    let mut held: Vec<Arc<T>> = Vec::with_capacity(heap_pods);
    let mut decode_time = Duration::ZERO;
    for start in (0..heap_pods).step_by(10_000) {
        let jsons: Vec<Vec<u8>> = (start..(start + 10_000).min(heap_pods))
            .map(|i| pod_json(&shape, i, i as u64 + 1, i % shape.nodes))
            .collect();
        let t = Instant::now();
        for j in &jsons {
            held.push(Arc::new(make(j)));
        }
        decode_time += t.elapsed();
    }
    let h1 = ALLOC.allocated();
    f.heap_per_pod = (h1 - h0) as f64 / heap_pods as f64;
    f.decode_us = per(decode_time, heap_pods);
    drop(held);

    // A store of 20,000 pods with the scenario's indexes.
    let shape = Shape::for_objects(STORE_PODS, 1000);
    let (mut w, r) = StoreBuilder::new(ObjectAccess::<T>::of())
        .covering_index("owner", IndexFn::owner_uid(ObjectAccess::of()))
        .index(
            "node",
            IndexFn::new(move |p: &T| {
                hot(p)
                    .0
                    .filter(|n| !n.is_empty())
                    .map(std::borrow::Cow::Borrowed)
                    .into_iter()
                    .collect()
            }),
        )
        .build()
        .expect("distinct index names");
    let initial: Vec<Arc<T>> = (0..STORE_PODS)
        .map(|i| Arc::new(make(&pod_json(&shape, i, i as u64 + 1, i % shape.nodes))))
        .collect();
    let mut b = w.batch();
    for p in initial {
        b.upsert(p).expect("named");
    }
    b.commit();
    let plan = pods::update_plan(&shape, STORE_PODS, 7);
    let updates: Vec<Arc<T>> = plan
        .iter()
        .enumerate()
        .map(|(u, &(i, node))| {
            Arc::new(make(&pod_json(&shape, i, (STORE_PODS + u) as u64 + 1, node)))
        })
        .collect();
    let mut applies = Vec::new();
    let mut it = updates.into_iter().peekable();
    while it.peek().is_some() {
        let chunk: Vec<Arc<T>> = it.by_ref().take(1000).collect();
        let t = Instant::now();
        let mut b = w.batch();
        for p in chunk {
            b.upsert(p).expect("named");
        }
        b.commit();
        applies.push(t.elapsed().as_secs_f64() * 1e3);
    }
    f.apply_1000_ms = median(applies);
    let snap = r.snapshot();
    let mut owners = Vec::new();
    for k in 0..50 {
        let uid = pods::owner_uid(k % shape.owners);
        let t = Instant::now();
        let n: usize = snap.by_index_refs("owner", &uid).expect("index").into_iter().map(mat).sum();
        std::hint::black_box(n);
        owners.push(t.elapsed().as_secs_f64() * 1e6);
    }
    f.owner_1000_us = median(owners);
    let mut scans = Vec::new();
    for k in 0..20 {
        let node = pods::node_name(k);
        let t = Instant::now();
        let n = snap
            .list_refs()
            .into_iter()
            .filter(|p| {
                let (n, ph) = hot(p);
                n == Some(node.as_str()) && ph == Some("Running")
            })
            .count();
        std::hint::black_box(n);
        scans.push(t.elapsed().as_secs_f64() * 1e6);
    }
    f.scan_us = median(scans);
    println!(
        "| {name} | {:.1} | {:.0} | {:.2} | {:.1} | {:.0} |",
        f.decode_us, f.heap_per_pod, f.apply_1000_ms, f.owner_1000_us, f.scan_us
    );
    f
}

struct PlainPod(Pod);

impl Object for PlainPod {
    fn name(&self) -> Option<&str> {
        self.0.metadata.name.as_deref()
    }
    fn namespace(&self) -> Option<&str> {
        self.0.metadata.namespace.as_deref()
    }
    fn resource_version(&self) -> Option<&str> {
        self.0.metadata.resource_version.as_deref()
    }
    fn uid(&self) -> Option<&str> {
        self.0.metadata.uid.as_deref()
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.0.metadata.labels.as_ref()
    }
    fn owner_uids(&self) -> OwnerUids<'_> {
        self.0.metadata.owner_references.iter().flatten().map(|o| o.uid.as_str()).collect()
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut heap_pods = 200_000;
    let mut plain_pods = 20_000;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pods" => heap_pods = args.next().and_then(|v| v.parse().ok()).expect("--pods N"),
            "--plain-pods" => {
                plain_pods = args.next().and_then(|v| v.parse().ok()).expect("--plain-pods N")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let shape = Shape::for_objects(1, 1);
    println!(
        "realistic pod with managedFields: {} B as JSON; heap per pod with {heap_pods} pods held ({plain_pods} for plain, which grows linearly)\n",
        pod_json(&shape, 0, 1, 0).len()
    );
    println!(
        "| design | decode from JSON (us/pod) | heap per pod (B) | apply 1000 updates at 20k (ms) | owner lookup 1000 materialised (us) | hot-field scan 20k borrowed (us) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    run::<PlainPod>(
        "plain `Arc<Pod>`",
        plain_pods,
        &mut |j| PlainPod(serde_json::from_slice(j).expect("a pod")),
        &|p| Arc::clone(p).0.metadata.name.as_ref().map_or(0, |_| 1),
        |p| {
            (
                p.0.spec.as_ref().and_then(|s| s.node_name.as_deref()),
                p.0.status.as_ref().and_then(|s| s.phase.as_deref()),
            )
        },
    );
    {
        let mut interner = Interner::new();
        run::<CompactPod>(
            "A hash-consed (`CompactPod`)",
            heap_pods,
            &mut |j| CompactPod::decode(&mut interner, j).expect("a pod"),
            &|p| Arc::clone(p).name().map_or(0, |_| 1),
            |p| (p.node_name(), p.phase()),
        );
        let s = interner.stats();
        println!(
            "<!-- A: interner after the run: {} entries, {} sweeps dropped {} -->",
            s.entries(),
            s.sweeps,
            s.swept
        );
    }
    {
        let mut interner = Interner::new();
        let dict = std::cell::RefCell::new(Dict::default());
        run::<EncodedPod>(
            "B encoded, shared dictionary",
            heap_pods,
            &mut |j| decode_b(j, &mut interner, &mut dict.borrow_mut()),
            &|p| {
                // Materialised: a Pod a controller can read, decoded from the bytes.
                let d = dict.borrow();
                let v = decode(&mut &p.bytes[..], &d);
                let pod: Pod = serde_json::from_value(v).expect("a pod");
                Arc::new(pod).metadata.name.as_ref().map_or(0, |_| 1)
            },
            |p| (p.hot.node.as_deref(), p.hot.phase.as_deref()),
        );
        println!(
            "<!-- B: dictionary holds {} strings (it never forgets) -->",
            dict.borrow().strs.len()
        );
    }
    {
        let mut interner = Interner::new();
        run::<Projection>(
            "C projection (declared fields only)",
            heap_pods,
            &mut |j| decode_c(j, &mut interner),
            &|p| Arc::clone(p).hot.name.len().min(1),
            |p| (p.hot.node.as_deref(), p.hot.phase.as_deref()),
        );
    }
    // Objects that share nothing: every string, list and map unique.
    println!("\nall-unique objects (nothing to share):\n");
    println!("| design | heap per object (B) |");
    println!("|---|---:|");
    let unique = |i: usize| -> Vec<u8> {
        let mut v =
            serde_json::from_slice::<serde_json::Value>(&pod_json(&shape, 0, 1, 0)).expect("valid");
        // Every string made unique, except those the `Pod` type parses (versions, kinds,
        // timestamps, quantities).
        fn uniq(v: &mut serde_json::Value, i: usize, n: &mut usize) {
            match v {
                serde_json::Value::String(s) => {
                    *n += 1;
                    *s = format!("{s}-{i}-{n}");
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(|x| uniq(x, i, n)),
                serde_json::Value::Object(o) => {
                    for (k, x) in o.iter_mut() {
                        let parsed = ["apiVersion", "kind", "time", "cpu", "memory"]
                            .contains(&k.as_str())
                            || k.ends_with("Time")
                            || k.ends_with("At")
                            || k.ends_with("Timestamp");
                        if !parsed {
                            uniq(x, i, n);
                        }
                    }
                }
                _ => {}
            }
        }
        uniq(&mut v, i, &mut 0);
        serde_json::to_vec(&v).expect("encodes")
    };
    let n = 5000;
    let jsons: Vec<Vec<u8>> = (0..n).map(unique).collect();
    let h0 = ALLOC.allocated();
    let plain: Vec<Arc<Pod>> =
        jsons.iter().map(|j| Arc::new(serde_json::from_slice(j).expect("a pod"))).collect();
    let plain_bytes = (ALLOC.allocated() - h0) as f64 / n as f64;
    drop(plain);
    let mut interner = Interner::new();
    let h0 = ALLOC.allocated();
    let compact: Vec<Arc<CompactPod>> = jsons
        .iter()
        .map(|j| Arc::new(CompactPod::decode(&mut interner, j).expect("a pod")))
        .collect();
    let compact_bytes = (ALLOC.allocated() - h0) as f64 / n as f64;
    println!("| plain `Arc<Pod>` | {plain_bytes:.0} |");
    println!(
        "| A hash-consed | {compact_bytes:.0} ({:+.1} %) |",
        (compact_bytes / plain_bytes - 1.0) * 100.0
    );
    drop(compact);
}

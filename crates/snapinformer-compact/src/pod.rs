//! [`CompactPod`]: a pod as a shared compact tree plus the hot fields indexes and selectors read.

use std::{collections::BTreeMap, fmt, sync::Arc};

use k8s_openapi::api::core::v1::Pod;
use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, DeserializeSeed},
};
use snapinformer_store::{IndexFn, Object as StoreObject, ObjectAccess, OwnerUids};

use crate::{
    Error, Result,
    decode::{ValueSeed, decode_object},
    encode::encode_object,
    intern::Interner,
    value::{Array, Object, Str, Value},
};

/// A pod in compact form: the whole object as a hash-consed tree, with the fields that indexes,
/// selectors and keys read kept at hand.
///
/// - **What is shared**: every array and object below `metadata` (containers, volumes,
///   tolerations, affinity, owner references, annotations, managedFields entries, conditions,
///   container statuses) and every string longer than 22 bytes is one allocation per interner for
///   all pods that have it equal; the label map is shared the same way. A pod owns its root
///   object, its `metadata` object and whatever nobody else has (a StatefulSet pod's UID, IPs,
///   container IDs, its node-specific `spec`).
/// - **Hot fields**, read without walking the tree: name, namespace, UID, resourceVersion,
///   labels, `spec.nodeName`, `status.phase`.
/// - **The materialised form is `Arc<CompactPod>` itself**: the store, snapshots and handlers
///   hand it out by reference count like any other object. Typed parts are read with
///   [`get`](CompactPod::get) and the accessors, and decoded on request with
///   [`Value::decode`] or [`to_pod`](CompactPod::to_pod); the latter build a full
///   `k8s_openapi` object and cost about what decoding the pod's JSON costs.
/// - **Fidelity**: the tree is the object's JSON, value for value (an object's duplicate keys
///   keep their last value, as every JSON decoder does): [`to_json`](CompactPod::to_json)
///   equals `serde_json::to_value` of the pod it was decoded from.
// `repr(C)` keeps the fields in this order: a scan over many pods loads only the lines it
// reads, so the fields scans read come first and together. Behind the `Arc`'s two counts, node,
// phase and namespace fill the allocation's first cache line. They are interned shared strings
// (few distinct values, one copy each): reading one is a load, where an inline `Str` is checked
// for UTF-8 on every read.
#[derive(Clone)]
#[repr(C)]
pub struct CompactPod {
    node_name: Option<Arc<str>>,
    phase: Option<Arc<str>>,
    namespace: Option<Arc<str>>,
    labels: Option<Arc<BTreeMap<String, String>>>,
    name: Option<Str>,
    resource_version: Option<Str>,
    uid: Option<Str>,
    root: Object,
}

fn string_at(o: Option<&Object>, key: &str) -> Option<Str> {
    o?.get(key)?.as_string().cloned()
}

/// The string under `key`, interned (for hot fields with few distinct values).
fn shared_at(o: Option<&Object>, key: &str, interner: &mut Interner) -> Option<Arc<str>> {
    o?.get(key)?.as_str().map(|s| interner.shared_str(s))
}

impl CompactPod {
    /// A pod from its decoded tree (which must be a JSON object), interning the label map.
    pub fn from_value(root: Value, interner: &mut Interner) -> Result<CompactPod> {
        let Value::Object(root) = root else {
            return Err(Error::NotAnObject);
        };
        let meta = root.get("metadata").and_then(Value::as_object);
        let labels = meta.and_then(|m| m.get("labels")).and_then(Value::as_object).and_then(|l| {
            let map: Option<BTreeMap<String, String>> =
                l.iter().map(|(k, v)| Some((k.to_string(), v.as_str()?.to_owned()))).collect();
            map.map(|m| interner.labels(m))
        });
        let spec = root.get("spec").and_then(Value::as_object);
        let status = root.get("status").and_then(Value::as_object);
        Ok(CompactPod {
            node_name: shared_at(spec, "nodeName", interner),
            phase: shared_at(status, "phase", interner),
            namespace: shared_at(meta, "namespace", interner),
            labels,
            name: string_at(meta, "name"),
            resource_version: string_at(meta, "resourceVersion"),
            uid: string_at(meta, "uid"),
            root,
        })
    }

    /// Decodes a pod from JSON straight into compact form through `interner`.
    pub fn decode(interner: &mut Interner, json: &[u8]) -> Result<CompactPod> {
        let root = decode_object(interner, json)?;
        CompactPod::from_value(root, interner)
    }

    /// A `k8s_openapi` pod in compact form, encoded straight into the tree through `interner`
    /// (no JSON text is written): the same tree, sharing the same nodes, as
    /// [`decode`](CompactPod::decode) of the pod's JSON.
    pub fn from_pod(pod: &Pod, interner: &mut Interner) -> Result<CompactPod> {
        let root = encode_object(interner, pod)?;
        CompactPod::from_value(root, interner)
    }

    /// `metadata.name`.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// `metadata.namespace`.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_deref()
    }
    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }
    /// `metadata.labels` (shared between pods with equal labels). `None` if absent, or if some
    /// label value is not a string (then the tree still holds them as they came).
    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.labels.as_deref()
    }
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels()?.get(key).map(String::as_str)
    }
    /// `spec.nodeName`.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }
    /// `status.phase`.
    pub fn phase(&self) -> Option<&str> {
        self.phase.as_deref()
    }

    /// The whole object.
    pub fn root(&self) -> &Object {
        &self.root
    }
    /// `metadata`.
    pub fn metadata(&self) -> Option<&Object> {
        self.root.get("metadata")?.as_object()
    }
    /// `spec`.
    pub fn spec(&self) -> Option<&Object> {
        self.root.get("spec")?.as_object()
    }
    /// `status`.
    pub fn status(&self) -> Option<&Object> {
        self.root.get("status")?.as_object()
    }
    /// The value at `path` from the root (object keys), e.g. `["spec", "containers"]`.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        rest.iter().try_fold(self.root.get(first)?, |v, k| v.get(k))
    }
    /// `metadata.annotations[key]`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()?.get("annotations")?.get(key)?.as_str()
    }
    /// `metadata.ownerReferences` (shared between the pods of one owner).
    pub fn owner_references(&self) -> Option<&Array> {
        self.metadata()?.get("ownerReferences")?.as_array()
    }
    /// The UID of the owner reference with `controller: true`.
    pub fn controller_uid(&self) -> Option<&str> {
        self.owner_references()?
            .iter()
            .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?
            .get("uid")?
            .as_str()
    }
    /// `metadata.managedFields` (entries shared between pods whose entries are equal).
    pub fn managed_fields(&self) -> Option<&Array> {
        self.metadata()?.get("managedFields")?.as_array()
    }
    /// `spec.containers`.
    pub fn containers(&self) -> Option<&Array> {
        self.spec()?.get("containers")?.as_array()
    }

    /// Removes `metadata.<key>` (a transform's work: builds a new `metadata` object, which is
    /// the pod's own anyway). Hot fields read from `metadata` are updated.
    pub fn remove_metadata_field(&mut self, key: &str) {
        let Some(meta) = self.metadata() else { return };
        if meta.get(key).is_none() {
            return;
        }
        let meta = Object::new(meta.iter().filter(|(k, _)| &**k != key).cloned().collect());
        let root: Vec<_> = self
            .root
            .iter()
            .map(|(k, v)| {
                if &**k == "metadata" {
                    (k.clone(), Value::Object(meta.clone()))
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect();
        self.root = Object::new(root);
        let meta = Some(&meta);
        self.name = string_at(meta, "name");
        self.uid = string_at(meta, "uid");
        self.resource_version = string_at(meta, "resourceVersion");
        match key {
            "labels" => self.labels = None,
            "namespace" => self.namespace = None,
            _ => {}
        }
    }

    /// The pod as a `serde_json::Value` (a deep copy).
    pub fn to_json(&self) -> serde_json::Value {
        Value::Object(self.root.clone()).to_json()
    }

    /// The pod as a `k8s_openapi` `Pod`: decodes the whole tree, allocating every field (about
    /// the cost of decoding the pod's JSON). For occasional use, e.g. to hand a pod to code that
    /// needs the typed form; reads in a loop should use the accessors.
    pub fn to_pod(&self) -> Result<Pod> {
        Ok(serde_json::from_value(self.to_json())?)
    }

    /// The pod as JSON text.
    pub fn to_json_string(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

impl PartialEq for CompactPod {
    /// Equal when the objects are equal (the hot fields are read from the object).
    fn eq(&self, other: &CompactPod) -> bool {
        self.root == other.root
    }
}

impl fmt::Debug for CompactPod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactPod")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

impl Serialize for CompactPod {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.root.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CompactPod {
    /// Decodes through [`Interner::global`] (locked for the duration of this one object), so
    /// `kube` lists and watch events decode straight into compact form.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CompactPod, D::Error> {
        let mut interner = Interner::global().lock().unwrap_or_else(|e| e.into_inner());
        let root = ValueSeed::object(&mut interner).deserialize(d)?;
        CompactPod::from_value(root, &mut interner).map_err(de::Error::custom)
    }
}

impl StoreObject for CompactPod {
    fn name(&self) -> Option<&str> {
        CompactPod::name(self)
    }
    fn namespace(&self) -> Option<&str> {
        CompactPod::namespace(self)
    }
    fn resource_version(&self) -> Option<&str> {
        CompactPod::resource_version(self)
    }
    fn uid(&self) -> Option<&str> {
        CompactPod::uid(self)
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        CompactPod::labels(self)
    }
    fn owner_uids(&self) -> OwnerUids<'_> {
        self.owner_references()
            .map(|refs| {
                refs.iter()
                    .filter_map(|o| o.get("uid")?.as_str())
                    .filter(|u| !u.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The store accessors of [`CompactPod`].
pub fn access() -> ObjectAccess<CompactPod> {
    ObjectAccess::of()
}

/// The owner-UID index function (an index of keys in [`pods_compact`](crate::pods_compact), as in
/// the plain pod informer).
pub fn owner_uid_index() -> IndexFn<CompactPod> {
    IndexFn::owner_uid(access())
}

/// The `spec.nodeName` index function.
pub fn node_name_index() -> IndexFn<CompactPod> {
    IndexFn::field(CompactPod::node_name)
}

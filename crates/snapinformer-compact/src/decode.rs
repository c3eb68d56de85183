//! Decoding straight into the compact tree: a serde `DeserializeSeed` that interns every node as
//! it is read, so no intermediate `serde_json::Value` or `k8s_openapi` object is built.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::{
    intern::Interner,
    value::{Array, Key, Object, Value},
};

/// Deepest nesting decoded (serde_json stops at 128 levels on its own; this bound also holds
/// for other deserializers).
pub const MAX_DEPTH: usize = 128;

/// Where a value sits in the object being built, and so whether its array or object node is
/// interned: nodes at depth `< unique_depth`, and a whole object's `metadata`, are built
/// unshared. The decoder and the [`encode`](crate::encode)r both follow it, so that they build
/// the same tree.
#[derive(Clone, Copy)]
pub(crate) struct Place {
    depth: usize,
    unique_depth: usize,
    /// The object keys on the path to this value, for `unique_depth` decisions (only the first
    /// level matters: `metadata` under the root).
    in_metadata: bool,
}

impl Place {
    /// The root of a whole Kubernetes object: the root object and its `metadata` are not
    /// interned, everything below is.
    pub(crate) const OBJECT: Place = Place { depth: 0, unique_depth: 1, in_metadata: false };
    /// The root of a value that is not a whole object: every node is interned.
    pub(crate) const VALUE: Place = Place { depth: 0, unique_depth: 0, in_metadata: false };

    /// An element of an array here.
    pub(crate) fn element(self) -> Place {
        Place { depth: self.depth + 1, in_metadata: false, ..self }
    }

    /// The value under `key` of an object here.
    pub(crate) fn member(self, key: &str) -> Place {
        let in_metadata = self.depth == 0 && self.unique_depth > 0 && key == "metadata";
        Place { depth: self.depth + 1, in_metadata, ..self }
    }

    /// Deeper than [`MAX_DEPTH`].
    pub(crate) fn too_deep(self) -> bool {
        self.depth > MAX_DEPTH
    }

    fn unique(self) -> bool {
        self.depth < self.unique_depth || (self.depth == 1 && self.in_metadata)
    }

    /// An array at this place of `items`: unshared, or interned (as
    /// [`Place::finish_array`]).
    pub(crate) fn array(self, interner: &mut Interner, items: Vec<Value>) -> Array {
        interner.array_of(items, !self.unique())
    }

    /// An object at this place of `entries`: unshared, or interned (as
    /// [`Place::finish_object`]).
    pub(crate) fn object(self, interner: &mut Interner, entries: Vec<(Key, Value)>) -> Object {
        interner.object_of(entries, !self.unique())
    }

    /// Called where a value at this place starts: at the root, nothing is under construction.
    pub(crate) fn start(self, interner: &mut Interner) {
        if self.depth == 0 {
            interner.start_value();
        }
    }

    /// The array at this place of the elements pushed on `interner` since `mark`.
    pub(crate) fn finish_array(self, interner: &mut Interner, mark: usize) -> Array {
        interner.finish_array(mark, !self.unique())
    }

    /// The object at this place of the entries pushed on `interner` since `mark`.
    pub(crate) fn finish_object(self, interner: &mut Interner, mark: usize) -> Object {
        interner.finish_object(mark, !self.unique())
    }
}

/// Decodes one JSON value through an [`Interner`].
///
/// Nodes at depth `< unique_depth` are built without interning: they are expected to be unique
/// per object (a pod's root and its `metadata`, which carry the name, UID and resource version),
/// so looking them up would only cost time and table space.
pub struct ValueSeed<'i> {
    interner: &'i mut Interner,
    at: Place,
}

impl<'i> ValueSeed<'i> {
    /// A seed for a whole Kubernetes object: the root object and its `metadata` are not
    /// interned, everything below is.
    pub fn object(interner: &'i mut Interner) -> Self {
        ValueSeed { interner, at: Place::OBJECT }
    }

    /// A seed that interns every node (for values that are not whole objects).
    pub fn value(interner: &'i mut Interner) -> Self {
        ValueSeed { interner, at: Place::VALUE }
    }

    fn child(&mut self, at: Place) -> ValueSeed<'_> {
        ValueSeed { interner: self.interner, at }
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        if self.at.too_deep() {
            return Err(de::Error::custom("value nested too deeply"));
        }
        self.at.start(self.interner);
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(if v >= 0 { Value::U64(v as u64) } else { Value::I64(v) })
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::F64(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(self.interner.str(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mark = self.interner.items_mark();
        let element = self.at.element();
        while let Some(v) = seq.next_element_seed(self.child(element))? {
            self.interner.push_item(v);
        }
        Ok(Value::Array(self.at.finish_array(self.interner, mark)))
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mark = self.interner.entries_mark();
        while let Some(k) = map.next_key_seed(KeySeed(self.interner))? {
            let member = self.at.member(&k);
            let v = map.next_value_seed(self.child(member))?;
            self.interner.push_entry(k, v);
        }
        Ok(Value::Object(self.at.finish_object(self.interner, mark)))
    }
}

/// Decodes an object key into an interned [`Key`].
struct KeySeed<'i>(&'i mut Interner);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(self.0.key(v))
    }
}

/// Decodes one JSON document (a whole Kubernetes object: its root and `metadata` are not
/// interned) from `bytes`.
pub fn decode_object(interner: &mut Interner, bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = ValueSeed::object(interner).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Decodes one JSON value from `bytes`, interning every node.
pub fn decode_value(interner: &mut Interner, bytes: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = ValueSeed::value(interner).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

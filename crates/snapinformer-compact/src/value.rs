//! The compact tree: a JSON value whose strings, arrays and objects are shared `Arc`s.

use std::{fmt, ops::Deref, sync::Arc};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// Longest string kept inline in a [`Str`] (no allocation, not interned).
pub const INLINE_MAX: usize = 22;

/// A string: inline when short (at most [`INLINE_MAX`] bytes), else a shared `Arc<str>`.
///
/// 24 bytes. Strings that come out of an [`Interner`](crate::Interner) are canonical: the same
/// long text is the same allocation, so two interned strings are equal exactly when their
/// pointers are.
#[derive(Clone)]
pub struct Str(StrRepr);

#[derive(Clone)]
enum StrRepr {
    Inline { len: u8, buf: [u8; INLINE_MAX] },
    Shared(Arc<str>),
}

impl Str {
    /// A string that is inline if it fits, else a new (not interned) shared allocation.
    pub fn new(s: &str) -> Str {
        Str::inline(s).unwrap_or_else(|| Str(StrRepr::Shared(Arc::from(s))))
    }

    /// The string inline, or `None` if it is longer than [`INLINE_MAX`] bytes.
    pub(crate) fn inline(s: &str) -> Option<Str> {
        if s.len() > INLINE_MAX {
            return None;
        }
        let mut buf = [0u8; INLINE_MAX];
        buf[..s.len()].copy_from_slice(s.as_bytes());
        Some(Str(StrRepr::Inline { len: s.len() as u8, buf }))
    }

    /// A shared string (the interner's).
    pub(crate) fn shared(s: Arc<str>) -> Str {
        Str(StrRepr::Shared(s))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            StrRepr::Inline { len, buf } => {
                // Only ever built from a `&str` cut at its own length, so always valid UTF-8.
                std::str::from_utf8(&buf[..usize::from(*len)]).unwrap_or_default()
            }
            StrRepr::Shared(s) => s,
        }
    }

    /// The text's bytes, without the UTF-8 check [`as_str`](Str::as_str) makes on an inline
    /// string (for hashing and comparing in the interner).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            StrRepr::Inline { len, buf } => &buf[..usize::from(*len)],
            StrRepr::Shared(s) => s.as_bytes(),
        }
    }

    /// The shared allocation, if the string is not inline.
    pub(crate) fn arc(&self) -> Option<&Arc<str>> {
        match &self.0 {
            StrRepr::Shared(s) => Some(s),
            StrRepr::Inline { .. } => None,
        }
    }

    /// Whether the text is stored inline (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, StrRepr::Inline { .. })
    }
}

impl Deref for Str {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        match (&self.0, &other.0) {
            (StrRepr::Shared(a), StrRepr::Shared(b)) if Arc::ptr_eq(a, b) => true,
            _ => self.as_str() == other.as_str(),
        }
    }
}
impl Eq for Str {}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object key: a shared string (keys repeat in every object, so each distinct key is stored
/// once per interner).
pub type Key = Arc<str>;

/// A JSON value in compact form.
///
/// 24 bytes. Arrays and objects are `Arc`-shared slices; cloning any value never copies more
/// than 24 bytes. Two values are equal when they hold the same JSON (numbers compare by their
/// JSON kind and value; object entries in order).
#[derive(Clone)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer.
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// Any other number.
    F64(f64),
    /// A string.
    String(Str),
    /// An array.
    Array(Array),
    /// An object (entries in the order they were decoded; keys are distinct).
    Object(Object),
}

/// A shared array.
#[derive(Clone)]
pub struct Array(pub(crate) Arc<[Value]>);

/// A shared object: `(key, value)` entries in decoding order, keys distinct.
#[derive(Clone)]
pub struct Object(pub(crate) Arc<[(Key, Value)]>);

impl Deref for Array {
    type Target = [Value];
    fn deref(&self) -> &[Value] {
        &self.0
    }
}

impl Deref for Object {
    type Target = [(Key, Value)];
    fn deref(&self) -> &[(Key, Value)] {
        &self.0
    }
}

impl Array {
    /// Whether `self` and `other` are the same shared allocation (then they are equal).
    pub fn ptr_eq(&self, other: &Array) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// A new, unshared array.
    pub fn new(items: Vec<Value>) -> Array {
        Array(items.into())
    }
}

impl Object {
    /// The value under `key` (a linear scan: objects are small).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| v)
    }
    /// Whether `self` and `other` are the same shared allocation (then they are equal).
    pub fn ptr_eq(&self, other: &Object) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    /// A new, unshared object. Later entries with a key seen before replace the earlier one
    /// (as JSON decoders do), so keys stay distinct.
    pub fn new(entries: Vec<(Key, Value)>) -> Object {
        Object(dedup_keys(entries).into())
    }
}

/// Whether no key appears twice in `entries`.
pub(crate) fn keys_distinct(entries: &[(Key, Value)]) -> bool {
    if entries.len() < 2 {
        true
    } else if entries.len() <= 16 {
        entries.iter().enumerate().all(|(i, (k, _))| entries[..i].iter().all(|(j, _)| j != k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        entries.iter().all(|(k, _)| seen.insert(k.clone()))
    }
}

/// Keeps the last entry of every key, at the position of its first occurrence.
pub(crate) fn dedup_keys(mut entries: Vec<(Key, Value)>) -> Vec<(Key, Value)> {
    if keys_distinct(&entries) {
        return entries;
    }
    let mut out: Vec<(Key, Value)> = Vec::with_capacity(entries.len());
    let mut at: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    for (k, v) in entries.drain(..) {
        match at.get(&k) {
            Some(&i) => out[i].1 = v,
            None => {
                at.insert(k.clone(), out.len());
                out.push((k, v));
            }
        }
    }
    out
}

impl Value {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        }
    }
    /// The string value, if this is one.
    pub fn as_string(&self) -> Option<&Str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }
    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The integer, if this is one that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(n) => Some(*n),
            Value::U64(n) => i64::try_from(*n).ok(),
            _ => None,
        }
    }
    /// The member `key` of an object (`None` for other values or a missing key).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }
    /// The value at `path` (object keys), `None` if any step is missing.
    pub fn pointer(&self, path: &[&str]) -> Option<&Value> {
        path.iter().try_fold(self, |v, k| v.get(k))
    }

    /// The value as a `serde_json::Value` (a deep copy: every string and node is allocated).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::U64(n) => serde_json::Value::from(*n),
            Value::I64(n) => serde_json::Value::from(*n),
            Value::F64(n) => {
                serde_json::Number::from_f64(*n).map_or(serde_json::Value::Null, Into::into)
            }
            Value::String(s) => serde_json::Value::String(s.as_str().to_owned()),
            Value::Array(a) => serde_json::Value::Array(a.iter().map(Value::to_json).collect()),
            Value::Object(o) => serde_json::Value::Object(
                o.iter().map(|(k, v)| (k.to_string(), v.to_json())).collect(),
            ),
        }
    }

    /// Decodes this value into `T` (for example a `k8s_openapi` type) through `serde_json`:
    /// allocates the whole typed tree, so it costs about what decoding the JSON costs.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_value(self.to_json())
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::U64(a), Value::U64(b)) => a == b,
            (Value::I64(a), Value::I64(b)) => a == b,
            (Value::F64(a), Value::F64(b)) => a == b,
            (Value::String(a), Value::String(b)) => a == b,
            (Value::Array(a), Value::Array(b)) => a.ptr_eq(b) || a[..] == b[..],
            (Value::Object(a), Value::Object(b)) => a.ptr_eq(b) || a[..] == b[..],
            _ => false,
        }
    }
}

impl PartialEq for Array {
    fn eq(&self, other: &Array) -> bool {
        self.ptr_eq(other) || self[..] == other[..]
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Object) -> bool {
        self.ptr_eq(other) || self[..] == other[..]
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::U64(n) => write!(f, "{n}"),
            Value::I64(n) => write!(f, "{n}"),
            Value::F64(n) => write!(f, "{n}"),
            Value::String(s) => fmt::Debug::fmt(s, f),
            Value::Array(a) => fmt::Debug::fmt(a, f),
            Value::Object(o) => fmt::Debug::fmt(o, f),
        }
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter().map(|(k, v)| (k, v))).finish()
    }
}

impl Serialize for Str {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::U64(n) => s.serialize_u64(*n),
            Value::I64(n) => s.serialize_i64(*n),
            Value::F64(n) => s.serialize_f64(*n),
            Value::String(v) => s.serialize_str(v.as_str()),
            Value::Array(a) => a.serialize(s),
            Value::Object(o) => o.serialize(s),
        }
    }
}

impl Serialize for Array {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for v in self.iter() {
            seq.serialize_element(v)?;
        }
        seq.end()
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_strings_are_24_bytes() {
        assert_eq!(std::mem::size_of::<Str>(), 24);
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }

    #[test]
    fn short_strings_are_inline_and_long_ones_shared() {
        let short = "x".repeat(INLINE_MAX);
        let long = "y".repeat(INLINE_MAX + 1);
        assert!(Str::new(&short).is_inline());
        assert!(!Str::new(&long).is_inline());
        assert_eq!(Str::new(&short).as_str(), short);
        assert_eq!(Str::new(&long).as_str(), long);
        assert_eq!(Str::new("é✓"), *"é✓");
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_at_the_first_position() {
        let k = |s: &str| -> Key { Arc::from(s) };
        let o = Object::new(vec![
            (k("a"), Value::U64(1)),
            (k("b"), Value::U64(2)),
            (k("a"), Value::U64(3)),
        ]);
        assert_eq!(o.len(), 2);
        assert_eq!(o.get("a"), Some(&Value::U64(3)));
        assert_eq!(&*o[0].0, "a");
    }
}

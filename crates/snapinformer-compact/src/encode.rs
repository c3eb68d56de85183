//! Encoding straight into the compact tree: a serde `Serializer` that turns any `Serialize` value
//! (a `k8s_openapi` object, for one) into the interned tree its JSON would decode to, without
//! writing the JSON text and parsing it again.
//!
//! The tree is the one [`decode`](crate::decode) builds from `serde_json::to_vec` of the same
//! value: the same JSON kinds (`serde_json`'s rules for numbers, bytes, enums and map keys), the
//! same entry order, the same nodes interned (and so shared with what the decoder built through
//! the same interner). The fuzz target and its smoke test check this against the JSON round trip.
//! One difference by design: a float is kept as the exact `f64` it was, where JSON text and
//! `serde_json`'s default float parsing may move it by one unit in the last place.

use std::fmt::Display;

use serde::ser::{self, Serialize};

use crate::{
    decode::Place,
    intern::Interner,
    value::{Key, Value},
};

/// The error of encoding: what `serde_json` would also refuse (a map key that is not a string,
/// number, boolean or character, an integer beyond 64 bits, nesting deeper than
/// [`MAX_DEPTH`](crate::decode::MAX_DEPTH)), or an error the value's own `Serialize` raised.
pub type Error = serde_json::Error;

/// Encodes one value into the compact tree through an [`Interner`], with the same interning
/// rules as [`ValueSeed`](crate::decode::ValueSeed): a whole object's root and `metadata` are
/// built without interning, everything else is interned.
pub struct ValueSerializer<'i> {
    interner: &'i mut Interner,
    at: Place,
}

impl<'i> ValueSerializer<'i> {
    /// A serializer for a whole Kubernetes object: the root object and its `metadata` are not
    /// interned, everything below is.
    pub fn object(interner: &'i mut Interner) -> Self {
        ValueSerializer { interner, at: Place::OBJECT }
    }

    /// A serializer that interns every node (for values that are not whole objects).
    pub fn value(interner: &'i mut Interner) -> Self {
        ValueSerializer { interner, at: Place::VALUE }
    }

    fn child(&mut self, at: Place) -> ValueSerializer<'_> {
        ValueSerializer { interner: self.interner, at }
    }

    fn enter(&mut self) -> Result<(), Error> {
        if self.at.too_deep() {
            return Err(ser::Error::custom("value nested too deeply"));
        }
        self.at.start(self.interner);
        Ok(())
    }

    /// `{variant: value}`, as `serde_json` writes an enum variant with data.
    fn variant(
        mut self,
        variant: &'static str,
        value: impl FnOnce(ValueSerializer<'_>) -> Result<Value, Error>,
    ) -> Result<Value, Error> {
        self.enter()?;
        let key = self.interner.key(variant);
        let v = value(self.child(self.at.member(variant)))?;
        Ok(Value::Object(self.at.object(self.interner, vec![(key, v)])))
    }

    /// The encoder of an enum variant's data, `{variant: ...}`: the interner goes to the inner
    /// encoder `inner` makes for the value under `variant`, and comes back when it finishes.
    fn into_variant<E>(
        mut self,
        variant: &'static str,
        inner: impl FnOnce(ValueSerializer<'i>) -> Result<E, Error>,
    ) -> Result<VariantEncoder<E>, Error> {
        self.enter()?;
        let key = self.interner.key(variant);
        let at = self.at.member(variant);
        let inner = inner(ValueSerializer { interner: self.interner, at })?;
        Ok(VariantEncoder { outer: self.at, key, inner })
    }
}

/// Encodes a whole Kubernetes object (its root and `metadata` are not interned).
pub fn encode_object<T: Serialize + ?Sized>(
    interner: &mut Interner,
    value: &T,
) -> Result<Value, Error> {
    value.serialize(ValueSerializer::object(interner))
}

/// Encodes one value, interning every node.
pub fn encode_value<T: Serialize + ?Sized>(
    interner: &mut Interner,
    value: &T,
) -> Result<Value, Error> {
    value.serialize(ValueSerializer::value(interner))
}

impl<'i> ser::Serializer for ValueSerializer<'i> {
    type Ok = Value;
    type Error = Error;
    type SerializeSeq = SeqEncoder<'i>;
    type SerializeTuple = SeqEncoder<'i>;
    type SerializeTupleStruct = SeqEncoder<'i>;
    type SerializeTupleVariant = VariantEncoder<SeqEncoder<'i>>;
    type SerializeMap = MapEncoder<'i>;
    type SerializeStruct = MapEncoder<'i>;
    type SerializeStructVariant = VariantEncoder<MapEncoder<'i>>;

    fn serialize_bool(self, v: bool) -> Result<Value, Error> {
        Ok(Value::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Value, Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<Value, Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<Value, Error> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<Value, Error> {
        // JSON has one kind of integer; the decoder reads a non-negative one as unsigned.
        Ok(u64::try_from(v).map_or(Value::I64(v), Value::U64))
    }
    fn serialize_i128(self, v: i128) -> Result<Value, Error> {
        if let Ok(v) = u64::try_from(v) {
            Ok(Value::U64(v))
        } else if let Ok(v) = i64::try_from(v) {
            Ok(Value::I64(v))
        } else {
            Err(ser::Error::custom("integer out of range for a 64-bit JSON number"))
        }
    }
    fn serialize_u8(self, v: u8) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, Error> {
        Ok(Value::U64(v))
    }
    fn serialize_u128(self, v: u128) -> Result<Value, Error> {
        u64::try_from(v)
            .map(Value::U64)
            .map_err(|_| ser::Error::custom("integer out of range for a 64-bit JSON number"))
    }
    fn serialize_f32(self, v: f32) -> Result<Value, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<Value, Error> {
        // serde_json writes a float that is not finite as `null`.
        Ok(if v.is_finite() { Value::F64(v) } else { Value::Null })
    }
    fn serialize_char(self, v: char) -> Result<Value, Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<Value, Error> {
        Ok(Value::String(self.interner.str(v)))
    }
    fn serialize_bytes(mut self, v: &[u8]) -> Result<Value, Error> {
        // serde_json writes bytes as an array of numbers.
        self.enter()?;
        let items = v.iter().map(|&b| Value::U64(b.into())).collect();
        Ok(Value::Array(self.at.array(self.interner, items)))
    }
    fn serialize_none(self) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, Error> {
        Ok(Value::Null)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Value, Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Value, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, Error> {
        self.variant(variant, |s| value.serialize(s))
    }
    fn serialize_seq(mut self, _len: Option<usize>) -> Result<SeqEncoder<'i>, Error> {
        self.enter()?;
        Ok(SeqEncoder { mark: self.interner.items_mark(), at: self })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqEncoder<'i>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqEncoder<'i>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantEncoder<SeqEncoder<'i>>, Error> {
        self.into_variant(variant, |s| s.serialize_seq(Some(len)))
    }
    fn serialize_map(mut self, _len: Option<usize>) -> Result<MapEncoder<'i>, Error> {
        self.enter()?;
        Ok(MapEncoder { mark: self.interner.entries_mark(), key: None, at: self })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<MapEncoder<'i>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantEncoder<MapEncoder<'i>>, Error> {
        self.into_variant(variant, |s| s.serialize_map(Some(len)))
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<Value, Error> {
        self.serialize_str(&value.to_string())
    }
}

/// Builds an array from the elements it is given (kept on the interner's stack of elements
/// until the end).
pub struct SeqEncoder<'i> {
    at: ValueSerializer<'i>,
    /// Where this array's elements start on the stack.
    mark: usize,
}

impl<'i> SeqEncoder<'i> {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let element = self.at.at.element();
        let v = value.serialize(self.at.child(element))?;
        self.at.interner.push_item(v);
        Ok(())
    }
    fn finish(self) -> (Value, ValueSerializer<'i>) {
        let v = Value::Array(self.at.at.finish_array(self.at.interner, self.mark));
        (v, self.at)
    }
}

/// `SerializeSeq`, `SerializeTuple` and `SerializeTupleStruct` for [`SeqEncoder`]: each
/// element is pushed, and the end builds the array.
macro_rules! seq_encoder {
    ($($trait_:ident::$method:ident),* $(,)?) => {$(
        impl ser::$trait_ for SeqEncoder<'_> {
            type Ok = Value;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.push(value)
            }
            fn end(self) -> Result<Value, Error> {
                Ok(self.finish().0)
            }
        }
    )*};
}

seq_encoder!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
);

/// Builds an object from the entries (or struct fields) it is given (kept on the interner's
/// stack of entries until the end).
pub struct MapEncoder<'i> {
    at: ValueSerializer<'i>,
    /// Where this object's entries start on the stack.
    mark: usize,
    /// The key given by `serialize_key`, waiting for its value.
    key: Option<Key>,
}

impl<'i> MapEncoder<'i> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        let k = self.at.interner.static_key(key);
        let member = self.at.at.member(key);
        let v = value.serialize(self.at.child(member))?;
        self.at.interner.push_entry(k, v);
        Ok(())
    }
    fn finish(self) -> (Value, ValueSerializer<'i>) {
        let v = Value::Object(self.at.at.finish_object(self.at.interner, self.mark));
        (v, self.at)
    }
}

impl ser::SerializeMap for MapEncoder<'_> {
    type Ok = Value;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let text = key.serialize(KeyEncoder)?;
        self.key = Some(self.at.interner.key(&text));
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let Some(k) = self.key.take() else {
            return Err(ser::Error::custom("a map value was given before its key"));
        };
        let member = self.at.at.member(&k);
        let v = value.serialize(self.at.child(member))?;
        self.at.interner.push_entry(k, v);
        Ok(())
    }
    fn end(self) -> Result<Value, Error> {
        Ok(self.finish().0)
    }
}

impl ser::SerializeStruct for MapEncoder<'_> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(self.finish().0)
    }
}

/// Builds `{variant: [...]}` or `{variant: {...}}`, as `serde_json` writes an enum's tuple and
/// struct variants.
pub struct VariantEncoder<E> {
    outer: Place,
    key: Key,
    inner: E,
}

impl ser::SerializeTupleVariant for VariantEncoder<SeqEncoder<'_>> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.inner.push(value)
    }
    fn end(self) -> Result<Value, Error> {
        let (v, at) = self.inner.finish();
        Ok(Value::Object(self.outer.object(at.interner, vec![(self.key, v)])))
    }
}

impl ser::SerializeStructVariant for VariantEncoder<MapEncoder<'_>> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.inner.field(key, value)
    }
    fn end(self) -> Result<Value, Error> {
        let (v, at) = self.inner.finish();
        Ok(Value::Object(self.outer.object(at.interner, vec![(self.key, v)])))
    }
}

/// Turns a map key into the text of a JSON object key, as `serde_json` does: strings and
/// characters as they are, integers, finite floats and booleans as their text, unit variants by
/// name; anything else is an error.
struct KeyEncoder;

/// Key serializer methods that write the key's `Display` text (as `serde_json` does for these).
macro_rules! key_as_text {
    ($($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method(self, v: $ty) -> Result<String, Error> {
            Ok(v.to_string())
        }
    )*};
}

fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

impl ser::Serializer for KeyEncoder {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = ser::Impossible<String, Error>;
    type SerializeTuple = ser::Impossible<String, Error>;
    type SerializeTupleStruct = ser::Impossible<String, Error>;
    type SerializeTupleVariant = ser::Impossible<String, Error>;
    type SerializeMap = ser::Impossible<String, Error>;
    type SerializeStruct = ser::Impossible<String, Error>;
    type SerializeStructVariant = ser::Impossible<String, Error>;

    key_as_text!(
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128,
        serialize_char: char,
    );
    fn serialize_f32(self, v: f32) -> Result<String, Error> {
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<String, Error> {
        // A finite float as the text serde_json writes for it.
        if v.is_finite() {
            serde_json::to_string(&v)
        } else {
            Err(ser::Error::custom("float key must be finite"))
        }
    }
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_owned())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::*;
    use crate::decode::{MAX_DEPTH, decode_object, decode_value};

    #[test]
    fn a_value_that_fails_half_way_holds_nothing_once_the_next_one_starts() {
        const LONG: &str = "registry.example.com/team/app:1.2.3-long";
        struct Refused;
        impl Serialize for Refused {
            fn serialize<S: ser::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(ser::Error::custom("refused"))
            }
        }
        let mut i = Interner::new();
        let held = i.str(LONG);
        let count = || std::sync::Arc::strong_count(held.arc().expect("a long string is shared"));

        // Two elements are on the stack when the third fails.
        assert!(encode_value(&mut i, &(LONG, LONG, Refused)).is_err());
        assert_eq!((i.items_mark(), count()), (2, 4));
        let next = encode_value(&mut i, &[1, 2]).expect("encodes");
        assert_eq!((i.items_mark(), i.entries_mark(), count()), (0, 0, 2));
        drop(next);

        let cut = format!(r#"{{"b": 1, "a": ["{LONG}", "{LONG}", tru"#);
        assert!(decode_value(&mut i, cut.as_bytes()).is_err(), "the JSON is cut off");
        assert_eq!((i.items_mark(), i.entries_mark(), count()), (2, 1, 4));
        decode_object(&mut i, b"{}").expect("decodes");
        assert_eq!((i.items_mark(), i.entries_mark(), count()), (0, 0, 2));
    }

    /// `value` encoded directly and through JSON text, with one interner.
    fn both<T: Serialize>(value: &T) -> (Value, Value) {
        let mut interner = Interner::new();
        let direct = encode_value(&mut interner, value).expect("encodes");
        let text = serde_json::to_vec(value).expect("serde_json encodes it");
        let decoded = decode_value(&mut interner, &text).expect("its JSON decodes");
        (direct, decoded)
    }

    #[derive(Serialize)]
    enum Shape {
        Empty,
        Circle(f64),
        Pair(u8, i32),
        Rect { w: u32, h: u32 },
    }

    #[derive(Serialize)]
    struct Wrapper(String);

    #[derive(Serialize)]
    struct Everything {
        unit: (),
        yes: bool,
        small: i8,
        negative: i64,
        big: u64,
        huge: i128,
        ratio: f32,
        not_a_number: f64,
        letter: char,
        name: Wrapper,
        maybe: Option<u16>,
        nothing: Option<u16>,
        #[serde(with = "as_bytes")]
        bytes: Vec<u8>,
        shapes: Vec<Shape>,
        by_number: BTreeMap<i32, &'static str>,
        by_flag: BTreeMap<bool, u8>,
        by_char: BTreeMap<char, u8>,
        tuple: (u8, &'static str),
    }

    /// Serializes a `Vec<u8>` with `serialize_bytes` (serde derives it as a sequence).
    mod as_bytes {
        pub(super) fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(v)
        }
    }

    #[test]
    fn every_serde_kind_encodes_as_its_json_decodes() {
        let value = Everything {
            unit: (),
            yes: true,
            small: -3,
            negative: -70_000_000_000,
            big: u64::MAX,
            huge: 12,
            ratio: 0.5,
            not_a_number: f64::NAN,
            letter: 'é',
            name: Wrapper("a string longer than twenty-two bytes".into()),
            maybe: Some(7),
            nothing: None,
            bytes: vec![0, 1, 255],
            shapes: vec![
                Shape::Empty,
                Shape::Circle(2.5),
                Shape::Pair(1, -1),
                Shape::Rect { w: 3, h: 4 },
            ],
            by_number: [(-1, "minus one"), (10, "ten")].into_iter().collect(),
            by_flag: [(false, 0), (true, 1)].into_iter().collect(),
            by_char: [('x', 1)].into_iter().collect(),
            tuple: (9, "nine"),
        };
        let (direct, decoded) = both(&value);
        assert_eq!(direct, decoded);
        assert_eq!(direct.to_json(), serde_json::to_value(&value).unwrap());
        // Interned through one table, equal nodes are the same allocation.
        let shapes = |v: &Value| v.get("shapes").and_then(Value::as_array).cloned().unwrap();
        assert!(shapes(&direct).ptr_eq(&shapes(&decoded)));
    }

    #[test]
    fn keys_serde_json_refuses_are_refused() {
        let mut interner = Interner::new();
        let by_list: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into_iter().collect();
        let err = encode_value(&mut interner, &by_list).unwrap_err();
        assert!(err.to_string().contains("key must be a string"), "{err}");
        assert!(serde_json::to_vec(&by_list).is_err());
        let by_unit: BTreeMap<(), u8> = [((), 1)].into_iter().collect();
        assert!(encode_value(&mut interner, &by_unit).is_err());
        assert!(encode_value(&mut interner, &u128::MAX).is_err());
        assert!(encode_value(&mut interner, &i128::MIN).is_err());
    }

    #[test]
    fn float_keys_are_written_as_serde_json_writes_them() {
        /// A map from each float to its position (a std map cannot key by floats).
        struct FloatKeys(&'static [f64]);
        impl Serialize for FloatKeys {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_map(self.0.iter().enumerate().map(|(i, k)| (k, i)))
            }
        }
        let (direct, decoded) = both(&FloatKeys(&[1.5, 1e21]));
        assert_eq!(direct, decoded);
        let mut interner = Interner::new();
        assert!(encode_value(&mut interner, &FloatKeys(&[f64::NAN])).is_err());
    }

    #[test]
    fn an_object_keeps_its_root_and_metadata_unshared_and_shares_the_rest() {
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "a", "labels": {"app": "web"}, "ownerReferences": [{"uid": "u"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}
        });
        let mut interner = Interner::new();
        let direct = encode_object(&mut interner, &pod).unwrap();
        let text = serde_json::to_vec(&pod).unwrap();
        let decoded = decode_object(&mut interner, &text).unwrap();
        assert_eq!(direct, decoded);
        let at = |v: &Value, k: &str| v.get(k).and_then(Value::as_object).cloned().unwrap();
        assert!(!direct.as_object().unwrap().ptr_eq(decoded.as_object().unwrap()));
        assert!(!at(&direct, "metadata").ptr_eq(&at(&decoded, "metadata")));
        assert!(at(&direct, "spec").ptr_eq(&at(&decoded, "spec")));
        let meta_labels = |v: &Value| {
            v.pointer(&["metadata", "labels"]).and_then(Value::as_object).cloned().unwrap()
        };
        assert!(meta_labels(&direct).ptr_eq(&meta_labels(&decoded)));
    }

    #[test]
    fn nesting_deeper_than_the_decoder_allows_is_refused() {
        let mut deep = serde_json::Value::Null;
        for _ in 0..(MAX_DEPTH + 2) {
            deep = serde_json::Value::Array(vec![deep]);
        }
        let mut interner = Interner::new();
        let err = encode_value(&mut interner, &deep).unwrap_err();
        assert!(err.to_string().contains("nested too deeply"), "{err}");
    }
}

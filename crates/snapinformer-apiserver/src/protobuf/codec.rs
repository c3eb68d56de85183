//! JSON to Kubernetes protobuf and back, driven by the generated schema.
//!
//! Kubernetes' protobuf encoding is proto2 with field names equal to the JSON names, plus a few
//! messages whose JSON form is not an object: `Time` and `MicroTime` (an RFC 3339 string),
//! `Duration` (a Go duration string), `Quantity` (a string), `IntOrString` (a number or a
//! string), `RawExtension` and `FieldsV1` (embedded JSON). Objects travel in an envelope: the
//! bytes `k8s\0` and a `runtime.Unknown` holding the `apiVersion`, the `kind` and the message.
//!
//! Decoding drops what Go's JSON encoding would omit and a client cannot have meant: empty
//! strings of optional fields (Go's protobuf encoder writes every non-pointer string, set or
//! not) and the zero `Time` (`0001-01-01T00:00:00Z`, which is `null` in JSON). Zero numbers and
//! `false` are kept: some of them are set pointers (`replicas: 0`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

use super::schema_types::{Label, Ty, message};

/// The 4-byte prefix of every Kubernetes protobuf object.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1";
const QUANTITY: &str = "k8s.io.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
/// Seconds of Go's zero `time.Time` since the Unix epoch.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// Why a body could not be transcoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CodecError {
    /// The schema has no such message.
    #[error("no protobuf message {0}")]
    UnknownMessage(String),
    /// The bytes are not a protobuf message of the expected shape.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A JSON value does not fit the field's type.
    #[error("field {field}: {why}")]
    Value {
        /// The field.
        field: String,
        /// What is wrong.
        why: String,
    },
}

/// `Result` with [`CodecError`].
pub(crate) type Result<T, E = CodecError> = std::result::Result<T, E>;

// ---------------------------------------------------------------------------------------------
// Wire format

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_tag(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_int(out: &mut Vec<u8>, number: u32, v: i64) {
    put_tag(out, number, 0);
    // Negative numbers take ten bytes, as int32 and int64 do in protobuf.
    put_varint(out, v as u64);
}

/// One field occurrence on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

fn get_varint(data: &[u8], at: &mut usize) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at).ok_or(CodecError::Malformed("truncated varint"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(CodecError::Malformed("varint too long"))
}

fn fields(data: &[u8]) -> Result<Vec<(u32, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < data.len() {
        let key = get_varint(data, &mut at)?;
        let number = u32::try_from(key >> 3).map_err(|_| CodecError::Malformed("field number"))?;
        let wire = match key & 7 {
            0 => Wire::Varint(get_varint(data, &mut at)?),
            1 => {
                let bytes =
                    data.get(at..at + 8).ok_or(CodecError::Malformed("truncated fixed64"))?;
                at += 8;
                Wire::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8])))
            }
            2 => {
                let len = usize::try_from(get_varint(data, &mut at)?)
                    .map_err(|_| CodecError::Malformed("length"))?;
                let end = at.checked_add(len).ok_or(CodecError::Malformed("length"))?;
                let bytes = data.get(at..end).ok_or(CodecError::Malformed("truncated bytes"))?;
                at = end;
                Wire::Bytes(bytes)
            }
            5 => {
                data.get(at..at + 4).ok_or(CodecError::Malformed("truncated fixed32"))?;
                at += 4;
                Wire::Fixed32
            }
            _ => return Err(CodecError::Malformed("unknown wire type")),
        };
        out.push((number, wire));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// JSON -> protobuf

fn bad(field: &str, why: impl Into<String>) -> CodecError {
    CodecError::Value { field: field.to_owned(), why: why.into() }
}

/// Encodes `value` as message `name` (without envelope).
pub(crate) fn encode_message(name: &str, value: &Value) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    encode_into(name, value, &mut out)?;
    Ok(out)
}

fn encode_into(name: &str, value: &Value, out: &mut Vec<u8>) -> Result<()> {
    if let Some(done) = encode_special(name, value, out)? {
        return Ok(done);
    }
    let msg = message(name).ok_or_else(|| CodecError::UnknownMessage(name.to_owned()))?;
    let Value::Object(object) = value else {
        return Err(bad(name, "expected an object"));
    };
    for field in msg.fields {
        if field.inline {
            // An embedded struct: its fields are this object's.
            if let Ty::Message(inner) = field.ty {
                let mut bytes = Vec::new();
                encode_into(inner, value, &mut bytes)?;
                if !bytes.is_empty() {
                    put_bytes(out, field.number, &bytes);
                }
            }
            continue;
        }
        let Some(v) = object.get(field.name).filter(|v| !v.is_null()) else { continue };
        match field.label {
            Label::Optional => encode_one(field.name, field.number, field.ty, v, out)?,
            Label::Repeated => {
                let items = v.as_array().ok_or_else(|| bad(field.name, "expected a list"))?;
                for item in items.iter().filter(|i| !i.is_null()) {
                    encode_one(field.name, field.number, field.ty, item, out)?;
                }
            }
            Label::Map(key_ty) => {
                let map = v.as_object().ok_or_else(|| bad(field.name, "expected a map"))?;
                for (key, item) in map {
                    let mut entry = Vec::new();
                    encode_one(field.name, 1, key_ty, &Value::String(key.clone()), &mut entry)?;
                    if !item.is_null() {
                        encode_one(field.name, 2, field.ty, item, &mut entry)?;
                    }
                    put_bytes(out, field.number, &entry);
                }
            }
        }
    }
    Ok(())
}

fn int_of(field: &str, v: &Value) -> Result<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .ok_or_else(|| bad(field, format!("expected an integer, got {v}")))
}

fn encode_one(field: &str, number: u32, ty: Ty, v: &Value, out: &mut Vec<u8>) -> Result<()> {
    match ty {
        Ty::Str => {
            let s = v.as_str().ok_or_else(|| bad(field, format!("expected a string, got {v}")))?;
            put_bytes(out, number, s.as_bytes());
        }
        Ty::Bytes => {
            let s = v.as_str().ok_or_else(|| bad(field, "expected base64 text"))?;
            let bytes = STANDARD.decode(s).map_err(|e| bad(field, e.to_string()))?;
            put_bytes(out, number, &bytes);
        }
        Ty::Bool => {
            let b =
                v.as_bool().ok_or_else(|| bad(field, format!("expected a boolean, got {v}")))?;
            put_int(out, number, i64::from(b));
        }
        Ty::Int32 | Ty::Int64 => put_int(out, number, int_of(field, v)?),
        Ty::Double => {
            let f = v.as_f64().ok_or_else(|| bad(field, format!("expected a number, got {v}")))?;
            put_tag(out, number, 1);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Ty::Message(name) => {
            let mut inner = Vec::new();
            encode_into(name, v, &mut inner)?;
            put_bytes(out, number, &inner);
        }
    }
    Ok(())
}

fn parse_time(field: &str, v: &Value) -> Result<Timestamp> {
    v.as_str()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .ok_or_else(|| bad(field, format!("expected an RFC 3339 time, got {v}")))
}

/// The messages whose JSON form is not an object; `None` for any other.
fn encode_special(name: &str, v: &Value, out: &mut Vec<u8>) -> Result<Option<()>> {
    match name {
        TIME | MICRO_TIME => {
            let t = parse_time(name, v)?;
            put_int(out, 1, t.as_second());
            if t.subsec_nanosecond() != 0 {
                put_int(out, 2, i64::from(t.subsec_nanosecond()));
            }
        }
        DURATION => {
            let text = v.as_str().ok_or_else(|| bad(name, "expected a duration string"))?;
            put_int(out, 1, parse_go_duration(text).ok_or_else(|| bad(name, "bad duration"))?);
        }
        QUANTITY => {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(bad(name, "expected a quantity")),
            };
            put_bytes(out, 1, text.as_bytes());
        }
        INT_OR_STRING => match v {
            Value::String(s) => {
                put_int(out, 1, 1);
                put_int(out, 2, 0);
                put_bytes(out, 3, s.as_bytes());
            }
            other => {
                put_int(out, 1, 0);
                put_int(out, 2, int_of(name, other)?);
                put_bytes(out, 3, b"");
            }
        },
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = serde_json::to_vec(v).map_err(|e| bad(name, e.to_string()))?;
            put_bytes(out, 1, &raw);
        }
        _ => return Ok(None),
    }
    Ok(Some(()))
}

/// Parses a Go duration (`1h2m3.5s`, `300ms`, `-1s`) into nanoseconds.
fn parse_go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}

/// Formats nanoseconds as Go formats a `time.Duration`.
fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (value, unit) = if n < 1_000 {
            (n as f64, "ns")
        } else if n < 1_000_000 {
            (n as f64 / 1e3, "µs")
        } else {
            (n as f64 / 1e6, "ms")
        };
        return format!("{sign}{value}{unit}");
    }
    let (h, rem) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rem) = (rem / 60_000_000_000, rem % 60_000_000_000);
    let secs = rem as f64 / 1e9;
    let mut out = sign.to_owned();
    if h > 0 {
        out.push_str(&format!("{h}h{m}m"));
    } else if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{secs}s"));
    out
}

// ---------------------------------------------------------------------------------------------
// protobuf -> JSON

/// How deeply messages may nest in a body. The schema nests a few levels; objects embedded as
/// protobuf in a `RawExtension` could nest without end, and a hostile body must not exhaust
/// the stack.
const MAX_DEPTH: u32 = 64;

thread_local! {
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts one level of nesting while alive.
struct DepthGuard;

impl DepthGuard {
    fn enter() -> Result<Self> {
        DEPTH.with(|d| {
            if d.get() >= MAX_DEPTH {
                return Err(CodecError::Malformed("messages nested too deeply"));
            }
            d.set(d.get() + 1);
            Ok(DepthGuard)
        })
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Decodes message `name` (without envelope) into its JSON form.
pub(crate) fn decode_message(name: &str, data: &[u8]) -> Result<Value> {
    let _depth = DepthGuard::enter()?;
    if let Some(value) = decode_special(name, data)? {
        return Ok(value);
    }
    let msg = message(name).ok_or_else(|| CodecError::UnknownMessage(name.to_owned()))?;
    let mut object = Map::new();
    for (number, wire) in fields(data)? {
        let Some(field) = msg.field(number) else { continue };
        if field.inline {
            if let Some(Value::Object(inner)) = decode_one(field.ty, wire)? {
                object.extend(inner);
            }
            continue;
        }
        match field.label {
            Label::Optional => match decode_one(field.ty, wire)? {
                Some(Value::String(s)) if s.is_empty() => {
                    object.remove(field.name);
                }
                Some(v) => {
                    object.insert(field.name.to_owned(), v);
                }
                None => {}
            },
            Label::Repeated => {
                let v = decode_one(field.ty, wire)?.unwrap_or(Value::Null);
                let list = object.entry(field.name).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(items) = list {
                    items.push(v);
                }
            }
            Label::Map(key_ty) => {
                let Wire::Bytes(entry) = wire else {
                    return Err(CodecError::Malformed("map entry is not a message"));
                };
                let (mut key, mut value) = (String::new(), None);
                for (n, w) in fields(entry)? {
                    match n {
                        1 => {
                            if let Some(Value::String(k)) = decode_one(key_ty, w)? {
                                key = k;
                            }
                        }
                        2 => value = decode_one(field.ty, w)?,
                        _ => {}
                    }
                }
                let value = value.unwrap_or_else(|| zero_of(field.ty));
                let map = object.entry(field.name).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(Value::Object(object))
}

/// The JSON value of an absent map value.
fn zero_of(ty: Ty) -> Value {
    match ty {
        Ty::Str | Ty::Bytes => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::Int32 | Ty::Int64 => Value::from(0),
        Ty::Double => Value::from(0.0),
        Ty::Message(_) => Value::Object(Map::new()),
    }
}

/// One value; `None` for a zero time (absent in JSON).
fn decode_one(ty: Ty, wire: Wire<'_>) -> Result<Option<Value>> {
    let malformed = || CodecError::Malformed("wire type does not match the field");
    Ok(Some(match (ty, wire) {
        (Ty::Str, Wire::Bytes(b)) => Value::String(
            String::from_utf8(b.to_vec())
                .map_err(|_| CodecError::Malformed("string is not UTF-8"))?,
        ),
        (Ty::Bytes, Wire::Bytes(b)) => Value::String(STANDARD.encode(b)),
        (Ty::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Ty::Int32, Wire::Varint(v)) => Value::from(v as i64 as i32),
        (Ty::Int64, Wire::Varint(v)) => Value::from(v as i64),
        (Ty::Double, Wire::Fixed64(v)) => Value::from(f64::from_bits(v)),
        (Ty::Message(name), Wire::Bytes(b)) => {
            let value = decode_message(name, b)?;
            if value.is_null() {
                return Ok(None);
            }
            value
        }
        _ => return Err(malformed()),
    }))
}

fn ints(data: &[u8]) -> Result<(i64, i64)> {
    let (mut a, mut b) = (0, 0);
    for (n, w) in fields(data)? {
        match (n, w) {
            (1, Wire::Varint(v)) => a = v as i64,
            (2, Wire::Varint(v)) => b = v as i64,
            _ => {}
        }
    }
    Ok((a, b))
}

fn first_bytes(data: &[u8]) -> Result<&[u8]> {
    Ok(fields(data)?
        .into_iter()
        .find_map(|(n, w)| match (n, w) {
            (1, Wire::Bytes(b)) => Some(b),
            _ => None,
        })
        .unwrap_or(&[]))
}

fn decode_special(name: &str, data: &[u8]) -> Result<Option<Value>> {
    Ok(Some(match name {
        TIME | MICRO_TIME => {
            let (seconds, nanos) = ints(data)?;
            if seconds == GO_ZERO_TIME_SECONDS && nanos == 0 {
                return Ok(Some(Value::Null));
            }
            let t = Timestamp::new(seconds, nanos as i32)
                .map_err(|_| CodecError::Malformed("time out of range"))?;
            let format = if name == TIME { "%Y-%m-%dT%H:%M:%SZ" } else { "%Y-%m-%dT%H:%M:%S%.6fZ" };
            Value::String(t.strftime(format).to_string())
        }
        DURATION => Value::String(format_go_duration(ints(data)?.0)),
        QUANTITY => Value::String(
            String::from_utf8(first_bytes(data)?.to_vec())
                .map_err(|_| CodecError::Malformed("quantity is not UTF-8"))?,
        ),
        INT_OR_STRING => {
            let (mut kind, mut int, mut text) = (0, 0, String::new());
            for (n, w) in fields(data)? {
                match (n, w) {
                    (1, Wire::Varint(v)) => kind = v,
                    (2, Wire::Varint(v)) => int = v as i64 as i32,
                    (3, Wire::Bytes(b)) => text = String::from_utf8_lossy(b).into_owned(),
                    _ => {}
                }
            }
            if kind == 1 { Value::String(text) } else { Value::from(int) }
        }
        RAW_EXTENSION | FIELDS_V1 => {
            let raw = first_bytes(data)?;
            if raw.is_empty() {
                return Ok(Some(Value::Null));
            }
            if raw.starts_with(MAGIC) {
                // An object embedded as protobuf (watch events): its JSON form.
                decode_object(raw)?.2
            } else {
                serde_json::from_slice(raw)
                    .map_err(|_| CodecError::Malformed("embedded object is not JSON"))?
            }
        }
        _ => return Ok(None),
    }))
}

// ---------------------------------------------------------------------------------------------
// Envelopes

/// `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw}`, as Go writes it.
pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::with_capacity(api_version.len() + kind.len() + 4);
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// The `apiVersion`, `kind` and raw message of an enveloped object.
pub(crate) fn open_envelope(body: &[u8]) -> Result<(String, String, &[u8])> {
    let inner = body.strip_prefix(MAGIC).ok_or(CodecError::Malformed("missing k8s prefix"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let _ = message(UNKNOWN);
    for (n, w) in fields(inner)? {
        match (n, w) {
            (1, Wire::Bytes(type_meta)) => {
                for (m, v) in fields(type_meta)? {
                    if let Wire::Bytes(b) = v {
                        let text = String::from_utf8_lossy(b).into_owned();
                        if m == 1 {
                            api_version = text;
                        } else if m == 2 {
                            kind = text;
                        }
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

/// The protobuf message name of `apiVersion` and `kind`, for the groups served.
pub(crate) fn message_name(api_version: &str, kind: &str) -> Option<String> {
    let package = match api_version {
        "v1" if matches!(kind, "Status" | "DeleteOptions" | "WatchEvent" | "List") => {
            "k8s.io.apimachinery.pkg.apis.meta.v1"
        }
        "v1" => "k8s.io.api.core.v1",
        "apps/v1" => "k8s.io.api.apps.v1",
        "autoscaling/v1" => "k8s.io.api.autoscaling.v1",
        "coordination.k8s.io/v1" => "k8s.io.api.coordination.v1",
        "events.k8s.io/v1" => "k8s.io.api.events.v1",
        "meta.k8s.io/v1" => "k8s.io.apimachinery.pkg.apis.meta.v1",
        _ => return None,
    };
    let name = format!("{package}.{kind}");
    message(&name).map(|_| name)
}

/// Decodes an enveloped object into `(apiVersion, kind, JSON with apiVersion and kind)`.
pub(crate) fn decode_object(body: &[u8]) -> Result<(String, String, Value)> {
    let (api_version, kind, raw) = open_envelope(body)?;
    let name = message_name(&api_version, &kind)
        .ok_or_else(|| CodecError::UnknownMessage(format!("{api_version} {kind}")))?;
    let mut value = decode_message(&name, raw)?;
    if let Value::Object(object) = &mut value {
        object.insert("apiVersion".into(), Value::String(api_version.clone()));
        object.insert("kind".into(), Value::String(kind.clone()));
    }
    Ok((api_version, kind, value))
}

/// Encodes a JSON object that carries `apiVersion` and `kind` into its envelope.
pub(crate) fn encode_object(value: &Value) -> Result<Vec<u8>> {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = message_name(api_version, kind)
        .ok_or_else(|| CodecError::UnknownMessage(format!("{api_version} {kind}")))?;
    Ok(envelope(api_version, kind, &encode_message(&name, value)?))
}

/// A watch event as one length-prefixed frame of a protobuf watch stream: a
/// `meta.v1.WatchEvent` (no envelope) whose object is the enveloped object.
pub(crate) fn watch_frame(event_type: &str, enveloped_object: &[u8]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(enveloped_object.len() + 8);
    put_bytes(&mut raw, 1, enveloped_object);
    let mut event = Vec::with_capacity(raw.len() + event_type.len() + 8);
    put_bytes(&mut event, 1, event_type.as_bytes());
    put_bytes(&mut event, 2, &raw);
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&(event.len() as u32).to_be_bytes());
    frame.extend_from_slice(&event);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_survives_the_round_trip_with_its_special_types() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"},
                "creationTimestamp": "2026-12-01T07:00:00Z", "generation": 1,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                    "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "readinessProbe": {"httpGet": {"port": "http", "path": "/"}, "periodSeconds": 10}}],
                "terminationGracePeriodSeconds": 0, "hostNetwork": false,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
            "status": {"phase": "Running", "startTime": "2026-12-01T07:00:01Z", "podIP": "10.0.0.1"}});
        let bytes = encode_object(&pod).unwrap();
        assert!(bytes.starts_with(MAGIC));
        let (api_version, kind, back) = decode_object(&bytes).unwrap();
        assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "Pod"));
        assert_eq!(back, pod);
    }

    #[test]
    fn go_style_zero_values_are_dropped_when_decoding() {
        // What Go writes for an unset ObjectMeta string and a zero creation time.
        let mut meta = Vec::new();
        put_bytes(&mut meta, 1, b"p");
        put_bytes(&mut meta, 2, b"");
        let mut zero_time = Vec::new();
        put_int(&mut zero_time, 1, GO_ZERO_TIME_SECONDS);
        put_bytes(&mut meta, 8, &zero_time);
        let mut spec = Vec::new();
        put_int(&mut spec, 1, 0); // replicas: 0 is a set pointer
        let mut set = Vec::new();
        put_bytes(&mut set, 1, &meta);
        put_bytes(&mut set, 2, &spec);
        let value = decode_message("k8s.io.api.apps.v1.StatefulSet", &set).unwrap();
        assert_eq!(value, json!({"metadata": {"name": "p"}, "spec": {"replicas": 0}}));
    }

    #[test]
    fn int_or_string_micro_time_raw_extensions_and_durations_keep_their_json_forms() {
        let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "r"}, "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 3});
        assert_eq!(decode_object(&encode_object(&revision).unwrap()).unwrap().2, revision);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"renewTime": "2026-12-01T07:00:00.123456Z", "leaseDurationSeconds": 15}});
        assert_eq!(decode_object(&encode_object(&lease).unwrap()).unwrap().2, lease);
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}}});
        assert_eq!(decode_object(&encode_object(&ds).unwrap()).unwrap().2, ds);
        assert_eq!(parse_go_duration("1h2m3.5s"), Some(3_723_500_000_000));
        assert_eq!(format_go_duration(3_723_500_000_000), "1h2m3.5s");
        assert_eq!(format_go_duration(300_000_000), "300ms");
    }

    #[test]
    fn watch_frames_are_length_prefixed_events_holding_the_enveloped_object() {
        let object =
            encode_object(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
                .unwrap();
        let frame = watch_frame("ADDED", &object);
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        let event =
            decode_message("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent", &frame[4..]).unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["metadata"]["name"], "n");
    }

    #[test]
    fn objects_nested_without_end_in_raw_extensions_are_refused_not_a_stack_overflow() {
        let mut body = envelope("apps/v1", "ControllerRevision", b"");
        for _ in 0..200 {
            let mut raw = Vec::new();
            put_bytes(&mut raw, 1, &body);
            let mut revision = Vec::new();
            put_bytes(&mut revision, 2, &raw);
            body = envelope("apps/v1", "ControllerRevision", &revision);
        }
        assert_eq!(
            decode_object(&body).unwrap_err(),
            CodecError::Malformed("messages nested too deeply")
        );
        let shallow = {
            let mut raw = Vec::new();
            put_bytes(&mut raw, 1, &envelope("v1", "Node", b""));
            let mut revision = Vec::new();
            put_bytes(&mut revision, 2, &raw);
            envelope("apps/v1", "ControllerRevision", &revision)
        };
        assert_eq!(decode_object(&shallow).unwrap().2["data"]["kind"], "Node");
    }

    #[test]
    fn malformed_bytes_and_wrong_types_are_errors_not_panics() {
        assert!(decode_object(b"k8s\0\x0a\xff").is_err());
        assert!(decode_object(b"nope").is_err());
        let wrong = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "x"}});
        assert!(encode_object(&wrong).is_err());
        let unknown = json!({"apiVersion": "batch/v1", "kind": "Job"});
        assert!(matches!(encode_object(&unknown), Err(CodecError::UnknownMessage(_))));
    }
}

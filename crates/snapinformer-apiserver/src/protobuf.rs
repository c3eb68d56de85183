//! Just enough of the Kubernetes protobuf encoding to accept the one request body kubectl sends
//! as protobuf for the served kinds: `kubectl create namespace` posts a `Namespace` as
//! `application/vnd.kubernetes.protobuf`. The decoded object becomes the same JSON a client
//! would have sent; every other protobuf body is answered 415.

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resource::ResourceKind;

/// The 4-byte prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// One field of a protobuf message. Only length-delimited payloads (strings, bytes, nested
/// messages) are read; numbers are skipped.
enum Field<'a> {
    Number,
    Bytes(&'a [u8]),
}

fn varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Splits a message into its fields; `None` when the bytes are not a protobuf message.
fn fields(data: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < data.len() {
        let key = varint(data, &mut at)?;
        let field = match key & 7 {
            0 => {
                varint(data, &mut at)?;
                Field::Number
            }
            1 => {
                at += 8;
                continue;
            }
            2 => {
                let len = usize::try_from(varint(data, &mut at)?).ok()?;
                let bytes = data.get(at..at.checked_add(len)?)?;
                at += len;
                Field::Bytes(bytes)
            }
            5 => {
                at += 4;
                continue;
            }
            _ => return None,
        };
        out.push((key >> 3, field));
    }
    (at == data.len()).then_some(out)
}

fn text(bytes: &[u8]) -> Option<String> {
    String::from_utf8(bytes.to_vec()).ok()
}

fn string_map(entries: &[&[u8]]) -> Option<Value> {
    let mut map = Map::new();
    for entry in entries {
        let mut key = String::new();
        let mut value = String::new();
        for (number, field) in fields(entry)? {
            match (number, field) {
                (1, Field::Bytes(b)) => key = text(b)?,
                (2, Field::Bytes(b)) => value = text(b)?,
                _ => {}
            }
        }
        map.insert(key, Value::String(value));
    }
    Some(Value::Object(map))
}

/// Decodes the `ObjectMeta` fields a client sets on create.
fn object_meta(data: &[u8]) -> Option<Value> {
    let mut meta = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Vec::new(), Vec::new(), Vec::new());
    for (number, field) in fields(data)? {
        let Field::Bytes(b) = field else { continue };
        match number {
            1 => _ = meta.insert("name".into(), text(b)?.into()),
            2 => _ = meta.insert("generateName".into(), text(b)?.into()),
            3 => _ = meta.insert("namespace".into(), text(b)?.into()),
            11 => labels.push(b),
            12 => annotations.push(b),
            14 => finalizers.push(Value::String(text(b)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), string_map(&labels)?);
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), string_map(&annotations)?);
    }
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(meta))
}

fn namespace(data: &[u8]) -> Option<Value> {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace"});
    for (number, field) in fields(data)? {
        let Field::Bytes(b) = field else { continue };
        match number {
            1 => object["metadata"] = object_meta(b)?,
            2 => {
                let finalizers: Option<Vec<Value>> = fields(b)?
                    .into_iter()
                    .filter_map(|(n, f)| match (n, f) {
                        (1, Field::Bytes(s)) => Some(text(s).map(Value::String)),
                        _ => None,
                    })
                    .collect();
                object["spec"] = json!({"finalizers": finalizers?});
            }
            _ => {}
        }
    }
    Some(object)
}

/// The 415 answer for protobuf bodies this server cannot read.
fn unsupported(kind: ResourceKind) -> ApiError {
    ApiError::unsupported_media_type(&format!(
        "application/vnd.kubernetes.protobuf (only Namespace bodies are decoded, not {})",
        kind.kind()
    ))
}

/// Decodes a protobuf request body for `kind` into the JSON object it stands for.
pub(crate) fn decode(kind: ResourceKind, body: &[u8]) -> Result<Value, ApiError> {
    if kind != ResourceKind::Namespace {
        return Err(unsupported(kind));
    }
    let malformed =
        || ApiError::bad_request("the protobuf body of the request could not be decoded");
    let envelope = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let mut raw = None;
    let mut type_kind = None;
    for (number, field) in fields(envelope).ok_or_else(malformed)? {
        match (number, field) {
            (1, Field::Bytes(type_meta)) => {
                for (n, f) in fields(type_meta).ok_or_else(malformed)? {
                    if let (2, Field::Bytes(k)) = (n, f) {
                        type_kind = text(k);
                    }
                }
            }
            (2, Field::Bytes(bytes)) => raw = Some(bytes),
            _ => {}
        }
    }
    if type_kind.as_deref().is_some_and(|k| k != kind.kind()) {
        return Err(unsupported(kind));
    }
    namespace(raw.ok_or_else(malformed)?).ok_or_else(malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_protobuf_namespace_decodes_to_its_json_form() {
        let label = [field(1, b"team"), field(2, b"a")].concat();
        let meta = [field(1, b"foo"), field(11, &label)].concat();
        let namespace = [field(1, &meta), field(2, &field(1, b"kubernetes"))].concat();
        let type_meta = [field(1, b"v1"), field(2, b"Namespace")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &namespace)].concat();
        let value = decode(ResourceKind::Namespace, &body).expect("decodes");
        assert_eq!(value["metadata"], json!({"name": "foo", "labels": {"team": "a"}}));
        assert_eq!(value["spec"]["finalizers"], json!(["kubernetes"]));
    }

    #[test]
    fn protobuf_bodies_of_other_kinds_are_unsupported_media() {
        assert_eq!(decode(ResourceKind::Pod, b"k8s\0").unwrap_err().code, 415);
        assert_eq!(decode(ResourceKind::Namespace, b"junk").unwrap_err().code, 400);
    }
}

//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which client-go's
//! typed clients use by default (kube-controller-manager's `--kube-api-content-type`): request
//! bodies of every served kind are read, and objects, lists and watch streams are answered in
//! it when the client prefers it.
//!
//! The transcoding between the stored JSON and protobuf is driven by a schema generated from the
//! `generated.proto` files of k8s.io/api v0.37.2 (`schema.rs`, written by
//! `scripts/gen-protobuf-schema.py`): field numbers and types of every message the served kinds
//! contain. See [`codec`] for the JSON forms of the special messages and what decoding drops.

pub(crate) mod codec;
mod schema;
pub(crate) mod schema_types;

use serde_json::Value;

use crate::error::ApiError;
use crate::resource::ResourceKind;

pub(crate) use codec::{encode_message, envelope, watch_frame};

/// The media type of protobuf answers.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of protobuf watch streams.
pub(crate) const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The protobuf message name of a kind's objects.
pub(crate) fn message_of(kind: ResourceKind) -> String {
    codec::message_name(kind.api_version(), kind.kind())
        .unwrap_or_else(|| format!("unknown.{}", kind.kind()))
}

/// Decodes a protobuf request body of `expected` (an object of the kind, or `DeleteOptions`,
/// `Binding`, `Scale`, ...: anything whose `apiVersion` and `kind` the envelope names) into
/// the JSON object a client would have sent. 400 when the bytes do not decode.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    codec::decode_object(body).map(|(_, _, value)| value).map_err(|e| {
        ApiError::bad_request(format!("the protobuf body of the request could not be decoded: {e}"))
    })
}

/// Encodes a JSON answer (an object or list with `apiVersion` and `kind`) as protobuf; `None`
/// when its kind has no protobuf message here (the JSON answer stands).
pub(crate) fn encode(value: &Value) -> Option<Vec<u8>> {
    codec::encode_object(value).ok()
}

/// Decodes the `Namespace` that `kubectl create namespace` posts (a kind check on top of
/// [`decode`]).
pub(crate) fn decode_as(kind: ResourceKind, body: &[u8]) -> Result<Value, ApiError> {
    let value = decode(body)?;
    let found = value.get("kind").and_then(Value::as_str).unwrap_or("");
    if found != kind.kind() {
        return Err(ApiError::bad_request(format!(
            "{found} in version \"v1\" cannot be handled as a {}: the kind in the data does not match",
            kind.kind()
        )));
    }
    Ok(value)
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
        let value = decode_as(ResourceKind::Namespace, &body).expect("decodes");
        assert_eq!(value["metadata"], serde_json::json!({"name": "foo", "labels": {"team": "a"}}));
        assert_eq!(value["spec"]["finalizers"], serde_json::json!(["kubernetes"]));
    }

    #[test]
    fn protobuf_bodies_of_another_kind_or_not_protobuf_are_bad_requests() {
        let type_meta = [field(1, b"v1"), field(2, b"Namespace")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, b"")].concat();
        assert_eq!(decode_as(ResourceKind::Pod, &body).unwrap_err().code, 400);
        assert_eq!(decode(b"junk").unwrap_err().code, 400);
    }

    #[test]
    fn every_served_kind_and_its_list_has_a_message() {
        for kind in ResourceKind::ALL {
            assert!(schema_types::message(&message_of(kind)).is_some(), "{kind:?}");
            let list = format!("{}List", message_of(kind));
            assert!(schema_types::message(&list).is_some(), "{kind:?} list");
        }
    }
}

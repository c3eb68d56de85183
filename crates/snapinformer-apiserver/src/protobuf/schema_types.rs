//! The shape of the generated protobuf schema (`schema.rs`): messages, their fields, field
//! numbers and types, as the `generated.proto` files of k8s.io/api declare them.

/// A field's value type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// `string`.
    Str,
    /// `bytes` (base64 in JSON).
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `double`. No served kind has one today; the generator emits it for any that does.
    #[allow(dead_code)]
    Double,
    /// A message, by full name.
    Message(&'static str),
}

/// How often a field occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    /// At most once.
    Optional,
    /// A list (never packed in Kubernetes' proto2 files).
    Repeated,
    /// A map with keys of this type (values are the field's type).
    Map(Ty),
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct Field {
    /// Its name, which is also its JSON name.
    pub(crate) name: &'static str,
    /// Its field number.
    pub(crate) number: u32,
    /// Optional, repeated or map.
    pub(crate) label: Label,
    /// Its (value) type.
    pub(crate) ty: Ty,
    /// A Go struct embedded in the message: in JSON its fields sit in the parent object
    /// (a probe's `httpGet`, a volume's `configMap`).
    pub(crate) inline: bool,
}

/// One message.
#[derive(Debug)]
pub(crate) struct Message {
    /// Full name (`k8s.io.api.core.v1.Pod`).
    pub(crate) name: &'static str,
    /// Its fields, by number.
    pub(crate) fields: &'static [Field],
}

/// The message named `name`, if the schema has it.
pub(crate) fn message(name: &str) -> Option<&'static Message> {
    let all = super::schema::MESSAGES;
    all.binary_search_by(|m| m.name.cmp(name)).ok().map(|i| &all[i])
}

impl Message {
    /// The field with number `number`.
    pub(crate) fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_sorted_and_every_referenced_message_is_in_it() {
        let all = super::super::schema::MESSAGES;
        assert!(all.windows(2).all(|w| w[0].name < w[1].name), "sorted for binary search");
        for m in all {
            for f in m.fields {
                if let Ty::Message(name) = f.ty {
                    assert!(message(name).is_some(), "{}.{} refers to {name}", m.name, f.name);
                }
            }
        }
        let pod = message("k8s.io.api.core.v1.Pod").expect("pods are in the schema");
        assert_eq!(pod.field(2).map(|f| f.name), Some("spec"));
    }
}

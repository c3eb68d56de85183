//! Label and field selectors with the real server's grammar.

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::resource::ResourceKind;

/// Longest label or field selector accepted, in bytes. The real server has no such limit (only
/// the URL's); this server refuses longer selectors with 400, so that a request cannot make it
/// parse and evaluate megabytes of selector against every object.
pub const MAX_SELECTOR_BYTES: usize = 16 * 1024;

/// Most terms accepted in one label or field selector, counting each requirement and each value
/// of an `in`/`notin` set: evaluating a selector against an object costs at most this many
/// comparisons.
pub const MAX_SELECTOR_TERMS: usize = 256;

/// Refuses a selector longer than [`MAX_SELECTOR_BYTES`].
fn check_length(parameter: &str, text: &str) -> Result<(), ApiError> {
    if text.len() > MAX_SELECTOR_BYTES {
        return Err(ApiError::bad_request(format!(
            "{parameter} is too long: {} bytes, the limit is {MAX_SELECTOR_BYTES} bytes",
            text.len()
        )));
    }
    Ok(())
}

/// Refuses a selector once it has more than [`MAX_SELECTOR_TERMS`] terms.
fn check_terms(parameter: &str, terms: usize) -> Result<(), ApiError> {
    if terms > MAX_SELECTOR_TERMS {
        return Err(ApiError::bad_request(format!(
            "{parameter} has too many terms: the limit is {MAX_SELECTOR_TERMS} (each requirement and each value of an in/notin set counts)"
        )));
    }
    Ok(())
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector (`a=b,c!=d,e in (x,y),!f,g`). Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector; an error is answered as 400 BadRequest like the real server does.
    /// A selector over [`MAX_SELECTOR_BYTES`] or [`MAX_SELECTOR_TERMS`] is refused the same way.
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        check_length("labelSelector", text)?;
        let mut requirements = Vec::new();
        let mut terms = 0;
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let requirement = parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: found '{part}', expected: valid label selector"
                ))
            })?;
            terms += match &requirement {
                Requirement::In(_, values) | Requirement::NotIn(_, values) => values.len(),
                _ => 1,
            };
            check_terms("labelSelector", terms)?;
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::GreaterThan(k, n) => {
                labels.get(k).and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l > *n)
            }
            Requirement::LessThan(k, n) => {
                labels.get(k).and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l < *n)
            }
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    values.iter().all(|v| valid_value(v)).then_some(values)
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| Requirement::DoesNotExist(key.to_owned()));
    }
    for (op, build) in [
        (" notin ", Requirement::NotIn as fn(String, Vec<String>) -> Requirement),
        (" in ", Requirement::In as fn(String, Vec<String>) -> Requirement),
    ] {
        if let Some(at) = part.find(op) {
            let key = part[..at].trim();
            let set = parse_set(&part[at + op.len()..])?;
            return valid_key(key).then(|| build(key.to_owned(), set));
        }
    }
    for (op, kind) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some(at) = part.find(op) {
            let key = part[..at].trim();
            let value = part[at + op.len()..].trim();
            if !valid_key(key) {
                return None;
            }
            return match kind {
                0 => valid_value(value).then(|| Requirement::NotEquals(key.into(), value.into())),
                1 => valid_value(value).then(|| Requirement::Equals(key.into(), value.into())),
                2 => value.parse().ok().map(|n| Requirement::GreaterThan(key.into(), n)),
                _ => value.parse().ok().map(|n| Requirement::LessThan(key.into(), n)),
            };
        }
    }
    valid_key(part).then(|| Requirement::Exists(part.to_owned()))
}

/// Which field a field requirement reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldRef {
    Name,
    Namespace,
    /// Index into the kind's `field_labels()`.
    Extra(usize),
}

/// A parsed field selector (`metadata.name=x,spec.nodeName!=y`). Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<(FieldRef, bool, String)>,
}

impl FieldSelector {
    /// Parses a field selector for `kind`; unsupported fields get the real server's 400. A
    /// selector over [`MAX_SELECTOR_BYTES`] or [`MAX_SELECTOR_TERMS`] is refused the same way.
    pub fn parse(kind: ResourceKind, text: &str) -> Result<Self, ApiError> {
        check_length("fieldSelector", text)?;
        let mut requirements = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            check_terms("fieldSelector", requirements.len() + 1)?;
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            let reference = match field {
                "metadata.name" => FieldRef::Name,
                "metadata.namespace" => FieldRef::Namespace,
                other => FieldRef::Extra(
                    kind.field_labels().iter().position(|l| *l == other).ok_or_else(|| {
                        ApiError::bad_request(format!("field label not supported: {other}"))
                    })?,
                ),
            };
            requirements.push((reference, equal, value.trim().to_owned()));
        }
        Ok(Self { requirements })
    }

    /// Whether an object with these name, namespace and extra field values matches.
    pub(crate) fn matches(&self, name: &str, namespace: &str, extra: &[String]) -> bool {
        self.requirements.iter().all(|(field, equal, value)| {
            let actual = match field {
                FieldRef::Name => name,
                FieldRef::Namespace => namespace,
                FieldRef::Extra(i) => extra.get(*i).map(String::as_str).unwrap_or_default(),
            };
            (actual == value) == *equal
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selector_supports_equality_sets_and_existence() {
        let l = labels(&[("app", "web"), ("tier", "front")]);
        for (sel, expected) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web,db)", false),
            ("app notin (db)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
            ("app=web,tier=back", false),
            ("app in (web),tier in (front)", true),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&l), expected, "{sel}");
        }
    }

    #[test]
    fn malformed_label_selector_is_a_bad_request() {
        let err = LabelSelector::parse("app in web").unwrap_err();
        assert_eq!(err.code, 400);
        assert!(LabelSelector::parse("a=b=c=(").is_err());
    }

    #[test]
    fn selectors_over_the_length_or_term_limits_are_bad_requests_that_name_the_limit() {
        let long = format!("app={}", "a".repeat(MAX_SELECTOR_BYTES));
        let err = LabelSelector::parse(&long).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("the limit is 16384 bytes"), "{}", err.message);
        let many: Vec<String> = (0..=MAX_SELECTOR_TERMS).map(|i| format!("k{i}")).collect();
        let err = LabelSelector::parse(&many.join(",")).unwrap_err();
        assert!(err.message.contains("too many terms: the limit is 256"), "{}", err.message);
        assert!(LabelSelector::parse(&many[..MAX_SELECTOR_TERMS].join(",")).is_ok());
        let big_set = format!("app in ({})", many.join(","));
        assert_eq!(LabelSelector::parse(&big_set).unwrap_err().code, 400);
        let fields: Vec<&str> = vec!["metadata.name=x"; MAX_SELECTOR_TERMS + 1];
        let err = FieldSelector::parse(ResourceKind::Pod, &fields.join(",")).unwrap_err();
        assert!(err.message.starts_with("fieldSelector has too many terms"), "{}", err.message);
        let err = FieldSelector::parse(ResourceKind::Pod, &long).unwrap_err();
        assert!(err.message.starts_with("fieldSelector is too long"), "{}", err.message);
    }

    #[test]
    fn field_selector_rejects_unsupported_fields() {
        let err = FieldSelector::parse(ResourceKind::Node, "spec.nodeName=x").unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(err.message, "field label not supported: spec.nodeName");
    }

    #[test]
    fn field_selector_matches_pod_node_and_phase() {
        let sel = FieldSelector::parse(ResourceKind::Pod, "spec.nodeName=n1,status.phase!=Failed")
            .unwrap();
        let mut extra = vec![String::new(); ResourceKind::Pod.field_labels().len()];
        extra[0] = "n1".into();
        extra[5] = "Running".into();
        assert!(sel.matches("p", "default", &extra));
        extra[5] = "Failed".into();
        assert!(!sel.matches("p", "default", &extra));
        let by_name = FieldSelector::parse(ResourceKind::Pod, "metadata.name==p").unwrap();
        assert!(by_name.matches("p", "x", &extra));
        assert!(!by_name.matches("q", "x", &extra));
    }
}

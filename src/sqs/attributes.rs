//! Message attributes (`String`, `Number`, `Binary`, each with an optional
//! custom label: `Number.float`): their checks, and the MD5 digests SQS
//! answers with, which the Java, Ruby, .NET and JavaScript SDKs verify.
//!
//! `MD5OfMessageAttributes` is MD5 over the attributes sorted by name,
//! each encoded as: name length (u32, big-endian) and name, data type
//! length and data type, one transport byte (1 for string values, 2 for
//! binary), value length and value. The encoding is SQS's, written here
//! (not a library: none implements it); the MD5 itself is the `md-5` crate.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::SqsError;

/// Most message attributes one message carries.
pub const ATTRIBUTES_MAX: usize = 10;
/// Longest attribute name and data type, in characters.
const NAME_LEN_MAX: usize = 256;

/// One attribute's value, in SQS's JSON shape (`BinaryValue` in base64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeValue {
    /// `String`, `Number` or `Binary`, optionally `.label`.
    #[serde(rename = "DataType")]
    pub data_type: String,
    /// The value of a `String` or `Number`.
    #[serde(
        rename = "StringValue",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub string_value: Option<String>,
    /// The value of a `Binary`, base64.
    #[serde(
        rename = "BinaryValue",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub binary_value: Option<String>,
}

/// Attributes by name (sorted: the digest's order).
pub type Attributes = BTreeMap<String, AttributeValue>;

/// The MD5 of `bytes`, as 32 hex digits.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(Md5::digest(bytes))
}

fn put_len_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// SQS's `MD5OfMessageAttributes` of `attributes` (checked ones);
/// `None` when there are none (SQS then leaves the field out).
pub fn md5_of_attributes(attributes: &Attributes) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut encoded = Vec::new();
    for (name, value) in attributes {
        put_len_prefixed(&mut encoded, name.as_bytes());
        put_len_prefixed(&mut encoded, value.data_type.as_bytes());
        match (&value.string_value, &value.binary_value) {
            (Some(text), _) => {
                encoded.push(1);
                put_len_prefixed(&mut encoded, text.as_bytes());
            }
            (None, Some(binary)) => {
                encoded.push(2);
                let bytes = BASE64.decode(binary).unwrap_or_default();
                put_len_prefixed(&mut encoded, &bytes);
            }
            // Sends are checked, so only an item pushed around the SQS API
            // (a `/v1` push that looks like an SQS envelope) gets here:
            // digested as an empty string, not a panic after its lease.
            (None, None) => {
                encoded.push(1);
                put_len_prefixed(&mut encoded, b"");
            }
        }
    }
    Some(md5_hex(&encoded))
}

/// Why `text` cannot be a message body or string value: SQS allows
/// `#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF` only.
pub fn check_text(text: &str) -> Result<(), char> {
    match text.chars().find(|c| {
        !matches!(*c as u32, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF)
    }) {
        Some(bad) => Err(bad),
        None => Ok(()),
    }
}

/// Checks an attribute name: 1-256 of `A-Z a-z 0-9 _ - .`, no leading,
/// trailing or doubled `.`, not `AWS.` or `Amazon.` first.
pub fn check_name(name: &str) -> Result<(), SqsError> {
    let lower = name.to_ascii_lowercase();
    let bad = name.is_empty()
        || name.len() > NAME_LEN_MAX
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        || name.starts_with('.')
        || name.ends_with('.')
        || name.contains("..")
        || lower.starts_with("aws.")
        || lower.starts_with("amazon.");
    if bad {
        return Err(SqsError::invalid(format!(
            "Message (user) attribute name '{name}' is invalid: it must be 1 to 256 of \
             A-Z a-z 0-9 _ - . with no leading, trailing or doubled '.', and must not \
             start with AWS. or Amazon."
        )));
    }
    Ok(())
}

/// The base type of a data type (`Number.float` → `Number`), checked.
fn base_type(name: &str, data_type: &str) -> Result<&'static str, SqsError> {
    let base = data_type.split('.').next().unwrap_or("");
    let known = ["String", "Number", "Binary"]
        .into_iter()
        .find(|b| *b == base);
    match known {
        Some(base) if data_type.len() <= NAME_LEN_MAX => Ok(base),
        _ => Err(SqsError::invalid(format!(
            "The type of message (user) attribute '{name}' is invalid. You must use only the \
             following supported type prefixes: Binary, Number, String."
        ))),
    }
}

/// Checks one attribute and returns its size as SQS counts it (name,
/// type and value bytes).
fn check_value(name: &str, value: &AttributeValue) -> Result<usize, SqsError> {
    let empty = |what: &str| {
        SqsError::invalid(format!(
            "Message (user) attribute '{name}' must contain a non-empty {what}."
        ))
    };
    let value_len = match base_type(name, &value.data_type)? {
        "Binary" => {
            let encoded = value
                .binary_value
                .as_deref()
                .ok_or_else(|| empty("BinaryValue"))?;
            let bytes = BASE64.decode(encoded).map_err(|_| {
                SqsError::invalid(format!(
                    "Message (user) attribute '{name}': BinaryValue is not base64."
                ))
            })?;
            if bytes.is_empty() {
                return Err(empty("BinaryValue"));
            }
            bytes.len()
        }
        base => {
            let text = value
                .string_value
                .as_deref()
                .filter(|t| !t.is_empty())
                .ok_or_else(|| empty("StringValue"))?;
            if let Err(bad) = check_text(text) {
                return Err(SqsError::contents(format!(
                    "Message (user) attribute '{name}' holds the invalid character {:#x}.",
                    bad as u32
                )));
            }
            if base == "Number" && text.trim().parse::<f64>().is_err() {
                return Err(SqsError::invalid(format!(
                    "Message (user) attribute '{name}' of type Number holds {text:?}, which is not a number."
                )));
            }
            text.len()
        }
    };
    Ok(name.len() + value.data_type.len() + value_len)
}

/// Parses and checks the `MessageAttributes` (or `MessageSystemAttributes`)
/// of a request: at most ten; returns them and their size.
pub fn parse(raw: Option<&Value>, field: &str) -> Result<(Attributes, usize), SqsError> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok((Attributes::new(), 0));
    };
    let attributes: Attributes = serde_json::from_value(raw.clone()).map_err(|e| {
        SqsError::invalid(format!(
            "{field} must map names to {{DataType, StringValue|BinaryValue}}: {e}"
        ))
    })?;
    if attributes.len() > ATTRIBUTES_MAX {
        return Err(SqsError::invalid(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{ATTRIBUTES_MAX}].",
            attributes.len()
        )));
    }
    let mut size = 0;
    for (name, value) in &attributes {
        check_name(name)?;
        size += check_value(name, value)?;
    }
    Ok((attributes, size))
}

/// The attributes of `all` a receive asked for: `All` or `.*` for every
/// one, `prefix.*` for those starting `prefix.`, else by name.
pub fn select(all: &Attributes, asked: &[String]) -> Attributes {
    let wanted = |name: &str| {
        asked.iter().any(|pattern| {
            // `Hel.*` is every name starting with `Hel` (`Hello`,
            // `Help.Me`), as SQS matches it.
            matches!(pattern.as_str(), "All" | ".*" | "*")
                || pattern == name
                || pattern
                    .strip_suffix(".*")
                    .is_some_and(|prefix| name.starts_with(prefix))
        })
    };
    all.iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(data_type: &str, value: &str) -> AttributeValue {
        AttributeValue {
            data_type: data_type.into(),
            string_value: Some(value.into()),
            binary_value: None,
        }
    }

    #[test]
    fn body_digest_is_plain_md5() {
        // RFC 1321's test vector.
        assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
    }

    #[test]
    fn attribute_digest_follows_sqs_encoding() {
        let mut attributes = Attributes::new();
        attributes.insert("b".into(), string("Number", "1"));
        attributes.insert(
            "a".into(),
            AttributeValue {
                data_type: "Binary".into(),
                string_value: None,
                binary_value: Some(BASE64.encode([0xffu8, 0])),
            },
        );
        // Built by hand from the documented layout, names in order.
        let mut expected = Vec::new();
        for part in [&b"a"[..], b"Binary"] {
            expected.extend_from_slice(&(part.len() as u32).to_be_bytes());
            expected.extend_from_slice(part);
        }
        expected.push(2);
        expected.extend_from_slice(&2u32.to_be_bytes());
        expected.extend_from_slice(&[0xff, 0]);
        for part in [&b"b"[..], b"Number"] {
            expected.extend_from_slice(&(part.len() as u32).to_be_bytes());
            expected.extend_from_slice(part);
        }
        expected.push(1);
        expected.extend_from_slice(&1u32.to_be_bytes());
        expected.push(b'1');
        assert_eq!(md5_of_attributes(&attributes), Some(md5_hex(&expected)));
        assert_eq!(md5_of_attributes(&Attributes::new()), None);
    }

    #[test]
    fn names_types_and_values_are_checked() {
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "AWS.x",
            "amazon.y",
            "a b",
            &"n".repeat(257),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("hotq.encoding").is_ok());
        assert!(check_value("n", &string("Number", "x")).is_err());
        assert!(check_value("n", &string("Number.int", "12")).is_ok());
        assert!(check_value("n", &string("Text", "a")).is_err());
        assert!(check_value("n", &string("String", "")).is_err());
        assert!(check_value("n", &string("String", "\u{1}")).is_err());
        let asked = vec!["x.*".to_string(), "y".to_string()];
        let mut all = Attributes::new();
        for name in ["x.a", "xa", "y", "z"] {
            all.insert(name.into(), string("String", "v"));
        }
        // `x.*` is every name starting with `x`, as SQS matches it.
        let picked: Vec<_> = select(&all, &asked).into_keys().collect();
        assert_eq!(picked, ["x.a", "xa", "y"]);
    }
}

//! Frames on the wire: requests decoded out of a connection's buffer, and
//! replies encoded into its output buffer, RESP2 or RESP3 as the
//! connection chose with `HELLO`.
//!
//! The codec is the `redis-protocol` crate (RESP2 and RESP3, decoded
//! zero-copy: a request's arguments are slices of the read buffer, an
//! item's bytes move into its reply without a copy). A hand-written parser
//! would save little: a request is an array of bulk strings, which the
//! crate decodes in one pass over its bytes, and the daemon's CPU per pop
//! is spent in the round, the hand-off and the commit (docs/profile.md),
//! not in framing; what a connection saves is system calls, by reading
//! every request available and writing every reply in one write
//! ([`super::connection`]).

use bytes::{Bytes, BytesMut};
use redis_protocol::bytes_utils::Str;
use redis_protocol::resp2::types::BytesFrame as Frame2;
use redis_protocol::resp3::types::BytesFrame as Frame3;

/// The protocol a connection speaks: RESP2 until `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: maps are flat arrays, nulls are `$-1` or `*-1`.
    Resp2,
    /// RESP3: maps, booleans and one null.
    Resp3,
}

impl Protocol {
    /// The protocol's number, as `HELLO` names it.
    pub fn number(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// A reply, before it is encoded for the connection's protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`.
    Simple(&'static str),
    /// `-text`: the whole error line, its first word the error's kind
    /// (`ERR`, `NOAUTH`, `WRONGPASS`, …).
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` and the bytes.
    Bulk(Bytes),
    /// Nothing, where a bulk string could be: `$-1` (RESP2), `_` (RESP3).
    Nil,
    /// Nothing, where an array could be: `*-1` (RESP2), `_` (RESP3).
    NilArray,
    /// A boolean: `:1`/`:0` (RESP2), `#t`/`#f` (RESP3).
    Bool(bool),
    /// `*n` and the elements.
    Array(Vec<Reply>),
    /// Keys and values, in order: a flat array (RESP2), `%n` (RESP3).
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `+OK`.
    pub const OK: Reply = Reply::Simple("OK");

    /// A bulk string of `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// An error line: CR and LF, which would end it early, become spaces.
    pub fn error(line: impl Into<String>) -> Reply {
        let line: String = line.into();
        Reply::Error(line.replace(['\r', '\n'], " "))
    }

    /// A map with text keys.
    pub fn map(entries: impl IntoIterator<Item = (&'static str, Reply)>) -> Reply {
        Reply::Map(
            entries
                .into_iter()
                .map(|(key, value)| (Reply::text(key), value))
                .collect(),
        )
    }

    /// A JSON value as RESP: an object is a map (its keys in order), an
    /// array an array, a string a bulk string, an integer an integer,
    /// another number its text, a boolean a boolean, null nil. The admin
    /// commands answer the HTTP API's JSON this way.
    pub fn from_json(value: serde_json::Value) -> Reply {
        use serde_json::Value;
        match value {
            Value::Null => Reply::Nil,
            Value::Bool(value) => Reply::Bool(value),
            Value::Number(number) => match number.as_i64() {
                Some(n) => Reply::Int(n),
                None => Reply::text(number.to_string()),
            },
            Value::String(text) => Reply::text(text),
            Value::Array(values) => {
                Reply::Array(values.into_iter().map(Reply::from_json).collect())
            }
            Value::Object(entries) => Reply::Map(
                entries
                    .into_iter()
                    .map(|(key, value)| (Reply::text(key), Reply::from_json(value)))
                    .collect(),
            ),
        }
    }

    /// Appends this reply to `out`, encoded for `protocol`.
    pub fn encode(self, protocol: Protocol, out: &mut BytesMut) {
        if protocol == Protocol::Resp2 && self == Reply::NilArray {
            // The crate's RESP2 frames have one null, `$-1`; Redis answers
            // a timed-out BLPOP or an empty LPOP with a count `*-1`.
            out.extend_from_slice(b"*-1\r\n");
            return;
        }
        // Encoding a frame built here cannot fail: every length is known
        // and the buffer grows to fit (`extend_encode`).
        let encoded = match protocol {
            Protocol::Resp2 => {
                redis_protocol::resp2::encode::extend_encode(out, &self.into_resp2(), false)
            }
            Protocol::Resp3 => redis_protocol::resp3::encode::complete::extend_encode(
                out,
                &self.into_resp3(),
                false,
            ),
        };
        if let Err(error) = encoded {
            tracing::error!(%error, "a RESP reply could not be encoded");
            let fallback = Reply::error("ERR internal_error a reply could not be encoded");
            let _ =
                redis_protocol::resp2::encode::extend_encode(out, &fallback.into_resp2(), false);
        }
    }

    fn into_resp2(self) -> Frame2 {
        match self {
            Reply::Simple(text) => Frame2::SimpleString(Bytes::from_static(text.as_bytes())),
            Reply::Error(line) => Frame2::Error(Str::from(line)),
            Reply::Int(n) => Frame2::Integer(n),
            Reply::Bulk(bytes) => Frame2::BulkString(bytes),
            Reply::Nil => Frame2::Null,
            // Inside an array (never sent so): RESP2's other null.
            Reply::NilArray => Frame2::Null,
            Reply::Bool(value) => Frame2::Integer(i64::from(value)),
            Reply::Array(replies) => {
                Frame2::Array(replies.into_iter().map(Reply::into_resp2).collect())
            }
            Reply::Map(entries) => Frame2::Array(
                entries
                    .into_iter()
                    .flat_map(|(key, value)| [key.into_resp2(), value.into_resp2()])
                    .collect(),
            ),
        }
    }

    fn into_resp3(self) -> Frame3 {
        match self {
            Reply::Simple(text) => Frame3::SimpleString {
                data: Bytes::from_static(text.as_bytes()),
                attributes: None,
            },
            Reply::Error(line) => Frame3::SimpleError {
                data: Str::from(line),
                attributes: None,
            },
            Reply::Int(n) => Frame3::Number {
                data: n,
                attributes: None,
            },
            Reply::Bulk(bytes) => Frame3::BlobString {
                data: bytes,
                attributes: None,
            },
            Reply::Nil | Reply::NilArray => Frame3::Null,
            Reply::Bool(value) => Frame3::Boolean {
                data: value,
                attributes: None,
            },
            Reply::Array(replies) => Frame3::Array {
                data: replies.into_iter().map(Reply::into_resp3).collect(),
                attributes: None,
            },
            Reply::Map(entries) => Frame3::Map {
                data: entries
                    .into_iter()
                    .map(|(key, value)| (key.into_resp3(), value.into_resp3()))
                    .collect(),
                attributes: None,
            },
        }
    }
}

/// Why a connection's bytes are not a request: answered with an error,
/// then the connection is closed (its stream cannot be resynchronised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Most arguments one request may carry: the longest command served
/// (`PUSH` of 1,000 items with its options, `ACK` of 1,000 receipts) and
/// room to spare. A longer array is refused as soon as its header is
/// read: its elements would be decoded anew each time more of it arrives.
pub const REQUEST_ARGS_MAX: u64 = 4_096;

/// The element count of the array whose header starts `buffer`, once
/// that header line is whole (`*<n>\r\n`). Only this line is read here,
/// to refuse a request too long before the codec decodes any of it.
fn array_header(buffer: &[u8]) -> Option<u64> {
    let line = buffer.strip_prefix(b"*")?;
    let end = line.iter().take(24).position(|byte| *byte == b'\r')?;
    std::str::from_utf8(&line[..end]).ok()?.parse().ok()
}

/// Decodes one request off the front of `buffer`: its arguments (`None`
/// while the request is not whole). A request is an array of bulk
/// strings, as every Redis client sends them; an empty array is skipped.
pub fn decode_request(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    loop {
        if array_header(buffer).is_some_and(|count| count > REQUEST_ARGS_MAX) {
            return Err(ProtocolError(format!(
                "Protocol error: invalid multibulk length (at most {REQUEST_ARGS_MAX} arguments)"
            )));
        }
        let decoded = redis_protocol::resp2::decode::decode_bytes_mut(buffer)
            .map_err(|error| ProtocolError(format!("Protocol error: {}", error.details())))?;
        let Some((frame, _, _)) = decoded else {
            return Ok(None);
        };
        let Frame2::Array(parts) = frame else {
            return Err(ProtocolError(
                "Protocol error: expected an array of bulk strings (inline commands are not served)"
                    .into(),
            ));
        };
        if parts.is_empty() {
            continue;
        }
        return parts
            .into_iter()
            .map(|part| match part {
                Frame2::BulkString(bytes) | Frame2::SimpleString(bytes) => Ok(bytes),
                _ => Err(ProtocolError(
                    "Protocol error: expected '$', a request's arguments are bulk strings".into(),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: Reply, protocol: Protocol) -> String {
        let mut out = BytesMut::new();
        reply.encode(protocol, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn replies_take_each_protocol_s_shape() {
        let map = || Reply::map([("a", Reply::Int(1)), ("b", Reply::Bool(true))]);
        assert_eq!(
            encoded(map(), Protocol::Resp2),
            "*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:1\r\n"
        );
        assert_eq!(
            encoded(map(), Protocol::Resp3),
            "%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n#t\r\n"
        );
        assert_eq!(encoded(Reply::Nil, Protocol::Resp2), "$-1\r\n");
        assert_eq!(encoded(Reply::Nil, Protocol::Resp3), "_\r\n");
        assert_eq!(encoded(Reply::NilArray, Protocol::Resp2), "*-1\r\n");
        assert_eq!(encoded(Reply::NilArray, Protocol::Resp3), "_\r\n");
        assert_eq!(
            encoded(Reply::error("ERR a\r\nb"), Protocol::Resp2),
            "-ERR a  b\r\n"
        );
        assert_eq!(encoded(Reply::OK, Protocol::Resp3), "+OK\r\n");
    }

    #[test]
    fn requests_are_arrays_of_bulk_strings_and_may_come_in_pieces() {
        let mut buffer = BytesMut::from(&b"*2\r\n$3\r\nPOP\r\n$4\r\njo"[..]);
        assert_eq!(decode_request(&mut buffer), Ok(None));
        buffer.extend_from_slice(b"bs\r\n*0\r\n*1\r\n$4\r\nPING\r\n");
        let first = decode_request(&mut buffer).unwrap().unwrap();
        assert_eq!(first, vec![Bytes::from("POP"), Bytes::from("jobs")]);
        let second = decode_request(&mut buffer).unwrap().unwrap();
        assert_eq!(second, vec![Bytes::from("PING")]);
        assert!(buffer.is_empty());
        let mut garbage = BytesMut::from(&b"\x00\x01garbage\r\n"[..]);
        assert!(decode_request(&mut garbage).is_err());
        let mut inline = BytesMut::from(&b"+PING\r\n"[..]);
        assert!(decode_request(&mut inline).is_err());
        let mut long = BytesMut::from(&b"*4097\r\n$4\r\nPUSH\r\n"[..]);
        assert!(decode_request(&mut long).is_err());
        let mut longest = BytesMut::from(&b"*4096\r\n$4\r\nPUSH\r\n"[..]);
        assert_eq!(decode_request(&mut longest), Ok(None));
    }
}

//! A lean HTTP/1.1 client for the bench's pop loop, in the spirit of wrk
//! or redis-benchmark: one keep-alive connection per worker (with
//! `TCP_NODELAY`), the request's bytes built once, one read buffer per
//! connection reused across responses. The bench runs on the daemon's
//! cores, so every microsecond the load generator spends is taken from
//! the daemon it measures.
//!
//! Strict by design: it reads what hotq's daemon (hyper) sends and refuses
//! anything else with a clear error rather than guessing:
//! - a body is framed by `Content-Length`; 1xx, 204 and 304 have none;
//!   `Transfer-Encoding` (chunked or any other) and a body without
//!   `Content-Length` (read until close) are refused;
//! - `Connection: close` (and HTTP/1.0 without `keep-alive`) ends the
//!   connection after its response; the next request connects anew;
//! - the head is bounded by [`Limits::header_bytes_max`], the body by
//!   [`Limits::body_bytes_max`], every request (connect, write, read) by a
//!   timeout;
//! - requests are not pipelined: bytes that arrive before a request was
//!   sent are an error, not the next response.
//!
//! [`ResponseReader`] is the parser and does no I/O, so tests feed it
//! bytes split anywhere; [`Connection`] drives it over a
//! `tokio::net::TcpStream`; [`Endpoint`] turns the bench's `--url` into an
//! address and builds requests.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bounds on one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest head (status line, headers and the blank line), in bytes.
    pub header_bytes_max: usize,
    /// Largest body, in bytes.
    pub body_bytes_max: usize,
}

impl Default for Limits {
    /// 64 KiB of head, 16 MiB of body (a pop answers one item, at most
    /// about 100 KB).
    fn default() -> Self {
        Limits {
            header_bytes_max: 64 * 1_024,
            body_bytes_max: 16 * 1_024 * 1_024,
        }
    }
}

/// One complete response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code (never 1xx: interim responses are skipped).
    pub status: u16,
    /// The body, exactly `Content-Length` bytes (empty for 204 and 304).
    pub body: Vec<u8>,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

/// Why a request got no usable response.
#[derive(Debug)]
pub enum Http1Error {
    /// The base URL is not `http://host[:port][/prefix]`.
    Url(String),
    /// A piece of the request (path, token) would break its framing.
    Request(String),
    /// Resolving, connecting, writing or reading failed.
    Io {
        /// What the client was doing.
        during: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The request (connect, write and whole response) outlived its bound.
    Timeout {
        /// The bound, in ms.
        timeout_ms: u64,
    },
    /// The daemon closed the connection before a complete response.
    Closed {
        /// Whether part of the response had arrived.
        mid_response: bool,
    },
    /// Bytes arrived that no request asked for (this client does not
    /// pipeline).
    Unsolicited {
        /// How many bytes were waiting.
        bytes: usize,
    },
    /// The response's head breaks HTTP/1.1 syntax.
    Malformed(String),
    /// The head is longer than [`Limits::header_bytes_max`].
    HeadTooLarge {
        /// The bound, in bytes.
        header_bytes_max: usize,
    },
    /// `Content-Length` exceeds [`Limits::body_bytes_max`].
    BodyTooLarge {
        /// The announced length, in bytes.
        content_length: u64,
        /// The bound, in bytes.
        body_bytes_max: usize,
    },
    /// The response uses `Transfer-Encoding` (its value here).
    TransferEncoding(String),
    /// A response that has a body announced no `Content-Length`.
    NoContentLength {
        /// Its status.
        status: u16,
    },
}

impl fmt::Display for Http1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Http1Error::Url(message) => write!(f, "bad URL: {message}"),
            Http1Error::Request(message) => write!(f, "bad request: {message}"),
            Http1Error::Io { during, source } => write!(f, "{during}: {source}"),
            Http1Error::Timeout { timeout_ms } => {
                write!(f, "no complete response within {timeout_ms} ms")
            }
            Http1Error::Closed { mid_response: true } => {
                write!(
                    f,
                    "the daemon closed the connection in the middle of a response"
                )
            }
            Http1Error::Closed {
                mid_response: false,
            } => write!(f, "the daemon closed the connection before responding"),
            Http1Error::Unsolicited { bytes } => write!(
                f,
                "the daemon sent {bytes} bytes before the request (this client does not pipeline)"
            ),
            Http1Error::Malformed(message) => write!(f, "malformed response: {message}"),
            Http1Error::HeadTooLarge { header_bytes_max } => write!(
                f,
                "response head longer than {header_bytes_max} bytes (header_bytes_max)"
            ),
            Http1Error::BodyTooLarge {
                content_length,
                body_bytes_max,
            } => write!(
                f,
                "response body of {content_length} bytes exceeds {body_bytes_max} bytes (body_bytes_max)"
            ),
            Http1Error::TransferEncoding(value) => write!(
                f,
                "response uses Transfer-Encoding: {value}; this client reads Content-Length bodies only"
            ),
            Http1Error::NoContentLength { status } => write!(
                f,
                "response {status} has a body but no Content-Length; this client does not read bodies delimited by close"
            ),
        }
    }
}

impl std::error::Error for Http1Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Http1Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The read buffer's size before it grows (up to `header_bytes_max`).
const BUFFER_BYTES_INITIAL: usize = 8 * 1_024;

/// Longest piece of a bad line quoted in an error, in bytes.
const QUOTE_BYTES_MAX: usize = 80;

/// A body being read: the head said `length` bytes.
#[derive(Debug)]
struct BodyInProgress {
    status: u16,
    keep_alive: bool,
    length: usize,
    body: Vec<u8>,
}

/// Parses responses out of one connection's bytes, keeping what follows a
/// response (pipelined bytes) for the next one. No I/O: read into
/// [`ResponseReader::spare`], report with [`ResponseReader::filled`], then
/// [`ResponseReader::parse`].
#[derive(Debug)]
pub struct ResponseReader {
    limits: Limits,
    /// Bytes `start..end` are received and not yet consumed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of `buf[start..end]` known not to begin the head's end.
    searched_bytes: usize,
    /// The head was parsed; the body is not complete.
    body: Option<BodyInProgress>,
}

impl ResponseReader {
    /// An empty reader bounded by `limits`.
    pub fn new(limits: Limits) -> ResponseReader {
        let initial = BUFFER_BYTES_INITIAL.min(limits.header_bytes_max).max(1);
        ResponseReader {
            limits,
            buf: vec![0; initial],
            start: 0,
            end: 0,
            searched_bytes: 0,
            body: None,
        }
    }

    /// Forgets every byte received (for a new connection).
    pub fn reset(&mut self) {
        self.start = 0;
        self.end = 0;
        self.searched_bytes = 0;
        self.body = None;
    }

    /// Bytes received and not yet part of a returned response.
    pub fn buffered_bytes(&self) -> usize {
        self.end - self.start + self.body.as_ref().map_or(0, |body| body.body.len())
    }

    /// Whether part of a response has arrived.
    pub fn in_response(&self) -> bool {
        self.buffered_bytes() > 0 || self.body.is_some()
    }

    /// Room to read the next bytes into (never empty): compacts or grows
    /// the buffer as needed. Call [`ResponseReader::parse`] first: a head
    /// that fills `header_bytes_max` is an error there.
    pub fn spare(&mut self) -> Result<&mut [u8], Http1Error> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.searched_bytes = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < self.limits.header_bytes_max {
                let grown = (self.buf.len() * 2).min(self.limits.header_bytes_max);
                self.buf.resize(grown, 0);
            } else {
                return Err(Http1Error::HeadTooLarge {
                    header_bytes_max: self.limits.header_bytes_max,
                });
            }
        }
        Ok(&mut self.buf[self.end..])
    }

    /// Records that `bytes` were read into [`ResponseReader::spare`].
    pub fn filled(&mut self, bytes: usize) {
        self.end = (self.end + bytes).min(self.buf.len());
    }

    /// The next complete response, if the bytes received hold one;
    /// interim (1xx) responses are skipped.
    pub fn parse(&mut self) -> Result<Option<Response>, Http1Error> {
        let mut progress = match self.body.take() {
            Some(progress) => progress,
            None => match self.parse_head()? {
                Some(progress) => progress,
                None => return Ok(None),
            },
        };
        let take = (progress.length - progress.body.len()).min(self.end - self.start);
        progress
            .body
            .extend_from_slice(&self.buf[self.start..self.start + take]);
        self.start += take;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if progress.body.len() < progress.length {
            self.body = Some(progress);
            return Ok(None);
        }
        Ok(Some(Response {
            status: progress.status,
            body: progress.body,
            keep_alive: progress.keep_alive,
        }))
    }

    /// Consumes the next final response's head, if it has arrived
    /// (interim 1xx responses are consumed and skipped), and says how long
    /// its body is.
    fn parse_head(&mut self) -> Result<Option<BodyInProgress>, Http1Error> {
        loop {
            let Some(head_bytes) = self.find_head_end()? else {
                return Ok(None);
            };
            let head = parse_head(&self.buf[self.start..self.start + head_bytes])?;
            self.start += head_bytes;
            self.searched_bytes = 0;
            if head.status == 101 {
                return Err(Http1Error::Malformed(
                    "101 Switching Protocols, which no request asked for".into(),
                ));
            }
            if (100..200).contains(&head.status) {
                continue;
            }
            let length = if head.status == 204 || head.status == 304 {
                0
            } else {
                head.content_length.ok_or(Http1Error::NoContentLength {
                    status: head.status,
                })?
            };
            let length = usize::try_from(length)
                .ok()
                .filter(|length| *length <= self.limits.body_bytes_max)
                .ok_or(Http1Error::BodyTooLarge {
                    content_length: length,
                    body_bytes_max: self.limits.body_bytes_max,
                })?;
            return Ok(Some(BodyInProgress {
                status: head.status,
                keep_alive: head.keep_alive,
                length,
                body: Vec::with_capacity(length),
            }));
        }
    }

    /// The length of the head (through its blank line) if it has arrived.
    fn find_head_end(&mut self) -> Result<Option<usize>, Http1Error> {
        let window = &self.buf[self.start..self.end];
        let from = self.searched_bytes.min(window.len());
        let found = window[from..]
            .windows(4)
            .position(|four| four == b"\r\n\r\n");
        let too_large = Http1Error::HeadTooLarge {
            header_bytes_max: self.limits.header_bytes_max,
        };
        match found {
            Some(at) => {
                let head_bytes = from + at + 4;
                if head_bytes > self.limits.header_bytes_max {
                    return Err(too_large);
                }
                Ok(Some(head_bytes))
            }
            // No end within the bound: the head is longer than the bound.
            None if window.len() >= self.limits.header_bytes_max => Err(too_large),
            None => {
                self.searched_bytes = window.len().saturating_sub(3);
                Ok(None)
            }
        }
    }
}

/// What a response's head says about framing.
#[derive(Debug)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    keep_alive: bool,
}

/// Quotes a piece of a bad line for an error message.
fn quote(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(QUOTE_BYTES_MAX)];
    let mut quoted = format!("{:?}", String::from_utf8_lossy(shown));
    if bytes.len() > QUOTE_BYTES_MAX {
        quoted.push('…');
    }
    quoted
}

/// A token character (RFC 9110 5.6.2), as in header names.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Strips optional whitespace (spaces and tabs) on both sides.
fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// The lines of `text`, split at each CRLF (a bare CR or LF stays in its
/// line, for [`has_control_breaks`] to refuse).
fn crlf_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.windows(2).position(|pair| pair == b"\r\n") {
            Some(at) => {
                rest = Some(&current[at + 2..]);
                Some(&current[..at])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Whether a line holds a CR, an LF or a NUL (none belongs in a head line).
fn has_control_breaks(line: &[u8]) -> bool {
    line.iter().any(|byte| matches!(byte, b'\r' | b'\n' | 0))
}

/// Parses a head: the status line and headers, ending in `\r\n\r\n`.
fn parse_head(head: &[u8]) -> Result<Head, Http1Error> {
    let text = head.strip_suffix(b"\r\n\r\n").unwrap_or(head);
    let mut lines = crlf_lines(text);
    let status_line = lines.next().unwrap_or_default();
    if has_control_breaks(status_line) {
        return Err(Http1Error::Malformed(format!(
            "a bare CR or LF, or a NUL, in the status line {}",
            quote(status_line)
        )));
    }
    let (http_1_0, rest) = if let Some(rest) = status_line.strip_prefix(b"HTTP/1.1 ") {
        (false, rest)
    } else if let Some(rest) = status_line.strip_prefix(b"HTTP/1.0 ") {
        (true, rest)
    } else {
        return Err(Http1Error::Malformed(format!(
            "status line {} is not HTTP/1.1 or HTTP/1.0",
            quote(status_line)
        )));
    };
    let status = match rest {
        [a, b, c] | [a, b, c, b' ', ..]
            if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() =>
        {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => {
            return Err(Http1Error::Malformed(format!(
                "status line {} has no three-digit status",
                quote(status_line)
            )));
        }
    };
    if status < 100 {
        return Err(Http1Error::Malformed(format!("status {status} below 100")));
    }
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<Vec<u8>> = None;
    let (mut close, mut keep_alive_token) = (false, false);
    for line in lines {
        if has_control_breaks(line) {
            return Err(Http1Error::Malformed(format!(
                "a bare CR or LF, or a NUL, in header line {}",
                quote(line)
            )));
        }
        if matches!(line.first(), Some(b' ' | b'\t')) {
            return Err(Http1Error::Malformed(format!(
                "obsolete line folding at {}",
                quote(line)
            )));
        }
        let Some(colon) = line.iter().position(|byte| *byte == b':') else {
            return Err(Http1Error::Malformed(format!(
                "header line {} has no colon",
                quote(line)
            )));
        };
        let (name, value) = (&line[..colon], trim_ows(&line[colon + 1..]));
        if name.is_empty() || !name.iter().all(|byte| is_token_byte(*byte)) {
            return Err(Http1Error::Malformed(format!(
                "header name {} is not a token",
                quote(name)
            )));
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let length = parse_content_length(value)?;
            if content_length.is_some_and(|earlier| earlier != length) {
                return Err(Http1Error::Malformed(format!(
                    "two different Content-Length headers ({} and {length})",
                    content_length.unwrap_or_default()
                )));
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let all = transfer_encoding.get_or_insert_with(Vec::new);
            if !all.is_empty() {
                all.extend_from_slice(b", ");
            }
            all.extend_from_slice(value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for option in value.split(|byte| *byte == b',').map(trim_ows) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive_token |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    if let Some(value) = transfer_encoding {
        return Err(Http1Error::TransferEncoding(
            String::from_utf8_lossy(&value).into_owned(),
        ));
    }
    Ok(Head {
        status,
        content_length,
        keep_alive: !close && (!http_1_0 || keep_alive_token),
    })
}

/// A `Content-Length` value: decimal digits only, no sign, no list.
fn parse_content_length(value: &[u8]) -> Result<u64, Http1Error> {
    let bad = || Http1Error::Malformed(format!("Content-Length {} is not a length", quote(value)));
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    value.iter().try_fold(0u64, |length, digit| {
        length
            .checked_mul(10)
            .and_then(|length| length.checked_add(u64::from(digit - b'0')))
            .ok_or_else(bad)
    })
}

/// The daemon behind a base URL `http://host[:port][/prefix]`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    address: SocketAddr,
    authority: String,
    path_prefix: String,
}

impl Endpoint {
    /// Parses `url` and resolves its host (the first address wins).
    pub async fn resolve(url: &str) -> Result<Endpoint, Http1Error> {
        let (authority, host, port, path_prefix) = split_url(url)?;
        let address = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|source| Http1Error::Io {
                during: "resolving the daemon's host",
                source,
            })?
            .next()
            .ok_or_else(|| Http1Error::Url(format!("{host} resolves to no address")))?;
        Ok(Endpoint {
            address,
            authority,
            path_prefix,
        })
    }

    /// The resolved address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The bytes of an empty `POST` to `path_and_query` (which starts with
    /// `/`, after the URL's prefix), with a bearer token if given.
    pub fn post_request(
        &self,
        path_and_query: &str,
        bearer_token: Option<&str>,
    ) -> Result<Vec<u8>, Http1Error> {
        if !path_and_query.starts_with('/') || !path_and_query.bytes().all(is_visible_ascii) {
            return Err(Http1Error::Request(format!(
                "path {path_and_query:?} must start with / and hold only visible ASCII"
            )));
        }
        let mut request = format!(
            "POST {}{path_and_query} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n",
            self.path_prefix, self.authority
        );
        if let Some(token) = bearer_token {
            if token.is_empty() || !token.bytes().all(is_visible_ascii) {
                return Err(Http1Error::Request(
                    "the bearer token must be non-empty visible ASCII".into(),
                ));
            }
            request.push_str("Authorization: Bearer ");
            request.push_str(token);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        Ok(request.into_bytes())
    }
}

/// Printable ASCII other than space.
fn is_visible_ascii(byte: u8) -> bool {
    (0x21..=0x7e).contains(&byte)
}

/// `http://host[:port][/prefix]` → (authority, host, port, prefix without
/// a trailing `/`).
fn split_url(url: &str) -> Result<(String, String, u16, String), Http1Error> {
    let scheme_end = url
        .find("://")
        .ok_or_else(|| Http1Error::Url(format!("{url:?} has no scheme (http://…)")))?;
    let scheme = &url[..scheme_end];
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(Http1Error::Url(format!(
            "scheme {scheme:?}: the bench's HTTP/1.1 client speaks plain http only"
        )));
    }
    let rest = &url[scheme_end + 3..];
    if !rest.bytes().all(is_visible_ascii) || rest.contains(['?', '#', '@']) {
        return Err(Http1Error::Url(format!(
            "{url:?}: expected http://host[:port][/prefix], without spaces, query, fragment or user"
        )));
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| Http1Error::Url(format!("{authority:?}: unclosed [")))?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(Http1Error::Url(format!("{authority:?}: bad port"))),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(Http1Error::Url(format!("{url:?} has no host")));
    }
    let port = match port {
        None => 80,
        // Digits only: `parse` would also take a sign.
        Some(port) => Some(port)
            .filter(|port| !port.is_empty() && port.bytes().all(|byte| byte.is_ascii_digit()))
            .and_then(|port| port.parse::<u16>().ok())
            .filter(|port| *port > 0)
            .ok_or_else(|| Http1Error::Url(format!("{authority:?}: bad port")))?,
    };
    Ok((
        authority.to_string(),
        host.to_string(),
        port,
        path.trim_end_matches('/').to_string(),
    ))
}

/// One keep-alive connection to the daemon, opened on first use and again
/// after the daemon (or an error) ends it.
#[derive(Debug)]
pub struct Connection {
    address: SocketAddr,
    stream: Option<TcpStream>,
    reader: ResponseReader,
}

impl Connection {
    /// A connection to `address`, not yet opened.
    pub fn new(address: SocketAddr, limits: Limits) -> Connection {
        Connection {
            address,
            stream: None,
            reader: ResponseReader::new(limits),
        }
    }

    /// Sends `request` (complete bytes, e.g. from
    /// [`Endpoint::post_request`]) and reads its response, all within
    /// `timeout`. On any error the connection is closed, so the next
    /// request starts clean.
    pub async fn request(
        &mut self,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Response, Http1Error> {
        let result = match tokio::time::timeout(timeout, self.exchange(request)).await {
            Ok(result) => result,
            Err(_) => Err(Http1Error::Timeout {
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        };
        if !matches!(&result, Ok(response) if response.keep_alive) {
            self.close();
        }
        result
    }

    /// Drops the TCP connection and whatever it had sent.
    pub fn close(&mut self) {
        self.stream = None;
        self.reader.reset();
    }

    async fn exchange(&mut self, request: &[u8]) -> Result<Response, Http1Error> {
        let Connection {
            address,
            stream,
            reader,
        } = self;
        let stream = match stream {
            Some(stream) => stream,
            None => {
                let opened =
                    TcpStream::connect(*address)
                        .await
                        .map_err(|source| Http1Error::Io {
                            during: "connecting to the daemon",
                            source,
                        })?;
                opened.set_nodelay(true).map_err(|source| Http1Error::Io {
                    during: "setting TCP_NODELAY",
                    source,
                })?;
                reader.reset();
                stream.insert(opened)
            }
        };
        if reader.in_response() {
            return Err(Http1Error::Unsolicited {
                bytes: reader.buffered_bytes(),
            });
        }
        stream
            .write_all(request)
            .await
            .map_err(|source| Http1Error::Io {
                during: "writing the request",
                source,
            })?;
        loop {
            if let Some(response) = reader.parse()? {
                return Ok(response);
            }
            let read = stream
                .read(reader.spare()?)
                .await
                .map_err(|source| Http1Error::Io {
                    during: "reading the response",
                    source,
                })?;
            if read == 0 {
                return Err(Http1Error::Closed {
                    mid_response: reader.in_response(),
                });
            }
            reader.filled(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` to a fresh reader in pieces of `piece` bytes and
    /// collects every response, plus the bytes left over.
    fn feed(
        bytes: &[u8],
        piece: usize,
        limits: Limits,
    ) -> Result<(Vec<Response>, usize), Http1Error> {
        let mut reader = ResponseReader::new(limits);
        let mut responses = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            let mut chunk = chunk;
            while !chunk.is_empty() {
                while let Some(response) = reader.parse()? {
                    responses.push(response);
                }
                let spare = reader.spare()?;
                let n = spare.len().min(chunk.len());
                spare[..n].copy_from_slice(&chunk[..n]);
                reader.filled(n);
                chunk = &chunk[n..];
            }
        }
        while let Some(response) = reader.parse()? {
            responses.push(response);
        }
        Ok((responses, reader.buffered_bytes()))
    }

    fn one(bytes: &[u8]) -> Result<Response, Http1Error> {
        let (mut responses, left) = feed(bytes, bytes.len(), Limits::default())?;
        assert_eq!(left, 0, "bytes left over");
        assert_eq!(responses.len(), 1, "responses: {responses:?}");
        Ok(responses.remove(0))
    }

    const OK_HELLO: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\nhotq-enqueued-at-ms: 1795345315021\r\ncontent-length: 5\r\ndate: Sun, 22 Nov 2026 11:01:55 GMT\r\n\r\nhello";
    const NO_CONTENT: &[u8] =
        b"HTTP/1.1 204 No Content\r\ndate: Sun, 22 Nov 2026 11:01:55 GMT\r\n\r\n";

    #[test]
    fn a_body_is_read_by_content_length() {
        let response = one(OK_HELLO).unwrap();
        assert_eq!(
            response,
            Response {
                status: 200,
                body: b"hello".to_vec(),
                keep_alive: true
            }
        );
    }

    #[test]
    fn header_names_are_case_insensitive() {
        let response =
            one(b"HTTP/1.1 200 OK\r\nCONTENT-Length:\t3 \r\nConnection: Close\r\n\r\nabc").unwrap();
        assert_eq!(response.body, b"abc");
        assert!(!response.keep_alive);
    }

    #[test]
    fn no_content_and_not_modified_have_no_body() {
        let (responses, left) = feed(
            b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
            usize::MAX,
            Limits::default(),
        )
        .unwrap();
        assert_eq!(left, 0);
        let statuses: Vec<(u16, usize)> =
            responses.iter().map(|r| (r.status, r.body.len())).collect();
        assert_eq!(statuses, [(204, 0), (304, 0), (200, 1)]);
    }

    #[test]
    fn interim_responses_are_skipped() {
        let response =
            one(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
        assert_eq!(
            (response.status, response.body.as_slice()),
            (200, &b"ok"[..])
        );
        assert!(matches!(
            one(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"),
            Err(Http1Error::Malformed(_))
        ));
    }

    #[test]
    fn chunked_and_other_transfer_encodings_are_refused() {
        let chunked =
            one(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
        match chunked {
            Err(error @ Http1Error::TransferEncoding(_)) => {
                assert!(error.to_string().contains("chunked"), "{error}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(matches!(
            one(b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ncontent-length: 3\r\n\r\nabc"),
            Err(Http1Error::TransferEncoding(_))
        ));
    }

    #[test]
    fn a_body_without_content_length_is_refused() {
        let error = one(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close").unwrap_err();
        assert!(
            matches!(error, Http1Error::NoContentLength { status: 200 }),
            "{error}"
        );
        assert!(matches!(
            one(b"HTTP/1.1 503 Service Unavailable\r\n\r\n"),
            Err(Http1Error::NoContentLength { status: 503 })
        ));
    }

    #[test]
    fn every_split_of_two_pipelined_responses_parses_the_same() {
        let mut both = OK_HELLO.to_vec();
        both.extend_from_slice(NO_CONTENT);
        for piece in 1..=both.len() {
            let (responses, left) = feed(&both, piece, Limits::default()).unwrap();
            assert_eq!(left, 0, "piece {piece}");
            let got: Vec<(u16, &[u8])> = responses
                .iter()
                .map(|r| (r.status, r.body.as_slice()))
                .collect();
            assert_eq!(
                got,
                [(200, &b"hello"[..]), (204, &b""[..])],
                "piece {piece}"
            );
        }
    }

    #[test]
    fn a_body_larger_than_the_buffer_arrives_whole() {
        let body: Vec<u8> = (0..100_000u32).map(|n| (n % 251) as u8).collect();
        let mut bytes =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        bytes.extend_from_slice(&body);
        for piece in [1_000, 4_096, 65_536, bytes.len()] {
            let (responses, left) = feed(&bytes, piece, Limits::default()).unwrap();
            assert_eq!(left, 0);
            assert_eq!(responses.len(), 1);
            assert_eq!(responses[0].body, body, "piece {piece}");
        }
    }

    #[test]
    fn pipelined_leftover_bytes_wait_for_the_next_response() {
        let mut reader = ResponseReader::new(Limits::default());
        let mut bytes = OK_HELLO.to_vec();
        // The first response and the first 10 bytes of the next one.
        bytes.extend_from_slice(&NO_CONTENT[..10]);
        reader.spare().unwrap()[..bytes.len()].copy_from_slice(&bytes);
        reader.filled(bytes.len());
        assert_eq!(reader.parse().unwrap().map(|r| r.status), Some(200));
        assert_eq!(reader.buffered_bytes(), 10);
        assert!(reader.in_response());
        assert_eq!(reader.parse().unwrap(), None);
        let rest = &NO_CONTENT[10..];
        reader.spare().unwrap()[..rest.len()].copy_from_slice(rest);
        reader.filled(rest.len());
        assert_eq!(reader.parse().unwrap().map(|r| r.status), Some(204));
        assert!(!reader.in_response());
    }

    #[test]
    fn an_oversize_head_is_refused() {
        let limits = Limits {
            header_bytes_max: 256,
            ..Limits::default()
        };
        let mut bytes = b"HTTP/1.1 200 OK\r\nx-filler: ".to_vec();
        bytes.resize(1_000, b'a');
        bytes.extend_from_slice(b"\r\ncontent-length: 0\r\n\r\n");
        for piece in [1, 7, 100, bytes.len()] {
            assert!(
                matches!(
                    feed(&bytes, piece, limits),
                    Err(Http1Error::HeadTooLarge {
                        header_bytes_max: 256
                    })
                ),
                "piece {piece}"
            );
        }
        // A complete head of exactly the bound is fine; one byte more is not.
        let exact = |length: usize| {
            let mut head = b"HTTP/1.1 204 No Content\r\nx: ".to_vec();
            head.resize(length - 4, b'a');
            head.extend_from_slice(b"\r\n\r\n");
            feed(&head, head.len(), limits)
        };
        assert_eq!(exact(256).unwrap().0.len(), 1);
        assert!(matches!(exact(257), Err(Http1Error::HeadTooLarge { .. })));
    }

    #[test]
    fn an_oversize_body_is_refused_before_it_is_read() {
        let limits = Limits {
            body_bytes_max: 10,
            ..Limits::default()
        };
        assert!(matches!(
            feed(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", 64, limits),
            Err(Http1Error::BodyTooLarge {
                content_length: 11,
                body_bytes_max: 10
            })
        ));
        assert!(matches!(
            one(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            Err(Http1Error::Malformed(_))
        ));
    }

    #[test]
    fn malformed_heads_are_errors_not_panics() {
        let bad: &[&[u8]] = &[
            b"HTTP/2 200 OK\r\n\r\n",
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n bad: fold\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: +5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!",
            b"HTTP/1.1 200 OK\r\ncontent-length: \r\n\r\n",
            b"HTTP/1.1 200 OK\nx: bare lf\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: bare\rcr\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: trailing cr\r\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: nul\0\r\n\r\n",
            b"\r\n\r\n",
        ];
        for head in bad {
            let result = one(head);
            assert!(
                matches!(result, Err(Http1Error::Malformed(_))),
                "{:?} gave {result:?}",
                String::from_utf8_lossy(head)
            );
        }
        // Equal duplicates are allowed (RFC 9110 8.6).
        let twice =
            one(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!(twice.body, b"ok");
    }

    #[test]
    fn http_1_0_closes_unless_kept_alive() {
        assert!(!one(b"HTTP/1.0 204 No Content\r\n\r\n").unwrap().keep_alive);
        assert!(
            one(b"HTTP/1.0 204 No Content\r\nConnection: Keep-Alive\r\n\r\n")
                .unwrap()
                .keep_alive
        );
        assert!(
            !one(b"HTTP/1.1 204 No Content\r\nconnection: upgrade, close\r\n\r\n")
                .unwrap()
                .keep_alive
        );
    }

    #[test]
    fn urls_split_into_authority_host_port_and_prefix() {
        let split = |url: &str| split_url(url).map_err(|e| e.to_string());
        assert_eq!(
            split("http://127.0.0.1:7070").unwrap(),
            ("127.0.0.1:7070".into(), "127.0.0.1".into(), 7070, "".into())
        );
        assert_eq!(
            split("HTTP://example.test/base/").unwrap(),
            (
                "example.test".into(),
                "example.test".into(),
                80,
                "/base".into()
            )
        );
        assert_eq!(
            split("http://[::1]:8080/").unwrap(),
            ("[::1]:8080".into(), "::1".into(), 8080, "".into())
        );
        for bad in [
            "127.0.0.1:7070",
            "https://example.test",
            "http://",
            "http://:80",
            "http://host:0",
            "http://host:65536",
            "http://host:+80",
            "http://host:80:90",
            "http://[::1",
            "http://[::1]x",
            "http://user@host",
            "http://host/a b",
            "http://host/?q=1",
        ] {
            assert!(split(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn requests_are_built_once_and_strictly() {
        let endpoint = Endpoint {
            address: "127.0.0.1:7070".parse().unwrap(),
            authority: "127.0.0.1:7070".into(),
            path_prefix: "/base".into(),
        };
        let request = endpoint
            .post_request("/v1/queues/q/pop?wait_ms=5", Some("s3cret"))
            .unwrap();
        assert_eq!(
            String::from_utf8(request).unwrap(),
            "POST /base/v1/queues/q/pop?wait_ms=5 HTTP/1.1\r\nHost: 127.0.0.1:7070\r\nContent-Length: 0\r\nAuthorization: Bearer s3cret\r\n\r\n"
        );
        assert!(endpoint.post_request("/q", Some("a\r\nx: y")).is_err());
        assert!(endpoint.post_request("/q", Some("")).is_err());
        assert!(endpoint.post_request("/q p", None).is_err());
        assert!(endpoint.post_request("q", None).is_err());
    }

    /// A one-connection-at-a-time server: for each connection accepted,
    /// reads requests (heads only) and answers each with the next of
    /// `answers` for that connection. Returns the number of connections.
    async fn serve(
        listener: tokio::net::TcpListener,
        connections: Vec<Vec<&'static [u8]>>,
    ) -> usize {
        let mut accepted = 0;
        for answers in connections {
            let (mut stream, _) = listener.accept().await.unwrap();
            accepted += 1;
            let mut received = Vec::new();
            for answer in answers {
                while !received.windows(4).any(|four| four == b"\r\n\r\n") {
                    let mut chunk = [0u8; 1_024];
                    let read = stream.read(&mut chunk).await.unwrap();
                    assert!(read > 0, "client closed early");
                    received.extend_from_slice(&chunk[..read]);
                }
                let end = received
                    .windows(4)
                    .position(|four| four == b"\r\n\r\n")
                    .unwrap();
                received.drain(..end + 4);
                stream.write_all(answer).await.unwrap();
            }
        }
        accepted
    }

    const BOUND: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn one_connection_carries_many_requests() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, vec![vec![OK_HELLO, NO_CONTENT, OK_HELLO]]));
        let mut connection = Connection::new(address, Limits::default());
        let request = b"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(connection.request(request, BOUND).await.unwrap().status);
        }
        assert_eq!(statuses, [200, 204, 200]);
        assert_eq!(server.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn connection_close_means_the_next_request_reconnects() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let closing: &[u8] = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
        let server = tokio::spawn(serve(listener, vec![vec![closing], vec![OK_HELLO]]));
        let mut connection = Connection::new(address, Limits::default());
        let request = b"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
        let first = connection.request(request, BOUND).await.unwrap();
        assert_eq!((first.status, first.keep_alive), (204, false));
        let second = connection.request(request, BOUND).await.unwrap();
        assert_eq!(
            (second.status, second.body.as_slice()),
            (200, &b"hello"[..])
        );
        assert_eq!(server.await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_silent_daemon_times_the_request_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        // Accepts, then holds the connection without answering until the
        // client gives up and closes it.
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut sink = [0u8; 1_024];
            while stream.read(&mut sink).await.unwrap_or(0) > 0 {}
        });
        let mut connection = Connection::new(address, Limits::default());
        let request = b"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
        let result = connection.request(request, Duration::from_millis(50)).await;
        assert!(
            matches!(result, Err(Http1Error::Timeout { timeout_ms: 50 })),
            "{result:?}"
        );
        // The timed-out connection was dropped, so the server sees EOF.
        tokio::time::timeout(BOUND, server).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_daemon_that_hangs_up_mid_response_is_an_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let cut: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal";
        let server = tokio::spawn(serve(listener, vec![vec![cut]]));
        let mut connection = Connection::new(address, Limits::default());
        let request = b"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
        // The server task drops its stream once it has answered.
        let result = connection.request(request, BOUND).await;
        assert!(
            matches!(result, Err(Http1Error::Closed { mid_response: true })),
            "{result:?}"
        );
        assert_eq!(server.await.unwrap(), 1);
    }
}

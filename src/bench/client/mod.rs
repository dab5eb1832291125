//! The bench's HTTP client: hyper's connection-level HTTP/1.1 client
//! (`hyper::client::conn::http1`), one keep-alive connection per worker,
//! like wrk or peerbench: no pool and no per-request work beyond hyper's
//! own, because the load generator shares the daemon's cores and every
//! microsecond it spends is taken from the daemon it measures.
//!
//! Bounded: the response head by [`Limits::header_bytes_max`] (hyper's
//! `max_header_size`), the body by [`Limits::body_bytes_max`] (refused from
//! its `Content-Length` before reading, and counted while reading), every
//! request (connect, send, whole body) by a timeout. A connection that
//! failed or that the daemon closed is dropped; the next request connects
//! anew.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, HeaderMap, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Bounds on one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest head (status line and headers), in bytes.
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
    /// Status code.
    pub status: u16,
    /// The `hotq-receipt` header of a leased pop, if any.
    pub receipt: Option<String>,
    /// The `hotq-acked` header of a pop that carried acks, if any.
    pub acked: Option<String>,
    /// The whole body.
    pub body: Bytes,
}

/// Why a request got no usable response.
#[derive(Debug)]
pub enum ClientError {
    /// The base URL is not `http://host[:port][/prefix]`.
    Url(String),
    /// A piece of the request (path, token) is not valid HTTP.
    Request(String),
    /// Resolving or connecting failed.
    Io {
        /// What the client was doing.
        during: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The request (connect, send and whole response) outlived its bound.
    Timeout {
        /// The bound, in ms.
        timeout_ms: u64,
    },
    /// The body is larger than [`Limits::body_bytes_max`].
    BodyTooLarge {
        /// The bound, in bytes.
        body_bytes_max: usize,
    },
    /// HTTP failed: a malformed or oversized head, a closed connection.
    Http(hyper::Error),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Url(message) => write!(f, "bad URL: {message}"),
            ClientError::Request(message) => write!(f, "bad request: {message}"),
            ClientError::Io { during, source } => write!(f, "{during}: {source}"),
            ClientError::Timeout { timeout_ms } => {
                write!(f, "no complete response within {timeout_ms} ms")
            }
            ClientError::BodyTooLarge { body_bytes_max } => {
                write!(f, "response body over {body_bytes_max} bytes")
            }
            ClientError::Http(error) => write!(f, "HTTP: {error}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Io { source, .. } => Some(source),
            ClientError::Http(error) => Some(error),
            _ => None,
        }
    }
}

/// The daemon behind a base URL `http://host[:port][/prefix]`, with the
/// headers every request carries.
#[derive(Debug, Clone)]
pub struct Endpoint {
    address: SocketAddr,
    host: HeaderValue,
    authorization: Option<HeaderValue>,
    path_prefix: String,
    limits: Limits,
}

impl Endpoint {
    /// Parses `url`, resolves its host (the first address wins) and checks
    /// the bearer token.
    pub async fn resolve(
        url: &str,
        bearer_token: Option<&str>,
        limits: Limits,
    ) -> Result<Endpoint, ClientError> {
        let uri: Uri = url
            .parse()
            .map_err(|error| ClientError::Url(format!("{url:?}: {error}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(ClientError::Url(format!(
                "{url:?}: the bench speaks plain http:// only"
            )));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| ClientError::Url(format!("{url:?} has no host")))?;
        if uri.query().is_some() || authority.as_str().contains('@') {
            return Err(ClientError::Url(format!(
                "{url:?}: expected http://host[:port][/prefix], without query or user"
            )));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(80);
        let address = tokio::net::lookup_host((host, port))
            .await
            .map_err(|source| ClientError::Io {
                during: "resolving the daemon's host",
                source,
            })?
            .next()
            .ok_or_else(|| ClientError::Url(format!("{host} resolves to no address")))?;
        let authorization = bearer_token
            .map(|token| {
                HeaderValue::from_str(&format!("Bearer {token}"))
                    .ok()
                    .filter(|_| !token.is_empty())
                    .ok_or_else(|| {
                        ClientError::Request(
                            "the bearer token must be non-empty visible ASCII".into(),
                        )
                    })
            })
            .transpose()?;
        Ok(Endpoint {
            address,
            host: HeaderValue::from_str(authority.as_str())
                .map_err(|error| ClientError::Url(error.to_string()))?,
            authorization,
            path_prefix: uri.path().trim_end_matches('/').to_string(),
            limits,
        })
    }

    /// The request target for `path_and_query` (which starts with `/`,
    /// after the URL's prefix). Parse once, send many times.
    pub fn target(&self, path_and_query: &str) -> Result<Uri, ClientError> {
        if !path_and_query.starts_with('/') {
            return Err(ClientError::Request(format!(
                "path {path_and_query:?} must start with /"
            )));
        }
        format!("{}{path_and_query}", self.path_prefix)
            .parse()
            .map_err(|error| ClientError::Request(format!("{path_and_query:?}: {error}")))
    }
}

/// One keep-alive connection to the daemon.
#[derive(Debug)]
pub struct Connection {
    endpoint: Endpoint,
    /// Sends whole bodies: an empty one for `/v1` pops and acks, a JSON
    /// object for SQS calls.
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Drives the connection's I/O; aborted when the connection is dropped.
    driver: Option<JoinHandle<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

impl Connection {
    /// A connection to `endpoint`, not yet opened.
    pub fn new(endpoint: Endpoint) -> Connection {
        Connection {
            endpoint,
            sender: None,
            driver: None,
        }
    }

    /// Opens the connection now (if it is not open) within `timeout`, so a
    /// drain can connect every worker before its clock starts.
    pub async fn connect(&mut self, timeout: Duration) -> Result<(), ClientError> {
        match tokio::time::timeout(timeout, self.open()).await {
            Ok(opened) => opened,
            Err(_) => {
                self.close();
                Err(timeout_error(timeout))
            }
        }
    }

    /// Sends an empty `POST` to `target` and reads the whole response, all
    /// within `timeout`. On any error the connection is closed, so the next
    /// request starts clean.
    pub async fn post(&mut self, target: &Uri, timeout: Duration) -> Result<Response, ClientError> {
        self.post_body(target, &HeaderMap::new(), Bytes::new(), timeout)
            .await
    }

    /// Sends a `POST` to `target` with `headers` (beside `Host` and the
    /// endpoint's `Authorization`) and `body`, as [`Connection::post`].
    pub async fn post_body(
        &mut self,
        target: &Uri,
        headers: &HeaderMap,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let exchanged = self.exchange(target, headers, body);
        let result = match tokio::time::timeout(timeout, exchanged).await {
            Ok(result) => result,
            Err(_) => Err(timeout_error(timeout)),
        };
        if result.is_err() {
            self.close();
        }
        result
    }

    /// Drops the connection.
    pub fn close(&mut self) {
        self.sender = None;
        if let Some(driver) = self.driver.take() {
            driver.abort();
        }
    }

    async fn open(&mut self) -> Result<(), ClientError> {
        if self
            .sender
            .as_ref()
            .is_some_and(|sender| !sender.is_closed())
        {
            return Ok(());
        }
        self.close();
        let stream = TcpStream::connect(self.endpoint.address)
            .await
            .map_err(|source| ClientError::Io {
                during: "connecting to the daemon",
                source,
            })?;
        stream.set_nodelay(true).map_err(|source| ClientError::Io {
            during: "setting TCP_NODELAY",
            source,
        })?;
        let (sender, connection) = Builder::new()
            .max_header_size(self.endpoint.limits.header_bytes_max)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(ClientError::Http)?;
        // The connection's error, if any, reaches the caller through the
        // request it fails.
        self.driver = Some(tokio::spawn(async move {
            let _ = connection.await;
        }));
        self.sender = Some(sender);
        Ok(())
    }

    /// The sender, ready for a request (connecting anew if needed).
    async fn ready(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, ClientError> {
        self.open().await?;
        let ready = self.sender.as_mut().expect("opened above").ready().await;
        if ready.is_err() {
            // The daemon closed the idle connection (`Connection: close`,
            // or an idle timeout) after `open` looked: nothing was sent
            // yet, so connecting anew is safe.
            self.close();
            self.open().await?;
            let sender = self.sender.as_mut().expect("opened above");
            sender.ready().await.map_err(ClientError::Http)?;
        }
        Ok(self.sender.as_mut().expect("opened above"))
    }

    async fn exchange(
        &mut self,
        target: &Uri,
        extra_headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, ClientError> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = target.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, self.endpoint.host.clone());
        if let Some(authorization) = &self.endpoint.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        for (name, value) in extra_headers {
            headers.insert(name, value.clone());
        }
        let body_bytes_max = self.endpoint.limits.body_bytes_max;
        let response = self
            .ready()
            .await?
            .send_request(request)
            .await
            .map_err(ClientError::Http)?;
        read_response(response, body_bytes_max).await
    }
}

/// Reads `response` whole, its body bounded by `body_bytes_max`.
async fn read_response(
    response: hyper::Response<hyper::body::Incoming>,
    body_bytes_max: usize,
) -> Result<Response, ClientError> {
    let announced = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > body_bytes_max as u64) {
        return Err(ClientError::BodyTooLarge { body_bytes_max });
    }
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let (receipt, acked) = (header("hotq-receipt"), header("hotq-acked"));
    let body = Limited::new(response.into_body(), body_bytes_max)
        .collect()
        .await
        .map_err(|error| {
            if error.is::<LengthLimitError>() {
                return ClientError::BodyTooLarge { body_bytes_max };
            }
            match error.downcast::<hyper::Error>() {
                Ok(error) => ClientError::Http(*error),
                Err(other) => {
                    unreachable!("Limited yields its body's errors or its own: {other}")
                }
            }
        })?
        .to_bytes();
    Ok(Response {
        status,
        receipt,
        acked,
        body,
    })
}

fn timeout_error(timeout: Duration) -> ClientError {
    ClientError::Timeout {
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

#[cfg(test)]
mod tests;

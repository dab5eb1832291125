//! Noticing a client that hangs up while its request is handled.
//!
//! hyper looks for a closed connection during a request only while it has
//! no unread bytes: a client that sends a waiting pop, then more bytes (a
//! pipelined request, or only a trailing CRLF), then closes, is never
//! noticed, and its pop takes an item nobody receives. So the API's
//! connections go through [`Watched`], and [`unless_hung_up`] races each
//! request's handler against [`HangUp::gone`]: while a handler runs, the
//! socket is read ahead (at most [`READ_AHEAD_BYTES_MAX`] bytes, kept for
//! hyper in order); end of stream or a reset drops the handler, which for
//! a pop leaves the line and puts back what it was handed, and the
//! connection closes without serving the bytes that followed.
//!
//! An end of stream during a request counts as a hang-up, as in hyper
//! itself (half-closed connections are not supported): the client may
//! have only shut its write side, but nothing tells the two apart before
//! a write fails, and a waiting pop must not take an item on a guess.

use parking_lot::Mutex;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// Most bytes read ahead while a request is handled; past it the watch
/// stops reading (the client's sends back up) until hyper reads again, so
/// a hang-up behind more unread bytes than this is noticed only when the
/// handler ends.
pub const READ_AHEAD_BYTES_MAX: usize = 64 * 1024;

/// A listener whose connections are [`Watched`].
#[derive(Debug)]
pub struct WatchedListener(pub TcpListener);

impl Listener for WatchedListener {
    type Io = Watched;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Watched, std::net::SocketAddr) {
        // axum's accept: retries, and backs off on errors such as EMFILE.
        let (stream, address) = Listener::accept(&mut self.0).await;
        // A response is one write, sent whole: Nagle's algorithm could
        // only hold it back behind the client's delayed ACK.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
        (Watched::new(stream), address)
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection's read side, shared by hyper's reads and the watch.
#[derive(Debug)]
struct ReadSide {
    socket: OwnedReadHalf,
    /// Bytes the watch read and hyper has not, in order.
    ahead: Vec<u8>,
    /// The watch saw the read side end: hyper reads an end of stream and
    /// its writes fail, so nothing more is served on this connection.
    hung_up: bool,
}

impl ReadSide {
    /// Reads the socket into `ahead` until it would block, `ahead` is
    /// full, or the read side ends: `Ok` at the end of stream, the error
    /// (a reset, say) otherwise.
    fn read_ahead(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut chunk = [0u8; 4096];
        while self.ahead.len() < READ_AHEAD_BYTES_MAX {
            let room = (READ_AHEAD_BYTES_MAX - self.ahead.len()).min(chunk.len());
            let mut buf = ReadBuf::new(&mut chunk[..room]);
            match Pin::new(&mut self.socket).poll_read(cx, &mut buf) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => self.ahead.extend_from_slice(buf.filled()),
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            }
        }
        // Full: no waker is registered with the socket, so the watch
        // stays quiet until the handler ends and hyper reads again.
        Poll::Pending
    }
}

/// A TCP connection whose read side can be watched while hyper is not
/// reading it (see the module docs).
#[derive(Debug)]
pub struct Watched {
    read: Arc<Mutex<ReadSide>>,
    write: OwnedWriteHalf,
}

impl Watched {
    fn new(stream: TcpStream) -> Watched {
        let (socket, write) = stream.into_split();
        Watched {
            read: Arc::new(Mutex::new(ReadSide {
                socket,
                ahead: Vec::new(),
                hung_up: false,
            })),
            write,
        }
    }

    fn hung_up(&self) -> bool {
        self.read.lock().hung_up
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut side = self.read.lock();
        if side.hung_up {
            return Poll::Ready(Ok(()));
        }
        if !side.ahead.is_empty() {
            let taken = side.ahead.len().min(buf.remaining());
            buf.put_slice(&side.ahead[..taken]);
            side.ahead.drain(..taken);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut side.socket).poll_read(cx, buf)
    }
}

fn hung_up_error() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the client hung up")
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.hung_up() {
            return Poll::Ready(Err(hung_up_error()));
        }
        Pin::new(&mut self.write).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.hung_up() {
            return Poll::Ready(Err(hung_up_error()));
        }
        Pin::new(&mut self.write).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.write.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_shutdown(cx)
    }
}

/// A connection's hang-up watch, carried in each request's extensions as
/// `ConnectInfo<HangUp>`.
#[derive(Debug, Clone)]
pub struct HangUp(Arc<Mutex<ReadSide>>);

impl Connected<IncomingStream<'_, WatchedListener>> for HangUp {
    fn connect_info(stream: IncomingStream<'_, WatchedListener>) -> Self {
        HangUp(stream.io().read.clone())
    }
}

impl HangUp {
    /// Resolves when the client's read side ends (end of stream or an
    /// error), reading ahead what it sends meanwhile; from then on the
    /// connection serves nothing more.
    pub async fn gone(&self) {
        std::future::poll_fn(|cx| {
            let mut side = self.0.lock();
            if side.hung_up {
                return Poll::Ready(());
            }
            let ended = std::task::ready!(side.read_ahead(cx));
            side.hung_up = true;
            match ended {
                Ok(()) => tracing::debug!("client closed during a request"),
                Err(error) => tracing::debug!(%error, "client connection failed during a request"),
            }
            Poll::Ready(())
        })
        .await
    }
}

/// The hang-up watch of `request`'s connection; `None` for a request not
/// from a [`WatchedListener`] (it just runs).
pub fn watch_of(request: &Request) -> Option<HangUp> {
    request
        .extensions()
        .get::<ConnectInfo<HangUp>>()
        .map(|ConnectInfo(hang_up)| hang_up.clone())
}

/// Runs `handler` unless the client behind `hang_up` hangs up first; then
/// the handler is dropped before its next step (the watch is polled
/// first) and the answer is a 400 that is never sent.
pub async fn unless_hung_up(
    hang_up: Option<HangUp>,
    handler: impl Future<Output = Response>,
) -> Response {
    let Some(hang_up) = hang_up else {
        return handler.await;
    };
    tokio::select! {
        biased;
        () = hang_up.gone() => {
            // Never sent: the connection fails its writes from now on.
            StatusCode::BAD_REQUEST.into_response()
        }
        response = handler => response,
    }
}

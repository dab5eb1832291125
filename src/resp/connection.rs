//! One RESP connection, served by one task: it answers every whole
//! request its buffer holds, in order, then writes all their replies in
//! one write, then reads again. A pipeline of pops on one connection is
//! served one after another, each with its own item.
//!
//! While a command that may take items runs (a pop), the socket is read
//! ahead: the client closing its connection (end of stream or an error)
//! drops the command, and a pop dropped gives back what it was handed
//! (the core's give-back: see `crate::service::Hotq::pop`), as an HTTP
//! client hanging up does (`crate::server::hangup`). As there, an end of
//! stream counts as a hang-up.
//!
//! Bounded: a request not yet whole may hold at most
//! `resp.buffer_max_bytes` (a larger one is answered with an error and the
//! connection closed); replies are written once `resp.pipeline_depth_max`
//! of them or `resp.buffer_max_bytes` of them are waiting, and nothing
//! more is read until they are, so a client that does not read its
//! replies stops being served, not the daemon.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::sync::{OwnedSemaphorePermit, watch};

use super::cmd::{self, Args, Ctx, Session};
use super::frame::{ProtocolError, Reply, decode_request};
use super::stats;
use crate::server::state::AppState;
use crate::service::Store;

/// Bytes a buffer grows by when it runs short: a pop's request is ~40
/// bytes, a pipeline of them a few kB.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Spare room below which a read first grows the input buffer. The
/// decoded requests are views into that buffer, so while one runs the
/// buffer is shared and growing it means a new allocation: growing only
/// when little room is left lets ~400 pops share one 16 KiB buffer, where
/// growing by `READ_CHUNK_BYTES` before every read allocated (and the
/// kernel zeroed) a fresh one per request: 19% of a RESP connection's CPU
/// in a plain-pop drain (docs/profile.md, "Over RESP").
const READ_ROOM_MIN_BYTES: usize = 2 * 1024;

/// Makes room for a read in `input`, allocating only when little is left
/// (see [`READ_ROOM_MIN_BYTES`]).
fn room_to_read(input: &mut BytesMut) {
    if input.capacity() - input.len() < READ_ROOM_MIN_BYTES {
        input.reserve(READ_CHUNK_BYTES);
    }
}

/// Most bytes a request may hold before the connection authenticated.
const UNAUTHENTICATED_REQUEST_MAX_BYTES: usize = 64 * 1024;

/// What running one request came to.
enum Ran {
    /// Its reply, to be written.
    Replied(Reply),
    /// The client closed the connection while it ran: it was dropped.
    HungUp,
}

/// Serves `stream` until the client leaves, sends `QUIT`, breaks the
/// protocol, or the daemon stops.
pub async fn serve<S: Store>(
    state: Arc<AppState<S>>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    stats::connection_opened();
    let (mut reader, mut writer) = stream.into_split();
    let mut connection = Connection {
        session: Session::new(id, peer, state.config.token.is_some()),
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        output: BytesMut::with_capacity(READ_CHUNK_BYTES),
        buffer_max_bytes: state.config.resp.buffer_max_bytes,
        pipeline_depth_max: state.config.resp.pipeline_depth_max,
    };
    let served = connection.run(&state, &mut reader, &mut writer, stop).await;
    if let Err(error) = served {
        tracing::debug!(%error, %peer, "RESP connection ended");
    }
    stats::connection_closed();
}

struct Connection {
    session: Session,
    /// Bytes read and not yet decoded.
    input: BytesMut,
    /// Replies not yet written.
    output: BytesMut,
    buffer_max_bytes: usize,
    pipeline_depth_max: usize,
}

impl Connection {
    async fn run<S: Store>(
        &mut self,
        state: &AppState<S>,
        reader: &mut OwnedReadHalf,
        writer: &mut tokio::net::tcp::OwnedWriteHalf,
        mut stop: watch::Receiver<bool>,
    ) -> std::io::Result<()> {
        loop {
            let mut answered = 0;
            loop {
                let request = match decode_request(&mut self.input) {
                    Ok(Some(request)) => request,
                    Ok(None) => break,
                    Err(ProtocolError(line)) => {
                        stats::closed("protocol");
                        return self.close_with(writer, format!("ERR {line}")).await;
                    }
                };
                match self.answer(state, request, reader, &stop).await {
                    Ran::Replied(reply) => reply.encode(self.session.protocol, &mut self.output),
                    Ran::HungUp => return Ok(()),
                }
                if self.session.closing {
                    return writer.write_all(&self.output).await;
                }
                answered += 1;
                if answered >= self.pipeline_depth_max || self.output.len() >= self.buffer_max_bytes
                {
                    self.flush(writer).await?;
                    answered = 0;
                }
            }
            self.flush(writer).await?;
            let limit = self.request_max_bytes();
            if self.input.len() >= limit {
                stats::closed("buffer_max_bytes");
                let line = format!(
                    "ERR Protocol error: a request larger than {limit} bytes (resp.buffer_max_bytes; {UNAUTHENTICATED_REQUEST_MAX_BYTES} before AUTH)"
                );
                return self.close_with(writer, line).await;
            }
            room_to_read(&mut self.input);
            tokio::select! {
                read = reader.read_buf(&mut self.input) => {
                    if read? == 0 {
                        return Ok(());
                    }
                }
                () = super::stopped(&mut stop) => return Ok(()),
            }
        }
    }

    /// The most bytes a request not yet whole may hold: before `AUTH` (with
    /// a token set), only what `AUTH` or `HELLO` takes, as Redis limits
    /// unauthenticated clients.
    fn request_max_bytes(&self) -> usize {
        match self.session.authenticated {
            true => self.buffer_max_bytes,
            false => UNAUTHENTICATED_REQUEST_MAX_BYTES.min(self.buffer_max_bytes),
        }
    }

    /// Writes the replies waiting, in one write.
    async fn flush(&mut self, writer: &mut tokio::net::tcp::OwnedWriteHalf) -> std::io::Result<()> {
        if !self.output.is_empty() {
            writer.write_all(&self.output).await?;
            self.output.clear();
        }
        Ok(())
    }

    /// Writes the replies waiting and the error `line`, then closes.
    async fn close_with(
        &mut self,
        writer: &mut tokio::net::tcp::OwnedWriteHalf,
        line: String,
    ) -> std::io::Result<()> {
        Reply::error(line).encode(self.session.protocol, &mut self.output);
        self.flush(writer).await?;
        writer.shutdown().await
    }

    /// Runs one request: looked up, executed (watching for a hang-up when
    /// it may take items), counted.
    async fn answer<S: Store>(
        &mut self,
        state: &AppState<S>,
        request: Vec<Bytes>,
        reader: &mut OwnedReadHalf,
        stop: &watch::Receiver<bool>,
    ) -> Ran {
        let (spec, named_by) = match cmd::lookup(&request) {
            Ok(found) => found,
            Err((spec, error)) => {
                stats::command(spec, "error");
                return Ran::Replied(error.into_reply());
            }
        };
        let args = Args::new(request.into_iter().skip(named_by).collect());
        let mut ctx = Ctx {
            state,
            session: &mut self.session,
            stop,
        };
        let answer = if spec.takes_items {
            let run = cmd::execute(&mut ctx, spec, args);
            match unless_hung_up(run, reader, &mut self.input, self.buffer_max_bytes).await {
                Some(answer) => answer,
                None => return Ran::HungUp,
            }
        } else {
            cmd::execute(&mut ctx, spec, args).await
        };
        let reply = answer.unwrap_or_else(cmd::CmdError::into_reply);
        let outcome = match &reply {
            Reply::Error(_) => "error",
            Reply::Nil | Reply::NilArray => "empty",
            _ => "ok",
        };
        stats::command(Some(spec), outcome);
        Ran::Replied(reply)
    }
}

/// Runs `command` while reading the socket ahead into `input` (at most
/// `buffer_max_bytes`): `None` when the client closed first, `command`
/// then dropped before its next step.
async fn unless_hung_up<T>(
    command: impl Future<Output = T>,
    reader: &mut OwnedReadHalf,
    input: &mut BytesMut,
    buffer_max_bytes: usize,
) -> Option<T> {
    tokio::pin!(command);
    loop {
        let room = input.len() < buffer_max_bytes;
        if room {
            room_to_read(input);
        }
        // The socket first, as the HTTP front end checks a hang-up first:
        // a client that closed while its pop was being answered must not
        // be handed the items (they would be lost with the connection);
        // dropped here, the pop gives them back.
        tokio::select! {
            biased;
            read = reader.read_buf(input), if room => match read {
                Ok(0) | Err(_) => {
                    tracing::debug!("RESP client closed during a command");
                    return None;
                }
                Ok(_) => {}
            },
            answer = &mut command => return Some(answer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_still_running_does_not_make_the_next_read_allocate() {
        let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
        input.extend_from_slice(b"*2\r\n$3\r\nPOP\r\n$4\r\njobs\r\n");
        // The request's arguments are views into `input`'s buffer.
        let request = decode_request(&mut input).unwrap().unwrap();
        let buffer = input.as_ptr();
        room_to_read(&mut input);
        assert_eq!(input.as_ptr(), buffer, "the shared buffer was replaced");
        assert!(input.capacity() - input.len() >= READ_ROOM_MIN_BYTES);
        assert_eq!(request[1], Bytes::from("jobs"));
        // Short of room, it grows, whoever holds the old buffer.
        input.extend_from_slice(&vec![b'x'; input.capacity() - READ_ROOM_MIN_BYTES + 1]);
        room_to_read(&mut input);
        assert!(input.capacity() - input.len() >= READ_CHUNK_BYTES);
        assert_eq!(request[1], Bytes::from("jobs"));
    }
}

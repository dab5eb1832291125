//! The drain over the daemon's RESP listener (`--resp-addr`), in
//! peerbench's RESP patterns (its targets `resp`, `resp-leased`,
//! `resp-leased-next`, `resp-lpop`), with the HTTP drain's semantics
//! (`super::over_http`): every worker's connection is open before the clock
//! starts, one latency sample per item (a leased pop's includes its ack),
//! an empty answer while items are out is polled again after 1 ms. The
//! preload and the count of what is left go over HTTP (`--url`).
//!
//! Each worker speaks RESP2 over its own TCP connection through the same
//! codec as the listener (`redis-protocol`), one command and one reply at a
//! time, as a Redis client's connection does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use redis_protocol::resp2::types::BytesFrame as Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::LEASE_MS;
use super::over_http::Stats;
use super::report::{DrainResult, Tally, payloads};
use super::{BenchArgs, Mode, process_cpu_us};

/// Pause before polling again after an empty answer (peerbench's).
const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(1);
/// Most bytes a reply may take: one item of the largest size a daemon
/// takes (`payload_bytes_max`'s ceiling) and its framing.
const REPLY_BYTES_MAX: usize = crate::envelope::PAYLOAD_SIZE_MAX + 64 * 1024;

/// One RESP connection: a command out, its reply in.
struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
}

impl Connection {
    async fn open(
        address: &str,
        token: Option<&str>,
        bound: Duration,
    ) -> Result<Connection, String> {
        let stream = tokio::time::timeout(bound, TcpStream::connect(address))
            .await
            .map_err(|_| format!("connecting to {address} took over {bound:?}"))?
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let mut connection = Connection {
            stream,
            buffer: BytesMut::with_capacity(16 * 1024),
        };
        if let Some(token) = token {
            match connection.call(&[b"AUTH", token.as_bytes()], bound).await? {
                Frame::SimpleString(_) => {}
                other => return Err(format!("AUTH answered {other:?}")),
            }
        }
        Ok(connection)
    }

    /// Sends `words` as one command and reads its reply, within `bound`.
    async fn call(&mut self, words: &[&[u8]], bound: Duration) -> Result<Frame, String> {
        let mut request = Vec::with_capacity(64);
        request.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
        for word in words {
            request.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
            request.extend_from_slice(word);
            request.extend_from_slice(b"\r\n");
        }
        tokio::time::timeout(bound, async {
            self.stream
                .write_all(&request)
                .await
                .map_err(|e| e.to_string())?;
            self.reply().await
        })
        .await
        .map_err(|_| format!("no reply within {bound:?}"))?
    }

    async fn reply(&mut self) -> Result<Frame, String> {
        loop {
            let decoded = redis_protocol::resp2::decode::decode_bytes_mut(&mut self.buffer)
                .map_err(|e| format!("a reply is not RESP: {e}"))?;
            if let Some((frame, _, _)) = decoded {
                return match frame {
                    Frame::Error(line) => Err(format!("the daemon answered -{line}")),
                    frame => Ok(frame),
                };
            }
            if self.buffer.len() > REPLY_BYTES_MAX {
                return Err(format!("a reply of more than {REPLY_BYTES_MAX} bytes"));
            }
            self.buffer.reserve(16 * 1024);
            let read = self
                .stream
                .read_buf(&mut self.buffer)
                .await
                .map_err(|e| e.to_string())?;
            if read == 0 {
                return Err("the daemon closed the connection".into());
            }
        }
    }
}

/// One drain over RESP: a fresh queue preloaded over HTTP at `url`, then
/// `workers` workers pop it empty in `mode` over RESP at `resp_addr`.
pub async fn drain_resp(
    url: &str,
    resp_addr: &str,
    args: &BenchArgs,
    mode: Mode,
    workers: usize,
) -> Result<DrainResult, String> {
    let timeout = Duration::from_millis(args.wait_ms.saturating_add(30_000));
    let run = format!(
        "bench-resp-{}-{workers}-{}",
        mode.name(),
        rand::random::<u32>()
    );
    let preloaded = payloads(&run, args.items, args.payload_bytes);
    let stats = Stats::new(url, &run, args.token.as_deref(), timeout)?;
    stats.preload(&preloaded, args.groups).await?;
    let mut connections = Vec::with_capacity(workers);
    for _ in 0..workers {
        connections.push(Connection::open(resp_addr, args.token.as_deref(), timeout).await?);
    }
    let worker = Arc::new(Worker {
        queue: Bytes::from(run.clone()),
        mode,
        timeout,
        items: args.items,
    });
    let tally = Arc::new(Tally::new(args.items));
    let cpu_before_us = process_cpu_us();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let tasks: Vec<_> = connections
        .into_iter()
        .map(|connection| {
            let (worker, tally) = (worker.clone(), tally.clone());
            tokio::spawn(async move { worker.drain(connection, &tally, started, deadline).await })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let cpu_after_us = process_cpu_us();
    let mut result = tally.summarize(&preloaded, "resp", mode, workers);
    let delivered = tally.delivered.load(Ordering::SeqCst);
    result.client_cpu_us_per_pop = match (cpu_before_us, cpu_after_us) {
        (Some(before), Some(after)) if delivered > 0 => {
            Some(after.saturating_sub(before) as f64 / delivered as f64)
        }
        _ => None,
    };
    let left = stats.left().await?;
    result.exact &= left == 0;
    result.left = Some(left);
    Ok(result)
}

/// What every worker of a drain shares.
struct Worker {
    queue: Bytes,
    mode: Mode,
    timeout: Duration,
    items: usize,
}

impl Worker {
    /// One worker's loop, until every item is delivered (and its last
    /// riding ack sent) or `deadline` passes.
    async fn drain(
        &self,
        mut connection: Connection,
        tally: &Tally,
        started: Instant,
        deadline: Instant,
    ) -> Result<(), String> {
        let mut carried: Option<Bytes> = None;
        while !tally.done(self.items) || carried.is_some() {
            let call = Instant::now();
            let bound = deadline.saturating_duration_since(call).min(self.timeout);
            if bound.is_zero() {
                break;
            }
            let rode = carried.take();
            let (item, receipt) = self.pop(&mut connection, rode, bound).await?;
            match item {
                Some(payload) => {
                    if self.mode == Mode::RespLeased {
                        let receipt = receipt.ok_or("a leased POP answered no receipt")?;
                        let words: [&[u8]; 3] = [b"ACK", &self.queue, &receipt];
                        expect_acked(connection.call(&words, self.timeout).await?, 1)?;
                    } else if self.mode == Mode::RespLeasedNext {
                        carried = Some(receipt.ok_or("a leased POP answered no receipt")?);
                    }
                    tally.record(started, call, payload.to_vec());
                }
                None => {
                    tally.empty_polls.fetch_add(1, Ordering::Relaxed);
                    if !tally.done(self.items) {
                        tokio::time::sleep(EMPTY_POLL_PAUSE).await;
                    }
                }
            }
        }
        Ok(())
    }

    /// One pop in this drain's pattern, `rode`'s ack riding on it: the
    /// item, and its receipt when leased.
    async fn pop(
        &self,
        connection: &mut Connection,
        rode: Option<Bytes>,
        bound: Duration,
    ) -> Result<(Option<Bytes>, Option<Bytes>), String> {
        let lease = LEASE_MS.to_string();
        let mut words: Vec<&[u8]> = match self.mode {
            Mode::RespLpop => vec![b"LPOP", &self.queue],
            Mode::Resp => vec![b"POP", &self.queue],
            _ => vec![b"POP", &self.queue, b"LEASE", lease.as_bytes()],
        };
        if let Some(receipt) = &rode {
            words.extend([&b"ACK"[..], receipt]);
        }
        let reply = connection.call(&words, bound).await?;
        if !matches!(self.mode, Mode::RespLeased | Mode::RespLeasedNext) {
            return match reply {
                Frame::BulkString(item) => Ok((Some(item), None)),
                Frame::Null => Ok((None, None)),
                other => Err(format!("a pop answered {other:?}")),
            };
        }
        let Frame::Array(mut parts) = reply else {
            return Err(format!("a leased POP answered {reply:?}"));
        };
        let (Some(outcomes), Some(Frame::Array(entries)), None) =
            (parts.pop(), parts.pop(), parts.pop())
        else {
            return Err("a leased POP answers [entries, outcomes]".into());
        };
        expect_acked(outcomes, usize::from(rode.is_some()))?;
        let Some(Frame::Array(entry)) = entries.into_iter().next() else {
            return Ok((None, None));
        };
        match <[Frame; 3]>::try_from(entry) {
            Ok(
                [
                    Frame::BulkString(receipt),
                    Frame::Integer(_),
                    Frame::BulkString(item),
                ],
            ) => Ok((Some(item), Some(receipt))),
            other => Err(format!("an entry is [receipt, count, item], got {other:?}")),
        }
    }
}

/// Checks `outcomes` is `sent` outcomes, each `acked`.
fn expect_acked(outcomes: Frame, sent: usize) -> Result<(), String> {
    let Frame::Array(outcomes) = outcomes else {
        return Err(format!("ack outcomes: expected an array, got {outcomes:?}"));
    };
    let acked =
        |outcome: &Frame| matches!(outcome, Frame::SimpleString(word) if &word[..] == b"acked");
    if outcomes.len() != sent || !outcomes.iter().all(acked) {
        return Err(format!("{sent} acks answered {outcomes:?}"));
    }
    Ok(())
}

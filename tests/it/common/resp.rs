//! Talking RESP to a daemon's RESP listener: a raw TCP connection that
//! sends bytes and reads whole reply frames (to check them byte for
//! byte), and the `redis` crate's connection, as applications use it.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a reply may take (long polls excepted, which say their own).
pub const REPLY_BOUND: Duration = Duration::from_secs(30);

/// A raw RESP connection.
pub struct Raw {
    pub stream: TcpStream,
    buffer: BytesMut,
}

impl Raw {
    pub async fn connect(address: SocketAddr) -> Raw {
        Raw {
            stream: TcpStream::connect(address).await.unwrap(),
            buffer: BytesMut::new(),
        }
    }

    /// Sends `bytes` as they are.
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Sends one command, its words as bulk strings.
    pub async fn command(&mut self, words: &[&[u8]]) {
        self.send(&encode(words)).await;
    }

    /// The next whole reply frame, as its wire text (`None`: the daemon
    /// closed the connection first).
    pub async fn reply_within(&mut self, bound: Duration) -> Option<String> {
        tokio::time::timeout(bound, async {
            loop {
                if let Some(length) = frame_length(&self.buffer) {
                    let frame = self.buffer.split_to(length);
                    return Some(String::from_utf8_lossy(&frame).into_owned());
                }
                let read = self.stream.read_buf(&mut self.buffer).await.unwrap_or(0);
                if read == 0 {
                    return None;
                }
            }
        })
        .await
        .expect("a reply within the bound")
    }

    /// The next whole reply frame.
    pub async fn reply(&mut self) -> String {
        self.reply_within(REPLY_BOUND)
            .await
            .expect("a reply, not a closed connection")
    }

    /// Sends one command and reads its reply.
    pub async fn call(&mut self, words: &[&[u8]]) -> String {
        self.command(words).await;
        self.reply().await
    }

    /// True when the daemon closes the connection within the bound (any
    /// reply frames before that are skipped).
    pub async fn closed_by_daemon(&mut self) -> bool {
        tokio::time::timeout(REPLY_BOUND, async {
            let mut chunk = [0u8; 4096];
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => continue,
                }
            }
        })
        .await
        .unwrap_or(false)
    }
}

/// `words` as a RESP array of bulk strings.
pub fn encode(words: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        out.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        out.extend_from_slice(word);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The length of the whole RESP2 or RESP3 frame at the front of
/// `buffer`, if it is whole.
fn frame_length(buffer: &[u8]) -> Option<usize> {
    // RESP2 first: RESP3's decoder has no `*-1` nor `$-1`.
    if let Ok(Some((_, length))) = redis_protocol::resp2::decode::decode(buffer) {
        return Some(length);
    }
    match redis_protocol::resp3::decode::complete::decode(buffer) {
        Ok(Some((_, length))) => Some(length),
        _ => None,
    }
}

/// A `redis` crate connection to `url`.
pub async fn redis(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Runs `words` as one command on `con`, answering the raw value.
pub async fn call(con: &mut redis::aio::MultiplexedConnection, words: &[&str]) -> redis::Value {
    let mut command = redis::cmd(words[0]);
    for word in &words[1..] {
        command.arg(*word);
    }
    command.query_async(con).await.unwrap()
}

/// Runs `words` expecting an error: its text (`CODE detail`).
pub async fn call_error(con: &mut redis::aio::MultiplexedConnection, words: &[&str]) -> String {
    let mut command = redis::cmd(words[0]);
    for word in &words[1..] {
        command.arg(*word);
    }
    let error = command
        .query_async::<redis::Value>(con)
        .await
        .expect_err("an error reply");
    let code = error.code().unwrap_or_default().to_string();
    let detail = error.detail().unwrap_or_default().to_string();
    format!("{code} {detail}")
}

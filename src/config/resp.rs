//! The RESP (Redis protocol) listener's settings: `resp_listen` (where it
//! listens, or off) and the `[resp]` table (its limits). Read by
//! `crate::resp`, which serves the listener.

use std::net::SocketAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// The default RESP address: Redis's port 6379 with a 7, beside the
/// API's 7070, so a local Redis and hotq do not collide.
pub const RESP_LISTEN_DEFAULT: ([u8; 4], u16) = ([127, 0, 0, 1], 7379);

/// Where the RESP listener listens: an address, or off (an empty value in
/// the file, the environment or the flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespListen(pub Option<SocketAddr>);

impl Default for RespListen {
    fn default() -> Self {
        RespListen(Some(SocketAddr::from(RESP_LISTEN_DEFAULT)))
    }
}

impl FromStr for RespListen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().is_empty() {
            return Ok(RespListen(None));
        }
        text.trim()
            .parse::<SocketAddr>()
            .map(|address| RespListen(Some(address)))
            .map_err(|e| format!("{text:?} is not an address (HOST:PORT, or empty for off): {e}"))
    }
}

impl<'de> Deserialize<'de> for RespListen {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for RespListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(address) => write!(f, "{address}"),
            None => f.write_str("off"),
        }
    }
}

/// The `[resp]` table: the RESP listener's limits, so that a flood of
/// connections or a slow reader cannot exhaust the daemon.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RespSection {
    /// Most RESP connections open at once; one more is answered
    /// `-ERR max number of clients reached` and closed, as Redis does.
    pub connections_max: usize,
    /// Most commands one connection has answered before their replies are
    /// written: a pipeline longer than this is answered in several writes.
    pub pipeline_depth_max: usize,
    /// Most bytes a connection holds: a request frame not yet whole (a
    /// larger one is refused and the connection closed), and replies
    /// not yet written (past it they are written before the next command).
    pub buffer_max_bytes: usize,
}

impl Default for RespSection {
    fn default() -> Self {
        RespSection {
            connections_max: 10_000,
            pipeline_depth_max: 1_024,
            buffer_max_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Most RESP connections a configuration may allow.
pub const RESP_CONNECTIONS_MAX: usize = 1_000_000;

impl RespSection {
    /// Checks values no type can check; a frame must hold an item of
    /// `payload_bytes_max` bytes.
    pub fn validate(&self, payload_bytes_max: usize) -> Result<(), String> {
        let positive = [
            ("resp.connections_max", self.connections_max),
            ("resp.pipeline_depth_max", self.pipeline_depth_max),
            ("resp.buffer_max_bytes", self.buffer_max_bytes),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{key} must be at least 1"));
        }
        if self.connections_max > RESP_CONNECTIONS_MAX {
            return Err(format!(
                "resp.connections_max must be at most {RESP_CONNECTIONS_MAX}"
            ));
        }
        // A frame must fit an item of the largest size with its command.
        let frame_min = payload_bytes_max + 4 * 1024;
        if self.buffer_max_bytes < frame_min {
            return Err(format!(
                "resp.buffer_max_bytes must be at least {frame_min} (one item of the largest size and its command)"
            ));
        }
        Ok(())
    }
}

//! The RESP (Redis protocol) listener: every Redis client is a hotq
//! client. Served beside the HTTP API by the daemon (`resp_listen`, the
//! `[resp]` table; see docs/resp.md), over the same coordinator and the
//! same functions as the `/v1` handlers: this is one more front end, a
//! protocol adapter, not a second copy of the queue logic.
//!
//! - [`frame`]: requests decoded and replies encoded (RESP2, and RESP3
//!   after `HELLO 3`), through the `redis-protocol` crate.
//! - [`connection`]: one task per connection; pipelining; a client
//!   closing mid-pop gives its item back; per-connection limits.
//! - [`cmd`]: the commands, one file per family.
//! - [`stats`]: the listener's metrics.

pub mod cmd;
pub mod connection;
pub mod frame;
pub mod stats;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::server::state::{AppState, ServeError};
use crate::service::Store;

/// The names of the commands served (`COMMAND LIST`), in the table's order.
#[cfg(feature = "testing")]
pub fn command_names() -> Vec<&'static str> {
    cmd::spec::COMMANDS.iter().map(|spec| spec.name).collect()
}

/// Serves RESP on `listener` until `stop` turns true: then it stops
/// accepting, and waits for its connections to end (each ends after its
/// current command; a waiting pop withdraws at shutdown) for at most
/// `shutdown_grace_ms`, then drops the rest.
pub fn spawn<S: Store>(
    state: Arc<AppState<S>>,
    listener: TcpListener,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, ServeError> {
    let address = listener
        .local_addr()
        .map_err(|e| ServeError(e.to_string()))?;
    stats::register();
    tracing::info!(%address, "RESP listening");
    Ok(tokio::spawn(accept_loop(state, listener, stop)))
}

/// Resolves when `stop` turns true (the guard `wait_for` answers is
/// dropped here: it may not be held across an await).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// The message Redis answers a connection past `maxclients` with.
const TOO_MANY: &[u8] = b"-ERR max number of clients reached\r\n";

async fn accept_loop<S: Store>(
    state: Arc<AppState<S>>,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(state.config.resp.connections_max));
    let mut connections = JoinSet::new();
    let mut next_id: u64 = 0;
    // Each connection watches its own copy of the signal.
    let for_connections = stop.clone();
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // EMFILE and the like: back off a little, as axum does.
                        tracing::warn!(%error, "accepting a RESP connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    stats::closed("connections_max");
                    // 37 bytes into a fresh socket's buffer: never blocks.
                    let _ = stream.try_write(TOO_MANY);
                    continue;
                };
                // A reply is one write, sent whole: Nagle's algorithm could
                // only hold it back behind the client's delayed ACK.
                let _ = stream.set_nodelay(true);
                next_id += 1;
                let connection =
                    connection::serve(state.clone(), stream, peer, next_id, for_connections.clone(), permit);
                connections.spawn(connection);
            }
        }
    }
    drop(listener);
    let grace = Duration::from_millis(state.config.shutdown_grace_ms);
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("RESP connections outlived the shutdown grace period; closing them");
    }
    connections.shutdown().await;
}

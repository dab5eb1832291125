//! The web console (`/ui`): a page served by the daemon itself, from
//! assets compiled into the binary (no build step, no CDN, works offline),
//! that shows every queue and acts on one through the documented API only
//! — everything it does, a script can do too.
//!
//! - [`assets`]: the page, its script and style, served without the token
//!   (they hold no data); every call the page makes goes through the API's
//!   gate like any client's.
//! - [`api`]: the API calls the console needed and the API lacked: browse
//!   items and groups, delete one item, pause and resume, traffic counts.
//! - [`browse`]: those reads and the exact delete, over any store.
//! - [`preview`]: a payload as a listing shows it.
//! - [`sqs_view`]: SQS queues and messages as SQS users know them.
//! - [`history`]: the last hour of each queue's figures, for the charts.
//! - this daemon's push and pop counts, for rates, are kept where they
//!   are counted: [`crate::metrics::traffic`].
//!
//! Pausing itself is a queue setting ([`crate::service::Hotq::set_paused`]),
//! obeyed where items are handed out (the direct pop and the fulfillment
//! round), so every daemon on the store obeys it.

pub(crate) mod api;
pub(crate) mod assets;
pub mod browse;
pub mod history;
pub(crate) mod preview;
pub mod sqs_view;

use std::sync::Arc;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::server::state::AppState;
use crate::service::Store;

/// The console's API routes (behind the API's gate, as every `/v1` call).
pub fn api_routes<S: Store>() -> Router<Arc<AppState<S>>> {
    Router::new()
        .route(
            "/v1/queues/{queue}/items/{id}",
            delete(api::delete_item::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/items/{id}",
            delete(api::pq_delete_item::<S>),
        )
        .route("/v1/queues/{queue}/groups", get(api::list_groups::<S>))
        .route("/v1/queues/{queue}/sqs", get(sqs_view::queue_sqs::<S>))
        .route("/v1/queues/{queue}/pause", post(api::pause::<S>))
        .route("/v1/queues/{queue}/resume", post(api::resume::<S>))
        .route("/v1/pqueues/{queue}/pause", post(api::pq_pause::<S>))
        .route("/v1/pqueues/{queue}/resume", post(api::pq_resume::<S>))
        .route("/v1/traffic", get(api::traffic::<S>))
        .route("/v1/history", get(api::history::<S>))
}

/// The page's routes (no token: they hold no data).
pub fn ui_routes<S: Store>() -> Router<Arc<AppState<S>>> {
    Router::new()
        .route("/ui", get(assets::page))
        .route("/ui/{asset}", get(assets::asset))
}

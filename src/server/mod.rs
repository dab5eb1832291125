//! The daemon: HTTP API (docs/design.md §5), Prometheus exporter, fulfillment loops,
//! reaper, metrics sampler, graceful shutdown.
//!
//! [`serve_on`] takes its listeners and its shutdown signal as parameters, so
//! tests start a real daemon on `127.0.0.1:0` and stop it when they choose.
//!
//! - [`admin_routes`]: list, purge and delete queues; leases in flight.
//! - [`error`]: the JSON error shape.
//! - [`fifo_routes`]: `/v1/queues/...` handlers.
//! - [`hangup`]: drops a request's handler when its client hangs up.
//! - [`items`]: what a pop or peek answers (JSON or raw bytes).
//! - [`leases`]: ack, nack, extend by receipt; dead-letter re-drive.
//! - [`openapi`]: the OpenAPI 3.1 spec, generated from the handlers.
//! - [`openapi_contract`]: the limits, patterns and statuses the spec states.
//! - [`pqueue`]: `/v1/pqueues/...` handlers.
//! - [`pqueue_leases`]: ack, nack, extend of priority-queue leases.
//! - [`push`]: FIFO pushes, delayed and deduplicated.
//! - [`settings_routes`]: a queue's settings, kept in the store.
//! - [`state`]: what every handler shares ([`AppState`]), below the
//!   routers, so front ends that share it import no other front end.
//! - [`sampler`]: depth, waiting, leased, delayed and oldest-age gauges, sampled.
//! - [`store_watch`]: reports a failed store and ends the daemon after a grace.

pub(crate) mod admin_routes;
pub(crate) mod error;
pub(crate) mod fifo_routes;
pub mod hangup;
pub(crate) mod items;
pub(crate) mod leases;
pub(crate) mod openapi;
pub(crate) mod openapi_contract;
pub(crate) mod pop_acks;
pub(crate) mod pqueue;
pub(crate) mod pqueue_leases;
pub(crate) mod push;
pub(crate) mod sampler;
pub(crate) mod settings_routes;
pub(crate) mod state;
pub(crate) mod store_watch;

pub use state::{AppState, ServeError};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::service::{Hotq, Store};
use error::ApiError;

/// The API router over `state`.
pub fn router<S: Store>(state: Arc<AppState<S>>) -> Router {
    let api = Router::new()
        .route(
            "/v1/queues/{queue}/items",
            post(push::push_one::<S>).get(crate::console::api::list_items::<S>),
        )
        .route(
            "/v1/queues/{queue}/items:batch",
            post(push::push_batch::<S>),
        )
        .route("/v1/queues/{queue}/pop", post(fifo_routes::pop::<S>))
        .route("/v1/queues/{queue}/peek", get(fifo_routes::peek::<S>))
        .route("/v1/queues", get(admin_routes::list::<S>))
        .route(
            "/v1/queues/{queue}",
            get(fifo_routes::stats::<S>).delete(admin_routes::delete::<S>),
        )
        .route("/v1/queues/{queue}/purge", post(admin_routes::purge::<S>))
        .route("/v1/queues/{queue}/leases", get(admin_routes::leases::<S>))
        .route("/v1/queues/{queue}/ack", post(leases::ack_batch::<S>))
        .route("/v1/queues/{queue}/ack/{receipt}", post(leases::ack::<S>))
        .route("/v1/queues/{queue}/nack/{receipt}", post(leases::nack::<S>))
        .route(
            "/v1/queues/{queue}/extend/{receipt}",
            post(leases::extend::<S>),
        )
        .route("/v1/queues/{queue}/redrive", post(leases::redrive::<S>))
        .route(
            "/v1/queues/{queue}/settings",
            get(settings_routes::get::<S>).put(settings_routes::put::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/items",
            post(pqueue::push::<S>).get(crate::console::api::pq_list_items::<S>),
        )
        .route("/v1/pqueues/{queue}/pop", post(pqueue::pop::<S>))
        .route("/v1/pqueues/{queue}/peek", get(pqueue::peek::<S>))
        .route(
            "/v1/pqueues/{queue}",
            get(pqueue::stats::<S>).delete(admin_routes::pq_delete::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/purge",
            post(admin_routes::pq_purge::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/leases",
            get(admin_routes::pq_leases::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/settings",
            get(settings_routes::pq_get::<S>).put(settings_routes::pq_put::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/ack/{receipt}",
            post(pqueue_leases::ack::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/nack/{receipt}",
            post(pqueue_leases::nack::<S>),
        )
        .route(
            "/v1/pqueues/{queue}/extend/{receipt}",
            post(pqueue_leases::extend::<S>),
        )
        .merge(crate::console::api_routes::<S>())
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gate::<S>,
        ));
    let mut root = Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/v1/openapi.json", get(openapi::openapi_json::<S>));
    if state.config.sqs.enabled {
        // The SQS API signs its requests (SigV4), so it has its own gate
        // (see `crate::sqs::auth`), not the bearer token's.
        root = root.route("/", post(crate::sqs::handle::<S>));
    }
    root.merge(api)
        .merge(crate::console::ui_routes::<S>())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.body_max_bytes))
        .layer(axum::middleware::from_fn(every_request))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// A handler that panicked answers 500 `internal_error` instead of having
/// its connection closed (the panic is a bug, logged by the panic hook and
/// counted in `hotq_panics_total`; no lock it held stays poisoned).
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "the daemon hit a bug handling this request (counted in hotq_panics_total)",
    )
    .into_response()
}

// The API's middleware is two functions, not one per concern: each
// `from_fn` layer clones the boxed route and boxes a future per request,
// on every pop and ack (see docs/profile.md).

/// Every API route's gate: the bearer token first (a caller without it
/// learns nothing, not even that the store failed), then 503
/// `store_unavailable` while the store has failed for good, so every call
/// says so the same way, whatever its handler would have made of the
/// store's error (a waiting pop, a settle batch).
async fn gate<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = unauthorized(&state, &request) {
        return refusal.into_response();
    }
    if let Some(reason) = state.hotq.store_failure() {
        return ApiError::store_unavailable(format!("the store has failed: {reason}"))
            .into_response();
    }
    next.run(request).await
}

/// Why `request` may not call the API: `None` when no token is set or it
/// presents the token.
fn unauthorized<S: Store>(state: &AppState<S>, request: &Request) -> Option<ApiError> {
    // No token set: every call may.
    state.config.token.as_ref()?;
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        Some(presented) if state.token_matches(presented.as_bytes()) => None,
        Some(_) => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong bearer token",
        )),
        None => Some(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing \"Authorization: Bearer <token>\" header",
        )),
    }
}

/// Every request's outer step: its handler runs unless the client hangs
/// up first (see [`hangup`]), and every answer is counted by status,
/// unknown routes (404) and methods (405) included, which no handler
/// sees: the dashboard tells server errors (5xx) from client errors (4xx)
/// with it. An answer never sent (the client left) is not counted.
///
/// Each answer is also logged at `debug` under the target `hotq::request`
/// (`RUST_LOG=hotq::request=debug`): method, route (the matched pattern,
/// not the raw path, so queue names and receipts stay out of the log),
/// status and milliseconds.
async fn every_request(request: Request, next: Next) -> Response {
    let hang_up = hangup::watch_of(&request);
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // The route is copied only when the debug line will be written: it is
    // an allocation on every request otherwise.
    let route = tracing::enabled!(target: "hotq::request", tracing::Level::DEBUG)
        .then(|| request.extensions().get::<axum::extract::MatchedPath>())
        .flatten()
        .map(|path| path.as_str().to_string());
    hangup::unless_hung_up(hang_up, async move {
        let response = next.run(request).await;
        let status = response.status().as_u16();
        crate::metrics::http_response(status);
        tracing::debug!(
            target: "hotq::request",
            method = %method,
            route = route.as_deref().unwrap_or("(no route)"),
            status,
            ms = started.elapsed().as_secs_f64() * 1_000.0,
            "request"
        );
        response
    })
    .await
}

/// `GET /healthz`: 200 when the store answers a read, 503 otherwise
/// (failed, or a write stalled past `store_stall_ms`).
#[utoipa::path(get, path = "/healthz", tag = "daemon", security(()),
    responses((status = 200, description = "The store answers"),
        (status = 503, description = "store_unavailable: the store does not answer; store_stalled: a store write has not returned within store_stall_ms", body = error::ErrorBody)))]
async fn healthz<S: Store>(State(state): State<Arc<AppState<S>>>) -> Response {
    // The store's own verdict first: a failed store may still serve reads
    // from its cache, which would make the probe below pass.
    if let Some(reason) = state
        .hotq
        .store_failure()
        .or_else(|| state.store_health.failure())
    {
        return ApiError::store_unavailable(reason).into_response();
    }
    // A write stuck in the disk serves no pop: say so, so that a load
    // balancer sends elsewhere until it returns.
    let stall_bound = Duration::from_millis(state.config.store_stall_ms);
    if let Some(under_way) = state.hotq.write_under_way_for()
        && under_way >= stall_bound
    {
        let message = format!(
            "a store write has not returned for {} ms (store_stall_ms = {})",
            under_way.as_millis(),
            state.config.store_stall_ms
        );
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_stalled", message)
            .into_response();
    }
    // Bounded: a store that does not answer (an unreachable cluster) is
    // reported now, not when the watcher gives up on it.
    match state.hotq.probe_store(store_watch::PROBE_BOUND).await {
        Ok(()) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"status": "ok"})),
        )
            .into_response(),
        Err(reason) => ApiError::store_unavailable(reason).into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

fn metrics_router(handle: PrometheusHandle) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    let mut text = crate::metrics::render(&handle);
                    text.push_str(&crate::metrics::process::render());
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
                }
            }),
        )
        .fallback(not_found)
}

/// Serves the Prometheus exporter on `listener` until `stop` turns true.
fn spawn_metrics(
    listener: TcpListener,
    handle: PrometheusHandle,
    mut stop: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, ServeError> {
    let address = listener
        .local_addr()
        .map_err(|e| ServeError(e.to_string()))?;
    tracing::info!(%address, "metrics exporter listening");
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, metrics_router(handle))
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "metrics exporter failed");
        }
    }))
}

/// The daemon's listeners: the API's, and the exporter's and the RESP
/// listener's when they are served (tests bind each on `127.0.0.1:0`).
#[derive(Debug)]
pub struct Listeners {
    /// The HTTP API (`/v1`, SQS, console).
    pub api: TcpListener,
    /// The Prometheus exporter.
    pub metrics: Option<TcpListener>,
    /// The RESP (Redis protocol) listener (see [`crate::resp`]).
    pub resp: Option<TcpListener>,
}

/// Runs the daemon on `store` until `shutdown` resolves: serves the API on
/// `listeners.api`, metrics on `listeners.metrics` (if given), runs
/// fulfillers, the due index's timer and the sampler; with a RESP listener,
/// the Redis protocol is served beside the API over the same coordinator
/// (see [`crate::resp`]). On shutdown: waiting pops withdraw and answer,
/// the API (and RESP) stop accepting and drain (bounded by
/// `shutdown_grace_ms`), fulfillers finish their commit, the store is
/// flushed.
pub async fn serve_on<S: Store>(
    store: S,
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let Listeners { api, metrics, resp } = listeners;
    let handle = crate::metrics::install(config.metrics_queue_labels_max);
    // Each front end registers its own series (at 0) as it is mounted.
    crate::sqs::register_metrics();
    let state = app_state(store.clone(), config);
    let core = state.clone();
    let grace = Duration::from_millis(state.config.shutdown_grace_ms);
    // Set when the daemon stops because its store failed: it then exits
    // with an error, so its supervisor restarts it.
    let store_failed = Arc::new(std::sync::OnceLock::<String>::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let tasks = Background {
        timer: core.hotq.spawn_timer(),
        sampler: tokio::spawn(sampler::run(state.clone(), stop_rx.clone())),
        metrics: match metrics {
            Some(listener) => Some(spawn_metrics(listener, handle, stop_rx.clone())?),
            None => None,
        },
        resp: match resp {
            Some(listener) => Some(crate::resp::spawn(
                state.clone(),
                listener,
                stop_rx.clone(),
            )?),
            None => None,
        },
    };
    let api_address = api.local_addr().map_err(|e| ServeError(e.to_string()))?;
    tracing::info!(address = %api_address, "API listening");
    let stopping = Stopping {
        signal: stop_tx.clone(),
        store_failed: store_failed.clone(),
    };
    let served = serve_api(state, api, shutdown, stopping, stop_rx, grace).await;
    stop_tx.send_replace(true);
    tasks.stop(&core.hotq, grace).await;
    if let Some(reason) = store_failed.get() {
        return Err(ServeError(format!(
            "stopped because the store has failed: {reason}"
        )));
    }
    store
        .flush()
        .map_err(|e| ServeError(format!("final flush failed: {e}")))?;
    tracing::info!("stopped");
    served
}

/// What every handler of every front end shares, over a new coordinator.
fn app_state<S: Store>(store: S, config: Config) -> Arc<AppState<S>> {
    Arc::new(AppState {
        hotq: crate::service::Hotq::new(store, &config),
        config,
        known_queues: Arc::default(),
        store_health: store_watch::StoreHealth::default(),
        openapi: std::sync::OnceLock::new(),
        sqs_move_tasks: Default::default(),
    })
}

/// How the API server tells the rest that the daemon is stopping, and why.
struct Stopping {
    /// Set to `true` once shutdown begins (every task watches it).
    signal: watch::Sender<bool>,
    /// The store's failure, when that is why the daemon stops.
    store_failed: Arc<std::sync::OnceLock<String>>,
}

/// Serves the HTTP API until `shutdown` or a store failed for good, then
/// drains its requests for at most `grace`.
async fn serve_api<S: Store>(
    state: Arc<AppState<S>>,
    api: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    stopping: Stopping,
    mut stopped: watch::Receiver<bool>,
    grace: Duration,
) -> Result<(), ServeError> {
    let failure_exit = Duration::from_millis(state.config.store_failure_exit_ms);
    let watched = state.clone();
    // A client hanging up while its request is handled is noticed even
    // when it sent more bytes first (see [`hangup`]).
    let api_server = axum::serve(
        hangup::WatchedListener(api),
        router(state).into_make_service_with_connect_info::<hangup::HangUp>(),
    )
    .with_graceful_shutdown(async move {
        tokio::select! {
            _ = shutdown => {}
            reason = store_watch::failed_for_good(&watched.hotq, &watched.store_health, failure_exit) => {
                let _ = stopping.store_failed.set(reason);
            }
        }
        tracing::info!("shutdown requested: withdrawing waiting pops, draining requests");
        // Waiting pops withdraw and answer now, so the drain is quick.
        watched.hotq.begin_shutdown();
        stopping.signal.send_replace(true);
    });
    tokio::select! {
        served = api_server => served.map_err(|e| ServeError(e.to_string())),
        // Connections that outlive the grace period after the signal are cut.
        _ = async {
            let _ = stopped.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!("in-flight requests outlived the shutdown grace period; closing them");
            Ok(())
        }
    }
}

/// The daemon's tasks beside the API server, stopped after it.
struct Background {
    timer: tokio::task::JoinHandle<()>,
    sampler: tokio::task::JoinHandle<()>,
    metrics: Option<tokio::task::JoinHandle<()>>,
    resp: Option<tokio::task::JoinHandle<()>>,
}

impl Background {
    /// Waits for each task (they stop at their next check of the stop
    /// signal), each for at most `grace`: a sweep stuck on the store is not
    /// waited for past it.
    async fn stop<S: Store>(self, hotq: &Hotq<S>, grace: Duration) {
        if let Some(task) = self.resp {
            // Its connections see the signal and end after their command (a
            // waiting pop withdrew at `begin_shutdown`); bounded by the grace.
            let _ = tokio::time::timeout(grace, task).await;
        }
        hotq.shutdown(grace).await;
        let _ = tokio::time::timeout(grace, self.timer).await;
        let _ = tokio::time::timeout(grace, self.sampler).await;
        if let Some(task) = self.metrics {
            let _ = tokio::time::timeout(grace, task).await;
        }
    }
}

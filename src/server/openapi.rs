//! The API's OpenAPI 3.1 description, generated from the handlers'
//! `#[utoipa::path]` annotations and served at `GET /v1/openapi.json`.
//!
//! A handler added to the router must be listed in [`ApiDoc`]'s `paths`:
//! `tests/it/openapi_spec.rs` fails on any route missing from the spec (or any
//! path of the spec the daemon does not serve).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::admin_routes::{DeleteAnswer, DeleteBusy, LeaseInfo, LeaseList, PurgeAnswer, QueueList};
use super::error::{ErrorBody, ErrorDetail};
use super::items::{
    AckBatchAnswer, AckResult, FairKeyBacklog, PoppedItem, PushAnswer, QueueStats, RedriveAnswer,
};
use super::leases::{ExtendAnswer, NackAnswer, NackOutcome};
use super::push::{BatchItem, BatchObject};
use super::settings_routes::SettingsAnswer;
use super::state::AppState;
use super::{admin_routes, fifo_routes, leases, pqueue, pqueue_leases, push, settings_routes};
use crate::service::{Effective, Store, Stored};

/// The spec. Paths name the handlers; schemas are the answer types the
/// handlers serialize, so the spec cannot drift from what is sent.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "hotq",
        description = "A high-contention queue service. Errors are ErrorBody with a stable code. \
            A pop or peek answers JSON (an array of PoppedItem) when max > 1 or Accept names \
            application/json, the one item's raw bytes with hotq-* headers otherwise; 204 when \
            nothing came. Queues exist implicitly: a queue is there from its first use, \
            DELETE empties it (items, leases, settings) and the next call finds it again, empty; \
            stats of a queue never used answer 200 with zeros."
    ),
    paths(
        super::healthz,
        openapi_json,
        push::push_one,
        push::push_batch,
        fifo_routes::pop,
        fifo_routes::peek,
        fifo_routes::stats,
        admin_routes::list,
        admin_routes::delete,
        admin_routes::purge,
        admin_routes::leases,
        admin_routes::pq_delete,
        admin_routes::pq_purge,
        admin_routes::pq_leases,
        settings_routes::pq_get,
        settings_routes::pq_put,
        settings_routes::get,
        settings_routes::put,
        leases::ack,
        leases::ack_batch,
        leases::nack,
        leases::extend,
        leases::redrive,
        pqueue::push,
        pqueue::pop,
        pqueue::peek,
        pqueue::stats,
        pqueue_leases::ack,
        pqueue_leases::nack,
        pqueue_leases::extend,
        crate::console::api::list_items,
        crate::console::api::pq_list_items,
        crate::console::api::delete_item,
        crate::console::api::pq_delete_item,
        crate::console::api::list_groups,
        crate::console::sqs_view::queue_sqs,
        crate::console::api::pause,
        crate::console::api::resume,
        crate::console::api::pq_pause,
        crate::console::api::pq_resume,
        crate::console::api::traffic,
        crate::console::api::history,
        crate::console::assets::page,
        crate::console::assets::asset,
        crate::sqs::handle,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        PoppedItem,
        PushAnswer,
        QueueStats,
        FairKeyBacklog,
        AckBatchAnswer,
        AckResult,
        RedriveAnswer,
        NackAnswer,
        NackOutcome,
        ExtendAnswer,
        BatchItem,
        BatchObject,
        QueueList,
        PurgeAnswer,
        DeleteAnswer,
        DeleteBusy,
        LeaseList,
        LeaseInfo,
        SettingsAnswer,
        Effective,
        Stored,
        crate::console::api::ItemInfo,
        crate::console::api::ItemList,
        crate::console::api::ItemDeleted,
        crate::console::api::GroupInfo,
        crate::console::sqs_view::SqsMessageInfo,
        crate::console::sqs_view::SqsQueueView,
        crate::console::sqs_view::HotqSettings,
        crate::console::api::GroupList,
        crate::console::api::PauseAnswer,
        crate::console::api::Traffic,
        crate::metrics::traffic::Counts,
        crate::console::api::History,
        crate::console::history::Sample,
        crate::server::fifo_routes::PopPath,
    )),
    modifiers(&BearerToken),
    security((), ("bearer" = [])),
    tags(
        (name = "fifo", description = "FIFO queues"),
        (name = "leases", description = "At-least-once delivery: ack, nack, extend, dead letters"),
        (name = "priority", description = "Priority queues, and the leases of their pops"),
        (name = "admin", description = "Administration: list, purge, delete queues; leases in flight; queue settings"),
        (name = "daemon", description = "The daemon itself"),
        (name = "console", description = "The web console's page and files (no token: they hold no data)"),
        (name = "sqs", description = "The Amazon SQS API (AWS JSON 1.0) over the same queues; see docs/sqs.md"),
    )
)]
pub struct ApiDoc;

/// The optional bearer token (`--token`): every `/v1/` call carries
/// `Authorization: Bearer <token>` when the daemon has one.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The spec as JSON for a daemon running `config`: the generated document
/// with the contract it enforces (see [`super::openapi_contract`]).
pub fn spec_for(config: &crate::config::Config) -> String {
    let mut spec = serde_json::to_value(ApiDoc::openapi()).expect("the spec serializes");
    if !config.sqs.enabled {
        // Not served (see `super::router`), so not in this daemon's spec.
        let paths = spec["paths"].as_object_mut().expect("the spec has paths");
        paths.remove("/");
    }
    super::openapi_contract::apply(&mut spec, &super::openapi_contract::Limits::of(config));
    serde_json::to_string_pretty(&spec).expect("the spec serializes")
}

/// `GET /v1/openapi.json`: this API's OpenAPI 3.1 description, with the
/// limits of this daemon's configuration.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "daemon", security(()),
    responses((status = 200, description = "The OpenAPI 3.1 description", content_type = "application/json")))]
pub async fn openapi_json<S: Store>(State(state): State<Arc<AppState<S>>>) -> Response {
    let spec = state.openapi.get_or_init(|| spec_for(&state.config));
    ([(header::CONTENT_TYPE, "application/json")], spec.clone()).into_response()
}

//! The contract the daemon enforces, written into the generated spec: the
//! `#[utoipa::path]` annotations give the routes and the answers' shapes;
//! this gives every parameter and body its pattern, length, enum and range
//! from the code's own constants and from the running configuration (a
//! daemon configured with `wait_max_ms = 5000` serves a spec that says so),
//! raw bodies as binary, and each call's statuses one by one.
//!
//! It works on the spec as JSON, by parameter name: one name means one
//! thing across the API (`queue`, `receipt`, `lease_ms`, ...), so a new
//! route gets its parameters' contract without a line here.
//! `tests/it/openapi_spec.rs` fails on a parameter this does not know.

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::console::api::TRAFFIC_QUEUES_MAX;
use crate::console::assets::ASSETS;
use crate::console::browse::{GROUPS_LIMIT_MAX, ITEM_ID_HEX_LEN_MAX, ITEMS_LIMIT_MAX};
use crate::keys::{DEAD_LETTER_SUFFIX, QUEUE_NAME_LEN_MAX};
use crate::server::leases::ACK_BATCH_MAX;
use crate::service::{
    DEDUP_ID_LEN_MAX, FAIR_KEY_LEN_MAX, FAIR_WEIGHT_MAX, FAIR_WEIGHTS_MAX, GROUP_KEY_LEN_MAX,
    POP_ACKS_MAX, PUSH_BATCH_MAX, RETENTION_MS_MAX,
};
use crate::service::{
    DEDUP_WINDOW_MS_MAX, LEASES_CURSOR_LEN_MAX, LEASES_LIMIT_MAX, LEASES_MAX, LEASES_PER_KEY_MAX,
    LIST_LIMIT_MAX, MAX_DELIVERIES_MAX, POP_RATE_BURST_MAX, POP_RATE_MAX, REDRIVE_BATCH_MAX,
};

/// The limits of the running configuration that the spec states.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    wait_max_ms: u64,
    pop_max_items: usize,
    lease_max_ms: u64,
    delay_max_ms: u64,
    payload_bytes_max: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub fn of(config: &Config) -> Limits {
        Limits {
            wait_max_ms: config.wait_max_ms,
            pop_max_items: config.pop_max_items,
            lease_max_ms: config.leases.lease_max_ms,
            delay_max_ms: config.leases.delay_max_ms,
            payload_bytes_max: config.payload_bytes_max,
        }
    }
}

/// A queue name (see `crate::keys::QueueName`): 1 to 128 of
/// `A-Z a-z 0-9 . _ -`, not starting with `.`, plus `.dead` for the
/// dead-letter queue of a 128-character name.
pub fn queue_name_schema() -> Value {
    let rest = QUEUE_NAME_LEN_MAX - 1;
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": QUEUE_NAME_LEN_MAX + DEAD_LETTER_SUFFIX.len(),
        "pattern": format!("^[A-Za-z0-9_-][A-Za-z0-9._-]{{0,{rest}}}(\\.dead)?$"),
    })
}

/// An item id of the console's listings (see `crate::console::browse`):
/// hex of 1 to `ITEM_ID_HEX_LEN_MAX / 2` bytes.
fn item_id_schema() -> Value {
    let bytes_max = ITEM_ID_HEX_LEN_MAX / 2;
    json!({"type": "string", "pattern": format!("^(?:[0-9A-Fa-f]{{2}}){{1,{bytes_max}}}$")})
}

/// `GET /v1/traffic`'s `queues`: 1 to `TRAFFIC_QUEUES_MAX` queue names,
/// comma-separated.
fn queue_names_schema() -> Value {
    let name = queue_name_schema();
    let one = name["pattern"].as_str().expect("a pattern");
    let one = &one[1..one.len() - 1];
    let more = TRAFFIC_QUEUES_MAX - 1;
    let name_max = name["maxLength"].as_u64().expect("a length") as usize;
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": TRAFFIC_QUEUES_MAX * (name_max + 1) - 1,
        "pattern": format!("^{one}(?:,{one}){{0,{more}}}$"),
    })
}

fn receipt_schema() -> Value {
    json!({"type": "string", "pattern": "^[0-9A-Fa-f]{32}$"})
}

/// A lease listing's `next`: a due-index key in hex.
fn lease_cursor_schema() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^([0-9A-Fa-f]{{2}}){{1,{}}}$", LEASES_CURSOR_LEN_MAX / 2),
    })
}

fn integer(min: u64, max: u64) -> Value {
    json!({"type": "integer", "format": "int64", "minimum": min, "maximum": max})
}

fn group_schema() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[A-Za-z0-9._:@/-]{{1,{GROUP_KEY_LEN_MAX}}}$"),
    })
}

/// Fairness keys: a group key's alphabet and length (so an SQS
/// `MessageGroupId` that is a group key is a fairness key too).
fn fair_key_schema() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[A-Za-z0-9._:@/-]{{1,{FAIR_KEY_LEN_MAX}}}$"),
    })
}

/// `fair_weights`: at most [`FAIR_WEIGHTS_MAX`] fairness keys, each with
/// a weight from 1 to [`FAIR_WEIGHT_MAX`].
fn fair_weights_schema() -> Value {
    json!({
        "type": "object",
        "maxProperties": FAIR_WEIGHTS_MAX,
        "propertyNames": fair_key_schema(),
        "additionalProperties": integer(1, FAIR_WEIGHT_MAX as u64),
    })
}

/// Dedup ids are 1 to 128 bytes; the spec states printable ASCII, where
/// characters and bytes are one.
fn dedup_id_schema() -> Value {
    json!({"type": "string", "pattern": format!("^[ -~]{{1,{DEDUP_ID_LEN_MAX}}}$")})
}

/// Standard base64 of 1 byte or more, canonical (the decoder refuses
/// non-zero bits after the last byte).
fn base64_schema(payload_bytes_max: usize) -> Value {
    let max_len = payload_bytes_max.div_ceil(3) * 4;
    json!({
        "type": "string",
        "maxLength": max_len,
        "pattern": "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)$",
        "description": format!("The item's bytes (1 B to {payload_bytes_max} B, the daemon's payload_bytes_max), base64"),
    })
}

/// The schema of query or path parameter `name` of `path`; `None` for a
/// parameter the spec leaves out (accepted but meaningless there).
fn parameter_schema(path: &str, name: &str, limits: &Limits) -> Option<Value> {
    let priority = path.starts_with("/v1/pqueues/");
    Some(match name {
        "queue" => queue_name_schema(),
        "receipt" => receipt_schema(),
        "wait_ms" if path.ends_with("/peek") => return None,
        "max" | "lease_ms" if path.ends_with("/peek") => return None,
        "wait_ms" => integer(0, limits.wait_max_ms),
        "max" if path.ends_with("/redrive") => integer(1, REDRIVE_BATCH_MAX as u64),
        "max" => integer(1, limits.pop_max_items as u64),
        "lease_ms" => integer(1, limits.lease_max_ms),
        "delay_ms" => integer(0, limits.delay_max_ms),
        "limit" if path.ends_with("/leases") => integer(1, LEASES_LIMIT_MAX as u64),
        "limit" if path.ends_with("/items") => integer(1, ITEMS_LIMIT_MAX as u64),
        "limit" if path.ends_with("/groups") => integer(1, GROUPS_LIMIT_MAX as u64),
        "limit" => integer(1, LIST_LIMIT_MAX as u64),
        "after" if path.ends_with("/leases") => lease_cursor_schema(),
        "after" if path.ends_with("/items") => item_id_schema(),
        "after" if path.ends_with("/groups") => group_schema(),
        "id" => item_id_schema(),
        "queues" => queue_names_schema(),
        "asset" => json!({"type": "string", "enum": ASSETS}),
        "after" => queue_name_schema(),
        "kind" => json!({"type": "string", "enum": ["fifo", "priority"]}),
        "end" => json!({"type": "string", "enum": ["min", "max"]}),
        "priority" => json!({"type": "integer", "format": "int64"}),
        // Named on priority pushes only to refuse it.
        "group" if priority => return None,
        "group" => group_schema(),
        "path" => json!({"type": "string", "enum": ["staged", "direct"]}),
        "hotq-dedup-id" => dedup_id_schema(),
        "hotq-retention-ms" => integer(1, RETENTION_MS_MAX),
        "hotq-fair-key" => fair_key_schema(),
        // Receipts riding on a pop: at most POP_ACKS_MAX, comma-separated;
        // a malformed one is answered `invalid` in hotq-acked, not refused.
        "ack" => json!({
            "type": "string",
            "pattern": format!("^[^,]*(,[^,]*){{0,{}}}$", POP_ACKS_MAX - 1),
        }),
        other => panic!("the spec's contract does not know parameter {other:?} of {path}"),
    })
}

/// Parameters the daemon requires though their struct field is optional.
fn required(path: &str, name: &str) -> bool {
    matches!(
        (path.starts_with("/v1/pqueues/"), name),
        (true, "end") | (true, "priority")
    ) || (name == "lease_ms" && path.contains("/extend/"))
}

fn apply_parameters(path: &str, operation: &mut Map<String, Value>, limits: &Limits) {
    let Some(Value::Array(parameters)) = operation.get_mut("parameters") else {
        return;
    };
    parameters.retain_mut(|parameter| {
        let name = parameter["name"].as_str().unwrap_or_default().to_string();
        let Some(schema) = parameter_schema(path, &name, limits) else {
            return false;
        };
        parameter["schema"] = schema;
        if required(path, &name) {
            parameter["required"] = Value::Bool(true);
        }
        true
    });
}

/// The request body's schema, by what the route takes.
fn body_schema(path: &str, limits: &Limits) -> Option<(&'static str, Value)> {
    if path.ends_with("/items") {
        let schema = json!({
            "type": "string",
            "format": "binary",
            "minLength": 1,
            "maxLength": limits.payload_bytes_max,
        });
        return Some(("application/octet-stream", schema));
    }
    if path.ends_with("/items:batch") {
        let object = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["item"],
            "properties": {
                "item": base64_schema(limits.payload_bytes_max),
                "dedup_id": {"anyOf": [dedup_id_schema(), {"type": "null"}]},
                "group": {"anyOf": [group_schema(), {"type": "null"}]},
                "fair_key": {"anyOf": [fair_key_schema(), {"type": "null"}]},
            },
        });
        let schema = json!({
            "type": "array",
            "minItems": 1,
            "maxItems": PUSH_BATCH_MAX,
            "items": {"anyOf": [base64_schema(limits.payload_bytes_max), object]},
        });
        return Some(("application/json", schema));
    }
    if path.ends_with("/ack") {
        let schema = json!({
            "type": "array",
            "minItems": 1,
            "maxItems": ACK_BATCH_MAX,
            "items": {"type": "string"},
        });
        return Some(("application/json", schema));
    }
    if path.ends_with("/settings") {
        return Some(("application/json", settings_schema(limits)));
    }
    None
}

/// A settings change: each key sets its setting, null returns it to the
/// default (see `crate::queue::settings::apply_change`).
fn settings_schema(limits: &Limits) -> Value {
    let nullable = |schema: Value| json!({"anyOf": [schema, {"type": "null"}]});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            // 0: no limit (SQS's maxReceiveCount unset).
            "max_deliveries": nullable(integer(0, MAX_DELIVERIES_MAX as u64)),
            "default_lease_ms": nullable(integer(1, limits.lease_max_ms)),
            "dead_letter_queue": nullable(queue_name_schema()),
            "dedup_window_ms": nullable(integer(1, DEDUP_WINDOW_MS_MAX)),
            "delivery_delay_ms": nullable(integer(0, limits.delay_max_ms)),
            "paused": nullable(json!({"type": "boolean"})),
            "retention_ms": nullable(integer(1, RETENTION_MS_MAX)),
            "fair": nullable(json!({"type": "boolean"})),
            "fair_weights": nullable(fair_weights_schema()),
            "pop_rate_max": nullable(integer(1, POP_RATE_MAX)),
            "pop_rate_burst": nullable(integer(1, POP_RATE_BURST_MAX)),
            "leases_max": nullable(integer(1, LEASES_MAX)),
            "leases_per_key_max": nullable(integer(1, LEASES_PER_KEY_MAX)),
            "pop_rate_per_key_max": nullable(integer(1, POP_RATE_MAX)),
        },
        "description": "Settings to change; null returns one to the default; keys not named \
            are kept. A queue cannot be its own dead_letter_queue (400 invalid_settings).",
    })
}

fn apply_body(path: &str, operation: &mut Map<String, Value>, limits: &Limits) {
    let Some(body) = operation.get_mut("requestBody") else {
        return;
    };
    let (content_type, schema) =
        body_schema(path, limits).unwrap_or_else(|| panic!("no body contract for {path}"));
    body["content"] = json!({content_type: {"schema": schema}});
    body["required"] = Value::Bool(true);
}

fn error(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    })
}

/// Every status an API call can answer besides its own successes and the
/// ones its annotation names: bad input, a missing token, a body over the
/// limit, the store.
fn apply_statuses(operation: &mut Map<String, Value>) {
    let has_body = operation.contains_key("requestBody");
    let responses = operation
        .entry("responses")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("responses is an object");
    responses.remove("4XX");
    let mut add = |status: &str, description: &str| {
        responses
            .entry(status.to_string())
            .or_insert_with(|| error(description));
    };
    add(
        "400",
        "Bad input (invalid_queue_name, bad_parameter, bad_json, ... see docs/api.md); nothing was written",
    );
    add(
        "401",
        "unauthorized: the daemon has a token and the call did not present it",
    );
    if has_body {
        add(
            "413",
            "body_too_large or item_too_large: the body is over the limit",
        );
    }
    add(
        "503",
        "store_unavailable: the store failed or does not answer; queue_busy; pop_unanswered",
    );
}

/// Writes the contract into `spec` (the generated OpenAPI document).
pub fn apply(spec: &mut Value, limits: &Limits) {
    let paths = spec["paths"].as_object_mut().expect("the spec has paths");
    for (path, item) in paths.iter_mut() {
        if path == "/" {
            // The SQS API: one operation whose contract is SQS's own (the
            // action in X-Amz-Target, its input as the AWS reference gives
            // it, SQS's error shape); see docs/sqs.md and tests/sqs*.
            continue;
        }
        let item = item.as_object_mut().expect("a path item is an object");
        for operation in item.values_mut() {
            let Some(operation) = operation.as_object_mut() else {
                continue;
            };
            apply_parameters(path, operation, limits);
            apply_body(path, operation, limits);
            if path.starts_with("/v1/") && path != "/v1/openapi.json" {
                apply_statuses(operation);
            }
        }
    }
}

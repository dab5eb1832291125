//! The OpenAPI spec the daemon serves matches the daemon: every route of
//! the router is in the spec and every path of the spec is served, and the
//! error shape (and the answers' shapes) the spec declares are what the
//! daemon sends.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

/// `(method, path)` of every `.route("path", get(..).post(..))` in
/// `src/server/` and `src/console/`: the router's table, read from its source, since axum
/// does not list a router's routes.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("src/server"), root.join("src/console")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_some_and(|e| e == "rs") {
            routes.extend(routes_in(&std::fs::read_to_string(&path).unwrap()));
        }
    }
    // The exporter's route is served on the metrics listener, not the API.
    routes.retain(|(_, path)| path != "/metrics");
    routes
}

fn routes_in(source: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        let call = &rest[at + ".route(".len()..];
        // The call's arguments: up to the parenthesis that closes it.
        let mut depth = 1;
        let end = call
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            })
            .expect("a closed .route( call");
        let arguments = &call[..end];
        let path = arguments
            .split('"')
            .nth(1)
            .expect("a route's path is a string literal");
        let handlers = &arguments[arguments.find(',').unwrap()..];
        for method in METHODS {
            let words = handlers.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '('));
            if words
                .into_iter()
                .any(|w| w.starts_with(&format!("{method}(")))
            {
                found.push((method.to_string(), path.to_string()));
            }
        }
        rest = &call[end..];
    }
    found
}

fn routes_in_spec(spec: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(method).is_some() {
                routes.insert((method.to_string(), path.clone()));
            }
        }
    }
    routes
}

/// The schema `reference` (`#/components/schemas/X`) points at.
fn schema<'a>(spec: &'a Value, reference: &Value) -> &'a Value {
    let name = reference["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
        .unwrap_or_else(|| panic!("a $ref to a component: {reference}"));
    &spec["components"]["schemas"][name]
}

/// Checks `value` against an object schema: the same field names, every
/// field required, each of a type the schema allows.
fn check_object(spec: &Value, schema: &Value, value: &Value, what: &str) {
    let properties = schema["properties"].as_object().expect("an object schema");
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{what}: {value}"));
    let declared: BTreeSet<&String> = properties.keys().collect();
    let sent: BTreeSet<&String> = object.keys().collect();
    assert_eq!(declared, sent, "{what}: fields of the spec vs the answer");
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().map(|n| n.as_str().unwrap()).collect())
        .unwrap_or_default();
    for (name, field) in properties {
        let value = &object[name];
        if field.get("$ref").is_some() {
            check_object(spec, self::schema(spec, field), value, name);
            continue;
        }
        let types: Vec<&str> = match &field["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
            other => panic!("{what}.{name}: no type in {other}"),
        };
        let kind = match value {
            Value::Null => "null",
            Value::String(_) => "string",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::Bool(_) => "boolean",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        assert!(
            types.contains(&kind),
            "{what}.{name}: {kind} not in {types:?}"
        );
        // Sent, so always sent (null when it does not apply): required.
        assert!(required.contains(name.as_str()), "{what}.{name} required");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_lists_exactly_the_routes_and_the_error_shape_the_daemon_serves() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let response = http()
        .get(format!("{url}/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let spec: Value = response.json().await.unwrap();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3.1"));

    let in_source = routes_in_source();
    assert!(in_source.len() >= 16, "the route scan found {in_source:?}");
    assert_eq!(
        in_source,
        routes_in_spec(&spec),
        "routes of the router (left) vs paths of the spec (right)"
    );

    // Every operation of the spec is served: no fallback answers it.
    for (method, path) in routes_in_spec(&spec) {
        let concrete = path
            .replace("{queue}", "probe")
            .replace("{receipt}", &"0".repeat(32));
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let response = http()
            .request(method.clone(), format!("{url}{concrete}"))
            .body("x")
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("");
        assert!(
            code != "not_found" && code != "method_not_allowed",
            "{method} {concrete}: {status} {body}"
        );
    }

    // Every error response of the spec is the ErrorBody the daemon sends.
    let error_body = &spec["components"]["schemas"]["ErrorBody"];
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, answer) in operation["responses"].as_object().unwrap() {
                // The SQS API (POST /) answers SQS's error shape, in its own
                // content type (docs/sqs.md; tests/it/sqs_protocol.rs).
                if path == "/" {
                    assert!(
                        answer["description"].as_str().unwrap().contains("SQS")
                            || status.starts_with('5')
                    );
                    continue;
                }
                if status.starts_with('4') || status.starts_with('5') {
                    let body = &answer["content"]["application/json"]["schema"];
                    let sent = schema(&spec, body);
                    if body["$ref"] == "#/components/schemas/DeleteBusy" {
                        // A delete that pushes kept from finishing: the
                        // error shape, with its counts beside it.
                        let error = &sent["allOf"][1];
                        assert_eq!(
                            error["properties"]["error"]["$ref"],
                            error_body["properties"]["error"]["$ref"]
                        );
                        assert_eq!(error["required"], error_body["required"]);
                        continue;
                    }
                    assert_eq!(sent, error_body, "{method} {path} {status}");
                }
            }
        }
    }
    for (method, path) in [
        ("POST", "/v1/queues/bad%20name/items"),
        ("GET", "/v1/nowhere"),
        ("POST", "/v1/queues/q/pop?max=0"),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = http()
            .request(method, format!("{url}{path}"))
            .body("x")
            .send()
            .await
            .unwrap();
        assert!(response.status().is_client_error(), "{path}");
        let sent: Value = response.json().await.unwrap();
        check_object(&spec, error_body, &sent, path);
    }

    // The answers' shapes too: stats and a JSON pop.
    let pushed = http()
        .post(format!("{url}/v1/queues/shapes/items"))
        .body("a")
        .send()
        .await
        .unwrap();
    let pushed: Value = pushed.json().await.unwrap();
    let push_answer = &spec["components"]["schemas"]["PushAnswer"];
    assert_eq!(pushed["pushed"], 1);
    assert!(push_answer["properties"]["pushed"].is_object());
    let stats: Value = http()
        .get(format!("{url}/v1/queues/shapes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    check_object(
        &spec,
        &spec["components"]["schemas"]["QueueStats"],
        &stats,
        "stats",
    );
    let popped: Vec<Value> = http()
        .post(format!("{url}/v1/queues/shapes/pop?max=2&lease_ms=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    check_object(
        &spec,
        &spec["components"]["schemas"]["PoppedItem"],
        &popped[0],
        "popped item",
    );

    // The administration answers (one lease is in flight: `popped[0]`).
    let get = |path: &str| {
        let url = format!("{url}{path}");
        async move {
            http()
                .get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let schema_of = |name: &str| &spec["components"]["schemas"][name];
    let listed = get("/v1/queues?limit=10").await;
    check_object(&spec, schema_of("QueueList"), &listed, "queue list");
    check_object(
        &spec,
        schema_of("QueueStats"),
        &listed["queues"][0],
        "listed queue",
    );
    let leases = get("/v1/queues/shapes/leases").await;
    check_object(&spec, schema_of("LeaseList"), &leases, "lease list");
    check_object(&spec, schema_of("LeaseInfo"), &leases["leases"][0], "lease");
    assert_eq!(leases["leases"][0]["receipt"], popped[0]["receipt"]);
    let settings = get("/v1/queues/shapes/settings").await;
    // `stored` names only what the queue set, so only `settings` is whole.
    check_object(
        &spec,
        schema_of("Effective"),
        &settings["settings"],
        "settings",
    );
    assert_eq!(settings["stored"], serde_json::json!({}));
    let purged: Value = http()
        .post(format!("{url}/v1/queues/shapes/purge"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    check_object(&spec, schema_of("PurgeAnswer"), &purged, "purge");
    let deleted: Value = http()
        .delete(format!("{url}/v1/queues/shapes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    check_object(&spec, schema_of("DeleteAnswer"), &deleted, "delete");
    assert_eq!(
        (deleted["deleted"].clone(), deleted["leased"].clone()),
        (Value::Bool(true), serde_json::json!(1))
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spec_states_the_limits_of_the_code_and_the_running_configuration() {
    let daemon = Daemon::start(|config| {
        config.wait_max_ms = 5_000;
        config.staging.lost_race_wait_ms = 1_000;
        config.pop_max_items = 7;
    })
    .await;
    let spec: Value = http()
        .get(format!("{}/v1/openapi.json", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let pop = &spec["paths"]["/v1/queues/{queue}/pop"]["post"];
    let parameter = |operation: &Value, name: &str| -> Value {
        operation["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no parameter {name}"))["schema"]
            .clone()
    };
    assert_eq!(parameter(pop, "wait_ms")["maximum"], 5_000);
    assert_eq!(parameter(pop, "max")["maximum"], 7);
    let queue = parameter(pop, "queue");
    let suffix = hotq::keys::DEAD_LETTER_SUFFIX.len();
    assert_eq!(queue["maxLength"], hotq::keys::QUEUE_NAME_LEN_MAX + suffix);
    assert!(
        queue["pattern"].as_str().unwrap().contains("{0,127}"),
        "{queue}"
    );
    let pq_pop = &spec["paths"]["/v1/pqueues/{queue}/pop"]["post"];
    assert_eq!(
        parameter(pq_pop, "end")["enum"],
        serde_json::json!(["min", "max"])
    );
    // The console's calls state their limits too.
    let items = &spec["paths"]["/v1/queues/{queue}/items"]["get"];
    assert_eq!(parameter(items, "limit")["maximum"], 100);
    let id_max = hotq::console::browse::ITEM_ID_HEX_LEN_MAX / 2;
    assert_eq!(
        parameter(items, "after")["pattern"],
        format!("^(?:[0-9A-Fa-f]{{2}}){{1,{id_max}}}$")
    );
    let delete_item = &spec["paths"]["/v1/pqueues/{queue}/items/{id}"]["delete"];
    assert_eq!(parameter(delete_item, "id"), parameter(items, "after"));
    let traffic = &spec["paths"]["/v1/traffic"]["get"];
    let queues = parameter(traffic, "queues");
    assert!(
        queues["pattern"].as_str().unwrap().ends_with("{0,99}$"),
        "{queues}"
    );
    let asset = parameter(&spec["paths"]["/ui/{asset}"]["get"], "asset");
    assert_eq!(asset["enum"].as_array().unwrap().len(), 6);
    let settings = &spec["paths"]["/v1/pqueues/{queue}/settings"]["put"];
    let change = &settings["requestBody"]["content"]["application/json"]["schema"];
    assert!(change["properties"]["paused"].is_object(), "{change}");
    // Raw bodies are bytes, not arrays of numbers.
    let push = &spec["paths"]["/v1/queues/{queue}/items"]["post"];
    let body = &push["requestBody"]["content"]["application/octet-stream"]["schema"];
    assert_eq!(
        (&body["type"], &body["format"]),
        (&"string".into(), &"binary".into())
    );
    // The daemon's `payload_bytes_max` (1 MiB by default).
    assert_eq!(body["maxLength"], hotq::envelope::PAYLOAD_BYTES_MAX_DEFAULT);
    // Every status listed, no "4XX" catch-all.
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            assert!(!responses.contains_key("4XX"), "{method} {path}");
            if path.starts_with("/v1/") && path != "/v1/openapi.json" {
                assert!(responses.contains_key("401"), "{method} {path}");
            }
        }
    }
    daemon.stop().await;
}

/// Requests the spec allows that a fuzzer (Schemathesis, every check, seed
/// 7) reported refused, answered as the spec says: the longest queue name
/// the spec allows (128 characters plus `.dead`) on every lease call, and
/// an `ack=` that names no receipt on a direct pop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_spec_allows_are_served() {
    let daemon = Daemon::start(|_| {}).await;
    let client = common::client::Client::new(&daemon.url);
    let longest = format!(
        "{}{}",
        "0".repeat(hotq::keys::QUEUE_NAME_LEN_MAX),
        hotq::keys::DEAD_LETTER_SUFFIX
    );
    client.push_batch(&longest, &["a", "b"]).await;
    let receipt = client.pop_leased(&longest, 60_000).await.unwrap().receipt;
    assert_eq!(client.extend(&longest, &receipt, 60_000).await, 200);
    let nacked = http()
        .post(format!("{}/v1/queues/{longest}/nack/{receipt}", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(nacked.status(), StatusCode::OK);
    let receipt = client.pop_leased(&longest, 60_000).await.unwrap().receipt;
    let popped = http()
        .post(format!(
            "{}/v1/queues/{longest}/pop?lease_ms=60000&ack={receipt}",
            daemon.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.status(), StatusCode::OK);
    assert_eq!(popped.headers()["hotq-acked"], "acked");
    let receipt = popped.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(client.ack(&longest, &receipt).await, 204);

    client.push("direct", "x").await;
    let direct = http()
        .post(format!(
            "{}/v1/queues/direct/pop?path=direct&ack=",
            daemon.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        direct.status(),
        StatusCode::OK,
        "an empty ack names nothing"
    );
    assert_eq!(direct.text().await.unwrap(), "x");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_api_md_lists_every_route_and_its_statuses() {
    let daemon = Daemon::start(|_| {}).await;
    let spec: Value = http()
        .get(format!("{}/v1/openapi.json", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut served = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let statuses: Vec<&str> = operation["responses"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            served.insert(format!(
                "{} {path} {}",
                method.to_uppercase(),
                statuses.join(" ")
            ));
        }
    }
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md")).unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let method = cells.get(1)?;
            (["GET", "POST", "PUT", "DELETE"].contains(method))
                .then(|| format!("{method} {} {}", cells[2].trim_matches('`'), cells[3]))
        })
        .collect();
    assert_eq!(
        documented, served,
        "docs/api.md's routes table vs the served spec"
    );
    daemon.stop().await;
}

//! The configuration's parsing, overrides and checks.

use super::*;

/// `text` parses but fails validation, with an error that names `key`.
fn assert_refused(text: &str, key: &str) {
    let error = Config::from_toml(text, "test")
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(error.0.contains(key), "{text:?}: {error}");
}

#[test]
fn the_shipped_example_parses_and_validates() {
    let text = include_str!("../../config/hotq.toml");
    let config = Config::from_toml(text, "config/hotq.toml").unwrap();
    config.validate().unwrap();
    assert_eq!(config.listen, Config::default().listen);
}

#[test]
fn unknown_and_invalid_keys_are_named() {
    let error = Config::from_toml("listen_port = 3", "test").unwrap_err();
    assert!(error.0.contains("listen_port"), "{error}");
    let error = Config::from_toml("[staging]\nbatch = 3", "test").unwrap_err();
    assert!(error.0.contains("batch"), "{error}");
    assert_refused("[staging]\nlost_race_wait_ms = 70000", "lost_race_wait_ms");
    assert_refused("[staging]\nresult_grace_ms = 3600001", "result_grace_ms");
    assert_refused("[staging]\nhand_off_wait_ms = 600001", "hand_off_wait_ms");
    let error = Config::from_toml("durability = \"fast\"", "test").unwrap_err();
    assert!(
        error.0.contains("durability") || error.0.contains("fast"),
        "{error}"
    );
    assert_refused("[leases.queues.\"a/b\"]\nmax_deliveries = 2", "a/b");
    assert_refused(
        "[leases.queues.jobs]\nmax_deliveries = 0",
        "jobs.max_deliveries",
    );
    let config = Config::from_toml("[leases.queues.jobs]\nmax_deliveries = 2", "test").unwrap();
    let policy = crate::staging::StagingConfig::from_config(&config).delivery;
    assert_eq!(
        policy.max_deliveries(&crate::keys::QueueName::new("jobs").unwrap()),
        Some(2)
    );
    assert_eq!(
        policy.max_deliveries(&crate::keys::QueueName::new("other").unwrap()),
        Some(5)
    );
    assert_refused("pop_max_items = 0", "pop_max_items");
}

#[test]
fn public_bind_needs_a_token_or_explicit_consent() {
    let public = Config {
        listen: "0.0.0.0:7070".parse().unwrap(),
        ..Config::default()
    };
    assert!(public.validate().is_err());
    let with_token = Config {
        token: Some("secret".into()),
        ..public.clone()
    };
    assert!(with_token.validate().is_ok());
    let forced = public.apply(Overrides {
        allow_insecure_bind: true,
        ..Overrides::default()
    });
    assert!(forced.is_ok());
}

#[test]
fn worker_threads_are_left_to_tokio_unless_set() {
    assert_eq!(Config::default().worker_threads, 0);
    assert_eq!(Config::default().runtime_workers(), None);
    let set = Config::default()
        .apply(Overrides {
            worker_threads: Some(3),
            ..Overrides::default()
        })
        .unwrap();
    assert_eq!(set.runtime_workers(), Some(3));
    assert_refused("worker_threads = 5000", "worker_threads");
}

#[test]
fn the_resp_listener_is_on_by_default_and_off_with_an_empty_value() {
    let default = Config::default();
    assert_eq!(
        default.resp_listen,
        RespListen(Some(SocketAddr::from(RESP_LISTEN_DEFAULT)))
    );
    let off = Config::from_toml("resp_listen = \"\"", "test").unwrap();
    assert_eq!(off.resp_listen, RespListen(None));
    let set = Config::from_toml("resp_listen = \"127.0.0.1:6380\"", "test").unwrap();
    assert_eq!(set.resp_listen.to_string(), "127.0.0.1:6380");
    assert!(Config::from_toml("resp_listen = \"nowhere\"", "test").is_err());
    let flag = set
        .apply(Overrides {
            resp_listen: Some("".parse().unwrap()),
            ..Overrides::default()
        })
        .unwrap();
    assert_eq!(flag.resp_listen, RespListen(None));
    assert_refused("resp_listen = \"0.0.0.0:7379\"", "resp_listen");
    assert_refused("[resp]\nconnections_max = 0", "resp.connections_max");
    assert_refused("[resp]\nbuffer_max_bytes = 1000", "resp.buffer_max_bytes");
}

//! A real daemon on `127.0.0.1:0`, started as a library call with an
//! injected shutdown, and an HTTP client for it.

use std::net::SocketAddr;

use hotq::config::Config;
use hotq::store::Store;
use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running daemon on a store of type `S` (the embedded store unless
/// started with [`Daemon::start_on`] on another); dropping it without
/// [`Daemon::stop`] leaves it running until the test's runtime ends.
pub struct Daemon<S: Store = EmbeddedStore> {
    pub url: String,
    pub metrics_url: String,
    /// The RESP listener's address, for a daemon started with one
    /// ([`Daemon::start_resp`]).
    pub resp: Option<SocketAddr>,
    pub store: S,
    pub dir: Option<tempfile::TempDir>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), hotq::server::ServeError>>>,
}

impl Daemon {
    /// Starts a daemon on a fresh embedded store with `configure` applied.
    pub async fn start(configure: impl FnOnce(&mut Config)) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut daemon = Daemon::start_in(dir.path(), Durability::Sync, configure).await;
        daemon.dir = Some(dir);
        daemon
    }

    /// [`Daemon::start`], with a RESP listener on `127.0.0.1:0` too.
    pub async fn start_resp(configure: impl FnOnce(&mut Config)) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut store_config = EmbeddedConfig::new(dir.path());
        store_config.durability = Durability::Sync;
        let store = EmbeddedStore::open(store_config).unwrap();
        let mut daemon = Daemon::start_with(store, configure, true).await;
        daemon.dir = Some(dir);
        daemon
    }

    /// The RESP listener's `redis://` URL.
    pub fn redis_url(&self) -> String {
        format!(
            "redis://{}/",
            self.resp.expect("a daemon with a RESP listener")
        )
    }

    /// Starts a daemon on the embedded store in `path`.
    pub async fn start_in(
        path: &std::path::Path,
        durability: Durability,
        configure: impl FnOnce(&mut Config),
    ) -> Daemon {
        let mut store_config = EmbeddedConfig::new(path);
        store_config.durability = durability;
        let store = EmbeddedStore::open(store_config).unwrap();
        Daemon::start_on(store, configure).await
    }
}

impl<S: Store> Daemon<S> {
    /// Starts a daemon on `store`, which another daemon of this process
    /// may serve too (two daemons on one store, as on one cluster).
    pub async fn start_on(store: S, configure: impl FnOnce(&mut Config)) -> Daemon<S> {
        Daemon::start_with(store, configure, false).await
    }

    /// Starts a daemon on `store`, with a RESP listener when `resp`.
    pub async fn start_with(
        store: S,
        configure: impl FnOnce(&mut Config),
        resp: bool,
    ) -> Daemon<S> {
        let mut config = Config::default();
        configure(&mut config);
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api_address: SocketAddr = api.local_addr().unwrap();
        let metrics_address: SocketAddr = metrics.local_addr().unwrap();
        let resp = match resp {
            true => Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()),
            false => None,
        };
        let resp_address = resp.as_ref().map(|listener| listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let listeners = hotq::server::Listeners {
            api,
            metrics: Some(metrics),
            resp,
        };
        let task = tokio::spawn(hotq::server::serve_on(
            store.clone(),
            config,
            listeners,
            async move {
                let _ = stopped.await;
            },
        ));
        Daemon {
            url: format!("http://{api_address}"),
            metrics_url: format!("http://{metrics_address}/metrics"),
            resp: resp_address,
            store,
            dir: None,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Signals shutdown and waits for the daemon to finish.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

/// A client with generous timeouts (long polls take their wait).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .build()
        .unwrap()
}

/// `GET url` answered with JSON.
pub async fn get_json(url: &str) -> serde_json::Value {
    http().get(url).send().await.unwrap().json().await.unwrap()
}

/// Sum of the samples of metric `name` whose labels contain every one of
/// `labels` (`queue="q"`, …), over its other labels.
pub async fn metric_sum(metrics_url: &str, name: &str, labels: &[&str]) -> f64 {
    let text = http()
        .get(metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("{name}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Items the daemon at `metrics_url` delivered through its lines
/// (`hotq_pops_total{path="staged"}`, summed over queues).
pub async fn staged_pops(metrics_url: &str) -> f64 {
    metric_sum(metrics_url, "hotq_pops_total", &["path=\"staged\""]).await
}

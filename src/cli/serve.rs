//! `hotq serve`: the daemon, configured from its file and flags, logging
//! JSON lines to stderr, stopped by SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::EXIT_OK;
use crate::config::{Backend, Config, Overrides, RespListen};
use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

/// `hotq serve` flags; each overrides the configuration file.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file (default: config/hotq.toml if it exists).
    #[arg(long, env = "HOTQ_CONFIG")]
    pub config: Option<PathBuf>,
    /// HTTP API address (default 127.0.0.1:7070).
    #[arg(long, env = "HOTQ_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Prometheus exporter address (default 127.0.0.1:9464).
    #[arg(long, env = "HOTQ_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// RESP (Redis protocol) listener address (default 127.0.0.1:7379;
    /// empty: off).
    #[arg(long, env = "HOTQ_RESP_LISTEN")]
    pub resp_listen: Option<RespListen>,
    /// Embedded store directory (default ./data).
    #[arg(long, env = "HOTQ_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Bearer token API calls must carry.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Embedded store durability: sync or buffered.
    #[arg(long, env = "HOTQ_DURABILITY")]
    pub durability: Option<Durability>,
    /// Serve a non-loopback address without a token.
    #[arg(long)]
    pub allow_insecure_bind: bool,
    /// Runtime worker threads (default 0: tokio's, one per core).
    #[arg(long, env = "HOTQ_WORKER_THREADS")]
    pub worker_threads: Option<usize>,
}

/// Installs JSON logs on stderr, level from `RUST_LOG` (default `info`;
/// `RUST_LOG=info,hotq::request=debug` adds a line per API call, see
/// `docs/operations.md`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // fjall's own info lines (file ingestion, recovery) are noise here.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,fjall=warn,lsm_tree=warn"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Runs the daemon until SIGINT or SIGTERM, on a runtime of the
/// configured size (so the configuration is read before the runtime
/// starts).
pub fn serve(args: ServeArgs) -> Result<u8, String> {
    init_logging();
    let config = Config::load(args.config.as_deref())
        .and_then(|config| {
            config.apply(Overrides {
                listen: args.listen,
                metrics_listen: args.metrics_listen,
                resp_listen: args.resp_listen,
                data_dir: args.data_dir,
                token: args.token,
                durability: args.durability,
                allow_insecure_bind: args.allow_insecure_bind,
                worker_threads: args.worker_threads,
            })
        })
        .map_err(|e| format!("configuration: {e}"))?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = config.runtime_workers() {
        builder.worker_threads(workers);
    }
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    // The store is opened inside the runtime (`run`): the FoundationDB
    // store starts its marker sweep on the current runtime.
    runtime.block_on(run(config))
}

/// The daemon on a loaded configuration.
async fn run(config: Config) -> Result<u8, String> {
    tracing::info!(
        listen = %config.listen,
        metrics_listen = %config.metrics_listen,
        resp_listen = %config.resp_listen,
        backend = ?config.backend,
        data_dir = %config.data_dir.display(),
        durability = ?config.durability,
        token = config.token.is_some(),
        worker_threads = tokio::runtime::Handle::current().metrics().num_workers(),
        "starting"
    );
    let shutdown = shutdown_signal();
    // The store first: a second daemon started with the same configuration
    // is told that the data directory is in use (and by whom), not only
    // that the port is.
    let served = match config.backend {
        Backend::Embedded => {
            let mut store_config = EmbeddedConfig::new(&config.data_dir);
            store_config.durability = config.durability;
            let store = EmbeddedStore::open(store_config)
                .map_err(|e| format!("cannot open the store: {e}"))?;
            let listeners = listen(&config).await?;
            crate::server::serve_on(store, config, listeners, shutdown).await
        }
        #[cfg(feature = "fdb")]
        Backend::Fdb => {
            let store = crate::store::fdb::open_for_daemon(config.fdb_cluster_file.as_deref())
                .map_err(|e| format!("opening the FoundationDB cluster: {e}"))?;
            let listeners = listen(&config).await?;
            crate::server::serve_on(store, config, listeners, shutdown).await
        }
        #[cfg(not(feature = "fdb"))]
        // Config::validate refuses it first; said again rather than a panic.
        Backend::Fdb => return Err("backend fdb needs hotq built with the fdb feature".into()),
    };
    served.map_err(|e| e.to_string())?;
    Ok(EXIT_OK)
}

/// The API's and the exporter's listeners.
async fn listen(config: &Config) -> Result<crate::server::Listeners, String> {
    let api = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let metrics = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.metrics_listen))?;
    let resp = match config.resp_listen {
        RespListen(Some(address)) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| format!("cannot listen on {address} (resp_listen): {e}"))?,
        ),
        RespListen(None) => None,
    };
    Ok(crate::server::Listeners {
        api,
        metrics: Some(metrics),
        resp,
    })
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are
/// installed here, when it is called (before the listeners are bound),
/// not when the future is first polled: a SIGTERM that arrives once the
/// daemon has said it listens stops it cleanly rather than killing it
/// (the default action; CI saw it, a restarted daemon terminated at once).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let terminate = signal(SignalKind::terminate());
        let interrupt = signal(SignalKind::interrupt());
        async move {
            match (terminate, interrupt) {
                (Ok(mut terminate), Ok(mut interrupt)) => {
                    tokio::select! {
                        _ = terminate.recv() => {}
                        _ = interrupt.recv() => {}
                    }
                }
                (Err(error), _) | (_, Err(error)) => {
                    tracing::error!(%error, "cannot listen for SIGTERM or SIGINT; Ctrl-C only");
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

//! The commands: a table of what each is (name, arity, flags, group,
//! summary, as `COMMAND` and `COMMAND DOCS` answer them), the arguments'
//! parsing, and the dispatch to one file per family:
//!
//! - [`conn`]: what clients send on connect: `HELLO`, `AUTH`, `CLIENT`,
//!   `SELECT`, `PING`, `ECHO`, `QUIT`, `RESET`, `COMMAND`, `INFO`.
//! - [`queue`]: hotq's FIFO queues: `PUSH`, `POP`, `PEEK`, `STATS`.
//! - [`leases`]: `ACK`, `NACK`, `EXTEND`, `REDRIVE`.
//! - [`admin`]: `QUEUES`, `LEASES`, `PURGE`, `DELETE`, `SETTINGS`,
//!   `PAUSE`, `RESUME`.
//! - [`pq`]: priority queues, `PQ <subcommand>` as `hotq pq` names them.
//! - [`list`]: Redis's list commands on FIFO queues: `LPUSH`, `RPUSH`,
//!   `LPOP`, `RPOP`, `BLPOP`, `BRPOP`, `LLEN`.
//!
//! Each command parses its arguments, calls the functions the `/v1` HTTP
//! handlers call (with their checks and limits), and renders the answer;
//! errors keep Redis's shape (`-ERR …`), with hotq's stable error code
//! as the first word after `ERR` when the core refused.

pub mod admin;
pub mod conn;
pub mod leases;
pub mod list;
pub mod pq;
pub mod queue;
pub mod spec;

use std::net::SocketAddr;

use bytes::Bytes;
use tokio::sync::watch;

use super::frame::{Protocol, Reply};
use crate::keys::QueueName;
use crate::server::error::ApiError;
use crate::server::state::AppState;
use crate::service::Store;
pub use spec::{Spec, lookup};

/// One connection's state, as its commands set it.
#[derive(Debug)]
pub struct Session {
    /// The connection's id (`CLIENT ID`, `HELLO`).
    pub id: u64,
    /// The client's address.
    pub peer: SocketAddr,
    /// RESP2 until `HELLO 3`.
    pub protocol: Protocol,
    /// True once `AUTH` (or `HELLO … AUTH`) presented the token, or when
    /// no token is set.
    pub authenticated: bool,
    /// `CLIENT SETNAME`, `HELLO … SETNAME`.
    pub name: Option<Bytes>,
    /// `CLIENT SETINFO LIB-NAME`.
    pub lib_name: Option<Bytes>,
    /// `CLIENT SETINFO LIB-VER`.
    pub lib_ver: Option<Bytes>,
    /// Set by `QUIT`: the connection closes once its replies are written.
    pub closing: bool,
}

impl Session {
    /// A fresh connection's session: authenticated unless a token is set.
    pub fn new(id: u64, peer: SocketAddr, token_required: bool) -> Session {
        Session {
            id,
            peer,
            protocol: Protocol::Resp2,
            authenticated: !token_required,
            name: None,
            lib_name: None,
            lib_ver: None,
            closing: false,
        }
    }
}

/// What a command runs with.
pub struct Ctx<'a, S: Store> {
    /// The daemon's shared state (store, coordinator, configuration).
    pub state: &'a AppState<S>,
    /// The connection's session.
    pub session: &'a mut Session,
    /// Turns true at shutdown: a blocking pop without end stops waiting.
    pub stop: &'a watch::Receiver<bool>,
}

/// Why a command failed: the core refused (its stable code), or the
/// request was malformed (a line of Redis's own wording).
#[derive(Debug)]
pub enum CmdError {
    /// Answered `-ERR <code> <message>`.
    Api(ApiError),
    /// Answered `-<line>`, e.g. `ERR syntax error`, `NOAUTH …`.
    Line(String),
}

impl From<ApiError> for CmdError {
    fn from(error: ApiError) -> Self {
        CmdError::Api(error)
    }
}

/// The core's refusals, answered with the same code as over HTTP.
impl From<crate::service::Error> for CmdError {
    fn from(error: crate::service::Error) -> Self {
        CmdError::Api(error.into())
    }
}

impl CmdError {
    /// `-ERR syntax error`, as Redis answers an option it does not know.
    pub fn syntax() -> CmdError {
        CmdError::Line("ERR syntax error".into())
    }

    /// The error's reply.
    pub fn into_reply(self) -> Reply {
        match self {
            CmdError::Api(error) => Reply::error(format!("ERR {} {}", error.code, error.message)),
            CmdError::Line(line) => Reply::error(line),
        }
    }
}

/// A command's answer.
pub type Answer = Result<Reply, CmdError>;

/// A command's arguments after its name (and subcommand), read in order.
#[derive(Debug)]
pub struct Args {
    parts: std::vec::IntoIter<Bytes>,
}

impl Args {
    /// The arguments `parts`.
    pub fn new(parts: Vec<Bytes>) -> Args {
        Args {
            parts: parts.into_iter(),
        }
    }

    /// How many are left.
    pub fn left(&self) -> usize {
        self.parts.len()
    }

    /// The next argument (the table's arity guarantees the required ones).
    pub fn next_arg(&mut self) -> Option<Bytes> {
        self.parts.next()
    }

    /// The next argument, which the command requires.
    pub fn required(&mut self) -> Result<Bytes, CmdError> {
        self.next_arg().ok_or_else(CmdError::syntax)
    }

    /// The rest of the arguments.
    pub fn rest(&mut self) -> Vec<Bytes> {
        self.parts.by_ref().collect()
    }

    /// The next argument as text (its queue name, receipt, option).
    pub fn text(&mut self) -> Result<String, CmdError> {
        Ok(String::from_utf8_lossy(&self.required()?).into_owned())
    }

    /// The next argument as a keyword, upper-cased, if there is one.
    pub fn peek_keyword(&self) -> Option<String> {
        self.parts
            .as_slice()
            .first()
            .map(|part| String::from_utf8_lossy(part).to_ascii_uppercase())
    }

    /// The next argument as a whole number, for option `what`.
    pub fn number(&mut self, what: &str) -> Result<u64, CmdError> {
        let raw = self.required()?;
        parse_number(&raw, what)
    }
}

/// `raw` as a whole number, for option `what`: 400 `bad_parameter` else.
pub fn parse_number(raw: &[u8], what: &str) -> Result<u64, CmdError> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(|| {
            CmdError::Api(ApiError::bad_parameter(format!(
                "{what} must be a whole number, got {:?}",
                String::from_utf8_lossy(raw)
            )))
        })
}

/// A queue name from its argument (the HTTP API's check and code).
pub fn queue_name(raw: &str) -> Result<QueueName, CmdError> {
    Ok(crate::server::error::queue_name(raw)?)
}

/// Runs `spec` with `args` (the arguments after the command's name and,
/// for a container, its subcommand). Authentication and the store's
/// health are checked first, as the HTTP API's gate checks them.
pub async fn execute<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, args: Args) -> Answer {
    if !ctx.session.authenticated && !spec.no_auth {
        return Err(CmdError::Line("NOAUTH Authentication required.".into()));
    }
    if spec.uses_store
        && let Some(reason) = ctx.state.hotq.store_failure()
    {
        return Err(ApiError::store_unavailable(format!("the store has failed: {reason}")).into());
    }
    match spec.name {
        "ping" | "echo" | "quit" | "reset" | "select" | "hello" | "auth" | "client" | "command"
        | "info" => conn::run(ctx, spec, args),
        "push" | "pop" | "peek" | "stats" => queue::run(ctx, spec, args).await,
        "ack" | "nack" | "extend" | "redrive" => leases::run(ctx, spec, args).await,
        "queues" | "leases" | "purge" | "delete" | "settings" | "pause" | "resume" => {
            admin::run(ctx, spec, args).await
        }
        "lpush" | "rpush" | "lpop" | "rpop" | "blpop" | "brpop" | "llen" => {
            list::run(ctx, spec, args).await
        }
        name if name.starts_with("pq|") => pq::run(ctx, spec, args).await,
        other => Err(CmdError::Line(format!(
            "ERR command '{other}' is not served"
        ))),
    }
}

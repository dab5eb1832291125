//! What clients send on connect and around their work: `HELLO`, `AUTH`,
//! `CLIENT`, `SELECT`, `PING`, `ECHO`, `QUIT`, `RESET`, `COMMAND`,
//! `INFO`. Answered as Redis answers them, so that redis-cli, redis-py,
//! ioredis, go-redis and the `redis` crate connect without errors.

use bytes::Bytes;

use super::spec::{COMMANDS, Spec};
use super::{Answer, Args, CmdError, Ctx};
use crate::resp::frame::{Protocol, Reply};
use crate::service::Store;

/// The Redis version hotq answers as: the commands it serves behave as
/// this version's do (`LPOP` with a count, `BLPOP` with a fractional
/// timeout, `CLIENT SETINFO`, `COMMAND DOCS`).
pub const REDIS_VERSION: &str = "7.2.0";

/// Runs a connection or server command.
pub fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, mut args: Args) -> Answer {
    match spec.name {
        "ping" => Ok(match args.next_arg() {
            None => Reply::Simple("PONG"),
            Some(message) => Reply::Bulk(message),
        }),
        "echo" => Ok(Reply::Bulk(args.required()?)),
        "quit" => {
            ctx.session.closing = true;
            Ok(Reply::OK)
        }
        "reset" => {
            let token_required = ctx.state.config.token.is_some();
            let (id, peer) = (ctx.session.id, ctx.session.peer);
            *ctx.session = super::Session::new(id, peer, token_required);
            Ok(Reply::Simple("RESET"))
        }
        "select" => select(&args.required()?),
        "hello" => hello(ctx, args),
        "auth" => auth(ctx, args),
        "client" => client(ctx, args),
        "command" => command(args),
        "info" => Ok(info(ctx)),
        other => Err(CmdError::Line(format!(
            "ERR command '{other}' is not served"
        ))),
    }
}

fn select(index: &[u8]) -> Answer {
    match std::str::from_utf8(index).ok().map(str::parse::<i64>) {
        Some(Ok(0)) => Ok(Reply::OK),
        Some(Ok(_)) => Err(CmdError::Line("ERR DB index is out of range".into())),
        _ => Err(CmdError::Line(
            "ERR value is not an integer or out of range".into(),
        )),
    }
}

/// True when `presented` is the daemon's token (compared without an
/// early exit, as the HTTP API compares it).
fn token_matches<S: Store>(ctx: &Ctx<'_, S>, presented: &[u8]) -> bool {
    ctx.state.token_matches(presented)
}

fn wrong_pass() -> CmdError {
    CmdError::Line("WRONGPASS invalid username-password pair or user is disabled.".into())
}

/// `AUTH token` or `AUTH username token` (the username is not checked:
/// the token is the secret).
fn auth<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let first = args.required()?;
    let (token, named_user) = match args.next_arg() {
        Some(token) => (token, true),
        None => (first, false),
    };
    if args.left() > 0 {
        return Err(CmdError::syntax());
    }
    if ctx.state.config.token.is_none() {
        if named_user {
            // The default user has no password: any one is accepted.
            ctx.session.authenticated = true;
            return Ok(Reply::OK);
        }
        return Err(CmdError::Line(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".into(),
        ));
    }
    if !token_matches(ctx, &token) {
        return Err(wrong_pass());
    }
    ctx.session.authenticated = true;
    Ok(Reply::OK)
}

/// `HELLO [protover [AUTH username token] [SETNAME name]]`.
fn hello<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let mut protocol = ctx.session.protocol;
    if let Some(version) = args.next_arg() {
        protocol = match std::str::from_utf8(&version).ok().map(str::parse::<i64>) {
            Some(Ok(2)) => Protocol::Resp2,
            Some(Ok(3)) => Protocol::Resp3,
            Some(Ok(_)) => {
                return Err(CmdError::Line(
                    "NOPROTO unsupported protocol version".into(),
                ));
            }
            _ => {
                return Err(CmdError::Line(
                    "ERR Protocol version is not an integer or out of range".into(),
                ));
            }
        };
    }
    let mut name = None;
    let mut authenticated = ctx.session.authenticated;
    while let Some(option) = args.peek_keyword() {
        args.next_arg();
        match option.as_str() {
            "AUTH" if args.left() >= 2 => {
                let (_user, token) = (args.required()?, args.required()?);
                if ctx.state.config.token.is_some() && !token_matches(ctx, &token) {
                    return Err(wrong_pass());
                }
                authenticated = true;
            }
            "SETNAME" if args.left() >= 1 => name = Some(client_name(args.required()?)?),
            _ => {
                return Err(CmdError::Line(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    option.to_ascii_lowercase()
                )));
            }
        }
    }
    if !authenticated {
        return Err(CmdError::Line(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    ctx.session.authenticated = true;
    ctx.session.protocol = protocol;
    if name.is_some() {
        ctx.session.name = name;
    }
    Ok(Reply::map([
        ("server", Reply::text("hotq")),
        ("version", Reply::text(REDIS_VERSION)),
        ("proto", Reply::Int(protocol.number())),
        ("id", Reply::Int(ctx.session.id as i64)),
        ("mode", Reply::text("standalone")),
        ("role", Reply::text("master")),
        ("modules", Reply::Array(Vec::new())),
    ]))
}

/// A connection name: Redis refuses spaces, newlines and other special
/// characters (they would break `CLIENT LIST`'s lines).
fn client_name(name: Bytes) -> Result<Bytes, CmdError> {
    if name.iter().any(|byte| !(b'!'..=b'~').contains(byte)) {
        return Err(CmdError::Line(
            "ERR Client names cannot contain spaces, newlines or special characters.".into(),
        ));
    }
    Ok(name)
}

/// `CLIENT SETNAME|GETNAME|SETINFO|ID|INFO`.
fn client<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let sub = args.peek_keyword().unwrap_or_default();
    args.next_arg();
    let arity_error = || {
        CmdError::Line(format!(
            "ERR wrong number of arguments for 'client|{}' command",
            sub.to_ascii_lowercase()
        ))
    };
    match (sub.as_str(), args.left()) {
        ("SETNAME", 1) => {
            let name = client_name(args.required()?)?;
            ctx.session.name = (!name.is_empty()).then_some(name);
            Ok(Reply::OK)
        }
        ("GETNAME", 0) => Ok(ctx.session.name.clone().map_or(Reply::Nil, Reply::Bulk)),
        ("ID", 0) => Ok(Reply::Int(ctx.session.id as i64)),
        ("INFO", 0) => Ok(Reply::text(client_info(ctx))),
        ("SETINFO", 2) => {
            let attribute = args.text()?.to_ascii_uppercase();
            let value = args.required()?;
            match attribute.as_str() {
                "LIB-NAME" => ctx.session.lib_name = Some(client_name(value)?),
                "LIB-VER" => ctx.session.lib_ver = Some(client_name(value)?),
                other => {
                    return Err(CmdError::Line(format!("ERR Unrecognized option '{other}'")));
                }
            }
            Ok(Reply::OK)
        }
        ("SETNAME" | "GETNAME" | "ID" | "INFO" | "SETINFO", _) => Err(arity_error()),
        (other, _) => Err(CmdError::Line(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            other.to_ascii_lowercase()
        ))),
    }
}

/// `CLIENT INFO`'s line, with the fields a hotq connection has.
fn client_info<S: Store>(ctx: &Ctx<'_, S>) -> String {
    let text = |value: &Option<Bytes>| {
        value
            .as_ref()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
            .unwrap_or_default()
    };
    let session = &ctx.session;
    format!(
        "id={} addr={} name={} db=0 resp={} lib-name={} lib-ver={}\n",
        session.id,
        session.peer,
        text(&session.name),
        session.protocol.number(),
        text(&session.lib_name),
        text(&session.lib_ver)
    )
}

/// `INFO`: the server section, with what clients look for (`redis_version`,
/// `loading:0` for ioredis's ready check) and hotq's own version.
fn info<S: Store>(ctx: &Ctx<'_, S>) -> Reply {
    let address = ctx
        .state
        .config
        .resp_listen
        .0
        .map(|address| address.port())
        .unwrap_or_default();
    Reply::text(format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nhotq_version:{}\r\nredis_mode:standalone\r\n\
         tcp_port:{address}\r\n\r\n# Persistence\r\nloading:0\r\n\r\n# Replication\r\nrole:master\r\n\
         connected_slaves:0\r\n",
        env!("CARGO_PKG_VERSION")
    ))
}

/// `COMMAND`, `COMMAND COUNT|LIST|INFO|DOCS`.
fn command(mut args: Args) -> Answer {
    let Some(sub) = args.peek_keyword() else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
    };
    args.next_arg();
    let names = args.rest();
    match sub.as_str() {
        "COUNT" if names.is_empty() => Ok(Reply::Int(COMMANDS.len() as i64)),
        "LIST" if names.is_empty() => Ok(Reply::Array(
            COMMANDS.iter().map(|spec| Reply::text(spec.name)).collect(),
        )),
        "INFO" => Ok(Reply::Array(match names.is_empty() {
            true => COMMANDS.iter().map(command_info).collect(),
            false => names
                .iter()
                .map(|name| named(name).map_or(Reply::NilArray, command_info))
                .collect(),
        })),
        "DOCS" => {
            let specs: Vec<&Spec> = match names.is_empty() {
                true => COMMANDS.iter().collect(),
                false => names.iter().filter_map(|name| named(name)).collect(),
            };
            Ok(Reply::Map(
                specs
                    .into_iter()
                    .map(|spec| (Reply::text(spec.name), command_docs(spec)))
                    .collect(),
            ))
        }
        "COUNT" | "LIST" => Err(CmdError::syntax()),
        other => Err(CmdError::Line(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            other.to_ascii_lowercase()
        ))),
    }
}

fn named(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name))
}

/// One command's `COMMAND INFO` entry: name, arity, flags, first key,
/// last key, step, ACL categories, tips, key specs, subcommands.
fn command_info(spec: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Int(spec.arity),
        Reply::Array(spec.flags.iter().map(|flag| Reply::Simple(flag)).collect()),
        Reply::Int(spec.first_key),
        Reply::Int(spec.last_key),
        Reply::Int(spec.step),
        Reply::Array(vec![Reply::Simple(acl_category(spec))]),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(spec.subcommands.iter().map(command_info).collect()),
    ])
}

fn acl_category(spec: &Spec) -> &'static str {
    match spec.group {
        "connection" => "@connection",
        "server" => "@admin",
        "list" => "@list",
        _ => "@hotq",
    }
}

/// One command's `COMMAND DOCS` entry.
fn command_docs(spec: &Spec) -> Reply {
    let mut entries = vec![
        ("summary", Reply::text(spec.summary)),
        ("since", Reply::text("0.1.0")),
        ("group", Reply::text(spec.group)),
    ];
    if !spec.subcommands.is_empty() {
        let subcommands = spec
            .subcommands
            .iter()
            .map(|sub| (Reply::text(sub.name), command_docs(sub)))
            .collect();
        entries.push(("subcommands", Reply::Map(subcommands)));
    }
    Reply::map(entries)
}

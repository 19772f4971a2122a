//! `utrace recv -d DIR [--port N] [--run-cmd CMD]`: receive the sessions `record --host` sends
//! (by utrace or uftrace 0.13) into data directories under DIR, until SIGINT or SIGTERM
//! ([`crate::net::server`]).

use crate::invocation::Invocation;
use crate::net::{proto, server};
use crate::notice::Notices;
use std::process::ExitCode;

pub fn run(inv: &Invocation, notices: &mut Notices) -> anyhow::Result<ExitCode> {
    notices.flush();
    let opts = server::Options {
        dir: inv.args.data.data.clone(),
        port: proto::parse_port(inv.args.record.port.as_deref())?,
        run_cmd: inv.args.record.run_cmd.clone(),
    };
    server::serve(&opts)?;
    Ok(ExitCode::SUCCESS)
}

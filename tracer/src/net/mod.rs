//! Trace data over the network, in uftrace 0.13's protocol ([`proto`]): `record --host` sends
//! a recording as it is made ([`send`]), `recv` receives sessions into data
//! directories ([`server`]).

pub mod proto;
pub mod send;
pub mod server;

//! `mosc-guard recover` and the way back for a pool the bug already degraded: the command on
//! dumps and against a real API server ([`cli`]; `cli::dumps` needs no API server), and whole
//! pools healed on a real control plane with the MCO simulator ([`pool`]).

mod cli;
mod pool;

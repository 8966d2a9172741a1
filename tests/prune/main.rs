//! `mosc-guard prune`: the command on dumps and against a real API server with the guard in
//! front ([`cli`]; `cli::dumps` needs no API server), and pools that still update and roll back
//! after it, per release, with the MCO simulator deleting the images ([`rollouts`]).

mod cli;
mod rollouts;

//! The command line: [`args`] is what clap parses; each subcommand has a module that validates
//! its flags and wires the shells together for it.

pub mod args;
pub mod certs;
pub mod check;
mod dump;
pub mod error;
pub mod images;
mod notes;
mod output;
pub mod prune;
pub mod recover;
pub mod serve;
pub mod uninstall;

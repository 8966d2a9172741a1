//! `mosc-guard check`: the verdict from a workstation, on must-gather dumps ([`cli`]: no API
//! server) and on what `hack/gather` collects from a real one ([`gather`]).

mod cli;
mod gather;

//! Whether every image nodes need is still served, asked as a node pulls: the registry check
//! and `mosc-guard images` against a real registry ([`truth`]), and `serve`'s audit, gauges and
//! alert on a real cluster ([`audit`]).

mod audit;
mod truth;

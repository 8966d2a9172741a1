//! The functional core: from a snapshot of cluster objects to a verdict with reasons, and the
//! words for it. Nothing here performs I/O or knows the shells around it.

pub mod cluster;
pub mod finalizer;
pub mod image;
pub mod message;
pub mod model;
pub mod node;
pub mod node_controller;
pub mod outcome;
pub mod policy;
pub mod prune;
pub mod recovery;
pub mod registry;
pub mod release;
pub mod report;
pub mod selector;
pub mod snapshot;

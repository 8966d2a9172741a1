//! Registry truth, the pure half: is every image a node needs still served, asked where and as
//! the node pulls it (docs/design.md, "Registry truth"). [`answer`] decides what replies mean
//! (available, missing, unknown: unknown is never missing); [`sources`] where a node pulls from;
//! [`auth`] and [`node_config`] what it pulls with; [`needed`] which images are needed and by
//! whom; [`report`] `images`' words and the gauges; [`tags`] and [`listing`] a repository's tags
//! and what each holds; [`deletion`] what a delete's answer means; [`internal`] which hosts are
//! OpenShift's internal registry. The HTTP is `access::registry`'s; nothing here performs I/O.

pub mod answer;
pub mod auth;
pub mod deletion;
pub mod internal;
pub mod listing;
pub mod needed;
pub mod node_config;
pub mod report;
pub mod sources;
pub mod tags;

pub use answer::{Answer, Exchange, Ping, Reply, Status, combine, judge};
pub use needed::{Holder, Need, NeededImage, needed_images, needed_images_of_all};

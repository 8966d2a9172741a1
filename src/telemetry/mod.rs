//! What the guard tells the outside: Prometheus metrics, whose label enums all live here, and
//! Kubernetes Events on the objects it decided about.

pub mod events;
pub mod metrics;

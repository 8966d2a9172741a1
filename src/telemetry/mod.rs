//! What the guard tells the outside: Prometheus metrics (every label a fixed set of values) and
//! Kubernetes Events on the objects it decided about, refusals' Events rate-limited per object.

mod event_limiter;
pub mod events;
pub mod metrics;

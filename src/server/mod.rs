//! The transport every HTTPS port of `serve` runs on: the TLS listener and its connection
//! limits ([`listener`]), the serving certificate reloaded from disk with its expiry gauge
//! ([`tls`]), and `/healthz`, `/readyz` and the drain at shutdown ([`probes`]). It knows
//! nothing of admission: the webhook hands it a router.

pub mod listener;
pub mod probes;
pub mod tls;

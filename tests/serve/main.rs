//! `mosc-guard serve`, the webhook process: over real HTTPS in-process ([`https`]; no API
//! server), its certificates ([`certs_cli`]), and the real binary against a real API server:
//! client certificates, readiness, shutdown, the confirmation's fence, hostile request fields,
//! defer mode's finalizer controller and its removal, warn mode.

mod certs_cli;
mod client_auth;
mod defer_mode;
mod fence;
mod finalizer_controller;
mod finalizer_removal;
mod https;
mod readiness;
mod request_fields;
mod shutdown;
mod warn_mode;

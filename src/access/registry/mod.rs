//! Registry truth, the HTTP half: asks the registries whether they still serve an image, the
//! way a node pulls it (`core::registry` decides what the answers mean).
//!
//! [`Checker::check`] takes a pull spec, asks [`core::registry::sources`] where a node pulls
//! it from (mirrors, then the source), and asks each place in turn: `GET /v2/` (does the host
//! answer as a registry), then `GET /v2/<repository>/manifests/<digest>` (never HEAD: some
//! registries answer HEAD differently, and MCO's own check GETs) with the node's credentials
//! for that host and repository, through Docker's token protocol when the registry challenges
//! ([`token`]). Each place's replies go to [`core::registry::judge`], the places together to
//! [`core::registry::combine`]. Read-only: no request of the checker writes or deletes.
//!
//! **Why hand-written on reqwest, not oci-client.** `oci-client` 0.18 (Apache-2.0, rustls, the
//! OCI distribution protocol and token auth) was evaluated first and does not meet the bounds
//! a check of hostile or broken registries needs: it reads manifest and token bodies whole
//! (`Response::bytes`, no size limit), follows reqwest's default redirects (ten, any host)
//! with no way to set a policy, has one trust store per client rather than per host (so a
//! client per host, losing its token cache's point), and swallows a token service's refusal
//! (it retries anonymously and the registry's 401 is all that is left). It also cannot say
//! whether `/v2/` answered as a registry, which the missing/unknown rule needs. What is left
//! is small: two GETs, the challenge (parsed by `http-auth`), a token request; reqwest does
//! HTTP, TLS (rustls, the ring provider), proxies and redirects.
//!
//! Bounds (`Limits`): a manifest body at most 4 MiB (containers/image's own limit), error and
//! token bodies 256 KiB, at most 3 redirects (reqwest drops the credentials on a redirect to
//! another host), 10 s to connect, 15 s per request, 60 s per image, and at most
//! `Limits::concurrency` images asked at once per [`Checker`]. Every reason a check gives is
//! passed through [`http::Redactor`], which removes every password, token and proxy userinfo
//! the checker holds: none reaches a log line, an Event, a metric or JSON.
//!
//! Every request goes through a [`session::Session`]: one set of credentials with its CAs,
//! proxy, tokens and redaction. Besides the checker, `mosc-guard prune` reads with
//! the push secret MCO itself uses ([`tags`]: a repository's tags, each resolved to its digest;
//! `serve`'s audit reads the same with the nodes' pull secret, to count what prune would delete)
//! and deletes with it ([`delete`]: the one write path, a separate type with an explicit
//! constructor, never the read-only checker).

pub mod check;
pub mod cluster;
pub mod delete;
pub mod http;
pub mod session;
pub mod tags;
pub mod token;

pub use check::{Checker, ImageAnswer};
pub use cluster::{PullConfigError, pull_config};
pub use session::Limits;

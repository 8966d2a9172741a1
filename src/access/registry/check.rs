//! [`Checker`]: is an image still served, asked where and as a node pulls it.

use tokio::sync::Semaphore;

use super::session::{ACCEPT_MANIFESTS, Limits, Request, Session, sha256_hex};
use crate::core::registry::answer::{Answer, Exchange, Reply, Status};
use crate::core::registry::node_config::PullConfig;
use crate::core::registry::sources::{PullSource, pull_sources};
use crate::core::registry::{combine, judge};

/// What the places a node pulls one image from answered.
#[derive(Clone, Debug)]
pub struct ImageAnswer {
    pub image: String,
    /// The places together.
    pub verdict: Answer,
    /// Each place asked (`host/repository@digest`), in order, and its answer. The places after
    /// one that served the image are not asked (the node would not ask them either).
    pub places: Vec<(String, Answer)>,
}

impl ImageAnswer {
    pub fn status(&self) -> Status {
        self.verdict.status
    }

    /// `image` unknown for `why`, no place asked.
    fn unknown(image: &str, why: String) -> Self {
        ImageAnswer {
            image: image.to_string(),
            verdict: Answer::unknown(why),
            places: Vec::new(),
        }
    }
}

/// Asks registries, read-only, with a node's credentials, CAs, proxy and mirrors.
pub struct Checker {
    session: Session,
    permits: Semaphore,
}

impl Checker {
    pub fn new(config: PullConfig, limits: Limits) -> Self {
        Checker {
            permits: Semaphore::new(limits.concurrency.max(1)),
            session: Session::new(config, limits),
        }
    }

    /// HTTP requests made so far (pings, manifests, tokens), for the audit's cost.
    pub fn requests(&self) -> u64 {
        self.session.requests()
    }

    /// The configuration it pulls with (its secrets redacted in `Debug`).
    pub fn config(&self) -> &PullConfig {
        self.session.config()
    }

    /// Checks every image, at most [`Limits::concurrency`] at once; answers in `images`' order.
    pub async fn check_all(&self, images: &[String]) -> Vec<ImageAnswer> {
        // `check` holds a permit of the semaphore: at most `concurrency` run at once.
        let checks: Vec<_> = images.iter().map(|i| self.check(i)).collect();
        futures::future::join_all(checks).await
    }

    /// Asks where a node pulls `image` from, in the node's order, until one serves it.
    pub async fn check(&self, image: &str) -> ImageAnswer {
        let _permit = self.permits.acquire().await;
        let limit = self.session.limits().image_timeout;
        let answer = tokio::time::timeout(limit, self.check_places(image)).await;
        let mut answer = answer.unwrap_or_else(|_| {
            ImageAnswer::unknown(image, format!("no answer within {} s", limit.as_secs()))
        });
        answer.verdict.why = self.session.clean(&answer.verdict.why);
        for (_, v) in &mut answer.places {
            v.why = self.session.clean(&v.why);
        }
        answer
    }

    async fn check_places(&self, image: &str) -> ImageAnswer {
        let places = match pull_sources(image, &self.config().mirrors) {
            Ok(p) => p,
            Err(e) => return ImageAnswer::unknown(image, e),
        };
        let mut answered: Vec<(String, Answer)> = Vec::new();
        for place in &places {
            let exchange = self.ask(place).await;
            let verdict = judge(&exchange);
            let served = verdict.status == Status::Available;
            answered.push((place.spec(), verdict));
            if served {
                break;
            }
        }
        let verdict = combine(answered.iter().map(|(p, v)| (p.as_str(), v)));
        ImageAnswer {
            image: image.to_string(),
            verdict,
            places: answered,
        }
    }

    /// One place: the manifest (with a token when challenged), and `/v2/` unless it was served.
    async fn ask(&self, place: &PullSource) -> Exchange {
        let manifest = self.manifest(place).await;
        let served = matches!(manifest, Reply::Answered { status: 200, .. });
        let ping = if served || matches!(manifest, Reply::Failed(_)) {
            None
        } else {
            Some(self.session.ping(&place.host).await)
        };
        Exchange {
            ping,
            manifest: Some(manifest),
        }
    }

    async fn manifest(&self, place: &PullSource) -> Reply {
        let path = format!("/v2/{}/manifests/{}", place.repository, place.reference);
        let request = Request::get(&place.host, &place.repository, &path, ACCEPT_MANIFESTS);
        let resp = match self.session.send(&request).await {
            Ok(resp) => resp,
            Err(reply) => return reply,
        };
        let limit = self.session.limits().manifest_bytes;
        match self.session.read(resp, limit).await {
            (Reply::Answered { status, errors, .. }, Some(body)) if status == 200 => {
                Reply::Answered {
                    status,
                    errors,
                    digest_matches: digest_matches(&place.reference, &body),
                }
            }
            (reply, _) => reply,
        }
    }
}

/// Whether `body`'s sha256 is the digest `reference` names (`None`: not a sha256 digest).
pub fn digest_matches(reference: &str, body: &[u8]) -> Option<bool> {
    reference
        .strip_prefix("sha256:")
        .map(|hex| sha256_hex(body).eq_ignore_ascii_case(hex))
}

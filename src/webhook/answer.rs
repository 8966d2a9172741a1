//! What one guarded request came to, typed: allowed or not, the words the admin sees, the
//! warnings, and how it is counted. The review builds it from a verdict and adjusts it (warn
//! mode, MCO's own requests, defer mode's notes); [`Answer::encode`] turns it into the
//! AdmissionResponse, once.

use kube::core::admission::AdmissionResponse;

use crate::core::message;
use crate::core::outcome::Outcome;
use crate::core::policy::Verdict;
use crate::webhook::admission::{self, Request};

#[derive(Debug)]
pub struct Answer {
    pub outcome: Outcome,
    pub allowed: bool,
    /// A refusal's text (what `kubectl delete` prints); on an admitted would-be refusal, its
    /// words kept for the Event.
    pub message: String,
    /// Shown by `kubectl` as `Warning:` lines.
    pub warnings: Vec<String>,
    pub blocking_nodes: usize,
}

impl Answer {
    pub fn allow(outcome: Outcome, warnings: Vec<String>) -> Self {
        Self {
            outcome,
            allowed: true,
            message: String::new(),
            warnings,
            blocking_nodes: 0,
        }
    }

    pub fn deny(outcome: Outcome, message: String) -> Self {
        Self {
            outcome,
            allowed: false,
            message,
            warnings: Vec::new(),
            blocking_nodes: 0,
        }
    }

    /// The verdict as the answer: refused with the denial's text, allowed by an override with
    /// its warnings, or allowed; the release rules' note as a warning either way.
    pub fn from_verdict(verdict: &Verdict) -> Self {
        let note: Vec<String> = verdict
            .rules
            .note()
            .map(|n| message::clip_to(format!("mosc-guard: {n}"), 256))
            .into_iter()
            .collect();
        let answer = if !verdict.allowed {
            Self {
                warnings: note,
                ..Self::deny(Outcome::Denied, message::denial(verdict))
            }
        } else if verdict.overridden() {
            let mut warnings = message::override_warnings(verdict);
            warnings.extend(note);
            Self::allow(Outcome::Overridden, warnings)
        } else {
            Self::allow(Outcome::Allowed, note)
        };
        answer.blocking(verdict)
    }

    /// Defer mode with the finalizer in place: allowed, with a warning while nodes still block.
    pub fn deferred(verdict: &Verdict) -> Self {
        let answer = if verdict.allowed {
            Self::from_verdict(verdict)
        } else {
            Self::allow(Outcome::Deferred, vec![message::deferred(verdict)])
        };
        answer.blocking(verdict)
    }

    fn blocking(mut self, verdict: &Verdict) -> Self {
        self.blocking_nodes = verdict.blocking.len();
        self
    }

    /// `--enforcement warn`: a refusal becomes an allow that carries the refusal's text as
    /// warnings (one per line, as the API server shows them), marked as not enforced.
    pub fn not_enforced(self) -> Self {
        if !self.outcome.refuses() {
            return self;
        }
        let mut warnings = vec![
            "mosc-guard (--enforcement warn): this deletion would have been refused; it was admitted"
                .to_string(),
        ];
        warnings.extend(
            self.message
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| message::clip_to(format!("mosc-guard: {}", l.trim()), 256)),
        );
        warnings.extend(self.warnings);
        Self {
            outcome: Outcome::WouldDeny,
            allowed: true,
            // The refusal's words also go to the Event, as for an enforced refusal.
            message: self.message,
            warnings,
            blocking_nodes: self.blocking_nodes,
        }
    }

    /// MCO's own request: admitted whatever the verdict. A refusal becomes an allow counted as
    /// `mco-would-deny`, its words kept for the Event that says the guard let MCO through.
    pub fn admitted_for_mco(self) -> Self {
        if !self.outcome.refuses() {
            return self;
        }
        Self {
            outcome: Outcome::McoWouldDeny,
            allowed: true,
            message: message::admitted_for_mco(&self.message),
            warnings: vec![
                "mosc-guard: admitted as MCO's own request (--mco-user); it would have refused it"
                    .to_string(),
            ],
            blocking_nodes: self.blocking_nodes,
        }
    }

    /// Adds `why` to a refusal (why it could not be deferred, or that it was a finalizer's
    /// removal).
    pub fn explain(mut self, why: &str) -> Self {
        if !self.allowed {
            self.message.push_str(why);
        }
        self
    }

    /// The AdmissionResponse for `req`.
    pub fn encode(self, req: &Request) -> AdmissionResponse {
        if self.allowed {
            let mut response = admission::allow(req, self.warnings);
            response.result.message = self.message;
            response
        } else {
            let mut response = admission::deny(req, self.message);
            if !self.warnings.is_empty() {
                response.warnings = Some(self.warnings);
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal() -> Answer {
        Answer {
            warnings: vec!["mosc-guard: decided with 4.20's rules".to_string()],
            blocking_nodes: 2,
            ..Answer::deny(Outcome::Denied, "line one\n\nline two".to_string())
        }
    }

    #[test]
    fn warn_mode_admits_a_refusal_with_its_lines_as_warnings_and_keeps_its_words() {
        let a = refusal().not_enforced();
        assert!(a.allowed);
        assert_eq!(a.outcome, Outcome::WouldDeny);
        assert_eq!(a.message, "line one\n\nline two", "the Event's note");
        assert_eq!(a.warnings.len(), 4, "{:?}", a.warnings);
        assert_eq!(a.warnings[1], "mosc-guard: line one");
        assert_eq!(a.warnings[3], "mosc-guard: decided with 4.20's rules");
        assert_eq!(a.blocking_nodes, 2);
    }

    #[test]
    fn mcos_request_is_admitted_and_an_allow_is_left_as_it_is() {
        let a = refusal().admitted_for_mco();
        assert!(a.allowed);
        assert_eq!(a.outcome, Outcome::McoWouldDeny);
        assert!(a.message.contains("line one"), "{}", a.message);
        let allow = Answer::allow(Outcome::Allowed, vec![]).admitted_for_mco();
        assert_eq!(allow.outcome, Outcome::Allowed);
        assert_eq!(
            Answer::allow(Outcome::Deferred, vec![])
                .not_enforced()
                .outcome,
            Outcome::Deferred
        );
    }

    #[test]
    fn explain_extends_only_a_refusal() {
        assert_eq!(
            refusal().explain(" why").message,
            "line one\n\nline two why"
        );
        let allow = Answer::allow(Outcome::Allowed, vec![]).explain(" why");
        assert!(allow.message.is_empty());
    }
}

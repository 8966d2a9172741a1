//! One measured request: a server-side dry-run deletion of MachineOSConfig `worker` through the
//! API server (and so through whichever webhook is registered), how long it took and how it was
//! answered; and the latencies of many, with their percentiles.

use std::time::{Duration, Instant};

use kube::api::DeleteParams;

use testkit::Result;
use testkit::mco;

/// How a dry-run deletion came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    Denied,
    Unverified,
}

/// One dry-run deletion of MachineOSConfig `worker`.
pub async fn dry_run_delete(client: &kube::Client) -> Result<(Duration, Answer)> {
    let started = Instant::now();
    let result = mco::moscs(client)
        .delete(
            "worker",
            &DeleteParams {
                dry_run: true,
                ..DeleteParams::default()
            },
        )
        .await;
    let took = started.elapsed();
    match result {
        Ok(_) => Ok((took, Answer::Allowed)),
        Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("could not verify") => {
            Ok((took, Answer::Unverified))
        }
        Err(kube::Error::Api(s)) if s.code == 403 => Ok((took, Answer::Denied)),
        Err(e) => Err(e.into()),
    }
}

/// Latencies of one kind of request, and how they were answered.
#[derive(Default)]
pub struct Latencies {
    took: Vec<Duration>,
    answers: [usize; 3],
}

impl Latencies {
    pub fn add(&mut self, took: Duration, answer: Answer) {
        self.took.push(took);
        self.answers[answer as usize] += 1;
    }

    /// Adds a sample with no answer to count (a read).
    pub fn add_time(&mut self, took: Duration) {
        self.took.push(took);
    }

    pub fn len(&self) -> usize {
        self.took.len()
    }

    /// How many came back `answer`.
    pub fn answered(&self, answer: Answer) -> usize {
        self.answers[answer as usize]
    }

    /// "N allowed, N denied, N could not verify".
    pub fn answers(&self) -> String {
        let [allowed, denied, unverified] = self.answers;
        format!("{allowed} allowed, {denied} denied, {unverified} could not verify")
    }

    /// The `p` quantile (0.5: the median), nearest rank.
    pub fn pct(&self, p: f64) -> Duration {
        let mut sorted = self.took.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i.min(sorted.len() - 1)]
    }

    /// "p50 / p99" in milliseconds.
    pub fn p50_p99(&self) -> String {
        format!("{} / {}", ms(self.pct(0.5)), ms(self.pct(0.99)))
    }

    /// "p50 / p90 / p99" in milliseconds.
    pub fn percentiles(&self) -> String {
        format!(
            "{} / {} / {}",
            ms(self.pct(0.5)),
            ms(self.pct(0.9)),
            ms(self.pct(0.99))
        )
    }

    /// This p90 and p99 over `floor`'s, e.g. "1.05x / 1.12x".
    pub fn over(&self, floor: &Latencies) -> String {
        let ratio = |p| self.pct(p).as_secs_f64() / floor.pct(p).as_secs_f64();
        format!("{:.2}x / {:.2}x", ratio(0.9), ratio(0.99))
    }
}

/// `samples` sequential dry-run deletions.
pub async fn measure(client: &kube::Client, samples: u64) -> Result<Latencies> {
    let mut latencies = Latencies::default();
    for _ in 0..samples {
        let (took, answer) = dry_run_delete(client).await?;
        latencies.add(took, answer);
    }
    Ok(latencies)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

//! Probing a server over HTTP(S) as kubelet and Prometheus would: one request, its status and
//! body; readiness (`/readyz` answering 2xx); one series of a `/metrics` text.

use std::time::Duration;

use crate::Result;

/// GET `url` (5 s timeout): status and body, or `None` if nothing answered.
pub async fn get(client: &reqwest::Client, url: &str) -> Option<(u16, String)> {
    let resp = client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.unwrap_or_default()))
}

/// `Ok` once GET `url` answers 2xx; else why not: the transport error, or the status with the
/// body's failing checks (kube-apiserver's `[-]` lines) or the body itself. For
/// [`ChildProcess::wait_ready`](crate::process::ChildProcess::wait_ready).
pub async fn ready(client: &reqwest::Client, url: &str) -> Result<()> {
    let resp = client.get(url).send().await?;
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let body = resp.text().await.unwrap_or_default();
    let failing: Vec<&str> = body.lines().filter(|l| l.contains("[-]")).collect();
    let why = if failing.is_empty() {
        body.trim().to_owned()
    } else {
        failing.join("; ")
    };
    Err(format!("{url} {status}: {why}").into())
}

/// The value of one series (`name{labels}` exactly as exposed) in a /metrics text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::metric;

    #[test]
    fn a_series_is_found_by_its_exact_name_and_labels() {
        let text = "# HELP x\nmosc_guard_ready 1\nmosc_guard_cache_stale{cache=\"nodes\"} 0\n\
                    mosc_guard_ready_total 7\n";
        assert_eq!(metric(text, "mosc_guard_ready"), Some(1.0));
        assert_eq!(
            metric(text, "mosc_guard_cache_stale{cache=\"nodes\"}"),
            Some(0.0)
        );
        assert_eq!(metric(text, "mosc_guard_missing"), None);
    }
}

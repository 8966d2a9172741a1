//! Free TCP ports on 127.0.0.1.

use std::collections::HashSet;
use std::future::Future;
use std::net::TcpListener;
use std::sync::Mutex;

use crate::Result;

/// Returns a port on 127.0.0.1 that was free a moment ago and that this process has not handed
/// out before (so two servers of one test process never get the same port).
pub fn free_port() -> Result<u16> {
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut guard = HANDED_OUT
            .lock()
            .map_err(|_| "port registry lock poisoned")?;
        if guard.get_or_insert_with(HashSet::new).insert(port) {
            return Ok(port);
        }
    }
    Err("could not find a free port on 127.0.0.1 in 100 tries".into())
}

/// Runs `start` up to three times while it fails for a reason that says nothing of what is
/// started: a port picked by [`free_port`] taken by someone else before it was bound, or a
/// connection that a server just started (and loaded by its neighbours on a 2-core machine)
/// closed before answering a set-up request. Anything else fails at once.
pub async fn retry_start<T, F, Fut>(what: &str, mut start: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match start().await {
            Err(e) if attempt < 3 && is_transient(&e.to_string()) => {
                tracing::warn!("{what}: starting again after a transient failure: {e}");
                attempt += 1;
            }
            other => return other,
        }
    }
}

fn is_transient(error: &str) -> bool {
    [
        "address already in use",
        "connection closed before message completed",
        "connection reset by peer",
    ]
    .iter()
    .any(|s| error.contains(s))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_failures_that_say_nothing_of_the_server_are_transient() {
        for (error, transient) in [
            (
                "binding 127.0.0.1:4000: Address in use: address already in use",
                true,
            ),
            (
                "ServiceError: client error (SendRequest): connection closed before message completed",
                true,
            ),
            (
                "error trying to connect: connection reset by peer (os error 104)",
                true,
            ),
            ("kube-apiserver exited early (exit status: 1)", false),
            (
                "applying machineosbuilds.yaml: ApiError: field not declared in schema",
                false,
            ),
        ] {
            assert_eq!(super::is_transient(error), transient, "{error}");
        }
    }
}

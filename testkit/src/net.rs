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

/// Runs `start` up to three times while it fails because a port picked by [`free_port`] was
/// taken by someone else between picking and binding ("address already in use").
pub async fn retry_on_port_clash<T, F, Fut>(what: &str, mut start: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match start().await {
            Err(e) if attempt < 3 && e.to_string().contains("address already in use") => {
                tracing::warn!("{what}: a port was taken meanwhile; starting again ({e})");
                attempt += 1;
            }
            other => return other,
        }
    }
}

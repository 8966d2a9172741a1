//! A flood of stalled connections on a runtime and thread of its own, counting how the server
//! treated them.

use super::stall::stall;
use super::*;

/// A flood of connections that finish TLS and then send nothing (even ones) or only the HTTP/2
/// preface (odd ones). With `reconnect`, each one the server closes connects again until the
/// flood stops, so connections keep arriving the whole time; without, each connects once. It
/// runs on a runtime of its own, on its own thread, as another process would: the test's real
/// client is not queued behind the flood's tasks (only the machine's cores are shared).
pub(super) struct Flood {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    pub(super) counts: Arc<FloodCounts>,
}

#[derive(Debug, Default)]
pub(super) struct FloodCounts {
    /// TLS handshakes finished.
    pub(super) handshakes: std::sync::atomic::AtomicUsize,
    /// Connections the server closed after their handshake (to make room, or at the
    /// first-request deadline).
    pub(super) closed: std::sync::atomic::AtomicUsize,
    /// The longest any of those was held from its handshake to its close, in milliseconds.
    pub(super) held_max_ms: std::sync::atomic::AtomicU64,
    /// Connections that failed to connect or were closed during their handshake.
    pub(super) not_served: std::sync::atomic::AtomicUsize,
    /// HTTP/2 preface connections whose SETTINGS announced the expected stream cap, and ones
    /// that announced another.
    pub(super) h2_cap_announced: std::sync::atomic::AtomicUsize,
    pub(super) h2_cap_wrong: std::sync::atomic::AtomicUsize,
}

pub(super) fn count(counter: &std::sync::atomic::AtomicUsize) -> usize {
    counter.load(std::sync::atomic::Ordering::SeqCst)
}

impl Flood {
    pub(super) fn start(
        addr: &str,
        ca_pem: &[u8],
        connections: usize,
        reconnect: bool,
        expected_streams: u32,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (idle_tls, preface) = (
            tls_connector(ca_pem, b"http/1.1"),
            tls_connector(ca_pem, b"h2"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(FloodCounts::default());
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let (addr, flag, tally) = (addr.to_string(), Arc::clone(&stop), Arc::clone(&counts));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("the flood's runtime");
            runtime.block_on(async move {
                let mut tasks = tokio::task::JoinSet::new();
                for i in 0..connections {
                    let h2 = i % 2 == 1;
                    let connector = if h2 {
                        preface.clone()
                    } else {
                        idle_tls.clone()
                    };
                    let (addr, stop, counts) =
                        (addr.clone(), Arc::clone(&flag), Arc::clone(&tally));
                    tasks.spawn(async move {
                        while !stop.load(Ordering::SeqCst) {
                            let o = stall(&addr, &connector, h2, &counts.handshakes).await;
                            if let Some(done) = o.handshake_done {
                                let held = o.closed.duration_since(done).as_millis();
                                counts.held_max_ms.fetch_max(
                                    u64::try_from(held).unwrap_or(u64::MAX),
                                    Ordering::SeqCst,
                                );
                                counts.closed.fetch_add(1, Ordering::SeqCst);
                                match o.max_streams {
                                    Some(n) if n == expected_streams => {
                                        counts.h2_cap_announced.fetch_add(1, Ordering::SeqCst);
                                    }
                                    Some(_) => {
                                        counts.h2_cap_wrong.fetch_add(1, Ordering::SeqCst);
                                    }
                                    None => {}
                                }
                            } else {
                                counts.not_served.fetch_add(1, Ordering::SeqCst);
                                // Do not spin on a refused connect.
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            if !reconnect {
                                break;
                            }
                        }
                    });
                }
                // Until stopped; then every connection is dropped from this side.
                let _ = finished.await;
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
            });
        });
        Self {
            thread: Some(thread),
            stop,
            done: Some(done),
            counts,
        }
    }

    /// Waits until `n` handshakes have finished, or `within` passed.
    pub(super) async fn wait_handshakes(&self, n: usize, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        while count(&self.counts.handshakes) < n {
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Waits until each of the `n` connections has finished its handshake or failed, or
    /// `within` passed.
    pub(super) async fn wait_all_tried(&self, n: usize, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        while count(&self.counts.handshakes) + count(&self.counts.not_served) < n {
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Waits until the server has closed every connection that finished its handshake, or
    /// `within` passed; returns how many it had not.
    pub(super) async fn wait_all_closed(&self, within: Duration) -> usize {
        let until = std::time::Instant::now() + within;
        loop {
            // Closes first: each one's handshake was counted before it.
            let closed = count(&self.counts.closed);
            let open = count(&self.counts.handshakes).saturating_sub(closed);
            if open == 0 || std::time::Instant::now() >= until {
                return open;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the flood: its connections are dropped from this side.
    pub(super) async fn stop(mut self) -> Arc<FloodCounts> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(thread) = self.thread.take() {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .expect("joined")
                .expect("the flood's thread ended cleanly");
        }
        Arc::clone(&self.counts)
    }
}

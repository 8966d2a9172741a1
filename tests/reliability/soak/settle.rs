//! The end of a trial: the deletion accepted, the MachineOSConfig gone, the pool reverted (or
//! degraded), clean-up, and the trial run start to end.

use super::*;

impl Trial<'_> {
    /// Deletes the MachineOSConfig for real until the guard lets it (deny: once the rollout
    /// settles) or accepts it (defer), releasing held nodes at random moments meanwhile.
    pub(super) async fn delete_until_accepted(&mut self) -> bool {
        let started = Instant::now();
        // The liveness clock runs only while the trial keeps trying.
        self.safe_since = None;
        while started.elapsed() < SETTLE_TIMEOUT {
            if !self.held.is_empty() && self.rng.chance(40) {
                let node = self.held.iter().next().cloned().unwrap_or_default();
                self.release(&node);
            }
            match self.attempt(false, false).await {
                Attempt::Allowed => {
                    self.live_until(Instant::now());
                    return true;
                }
                Attempt::Accepted => return true,
                Attempt::Skipped
                    if mco::moscs(self.client())
                        .get_opt(&self.pool)
                        .await
                        .is_ok_and(|m| m.is_none()) =>
                {
                    return true;
                }
                _ => {}
            }
            tokio::time::sleep(self.rng.millis(200, 900)).await;
            if started.elapsed() > Duration::from_secs(20) {
                self.release_all();
            }
        }
        false
    }

    /// Watches the MachineOSConfig until it is gone (or the timeout), releasing held nodes at
    /// random moments, and judges its removal: a node blocking, unchanged, from a list read
    /// before the last sighting of the object to one read after it was first seen gone, means
    /// it was removed while that node needed its image.
    pub(super) async fn watch_removal(&mut self) -> bool {
        let client = self.client();
        let started = Instant::now();
        let mut before_last_sighting: Option<Snapshot> = None;
        self.safe_since = None;
        while started.elapsed() < SETTLE_TIMEOUT {
            if !self.held.is_empty() && self.rng.chance(15) {
                let node = self.held.iter().next().cloned().unwrap_or_default();
                self.release(&node);
            }
            if started.elapsed() > Duration::from_secs(15) {
                self.release_all();
            }
            // Node list first, then the object: a sighting bounds the removal from below.
            let Ok(snap) = snapshot(client, &self.pool).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mosc = match mco::moscs(client).get_opt(&self.pool).await {
                Ok(m) => m,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            self.images.extend(snap.mosbs.iter().filter_map(image_of));
            if let Some(m) = &mosc {
                self.images.extend(mosc_current_image(m));
                self.observe_safety(&snap);
                before_last_sighting = Some(snap);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // Gone: one more node list, read after the object was seen gone.
            let after = loop {
                match read_nodes(client, &self.pool).await {
                    Ok(n) => break n,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            self.soak.stats(|s| s.removals_checked += 1);
            if self.soak.mode == Mode::Defer {
                self.live_until(Instant::now());
            }
            if let Some(before) = before_last_sighting {
                let blocking = before.blocking(&self.images);
                let stuck = still_blocking(&before.nodes, &blocking, &after);
                if !stuck.is_empty() {
                    self.false_allow(format!(
                        "machineosconfig/{} removed while {stuck:?} needed one of {:?} \
                         (unchanged across the removal)",
                        self.pool, self.images
                    ));
                }
            }
            return true;
        }
        false
    }

    /// Starts the liveness clock when `snap` shows the MachineOSConfig safe to delete, and
    /// stops it when it does not (MCO sent a node to one of its images again).
    pub(super) fn observe_safety(&mut self, snap: &Snapshot) {
        let target = Target::Mosc(self.pool.clone());
        if snap.safe(&target) {
            self.safe_since.get_or_insert_with(Instant::now);
        } else {
            self.safe_since = None;
        }
    }

    /// The deletion went through at `done`: how long after it became safe, against the bound.
    /// A deletion that went through before the oracle ever saw it safe (it raced a node
    /// reaching its image) starts no clock.
    pub(super) fn live_until(&mut self, done: Instant) {
        let Some(since) = self.safe_since else {
            return;
        };
        let took = done.saturating_duration_since(since);
        if took > LIVENESS_BOUND {
            self.note(format!(
                "LIVENESS: machineosconfig/{} was safe to delete for {took:?} before it went",
                self.pool
            ));
        }
        self.soak.stats(|s| {
            s.liveness.push(took);
            if took > LIVENESS_BOUND {
                s.liveness_violations += 1;
            }
        });
    }

    /// Waits until every node of the pool is Done without image annotations (the pool left
    /// image mode); stops early on a Degraded node.
    pub(super) async fn wait_reverted(&self) -> bool {
        let started = Instant::now();
        while started.elapsed() < SETTLE_TIMEOUT {
            if let Ok(nodes) = read_nodes(self.client(), &self.pool).await {
                if nodes
                    .values()
                    .any(|n| n.state.as_deref() == Some(STATE_DEGRADED))
                {
                    return false;
                }
                if nodes.values().all(|n| {
                    n.state.as_deref() == Some(STATE_DONE)
                        && n.desired.is_none()
                        && n.current.is_none()
                }) {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// Degraded nodes, or the pool's Degraded/NodeDegraded condition.
    pub(super) async fn degraded(&self) -> Option<String> {
        let nodes = read_nodes(self.client(), &self.pool).await.ok()?;
        let bad: Vec<&String> = nodes
            .iter()
            .filter(|(_, n)| n.state.as_deref() == Some(STATE_DEGRADED))
            .map(|(name, _)| name)
            .collect();
        let pool = mco::mcps(self.client()).get_opt(&self.pool).await.ok()??;
        let pool_bad =
            mco::condition_true(&pool, "Degraded") || mco::condition_true(&pool, "NodeDegraded");
        let reasons: Vec<String> = mco::nodes(self.client())
            .list(&ListParams::default().labels(&role_label(&self.pool)))
            .await
            .ok()?
            .items
            .iter()
            .filter_map(|n| annotation(n, mco::REASON))
            .map(|r| {
                r.chars()
                    .rev()
                    .take(160)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect()
            })
            .collect();
        (pool_bad || !bad.is_empty())
            .then(|| format!("degraded nodes {bad:?} ({reasons:?}), pool degraded {pool_bad}"))
    }

    pub(super) async fn cleanup(&self) {
        for _ in 0..20 {
            let mut ok = true;
            for node in &self.nodes {
                match mco::nodes(self.client())
                    .delete(node, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(_) => ok = false,
                }
            }
            match mco::mcps(self.client())
                .delete(&self.pool, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(_) => ok = false,
            }
            if ok {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub(super) async fn run(mut self) {
        let epochs = |soak: &Soak| {
            (
                soak.guard_epoch.load(Ordering::SeqCst),
                soak.apiserver_epoch.load(Ordering::SeqCst),
            )
        };
        let (g0, a0) = epochs(self.soak);
        let mut setup_ok = false;
        for _ in 0..5 {
            match self.setup().await {
                Ok(()) => {
                    setup_ok = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!("soak trial {}: setup: {e}", self.index);
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
        if !setup_ok {
            self.soak.stats(|s| s.trial_errors += 1);
            self.note("setup failed five times".into());
            self.cleanup().await;
            return;
        }
        self.interleave().await;
        // A trial that ended its steps early (a real deletion) has its fault now, while its
        // deletion is decided or deferred.
        self.chaos().await;
        if !self.deleted {
            self.deleted = self.delete_until_accepted().await;
        }
        let gone = self.deleted && self.watch_removal().await;
        self.release_all();
        let reverted = gone && self.wait_reverted().await;
        if let Some(why) = self.degraded().await {
            self.soak.stats(|s| s.degraded += 1);
            self.note(format!("DEGRADED: {why}"));
        } else if !reverted {
            self.soak.stats(|s| s.unsettled += 1);
            let state = snapshot(self.client(), &self.pool)
                .await
                .map(|s| {
                    let pool = s.pool.map(|p| p.data.get("status").cloned());
                    let mosc = s.mosc.map(|m| (m.metadata, m.data.get("status").cloned()));
                    let builds: Vec<_> = s
                        .mosbs
                        .iter()
                        .map(|b| (b.metadata.name.clone(), image_of(b)))
                        .collect();
                    format!(
                        "nodes {:?}; pool status {pool:?}; mosc {mosc:?}; builds {builds:?}",
                        s.nodes
                    )
                })
                .unwrap_or_else(|e| e.to_string());
            self.note(format!(
                "did not settle within {SETTLE_TIMEOUT:?} (deleted {}, gone {gone}): {state}",
                self.deleted
            ));
        }
        // Stranded: the object must be gone, and nothing may keep our finalizer.
        if let Ok(Some(m)) = mco::moscs(self.client()).get_opt(&self.pool).await
            && m.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER)
        {
            self.soak.stats(|s| s.stranded += 1);
            self.note(format!(
                "STRANDED: machineosconfig/{} keeps {FINALIZER} (deletionTimestamp {:?})",
                self.pool, m.metadata.deletion_timestamp
            ));
        }
        let (g1, a1) = epochs(self.soak);
        self.soak.stats(|s| {
            s.trials += 1;
            if g0 != g1 || g0 % 2 == 1 {
                s.across_guard_restart += 1;
            }
            if a0 != a1 || a0 % 2 == 1 {
                s.across_apiserver_restart += 1;
            }
        });
        self.cleanup().await;
    }
}

//! A trial's steps: set-up, holding and releasing nodes, deletion attempts and what MCO does
//! meanwhile (config updates, renders, chaos), interleaved at random.

use super::*;

impl<'a> Trial<'a> {
    pub(super) fn client(&self) -> &'a kube::Client {
        self.soak.client()
    }

    pub(super) fn note(&self, what: String) {
        tracing::warn!(
            "soak {} trial {}: {what}",
            self.soak.mode.name(),
            self.index
        );
        self.soak.stats(|s| {
            if s.details.len() < 50 {
                s.details
                    .push(format!("trial {} ({}): {what}", self.index, self.pool));
            }
        });
    }

    /// Counts a false allow and notes it; the guard's log lines naming the trial's objects are
    /// printed with the failure (its decisions on them, across restarts).
    pub(super) fn false_allow(&self, what: String) {
        self.soak.stats(|s| {
            s.false_allows += 1;
            s.false_allow_pools.insert(self.pool.clone());
        });
        self.note(format!("FALSE ALLOW: {what}"));
    }

    /// Creates the trial's pool, nodes and MachineOSConfig; creates only what is missing, so a
    /// retry after a failure (an API-server restart mid-setup) completes what is there.
    pub(super) async fn setup(&mut self) -> testkit::Result<()> {
        let client = self.client();
        let max_unavailable = 1 + self.rng.below(2) as u32;
        if mco::mcps(client).get_opt(&self.pool).await?.is_none() {
            create_pool(client, &self.pool, &role_label(&self.pool), max_unavailable).await?;
        }
        // Also when an API-server restart cut the pool's creation short before its rendered
        // config (the nodes would degrade on the missing MachineConfig); creates only if missing.
        let rendered = rendered_config(&self.pool);
        testkit::scenario::create_rendered_config(client, &self.pool, &rendered).await?;
        for node in &self.nodes {
            if mco::nodes(client).get_opt(node).await?.is_none() {
                create_nodes(
                    client,
                    std::slice::from_ref(node),
                    &role_label(&self.pool),
                    &rendered,
                )
                .await?;
            }
        }
        if mco::moscs(client).get_opt(&self.pool).await?.is_none() {
            // Some nodes are slow from the start: caught mid-update once targeted.
            for node in self.nodes.clone() {
                if self.rng.chance(30) {
                    self.hold(&node);
                }
            }
            create_mosc(client, &self.pool, &self.soak.cluster.push_spec()).await?;
        }
        Ok(())
    }

    /// Records a step of the trial (shown when the trial goes wrong).
    pub(super) fn act(&mut self, what: impl Into<String>) {
        let at = self.began.elapsed().as_secs_f64();
        self.log.push(format!("{at:.2}s {}", what.into()));
    }

    pub(super) fn hold(&mut self, node: &str) {
        self.act(format!("hold {node}"));
        self.soak.cluster.sim.hold(node);
        self.held.insert(node.to_owned());
    }

    pub(super) fn release(&mut self, node: &str) {
        self.act(format!("release {node}"));
        self.soak.cluster.sim.release(node);
        self.held.remove(node);
    }

    pub(super) fn release_all(&mut self) {
        if !self.held.is_empty() {
            self.act("release all");
        }
        for node in std::mem::take(&mut self.held) {
            self.soak.cluster.sim.release(&node);
        }
    }

    /// One deletion through the API server, judged by the oracle.
    pub(super) async fn attempt(&mut self, choose_mosb: bool, dry_run: bool) -> Attempt {
        let client = self.client();
        let Ok(before) = snapshot(client, &self.pool).await else {
            return Attempt::Skipped;
        };
        self.images.extend(before.mosbs.iter().filter_map(image_of));
        let built: Vec<String> = before
            .mosbs
            .iter()
            .filter(|b| b.metadata.deletion_timestamp.is_none())
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        let target = if choose_mosb && !built.is_empty() {
            Target::Mosb(built[self.rng.below(built.len() as u64) as usize].clone())
        } else {
            Target::Mosc(self.pool.clone())
        };
        let images = before.images(&target);
        let blocking = before.blocking(&images);
        let safe_before = blocking.is_empty() && !before.pool_rolling(&images);
        if matches!(target, Target::Mosc(_)) {
            self.observe_safety(&before);
        }
        // Defer mode accepts a MachineOSConfig carrying the finalizer by design; its removal is
        // judged when it happens.
        let deferrable = self.soak.mode == Mode::Defer
            && matches!(target, Target::Mosc(_))
            && before.mosc_has_finalizer();
        // A build of this config running: an allowed deletion races its rollout (README, Limits).
        let building: Vec<String> = before
            .mosbs
            .iter()
            .filter(|b| {
                b.metadata.deletion_timestamp.is_none()
                    && !["Succeeded", "Failed", "Interrupted"]
                        .iter()
                        .any(|c| mco::condition_true(b, c))
            })
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        let answer = delete(client, &target, dry_run).await;
        let verdict = match &answer {
            Answer::Allowed => "allowed".to_owned(),
            Answer::Denied(m) => format!("denied ({})", bucket(m)),
            Answer::NotFound => "not found".to_owned(),
            Answer::Failed(e) => format!("failed ({})", e.chars().take(60).collect::<String>()),
        };
        self.act(format!(
            "{}delete {} -> {verdict}; before: blocking {blocking:?}, pool rolling {}, building {building:?}, nodes {:?}",
            if dry_run { "dry-run " } else { "" },
            target.describe(),
            before.pool_rolling(&images),
            before
                .nodes
                .iter()
                .map(|(n, s)| format!(
                    "{n}: {}/{}->{}",
                    s.state.as_deref().unwrap_or("-"),
                    short(s.current.as_deref()),
                    short(s.desired.as_deref())
                ))
                .collect::<Vec<_>>()
        ));
        let after = snapshot(client, &self.pool).await.ok();
        self.soak.stats(|s| {
            s.deletions += 1;
            if dry_run {
                s.dry_runs += 1;
            } else {
                s.real += 1;
            }
            if safe_before {
                s.safe_attempts += 1;
            }
        });
        let what = format!(
            "{}delete {}",
            if dry_run { "dry-run " } else { "" },
            target.describe()
        );
        match answer {
            Answer::Allowed if deferrable => {
                self.soak.stats(|s| {
                    if blocking.is_empty() {
                        s.allowed += 1;
                    } else {
                        s.deferred += 1;
                    }
                });
                if dry_run {
                    Attempt::Allowed
                } else {
                    Attempt::Accepted
                }
            }
            Answer::Allowed => {
                self.soak.stats(|s| s.allowed += 1);
                if !blocking.is_empty() {
                    let stuck = after
                        .as_ref()
                        .map(|a| still_blocking(&before.nodes, &blocking, &a.nodes))
                        .unwrap_or_default();
                    if stuck.is_empty() {
                        self.soak.stats(|s| s.raced_allows += 1);
                    } else {
                        self.false_allow(format!(
                            "{what} allowed while {stuck:?} needed {images:?} \
                             (unchanged before and after the request): {:?}",
                            before.nodes
                        ));
                    }
                }
                Attempt::Allowed
            }
            Answer::Denied(message) => {
                let kind = bucket(&message);
                let safe_after = after.as_ref().is_some_and(|a| a.safe(&target));
                self.soak.stats(|s| {
                    s.denied += 1;
                    *s.denial_reasons.entry(kind.clone()).or_default() += 1;
                    if !safe_before {
                        s.denied_needed += 1;
                    } else if safe_after {
                        s.false_denials += 1;
                        *s.false_denial_reasons.entry(kind.clone()).or_default() += 1;
                    } else {
                        s.raced_denials += 1;
                    }
                });
                Attempt::Denied
            }
            Answer::NotFound => {
                self.soak.stats(|s| s.not_found += 1);
                Attempt::Skipped
            }
            Answer::Failed(e) => {
                let kind: String = e
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .take(90)
                    .collect();
                self.soak.stats(|s| {
                    s.failed_requests += 1;
                    *s.failures.entry(kind).or_default() += 1;
                });
                Attempt::Skipped
            }
        }
    }

    /// Admin: a new Containerfile, so MCO builds and rolls out a new image.
    pub(super) async fn update_mosc(&mut self) {
        self.act("update the MachineOSConfig's Containerfile (a new build)");
        let n = self.rng.next();
        let patch = json!({"spec": {"containerFile": [{"containerfileArch": "NoArch",
            "content": format!("FROM configs AS final\nRUN echo {n:016x}\n")}]}});
        let _ = mco::moscs(self.client())
            .patch(&self.pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }

    /// A new rendered MachineConfig for the pool (what the render controller does on a change).
    pub(super) async fn render(&mut self) {
        self.act("new rendered config for the pool (a new build)");
        let rendered = format!(
            "rendered-{}-{:016x}{:016x}",
            self.pool,
            self.rng.next(),
            self.rng.next()
        );
        // The render controller points the pool only at a config it created.
        let created =
            testkit::scenario::create_rendered_config(self.client(), &self.pool, &rendered).await;
        if created.is_err() {
            return;
        }
        let patch = json!({"spec": {"configuration": {"name": rendered}}});
        let _ = mco::mcps(self.client())
            .patch(&self.pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
    }

    /// This trial's fault, if it has one and has not had it yet.
    pub(super) async fn chaos(&mut self) {
        if std::mem::replace(&mut self.chaos_done, true) {
            return;
        }
        match self.index % CHAOS_PERIOD {
            3 => self.soak.restart_guard(&mut self.rng).await,
            6 => self.soak.restart_apiserver(&mut self.rng).await,
            _ => {}
        }
    }

    /// The random middle of a trial: MCO's progress (held and released nodes, new builds,
    /// new rendered configs) interleaved with deletions; possibly a restart.
    pub(super) async fn interleave(&mut self) {
        let steps = 3 + self.rng.below(8);
        let chaos_at = self.rng.below(steps);
        for step in 0..steps {
            if step == chaos_at {
                self.chaos().await;
            }
            tokio::time::sleep(self.rng.millis(0, 1200)).await;
            let roll = self.rng.below(100);
            if roll < 20 {
                let node = self.nodes[self.rng.below(self.nodes.len() as u64) as usize].clone();
                self.hold(&node);
            } else if roll < 38 {
                let held: Vec<String> = self.held.iter().cloned().collect();
                if !held.is_empty() {
                    let node = held[self.rng.below(held.len() as u64) as usize].clone();
                    self.release(&node);
                }
            } else if roll < 46 {
                self.update_mosc().await;
            } else if roll < 50 {
                self.render().await;
            } else if roll < 58 {
                tokio::time::sleep(self.rng.millis(1500, 4000)).await;
            } else {
                let mosb = self.rng.chance(40);
                let dry_run = self.rng.chance(75);
                match self.attempt(mosb, dry_run).await {
                    Attempt::Allowed if !dry_run && !mosb => {
                        self.deleted = true;
                        return;
                    }
                    Attempt::Accepted => {
                        self.deleted = true;
                        return;
                    }
                    _ => {}
                }
            }
        }
    }
}

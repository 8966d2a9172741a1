//! The one apply engine: carries out a plan on the live cluster one item at a time, for every
//! command that writes (`recover --apply`, `prune --apply`, `prune --apply --images`). The
//! engine owns the turn loop, Ctrl-C, "not attempted", the progress lines ([`Clock`]), the
//! outcomes and the summary ([`outcome`]); each command supplies only its [`Step`]: one item's
//! re-read, re-plan (with `core`), conditional write and wait ([`prune`], [`images`],
//! [`recover`] with [`wait`]). A shell of its own beside `defer/`, as it acts on plans `core`
//! made; the CLI only parses, calls it and prints what it returns.

pub(crate) mod images;
pub(crate) mod outcome;
pub(crate) mod prune;
pub(crate) mod recover;
pub(crate) mod wait;

use std::cell::Cell;
use std::future::Future;
use std::time::Instant;

use outcome::{Applied, Outcome, Subject};

/// Where a turn is, so that Ctrl-C can say what it left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Nothing written yet.
    Reading,
    /// The write request is in flight: it may or may not be applied.
    Writing,
    /// The write was accepted; waiting for its effect.
    Waiting,
}

/// What a command supplies: one item's turn.
pub(crate) trait Step {
    type Item;
    type Subject: Subject;
    type Found: Default;

    /// The item's entry before its turn (as listed when the run does not reach it).
    fn entry(&self, item: &Self::Item) -> Applied<Self::Subject, Self::Found>;

    /// One item's turn, moving `stage` on as it writes; the run goes on after it only when its
    /// outcome does ([`Applied::goes_on`]).
    async fn turn(
        &mut self,
        item: &Self::Item,
        stage: &Cell<Stage>,
    ) -> Applied<Self::Subject, Self::Found>;

    /// What Ctrl-C at `stage` of `item`'s turn left behind.
    fn interrupted(&self, item: &Self::Item, stage: Stage) -> String;
}

/// What a run did: every item's entry, in order.
pub(crate) struct Ran<S, F> {
    pub(crate) applied: Vec<Applied<S, F>>,
    pub(crate) interrupted: bool,
    /// Every item had its turn and the run went on after each (there was at least one).
    pub(crate) through: bool,
}

/// Gives each of `items` its turn, in order, until one does not go on (the rest are listed as
/// not attempted) or Ctrl-C; `nothing`: the line said when there is no item.
pub(crate) async fn run<S: Step>(
    step: &mut S,
    items: &[S::Item],
    clock: &Clock,
    nothing: &str,
) -> Ran<S::Subject, S::Found> {
    let mut ran = Ran {
        applied: Vec::with_capacity(items.len()),
        interrupted: false,
        through: false,
    };
    if items.is_empty() {
        clock.line(nothing);
        return ran;
    }
    let current: Cell<Option<usize>> = Cell::new(None);
    let stage = Cell::new(Stage::Reading);
    let turns = async {
        for (i, item) in items.iter().enumerate() {
            current.set(Some(i));
            stage.set(Stage::Reading);
            let applied = step.turn(item, &stage).await;
            current.set(None);
            let goes_on = applied.goes_on();
            ran.applied.push(applied);
            if !goes_on {
                return false;
            }
        }
        true
    };
    match until_ctrl_c(turns).await {
        Some(through) => ran.through = through,
        None => {
            ran.interrupted = true;
            if let Some(i) = current.get() {
                let why = step.interrupted(&items[i], stage.get());
                let entry = step.entry(&items[i]).end(clock, Outcome::Interrupted, why);
                ran.applied.push(entry);
            }
        }
    }
    let listed = ran.applied.len();
    ran.applied
        .extend(items[listed..].iter().map(|item| step.entry(item)));
    ran
}

/// `work`'s result, or `None` when Ctrl-C came first.
pub(crate) async fn until_ctrl_c<T>(work: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        _ = tokio::signal::ctrl_c() => None,
    }
}

/// Progress lines on stderr, each with the time since the run started.
pub(crate) struct Clock(Instant);

impl Clock {
    pub(crate) fn start() -> Self {
        Clock(Instant::now())
    }

    pub(crate) fn line(&self, text: impl AsRef<str>) {
        eprintln!(
            "[{:>7.1}s] {}",
            self.0.elapsed().as_secs_f64(),
            text.as_ref()
        );
    }

    /// Seconds since the start, to a tenth.
    pub(crate) fn seconds(&self) -> f64 {
        (self.0.elapsed().as_secs_f64() * 10.0).round() / 10.0
    }
}

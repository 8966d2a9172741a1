use super::*;

fn mosc(uid: &str) -> MachineOSConfig {
    let mut m = MachineOSConfig::default();
    m.metadata.uid = Some(uid.into());
    m
}

#[test]
fn deferrals_of_objects_deleted_by_anyone_are_dropped() {
    let deferrals = Arc::new(Deferrals::default());
    let mut janitor = Janitor::new(Arc::clone(&deferrals));
    for uid in ["a", "b", "c"] {
        deferrals.with(uid, |m| m.attempts = 3);
    }
    // Deleted while watched (e.g. remove-finalizers --force, or the finalizer removed by
    // hand: the controller is never called for it again).
    janitor.observe(&watcher::Event::Delete(mosc("a")));
    assert_eq!(deferrals.len(), 2);
    janitor.observe(&watcher::Event::Apply(mosc("b")));
    assert_eq!(deferrals.len(), 2, "an update keeps the deferral");
    // Deleted while the watch was down: the relist no longer lists it.
    janitor.observe(&watcher::Event::<MachineOSConfig>::Init);
    janitor.observe(&watcher::Event::InitApply(mosc("b")));
    assert_eq!(
        deferrals.len(),
        2,
        "nothing dropped before the relist completes"
    );
    janitor.observe(&watcher::Event::<MachineOSConfig>::InitDone);
    assert_eq!(deferrals.len(), 1);
    assert_eq!(deferrals.with("b", |m| m.attempts), 3, "b's deferral kept");
}

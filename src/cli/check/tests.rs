use super::*;

#[test]
fn targets() {
    let ok = [
        ("worker", TargetKind::MachineOSConfig, "worker"),
        ("mosc/worker", TargetKind::MachineOSConfig, "worker"),
        (
            "machineosconfig/worker",
            TargetKind::MachineOSConfig,
            "worker",
        ),
        (
            "MachineOSBuild/worker-1",
            TargetKind::MachineOSBuild,
            "worker-1",
        ),
        ("mosb/worker-1", TargetKind::MachineOSBuild, "worker-1"),
    ];
    for (t, kind, name) in ok {
        assert_eq!(parse_target(t).ok(), Some((kind, name)), "{t}");
    }
    for bad in ["pod/x", "mosc/", "", "mosc/a/b"] {
        assert!(parse_target(bad).is_err(), "{bad}");
    }
}

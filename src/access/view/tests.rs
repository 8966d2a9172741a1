use super::*;
use crate::core::release::ClusterRelease;

#[tokio::test]
async fn the_override_reaches_cached_and_fresh_snapshots_alike() {
    let cluster = Snapshot {
        release: ClusterRelease {
            desired: Some("4.23.0".into()),
            also_running: vec!["4.22.4".into()],
            upgrading: true,
        },
        ..Default::default()
    };
    let view = ReleaseOverride::new(StaticView(Arc::new(cluster.clone())), Some("4.20.8".into()));
    let given = ClusterRelease::given("4.20.8");
    assert_eq!(view.objects().release, given);
    let fresh = view.fresh().await.expect("fresh");
    assert_eq!(fresh.objects.release, given);
    // Without a version the cluster's word stands.
    let view = ReleaseOverride::new(StaticView(Arc::new(cluster.clone())), None);
    assert_eq!(view.objects().release, cluster.release);
}

//! Memoised comparisons for scans over every node: the node cache interns image strings, so
//! nodes on one image share one allocation, and a scan decides each distinct string once.

/// Identity of a string slice by address and length. The node cache interns image
/// references, so nodes on the same image share one allocation: keyed by identity, a scan
/// compares and parses each distinct reference once instead of once per node. Sound while
/// the strings are borrowed, as all nodes are for the length of a decision.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct StrId(usize, usize);

impl StrId {
    pub(super) fn of(s: Option<&str>) -> StrId {
        s.map_or(StrId(0, 0), |s| StrId(s.as_ptr() as usize, s.len()))
    }
}

/// A few recent results by key: enough for the handful of distinct images a cluster runs,
/// bounded so that nodes that share nothing (a directory dump) cost a short search each.
pub(super) struct Memo<K, V> {
    entries: Vec<(K, V)>,
    next: usize,
}

impl<K, V> Default for Memo<K, V> {
    fn default() -> Self {
        Memo {
            entries: Vec::new(),
            next: 0,
        }
    }
}

impl<K: PartialEq + Copy, V: Clone> Memo<K, V> {
    const CAPACITY: usize = 8;

    pub(super) fn get_or(&mut self, key: K, compute: impl FnOnce() -> V) -> V {
        if let Some((_, v)) = self.entries.iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
        let value = compute();
        if self.entries.len() < Self::CAPACITY {
            self.entries.push((key, value.clone()));
        } else {
            self.entries[self.next] = (key, value.clone());
            self.next = (self.next + 1) % Self::CAPACITY;
        }
        value
    }
}

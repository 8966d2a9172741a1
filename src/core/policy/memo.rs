//! Memoised comparisons for scans over every node ([`super::scan`], [`super::pools`]): a cluster
//! runs a handful of distinct images, so a scan decides each distinct string once. Keys are equal
//! when the text is; the address is compared first, which decides at once for the node cache's
//! interned strings ([`crate::core::node::Interner`]).

/// An optional string as a memo key, borrowed for the length of one scan.
#[derive(Clone, Copy, Default)]
pub(super) struct Text<'a>(pub(super) Option<&'a str>);

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self.0, other.0) {
            // Same address and length first: the interned case, no text read.
            (Some(a), Some(b)) => std::ptr::eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        }
    }
}

/// A few recent results by key: enough for the handful of distinct images a cluster runs,
/// bounded so that nodes that share nothing cost a short search each.
#[derive(Default)]
pub(super) struct Memo<K, V> {
    entries: Vec<(K, V)>,
    next: usize,
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

#[cfg(test)]
mod tests;

//! The lists a loop read, reused by its next passes while nothing changed: a busy loop passes
//! every 100 ms, and listing every kind on each pass was most of what the API server served. A
//! list is read again after any change a watch tells of, any write a loop sends, a knob, or
//! [`IDLE_POLL`] (what a watch has not told yet is seen no later than that).

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Api;
use serde::de::DeserializeOwned;

use super::activity::{Activity, IDLE_POLL};

/// The lists read, by who read them (identities see different things) and what was listed.
#[derive(Clone, Default)]
pub(super) struct Reads {
    lists: Arc<Mutex<HashMap<(&'static str, String), Listed>>>,
}

struct Listed {
    generation: (u64, u64),
    at: Instant,
    items: Arc<dyn Any + Send + Sync>,
}

impl Reads {
    /// Every object `api` lists, as `actor` read them last if nothing changed since, else
    /// listed now.
    pub(super) async fn list<K>(
        &self,
        activity: &Activity,
        actor: &'static str,
        api: &Api<K>,
    ) -> crate::Result<Vec<K>>
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        let key = (actor, api.resource_url().to_owned());
        let generation = activity.generation();
        if let Some(items) = self.fresh::<K>(&key, generation) {
            return Ok(items);
        }
        let items = crate::mco::list_all(api).await?;
        let listed = Listed {
            generation,
            at: Instant::now(),
            items: Arc::new(items.clone()),
        };
        self.with(|lists| lists.insert(key, listed));
        Ok(items)
    }

    fn fresh<K: Clone + 'static>(
        &self,
        key: &(&'static str, String),
        generation: (u64, u64),
    ) -> Option<Vec<K>> {
        self.with(|lists| {
            let listed = lists.get(key)?;
            reusable(listed.generation, generation, listed.at.elapsed())
                .then(|| listed.items.downcast_ref::<Vec<K>>().cloned())
                .flatten()
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<(&'static str, String), Listed>) -> T) -> T {
        match self.lists.lock() {
            Ok(mut lists) => f(&mut lists),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

/// Whether a list read at `then`, `age` ago, still stands at `now`: nothing changed or was
/// written in between, and it is younger than [`IDLE_POLL`].
fn reusable(then: (u64, u64), now: (u64, u64), age: Duration) -> bool {
    then == now && age < IDLE_POLL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_stands_until_a_change_a_write_or_the_idle_poll() {
        let ms = Duration::from_millis;
        assert!(reusable((3, 7), (3, 7), ms(0)));
        assert!(reusable((3, 7), (3, 7), IDLE_POLL - ms(1)));
        assert!(
            !reusable((3, 7), (4, 7), ms(10)),
            "a change a watch told of"
        );
        assert!(!reusable((3, 7), (3, 8), ms(10)), "a write a loop sent");
        assert!(
            !reusable((3, 7), (3, 7), IDLE_POLL),
            "what no watch told yet"
        );
    }
}

//! Shared copies of values many cached objects repeat: [`Interner`] hands out one `Arc` per
//! distinct value, so a thousand Works in one execution namespace, or the five Works of one
//! binding, point at one string instead of each holding a copy (ADR 0019).
//!
//! An interner forgets a value once nothing but itself holds it: whenever it has doubled since
//! its last sweep, it drops the values no caller holds any more, so its size follows what the
//! caches hold (the sweep's cost, a pass over the set, is spread over the insertions that
//! doubled it).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// A set of shared values (see the module docs); usable as a `static`.
#[derive(Debug)]
pub struct Interner<T: ?Sized> {
    state: Mutex<State<T>>,
}

#[derive(Debug)]
struct State<T: ?Sized> {
    values: Option<HashSet<Arc<T>>>,
    /// The set's size after the last sweep.
    swept: usize,
}

impl<T: ?Sized + Hash + Eq> State<T> {
    /// Adds `shared` (not in the set yet), sweeping first when the set doubled since the last
    /// sweep.
    fn insert(&mut self, shared: Arc<T>) -> Arc<T> {
        let values = self.values.get_or_insert_with(HashSet::new);
        if values.len() >= SWEEP_FLOOR.max(2 * self.swept) {
            values.retain(|held| Arc::strong_count(held) > 1);
            self.swept = values.len();
        }
        values.insert(Arc::clone(&shared));
        shared
    }
}

/// The fewest values an interner holds before it sweeps at all.
const SWEEP_FLOOR: usize = 64;

impl<T: ?Sized + Hash + Eq> Default for Interner<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T> {
    /// An empty interner.
    pub const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                values: None,
                swept: 0,
            }),
        }
    }

    /// The shared copy of `value`, made from it (`Arc::from`) the first time it is asked for.
    pub fn intern<Q>(&self, value: &Q) -> Arc<T>
    where
        Arc<T>: Borrow<Q> + for<'a> From<&'a Q>,
        Q: ?Sized + Hash + Eq,
    {
        let mut state = self.lock();
        if let Some(shared) = state.values.get_or_insert_with(HashSet::new).get(value) {
            return Arc::clone(shared);
        }
        state.insert(Arc::from(value))
    }

    /// The shared copy of `value`: `value` itself the first time it is asked for.
    pub fn intern_value(&self, value: T) -> Arc<T>
    where
        T: Sized,
    {
        let mut state = self.lock();
        if let Some(shared) = state.values.get_or_insert_with(HashSet::new).get(&value) {
            return Arc::clone(shared);
        }
        state.insert(Arc::new(value))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Gives back a caller's copy: the interner forgets the value at once if nothing else held
    /// it (for owners that know when they let go, instead of waiting for the next sweep).
    pub fn release(&self, value: Arc<T>) {
        let mut state = self.lock();
        // Two references: `value` and the set's.
        if Arc::strong_count(&value) == 2
            && let Some(values) = state.values.as_mut()
        {
            values.remove(&value);
        }
    }

    /// How many distinct values the interner holds (those no caller holds any more included,
    /// until the next sweep).
    pub fn len(&self) -> usize {
        self.lock().values.as_ref().map_or(0, HashSet::len)
    }

    /// Whether the interner holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_copy() {
        let interner: Interner<str> = Interner::new();
        let a = interner.intern("karmada-es-member1");
        let b = interner.intern(String::from("karmada-es-member1").as_str());
        let c = interner.intern("karmada-es-member2");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, "karmada-es-member2");
        assert_eq!(interner.len(), 2);
    }

    #[test]
    fn a_released_value_is_forgotten_with_its_last_holder() {
        let interner: Interner<str> = Interner::new();
        let a = interner.intern("a");
        let again = interner.intern("a");
        interner.release(a);
        assert_eq!(interner.len(), 1, "still held by `again`");
        interner.release(again);
        assert!(interner.is_empty());
    }

    #[test]
    fn values_nobody_holds_are_swept_as_the_set_grows() {
        let interner: Interner<str> = Interner::new();
        let kept = interner.intern("kept");
        for i in 0..10_000 {
            // Each value is dropped by the caller at once.
            interner.intern(format!("gone-{i}").as_str());
        }
        assert!(
            interner.len() <= 2 * SWEEP_FLOOR,
            "{} values held after sweeps",
            interner.len()
        );
        assert!(
            Arc::ptr_eq(&kept, &interner.intern("kept")),
            "a held value survives every sweep"
        );
    }

    #[test]
    fn values_still_held_are_never_swept() {
        let interner: Interner<str> = Interner::new();
        let held: Vec<Arc<str>> = (0..1_000)
            .map(|i| interner.intern(format!("v-{i}").as_str()))
            .collect();
        for (i, value) in held.iter().enumerate() {
            assert!(Arc::ptr_eq(value, &interner.intern(format!("v-{i}").as_str())));
        }
        assert_eq!(interner.len(), 1_000);
    }

    #[test]
    fn sized_values_intern_too() {
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        struct Key {
            namespace: String,
            name: String,
        }
        let interner: Interner<Key> = Interner::new();
        let key = Key {
            namespace: "default".into(),
            name: "web-deployment".into(),
        };
        let a = interner.intern_value(key.clone());
        let b = interner.intern_value(key.clone());
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, key);
    }
}

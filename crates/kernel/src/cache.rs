//! A small in-process read cache for hot public reads (`READ_CACHE`, on by default).
//!
//! Its rules: a write through this process invalidates it at once ([`ReadCache::invalidate`]), so
//! the very next read sees the write; an entry lives at most [`MAX_AGE`], so a write by another
//! process on the same database (a second server, the CLI) is seen within that time; and it holds
//! at most `capacity` entries (a full cache is emptied, then refilled by the reads that follow).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest an entry is served: writes by other processes show within this time.
pub const MAX_AGE: Duration = Duration::from_millis(900);

/// Values by key, each valid for [`MAX_AGE`] and until the next local write.
pub struct ReadCache<K, V> {
    enabled: bool,
    capacity: usize,
    generation: AtomicU64,
    entries: Mutex<HashMap<K, (Instant, V)>>,
    /// One gate per key being loaded, so that when a hot entry expires one request reloads it
    /// and the others wait for that answer instead of all going to the database at once.
    gates: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

/// What a read remembers before it goes to the database, so that a write that lands meanwhile
/// keeps its (possibly stale) answer out of the cache.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

impl<K: Eq + Hash, V: Clone> ReadCache<K, V> {
    /// A cache of at most `capacity` entries; with `enabled` false it never holds anything.
    pub fn new(enabled: bool, capacity: usize) -> Self {
        ReadCache {
            enabled,
            capacity: capacity.max(1),
            generation: AtomicU64::new(0),
            entries: Mutex::new(HashMap::new()),
            gates: Mutex::new(HashMap::new()),
        }
    }

    /// The cached value, or the one `load` reads when there is none fresh; concurrent misses of
    /// one key wait for a single load.
    pub async fn get_or_load<E, F, Fut>(&self, key: K, load: F) -> Result<V, E>
    where
        K: Clone,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        if !self.enabled {
            return load().await;
        }
        if let Ok(value) = self.get(&key) {
            return Ok(value);
        }
        let gate = {
            let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
            if gates.len() >= self.capacity && !gates.contains_key(&key) {
                gates.clear();
            }
            gates.entry(key.clone()).or_default().clone()
        };
        let _turn = gate.lock().await;
        let ticket = match self.get(&key) {
            Ok(value) => return Ok(value),
            Err(ticket) => ticket,
        };
        let value = load().await?;
        self.put(key, value.clone(), ticket);
        Ok(value)
    }

    /// [`get_or_load`](Self::get_or_load) with `load` run as one unit of work
    /// ([`crate::unit::run`]): a loader dropped with its request still finishes, the service
    /// calls it makes run inline in it (no second hand-off), and what it does besides (writing
    /// the answer's JSON) runs on the unit's thread, off the HTTP worker. A unit that fails is
    /// [`DbError::Unit`](crate::DbError::Unit).
    pub async fn get_or_load_unit<E, Fut>(&self, key: K, load: Fut) -> Result<V, E>
    where
        K: Clone,
        V: Send + 'static,
        E: From<crate::DbError> + Send + 'static,
        Fut: Future<Output = Result<V, E>> + Send + 'static,
    {
        self.get_or_load(key, || crate::unit::run(load)).await
    }

    /// The cached value, when there is a fresh one; else a ticket for [`ReadCache::put`].
    pub fn get(&self, key: &K) -> Result<V, Ticket> {
        let ticket = Ticket(self.generation.load(Ordering::Acquire));
        if !self.enabled {
            return Err(ticket);
        }
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(key) {
            Some((at, value)) if at.elapsed() < MAX_AGE => Ok(value.clone()),
            _ => Err(ticket),
        }
    }

    /// Keeps `value`, read from the database after `ticket` was taken, unless a local write has
    /// invalidated the cache since.
    pub fn put(&self, key: K, value: V, ticket: Ticket) {
        if !self.enabled {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(Ordering::Acquire) != ticket.0 {
            return;
        }
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), value));
    }

    /// Forgets everything: called after every local write.
    pub fn invalidate(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_invalidate_and_stale_reads_are_not_kept() {
        let cache: ReadCache<&str, u32> = ReadCache::new(true, 8);
        let ticket = cache.get(&"a").err().unwrap_or(Ticket(99));
        cache.put("a", 1, ticket);
        assert_eq!(cache.get(&"a").ok(), Some(1));
        // A read that began before a write does not store its answer.
        let before_write = cache.get(&"b").err().unwrap_or(Ticket(99));
        cache.invalidate();
        assert!(cache.get(&"a").is_err());
        cache.put("b", 2, before_write);
        assert!(cache.get(&"b").is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_wait_for_one_load() {
        let cache: Arc<ReadCache<&str, u32>> = Arc::new(ReadCache::new(true, 8));
        let loads = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_load("hot", || async {
                            loads.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok::<_, ()>(7)
                        })
                        .await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.ok().and_then(|r| r.ok()), Some(7));
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_cache_is_bounded_and_can_be_off() {
        let cache: ReadCache<u32, u32> = ReadCache::new(true, 2);
        for k in 0..10 {
            let ticket = cache.get(&k).err().unwrap_or(Ticket(99));
            cache.put(k, k, ticket);
        }
        let held = (0..10).filter(|k| cache.get(k).is_ok()).count();
        assert!(held <= 2, "{held}");
        let off: ReadCache<u32, u32> = ReadCache::new(false, 2);
        let ticket = off.get(&1).err().unwrap_or(Ticket(99));
        off.put(1, 1, ticket);
        assert!(off.get(&1).is_err());
    }
}

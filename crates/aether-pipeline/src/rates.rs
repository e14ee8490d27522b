//! Rate limits (`[agents.NAME] rate`, `rate_per_caller`, `rates`, `concurrent`): calls per
//! window and calls in flight, counted before the receipt and shared with every process on
//! the store.
//!
//! Each process counts its own calls at once and, every [`SYNC_EVERY`], adds what it counted
//! to the store and reads what the others counted in the windows still running (and how many
//! calls each has in flight). A window a process has not counted in yet is read from the store
//! before its first call there. A call is admitted while its own count and the others' last
//! known counts stay under the limit, so processes together pass a limit by at most what the
//! others admitted since their last exchange. Without the store (unreachable), each process
//! counts alone; the receipt step refuses calls then anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aether_policy::agent::Rate;
use aether_policy::{Refusal, Step};
use aether_store::Store;
use tokio_util::sync::CancellationToken;

use crate::SessionContext;

/// How often each process shares its counts through the store.
pub const SYNC_EVERY: Duration = Duration::from_millis(200);

/// How often a process lets go of rows of windows long over.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Another process's calls in flight count while it shared them this recently.
const GAUGE_FRESH_US: i64 = 5_000_000;

/// A process's counts: per (key, window start), its own and the others' as last read; per
/// key, its calls in flight and the others'.
#[derive(Default)]
struct Counts {
    windows: HashMap<(String, i64), Window>,
    in_flight: HashMap<String, u64>,
    others_in_flight: HashMap<String, u64>,
    /// Keys whose calls in flight changed since the last exchange.
    flight_changed: Vec<String>,
}

#[derive(Default, Clone, Copy)]
struct Window {
    window_us: i64,
    mine: u64,
    unsynced: u64,
    others: u64,
}

pub(crate) struct Rates {
    store: Store,
    /// This process's name among the store's writers of counts.
    writer: String,
    counts: Mutex<Counts>,
    /// When this process last let go of old rows.
    pruned: Mutex<Option<std::time::Instant>>,
}

/// A call's place among its agent's calls in flight, given back when the call ends.
pub(crate) struct Permit {
    rates: Arc<Rates>,
    key: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut counts = self.rates.lock();
        if let Some(n) = counts.in_flight.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
        counts.flight_changed.push(self.key.clone());
    }
}

/// One limit a call is checked against: its key (with the window's length, so that windows
/// of different lengths never share a count), its rate, the refusal's rule and who it names.
struct Check {
    key: String,
    rate: Rate,
    rule: &'static str,
    who: String,
}

impl Rates {
    pub(crate) fn new(store: Store) -> Arc<Rates> {
        Arc::new(Rates {
            store,
            writer: uuid::Uuid::now_v7().to_string(),
            counts: Mutex::default(),
            pruned: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a call of `tool` by this session against its agent's limits, or refuses it,
    /// saying when to try again. All or nothing: a call refused here counts nowhere.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        ctx: &SessionContext,
        tool: &str,
        now_us: i64,
    ) -> Result<Option<Permit>, Refusal> {
        let limits = &ctx.agent.rates;
        if limits.is_empty() {
            return Ok(None);
        }
        let agent = &ctx.agent.name;
        let mut checks = Vec::new();
        let mut check = |key: String, rate: Rate, rule: &'static str, who: String| {
            checks.push(Check {
                key: format!("{key}/{}", rate.window_us),
                rate,
                rule,
                who,
            })
        };
        if let Some(rate) = limits.rate {
            check(
                format!("agent:{agent}"),
                rate,
                "rate:agent",
                format!("agent {agent:?} has made"),
            );
        }
        if let Some(rate) = limits.per_caller {
            let caller = ctx.caller();
            check(
                format!("caller:{caller}"),
                rate,
                "rate:caller",
                format!("{caller:?} has made"),
            );
        }
        if let Some(rate) = limits.per_tool.get(tool) {
            check(
                format!("tool:{agent}:{tool}"),
                *rate,
                "rate:tool",
                format!("agent {agent:?} has made {tool:?}"),
            );
        }
        let start = |c: &Check| now_us - now_us.rem_euclid(c.rate.window_us);
        // A window this process has not counted in yet: what the others counted in it so far
        // is read now, not at the next exchange (a burst would otherwise pass unseen).
        let unknown: Vec<(String, i64)> = {
            let counts = self.lock();
            checks
                .iter()
                .map(|c| (c.key.clone(), start(c)))
                .filter(|place| !counts.windows.contains_key(place))
                .collect()
        };
        if !unknown.is_empty() {
            let seen = match self.store.rate_counts(&self.writer, unknown.clone()).await {
                Ok(seen) => seen,
                Err(e) => {
                    // Counted here alone until the next exchange catches up.
                    tracing::warn!(error = %e, "cannot read the other processes' rate counts");
                    HashMap::new()
                }
            };
            let mut counts = self.lock();
            for (place, c) in unknown.into_iter().zip(checks.iter()) {
                let others = seen.get(&place).copied().unwrap_or(0);
                let w = counts.windows.entry(place).or_default();
                w.window_us = c.rate.window_us;
                w.others = w.others.max(others);
            }
        }
        let mut counts = self.lock();
        for c in &checks {
            let w = counts
                .windows
                .get(&(c.key.clone(), start(c)))
                .copied()
                .unwrap_or_default();
            if w.mine + w.others >= c.rate.calls {
                let wait = ((start(c) + c.rate.window_us - now_us) as f64 / 1e6)
                    .ceil()
                    .max(1.0) as u64;
                return Err(Refusal::new(
                    Step::Rate,
                    c.rule,
                    format!(
                        "{} {} calls in this {} (its limit is {}); try again in {wait} s",
                        c.who,
                        w.mine + w.others,
                        c.rate.window_name(),
                        c.rate
                    ),
                )
                .retry_after(wait));
            }
        }
        let permit = match limits.concurrent {
            Some(max) => {
                let key = format!("flight:{agent}");
                let mine = counts.in_flight.get(&key).copied().unwrap_or(0);
                let others = counts.others_in_flight.get(&key).copied().unwrap_or(0);
                if mine + others >= u64::from(max) {
                    return Err(Refusal::new(
                        Step::Rate,
                        "rate:concurrent",
                        format!(
                            "agent {agent:?} has {} calls in flight (its limit is {max} at once); try again in 1 s",
                            mine + others
                        ),
                    )
                    .retry_after(1));
                }
                *counts.in_flight.entry(key.clone()).or_default() += 1;
                counts.flight_changed.push(key.clone());
                Some(Permit {
                    rates: self.clone(),
                    key,
                })
            }
            None => None,
        };
        for c in &checks {
            let w = counts.windows.entry((c.key.clone(), start(c))).or_default();
            w.window_us = c.rate.window_us;
            w.mine += 1;
            w.unsynced += 1;
        }
        Ok(permit)
    }

    /// Shares this process's counts through the store until `stop`, and once more then (a
    /// process that ends leaves its counts behind).
    pub(crate) fn run(self: Arc<Self>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SYNC_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let stopping = tokio::select! {
                    _ = stop.cancelled() => true,
                    _ = tick.tick() => false,
                };
                if let Err(e) = self.sync().await {
                    tracing::warn!(error = %e, "cannot share rate limit counts through the store");
                }
                if stopping {
                    return;
                }
            }
        })
    }

    /// One exchange with the store: what this process counted since the last one goes in,
    /// the others' counts of the windows still running come back. Nothing is lost when the
    /// store cannot be reached: the counts go in at the next exchange.
    pub(crate) async fn sync(&self) -> Result<(), aether_store::StoreError> {
        let now = aether_store::now_us();
        let (adds, windows, gauges) = {
            let mut counts = self.lock();
            // Only windows still running are kept and asked about.
            counts
                .windows
                .retain(|(_, start), w| start + w.window_us > now);
            let mut adds = Vec::new();
            let mut windows = Vec::new();
            for ((key, start), w) in counts.windows.iter_mut() {
                if w.unsynced > 0 {
                    adds.push((key.clone(), *start, w.unsynced));
                    w.unsynced = 0;
                }
                windows.push((key.clone(), *start));
            }
            // Calls in flight: those that changed; a key back to none is shared once, then
            // forgotten.
            let changed = std::mem::take(&mut counts.flight_changed);
            let mut gauges: Vec<(String, u64)> = Vec::new();
            for key in changed {
                if gauges.iter().all(|(k, _)| *k != key) {
                    gauges.push((
                        key.clone(),
                        counts.in_flight.get(&key).copied().unwrap_or(0),
                    ));
                }
            }
            counts.in_flight.retain(|_, n| *n > 0);
            (adds, windows, gauges)
        };
        let watching_flights = {
            let counts = self.lock();
            !counts.in_flight.is_empty() || !counts.others_in_flight.is_empty()
        };
        if adds.is_empty() && windows.is_empty() && gauges.is_empty() && !watching_flights {
            return Ok(());
        }
        // Rows of windows long over are let go now and then, not at every exchange.
        let prune = {
            let mut last = self.pruned.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= PRUNE_EVERY);
            if due {
                *last = Some(std::time::Instant::now());
            }
            due
        };
        let shared = self
            .store
            .share_rate_counts(
                &self.writer,
                adds.clone(),
                gauges.clone(),
                windows,
                now - GAUGE_FRESH_US,
                prune,
            )
            .await;
        let mut counts = self.lock();
        let seen = match shared {
            Ok(seen) => seen,
            Err(e) => {
                // Put back what did not go in, for the next exchange.
                for (key, start, n) in adds {
                    if let Some(w) = counts.windows.get_mut(&(key, start)) {
                        w.unsynced += n;
                    }
                }
                counts
                    .flight_changed
                    .extend(gauges.into_iter().map(|(k, _)| k));
                return Err(e);
            }
        };
        for ((key, start), others) in seen.windows {
            if let Some(w) = counts.windows.get_mut(&(key, start)) {
                w.others = others;
            }
        }
        counts.others_in_flight = seen.in_flight.into_iter().filter(|(_, n)| *n > 0).collect();
        Ok(())
    }
}

//! BUGGIFY: fault points for rare but legal paths, compiled into the
//! production code and inert outside the simulation.
//!
//! A site is a `buggify!()` expression at a place where the code may
//! legally take an unusual turn: a long poll that answers early, a broker
//! that refuses a send as busy, a timer tick that comes late. In
//! production nothing enables the points, so every site is `false` (one
//! thread-local read). A simulation run calls [`enable`] with a seed; then,
//! as in FoundationDB, each site is switched on for the whole run with
//! probability [`ACTIVATE_P`] the first time it is reached, and an active
//! site fires with probability [`FIRE_P`] each time. Sites are keyed by
//! module and line, and the decisions come from one RNG seeded by the run,
//! so a run stays reproducible from its seed.
//!
//! The state is per thread: a turmoil simulation drives all its hosts from
//! one thread, and the [`Enabled`] guard switches the points off again when
//! the run ends.

use std::cell::RefCell;
use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Chance that a site is active for a whole run.
pub const ACTIVATE_P: f64 = 0.25;
/// Chance that an active site fires each time it is reached.
pub const FIRE_P: f64 = 0.25;

/// What one site did in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteReport {
    /// `module::path:line` of the `buggify!()`.
    pub site: &'static str,
    /// Whether the site was switched on for the run.
    pub active: bool,
    /// Times the site was reached.
    pub reached: u64,
    /// Times it fired.
    pub fired: u64,
}

struct Site {
    active: bool,
    reached: u64,
    fired: u64,
}

struct State {
    rng: SmallRng,
    sites: BTreeMap<&'static str, Site>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Keeps the fault points of this thread enabled; dropping it disables
/// them and forgets the run's sites.
#[must_use = "the points are disabled again when the guard is dropped"]
pub struct Enabled {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        STATE.with(|s| *s.borrow_mut() = None);
    }
}

/// Enables the fault points of this thread for one run, every decision
/// drawn from `seed`.
pub fn enable(seed: u64) -> Enabled {
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            rng: SmallRng::seed_from_u64(seed),
            sites: BTreeMap::new(),
        });
    });
    Enabled {
        _not_send: std::marker::PhantomData,
    }
}

/// Whether the fault points of this thread are enabled.
pub fn is_enabled() -> bool {
    STATE.with(|s| s.borrow().is_some())
}

/// Whether the site `site` fires now. Always `false` unless enabled; use
/// it through [`buggify!`](crate::buggify!).
pub fn hit(site: &'static str) -> bool {
    STATE.with(|s| {
        let mut guard = s.borrow_mut();
        let Some(state) = guard.as_mut() else {
            return false;
        };
        let State { rng, sites } = state;
        let entry = sites.entry(site).or_insert_with(|| Site {
            active: rng.random_bool(ACTIVATE_P),
            reached: 0,
            fired: 0,
        });
        entry.reached += 1;
        let fire = entry.active && rng.random_bool(FIRE_P);
        if fire {
            entry.fired += 1;
            tracing::debug!(site, "buggify fired");
        }
        fire
    })
}

/// A number in `0..=max` from the run's RNG, for a site that fired and
/// wants a random amount (a delay, a size); 0 when not enabled.
pub fn amount(max: u64) -> u64 {
    STATE.with(|s| {
        s.borrow_mut()
            .as_mut()
            .map_or(0, |state| state.rng.random_range(0..=max))
    })
}

/// The sites reached in this run so far, in site order.
pub fn report() -> Vec<SiteReport> {
    STATE.with(|s| {
        s.borrow().as_ref().map_or_else(Vec::new, |state| {
            state
                .sites
                .iter()
                .map(|(&site, v)| SiteReport {
                    site,
                    active: v.active,
                    reached: v.reached,
                    fired: v.fired,
                })
                .collect()
        })
    })
}

/// `true` when this fault point fires (only ever in a simulation run that
/// enabled the points). Put it where the code may legally take a rare
/// turn, and take that turn when it is `true`.
#[macro_export]
macro_rules! buggify {
    () => {
        $crate::buggify::hit(concat!(module_path!(), ":", line!()))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seed: u64, hits: usize) -> (Vec<bool>, Vec<SiteReport>) {
        let _on = enable(seed);
        let fired = (0..hits)
            .map(|i| if i % 2 == 0 { hit("a:1") } else { hit("b:2") })
            .collect();
        (fired, report())
    }

    #[test]
    fn inert_unless_enabled() {
        assert!(!is_enabled());
        assert!((0..1000).all(|_| !hit("x:1")));
        assert!(report().is_empty());
        assert_eq!(amount(10), 0);
    }

    #[test]
    fn the_same_seed_makes_the_same_decisions_and_the_guard_disables() {
        let (a, ra) = run(7, 400);
        assert!(!is_enabled(), "dropping the guard disables the points");
        let (b, rb) = run(7, 400);
        assert_eq!(a, b);
        assert_eq!(ra, rb);
        assert_eq!(ra.iter().map(|r| r.reached).sum::<u64>(), 400);
    }

    #[test]
    fn inactive_sites_never_fire_and_active_ones_fire_sometimes() {
        let mut active_seen = 0;
        let mut inactive_seen = 0;
        for seed in 0..64 {
            let (_, report) = run(seed, 400);
            for r in report {
                if r.active {
                    active_seen += 1;
                    assert!(r.fired > 0 && r.fired < r.reached, "{r:?}");
                } else {
                    inactive_seen += 1;
                    assert_eq!(r.fired, 0, "{r:?}");
                }
            }
        }
        // About a quarter of 128 site-runs are active.
        assert!((16..=48).contains(&active_seen), "{active_seen}");
        assert!(inactive_seen > 64, "{inactive_seen}");
    }
}

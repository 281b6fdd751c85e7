//! Named RNG sub-streams: every random choice of a run derives from the one
//! run seed as `SmallRng::seed_from_u64(seed ^ salt)`, so adding a stream
//! never shifts the values another stream produces.

use rand::rngs::SmallRng;
use rand::SeedableRng;

/// The purpose of a sub-stream; its value is the salt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Salt {
    /// Workload shape: producers, messages, queues, pacing.
    Workload = 0x776f_726b_6c6f_6164,
    /// Fault plan: which faults, and when.
    Faults = 0x6661_756c_7473_2121,
    /// The broker's simulated disk (crash outcomes, injected faults).
    Disk = 0x6469_736b_6469_736b,
    /// Per-host clock skew.
    Clock = 0x636c_6f63_6b73_6b77,
    /// Per-producer pacing inside the simulation.
    Producer = 0x7072_6f64_7563_6572,
    /// Consumer group shape: how many members.
    Group = 0x6772_6f75_7073_697a,
    /// BUGGIFY: whether a swarm run enables the fault points, and the
    /// decisions of the points themselves.
    Buggify = 0x6275_6767_6966_7921,
    /// Clock steps and drift added on top of another plan's faults.
    ClockSteps = 0x636c_6b73_7465_7073,
}

/// The RNG of sub-stream `salt` of run `seed`.
pub fn substream(seed: u64, salt: Salt) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ salt as u64)
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn same_seed_and_salt_give_the_same_stream() {
        let a: Vec<u64> = (0..4)
            .map(|_| substream(7, Salt::Workload).random())
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| substream(7, Salt::Workload).random())
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn different_salts_give_different_streams() {
        let a: u64 = substream(7, Salt::Workload).random();
        let b: u64 = substream(7, Salt::Faults).random();
        assert_ne!(a, b);
    }
}

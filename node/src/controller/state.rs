//! The replicated state machine: per broker group its members, master,
//! master epoch and in-sync set. Commands are applied in log order on every
//! controller, so `apply` is pure and deterministic; it re-checks every
//! precondition because a command may have been proposed against an older
//! state. Invariant: the master (when set) is a member and in the in-sync set,
//! and epochs never go backwards.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::api::GroupView;

/// Most broker groups one controller cluster tracks.
pub const GROUPS_MAX: usize = 4_096;
/// Most replicas one broker group may have.
pub const MEMBERS_PER_GROUP_MAX: usize = 64;
/// Longest group name or address accepted.
pub const NAME_BYTES_MAX: usize = 255;

/// One replica of a broker group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Where clients reach the broker.
    pub broker_addr: String,
    /// Where slaves reach its HA service.
    pub ha_addr: String,
}

/// What the controller knows about one broker group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupState {
    /// Replica id → addresses.
    pub members: BTreeMap<u64, Member>,
    /// The current master, once one was elected.
    pub master: Option<u64>,
    /// 0 before the first master; +1 on every election.
    pub master_epoch: u32,
    /// Replicas that hold every acknowledged message; contains the master.
    pub in_sync: BTreeSet<u64>,
    /// +1 on every change of `in_sync`.
    pub in_sync_epoch: u32,
}

impl GroupState {
    /// The view brokers and tools get.
    pub fn view(&self, group: &str) -> GroupView {
        let master = self.master.and_then(|id| self.members.get(&id));
        GroupView {
            group: group.to_owned(),
            master_id: self.master,
            master_addr: master.map(|m| m.broker_addr.clone()),
            master_ha_addr: master.map(|m| m.ha_addr.clone()),
            master_epoch: self.master_epoch,
            in_sync: self.in_sync.iter().copied().collect(),
            in_sync_epoch: self.in_sync_epoch,
        }
    }
}

/// A change to the state, as carried in a raft log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Adds or re-addresses a member; the first member of a group without a
    /// master becomes its master at the next epoch.
    Join {
        /// The broker group.
        group: String,
        /// The replica.
        replica_id: u64,
        /// Its addresses.
        member: Member,
    },
    /// The master replaces the in-sync set.
    AlterInSync {
        /// The broker group.
        group: String,
        /// Who asks; must be the master.
        master_id: u64,
        /// The epoch it is master in; must be current.
        master_epoch: u32,
        /// The new set; contains the master and only members.
        in_sync: BTreeSet<u64>,
    },
    /// A new epoch after the master restarted: `new_master` (the old
    /// master allowed) must be in the in-sync set.
    Renew {
        /// The broker group.
        group: String,
        /// The epoch being ended; the command is void if it moved on.
        master_epoch: u32,
        /// The master of the new epoch.
        new_master: u64,
    },
    /// Replaces a master that stopped heartbeating.
    Elect {
        /// The broker group.
        group: String,
        /// The epoch being ended; the command is void if it moved on.
        master_epoch: u32,
        /// The new master; must be in the in-sync set and not the old master.
        new_master: u64,
    },
}

impl Command {
    /// The group the command changes.
    pub fn group(&self) -> &str {
        match self {
            Self::Join { group, .. }
            | Self::AlterInSync { group, .. }
            | Self::Renew { group, .. }
            | Self::Elect { group, .. } => group,
        }
    }
}

/// Why a command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The sender's view of master or epoch is out of date.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The command can never apply (unknown group, bad set, limits).
    #[error("invalid: {0}")]
    Invalid(String),
}

/// What an applied command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The member is known (and possibly became the first master).
    Joined,
    /// The in-sync set changed; its new epoch.
    InSyncEpoch(u32),
    /// A new master was elected at this epoch.
    Elected(u32),
}

/// Every group's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    /// Broker group name → state.
    pub groups: BTreeMap<String, GroupState>,
}

impl ControllerState {
    /// Applies `command`, or explains why it changes nothing.
    pub fn apply(&mut self, command: &Command) -> Result<Applied, Rejection> {
        match command {
            Command::Join {
                group,
                replica_id,
                member,
            } => self.join(group, *replica_id, member),
            Command::AlterInSync {
                group,
                master_id,
                master_epoch,
                in_sync,
            } => self.alter_in_sync(group, *master_id, *master_epoch, in_sync),
            Command::Elect {
                group,
                master_epoch,
                new_master,
            } => self.elect(group, *master_epoch, *new_master, false),
            Command::Renew {
                group,
                master_epoch,
                new_master,
            } => self.elect(group, *master_epoch, *new_master, true),
        }
    }

    fn join(
        &mut self,
        group: &str,
        replica_id: u64,
        member: &Member,
    ) -> Result<Applied, Rejection> {
        for (what, value) in [
            ("group", group),
            ("brokerAddr", &member.broker_addr),
            ("haAddr", &member.ha_addr),
        ] {
            if value.len() > NAME_BYTES_MAX {
                return Err(Rejection::Invalid(format!(
                    "{what} over {NAME_BYTES_MAX} bytes"
                )));
            }
        }
        if group.is_empty() || member.broker_addr.is_empty() {
            return Err(Rejection::Invalid(
                "group and brokerAddr must not be empty".into(),
            ));
        }
        if !self.groups.contains_key(group) && self.groups.len() >= GROUPS_MAX {
            return Err(Rejection::Invalid(format!(
                "over {GROUPS_MAX} broker groups"
            )));
        }
        let state = self.groups.entry(group.to_owned()).or_default();
        if !state.members.contains_key(&replica_id) && state.members.len() >= MEMBERS_PER_GROUP_MAX
        {
            return Err(Rejection::Invalid(format!(
                "group {group} has {MEMBERS_PER_GROUP_MAX} members already"
            )));
        }
        state.members.insert(replica_id, member.clone());
        if state.master.is_none() {
            state.master = Some(replica_id);
            state.master_epoch = next_epoch(state.master_epoch);
            state.in_sync = BTreeSet::from([replica_id]);
            state.in_sync_epoch = next_epoch(state.in_sync_epoch);
        }
        Ok(Applied::Joined)
    }

    fn alter_in_sync(
        &mut self,
        group: &str,
        master_id: u64,
        master_epoch: u32,
        in_sync: &BTreeSet<u64>,
    ) -> Result<Applied, Rejection> {
        let state = self
            .groups
            .get_mut(group)
            .ok_or_else(|| Rejection::Invalid(format!("unknown group {group}")))?;
        if state.master != Some(master_id) || state.master_epoch != master_epoch {
            return Err(Rejection::Fenced(format!(
                "replica {master_id} at epoch {master_epoch} is not the master of {group} \
                 (master {:?} at epoch {})",
                state.master, state.master_epoch
            )));
        }
        if !in_sync.contains(&master_id) {
            return Err(Rejection::Invalid(
                "the in-sync set must contain the master".into(),
            ));
        }
        if let Some(stranger) = in_sync.iter().find(|id| !state.members.contains_key(id)) {
            return Err(Rejection::Invalid(format!(
                "replica {stranger} is not a member of {group}"
            )));
        }
        if state.in_sync != *in_sync {
            state.in_sync.clone_from(in_sync);
            state.in_sync_epoch = next_epoch(state.in_sync_epoch);
        }
        Ok(Applied::InSyncEpoch(state.in_sync_epoch))
    }

    fn elect(
        &mut self,
        group: &str,
        master_epoch: u32,
        new_master: u64,
        old_master_allowed: bool,
    ) -> Result<Applied, Rejection> {
        let state = self
            .groups
            .get_mut(group)
            .ok_or_else(|| Rejection::Invalid(format!("unknown group {group}")))?;
        if state.master_epoch != master_epoch {
            return Err(Rejection::Fenced(format!(
                "election for epoch {master_epoch} of {group}, which is at {}",
                state.master_epoch
            )));
        }
        let old = state.master == Some(new_master) && !old_master_allowed;
        if old || !state.in_sync.contains(&new_master) {
            return Err(Rejection::Invalid(format!(
                "replica {new_master} is the old master or not in sync"
            )));
        }
        assert!(
            state.members.contains_key(&new_master),
            "invariant: in-sync replicas are members"
        );
        state.master = Some(new_master);
        state.master_epoch = next_epoch(state.master_epoch);
        state.in_sync = BTreeSet::from([new_master]);
        state.in_sync_epoch = next_epoch(state.in_sync_epoch);
        Ok(Applied::Elected(state.master_epoch))
    }
}

fn next_epoch(epoch: u32) -> u32 {
    epoch
        .checked_add(1)
        .expect("invariant: 4 billion elections do not happen")
}

/// The master of a renewed epoch (the master restarted): the in-sync
/// replica with the highest reported offset — the restarted master
/// included, and preferred on a tie — then the lowest id. Every in-sync
/// member must have reported (be in `alive`): the restarted master may have
/// lost a tail that only an unheard replica holds, so without all their
/// offsets there is no choice yet — `Err` names the members to wait for.
pub fn choose_renewed_master(
    state: &GroupState,
    alive: &BTreeMap<u64, Candidate>,
) -> Result<u64, Vec<u64>> {
    let unheard: Vec<u64> = state
        .in_sync
        .iter()
        .copied()
        .filter(|id| !alive.contains_key(id))
        .collect();
    if !unheard.is_empty() {
        return Err(unheard);
    }
    state
        .in_sync
        .iter()
        .filter_map(|id| alive.get(id).map(|c| (*id, c.max_offset)))
        .max_by_key(|(id, offset)| (*offset, Some(*id) == state.master, std::cmp::Reverse(*id)))
        .map(|(id, _)| id)
        .ok_or_else(Vec::new)
}

/// What the leader knows about a replica it heard from recently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The replica's reported CommitLog end.
    pub max_offset: u64,
}

/// The replica to elect when the master of `state` is gone: one in the
/// in-sync set, not the old master, alive (present in `alive`), with the
/// highest reported offset and then the lowest id. `None` when no replica
/// qualifies: the controller never elects outside the in-sync set.
pub fn choose_master(state: &GroupState, alive: &BTreeMap<u64, Candidate>) -> Option<u64> {
    state
        .in_sync
        .iter()
        .filter(|id| Some(**id) != state.master)
        .filter_map(|id| alive.get(id).map(|c| (*id, c.max_offset)))
        // Highest offset first, then lowest id: max by (offset, Reverse(id)).
        .max_by_key(|(id, offset)| (*offset, std::cmp::Reverse(*id)))
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u64) -> Member {
        Member {
            broker_addr: format!("b{n}:10911"),
            ha_addr: format!("b{n}:10912"),
        }
    }

    fn join(group: &str, id: u64) -> Command {
        Command::Join {
            group: group.into(),
            replica_id: id,
            member: member(id),
        }
    }

    /// Group `g` with members 1..=3, master 1 at epoch 1, in-sync `in_sync`.
    fn group_with_in_sync(in_sync: &[u64]) -> ControllerState {
        let mut state = ControllerState::default();
        for id in 1..=3 {
            state.apply(&join("g", id)).expect("joins");
        }
        state
            .apply(&Command::AlterInSync {
                group: "g".into(),
                master_id: 1,
                master_epoch: 1,
                in_sync: in_sync.iter().copied().collect(),
            })
            .expect("master alters");
        state
    }

    fn alive(entries: &[(u64, u64)]) -> BTreeMap<u64, Candidate> {
        entries
            .iter()
            .map(|(id, max_offset)| {
                (
                    *id,
                    Candidate {
                        max_offset: *max_offset,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn first_member_becomes_master_at_epoch_one_and_later_ones_do_not() {
        let mut state = ControllerState::default();
        assert_eq!(state.apply(&join("g", 7)), Ok(Applied::Joined));
        assert_eq!(state.apply(&join("g", 3)), Ok(Applied::Joined));
        let view = state.groups["g"].view("g");
        assert_eq!(view.master_id, Some(7));
        assert_eq!(view.master_epoch, 1);
        assert_eq!(view.master_addr.as_deref(), Some("b7:10911"));
        assert_eq!(view.in_sync, vec![7]);
        assert_eq!(view.in_sync_epoch, 1);
        assert_eq!(state.groups["g"].members.len(), 2);
    }

    #[test]
    fn alter_with_stale_epoch_or_non_master_is_fenced() {
        let mut state = group_with_in_sync(&[1, 2]);
        let old_epoch = Command::AlterInSync {
            group: "g".into(),
            master_id: 1,
            master_epoch: 0,
            in_sync: BTreeSet::from([1]),
        };
        assert!(matches!(state.apply(&old_epoch), Err(Rejection::Fenced(_))));
        let not_master = Command::AlterInSync {
            group: "g".into(),
            master_id: 2,
            master_epoch: 1,
            in_sync: BTreeSet::from([2]),
        };
        assert!(matches!(
            state.apply(&not_master),
            Err(Rejection::Fenced(_))
        ));
        assert_eq!(
            state.groups["g"].in_sync,
            BTreeSet::from([1, 2]),
            "unchanged"
        );
        assert_eq!(state.groups["g"].in_sync_epoch, 2);
    }

    #[test]
    fn alter_without_master_or_with_strangers_is_invalid() {
        let mut state = group_with_in_sync(&[1]);
        for bad in [vec![2], vec![1, 9]] {
            let command = Command::AlterInSync {
                group: "g".into(),
                master_id: 1,
                master_epoch: 1,
                in_sync: bad.into_iter().collect(),
            };
            assert!(matches!(state.apply(&command), Err(Rejection::Invalid(_))));
        }
        assert_eq!(state.groups["g"].in_sync, BTreeSet::from([1]));
    }

    #[test]
    fn elect_moves_epoch_and_shrinks_in_sync_to_new_master() {
        let mut state = group_with_in_sync(&[1, 2]);
        let elect = Command::Elect {
            group: "g".into(),
            master_epoch: 1,
            new_master: 2,
        };
        assert_eq!(state.apply(&elect), Ok(Applied::Elected(2)));
        let group = &state.groups["g"];
        assert_eq!(group.master, Some(2));
        assert_eq!(group.in_sync, BTreeSet::from([2]));
        assert_eq!(group.in_sync_epoch, 3);
        // The same election replayed (a duplicate proposal) is void.
        assert!(matches!(state.apply(&elect), Err(Rejection::Fenced(_))));
        assert_eq!(state.groups["g"].master_epoch, 2);
    }

    #[test]
    fn renew_may_keep_the_restarted_master_at_a_new_epoch() {
        let mut state = group_with_in_sync(&[1, 2]);
        let renew = Command::Renew {
            group: "g".into(),
            master_epoch: 1,
            new_master: 1,
        };
        assert_eq!(state.apply(&renew), Ok(Applied::Elected(2)));
        assert_eq!(state.groups["g"].master, Some(1));
        assert_eq!(state.groups["g"].in_sync, BTreeSet::from([1]));
        // Replayed, it is void; outside the in-sync set, refused.
        assert!(matches!(state.apply(&renew), Err(Rejection::Fenced(_))));
        let outsider = Command::Renew {
            group: "g".into(),
            master_epoch: 2,
            new_master: 3,
        };
        assert!(matches!(state.apply(&outsider), Err(Rejection::Invalid(_))));
    }

    #[test]
    fn renewal_goes_to_the_most_data_preferring_the_restarted_master_on_a_tie() {
        let state = group_with_in_sync(&[1, 2]);
        let group = &state.groups["g"];
        // The replica holds a tail the restarted master lost.
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 10), (2, 20)])),
            Ok(2)
        );
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 20), (2, 20)])),
            Ok(1)
        );
        // 3 is not in sync: never chosen.
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 5), (2, 4), (3, 50)])),
            Ok(1)
        );
    }

    #[test]
    fn renewal_waits_until_every_in_sync_member_reported() {
        let state = group_with_in_sync(&[1, 2, 3]);
        let group = &state.groups["g"];
        // Only the restarted master is heard: 2 or 3 may hold the tail it
        // lost, so nobody is chosen yet.
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 8192)])),
            Err(vec![2, 3])
        );
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 8192), (3, 8759)])),
            Err(vec![2])
        );
        assert_eq!(
            choose_renewed_master(group, &alive(&[(1, 8192), (2, 8759), (3, 8759)])),
            Ok(2)
        );
    }

    #[test]
    fn elect_of_replica_outside_in_sync_is_refused() {
        let mut state = group_with_in_sync(&[1, 2]);
        let elect = Command::Elect {
            group: "g".into(),
            master_epoch: 1,
            new_master: 3,
        };
        assert!(matches!(state.apply(&elect), Err(Rejection::Invalid(_))));
        assert_eq!(state.groups["g"].master, Some(1));
    }

    #[test]
    fn choice_is_only_from_in_sync_and_never_the_old_master() {
        let state = group_with_in_sync(&[1, 2]);
        // 3 has the highest offset but is not in sync; 1 is the old master.
        let choice = choose_master(&state.groups["g"], &alive(&[(1, 900), (2, 10), (3, 500)]));
        assert_eq!(choice, Some(2));
    }

    #[test]
    fn choice_prefers_highest_offset_then_lowest_id() {
        let state = group_with_in_sync(&[1, 2, 3]);
        let group = &state.groups["g"];
        assert_eq!(choose_master(group, &alive(&[(2, 10), (3, 20)])), Some(3));
        assert_eq!(choose_master(group, &alive(&[(2, 20), (3, 20)])), Some(2));
    }

    #[test]
    fn no_alive_in_sync_candidate_means_no_election() {
        let state = group_with_in_sync(&[1, 2]);
        let group = &state.groups["g"];
        assert_eq!(choose_master(group, &alive(&[(1, 5), (3, 5)])), None);
        assert_eq!(choose_master(group, &alive(&[])), None);
    }

    #[test]
    fn member_limit_is_enforced_before_growing() {
        let mut state = ControllerState::default();
        for id in 0..MEMBERS_PER_GROUP_MAX as u64 {
            state.apply(&join("g", id)).expect("within limit");
        }
        let over = join("g", 10_000);
        assert!(matches!(state.apply(&over), Err(Rejection::Invalid(_))));
        assert_eq!(state.groups["g"].members.len(), MEMBERS_PER_GROUP_MAX);
    }
}

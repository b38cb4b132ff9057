//! The bodies of the groups of partitions (`/v1/groups/{name}/...`,
//! docs/API.md "Groups", docs/PARTITIONS.md): a member joins, updates
//! itself, releases a partition and leaves with one transaction each; it
//! learns what it owns from the assignment long poll.
//!
//! A member is known by its session: its id is the session's lease id,
//! which the answers give both as a number (`session`, as everywhere in the
//! API) and as the 16 hex digits of its key (`id`).

use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// `POST /v1/groups/{name}/join` request: session `session` joins the
/// group (creating it when it does not exist yet), or, already a member,
/// replaces what it says about itself (every field it leaves out takes its
/// default again).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupJoinRequest {
    /// The member's session (from `POST /v1/sessions`): the member key is
    /// attached to it, and so is every partition it is granted.
    pub session: u64,
    /// The group's partition count, 1 to 10,000: required when the join
    /// creates the group; when the group exists, another count is refused
    /// (409) and the same count, or none, joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u64>,
    /// How long a member stays ready before it receives partitions, in
    /// milliseconds (default 2,000, at most 600,000): used when the join
    /// creates the group; when the group exists, another value is refused
    /// (409).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilise_ms: Option<u64>,
    /// The member's weight, 1 to 1,000 (default 1): members own partitions
    /// in proportion.
    #[serde(default = "one")]
    pub weight: u32,
    /// The member's zone, 1 to 64 bytes, if any: the members of a zone
    /// together own the zone's share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Whether it takes partitions (default true). A member that is not
    /// ready is asked to release what it owns.
    #[serde(default = "yes")]
    pub ready: bool,
    /// Partitions it would rather own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<u32>,
    /// Partitions it must never own (not all of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<u32>,
}

impl GroupJoinRequest {
    /// A request of `session` with every member field at its default.
    pub fn new(session: u64) -> Self {
        GroupJoinRequest {
            session,
            partitions: None,
            stabilise_ms: None,
            weight: 1,
            zone: None,
            ready: true,
            preferred: Vec::new(),
            excluded: Vec::new(),
        }
    }
}

/// `POST /v1/groups/{name}/leave` request: the member has stopped its work
/// on every partition it owns; its key and theirs are deleted at one
/// revision.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupLeaveRequest {
    /// The member's session.
    pub session: u64,
}

/// `POST /v1/groups/{name}/release` request: the member has stopped its
/// work on `partition`, granted to it at `epoch`; or, with `partitions`
/// instead, on each of those grants (released at one revision).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupReleaseRequest {
    /// The member's session.
    pub session: u64,
    /// The partition, when one is released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// The epoch of the grant it gives up (from the assignment): a grant
    /// of another epoch is not released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The grants given up, when several are (instead of `partition` and
    /// `epoch`): at most [`MAX_RELEASE_PARTITIONS`], each partition once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<ReleasedGrant>,
}

/// Most grants one release names (the server refuses more: each costs two
/// comparisons of the one transaction that releases them).
pub const MAX_RELEASE_PARTITIONS: usize = 63;

/// A grant given up, in a release of several.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReleasedGrant {
    /// The partition.
    pub partition: u32,
    /// The epoch of its grant.
    pub epoch: u64,
}

impl GroupReleaseRequest {
    /// A release of `session`'s grants, `(partition, epoch)` each: the
    /// one-partition form for one, `partitions` for more.
    pub fn new(session: u64, grants: &[(u32, u64)]) -> Self {
        match grants {
            [(partition, epoch)] => GroupReleaseRequest {
                session,
                partition: Some(*partition),
                epoch: Some(*epoch),
                partitions: Vec::new(),
            },
            _ => GroupReleaseRequest {
                session,
                partition: None,
                epoch: None,
                partitions: grants
                    .iter()
                    .map(|&(partition, epoch)| ReleasedGrant { partition, epoch })
                    .collect(),
            },
        }
    }

    /// The grants released, `(partition, epoch)` each, or why the request
    /// is malformed: `partition` and `epoch` go together, and either they
    /// or a non-empty `partitions`, not both (the server checks the
    /// count).
    pub fn grants(&self) -> Result<Vec<(u32, u64)>, String> {
        match (self.partition, self.epoch, self.partitions.is_empty()) {
            (Some(p), Some(e), true) => Ok(vec![(p, e)]),
            (None, None, false) => {
                Ok(self.partitions.iter().map(|g| (g.partition, g.epoch)).collect())
            }
            (None, None, true) => Err("the release names no partition".to_string()),
            (Some(_), None, true) => Err("`partition` needs its grant's `epoch`".to_string()),
            (None, Some(_), true) => Err("`epoch` needs its `partition`".to_string()),
            _ => Err("name one grant with `partition` and `epoch`, or several with `partitions`, not both"
                .to_string()),
        }
    }
}

/// The answer of a join, a leave and a release.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupWriteBody {
    /// The store's revision of the change.
    pub revision: u64,
}

/// A group's spec.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSpecBody {
    /// Its partition count: partitions 0 to `partitions - 1`.
    pub partitions: u32,
    /// How long a member stays ready before it receives partitions, in
    /// milliseconds.
    pub stabilise_ms: u64,
}

/// What a member says about itself (as its join gave it).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberSpecBody {
    /// Its weight.
    pub weight: u32,
    /// Its zone, or null.
    pub zone: Option<String>,
    /// Whether it takes partitions.
    pub ready: bool,
    /// The partitions it would rather own, ascending.
    pub preferred: Vec<u32>,
    /// The partitions it must never own, ascending.
    pub excluded: Vec<u32>,
}

/// A member of a group.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberBody {
    /// Its id: its session's lease id as 16 hex digits (as in its key).
    pub id: String,
    /// The same id as a number: its session.
    pub session: u64,
    /// What it says about itself.
    pub spec: GroupMemberSpecBody,
    /// When it joined: its key's `create_revision`.
    pub joined_revision: u64,
    /// How many partitions it owns now (those being released included).
    pub owned: usize,
}

/// The owner of a partition.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupOwnerBody {
    /// The partition.
    pub partition: u32,
    /// The owner's id, 16 hex digits.
    pub member: String,
    /// The owner's session.
    pub session: u64,
    /// The grant's epoch, its fencing token: the owner key's
    /// `create_revision`. Larger at every grant of the partition.
    pub epoch: u64,
    /// Whether the owner is asked to give it up (stop its work, then
    /// release it).
    pub release: bool,
}

/// `GET /v1/groups` success: a page of the groups, by name.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupListBody {
    /// The groups after `?after=NAME`, in the store's key order.
    pub groups: Vec<GroupListEntry>,
    /// Whether more follow (ask again with `after=` the last name).
    pub more: bool,
    /// The store's revision when it was read.
    pub revision: u64,
}

/// One group of a [`GroupListBody`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupListEntry {
    /// Its name.
    pub name: String,
    /// Its spec; `None` when the spec key does not parse (only a bug
    /// writes one).
    pub spec: Option<GroupSpecBody>,
    /// How many members it has.
    pub members: usize,
    /// How many of its partitions are owned.
    pub owned: usize,
}

/// `GET /v1/groups/{name}` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GroupBody {
    /// The group.
    pub name: String,
    /// Its spec.
    pub spec: GroupSpecBody,
    /// Its members by id, after `?after=ID`: a page of at most 4 MiB of
    /// JSON.
    pub members: Vec<GroupMemberBody>,
    /// Whether more members follow (ask again with `after=` the last id).
    pub more: bool,
    /// Every owned partition, by partition.
    pub owners: Vec<GroupOwnerBody>,
    /// Keys under the group's prefix that do not parse (only a bug or a
    /// hand-made store writes them; the keeper leaves them alone).
    pub unreadable: usize,
    /// The store's revision when it was read.
    pub revision: u64,
    /// What the leader measured of the group (docs/PARTITIONS.md,
    /// "Observing a group"): absent when no leader answered (then
    /// `stats_error` says why). A follower asks the leader for the whole
    /// answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<GroupStatsBody>,
    /// Why `stats` is absent: no leader known, the leader not reached, or
    /// the answering node not (yet) measuring as the leader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats_error: Option<String>,
}

/// What the leader measured of a group while it led (docs/PARTITIONS.md,
/// "Observing a group"). Its clocks start when it began to lead, or when
/// the group was created if later: a spell without an owner that began
/// under an earlier leader is counted from this leader's start.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct GroupStatsBody {
    /// The node that measured: the leader.
    pub node: u64,
    /// How long it has watched the group, in milliseconds.
    pub watched_ms: u64,
    /// Partitions granted to a member other than their previous owner while
    /// it watched (a partition's first grant, or one to the same member
    /// again, is no move).
    pub moves: u64,
    /// How far the ready members' counts are from their weighted shares:
    /// the largest `owned - share` less the smallest, where a member's share
    /// is the partitions the ready members own times its weight over their
    /// total weight. With equal weights, the largest count less the
    /// smallest; a balanced group reads below 2 (0 or 1 with equal
    /// weights). 0 without ready members.
    pub imbalance: f64,
    /// Partitions without an owner now.
    pub unowned: u32,
    /// Every partition that is without an owner now or was at some time
    /// while it watched, by partition (the others have had an owner all
    /// along).
    pub partitions: Vec<PartitionStatsBody>,
}

/// A partition's time without an owner, as the leader measured it: from
/// the first look that saw its owner key absent to the first that saw it
/// granted (the leader looks after every apply that changes the group).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStatsBody {
    /// The partition.
    pub partition: u32,
    /// How long it has been without an owner, in milliseconds, if it has
    /// none now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unowned_ms: Option<u64>,
    /// How long its last spell without an owner lasted, in milliseconds, if
    /// one ended (with a grant) while the leader watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unowned_ms: Option<u64>,
    /// Its time without an owner in all while the leader watched, the
    /// current spell included, in milliseconds.
    pub total_unowned_ms: u64,
    /// The spells without an owner that ended with a grant while the
    /// leader watched.
    pub spells: u32,
}

/// A partition the session owns, in an assignment.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedPartitionBody {
    /// The partition.
    pub partition: u32,
    /// The grant's epoch, its fencing token: tag the partition's writes
    /// with it, and name it in the release.
    pub epoch: u64,
    /// Whether the member is asked to give the partition up: stop its work
    /// on it, then release it.
    pub release: bool,
}

/// `GET /v1/groups/{name}/assignment` success.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct AssignmentBody {
    /// The group.
    pub name: String,
    /// The member's session.
    pub session: u64,
    /// The partitions it owns, ascending.
    pub owned: Vec<OwnedPartitionBody>,
    /// The store's revision when it was read: poll again with `after=` it
    /// to wait for the next change of the group.
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_names_one_grant_or_several_never_both() {
        let one: GroupReleaseRequest =
            serde_json::from_str(r#"{"session": 7, "partition": 3, "epoch": 40}"#).unwrap();
        assert_eq!(one, GroupReleaseRequest::new(7, &[(3, 40)]));
        assert_eq!(one.grants(), Ok(vec![(3, 40)]));
        let many: GroupReleaseRequest = serde_json::from_str(
            r#"{"session": 7, "partitions": [{"partition": 3, "epoch": 40}, {"partition": 4, "epoch": 41}]}"#,
        )
        .unwrap();
        assert_eq!(many, GroupReleaseRequest::new(7, &[(3, 40), (4, 41)]));
        assert_eq!(many.grants(), Ok(vec![(3, 40), (4, 41)]));
        for (body, why) in [
            (r#"{"session": 7}"#, "names no partition"),
            (r#"{"session": 7, "partitions": []}"#, "names no partition"),
            (r#"{"session": 7, "partition": 3}"#, "needs its grant's `epoch`"),
            (r#"{"session": 7, "epoch": 3}"#, "needs its `partition`"),
            (
                r#"{"session": 7, "partition": 3, "epoch": 4, "partitions": [{"partition": 5, "epoch": 6}]}"#,
                "not both",
            ),
        ] {
            let r: GroupReleaseRequest = serde_json::from_str(body).unwrap();
            let e = r.grants().unwrap_err();
            assert!(e.contains(why), "{body}: {e}");
        }
        // Each form round-trips, and a typo is refused.
        for r in [one, many] {
            let back: GroupReleaseRequest =
                serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(back, r);
        }
        let typo = serde_json::from_str::<GroupReleaseRequest>(
            r#"{"session": 7, "partitions": [{"partition": 3, "epoc": 40}]}"#,
        );
        assert!(typo.unwrap_err().to_string().contains("epoc"));
    }

    #[test]
    fn a_join_takes_the_member_defaults_and_refuses_unknown_fields() {
        let join: GroupJoinRequest = serde_json::from_str(r#"{"session": 7}"#).unwrap();
        assert_eq!(join, GroupJoinRequest::new(7));
        let back: GroupJoinRequest =
            serde_json::from_str(&serde_json::to_string(&join).unwrap()).unwrap();
        assert_eq!(back, join);
        let typo = serde_json::from_str::<GroupJoinRequest>(r#"{"session": 7, "stabilize_ms": 1}"#);
        assert!(typo.unwrap_err().to_string().contains("stabilize_ms"));
    }

    #[test]
    fn a_group_body_without_the_leaders_figures_reads_as_before() {
        let old = r#"{"name": "g", "spec": {"partitions": 2, "stabilise_ms": 0},
            "members": [], "more": false, "owners": [], "unreadable": 0, "revision": 5}"#;
        let body: GroupBody = serde_json::from_str(old).unwrap();
        assert_eq!((&body.stats, &body.stats_error), (&None, &None));
        let text = serde_json::to_string(&body).unwrap();
        assert!(!text.contains("stats"), "absent figures are left out: {text}");
        let p = PartitionStatsBody {
            partition: 1,
            unowned_ms: None,
            last_unowned_ms: Some(12),
            total_unowned_ms: 12,
            spells: 1,
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(
            text,
            r#"{"partition":1,"last_unowned_ms":12,"total_unowned_ms":12,"spells":1}"#
        );
    }
}

//! Names of the election's znodes and the order of its queue (pure functions).

use tenure_elect::SessionId;

/// The first part of every candidacy's name: `c-<session id as 16 hex>-`;
/// ZooKeeper appends the sequence number.
pub(crate) fn node_prefix(session: SessionId) -> String {
    format!("c-{:016x}-", session.0)
}

/// The election's directory under `root`.
pub(crate) fn election_dir(root: &str, election: &str) -> String {
    format!("{root}/{election}")
}

/// A child of the election's directory, as the queue sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Child {
    /// The znode's name (not its path).
    pub name: String,
    /// The session its name says it belongs to (proved only by `ephemeralOwner`).
    pub session: u64,
    /// The sequence number ZooKeeper appended.
    pub sequence: i64,
}

/// Parses `c-<16 hex>-<sequence>`; `None` for any other name.
pub(crate) fn parse_child(name: &str) -> Option<Child> {
    let rest = name.strip_prefix("c-")?;
    let (hex, sequence) = rest.split_once('-')?;
    if hex.len() != 16 || sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Child {
        name: name.to_string(),
        session: u64::from_str_radix(hex, 16).ok()?,
        sequence: sequence.parse().ok()?,
    })
}

/// The queue: the candidacies among `children`, first (the leader) first.
/// Names that are not candidacies are left out.
pub(crate) fn queue(children: &[String]) -> Vec<Child> {
    let mut q: Vec<Child> = children.iter().filter_map(|c| parse_child(c)).collect();
    q.sort_by_key(|c| c.sequence);
    q
}

/// The last part of a znode's path.
pub(crate) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_session_and_sort_by_sequence_not_by_name() {
        assert_eq!(node_prefix(SessionId(0x2a)), "c-000000000000002a-");
        let children = vec![
            "c-0000000000000001-0000000010".to_string(),
            "c-00000000000000ff-0000000002".to_string(),
            "lock".to_string(),
            "c-0000000000000003-0000000007".to_string(),
            "c-xyz-0000000001".to_string(),
            "c-0000000000000004-".to_string(),
        ];
        let q = queue(&children);
        let order: Vec<(u64, i64)> = q.iter().map(|c| (c.session, c.sequence)).collect();
        assert_eq!(order, vec![(0xff, 2), (3, 7), (1, 10)]);
        assert_eq!(q[0].name, "c-00000000000000ff-0000000002");
    }

    #[test]
    fn sequences_past_32_bits_parse() {
        let c = parse_child("c-0000000000000001-0000000004294967296").unwrap();
        assert_eq!(c.sequence, 1 << 32);
        assert_eq!(base_name("/tenure/elections/jobs/c-1"), "c-1");
        assert_eq!(election_dir("/r", "jobs"), "/r/jobs");
    }
}

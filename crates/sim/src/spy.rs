//! Spies that know a node is dead, and fail as real ones can.
//!
//! When a node crashes, something on its host often knows at once: its
//! supervisor (`waitpid`), systemd's `ExecStopPost`, the node's next
//! incarnation taking the data directory's lock. tenure's core takes such a
//! death notice ([`tenure_core::Protocol::handle_peer_dead`]) and the
//! survivors fail over without waiting for the election timeout.
//!
//! In the simulator a spy watches every crash ([`Spies::on_crash`]) and
//! reports it in one of the ways a real spy can ([`Report`]): on time
//! (within a millisecond), late (after a random delay, possibly after a new
//! leader was elected or after the node restarted), twice, or never. Each
//! report goes to every other node over the network model, on the links of
//! the dead node's host, where the spy runs: it is delayed per receiver,
//! lost or duplicated as those links say, and dropped by partitions.
//!
//! The receiver's driver gives a notice to the core only if it names the
//! dead node's current incarnation: a notice about incarnation `k` of a
//! node that has restarted since (incarnation `k + 1`) is dropped, as the
//! node's driver drops a notice whose incarnation is older than the one the
//! peer's handshake announced ([`Host::incarnation`](crate::host::Host)
//! counts restarts). So the core never hears that a live node is dead: the
//! trust assumption of the feature, which the simulator keeps.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Nanoseconds in a millisecond.
const MS: u64 = 1_000_000;

/// How a spy reports one crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Report {
    /// Within a millisecond of the crash.
    OnTime,
    /// After a random delay of up to [`MAX_LATE_TIMEOUTS`] election
    /// timeouts: often after the survivors elected a new leader, sometimes
    /// after the node restarted (the notice is then stale).
    Late,
    /// On time, and once more later (a spy that retries).
    Duplicated,
    /// Never (the spy died with the host, or was not configured).
    Lost,
}

impl Report {
    /// Every kind, in the order of [`SpySpec`]'s weights.
    pub const ALL: [Report; 4] = [Report::OnTime, Report::Late, Report::Duplicated, Report::Lost];

    /// Whether the survivors hear of the crash within a millisecond (plus
    /// the network's delay): the failover must then be fast.
    pub fn on_time(self) -> bool {
        matches!(self, Report::OnTime | Report::Duplicated)
    }
}

/// A late report comes at most this many election timeouts after the crash.
pub const MAX_LATE_TIMEOUTS: u64 = 3;

/// How spies report crashes: the relative weights of [`Report::ALL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpySpec {
    /// Weights of on time, late, duplicated and lost.
    pub weights: [u32; 4],
}

impl SpySpec {
    /// Every crash reported on time.
    pub const RELIABLE: SpySpec = SpySpec { weights: [1, 0, 0, 0] };
    /// Every way a spy can fail, each as likely as an on-time report.
    pub const FAULTY: SpySpec = SpySpec { weights: [1, 1, 1, 1] };
}

impl fmt::Display for SpySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SpySpec::RELIABLE => f.write_str("reliable"),
            SpySpec::FAULTY => f.write_str("faulty"),
            SpySpec { weights: [a, b, c, d] } => write!(f, "{a}:{b}:{c}:{d}"),
        }
    }
}

impl FromStr for SpySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reliable" => Ok(SpySpec::RELIABLE),
            "faulty" => Ok(SpySpec::FAULTY),
            _ => Err(format!(
                "unknown spies {s:?}: reliable (every crash reported on time) or faulty \
                 (on time, late, twice or never, equally likely)"
            )),
        }
    }
}

/// Which spies a run gets (`tenure sim --spies`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpyChoice {
    /// As the scenario decides: `spy` runs [`SpySpec::FAULTY`] spies,
    /// `random` runs them in half of the seeds ([`seeded`]), the others none.
    #[default]
    Default,
    /// No spies.
    Off,
    /// Spies reporting as the spec says.
    On(SpySpec),
}

impl SpyChoice {
    /// The spies of a run whose scenario would give it `default`.
    pub fn or(self, default: Option<SpySpec>) -> Option<SpySpec> {
        match self {
            SpyChoice::Default => default,
            SpyChoice::Off => None,
            SpyChoice::On(spec) => Some(spec),
        }
    }
}

impl fmt::Display for SpyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpyChoice::Default => f.write_str("default"),
            SpyChoice::Off => f.write_str("off"),
            SpyChoice::On(spec) => spec.fmt(f),
        }
    }
}

impl FromStr for SpyChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(SpyChoice::Off),
            "default" => Ok(SpyChoice::Default),
            _ => s.parse().map(SpyChoice::On).map_err(|e| format!("{e}, or off")),
        }
    }
}

/// Whether the `random` run of `seed` has spies by default: in half of the
/// seeds, drawn from the seed alone (not from the run's generator, whose
/// stream is then the same as without spies until the first crash).
pub fn seeded(seed: u64) -> bool {
    seed.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 63 == 1
}

/// What the spies did in a run (summed over runs in an aggregate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpyStats {
    /// Runs with spies.
    pub runs: u64,
    /// Crashes watched, by how they were reported: on time, late,
    /// duplicated, lost.
    pub on_time: u64,
    /// See `on_time`.
    pub late: u64,
    /// See `on_time`.
    pub duplicated: u64,
    /// See `on_time`.
    pub lost: u64,
    /// Notices that reached a node's driver.
    pub notices_arrived: u64,
    /// Notices given to a core (they named the dead node's current incarnation).
    pub notices_delivered: u64,
    /// Notices dropped by the driver: the node had restarted since.
    pub notices_stale: u64,
}

impl SpyStats {
    /// Adds another run's figures.
    pub fn add(&mut self, o: &SpyStats) {
        self.runs += o.runs;
        self.on_time += o.on_time;
        self.late += o.late;
        self.duplicated += o.duplicated;
        self.lost += o.lost;
        self.notices_arrived += o.notices_arrived;
        self.notices_delivered += o.notices_delivered;
        self.notices_stale += o.notices_stale;
    }

    fn count(&mut self, r: Report) {
        match r {
            Report::OnTime => self.on_time += 1,
            Report::Late => self.late += 1,
            Report::Duplicated => self.duplicated += 1,
            Report::Lost => self.lost += 1,
        }
    }
}

/// The spies of one run: how they report, their own random source (so that
/// a run without crashes draws exactly what it drew without spies), and
/// what they did.
#[derive(Clone, Debug)]
pub struct Spies {
    spec: SpySpec,
    rng: Pcg64Mcg,
    /// What the spies did so far.
    pub stats: SpyStats,
}

impl Spies {
    /// Spies reporting as `spec` says, drawing from `seed`.
    pub fn new(spec: SpySpec, seed: u64) -> Self {
        let stats = SpyStats { runs: 1, ..SpyStats::default() };
        Spies { spec, rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5B1E_5B1E_5B1E_5B1E), stats }
    }

    /// The random source of the notices' network delays.
    pub fn rng(&mut self) -> &mut Pcg64Mcg {
        &mut self.rng
    }

    /// A node crashed: how the spy reports it, and after how long (ns)
    /// each report leaves (none when lost). `election_timeout_ns` scales the
    /// late ones.
    pub fn on_crash(&mut self, election_timeout_ns: u64) -> (Report, Vec<u64>) {
        let total: u32 = self.spec.weights.iter().sum();
        let report = if total == 0 {
            Report::Lost
        } else {
            let mut pick = self.rng.gen_range(0..total);
            let mut chosen = Report::Lost;
            for (r, &w) in Report::ALL.iter().zip(&self.spec.weights) {
                if pick < w {
                    chosen = *r;
                    break;
                }
                pick -= w;
            }
            chosen
        };
        self.stats.count(report);
        let on_time = self.rng.gen_range(0..=MS);
        let late = self.rng.gen_range(MS..=MAX_LATE_TIMEOUTS * election_timeout_ns.max(MS));
        let after = match report {
            Report::OnTime => vec![on_time],
            Report::Late => vec![late],
            Report::Duplicated => vec![on_time, late],
            Report::Lost => Vec::new(),
        };
        (report, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_follow_the_weights_and_times() {
        let mut spies = Spies::new(SpySpec::FAULTY, 7);
        let t = 1_000 * MS;
        let mut seen = [0u32; 4];
        for _ in 0..400 {
            let (r, after) = spies.on_crash(t);
            seen[Report::ALL.iter().position(|&x| x == r).expect("a kind")] += 1;
            match r {
                Report::OnTime => assert!(after.len() == 1 && after[0] <= MS),
                Report::Late => assert!(after.len() == 1 && after[0] >= MS && after[0] <= 3 * t),
                Report::Duplicated => assert!(after.len() == 2 && after[0] <= MS),
                Report::Lost => assert!(after.is_empty()),
            }
        }
        assert!(seen.iter().all(|&n| n > 60), "every kind is drawn: {seen:?}");
        let s = spies.stats;
        assert_eq!(s.on_time + s.late + s.duplicated + s.lost, 400);
        let mut reliable = Spies::new(SpySpec::RELIABLE, 7);
        assert!((0..50).all(|_| reliable.on_crash(t).0 == Report::OnTime));
    }

    #[test]
    fn half_the_seeds_have_spies() {
        let with = (0..1000).filter(|&s| seeded(s)).count();
        assert!((400..600).contains(&with), "{with} of 1000");
    }

    #[test]
    fn specs_parse_and_print() {
        for s in ["off", "default", "reliable", "faulty"] {
            assert_eq!(s.parse::<SpyChoice>().expect("valid").to_string(), s);
        }
        assert!("on".parse::<SpyChoice>().unwrap_err().contains("or off"));
        for s in ["reliable", "faulty"] {
            assert_eq!(s.parse::<SpySpec>().expect("valid").to_string(), s);
        }
        let e = "often".parse::<SpySpec>().unwrap_err();
        assert!(e.contains("reliable") && e.contains("faulty"), "{e}");
    }
}

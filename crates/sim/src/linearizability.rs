//! A linearizability checker for recorded client histories: the Wing–Gong
//! search with memoisation of (linearized set, state), as in Lowe's
//! "Testing for linearizability" and Porcupine.
//!
//! A history is a list of operations, each with the global time its client
//! invoked it, the time the response arrived (none when the outcome is
//! unknown: a timeout, a crashed server, a leadership lost after the write
//! was accepted), its input and, when it returned, its output. The history is
//! linearizable if there is a total order of the operations that returned,
//! together with any subset of those that did not, that respects real time
//! (an operation that returned before another was invoked comes first) and in
//! which every operation, applied to the [`Model`] in turn, gives the output
//! it returned.
//!
//! The search walks a list of call and return events in time order. At each
//! point it may linearize any operation whose call comes before the first
//! return still in the list; reaching a return of an operation not yet
//! linearized means a dead end, and it backtracks. A cache of the pairs
//! (operations linearized, model state) already explored cuts repeated work.
//! An operation whose outcome is unknown has no return event: it may be
//! linearized at any point after its call, or never; linearizing one that
//! would leave the state unchanged is skipped (leaving it pending keeps every
//! option open). The search succeeds once no return events are left.
//!
//! The search is exponential in the worst case; [`check`] stops after a
//! bound of steps and reports [`Outcome::Undecided`], which callers must not
//! count as a pass.

use std::collections::HashSet;
use std::hash::Hash;

/// A sequential specification: what an operation may return from a state.
pub trait Model {
    /// The state of the object.
    type State: Clone + Eq + Hash;
    /// What an operation asks.
    type Input;
    /// What an operation returned.
    type Output;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Applies `input` to `state`: the next state if the operation could have
    /// returned `output` from `state`, `None` if not. With `output` `None`
    /// (the outcome is unknown) any output is allowed.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// Who invoked it (for reports).
    pub client: usize,
    /// When it was invoked (global time, ns).
    pub call: u64,
    /// When its response arrived, with the output; `None` when the outcome
    /// is unknown (it may or may not have taken effect).
    pub ret: Option<(u64, O)>,
    /// What it asked.
    pub input: I,
}

/// The verdict on one history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A linearization exists.
    Linearizable {
        /// Search steps taken.
        steps: u64,
    },
    /// No linearization exists.
    NotLinearizable {
        /// The most operations the search could linearize.
        longest_prefix: usize,
        /// The operation (index into the history) whose return the longest
        /// attempt could not get past.
        stuck_at: usize,
    },
    /// The step bound was reached before the search ended.
    Undecided {
        /// Search steps taken.
        steps: u64,
    },
}

/// A node of the event list: a call or a return of operation `op`.
#[derive(Clone, Copy, Debug)]
struct Node {
    op: usize,
    is_call: bool,
    /// For a call: the node of its return, if the operation returned.
    ret: Option<usize>,
    prev: usize,
    next: usize,
}

/// A set of operation indexes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// The doubly linked list of events, with a sentinel head at index 0.
struct Events {
    nodes: Vec<Node>,
    /// Return events still in the list.
    returns_left: usize,
}

const HEAD: usize = 0;
const END: usize = usize::MAX;

impl Events {
    fn new<I, O>(ops: &[Operation<I, O>]) -> Self {
        // (time, returns before calls at equal times, op) — a response that
        // arrives at the instant another operation is invoked precedes it.
        let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.call, true, i));
            if let Some((t, _)) = &op.ret {
                order.push((*t, false, i));
            }
        }
        order.sort_unstable();
        let mut nodes = Vec::with_capacity(order.len() + 1);
        nodes.push(Node { op: usize::MAX, is_call: false, ret: None, prev: END, next: END });
        let mut ret_node = vec![None; ops.len()];
        for (k, &(_, is_call, op)) in order.iter().enumerate() {
            let me = k + 1;
            if !is_call {
                ret_node[op] = Some(me);
            }
            nodes.push(Node { op, is_call, ret: None, prev: me - 1, next: END });
            nodes[me - 1].next = me;
        }
        for n in nodes.iter_mut().skip(1).filter(|n| n.is_call) {
            n.ret = ret_node[n.op];
        }
        let returns_left = ops.iter().filter(|o| o.ret.is_some()).count();
        Events { nodes, returns_left }
    }

    fn unlink(&mut self, k: usize) {
        let Node { prev, next, .. } = self.nodes[k];
        self.nodes[prev].next = next;
        if next != END {
            self.nodes[next].prev = prev;
        }
    }

    fn relink(&mut self, k: usize) {
        let Node { prev, next, .. } = self.nodes[k];
        self.nodes[prev].next = k;
        if next != END {
            self.nodes[next].prev = k;
        }
    }

    /// Removes a call and its return (if any) from the list.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        if let Some(r) = self.nodes[call].ret {
            self.unlink(r);
            self.returns_left -= 1;
        }
    }

    /// Puts back what [`Events::lift`] removed (in reverse order).
    fn unlift(&mut self, call: usize) {
        if let Some(r) = self.nodes[call].ret {
            self.relink(r);
            self.returns_left += 1;
        }
        self.relink(call);
    }
}

/// Checks whether `ops` is linearizable with respect to `model`, taking at
/// most `max_steps` search steps.
pub fn check<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    max_steps: u64,
) -> Outcome {
    let mut events = Events::new(ops);
    let mut state = model.init();
    let mut linearized = Bits::new(ops.len());
    let mut cache: HashSet<(Bits, M::State)> = HashSet::new();
    // (call node lifted, state before it)
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut entry = events.nodes[HEAD].next;
    let mut steps = 0u64;
    let mut longest = (0usize, usize::MAX);
    loop {
        if events.returns_left == 0 {
            return Outcome::Linearizable { steps };
        }
        steps += 1;
        if steps > max_steps {
            return Outcome::Undecided { steps };
        }
        // `entry` is never END here: while a return is left, walking the
        // list from the head meets it before the end.
        let node = events.nodes[entry];
        if node.is_call {
            let op = &ops[node.op];
            let output = op.ret.as_ref().map(|(_, o)| o);
            let next = model.step(&state, &op.input, output);
            let useful = match &next {
                Some(s) => output.is_some() || *s != state,
                None => false,
            };
            if let Some(s) = next.filter(|_| useful) {
                let mut lin = linearized.clone();
                lin.set(node.op);
                if cache.insert((lin.clone(), s.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, s)));
                    linearized = lin;
                    events.lift(entry);
                    entry = events.nodes[HEAD].next;
                    continue;
                }
            }
            entry = node.next;
        } else {
            // The return of an operation not linearized yet: backtrack.
            if stack.len() > longest.0 || longest.1 == usize::MAX {
                longest = (stack.len(), node.op);
            }
            let Some((call, before)) = stack.pop() else {
                return Outcome::NotLinearizable { longest_prefix: longest.0, stuck_at: longest.1 };
            };
            events.unlift(call);
            linearized.clear(events.nodes[call].op);
            state = before;
            entry = events.nodes[call].next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A register of small integers: writes and reads.
    struct Register;

    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Op {
        Write(u32),
        Read,
        /// Compare-and-set: from, to.
        Cas(u32, u32),
    }

    impl Model for Register {
        type State = u32;
        type Input = Op;
        type Output = u32;
        fn init(&self) -> u32 {
            0
        }
        fn step(&self, s: &u32, i: &Op, o: Option<&u32>) -> Option<u32> {
            match (i, o) {
                (Op::Write(v), _) => Some(*v),
                (Op::Read, Some(v)) => (v == s).then_some(*s),
                (Op::Read, None) => Some(*s),
                // Output 1: swapped; 0: not.
                (Op::Cas(from, to), Some(1)) => (s == from).then_some(*to),
                (Op::Cas(from, _), Some(_)) => (s != from).then_some(*s),
                (Op::Cas(from, to), None) => Some(if s == from { *to } else { *s }),
            }
        }
    }

    fn op(client: usize, call: u64, ret: Option<u64>, input: Op, out: u32) -> Operation<Op, u32> {
        Operation { client, call, ret: ret.map(|t| (t, out)), input }
    }

    fn verdict(ops: &[Operation<Op, u32>]) -> Outcome {
        check(&Register, ops, 1_000_000)
    }

    #[test]
    fn sequential_and_overlapping_histories_that_linearize() {
        // w1 | r1 sequential.
        assert!(matches!(
            verdict(&[op(0, 0, Some(10), Op::Write(1), 0), op(1, 20, Some(30), Op::Read, 1)]),
            Outcome::Linearizable { .. }
        ));
        // A read overlapping a write may see either value.
        for seen in [0, 1] {
            let h = [op(0, 0, Some(10), Op::Write(1), 0), op(1, 5, Some(15), Op::Read, seen)];
            assert!(matches!(verdict(&h), Outcome::Linearizable { .. }), "{seen}");
        }
        // Two overlapping reads see the write in opposite orders only if they
        // overlap each other too (here they do).
        let h = [
            op(0, 0, Some(100), Op::Write(1), 0),
            op(1, 10, Some(50), Op::Read, 1),
            op(2, 20, Some(60), Op::Read, 0),
        ];
        assert!(matches!(verdict(&h), Outcome::Linearizable { .. }));
    }

    #[test]
    fn a_stale_read_after_a_write_returned_is_caught() {
        let h = [op(0, 0, Some(10), Op::Write(1), 0), op(1, 20, Some(30), Op::Read, 0)];
        assert!(matches!(verdict(&h), Outcome::NotLinearizable { .. }));
        // New-then-old: once a read saw 1, a later read cannot see 0.
        let h = [
            op(0, 0, Some(100), Op::Write(1), 0),
            op(1, 10, Some(20), Op::Read, 1),
            op(2, 30, Some(40), Op::Read, 0),
        ];
        let Outcome::NotLinearizable { stuck_at, .. } = verdict(&h) else { panic!("caught") };
        assert_eq!(stuck_at, 2, "the old read cannot be placed");
    }

    #[test]
    fn unknown_outcomes_may_or_may_not_take_effect() {
        // The write timed out; a later read sees it: fine.
        let h = [op(0, 0, None, Op::Write(7), 0), op(1, 50, Some(60), Op::Read, 7)];
        assert!(matches!(verdict(&h), Outcome::Linearizable { .. }));
        // ... or does not see it: fine too.
        let h = [op(0, 0, None, Op::Write(7), 0), op(1, 50, Some(60), Op::Read, 0)];
        assert!(matches!(verdict(&h), Outcome::Linearizable { .. }));
        // But not both, in this order: once seen it stays.
        let h = [
            op(0, 0, None, Op::Write(7), 0),
            op(1, 50, Some(60), Op::Read, 7),
            op(1, 70, Some(80), Op::Read, 0),
        ];
        assert!(matches!(verdict(&h), Outcome::NotLinearizable { .. }));
        // An unknown write cannot take effect before it was invoked.
        let h = [op(1, 0, Some(10), Op::Read, 7), op(0, 20, None, Op::Write(7), 0)];
        assert!(matches!(verdict(&h), Outcome::NotLinearizable { .. }));
        // An unknown CAS that did swap explains a later read.
        let h = [
            op(0, 0, Some(5), Op::Write(1), 0),
            op(1, 10, None, Op::Cas(1, 2), 0),
            op(2, 100, Some(110), Op::Read, 2),
        ];
        assert!(matches!(verdict(&h), Outcome::Linearizable { .. }));
        // A failed CAS whose precondition held is not linearizable.
        let h = [op(0, 0, Some(5), Op::Write(1), 0), op(1, 10, Some(20), Op::Cas(1, 2), 0)];
        assert!(matches!(verdict(&h), Outcome::NotLinearizable { .. }));
    }

    #[test]
    fn lost_acknowledged_writes_are_caught() {
        // w1 acknowledged, then w2 acknowledged, then a read sees 1.
        let h = [
            op(0, 0, Some(10), Op::Write(1), 0),
            op(0, 20, Some(30), Op::Write(2), 0),
            op(1, 40, Some(50), Op::Read, 1),
        ];
        assert!(matches!(verdict(&h), Outcome::NotLinearizable { .. }));
    }

    #[test]
    fn the_step_bound_reports_undecided() {
        // Many concurrent unknown writes and a final read of a value nobody
        // wrote: the search must try every subset before it can say no.
        let mut h: Vec<_> =
            (1..=12).map(|v| op(v as usize, v, None, Op::Write(v as u32), 0)).collect();
        h.push(op(0, 1000, Some(1001), Op::Read, 99));
        assert!(matches!(check(&Register, &h, 50), Outcome::Undecided { steps: 51 }));
        // With room enough it is decided: the state cache keeps it small.
        assert!(matches!(check(&Register, &h, 10_000_000), Outcome::NotLinearizable { .. }));
    }

    #[test]
    fn many_sequential_operations_stay_cheap() {
        let mut h = Vec::new();
        for k in 0..2_000u64 {
            let t = k * 10;
            let input = if k % 2 == 0 { Op::Write(k as u32) } else { Op::Read };
            let out = if k % 2 == 0 { 0 } else { (k - 1) as u32 };
            h.push(op(0, t, Some(t + 5), input, out));
        }
        let Outcome::Linearizable { steps } = verdict(&h) else { panic!("linearizable") };
        assert!(steps < 10_000, "{steps}");
    }
}

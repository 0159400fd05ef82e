//! Dividing a whole number of replicas between clusters in proportion to weights: the Webster
//! (Sainte-Laguë) method Karmada's dispenser uses (`pkg/util/helper/webstermethod.go`,
//! `Dispenser.AllocateByWeight` in `pkg/util/helper/binding.go`).
//!
//! Karmada hands out seats one at a time to the party with the highest `votes / (2·seats + 1)`;
//! on equal priority the party with fewer seats wins, then the name decides, ascending or
//! descending depending on a hash of the resource's UID ([`TieBreak`]). The sum is always exact.
//! Example: 5 replicas with weights 1:2 give 2 and 3 (seats go to B, A, B, B, A).
//!
//! Handing out seats one by one costs O(replicas · log clusters), which a binding with two
//! billion replicas turns into minutes. The seat-by-seat order is a fixed ranking of every
//! (party, k-th seat) pair, so the result is simply the top `replicas` pairs: this module first
//! gives every party the seats whose priority lies strictly above a threshold found by binary
//! search (all of them are in the top set), then finishes seat by seat, which takes at most one
//! more seat per party. Priorities are compared exactly in integers (Karmada compares `float64`,
//! which can only differ for weights beyond 2^53).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// How equal-priority parties with equal seats are ordered, chosen per resource so that many
/// single-replica workloads do not all land on the alphabetically first cluster (Karmada's
/// `tieBreakerByUID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// The lexicographically smaller name wins.
    NameAscending,
    /// The lexicographically larger name wins.
    NameDescending,
}

impl TieBreak {
    /// Karmada's choice: FNV-1a (32 bit) of the UID; odd means descending. No UID means
    /// ascending.
    pub fn from_uid(uid: Option<&str>) -> Self {
        let Some(uid) = uid.filter(|u| !u.is_empty()) else {
            return Self::NameAscending;
        };
        let mut hash: u32 = 0x811c_9dc5;
        for byte in uid.bytes() {
            hash ^= u32::from(byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
        if hash & 1 == 1 {
            Self::NameDescending
        } else {
            Self::NameAscending
        }
    }
}

/// A party's claim to its next seat.
struct Claim<'a> {
    index: usize,
    name: &'a str,
    votes: u128,
    seats: u128,
    tie: TieBreak,
}

impl Claim<'_> {
    /// Karmada's `WebsterPriorityQueue.Less`, as an ordering where greater is served first.
    fn rank(&self, other: &Self) -> Ordering {
        let mine = self.votes * (2 * other.seats + 1);
        let theirs = other.votes * (2 * self.seats + 1);
        mine.cmp(&theirs)
            .then_with(|| other.seats.cmp(&self.seats))
            .then_with(|| match self.tie {
                TieBreak::NameAscending => other.name.cmp(self.name),
                TieBreak::NameDescending => self.name.cmp(other.name),
            })
    }
}

impl PartialEq for Claim<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.rank(other) == Ordering::Equal
    }
}
impl Eq for Claim<'_> {}
impl PartialOrd for Claim<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Claim<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank(other)
    }
}

/// Seats of a party with `shifted = votes · 2^64` whose priority is strictly above
/// `threshold / 2^64`: the number of k ≥ 0 with `shifted > threshold · (2k + 1)`.
fn seats_above(shifted: u128, threshold: u128) -> u128 {
    if shifted == 0 {
        return 0;
    }
    // Positive integers m with m · threshold < shifted, of which the odd ones count.
    let below = (shifted - 1) / threshold;
    below.div_ceil(2)
}

/// Divides `seats` between parties `(name, weight)` by the Webster method; returns the seats
/// of each party, in input order. Weights below 1 get nothing; when no weight is positive,
/// nobody gets anything (Karmada's dispenser returns early on a zero weight sum). Names should
/// be unique; they only break ties.
pub fn allocate(seats: i32, parties: &[(&str, i64)], tie: TieBreak) -> Vec<i32> {
    let mut result = vec![0i32; parties.len()];
    let Ok(total) = u128::try_from(seats) else {
        return result;
    };
    let votes: Vec<u128> = parties
        .iter()
        .map(|(_, w)| u128::try_from(*w).unwrap_or(0))
        .collect();
    let Some(max_votes) = votes.iter().copied().max().filter(|v| *v > 0) else {
        return result;
    };
    if total == 0 {
        return result;
    }

    // Smallest threshold whose strictly-higher seats number at most `total`.
    let count_above = |threshold: u128| -> u128 {
        votes.iter().fold(0u128, |sum, v| {
            sum.saturating_add(seats_above(v << 64, threshold))
        })
    };
    let (mut low, mut high) = (1u128, max_votes << 64);
    while low < high {
        let mid = low + (high - low) / 2;
        if count_above(mid) <= total {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    let mut given: Vec<u128> = votes.iter().map(|v| seats_above(v << 64, low)).collect();
    let mut remaining = total - given.iter().sum::<u128>();

    let mut queue: BinaryHeap<Claim<'_>> = parties
        .iter()
        .enumerate()
        .filter(|(i, _)| votes[*i] > 0)
        .map(|(index, (name, _))| Claim {
            index,
            name,
            votes: votes[index],
            seats: given[index],
            tie,
        })
        .collect();
    while remaining > 0 {
        let Some(mut claim) = queue.pop() else {
            break;
        };
        claim.seats += 1;
        given[claim.index] = claim.seats;
        remaining -= 1;
        queue.push(claim);
    }

    for (slot, seats) in result.iter_mut().zip(given) {
        *slot = i32::try_from(seats).unwrap_or(i32::MAX);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karmada's algorithm taken literally: one seat at a time to the best claim.
    fn seat_by_seat(seats: i32, parties: &[(&str, i64)], tie: TieBreak) -> Vec<i32> {
        let mut given = vec![0u128; parties.len()];
        if parties.iter().all(|(_, w)| *w <= 0) {
            return vec![0; parties.len()];
        }
        for _ in 0..seats.max(0) {
            let best = (0..parties.len()).filter(|i| parties[*i].1 > 0).max_by(|a, b| {
                let claim = |i: usize| Claim {
                    index: i,
                    name: parties[i].0,
                    votes: u128::try_from(parties[i].1).unwrap_or(0),
                    seats: given[i],
                    tie,
                };
                claim(*a).rank(&claim(*b))
            });
            if let Some(best) = best {
                given[best] += 1;
            }
        }
        given
            .into_iter()
            .map(|g| i32::try_from(g).unwrap_or(i32::MAX))
            .collect()
    }

    /// A small deterministic generator (SplitMix64) so the comparison covers many shapes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn documented_examples() {
        let t = TieBreak::NameAscending;
        assert_eq!(allocate(5, &[("a", 1), ("b", 2)], t), vec![2, 3]);
        assert_eq!(allocate(9, &[("a", 1), ("b", 2)], t), vec![3, 6]);
        assert_eq!(allocate(9, &[("a", 1), ("b", 3)], t), vec![2, 7]);
        assert_eq!(allocate(5, &[("a", 1), ("b", 1), ("c", 1)], t), vec![2, 2, 1]);
        assert_eq!(
            allocate(5, &[("a", 1), ("b", 1), ("c", 1)], TieBreak::NameDescending),
            vec![1, 2, 2]
        );
        assert_eq!(allocate(1, &[("a", 1), ("b", 1)], t), vec![1, 0]);
        assert_eq!(
            allocate(1, &[("a", 1), ("b", 1)], TieBreak::NameDescending),
            vec![0, 1]
        );
    }

    #[test]
    fn classic_sainte_lague_example() {
        // The textbook example (votes 100000, 80000, 30000, 20000), seats 1 to 8, which
        // Karmada's own tests also use.
        let parties = [("A", 100_000), ("B", 80_000), ("C", 30_000), ("D", 20_000)];
        let expected = [
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [2, 1, 0, 0],
            [2, 1, 1, 0],
            [2, 2, 1, 0],
            [2, 2, 1, 1],
            [3, 2, 1, 1],
            [3, 3, 1, 1],
        ];
        for (seats, want) in (1..).zip(expected) {
            assert_eq!(
                allocate(seats, &parties, TieBreak::NameAscending),
                want,
                "{seats} seats"
            );
        }
    }

    #[test]
    fn zero_negative_and_empty_inputs() {
        let t = TieBreak::NameAscending;
        assert_eq!(allocate(5, &[], t), Vec::<i32>::new());
        assert_eq!(allocate(5, &[("a", 0), ("b", 0)], t), vec![0, 0]);
        assert_eq!(allocate(5, &[("a", -3), ("b", 1)], t), vec![0, 5]);
        assert_eq!(allocate(0, &[("a", 1)], t), vec![0]);
        assert_eq!(allocate(-4, &[("a", 1)], t), vec![0]);
        assert_eq!(allocate(3, &[("a", 0), ("b", 2)], t), vec![0, 3]);
    }

    #[test]
    fn extreme_values_are_exact_and_fast() {
        let t = TieBreak::NameAscending;
        let got = allocate(i32::MAX, &[("a", i64::MAX), ("b", 1), ("c", i64::MAX / 3)], t);
        assert_eq!(
            got.iter().map(|s| i64::from(*s)).sum::<i64>(),
            i64::from(i32::MAX)
        );
        let got = allocate(i32::MAX, &[("a", 1), ("b", 1)], t);
        assert_eq!(got, vec![1_073_741_824, 1_073_741_823]);
        let got = allocate(2_000_000_000, &[("a", 1), ("b", 2), ("c", 7)], t);
        assert_eq!(got, vec![200_000_000, 400_000_000, 1_400_000_000]);
    }

    #[test]
    fn matches_seat_by_seat_allocation() {
        let mut rng = Rng(7);
        for case in 0..3000 {
            let n = 1 + rng.below(6) as usize;
            let names: Vec<String> = (0..n).map(|i| format!("m{}", (i * 7 + case) % 10)).collect();
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            let parties: Vec<(&str, i64)> = unique
                .iter()
                .map(|name| {
                    let w = match rng.below(10) {
                        0 => 0,
                        1 => 1_000_000_007,
                        _ => rng.below(12) as i64 + 1,
                    };
                    (name.as_str(), w)
                })
                .collect();
            let seats = rng.below(60) as i32;
            let tie = if rng.below(2) == 0 {
                TieBreak::NameAscending
            } else {
                TieBreak::NameDescending
            };
            assert_eq!(
                allocate(seats, &parties, tie),
                seat_by_seat(seats, &parties, tie),
                "seats {seats}, parties {parties:?}, {tie:?}"
            );
        }
    }

    #[test]
    fn tie_break_follows_the_uid_hash() {
        assert_eq!(TieBreak::from_uid(None), TieBreak::NameAscending);
        assert_eq!(TieBreak::from_uid(Some("")), TieBreak::NameAscending);
        // FNV-1a("a") = 0xe40c292c (even), FNV-1a("b") = 0xe70c2de5 (odd).
        assert_eq!(TieBreak::from_uid(Some("a")), TieBreak::NameAscending);
        assert_eq!(TieBreak::from_uid(Some("b")), TieBreak::NameDescending);
    }
}

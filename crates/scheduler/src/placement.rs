//! Selection: which of the feasible clusters the binding goes to, honouring spread constraints
//! (Karmada's `pkg/scheduler/core/spreadconstraint`).
//!
//! Every feasible cluster becomes a [`Candidate`] with Karmada's score and available replicas,
//! and candidates are ranked as Karmada ranks them (`sortClusters`): score descending, then
//! available replicas descending, then name. The score is Karmada's only non-zero in-tree score,
//! `ClusterLocality`: 100 for a cluster in the previous result, else 0. Without capacity
//! information a cluster can hold all replicas, so its available replicas are the binding's
//! replicas plus what it already holds (`i32::MAX` for kinds without replicas, as Karmada's
//! `calAvailableReplicas` does). Together: clusters that already hold the binding come first,
//! the fullest first, then the rest by name.
//!
//! Selection (`SelectBestClusters`):
//! - no spread constraints, or static-weighted division (which ignores them): every candidate;
//! - a topology constraint (region, zone, provider, label): groups are scored
//!   (`calcGroupScore`), the best feasible combination of groups is chosen (`selectGroups`),
//!   the best cluster of each chosen group is taken, and then the best remaining clusters of
//!   those groups up to the cluster constraint's `maxGroups`;
//! - only a cluster constraint: the best `maxGroups` candidates, at least `minGroups`.

use std::collections::BTreeMap;

use crate::cluster::ClusterView;
use crate::error::ScheduleError;
use crate::strategy::{Spread, SpreadBy, SpreadPlan};

/// Karmada's score of a cluster that already holds the binding (`ClusterLocality`).
pub(crate) const LOCALITY_SCORE: i64 = 100;
/// Karmada's `weightUnit`: group scores count replicas in thousands so that the average
/// cluster score (0..=100) only breaks ties.
const WEIGHT_UNIT: i64 = 1000;
/// How many steps the exhaustive search over combinations of groups may take. Real fleets need
/// a few hundred; past the limit selection falls back to a greedy choice (see
/// [`select_groups`]) instead of stalling the scheduler.
const MAX_GROUP_SEARCH_STEPS: usize = 1_000_000;

/// A feasible cluster with what selection and division know about it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate<'a> {
    /// The cluster.
    pub cluster: &'a ClusterView,
    /// `ClusterLocality` score.
    pub score: i64,
    /// Replicas the cluster could still take (Karmada's `AllocatableReplicas`).
    pub allocatable: i64,
    /// `allocatable` plus the replicas it holds now (Karmada's `AvailableReplicas`).
    pub available: i64,
}

impl Candidate<'_> {
    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.cluster.name
    }
}

/// Karmada's `sortClusters`: score descending, available replicas descending, name ascending.
pub(crate) fn rank(candidates: &mut [Candidate<'_>]) {
    candidates.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then(b.available.cmp(&a.available))
            .then_with(|| a.name().cmp(b.name()))
    });
}

/// What selection needs from the placement and binding.
pub(crate) struct SelectContext<'a> {
    /// Spread constraints with defaults applied.
    pub spread: &'a SpreadPlan,
    /// Whether spread constraints are ignored (static-weighted division).
    pub spread_ignored: bool,
    /// Whether replicas are duplicated (group scores and available replicas then count per
    /// cluster, not in total).
    pub duplicated: bool,
    /// The binding's replicas.
    pub replicas: i32,
}

/// The selected clusters, best first, from ranked candidates.
pub(crate) fn select<'a>(
    ranked: Vec<Candidate<'a>>,
    ctx: &SelectContext<'_>,
) -> Result<Vec<Candidate<'a>>, ScheduleError> {
    if ctx.spread.all.is_empty() || ctx.spread_ignored {
        return Ok(ranked);
    }
    // Karmada does not look at capacity when replicas are duplicated (`InvalidReplicas`).
    let need = (!ctx.duplicated).then_some(i64::from(ctx.replicas));
    match (&ctx.spread.topology, &ctx.spread.cluster) {
        (Some(topology), cluster) => select_by_topology(ranked, topology, cluster.as_ref(), ctx),
        (None, Some(cluster)) => select_by_cluster(ranked, cluster, need),
        (None, None) => Ok(ranked),
    }
}

fn select_by_cluster<'a>(
    ranked: Vec<Candidate<'a>>,
    constraint: &Spread,
    need: Option<i64>,
) -> Result<Vec<Candidate<'a>>, ScheduleError> {
    let total = ranked.len();
    if total < constraint.min {
        return Err(ScheduleError::unschedulable(format!(
            "failed to select clusters: the number of feasible clusters ({total}) is less than \
             spreadConstraint.MinGroups ({}) of the cluster spread constraint",
            constraint.min
        )));
    }
    let count = total.min(constraint.max);
    match need {
        None => Ok(ranked.into_iter().take(count).collect()),
        Some(need) => select_by_available(ranked, count, need).ok_or_else(|| {
            ScheduleError::unschedulable(format!(
                "failed to select clusters: {count} clusters cannot hold {need} replicas"
            ))
        }),
    }
}

/// Karmada's `selectClustersByAvailableResource`: the best `count` clusters, swapping the
/// weakest for the roomiest of the rest until together they can hold `need` replicas.
fn select_by_available<'a>(
    mut ranked: Vec<Candidate<'a>>,
    count: usize,
    need: i64,
) -> Option<Vec<Candidate<'a>>> {
    let holds = |chosen: &[Candidate<'_>]| chosen.iter().map(|c| c.available).sum::<i64>() >= need;
    let mut rest = ranked.split_off(count.min(ranked.len()));
    let mut chosen = ranked;
    let mut slot = chosen.len();
    while slot > 0 && !holds(&chosen) {
        slot -= 1;
        let mut best: Option<usize> = None;
        let mut best_available = chosen[slot].available;
        for (i, candidate) in rest.iter().enumerate() {
            if candidate.available > best_available {
                best = Some(i);
                best_available = candidate.available;
            }
        }
        if let Some(i) = best {
            std::mem::swap(&mut chosen[slot], &mut rest[i]);
        }
    }
    holds(&chosen).then_some(chosen)
}

/// The groups a cluster belongs to under a topology constraint.
fn group_keys(cluster: &ClusterView, by: &SpreadBy) -> Vec<String> {
    let single = |value: Option<&String>| value.filter(|v| !v.is_empty()).cloned().into_iter().collect();
    match by {
        SpreadBy::Region => single(cluster.region.as_ref()),
        SpreadBy::Provider => single(cluster.provider.as_ref()),
        SpreadBy::Zone => cluster.zones.iter().filter(|z| !z.is_empty()).cloned().collect(),
        SpreadBy::Label(key) => cluster.labels.get(key).cloned().into_iter().collect(),
        SpreadBy::Cluster => vec![cluster.name.clone()],
    }
}

fn select_by_topology<'a>(
    ranked: Vec<Candidate<'a>>,
    topology: &Spread,
    cluster_constraint: Option<&Spread>,
    ctx: &SelectContext<'_>,
) -> Result<Vec<Candidate<'a>>, ScheduleError> {
    let what = topology.by.describe();
    // Group members keep the ranked order, so a group's first member is its best cluster.
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, candidate) in ranked.iter().enumerate() {
        for key in group_keys(candidate.cluster, &topology.by) {
            let members = groups.entry(key).or_default();
            if !members.contains(&i) {
                members.push(i);
            }
        }
    }
    if groups.len() < topology.min {
        return Err(ScheduleError::unschedulable(format!(
            "failed to select clusters: the number of feasible {what} groups ({}) is less than \
             spreadConstraint.MinGroups ({}) of the {what} spread constraint",
            groups.len(),
            topology.min
        )));
    }
    let cluster_min = cluster_constraint.map_or(0, |c| c.min);
    let infos: Vec<GroupInfo> = groups
        .iter()
        .map(|(name, members)| {
            let members: Vec<Candidate<'_>> = members.iter().map(|i| ranked[*i]).collect();
            GroupInfo {
                name: name.clone(),
                value: members.len(),
                weight: group_score(&members, ctx, topology.min, cluster_min),
            }
        })
        .collect();
    let chosen = select_groups(infos, topology.min, topology.max, cluster_min).ok_or_else(|| {
        ScheduleError::unschedulable(format!(
            "failed to select clusters: no combination of {} to {} {what} groups has at least \
             {cluster_min} clusters (spreadConstraint.MinGroups of the cluster spread constraint)",
            topology.min,
            if topology.max == usize::MAX {
                "any number of".to_owned()
            } else {
                topology.max.to_string()
            },
        ))
    })?;

    let mut taken = vec![false; ranked.len()];
    let mut selected = Vec::new();
    let mut rest = Vec::new();
    for group in &chosen {
        let members = groups.get(group).map(Vec::as_slice).unwrap_or_default();
        if let Some(first) = members.iter().copied().find(|i| !taken[*i]) {
            taken[first] = true;
            selected.push(first);
        }
    }
    for group in &chosen {
        for i in groups.get(group).map(Vec::as_slice).unwrap_or_default() {
            if !taken[*i] {
                taken[*i] = true;
                rest.push(*i);
            }
        }
    }
    let cluster_max = cluster_constraint.map_or(usize::MAX, |c| c.max);
    let wanted = (selected.len() + rest.len()).min(cluster_max);
    // `rest` holds indices into the ranked list, so sorting them restores Karmada's ranking.
    rest.sort_unstable();
    let extra = wanted.saturating_sub(selected.len());
    selected.extend(rest.into_iter().take(extra));
    Ok(selected.into_iter().map(|i| ranked[i]).collect())
}

/// Karmada's `calcGroupScore` / `calcGroupScoreForDuplicate`: how well a group can hold the
/// binding, in thousands of replicas, plus the average cluster score to break ties.
fn group_score(
    members: &[Candidate<'_>],
    ctx: &SelectContext<'_>,
    group_min: usize,
    cluster_min: usize,
) -> i64 {
    let replicas = i64::from(ctx.replicas.max(0));
    if ctx.duplicated {
        let valid: Vec<&Candidate<'_>> = members.iter().filter(|c| c.available >= replicas).collect();
        let Ok(count) = i64::try_from(valid.len()) else {
            return i64::MAX;
        };
        if count == 0 {
            return 0;
        }
        let score_sum: i64 = valid.iter().map(|c| c.score).sum();
        return count
            .saturating_mul(WEIGHT_UNIT)
            .saturating_add(score_sum / count);
    }
    let group_min = i64::try_from(group_min.max(1)).unwrap_or(i64::MAX);
    let target = (replicas + group_min - 1) / group_min;
    let needed_clusters = cluster_min.max(usize::try_from(group_min).unwrap_or(usize::MAX));
    let (mut available, mut score_sum, mut counted) = (0i64, 0i64, 0usize);
    for member in members {
        available = available.saturating_add(member.available);
        score_sum += member.score;
        counted += 1;
        if counted >= needed_clusters && available >= target {
            break;
        }
    }
    if available < target {
        let size = i64::try_from(members.len().max(1)).unwrap_or(i64::MAX);
        return available
            .saturating_mul(WEIGHT_UNIT)
            .saturating_add(score_sum / size);
    }
    let counted = i64::try_from(counted.max(1)).unwrap_or(i64::MAX);
    target
        .saturating_mul(WEIGHT_UNIT)
        .saturating_add(score_sum / counted)
}

/// A group as group selection sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupInfo {
    /// Group name (region, zone, provider or label value).
    pub name: String,
    /// Number of clusters in the group.
    pub value: usize,
    /// Group score.
    pub weight: i64,
}

/// A feasible combination of groups (Karmada's `dfsPath`).
struct Path {
    /// Discovery order.
    id: usize,
    /// Group indices, sorted by weight descending, then name.
    groups: Vec<usize>,
    weight: i64,
    value: usize,
}

/// Karmada's `selectGroups`: every combination of `min..=max` groups that holds at least
/// `target` clusters, found depth-first over groups ordered by size ascending (then weight
/// descending, then name), a combination ending as soon as it is feasible; the best is the one
/// with the highest total weight, then the most clusters, then the first found, except that a
/// feasible prefix of the best (by weight order) is preferred over it. Returns the chosen
/// group names, heaviest first, or `None` when no combination is feasible.
///
/// The search is exponential in the number of groups (Karmada's too). When it would take more
/// than [`MAX_GROUP_SEARCH_STEPS`] steps, flotilla instead takes the heaviest groups (then the
/// biggest, then by name) until the constraints hold, or, if that cannot reach `target`
/// clusters, the biggest groups first.
pub(crate) fn select_groups(
    mut groups: Vec<GroupInfo>,
    min: usize,
    max: usize,
    target: usize,
) -> Option<Vec<String>> {
    if groups.is_empty() || min > max {
        return None;
    }
    groups.sort_by(|a, b| {
        a.value
            .cmp(&b.value)
            .then(b.weight.cmp(&a.weight))
            .then_with(|| a.name.cmp(&b.name))
    });
    let n = groups.len();
    let mut paths: Vec<Path> = Vec::new();
    let record = |chosen: &[usize], paths: &mut Vec<Path>| {
        let mut sorted = chosen.to_vec();
        sorted.sort_by(|a, b| {
            groups[*b]
                .weight
                .cmp(&groups[*a].weight)
                .then_with(|| groups[*a].name.cmp(&groups[*b].name))
        });
        paths.push(Path {
            id: paths.len(),
            weight: chosen
                .iter()
                .fold(0i64, |w, i| w.saturating_add(groups[*i].weight)),
            value: chosen.iter().map(|i| groups[*i].value).sum(),
            groups: sorted,
        });
    };

    if n == min {
        // Karmada's search stops backtracking when every group is needed: the only candidate
        // is all of them.
        let all: Vec<usize> = (0..n).collect();
        if groups.iter().map(|g| g.value).sum::<usize>() >= target {
            record(&all, &mut paths);
        }
    } else {
        // Iterative depth-first search; `next[d]` is the next group to try at depth d.
        let mut next: Vec<usize> = vec![0];
        let mut chosen: Vec<usize> = Vec::new();
        let mut sum = 0usize;
        let mut steps = 0usize;
        while let Some(top) = next.last_mut() {
            if *top >= n {
                next.pop();
                if let Some(i) = chosen.pop() {
                    sum -= groups[i].value;
                }
                continue;
            }
            let i = *top;
            *top += 1;
            steps += 1;
            if steps > MAX_GROUP_SEARCH_STEPS {
                return select_groups_greedily(groups, min, max, target);
            }
            chosen.push(i);
            sum += groups[i].value;
            let len = chosen.len();
            let feasible = sum >= target && len >= min && len <= max;
            if feasible {
                record(&chosen, &mut paths);
            }
            if feasible || len >= max {
                chosen.pop();
                sum -= groups[i].value;
                continue;
            }
            next.push(i + 1);
        }
    }

    if paths.is_empty() {
        return None;
    }
    paths.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then(b.value.cmp(&a.value))
            .then(a.id.cmp(&b.id))
    });
    let mut best = 0;
    for candidate in 1..paths.len() {
        let (shorter, longer) = (&paths[candidate].groups, &paths[best].groups);
        let is_prefix = shorter.len() < longer.len()
            && shorter
                .iter()
                .zip(longer)
                .all(|(a, b)| groups[*a].name == groups[*b].name);
        if is_prefix {
            best = candidate;
        }
    }
    Some(
        paths[best]
            .groups
            .iter()
            .map(|i| groups[*i].name.clone())
            .collect(),
    )
}

/// The fallback of [`select_groups`] for searches too large to finish.
fn select_groups_greedily(
    mut groups: Vec<GroupInfo>,
    min: usize,
    max: usize,
    target: usize,
) -> Option<Vec<String>> {
    let take = |groups: &[GroupInfo]| -> Option<Vec<String>> {
        let (mut chosen, mut sum) = (Vec::new(), 0usize);
        for group in groups {
            if chosen.len() >= max || (chosen.len() >= min && sum >= target) {
                break;
            }
            chosen.push(group);
            sum += group.value;
        }
        (chosen.len() >= min && sum >= target).then(|| {
            chosen.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
            chosen.into_iter().map(|g| g.name.clone()).collect()
        })
    };
    groups.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then(b.value.cmp(&a.value))
            .then_with(|| a.name.cmp(&b.name))
    });
    if let Some(chosen) = take(&groups) {
        return Some(chosen);
    }
    groups.sort_by(|a, b| {
        b.value
            .cmp(&a.value)
            .then(b.weight.cmp(&a.weight))
            .then_with(|| a.name.cmp(&b.name))
    });
    take(&groups)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn g(name: &str, value: usize, weight: i64) -> GroupInfo {
        GroupInfo {
            name: name.into(),
            value,
            weight,
        }
    }

    #[test]
    fn karmada_documented_group_search_example() {
        // Karmada's comment on findFeasiblePaths: target 7, groups of 2, 3, 6 and 7 clusters,
        // two groups exactly: [2,6] [2,7] [3,6] [3,7] [6,7] are feasible.
        let groups = vec![g("a", 2, 10), g("b", 3, 10), g("c", 6, 10), g("d", 7, 10)];
        assert_eq!(select_groups(groups.clone(), 2, 2, 7).unwrap(), vec!["c", "d"]);
        // With equal weights and any size, the most clusters among the heaviest wins, unless a
        // prefix of it is feasible too.
        let weighted = vec![g("a", 2, 50), g("b", 3, 40), g("c", 6, 10), g("d", 7, 5)];
        assert_eq!(select_groups(weighted, 1, 4, 7).unwrap(), vec!["a", "b", "c"]);
    }

    /// Groups, minGroups, maxGroups, target clusters, expected choice.
    type GroupCase = (Vec<GroupInfo>, usize, usize, usize, Option<Vec<&'static str>>);

    /// The scenarios of Karmada's `TestSelectGroups`, with the results Karmada expects.
    #[test]
    fn karmada_group_selection_scenarios() {
        let cases: Vec<GroupCase> = vec![
            (vec![], 2, 3, 1, None),
            (vec![g("R1", 1, 80)], 2, 3, 1, None),
            (vec![g("R1", 1, 80), g("R2", 2, 30)], 2, 3, 4, None),
            (vec![g("R1", 1, 80)], 1, 3, 1, Some(vec!["R1"])),
            (
                vec![
                    g("R1", 1, 80),
                    g("R3", 1, 80),
                    g("R2", 1, 60),
                    g("R5", 2, 60),
                    g("R4", 5, 50),
                    g("R6", 3, 50),
                ],
                1,
                3,
                10,
                Some(vec!["R5", "R4", "R6"]),
            ),
            (
                vec![
                    g("R1", 1, 80),
                    g("R2", 4, 40),
                    g("R3", 1, 30),
                    g("R4", 3, 30),
                    g("R5", 3, 20),
                    g("R6", 5, 10),
                ],
                2,
                6,
                5,
                Some(vec!["R1", "R2"]),
            ),
            (
                vec![
                    g("R1", 1, 60),
                    g("R2", 1, 50),
                    g("R3", 1, 40),
                    g("R4", 3, 30),
                    g("R5", 3, 20),
                    g("R6", 3, 10),
                ],
                1,
                3,
                6,
                Some(vec!["R1", "R4", "R5"]),
            ),
            (
                vec![g("R1", 1, 60), g("R2", 2, 50), g("R3", 3, 40), g("R4", 4, 30)],
                1,
                2,
                5,
                Some(vec!["R1", "R4"]),
            ),
            (
                vec![g("R4", 1, 60), g("R3", 3, 50), g("R1", 3, 40), g("R2", 4, 30)],
                1,
                2,
                5,
                Some(vec!["R3", "R1"]),
            ),
        ];
        for (groups, min, max, target, want) in cases {
            let want: Option<Vec<String>> = want.map(|w| w.into_iter().map(str::to_owned).collect());
            assert_eq!(
                select_groups(groups.clone(), min, max, target),
                want,
                "{groups:?}"
            );
        }
    }

    #[test]
    fn group_search_bounds() {
        let groups = vec![g("a", 1, 10), g("b", 1, 20), g("c", 1, 30)];
        assert_eq!(select_groups(groups.clone(), 1, 3, 1).unwrap(), vec!["c"]);
        assert_eq!(select_groups(groups.clone(), 2, 3, 1).unwrap(), vec!["c", "b"]);
        assert_eq!(
            select_groups(groups.clone(), 3, 3, 1).unwrap(),
            vec!["c", "b", "a"]
        );
        assert_eq!(select_groups(groups.clone(), 1, 3, 2).unwrap(), vec!["c", "b"]);
        assert_eq!(select_groups(groups.clone(), 1, 2, 3), None);
        assert_eq!(select_groups(groups.clone(), 3, 2, 1), None);
        assert_eq!(select_groups(Vec::new(), 1, 1, 0), None);
        assert_eq!(select_groups(groups, 3, 3, 4), None);
    }

    #[test]
    fn subpath_preference() {
        // Depth-first search (small groups first) finds [x, y] (weight 105, sorted y, x) and
        // [y] (weight 100). [y, x] is heaviest, but its prefix [y] is feasible on its own and
        // wins, so no group is used that is not needed.
        let groups = vec![g("x", 1, 5), g("y", 2, 100)];
        assert_eq!(select_groups(groups.clone(), 1, 2, 2).unwrap(), vec!["y"]);
        // Without a feasible prefix the heaviest combination stays.
        assert_eq!(select_groups(groups, 2, 2, 2).unwrap(), vec!["y", "x"]);
    }

    #[test]
    fn huge_searches_fall_back_to_a_greedy_choice() {
        // 60 single-cluster groups and at least 30 clusters: C(60, 30) combinations.
        let groups: Vec<GroupInfo> = (0..60)
            .map(|i| g(&format!("g{i:02}"), 1, if i % 2 == 0 { 20 } else { 10 }))
            .collect();
        let chosen = select_groups(groups.clone(), 25, 60, 30).unwrap();
        assert_eq!(chosen.len(), 30);
        assert!(
            chosen
                .iter()
                .all(|name| groups.iter().any(|g| &g.name == name && g.weight == 20))
        );
        assert_eq!(chosen.first().map(String::as_str), Some("g00"));
        // Heaviest groups too small to reach the target: the biggest groups are taken instead.
        let mut mixed: Vec<GroupInfo> = (0..40).map(|i| g(&format!("s{i:02}"), 1, 90)).collect();
        mixed.extend((0..40).map(|i| g(&format!("b{i:02}"), 3, 10)));
        let chosen = select_groups_greedily(mixed.clone(), 1, 10, 30).unwrap();
        assert_eq!(chosen.len(), 10);
        assert!(chosen.iter().all(|name| name.starts_with('b')));
        assert_eq!(select_groups_greedily(mixed, 1, 5, 30), None);
    }

    fn view(name: &str) -> ClusterView {
        ClusterView::new(name)
    }

    #[test]
    fn available_resource_swap() {
        // Karmada's example: need 2 clusters holding 80 replicas; member1 (40) and member2
        // (30) are best ranked but too small, so member3 (60) replaces member2.
        let (a, b, c) = (view("member1"), view("member2"), view("member3"));
        let cand = |cluster, available| Candidate {
            cluster,
            score: 0,
            allocatable: available,
            available,
        };
        let ranked = vec![cand(&a, 40), cand(&b, 30), cand(&c, 60)];
        let chosen = select_by_available(ranked.clone(), 2, 80).unwrap();
        let names: Vec<&str> = chosen.iter().map(Candidate::name).collect();
        assert_eq!(names, vec!["member1", "member3"]);
        assert!(select_by_available(ranked.clone(), 1, 80).is_none());
        assert_eq!(select_by_available(ranked, 3, 130).unwrap().len(), 3);
    }
}

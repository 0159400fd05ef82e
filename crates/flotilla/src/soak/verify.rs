//! The soak's checks: the storm's verdicts, the member outage probe, convergence of the
//! members to exactly the expected objects, the control plane's state (acknowledged writes,
//! orphan bindings and Works), lazy and suspended semantics, crashes and health.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use flotilla_api::well_known::{RESOURCE_BINDING_NAME_ANNOTATION, RESOURCE_BINDING_NAMESPACE_ANNOTATION};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};

use super::badinput::{Case, Target, Verdict, clear_rejection};
use super::{Check, LAZY, MAIN, Run, SUSPENDED, check};
use crate::bench::BenchError;
use crate::bench::arrivals::{Arrivals, Kind};
use crate::bench::install::{Installation, SERVICES};
use crate::bench::workload::{self, config_map_name, names, retriable};
use crate::up::CONTROL_PLANE;

/// Posts every case (retrying only while the control plane is unreachable or restarting) and
/// returns each case with what the API answered.
pub async fn storm(cp: Client, cases: Vec<Case>) -> Vec<(Case, Verdict)> {
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        let deadline = Instant::now() + Duration::from_secs(60);
        let verdict = loop {
            let request = http::Request::post(case.target.collection(super::BAD))
                .header("content-type", "application/json")
                .body(case.body.clone());
            let Ok(request) = request else {
                break Verdict::Rejected {
                    code: 0,
                    message: "the request could not be built".to_owned(),
                };
            };
            match cp.request_text(request).await {
                Ok(_) => break Verdict::Accepted,
                Err(kube::Error::Api(status))
                    if !retriable(&kube::Error::Api(status.clone())) || Instant::now() >= deadline =>
                {
                    break Verdict::Rejected {
                        code: status.code,
                        message: status.message.clone(),
                    };
                }
                Err(error) if Instant::now() >= deadline => {
                    break Verdict::Rejected {
                        code: 0,
                        message: error.to_string(),
                    };
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        out.push((case, verdict));
    }
    out
}

/// The storm's check: every case rejected with a client error and a message, or an accepted
/// policy flagged `Valid=False` with a message within `timeout`.
pub async fn storm_outcome(
    cp: &Client,
    namespace: &str,
    verdicts: &[(Case, Verdict)],
    timeout: Duration,
) -> Check {
    let mut codes: BTreeMap<u16, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut accepted_policies = BTreeSet::new();
    for (case, verdict) in verdicts {
        match verdict {
            Verdict::Rejected { code, message } if clear_rejection(*code, message) => {
                *codes.entry(*code).or_default() += 1;
            }
            Verdict::Rejected { code, message } => {
                failures.push(format!("{}: unclear rejection {code} {message:?}", case.label));
            }
            Verdict::Accepted if case.target == Target::Policy => {
                accepted_policies.insert(case.name.clone().unwrap_or_default());
            }
            Verdict::Accepted => failures.push(format!("{}: accepted by the API", case.label)),
        }
    }
    // Accepted policies must be flagged by the detector.
    let api = workload::policies(cp, namespace);
    let deadline = Instant::now() + timeout;
    let mut unflagged: BTreeSet<String> = accepted_policies.clone();
    let mut flagged_valid = Vec::new();
    while !unflagged.is_empty() && Instant::now() < deadline {
        if let Ok(list) = api.list(&ListParams::default()).await {
            for policy in list.items {
                let name = policy.metadata.name.clone().unwrap_or_default();
                let valid = policy.data["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Valid"))
                    .cloned();
                match valid {
                    Some(c)
                        if c["status"] == "False" && c["message"].as_str().is_some_and(|m| !m.is_empty()) =>
                    {
                        unflagged.remove(&name);
                    }
                    Some(c) if c["status"] == "True" && unflagged.contains(&name) => {
                        flagged_valid.push(name.clone());
                        unflagged.remove(&name);
                    }
                    _ => {}
                }
            }
        }
        if !unflagged.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    for (case, _) in verdicts {
        let name = case.name.clone().unwrap_or_default();
        if flagged_valid.contains(&name) {
            failures.push(format!("{}: accepted and reported Valid=True", case.label));
        } else if unflagged.contains(&name) && case.target == Target::Policy {
            failures.push(format!("{}: accepted but never flagged Valid=False", case.label));
        }
    }
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c}x{n}")).collect();
    let flagged = accepted_policies.len() - unflagged.len() - flagged_valid.len();
    let summary = format!(
        "{} invalid inputs: rejected by the API ({}), {flagged} policies flagged Valid=False",
        verdicts.len(),
        codes.join(", ")
    );
    if failures.is_empty() {
        check("bad input storm", true, summary)
    } else {
        let shown: Vec<&String> = failures.iter().take(5).collect();
        check(
            "bad input storm",
            false,
            format!(
                "{summary}; {} not handled: {}",
                failures.len(),
                shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
            ),
        )
    }
}

/// Deletes template `name` of the main workload (Deployment and ConfigMap), retrying while
/// the control plane is unavailable.
pub async fn delete_template(cp: &Client, namespace: &str, name: &str) -> Result<(), BenchError> {
    let deployments: Api<Deployment> = Api::namespaced(cp.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(cp.clone(), namespace);
    for attempt in 0..60 {
        let a = deployments
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ());
        let b = config_maps
            .delete(&config_map_name(name), &DeleteParams::default())
            .await
            .map(|_| ());
        let gone = |r: &Result<(), kube::Error>| match r {
            Ok(()) => true,
            Err(kube::Error::Api(s)) => s.code == 404,
            Err(_) => false,
        };
        if gone(&a) && gone(&b) {
            return Ok(());
        }
        if attempt == 59
            && let Err(source) = a.and(b)
        {
            return Err(BenchError::Kube {
                what: format!("delete template {namespace}/{name}"),
                source,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// Creates `count` templates in [`MAIN`] while a member is down and returns when they reached
/// every member in `others` (`None` if they did not within two minutes).
pub async fn outage_probe(
    cp: Client,
    arrivals: Arrivals,
    others: Vec<usize>,
    count: usize,
) -> Option<Instant> {
    let names = names("s-outage", count);
    workload::create_templates(&cp, MAIN, &names, true, 4, Duration::from_secs(60))
        .await
        .ok()?;
    let ready = arrivals
        .wait(Duration::from_secs(120), |v| {
            others.iter().all(|m| {
                names.iter().all(|n| {
                    v.present(*m, Kind::Deployment, MAIN, n)
                        && v.present(*m, Kind::ConfigMap, MAIN, &config_map_name(n))
                })
            })
        })
        .await;
    ready.then(Instant::now)
}

/// Waits until every member holds exactly the expected Deployments and ConfigMaps of the main
/// workload.
pub(crate) async fn converged(run: &Run<'_>, expected: &[String]) -> Check {
    let deployments: BTreeSet<String> = expected.iter().cloned().collect();
    let config_maps: BTreeSet<String> = expected.iter().map(|n| config_map_name(n)).collect();
    let members = run.members.len();
    let started = Instant::now();
    let done = run
        .arrivals
        .wait(run.options.converge_timeout, |v| {
            (0..members).all(|m| {
                v.names(m, Kind::Deployment, MAIN) == deployments
                    && v.names(m, Kind::ConfigMap, MAIN) == config_maps
            })
        })
        .await;
    // Confirm with fresh lists (not only the watches).
    let mut differences = Vec::new();
    for (m, client) in run.members.iter().enumerate() {
        let d: Api<Deployment> = Api::namespaced(client.clone(), MAIN);
        let c: Api<ConfigMap> = Api::namespaced(client.clone(), MAIN);
        let listed = |names: Vec<Option<String>>| -> BTreeSet<String> {
            names
                .into_iter()
                .flatten()
                .filter(|n| n.starts_with("s-"))
                .collect()
        };
        match (
            d.list(&ListParams::default()).await,
            c.list(&ListParams::default()).await,
        ) {
            (Ok(dl), Ok(cl)) => {
                let have_d = listed(dl.items.into_iter().map(|o| o.metadata.name).collect());
                let have_c = listed(cl.items.into_iter().map(|o| o.metadata.name).collect());
                let missing =
                    deployments.difference(&have_d).count() + config_maps.difference(&have_c).count();
                let extra = have_d.difference(&deployments).count() + have_c.difference(&config_maps).count();
                if missing + extra > 0 {
                    differences.push(format!(
                        "{}: {missing} missing, {extra} unexpected",
                        run.member_names[m]
                    ));
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                differences.push(format!("{}: cannot list: {e}", run.member_names[m]))
            }
        }
    }
    let passed = done && differences.is_empty();
    check(
        "convergence",
        passed,
        if passed {
            format!(
                "every member holds exactly the {} expected Deployments and ConfigMaps ({} members, converged {:.1}s after the faults)",
                expected.len(),
                members,
                started.elapsed().as_secs_f64()
            )
        } else {
            format!(
                "not converged within {:?}: {}",
                run.options.converge_timeout,
                differences.join("; ")
            )
        },
    )
}

/// Acknowledged writes kept, and no orphan bindings or Works, on the control plane.
pub async fn control_plane_state(
    cp: &Client,
    expected: &[String],
    deleted: &[String],
    members: usize,
) -> Result<Vec<Check>, BenchError> {
    let kube_error = |what: &str| {
        let what = what.to_owned();
        move |source| BenchError::Kube { what, source }
    };
    let deployments: BTreeSet<String> = Api::<Deployment>::namespaced(cp.clone(), MAIN)
        .list(&ListParams::default())
        .await
        .map_err(kube_error("list Deployments of the main workload"))?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let config_maps: BTreeSet<String> = Api::<ConfigMap>::namespaced(cp.clone(), MAIN)
        .list(&ListParams::default())
        .await
        .map_err(kube_error("list ConfigMaps of the main workload"))?
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let lost: Vec<&String> = expected.iter().filter(|n| !deployments.contains(*n)).collect();
    let resurrected: Vec<&String> = deleted.iter().filter(|n| deployments.contains(*n)).collect();
    let mut checks = vec![check(
        "acknowledged writes",
        lost.is_empty() && resurrected.is_empty(),
        format!(
            "{} acknowledged templates on the control plane after its kill -9: {} lost, {} deleted ones back",
            expected.len(),
            lost.len(),
            resurrected.len()
        ),
    )];

    // Bindings: each names an existing template; every live template has one.
    let bindings = workload::bindings(cp, Some(MAIN))
        .list(&ListParams::default())
        .await
        .map_err(kube_error("list ResourceBindings of the main workload"))?
        .items;
    let mut orphans = Vec::new();
    let mut bound = BTreeSet::new();
    for binding in &bindings {
        let name = binding.metadata.name.clone().unwrap_or_default();
        let resource = &binding.data["spec"]["resource"];
        let template = resource["name"].as_str().unwrap_or_default().to_owned();
        let exists = match resource["kind"].as_str() {
            Some("Deployment") => deployments.contains(&template),
            Some("ConfigMap") => config_maps.contains(&template),
            _ => true,
        };
        if !exists {
            orphans.push(format!("binding {name}"));
        }
        bound.insert(name);
    }
    let unbound: Vec<&String> = expected
        .iter()
        .filter(|n| !bound.contains(&format!("{n}-deployment")))
        .collect();
    // Works: each names an existing binding; one per member for each Deployment binding.
    let binding_names: BTreeSet<String> = bindings.iter().filter_map(|b| b.metadata.name.clone()).collect();
    let works = workload::works(cp)
        .list(&ListParams::default())
        .await
        .map_err(kube_error("list Works"))?
        .items;
    let mut per_binding: BTreeMap<String, usize> = BTreeMap::new();
    for work in &works {
        let annotations = work.metadata.annotations.clone().unwrap_or_default();
        if annotations
            .get(RESOURCE_BINDING_NAMESPACE_ANNOTATION)
            .map(String::as_str)
            != Some(MAIN)
        {
            continue;
        }
        let binding = annotations
            .get(RESOURCE_BINDING_NAME_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        if !binding_names.contains(&binding) {
            orphans.push(format!(
                "Work {}/{}",
                work.metadata.namespace.clone().unwrap_or_default(),
                work.metadata.name.clone().unwrap_or_default()
            ));
        }
        *per_binding.entry(binding).or_default() += 1;
    }
    let wrong_count: Vec<String> = expected
        .iter()
        .map(|n| format!("{n}-deployment"))
        .filter(|b| per_binding.get(b).copied().unwrap_or(0) != members)
        .collect();
    let passed = orphans.is_empty() && unbound.is_empty() && wrong_count.is_empty();
    checks.push(check(
        "no orphans",
        passed,
        if passed {
            format!(
                "{} bindings and {} Works of the workload, each with its template/binding; one Work per member per Deployment",
                bindings.len(),
                per_binding.values().sum::<usize>()
            )
        } else {
            format!(
                "orphans: {:?}; templates without a binding: {}; bindings without exactly {members} Works: {}",
                orphans.iter().take(5).collect::<Vec<_>>(),
                unbound.len(),
                wrong_count.len()
            )
        },
    ));
    Ok(checks)
}

/// The Lazy policy's change wrote nothing: its templates stay in member1 only.
pub fn lazy_held(arrivals: &Arrivals, lazy: &[String], members: usize, writes_before: u64) -> Check {
    let (in_first, elsewhere, writes) = arrivals.with(|v| {
        let in_first = lazy
            .iter()
            .filter(|n| v.present(0, Kind::Deployment, LAZY, n))
            .count();
        let elsewhere: usize = (1..members).map(|m| v.count(m, Kind::Deployment, LAZY)).sum();
        let writes: u64 = (0..members).map(|m| v.writes(m, LAZY).total()).sum();
        (in_first, elsewhere, writes)
    });
    let new_writes = writes.saturating_sub(writes_before);
    check(
        "lazy activation",
        in_first == lazy.len() && elsewhere == 0 && new_writes == 0,
        format!(
            "placement moved member1 -> member2 during the faults: {in_first}/{} still in member1, {elsewhere} elsewhere, {new_writes} member writes",
            lazy.len()
        ),
    )
}

/// The suspended policy's templates never reached a member.
pub fn suspended_held(arrivals: &Arrivals, members: usize) -> Check {
    let seen: usize = arrivals.with(|v| {
        (0..members)
            .map(|m| v.count(m, Kind::Deployment, SUSPENDED))
            .sum()
    });
    check(
        "suspended dispatching",
        seen == 0,
        format!("{seen} member objects of the suspended policy's templates (expected 0)"),
    )
}

/// No child exited except by the soak's own kills.
pub fn exits(installation: &Installation, kills: &BTreeMap<String, u32>) -> Check {
    let exits = installation.exits();
    let mut unexpected = Vec::new();
    for (name, count) in &exits {
        let caused = if name == CONTROL_PLANE {
            1
        } else {
            kills.get(name).copied().unwrap_or(0)
        };
        if *count > caused {
            unexpected.push(format!("{name} exited {} time(s) on its own", count - caused));
        }
    }
    check(
        "no crashes",
        unexpected.is_empty(),
        if unexpected.is_empty() {
            "no child exited except when killed".to_owned()
        } else {
            unexpected.join("; ")
        },
    )
}

/// Every service answers `/readyz` and the gRPC health check.
pub async fn healthy(installation: &Installation) -> Check {
    let mut problems = Vec::new();
    for service in SERVICES {
        let ready = match installation.metrics_address(service) {
            Some(address) => crate::probe::service_ready(&address).await,
            None => false,
        };
        if !ready {
            problems.push(format!("{service} /readyz is not 200"));
        }
        if let Some(address) = installation.grpc_address(service)
            && let Err(error) = super::grpc::serving(&address).await
        {
            problems.push(format!("{service} gRPC health: {error}"));
        }
    }
    check(
        "services healthy",
        problems.is_empty(),
        if problems.is_empty() {
            "all four services ready (/readyz 200, gRPC health SERVING)".to_owned()
        } else {
            problems.join("; ")
        },
    )
}

//! What execution keeps of a Work in its watch cache: everything but the manifests, which are
//! replaced by their hashes.
//!
//! The manifests are most of a Work's size, and execution's cache of every Work was the largest
//! memory of the services (306 MiB of 525 MiB with 20,000 Works). Nothing reads them from the
//! cache: the per-cluster workers apply a Work they read from the API, and the binding
//! controller and status aggregation only compare manifests, which hashes do as well.
//!
//! The hashes ([`manifest_hash`] of each manifest, in order) are kept in the cached object's
//! [`CACHED_MANIFEST_HASHES`] annotation, which exists only in this process: cached Works are
//! never written back to the API.

use flotilla_api::Work;

use crate::manifest::manifest_hash;

/// Annotation of a cached Work (never stored in the API): the comma-separated
/// [`manifest_hash`]es of the manifests it had.
pub const CACHED_MANIFEST_HASHES: &str = "flotilla.io/cached-manifest-hashes";

/// Replaces `work`'s manifests by their hashes (see the module docs).
pub fn slim(work: &mut Work) {
    let manifests = std::mem::take(&mut work.spec.workload.manifests);
    let hashes: Vec<String> = manifests.iter().map(manifest_hash).collect();
    work.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CACHED_MANIFEST_HASHES.to_owned(), hashes.join(","));
}

/// The [`manifest_hash`]es of `work`'s manifests, in order: from the cached annotation of a
/// slimmed Work, else computed.
pub fn manifest_hashes(work: &Work) -> Vec<String> {
    match work
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CACHED_MANIFEST_HASHES))
    {
        Some(text) if text.is_empty() => Vec::new(),
        Some(text) => text.split(',').map(str::to_owned).collect(),
        None => work.spec.workload.manifests.iter().map(manifest_hash).collect(),
    }
}

/// Whether `work` (slimmed or not) has exactly `manifests`.
pub fn has_manifests(work: &Work, manifests: &[serde_json::Value]) -> bool {
    let hashes = manifest_hashes(work);
    hashes.len() == manifests.len() && hashes.iter().zip(manifests).all(|(h, m)| *h == manifest_hash(m))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use flotilla_api::work::{WorkSpec, WorkloadTemplate};
    use serde_json::json;

    use super::*;

    fn work(manifests: Vec<serde_json::Value>) -> Work {
        Work::new(
            "w",
            WorkSpec {
                workload: WorkloadTemplate { manifests },
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_slimmed_work_compares_like_the_full_one() {
        let a =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
        let b = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}});
        let full = work(vec![a.clone(), b.clone()]);
        let mut slimmed = full.clone();
        slim(&mut slimmed);
        assert!(slimmed.spec.workload.manifests.is_empty());
        assert_eq!(manifest_hashes(&slimmed), manifest_hashes(&full));
        assert_eq!(manifest_hashes(&full), vec![manifest_hash(&a), manifest_hash(&b)]);
        for w in [&full, &slimmed] {
            assert!(has_manifests(w, &[a.clone(), b.clone()]));
            assert!(!has_manifests(w, &[b.clone(), a.clone()]), "order matters");
            assert!(!has_manifests(w, std::slice::from_ref(&a)));
            let changed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "w"}});
            assert!(!has_manifests(w, &[changed, b.clone()]));
        }
    }

    #[test]
    fn no_manifests_slim_to_no_hashes() {
        let mut empty = work(Vec::new());
        slim(&mut empty);
        assert!(manifest_hashes(&empty).is_empty());
        assert!(has_manifests(&empty, &[]));
        assert!(!has_manifests(&empty, &[json!({"kind": "ConfigMap"})]));
    }
}

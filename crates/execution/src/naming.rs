//! Names of the objects execution creates: Works of bindings and of propagated namespaces.
//!
//! The rules are a contract (`docs/architecture.md`, "Works and member objects"): a Work is
//! found again by name after a restart, so the name must be a pure function of the binding.

/// Longest object name the API accepts (DNS subdomain).
const MAX_NAME_LENGTH: usize = 253;

/// FNV-1a, 64 bits.
pub fn fnv1a_64(data: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in data {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The first 8 hex digits of FNV-1a 64 of `key`.
fn short_hash(key: &str) -> String {
    let full = format!("{:016x}", fnv1a_64(key.as_bytes()));
    full[..8].to_owned()
}

/// `<prefix>-<hash>`, with `prefix` cut so the whole fits 253 characters. A cut prefix never
/// ends in `-` or `.` (which would make the name invalid next to the separator).
fn with_hash(prefix: &str, hash: &str) -> String {
    let room = MAX_NAME_LENGTH - hash.len() - 1;
    let mut cut = prefix;
    if cut.len() > room {
        // Names are ASCII (DNS subdomains); stay on a char boundary anyway.
        let mut end = room;
        while !cut.is_char_boundary(end) {
            end -= 1;
        }
        cut = cut[..end].trim_end_matches(['-', '.']);
    }
    format!("{cut}-{hash}")
}

/// The name of the Work of binding `namespace/name` (namespace empty for a
/// ClusterResourceBinding): `<binding name>-<first 8 hex digits of FNV-1a 64 of
/// "<namespace>/<binding name>">`, the binding name cut to fit 253 characters. The same name is
/// used in every cluster's execution namespace.
pub fn work_name(namespace: &str, binding_name: &str) -> String {
    with_hash(binding_name, &short_hash(&format!("{namespace}/{binding_name}")))
}

/// The name of the Work that propagates control-plane namespace `namespace`:
/// `<namespace>-namespace-<hash>`, hashing `"namespace/<namespace>"` so it cannot be taken for
/// a binding's Work.
pub fn namespace_work_name(namespace: &str) -> String {
    with_hash(
        &format!("{namespace}-namespace"),
        &short_hash(&format!("namespace/{namespace}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_reference_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn work_names_hash_namespace_and_name() {
        let name = work_name("default", "nginx-deployment");
        let expected = format!("{:016x}", fnv1a_64(b"default/nginx-deployment"));
        assert_eq!(name, format!("nginx-deployment-{}", &expected[..8]));
        // Cluster-scoped bindings hash "/<name>".
        let cluster = work_name("", "admin-clusterrole");
        let expected = format!("{:016x}", fnv1a_64(b"/admin-clusterrole"));
        assert_eq!(cluster, format!("admin-clusterrole-{}", &expected[..8]));
    }

    #[test]
    fn same_binding_name_in_two_namespaces_gets_two_works() {
        assert_ne!(work_name("a", "web-deployment"), work_name("b", "web-deployment"));
    }

    #[test]
    fn long_names_are_cut_to_253_characters() {
        let long = "x".repeat(300);
        let name = work_name("default", &long);
        assert_eq!(name.len(), 253);
        assert!(name.starts_with("xxxx"));
        let with_dash = format!("{}-{}", "y".repeat(243), "z".repeat(50));
        let name = work_name("default", &with_dash);
        assert!(name.len() <= 253);
        assert!(!name.contains("--"), "{name}");
    }

    #[test]
    fn namespace_works_differ_from_binding_works() {
        let ns = namespace_work_name("team-a");
        assert!(ns.starts_with("team-a-namespace-"), "{ns}");
        assert_ne!(ns, work_name("", "team-a-namespace"));
    }
}

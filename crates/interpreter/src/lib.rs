//! # flotilla-interpreter
//!
//! Karmada's resource interpreter for flotilla: pure functions over resource templates and
//! member objects (`serde_json::Value` of any apiVersion and kind) that the services call.
//!
//! | function | caller | Karmada source (`pkg/resourceinterpreter/default/native/`) |
//! |---|---|---|
//! | [`replicas`] | detector: `spec.replicas` and `spec.replicaRequirements` of a binding | `replica.go` |
//! | [`revise_replicas`], [`divide_job_completions`], [`revise_job_completions`] | execution: one cluster's manifest under Divided scheduling | `revisereplica.go`, `controllers/binding/common.go` |
//! | [`dependencies`] | dependency distributor: what follows a workload with `propagateDeps` | `dependencies.go`, `util/helper/pod.go` |
//! | [`health`] | execution: `health` of Work manifest and binding aggregated statuses | `healthy.go` |
//! | [`reflect_status`] | execution: the status reflected into Work and binding status | `reflectstatus.go` |
//! | [`aggregate_status`] | execution: the template's status from its member objects | `aggregatestatus.go` |
//!
//! Nothing here does I/O or keeps state; every function is deterministic, so services can call
//! them again after a restart and get the same answer. Malformed input never panics: a field of
//! the wrong type is an [`InterpretError`] that names the object and the field
//! (`spec.template.spec.volumes: expected a list, got a string`), and a missing field simply
//! contributes nothing.
//!
//! Karmada's retain interpreter (`retain.go`) is not here: execution applies with server-side
//! apply, which leaves fields that member controllers own (a Service's `clusterIP`, a Pod's
//! `nodeName`) alone without per-kind rules.
//!
//! ## Declarative dependency rules
//!
//! [`dependencies`] knows the built-in workload kinds. For other kinds (CRDs), or to add
//! references to built-in kinds, give it [`DependencyRules`] loaded with
//! [`DependencyRules::from_yaml`]:
//!
//! ```yaml
//! apiVersion: flotilla.io/v1alpha1
//! kind: DependencyRules
//! rules:
//!   - apiVersion: example.io/v1          # the workload kind the rule applies to
//!     kind: Workflow
//!     podTemplatePaths: [".spec.template"] # optional: PodTemplateSpecs ({metadata, spec}) to read
//!                                          # with the built-in pod-template rules
//!     references:                          # optional: explicit references
//!       - apiVersion: v1
//!         kind: ConfigMap
//!         namePaths: [".spec.configRef.name", ".spec.steps[*].configMap"]
//!         namespacePath: ".spec.configRef.namespace" # optional
//!       - apiVersion: storage.k8s.io/v1
//!         kind: StorageClass
//!         namePaths: [".spec.storageClassName"]
//!         clusterScoped: true                        # optional: the referenced kind has no namespace
//! ```
//!
//! - Each rule names one workload kind by exact `apiVersion` and `kind`; two rules for the same
//!   kind are an error. A rule for a built-in kind adds to the built-in references.
//! - A rule needs `podTemplatePaths`, `references`, or both.
//! - Paths use a JSONPath subset: `.field` steps, `[*]` for every element of a list and `[N]` for
//!   one element. A path that reaches nothing (absent field, index past the end) gives no
//!   reference; a path that steps into a value of the wrong type is an [`InterpretError`].
//! - `namePaths` must reach strings. `namespacePath` must reach at most one value (no `[*]`); when
//!   it is absent or reaches nothing, references take the workload's namespace (a cluster-scoped
//!   workload referencing namespaced objects must therefore set it). `clusterScoped: true` gives
//!   references no namespace and cannot be combined with `namespacePath`.
//! - Unknown fields, empty `apiVersion`/`kind` and bad paths are errors; [`RulesError`] lists
//!   every problem with its field (`rules[1].references[0].namePaths[2]`) and how to fix it.
//!
//! ```
//! use flotilla_interpreter::{DependencyRules, dependencies};
//! use serde_json::json;
//!
//! let rules = DependencyRules::from_yaml(r#"
//! apiVersion: flotilla.io/v1alpha1
//! kind: DependencyRules
//! rules:
//!   - apiVersion: example.io/v1
//!     kind: Workflow
//!     references:
//!       - apiVersion: v1
//!         kind: ConfigMap
//!         namePaths: [".spec.steps[*].configMap"]
//! "#).unwrap();
//! let workflow = json!({
//!     "apiVersion": "example.io/v1", "kind": "Workflow",
//!     "metadata": {"namespace": "team-a", "name": "nightly"},
//!     "spec": {"steps": [{"configMap": "step-1"}, {"configMap": "step-2"}]},
//! });
//! let deps = dependencies(&workflow, &rules).unwrap();
//! assert_eq!(deps.len(), 2);
//! assert_eq!(deps[0].name, "step-1");
//! assert_eq!(deps[0].namespace.as_deref(), Some("team-a"));
//! ```

mod dependencies;
mod error;
mod health;
mod json_path;
mod kind;
mod node;
mod quantity;
mod replicas;
mod rules;
mod status;

pub use dependencies::{DependencyRef, dependencies};
pub use error::{InterpretError, RuleProblem, RulesError};
pub use health::{Health, awaits_controller, health, try_health};
pub use replicas::{ReplicaInfo, divide_job_completions, replicas, revise_job_completions, revise_replicas};
pub use rules::{DependencyRules, RULES_API_VERSION, RULES_KIND};
pub use status::{aggregate_status, reflect_status};

//! # flotilla-schema
//!
//! What kube-apiserver does with a CustomResourceDefinition's OpenAPI v3 schemas, as a pure
//! library, so `flotilla-apiserver` serves custom resources the way a real cluster does:
//!
//! - [`Schema::new`] accepts or rejects a CRD version's `openAPIV3Schema` with
//!   kube-apiserver's messages (structural schema rules, list/map type rules, defaults that
//!   must be pruned and valid);
//! - [`Schema::prune`] drops unknown fields and reports them for `fieldValidation`;
//! - [`Schema::apply_defaults`] fills `default`s;
//! - [`Schema::validate`] checks a custom resource with k8s.io/kube-openapi's validator
//!   semantics (types, formats, bounds, enums, `allOf`/`anyOf`/`oneOf`/`not`), embedded
//!   resources and `x-kubernetes-list-type` uniqueness, rendering [`FieldError`]s whose
//!   messages match kube-apiserver's byte for byte;
//! - [`Schema::list_type_at`] and [`Schema::props_at`] answer type questions for patching;
//! - [`jsonpath`] implements Kubernetes JSONPath (client-go `util/jsonpath`) and the
//!   printer-column cells of kube-apiserver's table convertor;
//! - [`objectmeta`] holds the `ObjectMeta` coercion and validation rules an API server also
//!   needs at the resource root.
//!
//! Sources of truth: k8s.io/apiextensions-apiserver (`pkg/apiserver/schema`,
//! `pkg/apiserver/validation`, `pkg/apis/apiextensions/validation`,
//! `pkg/registry/customresource`), k8s.io/kube-openapi (`pkg/validation`) and
//! k8s.io/client-go (`util/jsonpath`).
//!
//! Not implemented: CEL (`x-kubernetes-validations`) rules are accepted (their static shape
//! is checked) but never evaluated; [`Schema::has_cel_rules`] tells a caller so it can warn.
//! Validation ratcheting on update is not implemented (updates are validated like creates).
//!
//! Cost: every write of a custom resource runs these walks, so they allocate nothing on a valid
//! object. Paths are built only into an error, maps are walked in their own (sorted) order
//! without copying keys, and schema nodes record whether an embedded resource or a set/map list
//! is below them so the walks that look for those skip the rest (round 33 in
//! docs/benchmarks.md).

mod defaulting;
mod embedded;
mod error;
mod formats;
mod gofmt;
mod goregex;
pub mod jsonpath;
mod listtype;
mod node;
pub mod objectmeta;
mod prune;
mod schema;
mod structural;
mod time;
mod validate;

pub use error::{ErrorKind, FieldError};
pub use schema::{ListInfo, Schema};

//! Each overrider applied to one object, with Karmada's semantics (`pkg/util/overridemanager`):
//! every overrider is turned into JSON patch operations and applied with [`crate::patch`].
//!
//! | overrider | what it does |
//! |---|---|
//! | `imageOverrider` | without `predicate`: every `containers[*].image` of a Pod (`/spec`) or a ReplicaSet, Deployment, DaemonSet, StatefulSet or Job (`/spec/template/spec`), nothing for other kinds (init containers and CronJobs need a predicate); with `predicate.path`: that one image. Registry/Repository `add` appends the value, `replace` sets it, `remove` clears it; Tag `add` appends to the tag (or digest), `replace` sets a tag or a digest, `remove` clears it |
//! | `commandOverrider`, `argsOverrider` | the named container's `command`/`args` in the same kinds: `add` appends, `remove` drops every item equal to a value; a container without the field gets it |
//! | `labelsOverrider`, `annotationsOverrider` | `add` sets keys; `remove` and `replace` act only on keys that exist |
//! | `fieldOverrider` | JSON patch operations inside the JSON or YAML document a string field holds |
//! | `plaintext` | JSON patch operations on the whole object |
//!
//! Where Karmada's Go code would panic on a malformed object (a container that is not an
//! object, a `command` that is not a list), these return an error instead.

use flotilla_api::image_reference::ImageReference;
use flotilla_api::overrides::{
    CommandArgsOperator, CommandArgsOverrider, FieldOverrider, ImageComponent, ImageOverrider,
    LabelAnnotationOverrider, OverriderOperator, PlaintextOverrider, SubDocumentOperation,
};

use crate::doc::Doc;
use crate::patch::{Operation, apply, decode_token};
use crate::subdocument;

/// The kinds whose images, commands and args are found without a predicate, and where their
/// containers are.
fn containers_path(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Pod" => Some(&["spec", "containers"]),
        "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job" => {
            Some(&["spec", "template", "spec", "containers"])
        }
        _ => None,
    }
}

fn pointer(segments: &[&str]) -> String {
    segments.iter().map(|s| format!("/{s}")).collect()
}

/// The containers of `object` at `segments`: `Ok(None)` when absent (or null), an error when
/// something on the way is not what it should be.
fn containers<'a>(object: &'a Doc, segments: &[&str]) -> Result<Option<&'a [Doc]>, String> {
    let mut current = object;
    for (i, segment) in segments.iter().enumerate() {
        match current {
            Doc::Object(_) => match current.get(segment) {
                None | Some(Doc::Null) => return Ok(None),
                Some(next) => current = next,
            },
            other => {
                return Err(format!(
                    "{} is a {}, not an object",
                    pointer(&segments[..i]),
                    other.type_name()
                ));
            }
        }
    }
    match current {
        Doc::Array(items) => Ok(Some(items)),
        other => Err(format!(
            "{} is a {}, not a list",
            pointer(segments),
            other.type_name()
        )),
    }
}

fn kind_of(object: &Doc) -> &str {
    object.get("kind").and_then(Doc::as_str).unwrap_or_default()
}

/// Applies one image overrider.
pub fn image(object: &mut Doc, overrider: &ImageOverrider) -> Result<(), String> {
    let mut operations = Vec::new();
    match &overrider.predicate {
        Some(predicate) => {
            let current = predicate_image(object, &predicate.path).map_err(|e| {
                format!(
                    "cannot read the image at predicate path {:?}: {e}",
                    predicate.path
                )
            })?;
            if !predicate.path.starts_with('/') {
                return Err(format!("predicate path {:?} must start with /", predicate.path));
            }
            operations.push((
                predicate.path.clone(),
                Operation::Replace(Some(Doc::String(override_image(&current, overrider)?))),
            ));
        }
        None => {
            let Some(segments) = containers_path(kind_of(object)) else {
                return Ok(());
            };
            let Some(list) = containers(object, segments)? else {
                return Ok(());
            };
            for (i, container) in list.iter().enumerate() {
                let image = match container {
                    Doc::Object(_) => match container.get("image") {
                        None | Some(Doc::Null) => "",
                        Some(Doc::String(image)) => image.as_str(),
                        Some(other) => {
                            return Err(format!(
                                "{}/{i}/image is a {}, not a string",
                                pointer(segments),
                                other.type_name()
                            ));
                        }
                    },
                    other => {
                        return Err(format!(
                            "{}/{i} is a {}, not a container",
                            pointer(segments),
                            other.type_name()
                        ));
                    }
                };
                operations.push((
                    format!("{}/{i}/image", pointer(segments)),
                    Operation::Replace(Some(Doc::String(override_image(image, overrider)?))),
                ));
            }
        }
    }
    apply(object, &operations)
}

/// Karmada's `obtainImageValue`: walks `path` split on `/` (no `~` unescaping), taking the
/// segment after a list as its index, and reads the string at the end.
fn predicate_image(object: &Doc, path: &str) -> Result<String, String> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut current = object;
    let mut i = 0;
    while i + 1 < segments.len() {
        let segment = segments[i];
        match current.get(segment) {
            Some(next @ Doc::Object(_)) => current = next,
            Some(Doc::Array(items)) => {
                let index_text = segments[i + 1];
                let index: usize = index_text
                    .parse()
                    .map_err(|_| format!("{index_text:?} after {segment:?} is not a list index"))?;
                current = match items.get(index) {
                    Some(next @ Doc::Object(_)) => next,
                    Some(other) => {
                        return Err(format!(
                            "{segment}/{index} is a {}, not an object",
                            other.type_name()
                        ));
                    }
                    None => {
                        return Err(format!("{segment} has {} items, no index {index}", items.len()));
                    }
                };
                i += 1;
            }
            Some(other) => {
                return Err(format!(
                    "{segment:?} is a {}, not an object or a list",
                    other.type_name()
                ));
            }
            None => return Err(format!("{segment:?} does not exist")),
        }
        i += 1;
    }
    let last = segments.last().copied().unwrap_or_default();
    match current.get(last) {
        Some(Doc::String(image)) => Ok(image.clone()),
        Some(other) => Err(format!("{last:?} is a {}, not a string", other.type_name())),
        None => Err(format!("{last:?} does not exist")),
    }
}

/// Karmada's `overrideImage`: the image with one component changed.
pub fn override_image(current: &str, overrider: &ImageOverrider) -> Result<String, String> {
    let mut image = ImageReference::parse(current)
        .map_err(|e| format!("failed to parse image value({current}), error: {e}"))?;
    let value = overrider.value.as_str();
    match (&overrider.component, &overrider.operator) {
        (ImageComponent::Registry, OverriderOperator::Add) => image.registry.push_str(value),
        (ImageComponent::Registry, OverriderOperator::Replace) => image.registry = value.to_owned(),
        (ImageComponent::Registry, OverriderOperator::Remove) => image.registry.clear(),
        (ImageComponent::Repository, OverriderOperator::Add) => image.repository.push_str(value),
        (ImageComponent::Repository, OverriderOperator::Replace) => image.repository = value.to_owned(),
        (ImageComponent::Repository, OverriderOperator::Remove) => image.repository.clear(),
        (ImageComponent::Tag, OverriderOperator::Add) => {
            let appended = format!("{}{value}", image.tag_or_digest());
            image.set_tag_or_digest(&appended);
        }
        (ImageComponent::Tag, OverriderOperator::Replace) => image.set_tag_or_digest(value),
        (ImageComponent::Tag, OverriderOperator::Remove) => image.remove_tag_or_digest(),
        (ImageComponent::Other(component), _) => {
            return Err(format!("unsupported image component({component})"));
        }
        // An unknown operator changes nothing (Karmada's switch has no default).
        (_, OverriderOperator::Other(_)) => {}
    }
    Ok(image.to_string())
}

/// Which container list field a [`CommandArgsOverrider`] changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandOrArgs {
    /// `command`.
    Command,
    /// `args`.
    Args,
}

impl CommandOrArgs {
    fn field(self) -> &'static str {
        match self {
            CommandOrArgs::Command => "command",
            CommandOrArgs::Args => "args",
        }
    }
}

/// Applies one command or args overrider.
pub fn command_args(
    object: &mut Doc,
    target: CommandOrArgs,
    overrider: &CommandArgsOverrider,
) -> Result<(), String> {
    let Some(segments) = containers_path(kind_of(object)) else {
        return Ok(());
    };
    let Some(list) = containers(object, segments)? else {
        return Ok(());
    };
    let field = target.field();
    let mut operations = Vec::new();
    for (i, container) in list.iter().enumerate() {
        if !matches!(container, Doc::Object(_)) {
            return Err(format!(
                "{}/{i} is a {}, not a container",
                pointer(segments),
                container.type_name()
            ));
        }
        if container.get("name").and_then(Doc::as_str) != Some(overrider.container_name.as_str()) {
            continue;
        }
        let path = format!("{}/{i}/{field}", pointer(segments));
        let operation = match container.get(field) {
            None | Some(Doc::Null) => Operation::Add(Some(strings(override_items(Vec::new(), overrider)))),
            Some(Doc::Array(items)) => {
                let current = items
                    .iter()
                    .enumerate()
                    .map(|(j, item)| {
                        item.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| format!("{path}/{j} is a {}, not a string", item.type_name()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Operation::Replace(Some(strings(override_items(current, overrider))))
            }
            Some(other) => return Err(format!("{path} is a {}, not a list", other.type_name())),
        };
        operations.push((path, operation));
    }
    apply(object, &operations)
}

fn override_items(mut current: Vec<String>, overrider: &CommandArgsOverrider) -> Vec<String> {
    match &overrider.operator {
        CommandArgsOperator::Add => {
            current.extend(overrider.value.iter().cloned());
            current
        }
        CommandArgsOperator::Remove => current
            .into_iter()
            .filter(|item| !overrider.value.contains(item))
            .collect(),
        CommandArgsOperator::Other(_) => current,
    }
}

fn strings(items: Vec<String>) -> Doc {
    Doc::Array(items.into_iter().map(Doc::String).collect())
}

/// Which metadata map a [`LabelAnnotationOverrider`] changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelsOrAnnotations {
    /// `metadata.labels`.
    Labels,
    /// `metadata.annotations`.
    Annotations,
}

impl LabelsOrAnnotations {
    fn field(self) -> &'static str {
        match self {
            LabelsOrAnnotations::Labels => "labels",
            LabelsOrAnnotations::Annotations => "annotations",
        }
    }
}

/// Whether `doc` is an object of strings.
fn is_string_map(doc: &Doc) -> bool {
    matches!(doc, Doc::Object(members) if members.iter().all(|(_, v)| matches!(v, Doc::String(_))))
}

/// Applies one labels or annotations overrider.
pub fn labels_annotations(
    object: &mut Doc,
    target: LabelsOrAnnotations,
    overrider: &LabelAnnotationOverrider,
) -> Result<(), String> {
    let field = target.field();
    let operator = match &overrider.operator {
        OverriderOperator::Add => Operation::Add(None),
        OverriderOperator::Remove => Operation::Remove,
        OverriderOperator::Replace => Operation::Replace(None),
        OverriderOperator::Other(other) => return Err(format!("Unexpected kind: {other}")),
    };
    let mut operations = Vec::new();
    for (key, value) in &overrider.value {
        let map = object
            .get("metadata")
            .and_then(|m| m.get(field))
            .filter(|m| is_string_map(m));
        match operator {
            Operation::Remove | Operation::Replace(_) => {
                if map.and_then(|m| m.get(key)).is_none() {
                    continue;
                }
            }
            Operation::Add(_) => {
                if map.is_none() {
                    // Karmada starts an absent (or malformed) map empty; nothing is set when
                    // metadata itself is not an object.
                    let metadata_ok = match object.get("metadata") {
                        None | Some(Doc::Null) => object.set("metadata", Doc::Object(Vec::new())),
                        Some(Doc::Object(_)) => true,
                        Some(_) => false,
                    };
                    let set = metadata_ok
                        && object
                            .get_mut("metadata")
                            .is_some_and(|m| m.set(field, Doc::Object(Vec::new())));
                    if !set {
                        continue;
                    }
                }
            }
        }
        let path = format!("/metadata/{field}/{}", key.replace('/', "~1"));
        let operation = match operator {
            Operation::Add(_) => Operation::Add(Some(Doc::String(value.clone()))),
            Operation::Replace(_) => Operation::Replace(Some(Doc::String(value.clone()))),
            Operation::Remove => Operation::Remove,
        };
        operations.push((path, operation));
    }
    if operations.is_empty() {
        return Ok(());
    }
    apply(object, &operations)
}

/// Applies one field overrider: operations on the JSON or YAML document held by a string
/// field.
pub fn field(object: &mut Doc, overrider: &FieldOverrider) -> Result<(), String> {
    let path = &overrider.field_path;
    let tokens = pointer_tokens(path)?;
    let current = pointer_get(object, &tokens).map_err(|e| format!("cannot read fieldPath {path:?}: {e}"))?;
    let Doc::String(text) = current else {
        return Err(format!(
            "the value at fieldPath {path:?} is a {}, not a string",
            current.type_name()
        ));
    };
    let rewritten = if !overrider.yaml.is_empty() {
        subdocument::patch_yaml(text, &operations_of(&overrider.yaml))?
    } else if !overrider.json.is_empty() {
        subdocument::patch_json(text, &operations_of(&overrider.json))?
    } else {
        // Karmada writes an empty string; validation refuses a field overrider without
        // operations, so this keeps the field as it is.
        return Ok(());
    };
    if let Some(slot) = pointer_get_mut(object, &tokens) {
        *slot = Doc::String(rewritten);
    }
    Ok(())
}

fn operations_of(operations: &[SubDocumentOperation]) -> Vec<(String, Operation)> {
    operations
        .iter()
        .map(|op| {
            let value = op.value.as_ref().map(Doc::from);
            let operation = match &op.operator {
                OverriderOperator::Add => Operation::Add(value),
                OverriderOperator::Remove => Operation::Remove,
                OverriderOperator::Replace => Operation::Replace(value),
                // Validation refuses unknown operators; a document cannot name one here.
                OverriderOperator::Other(_) => Operation::Replace(value),
            };
            (op.sub_path.clone(), operation)
        })
        .collect()
}

/// The decoded tokens of an RFC 6901 pointer.
fn pointer_tokens(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!(
            "JSON pointer {path:?} must be empty or start with a \"/\""
        ));
    };
    Ok(rest.split('/').map(decode_token).collect())
}

fn pointer_get<'a>(doc: &'a Doc, tokens: &[String]) -> Result<&'a Doc, String> {
    let mut current = doc;
    for token in tokens {
        current = match current {
            Doc::Object(_) => current
                .get(token)
                .ok_or_else(|| format!("object has no key {token:?}"))?,
            Doc::Array(items) => {
                let index: usize = token
                    .parse()
                    .map_err(|_| format!("{token:?} is not a list index"))?;
                items
                    .get(index)
                    .ok_or_else(|| format!("index {index} is out of a list of {}", items.len()))?
            }
            other => return Err(format!("{token:?} is inside a {}", other.type_name())),
        };
    }
    Ok(current)
}

fn pointer_get_mut<'a>(doc: &'a mut Doc, tokens: &[String]) -> Option<&'a mut Doc> {
    let mut current = doc;
    for token in tokens {
        current = match current {
            Doc::Object(_) => current.get_mut(token)?,
            Doc::Array(items) => items.get_mut(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Applies a plaintext overrider list as one JSON patch.
pub fn plaintext(object: &mut Doc, overriders: &[PlaintextOverrider]) -> Result<(), String> {
    let operations: Vec<(String, Operation)> = overriders
        .iter()
        .map(|o| {
            let value = o.value.as_ref().map(Doc::from);
            let operation = match &o.operator {
                OverriderOperator::Add => Ok(Operation::Add(value)),
                OverriderOperator::Remove => Ok(Operation::Remove),
                OverriderOperator::Replace => Ok(Operation::Replace(value)),
                OverriderOperator::Other(other) => Err(format!("Unexpected kind: {other}")),
            }?;
            Ok((o.path.clone(), operation))
        })
        .collect::<Result<_, String>>()?;
    apply(object, &operations)
}

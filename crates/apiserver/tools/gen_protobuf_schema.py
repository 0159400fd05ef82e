#!/usr/bin/env python3
"""Generates crates/apiserver/src/protobuf_schema.rs: the protobuf field table of the built-in
kinds flotilla-apiserver serves, derived from the Go types of k8s.io/api and
k8s.io/apimachinery (their `json` and `protobuf` struct tags).

Usage:
    python3 tools/gen_protobuf_schema.py K8S_IO_API_DIR K8S_IO_APIMACHINERY_DIR > src/protobuf_schema.rs

The table only records facts of the wire format (field numbers, JSON names, types, pointer
and omitempty flags); the decoder that uses it lives in src/protobuf.rs.
"""
import os
import re
import sys

API, MACHINERY = sys.argv[1], sys.argv[2]

PACKAGES = {
    "core/v1": os.path.join(API, "core/v1"),
    "apps/v1": os.path.join(API, "apps/v1"),
    "batch/v1": os.path.join(API, "batch/v1"),
    "networking/v1": os.path.join(API, "networking/v1"),
    "coordination/v1": os.path.join(API, "coordination/v1"),
    "events/v1": os.path.join(API, "events/v1"),
    "rbac/v1": os.path.join(API, "rbac/v1"),
    "authentication/v1": os.path.join(API, "authentication/v1"),
    "authorization/v1": os.path.join(API, "authorization/v1"),
    "meta/v1": os.path.join(MACHINERY, "pkg/apis/meta/v1"),
}
IMPORTS = {
    "k8s.io/api/core/v1": "core/v1",
    "k8s.io/api/apps/v1": "apps/v1",
    "k8s.io/api/batch/v1": "batch/v1",
    "k8s.io/api/networking/v1": "networking/v1",
    "k8s.io/api/coordination/v1": "coordination/v1",
    "k8s.io/api/events/v1": "events/v1",
    "k8s.io/api/rbac/v1": "rbac/v1",
    "k8s.io/api/authentication/v1": "authentication/v1",
    "k8s.io/api/authorization/v1": "authorization/v1",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
    "k8s.io/apimachinery/pkg/runtime": "runtime",
    "k8s.io/apimachinery/pkg/types": "types",
}
SPECIAL = {
    "meta/v1.Time": "Time",
    "meta/v1.MicroTime": "MicroTime",
    "meta/v1.Duration": "Duration",
    "meta/v1.FieldsV1": "FieldsV1",
    "resource.Quantity": "Quantity",
    "intstr.IntOrString": "IntOrString",
    "runtime.RawExtension": "RawExtension",
    "types.UID": "String",
    "types.NodeName": "String",
}
ROOTS = [
    ("v1", "Namespace", "core/v1"), ("v1", "ConfigMap", "core/v1"), ("v1", "Secret", "core/v1"),
    ("v1", "Service", "core/v1"), ("v1", "ServiceAccount", "core/v1"),
    ("v1", "PersistentVolumeClaim", "core/v1"), ("v1", "PersistentVolume", "core/v1"),
    ("v1", "Pod", "core/v1"), ("v1", "Node", "core/v1"), ("v1", "Event", "core/v1"),
    ("v1", "Endpoints", "core/v1"),
    ("apps/v1", "Deployment", "apps/v1"), ("apps/v1", "StatefulSet", "apps/v1"),
    ("apps/v1", "DaemonSet", "apps/v1"), ("apps/v1", "ReplicaSet", "apps/v1"),
    ("batch/v1", "Job", "batch/v1"), ("batch/v1", "CronJob", "batch/v1"),
    ("networking.k8s.io/v1", "Ingress", "networking/v1"),
    ("coordination.k8s.io/v1", "Lease", "coordination/v1"),
    ("events.k8s.io/v1", "Event", "events/v1"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "rbac/v1"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "rbac/v1"),
    ("rbac.authorization.k8s.io/v1", "Role", "rbac/v1"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rbac/v1"),
    ("authentication.k8s.io/v1", "TokenRequest", "authentication/v1"),
    ("authentication.k8s.io/v1", "TokenReview", "authentication/v1"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "authentication/v1"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", "authorization/v1"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "authorization/v1"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", "authorization/v1"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "authorization/v1"),
]

structs = {}   # "pkg.Name" -> list of fields
aliases = {}   # "pkg.Name" -> go type string (resolved in pkg)
imports_of = {}  # pkg -> {alias: pkg}

FIELD = re.compile(r'^\s*(?:(\w+)\s+)?([\w\.\*\[\]]+(?:\[[\w\.]+\][\w\.\*\[\]]+)?)\s+`([^`]*)`')
TAG = re.compile(r'(\w+):"([^"]*)"')

for pkg, path in PACKAGES.items():
    imps = {}
    for fn in sorted(os.listdir(path)):
        if not fn.endswith(".go") or fn.endswith("_test.go") or fn.startswith("zz_") or fn.endswith(".pb.go") or "generated" in fn:
            continue
        src = open(os.path.join(path, fn)).read()
        for m in re.finditer(r'import\s*\((.*?)\)', src, re.S):
            for line in m.group(1).splitlines():
                line = line.strip()
                mm = re.match(r'(\w+)?\s*"([^"]+)"', line)
                if mm and mm.group(2) in IMPORTS:
                    alias = mm.group(1) or mm.group(2).rsplit("/", 1)[-1]
                    imps[alias] = IMPORTS[mm.group(2)]
        for m in re.finditer(r'^type (\w+) struct \{\n(.*?)^\}', src, re.S | re.M):
            name, body = m.group(1), m.group(2)
            fields = []
            for line in body.splitlines():
                fm = FIELD.match(line)
                if not fm:
                    continue
                fname, ftype, tags = fm.group(1), fm.group(2), dict(TAG.findall(fm.group(3)))
                if fname is None:
                    # Embedded type: the token parsed as type is the name.
                    fname = ftype.split(".")[-1]
                if "protobuf" not in tags:
                    continue
                pb = tags["protobuf"].split(",")
                if len(pb) < 2:
                    continue
                number = int(pb[1])
                json_tag = tags.get("json", "")
                jname, _, opts = json_tag.partition(",")
                inline = "inline" in opts or (jname == "" and fm.group(1) is None)
                if jname == "-" and fname != "Raw":
                    continue
                fields.append({"go": fname, "type": ftype, "number": number, "json": jname,
                               "omitempty": "omitempty" in opts, "inline": inline})
            structs[f"{pkg}.{name}"] = fields
        for m in re.finditer(r'^type (\w+) ([\w\.\*\[\]]+)\s*$', src, re.M):
            if m.group(2) not in ("struct", "interface"):
                aliases[f"{pkg}.{m.group(1)}"] = m.group(2)
    imports_of[pkg] = imps

SCALARS = {"string": "String", "int32": "Int32", "int64": "Int64", "bool": "Bool",
           "float64": "Double", "uint64": "Int64", "int": "Int64", "uint32": "Int32", "byte": "Int32"}

messages = []   # list of (qualified name)
index = {}


def qualify(pkg, name):
    if "." in name:
        alias, base = name.split(".", 1)
        target = imports_of.get(pkg, {}).get(alias, alias)
        return f"{target}.{base}"
    return f"{pkg}.{name}"


def resolve(pkg, t):
    """Returns (ty, repeated, pointer) for a Go type."""
    pointer = False
    if t.startswith("*"):
        pointer, t = True, t[1:]
    if t == "[]byte":
        return ("Bytes", False, pointer)
    if t.startswith("[]"):
        inner, _, _ = resolve(pkg, t[2:])
        return (inner, True, pointer)
    if t.startswith("map["):
        value = t[t.index("]") + 1:]
        inner, rep, _ = resolve(pkg, value)
        if rep:
            inner = f"RepeatedIn({inner})"
        return (f"Map({inner})", False, pointer)
    if t in SCALARS:
        return (SCALARS[t], False, pointer)
    q = qualify(pkg, t)
    if q in SPECIAL:
        return (SPECIAL[q], False, pointer)
    if q in aliases:
        apkg = q.rsplit(".", 1)[0]
        ty, rep, _ = resolve(apkg, aliases[q])
        return (ty, rep, pointer)
    if q in structs:
        return (f"Message({message_index(q)})", False, pointer)
    raise SystemExit(f"unknown type {t} ({q}) in {pkg}")


def message_index(q):
    if q not in index:
        index[q] = len(messages)
        messages.append(q)
    return index[q]


for _, kind, pkg in ROOTS:
    message_index(f"{pkg}.{kind}")

out_messages = []
i = 0
while i < len(messages):
    q = messages[i]
    pkg = q.rsplit(".", 1)[0]
    rows = []
    for f in structs[q]:
        ty, rep, ptr = resolve(pkg, f["type"])
        rows.append((f["number"], f["json"], ty, rep, ptr, f["omitempty"], f["inline"]))
    out_messages.append((q, rows))
    i += 1


def rust_ty(ty):
    if ty.startswith("Map("):
        return f"Ty::Map(&{rust_ty(ty[4:-1])})"
    if ty.startswith("RepeatedIn("):
        return f"Ty::List(&{rust_ty(ty[11:-1])})"
    if ty.startswith("Message("):
        return f"Ty::Message({ty[8:-1]})"
    return f"Ty::{ty}"


print("// Generated by tools/gen_protobuf_schema.py from the Go types of k8s.io/api and")
print("// k8s.io/apimachinery (Kubernetes v1.33 API). Do not edit by hand.")
print("//! Protobuf field table of the built-in kinds (see `protobuf.rs`).")
print()
print("use crate::protobuf::{Field, Message, Ty};")
print()
print("/// Root message of each served built-in kind: (apiVersion, kind, message index).")
print("pub(crate) const ROOTS: &[(&str, &str, usize)] = &[")
for api_version, kind, pkg in ROOTS:
    print(f'    ("{api_version}", "{kind}", {index[f"{pkg}.{kind}"]}),')
print("];")
print()
print("/// Every message reachable from the roots.")
print("pub(crate) const MESSAGES: &[Message] = &[")
for q, rows in out_messages:
    print(f'    Message {{ name: "{q}", fields: &[')
    for number, jname, ty, rep, ptr, omit, inline in sorted(rows):
        print(f'        Field {{ number: {number}, json: "{jname}", ty: {rust_ty(ty)}, repeated: {str(rep).lower()}, '
              f'pointer: {str(ptr).lower()}, omitempty: {str(omit).lower()}, inline: {str(inline).lower()} }},')
    print("    ] },")
print("];")

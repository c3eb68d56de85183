#!/usr/bin/env python3
"""Writes src/protobuf/schema.rs: the protobuf field numbers and types of the Kubernetes
messages the test API server transcodes (the served kinds, their lists, and what they
contain), read from the `generated.proto` files of k8s.io/api and k8s.io/apimachinery in the
Go module cache.

Usage: scripts/gen-protobuf-schema.py [GOMODCACHE] > src/protobuf/schema.rs
(GOMODCACHE defaults to `go env GOMODCACHE`, else ~/go/pkg/mod). The versions are the ones
client-go v0.37.2 builds against; run `go mod download k8s.io/api@v0.37.2
k8s.io/apimachinery@v0.37.2` first if they are missing.
"""
import os
import re
import subprocess
import sys

API = "k8s.io/api@v0.37.2"
MACHINERY = "k8s.io/apimachinery@v0.37.2"
FILES = [
    (API, "core/v1"),
    (API, "apps/v1"),
    (API, "autoscaling/v1"),
    (API, "coordination/v1"),
    (API, "events/v1"),
    (MACHINERY, "pkg/apis/meta/v1"),
    (MACHINERY, "pkg/runtime"),
    (MACHINERY, "pkg/runtime/schema"),
    (MACHINERY, "pkg/api/resource"),
    (MACHINERY, "pkg/util/intstr"),
]
ROOTS = [
    "k8s.io.api.core.v1.Pod", "k8s.io.api.core.v1.PodList",
    "k8s.io.api.core.v1.Node", "k8s.io.api.core.v1.NodeList",
    "k8s.io.api.core.v1.Namespace", "k8s.io.api.core.v1.NamespaceList",
    "k8s.io.api.core.v1.PersistentVolumeClaim", "k8s.io.api.core.v1.PersistentVolumeClaimList",
    "k8s.io.api.core.v1.Event", "k8s.io.api.core.v1.EventList",
    "k8s.io.api.core.v1.Binding",
    "k8s.io.api.apps.v1.StatefulSet", "k8s.io.api.apps.v1.StatefulSetList",
    "k8s.io.api.apps.v1.DaemonSet", "k8s.io.api.apps.v1.DaemonSetList",
    "k8s.io.api.apps.v1.ControllerRevision", "k8s.io.api.apps.v1.ControllerRevisionList",
    "k8s.io.api.autoscaling.v1.Scale",
    "k8s.io.api.coordination.v1.Lease", "k8s.io.api.coordination.v1.LeaseList",
    "k8s.io.api.events.v1.Event", "k8s.io.api.events.v1.EventList",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
    "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "k8s.io.apimachinery.pkg.runtime.Unknown",
]
SCALARS = {"string": "Str", "bytes": "Bytes", "bool": "Bool", "int32": "Int32",
           "int64": "Int64", "double": "Double"}
FIELD = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*(\w+)\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")


def modcache():
    if len(sys.argv) > 1:
        return sys.argv[1]
    try:
        return subprocess.check_output(["go", "env", "GOMODCACHE"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return os.path.expanduser("~/go/pkg/mod")


def parse(path):
    messages = {}
    package = None
    current = None
    with open(path) as f:
        for line in f:
            line = line.split("//")[0]
            m = re.match(r"^\s*package\s+([\w.]+)\s*;", line)
            if m:
                package = m.group(1)
                continue
            m = re.match(r"^\s*message\s+(\w+)\s*{", line)
            if m:
                current = package + "." + m.group(1)
                messages[current] = []
                continue
            if current and re.match(r"^\s*}", line):
                current = None
                continue
            m = FIELD.match(line)
            if current and m:
                label, ty, key, value, name, number = m.groups()
                if key:
                    messages[current].append((name, int(number), "map", key, resolve(value, package)))
                else:
                    messages[current].append(
                        (name, int(number), label or "optional", None, resolve(ty, package)))
    return messages


EMBEDDED = re.compile(r'^\s*\*?[\w.]+\s+`json:"(,inline)?"[^`]*protobuf:"[^"]*name=(\w+)')


def inline_fields(directory, package):
    """(message, proto field name) of Go structs embedded with their fields inline in JSON
    (`json:""` or `json:",inline"`): Probe's handler, Volume's volumeSource, ..."""
    found = set()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_") \
                or name.startswith("generated"):
            continue
        struct = None
        with open(os.path.join(directory, name)) as f:
            for line in f:
                m = re.match(r"^type (\w+) struct {", line)
                if m:
                    struct = m.group(1)
                    continue
                m = EMBEDDED.match(line)
                if struct and m:
                    found.add((package + "." + struct, m.group(2)))
    return found


def resolve(ty, package):
    if ty in SCALARS:
        return ty
    if ty.startswith("."):
        return ty[1:]
    return package + "." + ty


def rust_ty(ty):
    return f"Ty::{SCALARS[ty]}" if ty in SCALARS else f'Ty::Message("{ty}")'


def main():
    root = modcache()
    messages = {}
    inline = set()
    for module, directory in FILES:
        found = parse(os.path.join(root, module, directory, "generated.proto"))
        messages.update(found)
        package = next(iter(found)).rsplit(".", 1)[0] if found else ""
        # runtime.Unknown embeds TypeMeta, but only as the envelope, never as JSON.
        if not directory.endswith("pkg/runtime"):
            inline |= inline_fields(os.path.join(root, module, directory), package)
    wanted, stack = set(), list(ROOTS)
    while stack:
        name = stack.pop()
        if name in wanted:
            continue
        if name not in messages:
            sys.exit(f"message {name} not found")
        wanted.add(name)
        for _, _, _, _, ty in messages[name]:
            if ty not in SCALARS:
                stack.append(ty)
    print("// @generated by scripts/gen-protobuf-schema.py from the generated.proto files of")
    print(f"// {API} and {MACHINERY}. Do not edit.")
    print()
    print("use super::schema_types::{Field, Label, Message, Ty};")
    print()
    print("/// Every message the server transcodes, sorted by full name.")
    print("pub(crate) static MESSAGES: &[Message] = &[")
    for name in sorted(wanted):
        print(f'    Message {{ name: "{name}", fields: &[')
        for fname, number, label, key, ty in sorted(messages[name], key=lambda f: f[1]):
            if label == "map":
                lab = f"Label::Map({rust_ty(key)})"
            elif label == "repeated":
                lab = "Label::Repeated"
            else:
                lab = "Label::Optional"
            flat = "true" if (name, fname) in inline else "false"
            print(f'        Field {{ name: "{fname}", number: {number}, label: {lab}, ty: {rust_ty(ty)}, inline: {flat} }},')
        print("    ] },")
    print("];")


main()

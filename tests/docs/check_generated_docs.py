#!/usr/bin/env python3
"""The generated documents match the binary, and the schema accepts what moesim accepts.

  check_generated_docs.py MOESIM SOURCE_ROOT reference
      docs/reference.md is exactly `moesim list --markdown`.
  check_generated_docs.py MOESIM SOURCE_ROOT schema
      scenarios/moesim.schema.json is exactly `moesim schema`; every shipped scenario (scenarios/
      and validation/serving/scenarios/) validates against it and passes `moesim validate`; known-bad
      scenarios fail it.

Regenerate after changing a declaration:
  build/moesim list --markdown > docs/reference.md
  build/moesim schema > scenarios/moesim.schema.json
"""
import difflib
import json
import pathlib
import re
import subprocess
import sys

import jsonschema
import yaml


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where `1e-3` is a string; moesim (yaml-cpp) reads it as a number."""


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."))


def generated(moesim, *args):
    return subprocess.run([moesim, *args], check=True, capture_output=True, text=True).stdout


def same_as_checked_in(text, path, command):
    checked_in = path.read_text()
    if text == checked_in:
        return True
    diff = difflib.unified_diff(checked_in.splitlines(), text.splitlines(), str(path), command, lineterm="", n=1)
    print("\n".join(list(diff)[:60]))
    print(f"FAIL: {path} differs from `{command}`; regenerate it with: build/{command} > {path}")
    return False


# (what is wrong, scenario) pairs the schema must reject: each is one mistake on a valid scenario.
BASE = {"model": "mixtral-8x7b", "hardware": "dgx-h100"}
BAD = [
    ("an undeclared top-level key", {**BASE, "polcy": "eplb"}),
    ("a model preset that does not exist", {**BASE, "model": "mixtral-9x7b"}),
    ("a string where an integer goes", {**BASE, "workload": {"batch_size": "eight"}}),
    ("a value below its range", {**BASE, "workload": {"batch_size": 0}}),
    ("a choice not offered", {**BASE, "workload": {"attention_parallelism": "pipeline"}}),
    ("a serving key in a prefill workload", {**BASE, "workload": {"requests": 10}}),
    ("a prefill key in a serving workload", {**BASE, "workload": {"kind": "serving", "batch_size": 8}}),
    ("an option another policy has", {**BASE, "policy": {"name": "static-ep", "redundant_experts": 8}}),
    ("an arrival process without its key", {**BASE, "workload": {"kind": "serving", "arrival": {"rate_per_s": 2}}}),
    ("a routing option of another kind", {**BASE, "workload": {"routing": {"kind": "uniform", "alpha": 0.3}}}),
    ("an undeclared serving key", {**BASE, "workload": {"kind": "serving"}, "serving": {"max_seqs": 8}}),
    ("a missing model", {"hardware": "dgx-h100"}),
]


def check_schema(moesim, root):
    ok = same_as_checked_in(generated(moesim, "schema"), root / "scenarios/moesim.schema.json", "moesim schema")
    schema = json.loads((root / "scenarios/moesim.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    files = sorted((root / "scenarios").rglob("*.yaml")) + sorted((root / "validation/serving/scenarios").glob("*.yaml"))
    checked = 0
    for path in files:
        doc = yaml.load(path.read_text(), Loader=Yaml12Loader)
        if not isinstance(doc, dict) or "model" not in doc:
            continue  # not a scenario (the claims table)
        checked += 1
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            ok = False
            for e in errors[:3]:
                print(f"FAIL: {path.relative_to(root)}: {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}")
        loaded = subprocess.run([moesim, "validate", str(path)], capture_output=True, text=True)
        if loaded.returncode != 0 and "/shared/data/" in loaded.stderr and "cannot open" in loaded.stderr:
            # A scenario of the team's shared measurements (../shared/data), absent from this
            # checkout's surroundings: the schema check above still applies to it.
            print(f"note: {path.relative_to(root)}: its data under ../shared/data is not here; not loaded")
            continue
        if loaded.returncode != 0:
            ok = False
            print(f"FAIL: {path.relative_to(root)} is shipped but `moesim validate` rejects it:\n{loaded.stdout}{loaded.stderr}")
    if checked < 20:
        ok = False
        print(f"FAIL: only {checked} scenarios found under {root}")
    for what, doc in BAD:
        if validator.is_valid(doc):
            ok = False
            print(f"FAIL: the schema accepts {what}: {doc}")
    print(f"{checked} shipped scenarios valid, {len(BAD)} known-bad ones rejected" if ok else "schema check failed")
    return ok


def main():
    moesim, root, what = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    if what == "reference":
        ok = same_as_checked_in(generated(moesim, "list", "--markdown"), root / "docs/reference.md", "moesim list --markdown")
    else:
        ok = check_schema(moesim, root)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

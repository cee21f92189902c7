"""The run file's JSON Schema (``schema.json``, shipped in the package) and a validator of the subset
of JSON Schema it uses (type, const, enum, required, properties, items, minimum, minItems, pattern):
jsonschema is not a dependency, and a tool that has it reads the same file.
"""
from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def schema() -> dict:
    return json.loads(resources.files("hisparse.results").joinpath("schema.json").read_text())


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, node: dict | None = None, where: str = "$") -> list[str]:
    """Every place ``value`` breaks ``node`` (default: the run file's schema), as "path: problem"."""
    node = schema() if node is None else node
    errors: list[str] = []
    types = node.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is(value, t) for t in names):
            return [f"{where}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "const" in node and value != node["const"]:
        errors.append(f"{where}: expected {node['const']!r}, got {value!r}")
    if "enum" in node and value not in node["enum"]:
        errors.append(f"{where}: expected one of {node['enum']}, got {value!r}")
    if "minimum" in node and _is(value, "number") and value < node["minimum"]:
        errors.append(f"{where}: {value} < minimum {node['minimum']}")
    if "pattern" in node and isinstance(value, str) and not re.search(node["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {node['pattern']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {k!r}" for k in node.get("required", ()) if k not in value]
        for k, sub in node.get("properties", {}).items():
            if k in value:
                errors += validate(value[k], sub, f"{where}.{k}")
    if isinstance(value, list):
        if len(value) < node.get("minItems", 0):
            errors.append(f"{where}: fewer than {node['minItems']} items")
        if "items" in node:
            for i, item in enumerate(value):
                errors += validate(item, node["items"], f"{where}[{i}]")
    return errors

"""Profiles: the thresholds checks compare against, from YAML files shipped with the package.

A profile is built in layers: the named profile (following `extends:`), then `--config`
files, then `--set key=value`. Every layer is validated against the schema that the
checks declare; an error names the file (or `--set`) and the key, and stops the run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostcheck import units
from hostcheck._shared.sizes import parse_size

PROFILE_NAMES = ("default", "gpu-node", "quick")


class ConfigError(Exception):
    """A profile, config file or option is wrong; the message names where and which key."""


# The value formats of the schema, each read by the parser the checks use.
FORMAT_PARSERS = {
    "size": parse_size,
    "size-or-percent": units.parse_size_spec,
    "limit": units.parse_limit,
    "size-or-unlimited": units.parse_size_or_unlimited,
}


def _parses(value: Any, fmt: str) -> bool:
    """Whether a value of this format reads (None stands for "not set" everywhere)."""
    try:
        if value is not None:
            FORMAT_PARSERS[fmt](value)
    except ValueError:
        return False
    return True


def _format_checker() -> Any:
    import jsonschema

    checker = jsonschema.FormatChecker()
    for name in FORMAT_PARSERS:
        checker.checks(name)(lambda value, name=name: _parses(value, name))
    return checker


# Schema fragments for check sections.
SIZE = {"type": ["integer", "string"], "format": "size"}
SIZE_OR_PERCENT = {"type": ["integer", "string"], "format": "size-or-percent"}
LIMIT = {"type": ["integer", "string"], "format": "limit"}
SIZE_OR_UNLIMITED = {"type": ["integer", "string"], "format": "size-or-unlimited"}
FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
POSITIVE_INT = {"type": "integer", "minimum": 1}
NON_NEGATIVE = {"type": "number", "minimum": 0}


def nullable(schema: Mapping[str, Any]) -> dict:
    result = dict(schema)
    kinds = result.get("type")
    if isinstance(kinds, str):
        result["type"] = [kinds, "null"]
    elif isinstance(kinds, list):
        result["type"] = [*kinds, "null"]
    else:
        result = {"anyOf": [dict(schema), {"type": "null"}]}
    return result


def obj(properties: Mapping[str, Any]) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": dict(properties)}


def build_schema(
    sections: Mapping[str, Mapping[str, Any]], top_level: Mapping[str, Any] | None = None
) -> dict:
    """The whole profile schema from each check's section schema, and top-level sections
    of other commands (`fleet`)."""
    common = {"enabled": {"type": "boolean"}, "severity": {"enum": ["warn", "fail"]}}
    checks = {
        check_id: obj({**common, **section.get("properties", {})})
        for check_id, section in sections.items()
    }
    return obj(
        {
            "description": {"type": "string"},
            "extends": {"type": "string"},
            "require_gpu": {"type": "boolean"},
            "checks": obj(checks),
            **(top_level or {}),
        }
    )


def require_all(schema: Any) -> Any:
    """A copy of the schema in which every declared property is required."""
    if isinstance(schema, dict):
        result = {key: require_all(value) for key, value in schema.items()}
        if "properties" in schema and schema.get("type") == "object":
            result["required"] = [
                k for k in schema["properties"] if k not in ("extends", "description")
            ]
        return result
    if isinstance(schema, list):
        return [require_all(item) for item in schema]
    return schema


def _key_path(path: Iterable[Any]) -> str:
    parts = [str(p) for p in path if p != "checks"]
    return ".".join(parts) or "(top level)"


def _describe(error: Any, origin: str) -> str:
    """One line for a jsonschema.ValidationError."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        key = _key_path([*path, extra[0]]) if extra else _key_path(path)
        return f"{origin}: {key}: unknown key (known here: {', '.join(allowed)})"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return f"{origin}: {_key_path([*path, missing[0]])}: missing"
    if error.validator == "format":
        parser = FORMAT_PARSERS[error.validator_value]
        try:
            parser(error.instance)
            reason = error.message
        except ValueError as exc:
            reason = str(exc)
        return f"{origin}: {_key_path(path)}: {reason}"
    return f"{origin}: {_key_path(path)}: {error.message}"


def schema_digest(schema: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


def _formats_hold(value: Any, schema: Mapping[str, Any]) -> bool:
    """Every value under a `format` parses (the compiled validators leave formats out)."""
    fmt = schema.get("format")
    if fmt is not None and not _parses(value, fmt):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if not all(_formats_hold(v, properties[k]) for k, v in value.items() if k in properties):
            return False
    if value is not None:
        return all(_formats_hold(value, option) for option in schema.get("anyOf", ()))
    return True


def _passes_compiled(document: dict, schema: Mapping[str, Any], complete: bool) -> bool:
    """True when the compiled profile schema accepts the document; False when it rejects
    it, or `schema` is another schema (jsonschema decides then, and says why)."""
    from hostcheck.compiled import digest

    if schema_digest(schema) != digest.SCHEMA_DIGEST:
        return False
    if complete:
        from hostcheck.compiled.complete import validate as compiled
    else:
        from hostcheck.compiled.layer import validate as compiled
    try:
        compiled(document)
    except ValueError:
        return False
    return _formats_hold(document, schema)


def validate(document: Any, schema: dict, origin: str, complete: bool = False) -> None:
    if not isinstance(document, dict):
        raise ConfigError(f"{origin}: expected a mapping of keys at the top level")
    if _passes_compiled(document, schema, complete):
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        require_all(schema) if complete else schema, format_checker=_format_checker()
    )
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(_describe(errors[0], origin))


def merge(base: dict, override: Mapping[str, Any]) -> dict:
    result = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _load_yaml(text: str, origin: str) -> Any:
    import yaml

    # libyaml's parser where PyYAML was built with it (its wheels are): several times faster
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{origin}:{where}: not valid YAML: {problem}") from None


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def builtin_profile_text(name: str) -> str:
    # through the package's loader, so it reads from inside a wheel on PYTHONPATH too (the role
    # checks hostcheck_config that way); pkgutil, as importlib.resources slows a quick run's start
    return pkgutil.get_data("hostcheck", f"profiles/{name}.yaml").decode()


def _builtin_profile(name: str, origin: str) -> Any:
    """A built-in profile as hostcheck.schema_build parsed it, while its YAML is unchanged
    since (so a run needs no YAML parser); parsed now otherwise."""
    from hostcheck.compiled.profiles import PROFILES

    text = builtin_profile_text(name)
    digest, document = PROFILES.get(name, ("", None))
    if digest == text_digest(text):
        return copy.deepcopy(document)
    return _load_yaml(text, origin)


@dataclass
class Profile:
    name: str
    values: dict
    sources: list[str] = field(default_factory=list)

    @property
    def require_gpu(self) -> bool:
        return bool(self.values.get("require_gpu"))

    def section(self, check_id: str) -> dict:
        return self.values["checks"][check_id]

    def enabled(self, check_id: str) -> bool:
        return bool(self.section(check_id).get("enabled", True))


def _load_layer(name_or_path: str, schema: dict, seen: tuple[str, ...]) -> tuple[dict, list[str]]:
    if name_or_path in seen:
        raise ConfigError(f"profile {name_or_path}: extends itself through {' -> '.join(seen)}")
    if name_or_path in PROFILE_NAMES:
        origin = f"profile {name_or_path} ({name_or_path}.yaml)"
        document = _builtin_profile(name_or_path, origin)
    else:
        path = Path(name_or_path)
        origin = str(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            known = ", ".join(PROFILE_NAMES)
            raise ConfigError(
                f"{name_or_path}: no such profile or file (built-in profiles: {known})"
            ) from None
        except OSError as exc:
            raise ConfigError(f"{name_or_path}: cannot read: {exc.strerror}") from None
        document = _load_yaml(text, origin)
    if document is None:
        document = {}
    validate(document, schema, origin)
    parent = document.get("extends")
    if parent is None:
        return document, [origin]
    base, sources = _load_layer(parent, schema, (*seen, name_or_path))
    return merge(base, document), [*sources, origin]


def split_key(key: str) -> list[str]:
    """`sysctl.expect."vm.swappiness".max` -> [sysctl, expect, vm.swappiness, max]."""
    parts = [quoted or plain for quoted, plain in re.findall(r'"([^"]+)"|([^.]+)', key)]
    rebuilt = ".".join(f'"{p}"' if "." in p else p for p in parts)
    if not parts or rebuilt != key or any('"' in p for p in parts):
        raise ConfigError(f'--set {key}: malformed key (quote names with dots: a."b.c".d)')
    return parts


def parse_assignment(text: str, schema: dict) -> dict:
    """`--set shm.min_size=32GiB` as a partial profile; keys are relative to `checks`."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text}: expected KEY=VALUE, for example shm.min_size=32GiB")
    value = _load_yaml(raw, f"--set {key}")
    parts = split_key(key)
    top_level = set(schema["properties"]) - {"checks"}
    if parts[0] not in top_level:
        parts = ["checks", *parts]
    document: dict = {}
    cursor = document
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    validate(document, schema, f"--set {key}")
    return document


def load_profile(
    name: str,
    schema: dict,
    config_files: Iterable[str] = (),
    assignments: Iterable[str] = (),
) -> Profile:
    """The named profile with config files and --set assignments applied, fully validated."""
    values, sources = _load_layer(name, schema, ())
    if "extends" not in values and name != "default" and name in PROFILE_NAMES:
        raise ConfigError(f"profile {name}: must extend another profile")
    for path in config_files:
        layer, layer_sources = _load_layer(path, schema, ())
        if len(layer_sources) > 1:  # the file names its own base profile with `extends:`
            values, sources = layer, layer_sources
        else:
            values = merge(values, layer)
            sources.extend(layer_sources)
    for text in assignments:
        values = merge(values, parse_assignment(text, schema))
        sources.append(f"--set {text}")
    values.pop("extends", None)
    validate(values, schema, f"profile {name} (after --config and --set)", complete=True)
    return Profile(name=name, values=values, sources=sources)

"""A checker of the small subset of JSON Schema 2020-12 that the schemas of `current.json`
and the attested tuple (`schema/current.v2.schema.json`, `schema/attested-tuple.schema.json`)
use; the CLI's schemas are checked by the Rust tests with a full validator.

Standard library only, so the tests need no validator package. Keywords: `type`, `const`,
`enum`, `properties`, `required`, `additionalProperties` (`false` or a schema),
`propertyNames`, `minProperties`, `items`, `anyOf`, `oneOf`, `not`, `pattern`, `minLength`,
`maxLength`, `minimum`, `maximum`, local `$ref` (`#/$defs/NAME`), and the annotations
`$schema`, `$id`, `title`, `description`, `$defs`. Any other keyword is an error,
so a schema can never rely on a rule this checker silently skips. One deliberate difference
from the specification: `integer` means a JSON number written without fraction or exponent
(as parsed by Python's `json`, an `int`), which is what solewriter's parser accepts.
"""

import re

ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: type(v) is int,
    "null": lambda v: v is None,
}


def errors(schema, instance, root=None, where="$"):
    """The list of violations of `schema` by `instance` (empty when valid)."""
    root = schema if root is None else root
    out = []
    for key, rule in schema.items():
        if key in ANNOTATIONS:
            continue
        check = _KEYWORDS.get(key)
        if check is None:
            raise ValueError(f"keyword `{key}` is outside the supported subset")
        out += check(rule, schema, instance, root, where)
    return out


def _type(rule, _schema, v, _root, where):
    return [] if TYPES[rule](v) else [f"{where}: not of type {rule}"]


def _const(rule, _schema, v, _root, where):
    return [] if type(v) is type(rule) and v == rule else [f"{where}: not {rule!r}"]


def _enum(rule, _schema, v, _root, where):
    return [] if any(type(v) is type(e) and v == e for e in rule) else [f"{where}: not one of {rule}"]


def _properties(rule, _schema, v, root, where):
    if not isinstance(v, dict):
        return []
    return [e for k, sub in rule.items() if k in v for e in errors(sub, v[k], root, f"{where}.{k}")]


def _required(rule, _schema, v, _root, where):
    return [f"{where}: `{k}` required" for k in rule if isinstance(v, dict) and k not in v]


def _additional(rule, schema, v, root, where):
    if rule is not False and not isinstance(rule, dict):
        raise ValueError("only `additionalProperties: false` or a schema is supported")
    if not isinstance(v, dict):
        return []
    extra = [k for k in v if k not in schema.get("properties", {})]
    if rule is False:
        return [f"{where}: unknown key `{k}`" for k in extra]
    return [e for k in extra for e in errors(rule, v[k], root, f"{where}.{k}")]


def _property_names(rule, _schema, v, root, where):
    if not isinstance(v, dict):
        return []
    return [e for k in v for e in errors(rule, k, root, f"{where} key `{k}`")]


def _min_properties(rule, _schema, v, _root, where):
    return [f"{where}: fewer than {rule} keys"] if isinstance(v, dict) and len(v) < rule else []


def _items(rule, _schema, v, root, where):
    if not isinstance(v, list):
        return []
    return [e for i, item in enumerate(v) for e in errors(rule, item, root, f"{where}[{i}]")]


def _any_of(rule, _schema, v, root, where):
    return [] if any(not errors(sub, v, root, where) for sub in rule) else [f"{where}: matches no anyOf branch"]


def _one_of(rule, _schema, v, root, where):
    matched = sum(1 for sub in rule if not errors(sub, v, root, where))
    return [] if matched == 1 else [f"{where}: matches {matched} oneOf branches, not exactly one"]


def _not(rule, _schema, v, root, where):
    return [f"{where}: matches a `not` schema"] if not errors(rule, v, root, where) else []


def _pattern(rule, _schema, v, _root, where):
    # ECMA-262 `$` (no multiline flag) is the end of input; Python's `$` also matches before a
    # final newline, so a trailing `$` becomes `\Z`.
    python = rule[:-1] + r"\Z" if rule.endswith("$") else rule
    return [] if not isinstance(v, str) or re.search(python, v) else [f"{where}: does not match {rule}"]


def _bound(compare, what):
    def check(rule, _schema, v, _root, where):
        size = len(v) if what == "length" and isinstance(v, str) else v
        applies = isinstance(v, str) if what == "length" else type(v) in (int, float)
        return [] if not applies or compare(size, rule) else [f"{where}: {what} out of bounds ({rule})"]
    return check


def _ref(rule, _schema, v, root, where):
    prefix = "#/$defs/"
    if not rule.startswith(prefix):
        raise ValueError(f"only local `{prefix}NAME` references are supported, not {rule}")
    return errors(root["$defs"][rule[len(prefix):]], v, root, where)


_KEYWORDS = {
    "type": _type,
    "const": _const,
    "enum": _enum,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "propertyNames": _property_names,
    "minProperties": _min_properties,
    "items": _items,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "pattern": _pattern,
    "minLength": _bound(lambda a, b: a >= b, "length"),
    "maxLength": _bound(lambda a, b: a <= b, "length"),
    "minimum": _bound(lambda a, b: a >= b, "value"),
    "maximum": _bound(lambda a, b: a <= b, "value"),
    "$ref": _ref,
}

#!/usr/bin/env python3
"""A deterministic corpus of JSON Schemas for the grammar engine's mask parity and benchmark.

    python3 tools/grammar/schema_corpus.py --out corpus.jsonl [--count 560] [--seed 0]

Writes one JSON line per schema: {"id": "hand/weather_tool" | "gen/0042-enum_large",
"tags": [...], "schema": {...}}. The first HAND schemas are written by hand (API responses,
tool arguments, configs, OpenAI strict mode: every property required, additionalProperties
false); the rest are generated, schema i from random.Random(f"{seed}:{i}") and a category
taken round robin from CATEGORIES, so schema i does not depend on --count. Standard library
only.

Only these keywords appear (KEYWORDS): type, enum, const, properties, required,
additionalProperties, items, prefixItems, minItems, maxItems, minLength, maxLength, pattern,
format (date-time, date, time, uuid, email, ipv4), minimum, maximum, exclusiveMinimum,
exclusiveMaximum, anyOf, oneOf, allOf (one subschema), $ref, $defs; and boolean schemas.
Every schema is satisfiable and every oneOf has branches that llguidance can prove disjoint
(different types, or objects told apart by a required const property), so llguidance 1.9.1
compiles all of them (tests/grammar/test_llguidance_masks.py would report any that fails).
"""
import argparse
import json
import random
import string
import sys

KEYWORDS = frozenset([
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref", "$defs",
])
FORMATS = ("date-time", "date", "time", "uuid", "email", "ipv4")

# Simple regexes (digits, letters, phone numbers, codes); the unanchored ones match anywhere
# in the string (JSON Schema's `pattern` is a search, not a full match).
PATTERNS = [
    r"^[0-9]+$", r"^[0-9]{5}$", r"^\d{3}-\d{4}$", r"^[a-zA-Z]+$", r"^[a-z]{2,8}$",
    r"^[A-Z]{2}$", r"^[A-Z]{3}$", r"^[A-Z]{3}-[0-9]{2,4}$", r"^\+?[0-9]{1,3}[ -]?[0-9]{3}[ -]?[0-9]{3,4}$",
    r"^\(\d{3}\) \d{3}-\d{4}$", r"^[0-9]{5}(-[0-9]{4})?$", r"^#[0-9a-fA-F]{6}$",
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$", r"^[a-z0-9_]{3,16}$",
    r"^(foo|bar|baz)_[a-z]{1,8}$", r"^[A-Z][a-z]+( [A-Z][a-z]+)*$", r"^\w+$", r"^[^@ ]+@[^@ ]+$",
    r"^SKU-\d{6}$", r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,20}$", r"^v\d+(\.\d+)?$", r"[0-9]", r"^abc",
    r"xyz$", r"ab+c", r"^[a-f0-9]{8}$", r"^(yes|no|maybe)$", r"^[^\"\\]{1,10}$", r"^[ -~]*$",
    r"^\d{4}-\d{2}-\d{2}$", r"^[A-Z]\d[A-Z] ?\d[A-Z]\d$", r"^\.{2,3}$", r"^(a|b)*c$",
]

WORDS = """id name title status type kind value count total price amount currency email phone
address street city zip country code label score rating tags items data meta page size limit
offset next prev created updated deleted owner author user group role enabled visible version
description summary content text url path method query params headers body result error
message details level source target start end duration unit latitude longitude color width
height depth weight quantity sku order invoice customer product category notes priority due
assignee reviewer state reason token expires scope session device os browser locale timezone
""".split()
ODD_KEYS = ["first name", "naïve", 'quote"d', "back\\slash", "tab\there", "ключ", "键", "emoji😀",
            "a/b", "", "$ref", "with:colon", "new\nline", "UPPER", "x-y_z.0"]


def word(rng):
    return rng.choice(WORDS)


def key_names(rng, n, odd=0.05):
    """n distinct property names, mostly from WORDS, a few with characters that need
    escaping or are not ASCII."""
    names = []
    while len(names) < n:
        if rng.random() < odd:
            k = rng.choice(ODD_KEYS)
        elif rng.random() < 0.3:
            k = f"{word(rng)}_{word(rng)}"
        else:
            k = word(rng)
        if k not in names:
            names.append(k)
    return names


def enum_strings(rng, n):
    """n distinct strings with shared prefixes (the trie of a large enum), a few odd ones."""
    stems = [word(rng) for _ in range(max(2, n // 25))]
    out = {}  # insertion-ordered: a set's order would follow PYTHONHASHSEED
    while len(out) < n:
        r = rng.random()
        if r < 0.6:
            s = f"{rng.choice(stems)}_{rng.randrange(10 * n)}"
        elif r < 0.8:
            s = "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(1, 12)))
        elif r < 0.9:
            s = f"{rng.choice(stems)} {rng.choice(stems)}"
        else:
            s = rng.choice(["é", "ü", "日本", "a\"b", "c\\d", "tab\t", "", "-", "😀", "x/y"]) + str(rng.randrange(n))
        out[s] = None
    return sorted(out, key=lambda s: rng.random())


# ---- leaf schemas --------------------------------------------------------------------------

def string_schema(rng):
    r = rng.random()
    if r < 0.35:
        return {"type": "string"}
    if r < 0.55:
        lo = rng.randint(0, 5)
        s = {"type": "string", "minLength": lo}
        if rng.random() < 0.8:
            s["maxLength"] = lo + rng.randint(0, 20)
        return s
    if r < 0.8:
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    return {"type": "string", "format": rng.choice(FORMATS)}


def integer_schema(rng):
    s = {"type": "integer"}
    r = rng.random()
    if r < 0.3:
        return s
    lo = rng.choice([-1000, -10, -1, 0, 0, 1, 5, 100, 1900])
    span = rng.choice([1, 2, 9, 10, 99, 1000, 100000])
    if r < 0.55:
        s["minimum"], s["maximum"] = lo, lo + span
    elif r < 0.7:
        s["exclusiveMinimum"], s["maximum"] = lo, lo + span
    elif r < 0.85:
        s["minimum"], s["exclusiveMaximum"] = lo, lo + span
    elif r < 0.93:
        s["minimum"] = lo
    else:
        s["exclusiveMaximum"] = lo
    return s


def number_schema(rng):
    s = {"type": "number"}
    r = rng.random()
    if r < 0.3:
        return s
    lo = rng.choice([-180.0, -90, -1.5, 0, 0, 0.5, 1, 2.25, 100])
    span = rng.choice([0.5, 1, 1.25, 10, 180, 360, 1000.5])
    if r < 0.55:
        s["minimum"], s["maximum"] = lo, lo + span
    elif r < 0.7:
        s["exclusiveMinimum"], s["exclusiveMaximum"] = lo, lo + span
    elif r < 0.85:
        s["minimum"] = lo
    else:
        s["exclusiveMinimum"] = lo
    return s


def scalar_schema(rng):
    r = rng.random()
    if r < 0.35:
        return string_schema(rng)
    if r < 0.55:
        return integer_schema(rng)
    if r < 0.7:
        return number_schema(rng)
    if r < 0.78:
        return {"type": "boolean"}
    if r < 0.82:
        return {"type": "null"}
    if r < 0.9:
        return {"enum": enum_strings(rng, rng.randint(2, 8))}
    if r < 0.95:
        return {"type": [rng.choice(["string", "integer", "number", "boolean"]), "null"]}
    return {"const": rng.choice(["fixed", 42, True, None, 2.5, "v1"])}


# ---- composite schemas --------------------------------------------------------------------

def object_schema(rng, depth, value_fn, strict=False, n=None):
    """An object of n properties whose values come from value_fn(rng, depth - 1)."""
    n = rng.randint(1, 5) if n is None else n
    names = key_names(rng, n)
    props = {k: value_fn(rng, depth - 1) for k in names}
    s = {"type": "object", "properties": props}
    if strict:
        s["required"] = list(names)
        s["additionalProperties"] = False
        return s
    req = [k for k in names if rng.random() < 0.5]
    if req:
        s["required"] = req
    r = rng.random()
    if r < 0.4:
        s["additionalProperties"] = False
    elif r < 0.5:
        s["additionalProperties"] = True
    elif r < 0.6:
        s["additionalProperties"] = scalar_schema(rng)
    return s


def array_schema(rng, depth, value_fn):
    s = {"type": "array", "items": value_fn(rng, depth - 1)}
    r = rng.random()
    if r < 0.3:
        s["minItems"] = rng.randint(0, 2)
        s["maxItems"] = s["minItems"] + rng.randint(0, 3)
    elif r < 0.45:
        s["minItems"] = rng.randint(1, 3)
    elif r < 0.6:
        s["maxItems"] = rng.randint(0, 4)
    return s


def random_schema(rng, depth):
    """Any mix of the features, depth levels at most."""
    if depth <= 0:
        return scalar_schema(rng)
    r = rng.random()
    if r < 0.3:
        return scalar_schema(rng)
    if r < 0.55:
        return object_schema(rng, depth, random_schema)
    if r < 0.7:
        return array_schema(rng, depth, random_schema)
    if r < 0.77:
        return {"anyOf": [random_schema(rng, depth - 1) for _ in range(rng.randint(2, 3))]}
    if r < 0.84:
        return oneof_schema(rng, depth)
    if r < 0.88:
        return {"allOf": [random_schema(rng, depth - 1)]}
    if r < 0.93:
        return prefix_items_schema(rng, depth)
    if r < 0.96:
        return rng.choice([True, {"type": "object"}, {"type": "array"}, {}])
    return {"enum": [rng.choice([1, "a", None, True, 2.5, [1, 2], {"k": "v"}]) for _ in range(3)]}


def prefix_items_schema(rng, depth):
    n = rng.randint(1, 4)
    s = {"type": "array", "prefixItems": [scalar_schema(rng) if depth <= 1 else random_schema(rng, depth - 1)
                                          for _ in range(n)]}
    r = rng.random()
    if r < 0.4:
        s["items"] = False
        if rng.random() < 0.5:
            s["minItems"] = n
    elif r < 0.7:
        s["items"] = scalar_schema(rng)
        if rng.random() < 0.5:
            s["maxItems"] = n + rng.randint(0, 3)
    return s


def oneof_schema(rng, depth):
    """oneOf with provably disjoint branches: distinct types, or objects with a required
    const discriminator."""
    if rng.random() < 0.5:
        types = rng.sample(["string", "integer", "boolean", "null", "array", "object"], rng.randint(2, 4))
        branches = []
        for t in types:
            if t == "string":
                branches.append(string_schema(rng))
            elif t == "integer":
                branches.append(rng.choice([integer_schema(rng), number_schema(rng)]))
            elif t == "boolean":
                branches.append({"type": "boolean"})
            elif t == "null":
                branches.append({"type": "null"})
            elif t == "array":
                branches.append(array_schema(rng, max(depth, 1), lambda r, d: scalar_schema(r)))
            else:
                branches.append(object_schema(rng, max(depth, 1), lambda r, d: scalar_schema(r)))
        return {"oneOf": branches}
    tag = rng.choice(["type", "kind", "op", "event"])
    branches = []
    for v in enum_strings(rng, rng.randint(2, 4)):
        names = [k for k in key_names(rng, rng.randint(1, 3)) if k != tag]
        props = {tag: {"const": v}}
        props.update({k: scalar_schema(rng) if depth <= 1 else random_schema(rng, depth - 1) for k in names})
        b = {"type": "object", "properties": props, "required": [tag] + [k for k in names if rng.random() < 0.5]}
        if rng.random() < 0.5:
            b["additionalProperties"] = False
        branches.append(b)
    return {"oneOf": branches}


def deep_schema(rng, depth):
    """A chain of nested objects and arrays, depth levels deep (6 to 10)."""
    if depth == 0:
        return scalar_schema(rng)
    if rng.random() < 0.65:
        names = key_names(rng, rng.randint(1, 3))
        inner = rng.choice(names)
        props = {k: deep_schema(rng, depth - 1) if k == inner else scalar_schema(rng) for k in names}
        s = {"type": "object", "properties": props, "required": [inner]}
        if rng.random() < 0.5:
            s["additionalProperties"] = False
        return s
    s = {"type": "array", "items": deep_schema(rng, depth - 1), "minItems": 1}
    if rng.random() < 0.5:
        s["maxItems"] = rng.randint(1, 2)
    return s


def recursive_schema(rng):
    """$defs with a recursive $ref: trees, linked lists, expressions, JSON-like values."""
    kind = rng.choice(["tree", "list", "expr", "nested_list", "menu", "json"])
    if kind == "tree":
        node = {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "value": scalar_schema(rng),
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
            "required": ["name"]}
        if rng.random() < 0.5:
            node["additionalProperties"] = False
        return {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    if kind == "list":
        return {"$defs": {"cell": {"type": "object", "properties": {
            "head": scalar_schema(rng),
            "tail": {"anyOf": [{"$ref": "#/$defs/cell"}, {"type": "null"}]}},
            "required": ["head", "tail"], "additionalProperties": False}},
            "type": "object", "properties": {"list": {"$ref": "#/$defs/cell"}}, "required": ["list"]}
    if kind == "expr":
        return {"$defs": {"expr": {"anyOf": [
            {"type": "number"},
            {"type": "object", "properties": {
                "op": {"enum": ["+", "-", "*", "/"]},
                "left": {"$ref": "#/$defs/expr"}, "right": {"$ref": "#/$defs/expr"}},
             "required": ["op", "left", "right"], "additionalProperties": False}]}},
            "$ref": "#/$defs/expr"}
    if kind == "nested_list":
        return {"$defs": {"item": {"anyOf": [{"type": "integer"},
                                             {"type": "array", "items": {"$ref": "#/$defs/item"}}]}},
                "type": "array", "items": {"$ref": "#/$defs/item"}}
    if kind == "menu":
        return {"$defs": {"entry": {"type": "object", "properties": {
            "label": {"type": "string"}, "shortcut": {"type": "string", "pattern": r"^[A-Z]$"},
            "submenu": {"type": "array", "items": {"$ref": "#/$defs/entry"}}},
            "required": ["label"], "additionalProperties": False}},
            "type": "object", "properties": {"menu": {"type": "array", "items": {"$ref": "#/$defs/entry"}}},
            "required": ["menu"], "additionalProperties": False}
    return {"$defs": {"json": {"anyOf": [
        {"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
        {"type": "array", "items": {"$ref": "#/$defs/json"}},
        {"type": "object", "additionalProperties": {"$ref": "#/$defs/json"}}]}},
        "$ref": "#/$defs/json"}


def defs_schema(rng):
    """Non-recursive $defs shared by several properties."""
    defs = {"addr": object_schema(rng, 1, lambda r, d: scalar_schema(r)),
            "id": rng.choice([{"type": "string", "format": "uuid"}, {"type": "integer", "minimum": 1}])}
    s = {"$defs": defs, "type": "object", "properties": {
        "id": {"$ref": "#/$defs/id"}, "home": {"$ref": "#/$defs/addr"},
        "work": {"anyOf": [{"$ref": "#/$defs/addr"}, {"type": "null"}]},
        "others": {"type": "array", "items": {"$ref": "#/$defs/addr"}, "maxItems": 2}},
        "required": ["id", "home"]}
    if rng.random() < 0.5:
        s["additionalProperties"] = False
    return s


# ---- categories ----------------------------------------------------------------------------

def cat_scalar(rng):
    return rng.choice([{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
                       {"type": "null"}, {"type": "object"}, {"type": "array"}, {},
                       {"type": ["integer", "string"]}, {"type": ["number", "null", "boolean"]},
                       {"type": ["array", "object"]}])


def cat_string(rng):
    s = string_schema(rng)
    if rng.random() < 0.5:
        return s
    return object_schema(rng, 1, lambda r, d: string_schema(r), strict=rng.random() < 0.5)


def cat_pattern(rng):
    if rng.random() < 0.5:
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    names = key_names(rng, rng.randint(1, 4))
    return {"type": "object", "properties": {k: {"type": "string", "pattern": rng.choice(PATTERNS)}
                                             for k in names}, "required": names[:1]}


def cat_format(rng):
    if rng.random() < 0.4:
        return {"type": "string", "format": rng.choice(FORMATS)}
    names = key_names(rng, rng.randint(2, 5))
    return {"type": "object", "properties": {k: {"type": "string", "format": rng.choice(FORMATS)}
                                             for k in names}, "required": names,
            "additionalProperties": False}


def cat_numbers(rng):
    if rng.random() < 0.4:
        return rng.choice([integer_schema, number_schema])(rng)
    return object_schema(rng, 1, lambda r, d: rng.choice([integer_schema, number_schema])(r))


def cat_enum_small(rng):
    r = rng.random()
    if r < 0.5:
        return {"enum": enum_strings(rng, rng.randint(1, 12))}
    if r < 0.75:
        return {"type": "string", "enum": enum_strings(rng, rng.randint(2, 6))}
    return {"enum": ["red", 1, 2.5, None, True, [1, "a"], {"k": [None]}, "", -3][:rng.randint(2, 9)]}


def cat_enum_large(rng):
    values = enum_strings(rng, rng.randint(200, 2000))
    if rng.random() < 0.5:
        return {"enum": values}
    return {"type": "object", "properties": {"choice": {"enum": values}, "note": {"type": "string"}},
            "required": ["choice"], "additionalProperties": False}


def cat_const(rng):
    c = rng.choice(["2.0", "fixed", 0, -7, 3.25, True, False, None, [1, 2, 3], {"a": {"b": [True]}},
                    "a\"b\\c", "日本語"])
    if rng.random() < 0.5:
        return {"const": c}
    return {"type": "object", "properties": {"version": {"const": c}, "data": scalar_schema(rng)},
            "required": ["version", "data"]}


def cat_object(rng):
    return object_schema(rng, 2, random_schema, strict=rng.random() < 0.3, n=rng.randint(1, 8))


def cat_optional(rng):
    """Many optional properties: the allowed continuation after each one is a set of keys."""
    names = key_names(rng, rng.randint(3, 10))
    s = {"type": "object", "properties": {k: scalar_schema(rng) for k in names}}
    req = [k for k in names if rng.random() < 0.25]
    if req:
        s["required"] = req
    if rng.random() < 0.6:
        s["additionalProperties"] = False
    return s


def cat_additional(rng):
    r = rng.random()
    if r < 0.4:
        return {"type": "object", "additionalProperties": scalar_schema(rng)}
    if r < 0.6:
        return {"type": "object", "additionalProperties": object_schema(rng, 1, lambda r, d: scalar_schema(r))}
    s = object_schema(rng, 1, lambda r, d: scalar_schema(r))
    s["additionalProperties"] = rng.choice([True, False, scalar_schema(rng)])
    return s


def cat_deep(rng):
    return deep_schema(rng, rng.randint(6, 10))


def cat_array(rng):
    s = array_schema(rng, 2, random_schema)
    return s if rng.random() < 0.7 else {"type": "array", "items": array_schema(rng, 1, random_schema)}


def cat_prefix(rng):
    return prefix_items_schema(rng, rng.randint(1, 2))


def cat_anyof(rng):
    return {"anyOf": [random_schema(rng, 1) for _ in range(rng.randint(2, 4))]}


def cat_oneof(rng):
    return oneof_schema(rng, rng.randint(1, 2))


def cat_allof(rng):
    inner = random_schema(rng, 2)
    return {"allOf": [inner]} if rng.random() < 0.7 else {
        "type": "object", "properties": {"wrapped": {"allOf": [inner]}}, "required": ["wrapped"]}


def cat_refs(rng):
    return defs_schema(rng) if rng.random() < 0.4 else recursive_schema(rng)


def cat_boolean(rng):
    names = key_names(rng, 3)
    return rng.choice([
        True,
        {"type": "object", "properties": {names[0]: True, names[1]: False, names[2]: scalar_schema(rng)}},
        {"type": "array", "items": True, "maxItems": 3},
        {"type": "array", "prefixItems": [True, {"type": "integer"}], "items": False},
        {"type": "object", "properties": {names[0]: {"type": "string"}}, "additionalProperties": True},
        {"anyOf": [True, {"type": "integer"}]},
    ])


def cat_strict(rng):
    """OpenAI strict mode: every property required, additionalProperties false everywhere,
    optional values spelled as ["T", "null"] or anyOf with null."""
    def value(r, d):
        x = r.random()
        if d > 0 and x < 0.25:
            return object_schema(r, d, value, strict=True)
        if d > 0 and x < 0.4:
            return {"type": "array", "items": value(r, d - 1)}
        if x < 0.55:
            return {"type": [r.choice(["string", "integer", "number", "boolean"]), "null"]}
        if x < 0.65:
            return {"anyOf": [object_schema(r, 1, lambda rr, dd: scalar_schema(rr), strict=True), {"type": "null"}]}
        if x < 0.75:
            return {"type": "string", "enum": enum_strings(r, r.randint(2, 5))}
        return {"type": r.choice(["string", "integer", "number", "boolean"])}
    return object_schema(rng, 3, value, strict=True, n=rng.randint(1, 6))


def cat_mixed(rng):
    return random_schema(rng, rng.randint(2, 4))


CATEGORIES = [
    ("scalar", cat_scalar), ("string", cat_string), ("pattern", cat_pattern), ("format", cat_format),
    ("numbers", cat_numbers), ("enum_small", cat_enum_small), ("enum_large", cat_enum_large),
    ("const", cat_const), ("object", cat_object), ("optional", cat_optional),
    ("additional", cat_additional), ("deep", cat_deep), ("array", cat_array), ("prefix", cat_prefix),
    ("anyof", cat_anyof), ("oneof", cat_oneof), ("allof", cat_allof), ("refs", cat_refs),
    ("boolean", cat_boolean), ("strict", cat_strict), ("mixed", cat_mixed), ("mixed", cat_mixed),
]


# ---- hand-written schemas ------------------------------------------------------------------

def strict(props, **extra):
    """OpenAI strict-mode object: all properties required, no others."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False, **extra}


S, I, N, B, NULL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}
COUNTRIES = sorted({a + b for a in "ABCDEFGHIKLMNPRSTUVZ" for b in "ADEGILMNORSTUZ"})[:249]
TOOLS = [f"{v}_{o}" for v in ["get", "list", "create", "update", "delete", "search"]
         for o in ["user", "order", "file", "event", "ticket"]]

HAND = {
    "weather_tool": strict({"location": S, "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit", None]}}),
    "search_tool": strict({"query": {"type": "string", "minLength": 1, "maxLength": 200},
                           "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
                           "site": {"type": ["string", "null"]}}),
    "calendar_event_tool": strict({
        "title": S, "date": {"type": "string", "format": "date"},
        "start": {"type": "string", "format": "time"}, "end": {"type": "string", "format": "time"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 5},
        "recurrence": {"enum": ["none", "daily", "weekly", "monthly"]}}),
    "sql_tool": strict({"query": S, "params": {"type": "array", "items": {"anyOf": [S, N, B, NULL]}}}),
    "send_email_tool": strict({"to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1},
                               "subject": {"type": "string", "maxLength": 80}, "body": S,
                               "priority": {"enum": ["low", "normal", "high"]}}),
    "tool_call": strict({"name": {"enum": TOOLS}, "arguments": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}}),
    "chat_message": {"type": "object", "properties": {
        "role": {"enum": ["system", "user", "assistant", "tool"]},
        "content": {"anyOf": [S, NULL]},
        "tool_calls": {"type": "array", "items": strict({
            "id": {"type": "string", "pattern": r"^call_[A-Za-z0-9]{8}$"}, "type": {"const": "function"},
            "function": strict({"name": S, "arguments": S})})}},
        "required": ["role", "content"], "additionalProperties": False},
    "jsonrpc_request": {"type": "object", "properties": {
        "jsonrpc": {"const": "2.0"}, "method": {"type": "string", "pattern": r"^[a-z]+(\.[a-z]+)*$"},
        "params": {"anyOf": [{"type": "array"}, {"type": "object"}]},
        "id": {"oneOf": [I, S, NULL]}}, "required": ["jsonrpc", "method"], "additionalProperties": False},
    "github_issue": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 1}, "number": {"type": "integer", "minimum": 1}, "title": S,
        "state": {"enum": ["open", "closed"]}, "locked": B,
        "user": {"type": "object", "properties": {"login": {"type": "string", "pattern": r"^[A-Za-z0-9-]{1,39}$"},
                                                  "id": I, "site_admin": B}, "required": ["login", "id"]},
        "labels": {"type": "array", "items": {"type": "object", "properties": {
            "name": S, "color": {"type": "string", "pattern": r"^[0-9a-f]{6}$"}}, "required": ["name"]}},
        "assignees": {"type": "array", "items": {"type": "string"}},
        "comments": {"type": "integer", "minimum": 0},
        "created_at": {"type": "string", "format": "date-time"},
        "closed_at": {"type": ["string", "null"], "format": "date-time"},
        "body": {"type": ["string", "null"]}},
        "required": ["id", "number", "title", "state", "user", "created_at"]},
    "user_profile": {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"}, "email": {"type": "string", "format": "email"},
        "display_name": {"type": "string", "minLength": 1, "maxLength": 32},
        "age": {"type": "integer", "minimum": 13, "maximum": 130},
        "signup": {"type": "string", "format": "date-time"}, "country": {"enum": COUNTRIES},
        "interests": {"type": "array", "items": S, "maxItems": 10}},
        "required": ["id", "email"], "additionalProperties": False},
    "paginated_response": {"type": "object", "properties": {
        "data": {"type": "array", "items": {"type": "object", "properties": {"id": I, "name": S}, "required": ["id"]}},
        "page": {"type": "integer", "minimum": 1}, "per_page": {"type": "integer", "minimum": 1, "maximum": 100},
        "total": {"type": "integer", "minimum": 0}, "next": {"type": ["string", "null"]}},
        "required": ["data", "page", "total"]},
    "error_response": strict({"error": strict({"code": {"type": "integer", "minimum": 100, "maximum": 599},
                                               "message": S, "details": {"type": "array", "items": S}})}),
    "address": {"type": "object", "properties": {
        "street": S, "city": S, "postal_code": {"type": "string", "pattern": r"^[0-9]{5}(-[0-9]{4})?$"},
        "country": {"type": "string", "pattern": r"^[A-Z]{2}$"},
        "phone": {"type": "string", "pattern": r"^\+?[0-9]{1,3}[ -]?[0-9]{3}[ -]?[0-9]{3,4}$"}},
        "required": ["street", "city", "country"], "additionalProperties": False},
    "invoice": {"type": "object", "properties": {
        "invoice_no": {"type": "string", "pattern": r"^INV-[0-9]{6}$"}, "issued": {"type": "string", "format": "date"},
        "customer": {"type": "object", "properties": {"name": S, "email": {"type": "string", "format": "email"}},
                     "required": ["name"]},
        "lines": {"type": "array", "minItems": 1, "items": strict({
            "sku": {"type": "string", "pattern": r"^SKU-\d{6}$"}, "qty": {"type": "integer", "minimum": 1, "maximum": 999},
            "unit_price": {"type": "number", "minimum": 0}})},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "total": {"type": "number", "exclusiveMinimum": 0}},
        "required": ["invoice_no", "lines", "total"]},
    "geo_point": strict({"lat": {"type": "number", "minimum": -90, "maximum": 90},
                         "lon": {"type": "number", "minimum": -180, "maximum": 180}}),
    "log_entry": {"type": "object", "properties": {
        "ts": {"type": "string", "format": "date-time"}, "level": {"enum": ["debug", "info", "warn", "error", "fatal"]},
        "msg": S, "client_ip": {"type": "string", "format": "ipv4"}, "request_id": {"type": "string", "format": "uuid"},
        "latency_ms": {"type": "number", "minimum": 0}, "fields": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "null"]}}},
        "required": ["ts", "level", "msg"]},
    "recipe": strict({"name": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12},
                      "ingredients": {"type": "array", "minItems": 1, "items": strict({
                          "item": S, "amount": {"type": "number", "exclusiveMinimum": 0},
                          "unit": {"enum": ["g", "kg", "ml", "l", "tsp", "tbsp", "cup", "piece"]}})},
                      "steps": {"type": "array", "items": S, "minItems": 1, "maxItems": 8}}),
    "classification": strict({"label": {"enum": ["positive", "negative", "neutral", "mixed"]},
                              "confidence": {"type": "number", "minimum": 0, "maximum": 1}}),
    "entities": strict({"entities": {"type": "array", "items": strict({
        "text": S, "type": {"enum": ["PERSON", "ORG", "LOC", "DATE", "MONEY"]},
        "start": {"type": "integer", "minimum": 0}, "end": {"type": "integer", "minimum": 0}})}}),
    "file_tree": {"$defs": {"entry": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": r"^[^/]+$"}, "kind": {"enum": ["file", "dir"]},
        "size": {"type": "integer", "minimum": 0},
        "children": {"type": "array", "items": {"$ref": "#/$defs/entry"}}},
        "required": ["name", "kind"], "additionalProperties": False}}, "$ref": "#/$defs/entry"},
    "linked_list": {"$defs": {"node": {"type": "object", "properties": {
        "value": I, "next": {"anyOf": [{"$ref": "#/$defs/node"}, NULL]}},
        "required": ["value", "next"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
    "binary_tree": {"$defs": {"t": {"type": ["object", "null"], "properties": {
        "key": I, "left": {"$ref": "#/$defs/t"}, "right": {"$ref": "#/$defs/t"}},
        "required": ["key", "left", "right"], "additionalProperties": False}}, "$ref": "#/$defs/t"},
    "json_patch": {"type": "array", "items": {"oneOf": [
        strict({"op": {"const": "add"}, "path": S, "value": True}),
        strict({"op": {"const": "remove"}, "path": S}),
        strict({"op": {"const": "replace"}, "path": S, "value": True}),
        strict({"op": {"const": "move"}, "from": S, "path": S})]}},
    "shapes": {"type": "object", "properties": {"shapes": {"type": "array", "items": {"oneOf": [
        strict({"kind": {"const": "circle"}, "r": {"type": "number", "exclusiveMinimum": 0}}),
        strict({"kind": {"const": "rect"}, "w": {"type": "number", "minimum": 0}, "h": {"type": "number", "minimum": 0}}),
        strict({"kind": {"const": "polygon"}, "points": {"type": "array", "minItems": 3, "items": {
            "type": "array", "prefixItems": [N, N], "items": False, "minItems": 2}}})]}}}, "required": ["shapes"]},
    "ci_config": {"type": "object", "properties": {
        "name": S, "on": {"type": "array", "items": {"enum": ["push", "pull_request", "schedule"]}},
        "jobs": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "runs-on": {"enum": ["ubuntu-latest", "macos-latest", "windows-latest"]},
            "timeout-minutes": {"type": "integer", "minimum": 1, "maximum": 360},
            "steps": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
                "name": S, "run": S, "uses": {"type": "string", "pattern": r"^[a-z-]+/[a-z-]+@v\d+$"}},
                "additionalProperties": False}}}, "required": ["runs-on", "steps"], "additionalProperties": False}}},
        "required": ["jobs"]},
    "package_json": {"type": "object", "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9-]+$"},
        "version": {"type": "string", "pattern": r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"},
        "private": B, "scripts": {"type": "object", "additionalProperties": S},
        "dependencies": {"type": "object", "additionalProperties": {"type": "string", "pattern": r"^[\^~]?\d+\.\d+\.\d+$"}}},
        "required": ["name", "version"]},
    "feature_flags": {"type": "object", "additionalProperties": B},
    "server_config": strict({
        "listen": strict({"host": {"type": "string", "format": "ipv4"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}}),
        "tls": {"anyOf": [strict({"cert": S, "key": S}), NULL]},
        "workers": {"type": "integer", "minimum": 1, "maximum": 64},
        "log_level": {"enum": ["trace", "debug", "info", "warn", "error"]},
        "upstreams": {"type": "array", "items": strict({"name": S, "addr": {"type": "string", "format": "ipv4"},
                                                         "weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 100}})}}),
    "bank_transaction": strict({"id": {"type": "string", "format": "uuid"},
                                "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000},
                                "currency": {"type": "string", "pattern": r"^[A-Z]{3}$"},
                                "iban": {"type": "string", "pattern": r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,20}$"},
                                "booked_at": {"type": "string", "format": "date-time"},
                                "direction": {"enum": ["debit", "credit"]}}),
    "sensor_reading": {"type": "array", "prefixItems": [
        {"type": "string", "format": "date-time"}, N, {"enum": ["C", "F", "K", "%", "hPa"]}],
        "items": False, "minItems": 3},
    "rgb_color": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 255}] * 3,
                  "items": False, "minItems": 3},
    "semver_release": strict({"version": {"type": "string", "pattern": r"^v?\d+\.\d+\.\d+(-[a-z]+\.\d+)?$"},
                              "date": {"type": "string", "format": "date"}, "notes": {"type": "array", "items": S}}),
    "contact_card": {"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"}, "name": strict({"first": S, "last": S}),
        "emails": {"type": "array", "items": {"type": "string", "format": "email"}},
        "phones": {"type": "array", "items": {"type": "object", "properties": {
            "kind": {"enum": ["home", "work", "mobile"]}, "number": {"type": "string", "pattern": r"^\+[0-9]{7,15}$"}},
            "required": ["number"]}}}, "required": ["id", "name"]},
    "translation": strict({"source_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
                           "target_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
                           "text": {"type": "string", "maxLength": 200}}),
    "movie_review": strict({"title": S, "year": {"type": "integer", "minimum": 1888, "maximum": 2030},
                            "rating": {"type": "integer", "minimum": 1, "maximum": 5},
                            "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 5},
                            "spoilers": B}),
    "time_slot": strict({"day": {"enum": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]},
                         "start": {"type": "string", "format": "time"}, "end": {"type": "string", "format": "time"}}),
    "country_pick": strict({"country": {"enum": COUNTRIES}, "reason": {"type": ["string", "null"]}}),
    "optional_flags": {"type": "object", "properties": {"a": True, "b": False, "c": I, "d": {"type": "array", "items": True}}},
    "openai_strict_nested": strict({
        "user": strict({"name": S, "age": {"type": ["integer", "null"]},
                        "address": {"anyOf": [strict({"street": S, "city": S}), NULL]}}),
        "orders": {"type": "array", "items": strict({"id": S, "items": {"type": "array", "items": strict({
            "sku": S, "qty": I})}, "status": {"enum": ["pending", "shipped", "delivered"]}})},
        "notes": {"type": ["string", "null"]}}),
    "kv_store_put": strict({"key": {"type": "string", "pattern": r"^[a-z][a-z0-9_:]{0,63}$"},
                            "value": {"anyOf": [S, N, B, NULL, {"type": "array"}, {"type": "object"}]},
                            "ttl_seconds": {"type": ["integer", "null"], "minimum": 0}}),
    "http_request": {"type": "object", "properties": {
        "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]}, "url": {"type": "string", "pattern": r"^https?://"},
        "headers": {"type": "object", "additionalProperties": S},
        "body": {"anyOf": [S, {"type": "object"}, NULL]}, "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 300}},
        "required": ["method", "url"], "additionalProperties": False},
    "matrix": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
        "type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "number"}}},
    "wrapped_allof": {"allOf": [strict({"id": I, "tags": {"type": "array", "items": S}})]},
    "any_json": {},
    "boolean_true": True,
}


def hand_written():
    return [{"id": f"hand/{name}", "tags": ["hand"], "schema": schema} for name, schema in HAND.items()]


def generated(i, seed=0):
    rng = random.Random(f"{seed}:{i}")
    name, fn = CATEGORIES[i % len(CATEGORIES)]
    return {"id": f"gen/{i:04d}-{name}", "tags": ["gen", name], "schema": fn(rng)}


def check_keywords(schema, where="#"):
    """Raises ValueError on a keyword outside KEYWORDS (property names and $defs names aside)."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ValueError(f"[schema_corpus] {where}: not a schema: {schema!r}")
    for k, v in schema.items():
        if k not in KEYWORDS:
            raise ValueError(f"[schema_corpus] {where}: keyword {k!r} is not in the corpus's list")
        if k in ("properties", "$defs"):
            for name, sub in v.items():
                check_keywords(sub, f"{where}/{k}/{name}")
        elif k in ("items", "additionalProperties"):
            check_keywords(v, f"{where}/{k}")
        elif k in ("prefixItems", "anyOf", "oneOf", "allOf"):
            for j, sub in enumerate(v):
                check_keywords(sub, f"{where}/{k}/{j}")
        elif k == "format" and v not in FORMATS:
            raise ValueError(f"[schema_corpus] {where}: format {v!r}")


def build(count=560, seed=0):
    """count schemas: the hand-written ones first, then generated ones."""
    out = hand_written()[:count]
    i = 0
    while len(out) < count:
        out.append(generated(i, seed))
        i += 1
    for rec in out:
        check_keywords(rec["schema"], rec["id"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSONL file to write")
    ap.add_argument("--count", type=int, default=560, help="schemas (>= 500 for the benchmark)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    corpus = build(args.count, args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        for rec in corpus:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    tags = {}
    for rec in corpus:
        tags[rec["tags"][-1]] = tags.get(rec["tags"][-1], 0) + 1
    print(f"schema_corpus: {len(corpus)} schemas to {args.out}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(tags.items())), file=sys.stderr)


if __name__ == "__main__":
    main()

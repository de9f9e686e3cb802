#!/usr/bin/env python3
"""Random valid and invalid JSON documents for a JSON Schema (the corpus's keyword subset).

    from documents import documents_for
    d = documents_for(schema, seed="gen/0042", n_valid=2, n_invalid=2)
    d["valid"]   -> [{"text": '{"a":1}', "style": "compact"}, ...]
    d["invalid"] -> [{"text": '{"a":"x"}', "mutation": "wrong_type"}, ...]

    python3 tools/grammar/documents.py --corpus corpus.jsonl [--valid 2] [--invalid 2] [--show 3]
        checks every generated document with Validator and, where the running python has it,
        with the `jsonschema` package (Draft 2020-12 with its FormatChecker), prints counts.

The language the documents are judged against is parley's (and the harness's llguidance
options'): JSON text with [ \\t\\n]{0,20} between tokens and none around the root value,
valid for the schema, objects' properties in the order of `properties` (llguidance fixes
that order; see llguidance_masks.py), no duplicate keys. Valid documents are built in that
language: compact, spaced, pretty (indent capped so that no run passes 20) or random runs
of 0-20 whitespace characters. Invalid ones are mutations of a valid one (wrong type,
missing required key, extra key under additionalProperties false, number out of range,
pattern / length / enum / format violations, too few or too many items, truncation, broken
syntax, whitespace outside the language), each kept only when Validator says the result is
outside the language. Validator is written here for the corpus's keywords (no dependency);
it follows JSON Schema 2020-12, with ECMA-262 semantics for `pattern` (\\d, \\w ASCII;
$ only at the end; but "." is all except \\n, as in llguidance), llguidance 1.9.1's regexes
for the six formats, and llguidance's integers (digits only: 1.0 is a number but not an
integer). Standard library only.
"""
import argparse
import json
import math
import random
import re
import sys

MAX_WS = 20
WS_CHARS = " \t\n"

# llguidance 1.9.1's format regexes (parser/src/json/formats.rs), matched in full.
FORMAT_RX = {
    "date-time": r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
                 r"(?:02)-(?:0[1-9]|1[0-9]|2[0-9]))[tT](?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)"
                 r"(?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])",
    "time": r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])",
    "date": r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
            r"02-(?:0[1-9]|1[0-9]|2[0-9]))",
    "email": r"[a-zA-Z0-9!#$%&'*+\-/=?^_`{|}~]+(?:\.[a-zA-Z0-9!#$%&'*+\-/=?^_`{|}~]+)*@(?:"
             r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
             r"|\[(?:(?:[0-9]|[1-9][0-9]|25[0-5]|2[0-4][0-9]|1[0-9][0-9])\.){3}(?:[0-9]|[1-9][0-9]|25[0-5]|2[0-4][0-9]|1[0-9][0-9])\])",
    "ipv4": r"(?:(?:[0-9]|[1-9][0-9]|25[0-5]|2[0-4][0-9]|1[0-9][0-9])\.){3}(?:[0-9]|[1-9][0-9]|25[0-5]|2[0-4][0-9]|1[0-9][0-9])",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
}
FORMAT_RE = {k: re.compile(v) for k, v in FORMAT_RX.items()}

# Characters for free text: ASCII, control characters (escaped), a few multi-byte ones; no
# raw U+007F, which llguidance does not allow in a JSON string.
TEXT_POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 3
             + list(" .,;:-_!?'()[]{}@#$%^&*+=~/`") + ['"', "\\", "\n", "\t", "\r", "\x01", "\x1f"]
             + ["é", "ü", "ß", "ñ", "中", "文", "日", "ж", "€", "😀", "🎉", "\u00a0", "\u2028"])
SAMPLE_POOL = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in "|<"] + ["é", "中", "😀", "\t"]


# ---- ECMA-262 patterns as Python regexes ----------------------------------------------------

def ecma_to_python(pattern):
    """JSON Schema's pattern (ECMA-262, no flags) as a Python regex for re.search:
    \\d and \\w are ASCII, $ matches only at the very end."""
    out, i, in_class = [], 0, False
    ascii_cls = {"d": "0-9", "w": "0-9A-Za-z_"}
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            e = pattern[i + 1]
            if e in ascii_cls:
                out.append(ascii_cls[e] if in_class else f"[{ascii_cls[e]}]")
            elif e in "DW":
                if in_class:
                    raise ValueError(f"[documents] \\{e} inside a class: {pattern!r}")
                out.append(f"[^{ascii_cls[e.lower()]}]")
            else:
                out.append(c + e)
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = r"\Z"
        out.append(c)
        i += 1
    return "".join(out)


_PATTERN_CACHE = {}


def pattern_search(pattern, s):
    rx = _PATTERN_CACHE.get(pattern)
    if rx is None:
        rx = _PATTERN_CACHE[pattern] = re.compile(ecma_to_python(pattern))
    return rx.search(s) is not None


# ---- a sampler for the simple regexes of the corpus ----------------------------------------

class RegexSampler:
    """Parses literals, escapes, classes, '.', groups with '|', (?:...), anchors and the
    quantifiers * + ? {m} {m,} {m,n}; sample() returns a random string the pattern searches
    (unanchored ends get random text)."""

    def __init__(self, pattern):
        self.p, self.i = pattern, 0
        self.ast = self._alt()
        if self.i != len(self.p):
            raise ValueError(f"[documents] cannot sample pattern {pattern!r} at {self.i}")

    def _peek(self):
        return self.p[self.i] if self.i < len(self.p) else None

    def _alt(self):
        options = [self._seq()]
        while self._peek() == "|":
            self.i += 1
            options.append(self._seq())
        return ("alt", options) if len(options) > 1 else options[0]

    def _seq(self):
        items = []
        while self._peek() not in (None, "|", ")"):
            atom = self._atom()
            items.append(self._quant(atom))
        return ("cat", items)

    def _quant(self, atom):
        c = self._peek()
        if c in ("*", "+", "?"):
            self.i += 1
            return ("rep", atom, {"*": 0, "+": 1, "?": 0}[c], {"*": None, "+": None, "?": 1}[c])
        if c == "{":
            m = re.match(r"\{(\d+)(,(\d*))?\}", self.p[self.i:])
            if m:
                self.i += m.end()
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                return ("rep", atom, lo, hi)
        return atom

    def _escape(self, e):
        classes = {"d": "0123456789", "w": "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_",
                   "s": " \t\n"}
        if e in classes:
            return ("set", list(classes[e]))
        if e in "DWS":
            bad = classes[e.lower()]
            return ("set", [c for c in SAMPLE_POOL if c not in bad])
        return ("lit", {"n": "\n", "t": "\t"}.get(e, e))

    def _atom(self):
        c = self.p[self.i]
        self.i += 1
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            node = self._alt()
            if self._peek() != ")":
                raise ValueError(f"[documents] unbalanced group in {self.p!r}")
            self.i += 1
            return node
        if c == "[":
            return self._class()
        if c == ".":
            return ("set", [x for x in SAMPLE_POOL if x != "\n"])
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == "\\":
            e = self.p[self.i]
            self.i += 1
            return self._escape(e)
        return ("lit", c)

    def _class(self):
        negate = self._peek() == "^"
        if negate:
            self.i += 1
        chars = []
        first = True
        while first or self._peek() != "]":
            first = False
            c = self.p[self.i]
            self.i += 1
            if c == "\\":
                node = self._escape(self.p[self.i])
                self.i += 1
                members = node[1] if node[0] == "set" else [node[1]]
            else:
                members = [c]
            if len(members) == 1 and self._peek() == "-" and self.p[self.i + 1] != "]":
                hi = self.p[self.i + 1]
                if hi == "\\":
                    hi = self._escape(self.p[self.i + 2])[1]
                    self.i += 1
                self.i += 2
                members = [chr(x) for x in range(ord(members[0]), ord(hi) + 1)]
            chars.extend(members)
        self.i += 1
        if negate:
            return ("set", [x for x in SAMPLE_POOL if x not in chars])
        return ("set", chars)

    def _gen(self, node, rng, out):
        kind = node[0]
        if kind == "lit":
            out.append(node[1])
        elif kind == "set":
            out.append(rng.choice(node[1]))
        elif kind == "cat":
            for n in node[1]:
                self._gen(n, rng, out)
        elif kind == "alt":
            self._gen(rng.choice(node[1]), rng, out)
        elif kind == "rep":
            hi = node[3] if node[3] is not None else node[2] + 4
            for _ in range(rng.randint(node[2], hi)):
                self._gen(node[1], rng, out)

    def sample(self, rng):
        out = []
        self._gen(self.ast, rng, out)
        s = "".join(out)
        items = self.ast[1] if self.ast[0] == "cat" else []
        if not (items and items[0] == ("bol",)):
            s = random_text(rng, 0, 3) + s
        if not (items and items[-1] == ("eol",)):
            s = s + random_text(rng, 0, 3)
        return s


_SAMPLERS = {}


def sample_pattern(pattern, rng):
    if pattern not in _SAMPLERS:
        _SAMPLERS[pattern] = RegexSampler(pattern)
    return _SAMPLERS[pattern].sample(rng)


def random_text(rng, lo, hi):
    return "".join(rng.choice(TEXT_POOL) for _ in range(rng.randint(lo, hi)))


def sample_format(fmt, rng):
    def date():
        return f"{rng.randint(1900, 2099):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"

    def time():
        t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        if rng.random() < 0.3:
            t += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
        r = rng.random()
        if r < 0.5:
            return t + "Z"
        if r < 0.55:
            return t + "z"
        return t + f"{rng.choice('+-')}{rng.randint(0, 23):02d}:{rng.choice([0, 30, 45]):02d}"

    if fmt == "date":
        return date()
    if fmt == "time":
        return time()
    if fmt == "date-time":
        return date() + rng.choice("TTTt") + time()
    if fmt == "uuid":
        h = "0123456789abcdef" if rng.random() < 0.8 else "0123456789ABCDEF"
        return "-".join("".join(rng.choice(h) for _ in range(n)) for n in (8, 4, 4, 4, 12))
    if fmt == "ipv4":
        return ".".join(str(rng.choice([0, 1, 9, 10, 99, 100, 127, 192, 199, 200, 249, 250, 255, rng.randint(0, 255)]))
                        for _ in range(4))
    if fmt == "email":
        local = ".".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_+-") for _ in range(rng.randint(1, 8)))
                         for _ in range(rng.randint(1, 2)))
        labels = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(1, 8)))
                  for _ in range(rng.randint(1, 3))]
        return f"{local}@{'.'.join(labels)}"
    raise ValueError(f"[documents] format {fmt!r}")


# ---- validation ----------------------------------------------------------------------------

def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def json_equal(a, b):
    """JSON equality: 1 == 1.0, but true != 1."""
    ta, tb = json_type(a), json_type(b)
    if {ta, tb} <= {"integer", "number"}:
        return a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def has_type(v, t):
    jt = json_type(v)
    if t == "number":
        return jt in ("integer", "number")
    if t == "integer":  # llguidance: digits only, so 1.0 and 1e2 are not integers (2020-12 says they are)
        return jt == "integer"
    return jt == t


class Validator:
    """JSON Schema 2020-12 for the corpus's keywords (schema_corpus.KEYWORDS)."""

    def __init__(self, root):
        self.root = root

    def resolve(self, ref):
        if not ref.startswith("#"):
            raise ValueError(f"[documents] only local $ref: {ref!r}")
        node = self.root
        for part in ref[1:].split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def valid(self, schema, v):
        if schema is True:
            return True
        if schema is False:
            return False
        for k, s in schema.items():
            if not self._keyword(k, s, schema, v):
                return False
        return True

    def _keyword(self, k, s, schema, v):
        t = json_type(v)
        if k == "$ref":
            return self.valid(self.resolve(s), v)
        if k == "$defs":
            return True
        if k == "type":
            return any(has_type(v, x) for x in ([s] if isinstance(s, str) else s))
        if k == "enum":
            return any(json_equal(v, x) for x in s)
        if k == "const":
            return json_equal(v, s)
        if k == "anyOf":
            return any(self.valid(x, v) for x in s)
        if k == "oneOf":
            return sum(1 for x in s if self.valid(x, v)) == 1
        if k == "allOf":
            return all(self.valid(x, v) for x in s)
        if t == "object":
            return self._object_keyword(k, s, schema, v)
        if t == "array":
            return self._array_keyword(k, s, schema, v)
        if t == "string":
            if k == "minLength":
                return len(v) >= s
            if k == "maxLength":
                return len(v) <= s
            if k == "pattern":
                return pattern_search(s, v)
            if k == "format":
                return FORMAT_RE[s].fullmatch(v) is not None
        if t in ("integer", "number"):
            if k == "minimum":
                return v >= s
            if k == "maximum":
                return v <= s
            if k == "exclusiveMinimum":
                return v > s
            if k == "exclusiveMaximum":
                return v < s
        return True  # a keyword for another type

    def _object_keyword(self, k, s, schema, v):
        if k == "properties":
            return all(self.valid(s[name], v[name]) for name in v if name in s)
        if k == "required":
            return all(name in v for name in s)
        if k == "additionalProperties":
            props = schema.get("properties", {})
            return all(self.valid(s, v[name]) for name in v if name not in props)
        return True

    def _array_keyword(self, k, s, schema, v):
        if k == "prefixItems":
            return all(self.valid(x, y) for x, y in zip(s, v))
        if k == "items":
            return all(self.valid(s, y) for y in v[len(schema.get("prefixItems", [])):])
        if k == "minItems":
            return len(v) >= s
        if k == "maxItems":
            return len(v) <= s
        return True

    def in_order(self, schema, v, depth=0):
        """llguidance's fixed property order: the keys of `properties` come first, in that
        order (for every object a schema branch describes; checked for the branch that is
        valid, or any when several are)."""
        if depth > 64 or isinstance(schema, bool):
            return True
        if "$ref" in schema:
            return self.in_order(self.resolve(schema["$ref"]), v, depth + 1)
        for k in ("anyOf", "oneOf"):
            if k in schema:
                branches = [b for b in schema[k] if self.valid(b, v)]
                if branches and not any(self.in_order(b, v, depth + 1) for b in branches):
                    return False
        for b in schema.get("allOf", []):
            if not self.in_order(b, v, depth + 1):
                return False
        if isinstance(v, dict):
            props = schema.get("properties", {})
            keys = list(v)
            listed = [k for k in keys if k in props]
            if keys[:len(listed)] != listed or listed != [k for k in props if k in v]:
                return False
            for name, x in v.items():
                sub = props.get(name, schema.get("additionalProperties", True))
                if not self.in_order(sub, x, depth + 1):
                    return False
        elif isinstance(v, list):
            pre = schema.get("prefixItems", [])
            for j, x in enumerate(v):
                sub = pre[j] if j < len(pre) else schema.get("items", True)
                if not self.in_order(sub, x, depth + 1):
                    return False
        return True


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def whitespace_ok(text):
    """No whitespace around the root value; runs between tokens of at most MAX_WS characters
    from [ \\t\\n]. (Assumes the text parses as JSON.)"""
    if not text or text[0] in " \t\n\r" or text[-1] in " \t\n\r":
        return False
    run, in_string, escape = 0, False, False
    for c in text:
        if in_string:
            if escape:
                escape = False
            elif c == "\\":
                escape = True
            elif c == '"':
                in_string = False
            continue
        if c in " \t\n\r":
            if c == "\r":
                return False
            run += 1
            if run > MAX_WS:
                return False
            continue
        run = 0
        in_string = c == '"'
    return True


def in_language(schema, text):
    """(ok, reason): whether text is in the language the grammar accepts for schema."""
    try:
        v = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError as e:
        return False, f"not JSON: {e}"
    if not whitespace_ok(text):
        return False, "whitespace"
    val = Validator(schema)
    if not val.valid(schema, v):
        return False, "schema"
    if not val.in_order(schema, v):
        return False, "property order"
    return True, ""


# ---- generation ----------------------------------------------------------------------------

class _Gen:
    """Random values for one schema; `sites` records (path, schema) for every value made,
    schema being the branch it was made from, for the mutations."""

    DEEP = 9  # past this depth: only required properties, fewest items, scalar branches first

    def __init__(self, root, rng):
        self.root, self.rng = root, rng
        self.val = Validator(root)
        self.sites = []

    def value(self, schema, path=(), depth=0):
        if depth > 60:
            raise RecursionError("[documents] schema recursion does not terminate")
        if schema is True or schema == {}:
            v = self.any_value(depth)
            self.sites.append((path, schema))
            return v
        if schema is False:
            raise ValueError("[documents] no value for the false schema")
        if "$ref" in schema:
            rest = {k: x for k, x in schema.items() if k not in ("$ref", "$defs")}
            target = self.val.resolve(schema["$ref"])
            return self.value(target if not rest else {"allOf": [target], **rest}, path, depth + 1)
        for k in ("anyOf", "oneOf", "allOf"):
            if k in schema:
                rest = {x: y for x, y in schema.items() if x not in (k, "$defs")}
                branch = self.pick(schema[k], depth) if k != "allOf" else schema[k][0]
                return self.constrained(branch, rest, schema, path, depth)
        self.sites.append((path, schema))
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            for _ in range(100):
                v = self.rng.choice(schema["enum"])
                if self.val.valid(schema, v):
                    return v
            raise ValueError(f"[documents] no value of the enum is valid: {json.dumps(schema)[:100]}")
        t = schema.get("type")
        if isinstance(t, list):
            t = self.pick(t, depth) if depth < self.DEEP else ("null" if "null" in t else t[0])
        if t is None:
            t = self.infer_type(schema)
        return getattr(self, "make_" + t)(schema, path, depth)

    def constrained(self, branch, rest, full, path, depth):
        """A value of branch that full accepts: branch and rest merged where they share no
        keyword, else values of branch until full accepts one."""
        if not rest:
            return self.value(branch, path, depth)
        if branch is True:
            return self.value(rest, path, depth)
        if not set(branch) & set(rest):
            return self.value({**branch, **rest}, path, depth)
        for _ in range(50):
            n = len(self.sites)
            v = self.value(branch, path, depth)
            if self.val.valid(full, v):
                return v
            del self.sites[n:]
        raise ValueError(f"[documents] no value of {json.dumps(branch)[:100]} for {json.dumps(full)[:100]}")

    def pick(self, options, depth):
        if depth < self.DEEP:
            return self.rng.choice(options)

        def cost(o):
            if o is True or not isinstance(o, dict):
                return 0
            if "$ref" in o or o.get("type") in ("object", "array") or "properties" in o or "items" in o:
                return 2
            return 1 if "anyOf" in o or "oneOf" in o else 0
        return min(options, key=cost) if not isinstance(options[0], str) else options[0]

    def infer_type(self, schema):
        if any(k in schema for k in ("properties", "required", "additionalProperties")):
            return "object"
        if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
            return "array"
        if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
            return "string"
        if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            return "number"
        return self.rng.choice(["null", "boolean", "integer", "number", "string", "array", "object"])

    def any_value(self, depth):
        r = self.rng.random()
        if depth >= 3 or r < 0.6:
            return self.rng.choice([None, True, False, 0, -12, 3.5, 1e21, "", "x", random_text(self.rng, 0, 6)])
        if r < 0.8:
            return [self.any_value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {f"k{j}": self.any_value(depth + 1) for j in range(self.rng.randint(0, 3))}

    def make_null(self, schema, path, depth):
        return None

    def make_boolean(self, schema, path, depth):
        return self.rng.random() < 0.5

    def make_integer(self, schema, path, depth):
        lo = hi = None
        if "minimum" in schema:
            lo = math.ceil(schema["minimum"])
        if "exclusiveMinimum" in schema:
            lo = math.floor(schema["exclusiveMinimum"]) + 1
        if "maximum" in schema:
            hi = math.floor(schema["maximum"])
        if "exclusiveMaximum" in schema:
            hi = math.ceil(schema["exclusiveMaximum"]) - 1
        if lo is None and hi is None:
            if self.rng.random() < 0.15:  # long digit strings
                return self.rng.randint(-10**6, 10**6) * 10**self.rng.randint(6, 14)
            lo, hi = -10**6, 10**6
        lo = hi - 10**6 if lo is None else lo
        hi = lo + 10**6 if hi is None else hi
        if lo > hi:
            raise ValueError(f"[documents] no integer in [{lo}, {hi}]")
        r = self.rng.random()
        if r < 0.2:
            return lo
        if r < 0.4:
            return hi
        if r < 0.5 and lo <= 0 <= hi:
            return 0
        if r < 0.75:
            return self.rng.randint(lo, min(hi, lo + 1000))
        return self.rng.randint(lo, hi)

    def make_number(self, schema, path, depth):
        bounded = any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        if not bounded:
            r = self.rng.random()
            if r < 0.25:
                return self.rng.randint(-1000, 1000)
            if r < 0.4:  # exponent forms (repr: 1.5e+20, 2.5e-07)
                return self.rng.choice([1, -1]) * self.rng.randint(1, 99) / 10 * 10.0 ** self.rng.choice([-9, -7, 17, 20, 25])
            return round(self.rng.uniform(-1e4, 1e4), self.rng.randint(0, 5))
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -1e4))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 1e4))
        if "maximum" not in schema and "exclusiveMaximum" not in schema:
            hi = lo + 1e4
        if "minimum" not in schema and "exclusiveMinimum" not in schema:
            lo = hi - 1e4
        for _ in range(50):
            r = self.rng.random()
            if r < 0.15:
                v = lo
            elif r < 0.3:
                v = hi
            elif r < 0.45:
                v = self.rng.randint(math.ceil(lo), math.floor(hi)) if math.ceil(lo) <= math.floor(hi) else lo
            else:
                v = round(self.rng.uniform(lo, hi), self.rng.randint(1, 4))
            if v == 0:
                v = 0  # never -0.0: llguidance's ranges reject it (minimum 0)
            elif isinstance(v, float) and v.is_integer() and self.rng.random() < 0.5:
                v = int(v)
            if self.val.valid(schema, v) and not ("e" in repr(v)):
                return v
        raise ValueError(f"[documents] no number for {schema}")

    def make_string(self, schema, path, depth):
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        for _ in range(200):
            if "format" in schema:
                s = sample_format(schema["format"], self.rng)
            elif "pattern" in schema:
                s = sample_pattern(schema["pattern"], self.rng)
            else:
                top = hi if hi is not None else max(lo, 12) + self.rng.choice([0, 0, 0, 20])
                s = random_text(self.rng, lo, min(top, lo + 30))
            if self.val.valid(schema, s):
                return s
        raise ValueError(f"[documents] no string for {schema}")

    def make_array(self, schema, path, depth):
        pre = schema.get("prefixItems", [])
        items = schema.get("items", True)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems", lo + 3 if depth < 4 else lo + 1)
        if items is False:
            hi = min(hi, len(pre))
        n = lo if depth >= self.DEEP else self.rng.randint(lo, max(lo, hi))
        return [self.value(pre[j] if j < len(pre) else items, path + (j,), depth + 1) for j in range(n)]

    def make_object(self, schema, path, depth):
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        out = {}
        for name, sub in props.items():
            if sub is False:
                continue
            if name in required or (depth < self.DEEP and self.rng.random() < 0.6):
                out[name] = self.value(sub, path + (name,), depth + 1)
        for name in required:
            if name not in out:
                out[name] = self.value(extra, path + (name,), depth + 1)
        if extra is not False and depth < self.DEEP and (not props or self.rng.random() < 0.3):
            for _ in range(self.rng.randint(1, 3)):
                name = self.rng.choice(["extra", "x", "note", "k9", "zz_top", "ñame", "a b", ""]) + (
                    str(self.rng.randrange(100)) if self.rng.random() < 0.5 else "")
                if name not in out and name not in props:
                    out[name] = self.value(extra, path + (name,), depth + 1)
        return out


# ---- serialization -------------------------------------------------------------------------

STYLES = ("compact", "spaced", "pretty", "random")


def dumps(value, style="compact", rng=None):
    """JSON text; whitespace by style, each run at most MAX_WS characters of [ \\t\\n]."""
    def ws(where, depth):
        if style == "compact":
            return ""
        if style == "spaced":
            return " " if where in ("after_colon", "after_comma") else ""
        if style == "pretty":
            if where in ("after_open", "after_comma", "before_close"):
                d = depth if where != "before_close" else depth - 1
                return "\n" + "  " * min(d, (MAX_WS - 1) // 2)
            return " " if where == "after_colon" else ""
        if rng.random() < 0.65:
            return ""
        n = rng.randint(1, MAX_WS) if rng.random() < 0.15 else rng.randint(1, 3)
        return "".join(rng.choice(WS_CHARS) for _ in range(n))

    def num(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if not math.isfinite(v):
            raise ValueError("[documents] non-finite number")
        return repr(v)

    def go(v, depth):
        if v is None:
            return "null"
        if isinstance(v, (bool, int, float)):
            return num(v)
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, list):
            if not v:
                return "[" + ws("empty", depth + 1) + "]"
            parts = []
            for j, x in enumerate(v):
                lead = "" if j == 0 else ws("before_comma", depth + 1) + "," + ws("after_comma", depth + 1)
                parts.append(lead + go(x, depth + 1))
            return "[" + ws("after_open", depth + 1) + "".join(parts) + ws("before_close", depth + 1) + "]"
        if not v:
            return "{" + ws("empty", depth + 1) + "}"
        parts = []
        for j, (k, x) in enumerate(v.items()):
            lead = "" if j == 0 else ws("before_comma", depth + 1) + "," + ws("after_comma", depth + 1)
            parts.append(lead + json.dumps(k, ensure_ascii=False) + ws("before_colon", depth + 1) + ":"
                         + ws("after_colon", depth + 1) + go(x, depth + 1))
        return "{" + ws("after_open", depth + 1) + "".join(parts) + ws("before_close", depth + 1) + "}"

    return go(value, 0)


# ---- mutations -----------------------------------------------------------------------------

def _get(value, path):
    for p in path:
        value = value[p]
    return value


def _replace(value, path, new):
    """A copy of value with the node at path replaced (new is the _DELETE marker to remove)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        out = list(value)
        if rest or new is not _DELETE:
            out[head] = _replace(value[head], rest, new)
        else:
            del out[head]
        return out
    out = {}
    for k, v in value.items():
        if k == head:
            if rest or new is not _DELETE:
                out[k] = _replace(v, rest, new)
        else:
            out[k] = v
    return out


_DELETE = object()
VALUE_MUTATIONS = ("wrong_type", "missing_required", "extra_key", "out_of_range", "pattern", "length",
                   "enum", "format", "items_count")
TEXT_MUTATIONS = ("truncation", "syntax", "whitespace")


def _value_candidates(kind, value, sites, rng):
    """Candidate mutated values of one kind (a few, in random order)."""
    out = []
    for path, s in rng.sample(sites, len(sites)):
        node = _get(value, path)
        if not isinstance(s, dict):
            s = {}
        if kind == "wrong_type":
            for alt in rng.sample([0, 1.5, "x", True, None, [], {}, [1], {"k": 1}], 9):
                out.append(_replace(value, path, alt))
                if len(out) > 6:
                    return out
        elif kind == "missing_required" and isinstance(node, dict):
            for name in s.get("required", []):
                if name in node:
                    out.append(_replace(value, path + (name,), _DELETE))
        elif kind == "extra_key" and isinstance(node, dict) and s.get("additionalProperties") is False:
            items = list(node.items())
            at = rng.randint(0, len(items))
            name = rng.choice(["extra", "zzz", "id2", "Name", ""])
            if name not in node:
                out.append(_replace(value, path, dict(items[:at] + [(name, 1)] + items[at:])))
        elif kind == "out_of_range" and json_type(node) in ("integer", "number"):
            for k, delta in (("minimum", -1), ("maximum", 1), ("exclusiveMinimum", 0), ("exclusiveMaximum", 0)):
                if k in s:
                    b = s[k]
                    for v in (b + delta, b + delta * 0.5, b + delta * 1000):
                        out.append(_replace(value, path, int(v) if float(v).is_integer() and s.get("type") == "integer" else v))
        elif kind == "pattern" and isinstance(node, str) and "pattern" in s:
            for bad in ("", "!", "~" + node + "~", node[:-1], node + "!", node.upper(), node.replace("0", "a"),
                        "".join(rng.sample(node, len(node)))):
                out.append(_replace(value, path, bad))
        elif kind == "length" and isinstance(node, str):
            if "minLength" in s and s["minLength"] > 0:
                out.append(_replace(value, path, node[: s["minLength"] - 1]))
            if "maxLength" in s:
                out.append(_replace(value, path, node + "x" * (s["maxLength"] - len(node) + 1)))
        elif kind == "enum" and ("enum" in s or "const" in s):
            for bad in ("zz_not_listed", node + "x" if isinstance(node, str) else 99991,
                        node[:-1] if isinstance(node, str) and node else "", None, 0):
                out.append(_replace(value, path, bad))
        elif kind == "format" and isinstance(node, str) and "format" in s:
            for bad in ("not-a-" + s["format"], node.replace("-", "/"), node.replace(":", "."), node + "x", node[1:]):
                out.append(_replace(value, path, bad))
        elif kind == "items_count" and isinstance(node, list):
            if "minItems" in s and s["minItems"] > 0:
                out.append(_replace(value, path, node[: s["minItems"] - 1]))
            if "maxItems" in s or s.get("items") is False:
                extra = node + [node[-1] if node else 0] * (s.get("maxItems", len(node)) - len(node) + 1)
                out.append(_replace(value, path, extra))
        if len(out) > 6:
            break
    return out


def _text_candidates(kind, text, rng):
    out = []
    if kind == "truncation":
        for _ in range(4):
            if len(text) > 1:
                out.append(text[: rng.randint(1, len(text) - 1)])
    elif kind == "syntax":
        structural = [i for i, c in enumerate(text) if c in ",:{}[]\""]
        for _ in range(6):
            if not structural:
                break
            i = rng.choice(structural)
            op = rng.randrange(6)
            if op == 0:
                out.append(text[:i] + text[i + 1:])  # drop a structural character
            elif op == 1:
                out.append(text[:i] + "," + text[i:])  # stray comma
            elif op == 2 and text[i] == ":":
                out.append(text[:i] + "=" + text[i + 1:])
            elif op == 3:
                out.append(text[:i] + "'" + text[i + 1:])
            elif op == 4:
                out.append(text + rng.choice(["}", "]", ",", "0", "x", '""']))
            else:
                out.append(text[:i] + rng.choice(["True", "undefined", "NaN", "//c\n"]) + text[i:])
    elif kind == "whitespace":
        out.append(" " + text)
        out.append(text + "\n")
        gaps = [i for i in range(1, len(text)) if text[i - 1] in ",:[{" or text[i] in ",:]}"]
        for _ in range(3):
            if gaps:
                i = rng.choice(gaps)
                out.append(text[:i] + rng.choice([" " * (MAX_WS + 1), "\t" * 25, "\r", " \r\n"]) + text[i:])
    return out


def documents_for(schema, seed, n_valid=2, n_invalid=2):
    """n_valid valid and n_invalid invalid documents for schema, from random.Random(seed).
    Mutation kinds are tried in random order, schema mutations first for every other one."""
    rng = random.Random(str(seed))
    valid, bases = [], []
    for j in range(max(n_valid, 1 if n_invalid else 0)):
        for _ in range(20):
            g = _Gen(schema, rng)
            v = g.value(schema)
            style = STYLES[j % len(STYLES)] if j < len(STYLES) else rng.choice(STYLES)
            text = dumps(v, style, rng)
            ok, why = in_language(schema, text)
            if ok:
                break
        else:
            raise ValueError(f"[documents] made no valid document ({why}): {text[:200]}")
        bases.append((v, g.sites, text))
        if j < n_valid:
            valid.append({"text": text, "style": style})
    invalid = []
    for j in range(n_invalid):
        # Even documents try the schema mutations first, odd ones any kind.
        kinds = rng.sample(VALUE_MUTATIONS, len(VALUE_MUTATIONS))
        kinds = kinds + rng.sample(TEXT_MUTATIONS, len(TEXT_MUTATIONS)) if j % 2 == 0 else rng.sample(
            VALUE_MUTATIONS + TEXT_MUTATIONS, len(VALUE_MUTATIONS + TEXT_MUTATIONS))
        v, sites, text = bases[j % len(bases)]
        for kind in kinds:
            if kind in TEXT_MUTATIONS:
                candidates = _text_candidates(kind, text, rng)
            else:
                candidates = [dumps(x, rng.choice(STYLES), rng) for x in _value_candidates(kind, v, sites, rng)]
            c = next((c for c in candidates if c and not in_language(schema, c)[0]
                      and c not in (d["text"] for d in invalid)), None)
            if c is not None:
                invalid.append({"text": c, "mutation": kind})
                break
    return {"valid": valid, "invalid": invalid}


# ---- self-check ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="JSONL from schema_corpus.py")
    ap.add_argument("--valid", type=int, default=2)
    ap.add_argument("--invalid", type=int, default=2)
    ap.add_argument("--show", type=int, default=0, help="print this many documents of each kind")
    args = ap.parse_args()
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
        print("documents: no jsonschema in this python; Validator only", file=sys.stderr)
    counts = {"schemas": 0, "valid": 0, "invalid": 0, "jsonschema_disagrees": 0}
    mutations = {}
    shown = 0
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            d = documents_for(rec["schema"], rec["id"], args.valid, args.invalid)
            counts["schemas"] += 1
            counts["valid"] += len(d["valid"])
            counts["invalid"] += len(d["invalid"])
            for x in d["invalid"]:
                mutations[x["mutation"]] = mutations.get(x["mutation"], 0) + 1
            if jsonschema is not None:
                check = jsonschema.Draft202012Validator(
                    rec["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
                for x in d["valid"]:
                    if not check.is_valid(json.loads(x["text"])):
                        counts["jsonschema_disagrees"] += 1
                        print(f"{rec['id']}: jsonschema rejects valid {x['text'][:200]!r}")
                for x in d["invalid"]:
                    try:
                        doc = json.loads(x["text"], object_pairs_hook=_no_duplicates)
                    except ValueError:
                        continue
                    schema_ok = Validator(rec["schema"]).valid(rec["schema"], doc)
                    if check.is_valid(doc) != schema_ok:
                        counts["jsonschema_disagrees"] += 1
                        print(f"{rec['id']}: jsonschema says {not schema_ok} for {x['mutation']} {x['text'][:200]!r}")
            if shown < args.show:
                shown += 1
                print(rec["id"], json.dumps(d, ensure_ascii=False)[:600])
    print(json.dumps({**counts, "mutations": mutations}))


if __name__ == "__main__":
    main()

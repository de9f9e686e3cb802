#!/usr/bin/env python3
"""Token-mask parity of parley's grammar engine with llguidance, at every token of a document.

    .venv-llm/bin/python tools/grammar/llguidance_masks.py [--parley build/parley | --fake-parley]
        [--corpus corpus.jsonl | --count 560] [--valid 2] [--invalid 2] [--limit N] [--no-extras]
        [--llg-forcing] [--json-out report.json] [--verbose]

For each schema of the corpus (tools/grammar/schema_corpus.py; built in memory without
--corpus) and each document of tools/grammar/documents.py (valid ones and mutated invalid
ones), tokenizes the document with the Qwen3 tokenizer (tokenizers, no special tokens) and
asks both engines for the token mask before every token and after the last:
- llguidance (LLMatcher + fill_next_token_bitmask), in this process, with LLG_JSON_OPTIONS
  and no forced tokens (NO_FORCING);
- parley, `PARLEY grammar masks --tokenizer T`, one JSON line per request (protocol below);
  --fake-parley runs `serve-fake` of this file instead, which answers with llguidance, to
  test the harness itself end to end.
The masks are compared bit for bit over the compared ids (the 151,643 ids of the base
vocabulary plus the stop ids); rejection step and final acceptance must agree too. Then a
few EXTRA_CASES (json_object, regex, gbnf) the same way. Prints one line per schema with a
difference (every schema with --verbose), and a summary JSON line; --json-out writes the
per-schema records, the summary and llguidance's mask times. Exit status 1 on any difference
that is not one of KNOWN_DIFFERENCES (places where llguidance's language departs from the
JSON Schema's and parley keeps to the spec; counted apart as known:<category>).

Protocol (`parley grammar masks --tokenizer PATH`, JSON lines on stdin and stdout):
  request  {"kind": "json_schema"|"json_object"|"gbnf"|"regex", "grammar": <schema, or the
           GBNF / regex text; absent for json_object>, "tokens": [ids], "stop": [eos ids]}
  response {"error": "..."} when the grammar does not compile, else
           {"steps": [{"n": allowed, "mask": base64, "us": microseconds}], "rejected_at": i|-1,
            "accepting": bool, "compile_us": microseconds}
  mask: ceil(vocab / 32) little-endian uint32 words, bit i (word i / 32, bit i % 32) = token
  id i, vocab = the tokenizer's full id range (151,669). steps[i] is the mask before
  tokens[i]; the last one is the mask after all tokens. If tokens[i] is outside steps[i],
  rejected_at = i and steps end there. `accepting`: whether the tokens consumed (all of
  them, or tokens[:rejected_at]) form a complete sentence; the stop ids are in a mask exactly
  when it is. The first mask's time counts compile_us with steps[0]'s us.

## What llguidance 1.9.1's language depends on (read this before matching it in C++)

Forced bytes. By default llguidance's mask is not the language's: where the grammar forces
bytes (one possible continuation, e.g. the only key `location` after `{"`), it allows only
the first token of the canonical tokenization of the forced bytes ("location", not "l",
"lo", "loc"), and it rejects a non-canonical token there. On the corpus that changes 9.5%
of the steps (always removing tokens) and the rejection step of 15 of 2,292 documents. The
harness therefore compiles every grammar as Lark with `%llguidance {"no_forcing": true}`
(NO_FORCING: `start: %json {schema}`, `start: /regex/`, the GBNF's Lark form), which gives
the byte-level mask: every token whose bytes continue a prefix of the language. --llg-forcing
compares with the default instead (grammar_from_json_schema, grammar_from_regex).

Options used (LLG_JSON_OPTIONS, given as the embedded schema's top-level "x-guidance" key,
or as `overrides` with --llg-forcing; the schema sent to parley has no x-guidance key):
- whitespace_pattern "[\\x20\\x0A\\x09]{1,20}": llguidance matches it *once* as an optional
  skip between any two lexemes (never before the root value nor after it), so this is
  exactly parley's [ \\t\\n]{0,20} between JSON tokens ({0,20} gives the same masks). The
  default, whitespace_flexible true, is [\\x20\\x0A\\x0D\\x09]+ (unbounded, \\r allowed);
  whitespace_flexible false allows none. Lexemes: { } [ ] , : each key string, each value
  string, number, true/false/null; so whitespace may go between a key and its colon and
  inside empty containers ("[ ]"). item_separator "," and key_separator ":" stay at their
  defaults (they are regexes; whitespace around them comes from the skip).
- A root boolean schema cannot carry options (llguidance raises "Expecting object schema to
  apply options"): the harness sends llguidance {} for true. false is a compile error
  ("Unsatisfiable schema: schema is false"), as are schemas it proves empty (a required key
  that additionalProperties false forbids, an empty enum, an integer range with no integer).
- coerce_one_of stays false: oneOf compiles only when llguidance can prove its branches
  disjoint (different types; string consts that differ; objects with a common required
  property whose schemas are disjoint; never through a $ref), else the schema is an error
  ("oneOf constraints are not supported"). The corpus only has disjoint oneOfs, so there
  oneOf = anyOf. Integer and number count as one type in that proof.
- lenient stays false: a keyword outside llguidance's list is an error, and so is an
  unknown format.

Semantics, where llguidance departs from JSON Schema 2020-12 or where the spec leaves a choice:
- Property order is fixed: the keys of `properties` in schema order (each optional), then
  `required` keys not in `properties` in the order of `required`, then additional keys in
  any order. {"b":..,"a":..} is rejected when properties lists a before b.
- additionalProperties absent = true (extra keys allowed, after the listed ones). An extra
  key can never be the name of a listed property (no duplicates of those), but extra keys
  may repeat each other ({"x":1,"x":2} under additionalProperties is accepted).
  `required` naming a key that additionalProperties false forbids is a compile error.
- Property schema false: that key can never appear. items false after prefixItems: no more
  items. prefixItems without items: any further items (of any JSON value).
- pattern is a search, not anchored (pattern "[0-9]" accepts "ab1c"); ^ and $ anchor.
  Inside JSON Schema patterns \\d and \\w are ASCII ([0-9], [0-9A-Za-z_]); \\s is Unicode
  (U+00A0, \\v accepted); '.' excludes only \\n (Rust's, not ECMA's: \\r and U+2028 pass). The pattern
  applies to the decoded string, so '"' and '\\' in it are matched as \\" and \\\\ escapes.
- minLength / maxLength count code points ("😀" is 1), escapes count as one character.
- Strings (values, and keys of objects without `properties`): escapes \\" \\\\ \\n \\r \\b
  \\t \\f, and \\uXXXX (hex of either case) only for U+0000-U+001F and U+007F: "\\u0041",
  "\\u00e9", "\\u2028" and surrogate pairs are rejected, and so is "\\/"
  (json_allowed_escapes defaults to nrbtf\\"u, without '/'; json_allow_general_unicode_escapes
  is false). Raw U+0000-U+001F are rejected, and so is raw U+007F (JSON allows a raw DEL;
  llguidance does not). Any other UTF-8 is allowed raw, U+2028 included.
- Extra keys of an object that has `properties` (additionalProperties not false) are "any
  JSON string but the listed names", built with the general escape syntax: there \\uXXXX of
  any character is accepted (printable ones and valid surrogate pairs; lone surrogates are
  not), so {"\\u0078":"s"} passes as an extra key even when "x" is listed as an integer.
  Objects without `properties` allow only the escapes above in keys.
- Numbers: integer is -?(0|[1-9][0-9]*) only: "1.0" and "1e2" are rejected (2020-12 says
  they are integers); "-0" is rejected when minimum is 0. number is JSON's number; "01",
  ".5", "1." are rejected. With any bound (minimum, maximum, exclusive*), exponents are not
  allowed at all ("1e0" rejected), "-0.0" is rejected by minimum 0, and bounds are exact
  decimal ranges (exclusiveMinimum 0.5: "0.5" is a live prefix, "0.51" accepted). A bound too
  large for its range regex (maximum 1e30 on a number) is a compile error.
- enum / const: strings match exactly (no \\u spelling of printable characters); numbers
  match their canonical spelling only (const 1.5 rejects "1.50"; const 1.0 accepts "1" and
  rejects "1.0"; 1e21 accepts only "1000000000000000000000"); objects and arrays in an
  enum accept whitespace inside but keep the enum's key order.
- Formats are regexes (parser/src/json/formats.rs, copied into documents.FORMAT_RX):
  date-time and time need a zone (Z, z, +hh:mm); t/z may be lowercase; second 60 is
  allowed; days are checked per month but February allows 29 in any year; email is an
  RFC 5321 mailbox ("a@b" and "a@[1.2.3.4]" accepted, quoted local parts rejected); ipv4
  has no leading zeros; uuid is any 8-4-4-4-12 hex (either case).
- Kind regex (grammar_from_regex): the regex must match the whole text (implicitly
  anchored); \\d, \\w, \\s are Unicode there (Rust regex), unlike in JSON Schema patterns.
- Kind gbnf goes through llguidance.gbnf_to_lark, which makes each rule with a regular body
  a lexeme (a Lark terminal), and llguidance lexes terminals greedily (maximal munch): with
  `root ::= a b`, `a ::= [a-z]+`, `b ::= [a-z0-9]+`, "ab" is left incomplete (a took both
  letters) where GBNF accepts it; classes written inline (`root ::= [0-9]+ [0-9]+`) stay in
  one regex and keep the GBNF meaning. Compare GBNF only on grammars whose adjacent
  terminals cannot split a run two ways (EXTRA_CASES' grammars are such).
- Tokens: llguidance treats all 26 added tokens (151643-151668, <think> and <tool_call>
  included, though tokenizer.json marks some non-special) as special: never allowed by a
  grammar, except the stop ids when the sentence is complete. parley treats the non-special
  ones as their text (a forced tool call writes <tool_call>), so they are not compared. The
  compared ids are the base vocabulary plus the stop ids; parley allowing a special added
  token is counted apart (added_allowed) and fails the CI test too.
- Stop ids: LLTokenizer built from tokenizer.json alone takes <|endoftext|> (151643) as eos;
  the chat eos is <|im_end|> (151645, tokenizer_config.json). The harness passes both,
  STOP_IDS = [151645, 151643], to llguidance (eos_token=) and to parley ("stop").
"""
import argparse
import base64
import collections
import json
import os
import select
import subprocess
import sys
import threading
import time

import llguidance.gbnf_to_lark  # noqa: F401 - Reference.grammar's GBNF conversion
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import documents  # noqa: E402
import schema_corpus  # noqa: E402

DEFAULT_TOKENIZER = os.path.join(HERE, "..", "..", "..", "shared", "data", "llm", "tokenizer.json")
STOP_IDS = [151645, 151643]  # <|im_end|>, <|endoftext|>
LLG_JSON_OPTIONS = {"whitespace_pattern": r"[\x20\x0A\x09]{1,20}"}
NO_FORCING = '%llguidance {"no_forcing": true}\n'  # masks of the language, not of canonical tokens

# (name, kind, grammar, valid texts, invalid texts): the non-JSON-Schema request kinds.
EXTRA_CASES = [
    ("json_object", "json_object", None,
     ['{"a":1}', '{ "k" : [1, {"x": null}], "s": "é\\n" }', "{}", '{"a":{"b":{"c":[true,false,1.5e3]}}}'],
     ["[1]", '{"a":1,}', ' {"a":1}', '"x"', '{"a" 1}', '{"a":1}\n']),
    ("regex_phone", "regex", r"[0-9]{3}-[0-9]{4}", ["555-1234"], ["555-12345", "55-1234", " 555-1234"]),
    ("regex_choice", "regex", r"(yes|no|maybe)", ["yes", "maybe"], ["yess", "ye", "Yes"]),
    ("regex_email", "regex", r"[a-z]+@[a-z]+\.(com|org)", ["bob@example.com"], ["bob@example.net", "@x.com"]),
    ("regex_decimal", "regex", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", ["0", "-12.5", "100"], ["01", "1.", "--1"]),
    ("regex_words", "regex", r"[A-Z][a-z]*( [A-Z][a-z]*){0,3}", ["Hello World", "A"], ["hello", "A B C D E"]),
    ("gbnf_list", "gbnf", 'root ::= "[" ws (item (ws "," ws item)*)? ws "]"\n'
                          'item ::= [0-9]+ | "\\"" [a-z]* "\\""\nws ::= [ \\t\\n]{0,3}',
     ["[1, 2, 3]", '["a","bc",7]', "[]", "[ ]"], ["[1,]", "[01 2]", "[    1]", '["A"]']),
    ("gbnf_expr", "gbnf", 'root ::= expr\nexpr ::= term (("+" | "-") term)*\n'
                          'term ::= factor (("*" | "/") factor)*\nfactor ::= [0-9]+ | "(" expr ")"',
     ["1+2*3", "(1+2)*3", "((4))", "12/(3-1)"], ["1+", "(1+2", "1++2", "()"]),
    ("gbnf_kv", "gbnf", 'root ::= pair ("\\n" pair)*\npair ::= key "=" value\n'
                        'key ::= [a-z_]+\nvalue ::= [0-9]+ | "true" | "false" | "\\"" [^"\\n]* "\\""',
     ['a=1\nb_c="x y"\nok=true'], ["a=\nb=1", "A=1", 'a="x\nb=1']),
]


def stats(values):
    """mean / p50 / p99 / max of a list of numbers (None when empty)."""
    if not values:
        return None
    a = np.sort(np.asarray(values, dtype=np.float64))
    pct = lambda q: float(a[min(len(a) - 1, int(round(q * (len(a) - 1))))])  # noqa: E731
    return {"n": int(len(a)), "mean": float(a.mean()), "p50": pct(0.5), "p99": pct(0.99), "max": float(a[-1])}


class Vocab:
    """The tokenizer, its id range and the ids the masks are compared on."""

    def __init__(self, path, stop_ids):
        from tokenizers import Tokenizer
        self.tok = Tokenizer.from_file(path)
        self.size = self.tok.get_vocab_size(with_added_tokens=True)  # 151,669 for Qwen3
        self.base = self.tok.get_vocab_size(with_added_tokens=False)  # 151,643
        self.words = (self.size + 31) // 32
        self.stop = list(stop_ids)
        compared = np.zeros(self.words * 32, dtype=bool)
        compared[: self.base] = True
        compared[self.stop] = True
        self.compared = np.packbits(compared, bitorder="little").view("<u4")  # (words,)
        # The special added tokens: never allowed by either engine (but the stop ids). The
        # non-special ones (<think>, <tool_call>, ...) are text to parley (a forced tool call
        # writes <tool_call>) and special to llguidance: not compared.
        added = np.zeros(self.words * 32, dtype=bool)
        for i, t in self.tok.get_added_tokens_decoder().items():
            added[i] = t.special
        added[self.stop] = False
        self.added = np.packbits(added, bitorder="little").view("<u4")

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def name(self, i):
        s = self.tok.decode([i], skip_special_tokens=False)
        return s if s and "\ufffd" not in s else self.tok.id_to_token(i)


def bits_to_ids(words, limit=None):
    """Token ids set in a (words,) uint32 array."""
    ids = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    return ids[:limit] if limit else ids


class Reference:
    """llguidance's masks, in the protocol's response format (plus compile_us)."""

    def __init__(self, tokenizer_path, stop_ids, json_options=None, forcing=False):
        import llguidance
        self.llg = llguidance
        self.json_options = json_options or LLG_JSON_OPTIONS
        self.forcing = forcing
        self.tokenizer = llguidance.LLTokenizer(tokenizer_path, eos_token=list(stop_ids))
        self.vocab_size = self.tokenizer.vocab_size
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask
        self.fill = fill_next_token_bitmask
        self.mask = allocate_token_bitmask(1, self.vocab_size)  # (1, words) int32

    def grammar(self, kind, grammar):
        """llguidance's grammar for a request. Without forcing, a Lark grammar that sets
        no_forcing and embeds the schema / regex / GBNF (see the findings above)."""
        M = self.llg.LLMatcher
        if kind in ("json_schema", "json_object"):
            schema = {"type": "object"} if kind == "json_object" else ({} if grammar is True else grammar)
            if self.forcing:
                return M.grammar_from_json_schema(schema, overrides=self.json_options)
            schema = {**schema, "x-guidance": {**schema.get("x-guidance", {}), **self.json_options}}
            return M.grammar_from_lark(NO_FORCING + "start: %json " + json.dumps(schema))
        if kind == "regex":
            if self.forcing:
                return M.grammar_from_regex(grammar)
            return M.grammar_from_lark(NO_FORCING + "start: /" + self.llg.regex_to_lark(grammar, "") + "/")
        if kind == "gbnf":
            lark = self.llg.gbnf_to_lark.any_to_lark(grammar)
            return M.grammar_from_lark(lark if self.forcing else NO_FORCING + lark)
        raise ValueError(f"[llguidance_masks] unknown kind {kind!r}")

    def run(self, request):
        t0 = time.perf_counter()
        try:
            g = self.grammar(request["kind"], request.get("grammar"))
            m = self.llg.LLMatcher(self.tokenizer, g, log_level=0)
        except Exception as e:  # noqa: BLE001 - a grammar llguidance refuses is an answer
            return {"error": f"{type(e).__name__}: {e}"}
        if m.is_error():
            return {"error": m.get_error()}
        compile_us = (time.perf_counter() - t0) * 1e6
        steps, rejected, tokens = [], -1, request["tokens"]
        words = self.mask[0].view(np.uint32)
        for i in range(len(tokens) + 1):
            t0 = time.perf_counter()
            self.fill(m, self.mask)
            us = (time.perf_counter() - t0) * 1e6
            if m.is_error():
                return {"error": f"at step {i}: {m.get_error()}"}
            steps.append({"words": words.copy(), "us": us + (compile_us if i == 0 else 0.0), "mask_us": us})
            if i == len(tokens):
                break
            t = tokens[i]
            if not (words[t >> 5] >> (t & 31)) & 1:
                rejected = i
                break
            if not m.consume_token(t):
                return {"error": f"consume_token({t}) failed at step {i}: {m.get_error()}"}
        return {"steps": steps, "rejected_at": rejected, "accepting": bool(m.is_accepting()),
                "compile_us": compile_us}


def encode_response(resp):
    """A Reference answer as the protocol's JSON line."""
    if "error" in resp:
        return json.dumps({"error": resp["error"]})
    steps = [{"n": int(np.unpackbits(s["words"].view(np.uint8)).sum()),
              "mask": base64.b64encode(s["words"].astype("<u4").tobytes()).decode("ascii"),
              "us": round(s["us"], 1)} for s in resp["steps"]]
    return json.dumps({"steps": steps, "rejected_at": resp["rejected_at"], "accepting": resp["accepting"]})


FAKE_BUGS = {  # --fake-bug: faults the harness must report (tests/grammar checks it does)
    "ws21": "JSON whitespace runs of up to 21 characters",
    "no_stop": "the stop ids never allowed",
    "drop": "the lowest allowed id of every second step removed",
    "added": "<|im_start|> (151644, special) allowed at every step",
    "count": "n one more than the mask's bits",
}


def serve_fake(tokenizer_path, bug=None, forcing=False):
    """The protocol on stdin / stdout, answered by llguidance (--fake-parley), with an
    optional FAKE_BUGS fault."""
    ref = None
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if ref is None:
            options = {"whitespace_pattern": r"[\x20\x0A\x09]{1,21}"} if bug == "ws21" else None
            ref = Reference(tokenizer_path, req.get("stop", STOP_IDS), options, forcing)
        resp = ref.run(req)
        for i, st in enumerate(resp.get("steps", [])):
            w = st["words"]
            if bug == "no_stop":
                for t in req["stop"]:
                    w[t >> 5] &= ~np.uint32(1 << (t & 31))
            elif bug == "drop" and i % 2 == 1 and w.any():
                t = int(bits_to_ids(w, 1)[0])
                w[t >> 5] &= ~np.uint32(1 << (t & 31))
            elif bug == "added":
                w[151644 >> 5] |= np.uint32(1 << (151644 & 31))
        line = encode_response(resp)
        if bug == "count" and "steps" in resp:
            out = json.loads(line)
            for st in out["steps"]:
                st["n"] += 1
            line = json.dumps(out)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Parley:
    """One `parley grammar masks` process, restarted if it dies; after MAX_CRASHES deaths in
    a row without an answer, every later request gets the last crash without a restart.
    Its stderr is drained by a thread (the last lines go into crash reports)."""

    MAX_CRASHES = 3

    def __init__(self, cmd, timeout_s=120.0):
        self.cmd, self.timeout_s = cmd, timeout_s
        self.proc = None
        self.crashes, self.last_crash = 0, None
        self.stderr = collections.deque(maxlen=40)

    def _start(self):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1 << 20)
        threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True).start()

    def _drain(self, stream):
        for line in stream:
            self.stderr.append(line)

    def _crash(self, why):
        self.proc.kill()
        self.proc.wait()
        time.sleep(0.05)  # let the drain thread take the last lines
        self.proc = None
        self.crashes += 1
        self.last_crash = f"{' '.join(self.cmd)} {why}: {''.join(self.stderr)[-2000:]}"
        return {"crash": self.last_crash}

    def run(self, request):
        if self.crashes >= self.MAX_CRASHES:
            return {"crash": self.last_crash}
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._crash("ended without an answer")
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout_s)
        if not ready:
            return self._crash(f"gave no answer in {self.timeout_s:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            return self._crash("ended without an answer")
        self.crashes = 0
        try:
            return json.loads(line)
        except ValueError:
            return {"crash": f"not a JSON line: {line[:300]!r}"}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


KNOWN_DIFFERENCES = {
    "llguidance_unicode_escapes":
        "llguidance allows \\uXXXX escapes of any character in additional-property keys and of "
        "control characters in constants; parley allows neither (a declared key spelled with "
        "escapes must not pass as an additional one)",
    "parley_key_escapes":
        "parley accepts a declared key's control characters in any escaped spelling (\\u000a "
        "for \\n), as JSON defines the key; llguidance only json.dumps's spelling",
    "llguidance_escapes_in_negated_class":
        "llguidance lets a negated pattern class such as [^\"\\\\] match the escapes \\\" and "
        "\\\\ (the decoded characters it excludes); parley does not",
    "decimal_bounds":
        "llguidance's decimal bounds are approximate (it rejects 100.50 under maximum 100.5 and "
        "allows 1 under exclusiveMinimum 1); parley's are exact (checked against Python's Decimal)",
}


def known_difference(prefix, only_parley, only_llguidance):
    """The category of a mask difference where llguidance's language departs from the JSON
    Schema's and parley keeps to the spec (each category checked by hand against the
    jsonschema package), given every differing token's text; None for any other."""
    def unicode_escape(t):  # \\uXXXX's start, or its rest after a backslash already written
        return t.startswith("\\u") or (prefix.endswith("\\") and t.startswith("u"))
    if only_parley and not only_llguidance and all(unicode_escape(t) for t in only_parley):
        return "parley_key_escapes"
    if not only_parley and only_llguidance:
        if all(unicode_escape(t) for t in only_llguidance):
            return "llguidance_unicode_escapes"
        def quote_escape(t):  # \\" or \\\\, or its rest after a backslash already written
            return '\\"' in t or "\\\\" in t or (prefix.endswith("\\") and t[:1] in ('"', "\\"))
        if all(quote_escape(t) for t in only_llguidance):
            return "llguidance_escapes_in_negated_class"
    if prefix[-1:] and prefix[-1] in "0123456789.":
        def number_edge(t):
            return t.isdigit() or t[:1] in (",", "}", "]", " ", "\t", "\n")
        if all(number_edge(t) for t in only_parley + only_llguidance):
            return "decimal_bounds"
    return None


def compare(vocab, tokens, ref, par, known_seen=None):
    """The first difference between llguidance's answer and parley's, or None.
    Returns (difference dict or None, parley's per-step microseconds); the categories of the
    known differences skipped on the way (KNOWN_DIFFERENCES) are added to known_seen."""
    if known_seen is None:
        known_seen = set()
    if "crash" in par:
        return {"what": "parley_crash", "detail": par["crash"]}, []
    if "error" in ref or "error" in par:
        if "error" in ref and "error" in par:
            return None, []
        if "error" in ref:
            return {"what": "reference_error", "detail": ref["error"]}, []
        return {"what": "parley_error", "detail": par["error"]}, []
    steps = par.get("steps")
    if not isinstance(steps, list) or "rejected_at" not in par or "accepting" not in par:
        return {"what": "protocol", "detail": f"response keys {sorted(par)}"}, []
    par_us = [s.get("us", 0.0) for s in steps]
    for i, (r, p) in enumerate(zip(ref["steps"], steps)):
        raw = base64.b64decode(p["mask"])
        if len(raw) != vocab.words * 4:
            return {"what": "protocol", "step": i, "detail": f"mask of {len(raw)} bytes, want {vocab.words * 4}"}, par_us
        pw = np.frombuffer(raw, dtype="<u4")
        n = int(np.unpackbits(pw.view(np.uint8)).sum())
        if p.get("n") != n:
            return {"what": "protocol", "step": i, "detail": f"n = {p.get('n')} but the mask has {n} bits"}, par_us
        diff = (pw ^ r["words"]) & vocab.compared
        if diff.any():
            prefix = vocab.tok.decode(tokens[:i])
            known = known_difference(prefix, [vocab.name(int(t)) for t in bits_to_ids(pw & diff)],
                                     [vocab.name(int(t)) for t in bits_to_ids(r["words"] & diff)])
            if known:
                known_seen.add(known)
                continue
            only_p = bits_to_ids(pw & diff, 5)
            only_r = bits_to_ids(r["words"] & diff, 5)
            return {"what": "mask", "step": i, "token": tokens[i] if i < len(tokens) else None,
                    "prefix": vocab.tok.decode(tokens[:i])[-60:],
                    "only_parley": [[int(t), vocab.name(int(t))] for t in only_p],
                    "only_llguidance": [[int(t), vocab.name(int(t))] for t in only_r],
                    "count_only_parley": int(np.unpackbits((pw & diff).view(np.uint8)).sum()),
                    "count_only_llguidance": int(np.unpackbits((r["words"] & diff).view(np.uint8)).sum())}, par_us
        extra = pw & vocab.added
        if extra.any():
            return {"what": "added_allowed", "step": i,
                    "ids": [[int(t), vocab.name(int(t))] for t in bits_to_ids(extra, 5)]}, par_us
    if len(steps) != len(ref["steps"]) or par["rejected_at"] != ref["rejected_at"]:
        return {"what": "rejection", "parley": [len(steps), par["rejected_at"]],
                "llguidance": [len(ref["steps"]), ref["rejected_at"]]}, par_us
    if bool(par["accepting"]) != ref["accepting"]:
        return {"what": "accepting", "parley": par["accepting"], "llguidance": ref["accepting"]}, par_us
    return None, par_us


class Harness:
    """Runs cases through both engines and keeps the tallies and times."""

    def __init__(self, vocab, ref, parley):
        self.vocab, self.ref, self.parley = vocab, ref, parley
        self.records = []
        self.counts = {"cases": 0, "documents": 0, "tokens": 0, "equal_cases": 0, "differing_cases": 0,
                       "differences": 0, "known_differences": 0, "mask_differences": 0, "parley_errors": 0, "reference_errors": 0, "both_errors": 0,
                       "invalid_accepted_by_parley": 0, "invalid_accepted_by_llguidance": 0,
                       "valid_rejected_by_llguidance": 0, "skipped_documents": 0}
        self.times = {"llguidance_mask_us": [], "llguidance_first_us": [], "llguidance_compile_us": [],
                      "parley_mask_us": [], "parley_first_us": []}
        self.case_times = {}  # case id -> the raw lists of self.times' keys (bench/grammar_masks.py)

    def run_case(self, name, kind, grammar, docs):
        """docs: [{"text", "valid": bool, "label"}]. Returns this case's record."""
        rec = {"id": name, "kind": kind, "documents": len(docs), "differences": [],
               "llguidance_first_us": [], "llguidance_mask_us": [], "parley_first_us": [], "parley_mask_us": []}
        self.counts["cases"] += 1
        for d in docs:
            tokens = self.vocab.encode(d["text"])
            if any(t >= self.vocab.base for t in tokens):
                self.counts["skipped_documents"] += 1  # the text spells an added token
                continue
            req = {"kind": kind, "tokens": tokens, "stop": self.vocab.stop}
            if kind != "json_object":
                req["grammar"] = grammar
            ref = self.ref.run(req)
            par = self.parley.run(req)
            self.counts["documents"] += 1
            self.counts["tokens"] += len(tokens)
            known = set()
            diff, par_us = compare(self.vocab, tokens, ref, par, known)
            for k in known:
                self.counts["known_differences"] += 1
                self.counts["known:" + k] = self.counts.get("known:" + k, 0) + 1
            if "steps" in ref:
                self.times["llguidance_compile_us"].append(ref["compile_us"])
                rec["llguidance_first_us"].append(ref["steps"][0]["us"])
                rec["llguidance_mask_us"].extend(s["mask_us"] for s in ref["steps"][1:])
            if par_us:  # the first mask with the grammar's compilation, as llguidance's
                rec["parley_first_us"].append(par_us[0] + par.get("compile_us", 0.0))
                rec["parley_mask_us"].extend(par_us[1:])
            self._tally(d, ref, par, diff, rec, tokens)
        self.case_times[name] = {}
        for k in ("llguidance_first_us", "llguidance_mask_us", "parley_first_us", "parley_mask_us"):
            self.times[k].extend(rec[k])
            self.case_times[name][k] = rec[k]
            rec[k] = stats(rec[k])
        if rec["differences"]:
            self.counts["differing_cases"] += 1
        else:
            self.counts["equal_cases"] += 1
        self.records.append(rec)
        return rec

    def _tally(self, d, ref, par, diff, rec, tokens):
        accepted = lambda r: "steps" in r and r["rejected_at"] == -1 and r["accepting"]  # noqa: E731
        if "error" in ref and "error" in par:
            self.counts["both_errors"] += 1
        elif "error" in ref:
            self.counts["reference_errors"] += 1
        elif "error" in par or "crash" in par:
            self.counts["parley_errors"] += 1
        if d["valid"] and "steps" in ref and not accepted(ref):
            self.counts["valid_rejected_by_llguidance"] += 1
            rec["differences"].append({"what": "llguidance_rejects_valid", "label": d["label"],
                                       "text": d["text"][:300], "rejected_at": ref["rejected_at"]})
        if not d["valid"]:
            if accepted(ref):
                self.counts["invalid_accepted_by_llguidance"] += 1
                rec["differences"].append({"what": "llguidance_accepts_invalid", "label": d["label"],
                                           "text": d["text"][:300]})
            if "steps" in par and accepted(par):
                self.counts["invalid_accepted_by_parley"] += 1
        if diff is not None and diff["what"] != "reference_error":
            self.counts["differences"] += 1
            self.counts["mask_differences"] += diff["what"] == "mask"
            rec["differences"].append({**diff, "label": d["label"], "valid": d["valid"], "text": d["text"][:300],
                                       "tokens": len(tokens)})

    def summary(self):
        return {**self.counts, **{k: stats(v) for k, v in self.times.items()}}


def corpus_cases(corpus, n_valid, n_invalid):
    """(id, kind, schema, docs) for each corpus record."""
    for rec in corpus:
        d = documents.documents_for(rec["schema"], rec["id"], n_valid, n_invalid)
        docs = [{"text": x["text"], "valid": True, "label": "valid/" + x["style"]} for x in d["valid"]]
        docs += [{"text": x["text"], "valid": False, "label": "invalid/" + x["mutation"]} for x in d["invalid"]]
        yield rec["id"], "json_schema", rec["schema"], docs


def extra_cases():
    for name, kind, grammar, good, bad in EXTRA_CASES:
        docs = [{"text": t, "valid": True, "label": "valid"} for t in good]
        docs += [{"text": t, "valid": False, "label": "invalid"} for t in bad]
        yield "extra/" + name, kind, grammar, docs


def parley_command(args):
    if args.fake_parley:
        cmd = [sys.executable, os.path.abspath(__file__), "serve-fake", "--tokenizer", args.tokenizer]
        return cmd + (["--bug", args.fake_bug] if args.fake_bug else []) + (["--forcing"] if args.llg_forcing else [])
    return [args.parley, "grammar", "masks", "--tokenizer", args.tokenizer]


def run(args, log=print):
    """The whole comparison; returns the Harness."""
    vocab = Vocab(args.tokenizer, STOP_IDS)
    ref = Reference(args.tokenizer, STOP_IDS, forcing=args.llg_forcing)
    if ref.vocab_size != vocab.size:
        raise SystemExit(f"[llguidance_masks] llguidance vocab {ref.vocab_size} != tokenizer {vocab.size}")
    if args.corpus:
        with open(args.corpus, encoding="utf-8") as f:
            corpus = [json.loads(line) for line in f if line.strip()]
    else:
        corpus = schema_corpus.build(args.count)
    if args.limit:
        corpus = corpus[: args.limit]
    parley = Parley(parley_command(args))
    h = Harness(vocab, ref, parley)
    cases = list(corpus_cases(corpus, args.valid, args.invalid))
    if not args.no_extras:
        cases += list(extra_cases())
    t0 = time.perf_counter()
    try:
        for name, kind, grammar, docs in cases:
            rec = h.run_case(name, kind, grammar, docs)
            if rec["differences"] or args.verbose:
                status = "equal" if not rec["differences"] else "DIFFERS"
                log(f"{name}: {status} ({rec['documents']} documents)"
                    + "".join("\n    " + json.dumps(x, ensure_ascii=False) for x in rec["differences"][:3]))
    finally:
        parley.close()
    h.wall_s = time.perf_counter() - t0
    return h


def add_arguments(ap):
    ap.add_argument("--parley", default=os.environ.get("PARLEY_BIN", "build/parley"))
    ap.add_argument("--fake-parley", action="store_true", help="answer parley's side with llguidance")
    ap.add_argument("--fake-bug", choices=sorted(FAKE_BUGS), help="with --fake-parley: a fault to inject")
    ap.add_argument("--tokenizer", default=os.path.normpath(DEFAULT_TOKENIZER))
    ap.add_argument("--llg-forcing", action="store_true",
                    help="llguidance's default masks (canonical tokens of forced bytes), not the language's")
    ap.add_argument("--corpus", help="JSONL of schema_corpus.py (default: built in memory)")
    ap.add_argument("--count", type=int, default=560, help="schemas when built in memory")
    ap.add_argument("--limit", type=int, default=0, help="only the first N schemas")
    ap.add_argument("--valid", type=int, default=2, help="valid documents per schema")
    ap.add_argument("--invalid", type=int, default=2, help="invalid documents per schema")
    ap.add_argument("--no-extras", action="store_true", help="skip EXTRA_CASES (json_object, regex, gbnf)")
    ap.add_argument("--json-out", help="write records, summary and times here")
    ap.add_argument("--verbose", action="store_true")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "serve-fake":
        ap = argparse.ArgumentParser(prog="llguidance_masks.py serve-fake")
        ap.add_argument("serve_fake")
        ap.add_argument("--tokenizer", required=True)
        ap.add_argument("--bug", choices=sorted(FAKE_BUGS))
        ap.add_argument("--forcing", action="store_true")
        a = ap.parse_args()
        serve_fake(a.tokenizer, a.bug, a.forcing)
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args()
    h = run(args)
    summary = {**h.summary(), "wall_s": round(h.wall_s, 2), "fake_parley": args.fake_parley}
    print(json.dumps(summary))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "records": h.records, "options": LLG_JSON_OPTIONS,
                       "forcing": args.llg_forcing, "stop": STOP_IDS}, f, ensure_ascii=False, indent=1)
    bad = (h.counts["differences"] + h.counts["invalid_accepted_by_parley"]
           + h.counts["invalid_accepted_by_llguidance"] + h.counts["valid_rejected_by_llguidance"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

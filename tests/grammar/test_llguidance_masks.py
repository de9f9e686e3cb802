"""Token masks of parley's grammar engine equal llguidance 1.9.1's at every token.

    .venv-llm/bin/python -m pytest -q tests/grammar/test_llguidance_masks.py

Environment: PARLEY_BIN (default build/parley), run as `PARLEY_BIN grammar masks
--tokenizer T`; PARLEY_TOKENIZER (default ../shared/data/llm/tokenizer.json); set
PARLEY_GRAMMAR_FAKE=1 to answer parley's side with llguidance itself (tests the harness).
A 60-schema corpus (every third hand-written schema and the first 45 generated ones, two of
each category) with 2 valid and 2 invalid documents each, plus the json_object, regex and
GBNF cases of tools/grammar/llguidance_masks.py; then the harness's own checks (faults of a
fake parley are reported, the corpus and documents are deterministic and in the language).
Skipped without llguidance (.venv-llm: scripts/setup_llm_reference.sh). With
PARLEY_GRAMMAR_FAKE=1 on 2 cores: about 25 s for the file, 8 s of it the mask comparison.
"""
import argparse
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("llguidance")
pytest.importorskip("tokenizers")
pytest.importorskip("numpy")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "grammar"))

import documents  # noqa: E402
import llguidance_masks as lm  # noqa: E402
import schema_corpus  # noqa: E402

TOKENIZER = os.environ.get("PARLEY_TOKENIZER",
                           os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "llm", "tokenizer.json")))
PARLEY = os.environ.get("PARLEY_BIN", os.path.join(ROOT, "build", "parley"))
FAKE = os.environ.get("PARLEY_GRAMMAR_FAKE") == "1"


def small_corpus():
    hand = schema_corpus.hand_written()[::3]
    return hand + [schema_corpus.generated(i) for i in range(45)]


def harness_args(tmp_path, corpus, fake=False, bug=None, extras=True):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    ap = argparse.ArgumentParser()
    lm.add_arguments(ap)
    argv = ["--corpus", str(path), "--tokenizer", TOKENIZER, "--parley", PARLEY]
    argv += ["--fake-parley"] if fake else []
    argv += ["--fake-bug", bug] if bug else []
    argv += [] if extras else ["--no-extras"]
    return ap.parse_args(argv)


@pytest.fixture(scope="module", autouse=True)
def needs_tokenizer():
    if not os.path.isfile(TOKENIZER):
        pytest.skip(f"no tokenizer at {TOKENIZER}")


def describe(h):
    lines = []
    for r in h.records:
        for d in r["differences"][:2]:
            lines.append(f"{r['id']}: {json.dumps(d, ensure_ascii=False)[:600]}")
    return "\n".join(lines[:12])


def test_masks_equal_llguidance(tmp_path):
    corpus = small_corpus()
    assert len(corpus) == 60
    if not FAKE:
        assert os.access(PARLEY, os.X_OK), f"no parley binary at {PARLEY} (set PARLEY_BIN)"
    h = lm.run(harness_args(tmp_path, corpus, fake=FAKE), log=lambda line: None)
    c = h.counts
    print(json.dumps(h.summary()))
    # The corpus and documents are right for llguidance: every schema compiles, every valid
    # document is accepted whole, every invalid one is rejected or left incomplete.
    assert c["reference_errors"] == 0, describe(h)
    assert c["valid_rejected_by_llguidance"] == 0, describe(h)
    assert c["invalid_accepted_by_llguidance"] == 0, describe(h)
    assert c["documents"] >= 60 * 4, c
    # parley: same masks at every step, same rejection step, same final acceptance.
    assert c["parley_errors"] == 0, describe(h)
    assert c["differences"] == 0, describe(h)
    assert c["invalid_accepted_by_parley"] == 0, describe(h)


@pytest.mark.parametrize("bug,what", [("ws21", "mask"), ("no_stop", "mask"), ("drop", "mask"),
                                      ("added", "added_allowed"), ("count", "protocol")])
def test_harness_reports_faults(tmp_path, bug, what):
    """The comparison can fail: a fake parley with one fault is caught."""
    corpus = schema_corpus.hand_written()[:6]
    h = lm.run(harness_args(tmp_path, corpus, fake=True, bug=bug, extras=False), log=lambda line: None)
    found = {d["what"] for r in h.records for d in r["differences"]}
    assert what in found, (bug, found)


def test_corpus_is_deterministic_and_covers_the_features():
    a, b = schema_corpus.build(560), schema_corpus.build(560)
    assert a == b and len(a) == 560
    assert schema_corpus.build(100) == a[:100]
    text = json.dumps([r["schema"] for r in a])
    for kw in sorted(schema_corpus.KEYWORDS):
        assert f'"{kw}"' in text, kw
    for fmt in schema_corpus.FORMATS:
        assert f'"format": "{fmt}"' in text, fmt
    enum_sizes = [len(r["schema"].get("enum") or r["schema"]["properties"]["choice"]["enum"])
                  for r in a if r["id"].endswith("enum_large")]
    assert min(enum_sizes) >= 200 and max(enum_sizes) <= 2000 and len(enum_sizes) >= 20

    def depth(s):
        if not isinstance(s, dict):
            return 0
        subs = list(s.get("properties", {}).values()) + [s.get("items")]
        return 1 + max(depth(x) for x in subs)
    deep = [depth(r["schema"]) for r in a if r["id"].endswith("-deep")]
    assert min(deep) >= 6 and max(deep) >= 10, deep
    assert any(r["schema"] is True for r in a)


def test_corpus_and_documents_do_not_depend_on_the_hash_seed():
    code = ("import hashlib, json, sys; sys.path.insert(0, sys.argv[1]); import schema_corpus, documents; "
            "c = schema_corpus.build(120); d = [documents.documents_for(r['schema'], r['id'], 2, 2) for r in c]; "
            "print(hashlib.sha256(json.dumps([c, d]).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "tools", "grammar")],
                              env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True, text=True,
                              check=True).stdout for seed in ("1", "2")}
    assert len(digests) == 1, digests


def test_documents_are_in_the_language():
    """Valid documents pass Validator and its ordering rule; invalid ones fail it; mutations
    of every kind occur."""
    kinds = set()
    for rec in small_corpus():
        d = documents.documents_for(rec["schema"], rec["id"], 2, 2)
        assert len(d["valid"]) == 2 and len(d["invalid"]) == 2, rec["id"]
        for x in d["valid"]:
            assert documents.in_language(rec["schema"], x["text"]) == (True, ""), (rec["id"], x)
        for x in d["invalid"]:
            assert not documents.in_language(rec["schema"], x["text"])[0], (rec["id"], x)
            kinds.add(x["mutation"])
    assert len(kinds) >= 10, kinds
    assert documents.in_language({"type": "integer"}, "1.0")[0] is False  # llguidance's integers
    assert documents.in_language({"type": "object"}, '{"a":' + " " * 21 + "1}")[0] is False
    assert documents.in_language({"type": "object"}, '{"a":' + " " * 20 + "1}")[0] is True
    assert documents.in_language({"type": "string", "pattern": "^a$"}, '"a\\n"')[0] is False

#!/usr/bin/env python3
"""Checks tools/train's data generator, tokenizer and evaluation helpers (issue 24), no torch.

    check_pipeline.py [--qwen3-config PATH/tokenizer_config.json]

- data.py: the same seed gives the same bytes (with 1 and 2 workers), another seed other
  bytes; every training text is what the chat template renders, with loss spans that start
  after "<|im_start|>assistant\\n" and end with "<|im_end|>"; held-out prompts end with the
  no-think generation prompt and their distinctive user turns never occur in training.
- chat_template.jinja is byte-identical to Qwen3's (when --qwen3-config is given and exists).
- tokenizer.py: the trained tokenizer loads in transformers' AutoTokenizer with eos
  <|im_end|>, pad <|endoftext|> and no bos; AutoTokenizer and the raw tokenizer give the same
  ids, which decode back to the text; digits are single tokens; apply_chat_template renders
  the generator's conversations (with tools, and with the generation prompt) byte for byte;
  the encoded loss mask covers exactly the assistant spans.
- eval.py: the schema checker accepts every reference JSON answer and tool call and rejects
  broken ones; the speculative-acceptance simulation counts a hand-made case correctly.
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "tools", "train")
sys.path.insert(0, TRAIN)
import data  # noqa: E402
import eval as ev  # noqa: E402


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def sh(*args):
    out = subprocess.run([sys.executable] + list(args), capture_output=True, text=True)
    if out.returncode != 0:
        fail(" ".join(args) + ":\n" + out.stdout + out.stderr)
    return out.stdout


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3-config", default=os.path.join(ROOT, "..", "shared", "data", "llm", "tokenizer_config.json"))
    args = ap.parse_args()
    if os.path.exists(args.qwen3_config):
        if json.load(open(args.qwen3_config))["chat_template"] != open(os.path.join(TRAIN, "chat_template.jinja")).read():
            fail("chat_template.jinja differs from " + args.qwen3_config)
    else:
        print("note: %s missing, template identity not checked" % args.qwen3_config)

    with tempfile.TemporaryDirectory() as tmp:
        a, b, c = (os.path.join(tmp, x) for x in "abc")
        sh(os.path.join(TRAIN, "data.py"), "eval", "--seed", "2", "--per-task", "6", "--out", a)
        sh(os.path.join(TRAIN, "data.py"), "eval", "--seed", "2", "--per-task", "6", "--out", b)
        if sha(a + "/eval.jsonl") != sha(b + "/eval.jsonl"):
            fail("eval.jsonl differs for the same seed")
        common = ["--count", "1500", "--exclude", a + "/eval.jsonl"]
        sh(os.path.join(TRAIN, "data.py"), "train", "--seed", "1", "--workers", "2", "--out", a, *common)
        sh(os.path.join(TRAIN, "data.py"), "train", "--seed", "1", "--workers", "1", "--out", b, *common)
        sh(os.path.join(TRAIN, "data.py"), "train", "--seed", "5", "--workers", "2", "--out", c, *common)
        if sha(a + "/train.jsonl") != sha(b + "/train.jsonl"):
            fail("train.jsonl differs for the same seed (1 vs 2 workers)")
        if sha(a + "/train.jsonl") == sha(c + "/train.jsonl"):
            fail("train.jsonl is the same for seeds 1 and 5")
        train = [json.loads(l) for l in open(a + "/train.jsonl")]
        evals = [json.loads(l) for l in open(a + "/eval.jsonl")]
        if len(train) != 1500 or len(evals) != 6 * len(data.EVAL_TASKS):
            fail("%d training conversations, %d eval items" % (len(train), len(evals)))
        tasks = {t for d in train for t in d["tasks"]}
        if tasks != set(data.EVAL_TASKS):
            fail("training tasks %s" % sorted(tasks ^ set(data.EVAL_TASKS)))
        for d in train:
            if not d["spans"] or any(d["text"][e - len(data.IM_END) : e] != data.IM_END or d["text"][s - len(data.ASSISTANT_OPEN) : s] != data.ASSISTANT_OPEN for s, e in d["spans"]):
                fail("bad spans in %r" % d["text"][:200])
            if not d["text"].rstrip("\n").endswith(data.IM_END) or not d["text"][d["spans"][-1][0] :].startswith("<think>\n\n</think>\n\n"):
                fail("the last assistant turn lacks the empty think block: %r" % d["text"][-200:])
        train_text = "\n".join(d["text"] for d in train)
        for it in evals:
            if not it["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"):
                fail("eval prompt without the no-think generation prompt")
            last_user = it["prompt"].rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>")[0]
            if len(last_user) >= 16 and not data.FOLLOW_UP.match(last_user) and it["task"] not in ("tool_answer",):
                if "<|im_start|>user\n" + last_user + "<|im_end|>" in train_text:
                    fail("held-out prompt occurs in training: %r" % last_user[:80])

        # Tokenizer.
        sh(os.path.join(TRAIN, "tokenizer.py"), "train", "--data", a + "/train.jsonl", "--out", a + "/tok", "--vocab", "2048")
        sh(os.path.join(TRAIN, "tokenizer.py"), "encode", "--data", a + "/train.jsonl", "--tokenizer", a + "/tok", "--out", a + "/tokens.npz", "--workers", "2")
        import transformers
        from tokenizers import Tokenizer

        raw = Tokenizer.from_file(a + "/tok/tokenizer.json")
        at = transformers.AutoTokenizer.from_pretrained(a + "/tok")
        if (at.eos_token, at.pad_token, at.bos_token) != ("<|im_end|>", "<|endoftext|>", None):
            fail("AutoTokenizer specials %r" % ((at.eos_token, at.pad_token, at.bos_token),))
        if raw.get_vocab_size() > 2048 or at.eos_token_id != raw.token_to_id("<|im_end|>"):
            fail("vocabulary %d, eos %d" % (raw.get_vocab_size(), at.eos_token_id))
        for d in train[:400] + [{"text": it["prompt"] + it["answer"]} for it in evals]:
            ids = raw.encode(d["text"], add_special_tokens=False).ids
            if at(d["text"], add_special_tokens=False)["input_ids"] != ids:
                fail("AutoTokenizer and tokenizers disagree on %r" % d["text"][:120])
            if raw.decode(ids, skip_special_tokens=False) != d["text"]:
                fail("round trip broke %r" % d["text"][:120])
        digits = raw.encode("1234567890", add_special_tokens=False).ids
        if len(digits) != 10:
            fail("digits are not single tokens: %s" % raw.encode("1234567890").tokens)
        for t in ("<|im_start|>", "<think>", "</tool_call>", "<tool_response>"):
            if raw.encode(t, add_special_tokens=False).ids != [raw.token_to_id(t)]:
                fail(t + " is not one token")
        rng = random.Random(11)
        prose = ["A short paragraph of prose. It has a second sentence, and then it ends."]
        for i in range(40):
            if i % 2:
                msgs, tools = data.tool_conversation(rng)
            else:
                msgs, tools = data.plain_conversation(rng, prose), None
            msgs = data.strip(msgs)
            mine = data.render(msgs, tools)
            theirs = at.apply_chat_template(msgs, tools=tools, tokenize=False, enable_thinking=False)
            if mine != theirs:
                fail("apply_chat_template differs:\n%r\n%r" % (mine, theirs))
            prefix = msgs[: max(i for i, m in enumerate(msgs) if m["role"] == "assistant")]
            mine = data.render(prefix, tools, add_generation_prompt=True)
            theirs = at.apply_chat_template(prefix, tools=tools, tokenize=False, add_generation_prompt=True, enable_thinking=False)
            if mine != theirs:
                fail("generation prompt differs:\n%r\n%r" % (mine, theirs))
        z = np.load(a + "/tokens.npz")
        if int(z["starts"][-1]) != len(z["ids"]) or len(z["mask"]) != len(z["ids"]):
            fail("npz offsets inconsistent")
        kept = [d for d in train if len(raw.encode(d["text"], add_special_tokens=False).ids) <= 512]
        if len(kept) != len(z["starts"]) - 1:
            fail("%d conversations kept, %d expected" % (len(z["starts"]) - 1, len(kept)))
        for n in range(0, len(kept), 37):
            s, e = z["starts"][n], z["starts"][n + 1]
            ids, mask = z["ids"][s:e].tolist(), z["mask"][s:e]
            if ids != raw.encode(kept[n]["text"], add_special_tokens=False).ids:
                fail("encoded ids differ from the whole text's (conversation %d)" % n)
            want = "".join(kept[n]["text"][x:y] for x, y in kept[n]["spans"])
            got = raw.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
            if got != want:
                fail("loss mask covers %r, want %r" % (got[:100], want[:100]))

    # Evaluation helpers.
    n_json = n_tool = 0
    for it in evals:
        if it["task"] == "json":
            n_json += 1
            schema = it["meta"]["schema"]
            if not ev.json_valid(it["answer"], schema):
                fail("reference JSON answer rejected: " + it["answer"])
            obj = json.loads(it["answer"])
            if schema["required"]:
                broken = dict(obj)
                del broken[schema["required"][0]]
                if ev.check_schema(broken, schema):
                    fail("a missing required key passed")
            wrong = dict(obj, extra_key=1)
            if ev.check_schema(wrong, schema):
                fail("an extra key passed")
            if ev.json_valid(it["answer"][:-1], schema):
                fail("truncated JSON passed")
        if it["task"] == "tool_call":
            n_tool += 1
            if not ev.tool_call_valid(it["answer"], it["prompt"]):
                fail("reference tool call rejected: " + it["answer"])
            if ev.tool_call_valid(it["answer"].replace('"name": "', '"name": "no_', 1), it["prompt"]):
                fail("a call of an unoffered tool passed")
            if ev.tool_call_valid(it["answer"].replace("<tool_call>\n", "<tool_call>"), it["prompt"]):
                fail("a malformed tool call passed")
    if not n_json or not n_tool:
        fail("no json / tool_call items")
    for value, schema, ok in (
        (3, {"type": "integer"}, True),
        (True, {"type": "integer"}, False),
        (2.5, {"type": "number"}, True),
        ("red", {"type": "string", "enum": ["red"]}, True),
        ("blue", {"type": "string", "enum": ["red"]}, False),
        (["a", 1], {"type": "array", "items": {"type": "string"}}, False),
    ):
        if ev.check_schema(value, schema) != ok:
            fail("check_schema(%r, %r) != %r" % (value, schema, ok))
    # Target output y (6 tokens); draft predictions match at 0, 1, 2, 4, 5 only.
    item = {"task": "t", "prompt_ids": [9, 9]}
    y = [1, 2, 3, 4, 5, 6]
    pred = [0, 1, 2, 3, 0, 5, 6, 0]  # pred[1 + j] guesses y[j]
    acc = ev.acceptance([item], [y], [pred], 4)
    # Round 1: proposes 4, accepts 3 (1, 2, 3), target adds 4 -> p = 4. Round 2: proposes 2,
    # accepts 2 (5, 6) -> done. 5 of 6 accepted, 6 tokens in 2 rounds.
    if acc["acceptance"] != round(5 / 6, 4) or acc["tokens_per_round"] != 3.0:
        fail("acceptance simulation %r" % acc)
    print("pipeline: data deterministic, template identical, tokenizer loads and round-trips, mask and checks correct")


if __name__ == "__main__":
    main()

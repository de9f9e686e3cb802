#!/usr/bin/env python3
"""Evaluates parley's small chat models on the held-out prompts of data.py (issue 24).

    eval.py --eval DIR/eval.jsonl --target TARGETDIR [--draft DRAFTDIR] --out eval.json [--k 4]

For each model: greedy decoding (batches of left-padded prompts with the KV cache, float32
compute on the stored bf16 weights) of every held-out assistant turn, stopped at
<|im_end|>, and per task the exact-match rate against the text the chat template renders
for the reference turn. The json task also counts outputs that parse and satisfy the schema
(a checker for the subset data.py emits: object properties, required, additionalProperties
false, string/integer/number/boolean/array types, enum, array items); tool_call counts calls
in Qwen3's <tool_call>\\n{...}\\n</tool_call> form whose name is an offered tool and whose
arguments satisfy its parameters.

With --draft, the draft's token acceptance rate against the target is simulated for greedy
speculative decoding with k proposals per round. While the draft agrees with the target its
proposals are its teacher-forced predictions along the target's own greedy output, so one
forward pass of the draft over prompt + target output gives every round: at position p the
draft proposes up to k tokens, the leading matches are accepted, and the target adds one
token (its correction, or the bonus after k accepted), so p advances by accepted + 1.
acceptance = accepted / proposed; tokens_per_round = target tokens / rounds.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402  (TOOLS; data imports jinja2 only when rendering)


def check_schema(value, schema):
    """True when value satisfies the JSON-schema subset that data.py uses."""
    t = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        return False
    if t == "object":
        if not isinstance(value, dict):
            return False
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return False
        for key, v in value.items():
            if key in props:
                if not check_schema(v, props[key]):
                    return False
            elif schema.get("additionalProperties", True) is False:
                return False
        return True
    if t == "array":
        return isinstance(value, list) and all(check_schema(v, schema.get("items", {})) for v in value)
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return t is None


def parse_tool_call(text):
    head, tail = "<tool_call>\n", "\n</tool_call>"
    if not (text.startswith(head) and text.endswith(tail)):
        return None
    try:
        call = json.loads(text[len(head) : -len(tail)])
    except ValueError:
        return None
    return call if isinstance(call, dict) else None


def tool_call_valid(text, prompt):
    call = parse_tool_call(text)
    if not call or not isinstance(call.get("name"), str) or not isinstance(call.get("arguments"), dict):
        return False
    tool = data.TOOLS.get(call["name"])
    if tool is None or ('"name": "%s"' % call["name"]) not in prompt:
        return False
    return check_schema(call["arguments"], tool["function"]["parameters"])


def json_valid(text, schema):
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return check_schema(value, schema)


def load_model(path, torch, transformers):
    kwargs = {}
    if int(torch.__version__.split(".")[0]) < 2:
        kwargs["attn_implementation"] = "eager"
    model = transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return model.float().eval()


def _cache_of(out):
    # transformers 5.2x names the returned cache `cache`; earlier versions `past_key_values`.
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def greedy(model, x, att, max_new, eos_ids, pad_id, torch):
    """Greedy decoding of a left-padded batch with the model's KV cache: a loop of its own
    rather than generate(), so that it runs the same on every transformers version."""
    pos = (att.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=x, attention_mask=att, position_ids=pos, use_cache=True)
    cache = _cache_of(out)
    next_pos = pos[:, -1:] + 1
    eos = torch.tensor(eos_ids, device=x.device)
    done = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    steps = []
    for _ in range(max_new):
        nxt = out.logits[:, -1].argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        steps.append(nxt)
        done = done | (nxt[:, None] == eos[None, :]).any(-1)
        if bool(done.all()):
            break
        att = torch.cat([att, torch.ones_like(att[:, :1])], dim=1)
        out = model(input_ids=nxt[:, None], attention_mask=att, position_ids=next_pos, past_key_values=cache, use_cache=True)
        cache = _cache_of(out)
        next_pos = next_pos + 1
    return torch.stack(steps, dim=1).tolist()


def generate_all(model, items, tok, device, torch, eos_ids, pad_id, batch_size):
    """Greedy continuations (token ids, cut after the first eos) for every item."""
    order = sorted(range(len(items)), key=lambda i: len(items[i]["prompt_ids"]))
    outs = [None] * len(items)
    for b in range(0, len(order), batch_size):
        chunk = order[b : b + batch_size]
        width = max(len(items[i]["prompt_ids"]) for i in chunk)
        x = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, i in enumerate(chunk):
            p = items[i]["prompt_ids"]
            x[r, width - len(p) :] = torch.tensor(p)
            att[r, width - len(p) :] = 1
        new = min(256, max(len(items[i]["answer_ids"]) for i in chunk) + 8)
        with torch.no_grad():
            y = greedy(model, x.to(device), att.to(device), new, eos_ids, pad_id, torch)
        for r, i in enumerate(chunk):
            seq = y[r]
            for j, t in enumerate(seq):
                if t in eos_ids:
                    seq = seq[: j + 1]
                    break
            outs[i] = seq
    return outs


def teacher_forced_argmax(model, seqs, device, torch, pad_id, batch_size):
    """Per sequence, the model's argmax prediction for each next position (right padding, no mask)."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    preds = [None] * len(seqs)
    for b in range(0, len(order), batch_size):
        chunk = order[b : b + batch_size]
        width = max(len(seqs[i]) for i in chunk)
        x = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        for r, i in enumerate(chunk):
            x[r, : len(seqs[i])] = torch.tensor(seqs[i])
        with torch.no_grad():
            logits = model(input_ids=x.to(device), use_cache=False).logits
        am = logits.argmax(-1).tolist()
        for r, i in enumerate(chunk):
            preds[i] = am[r][: len(seqs[i])]
    return preds


def score(items, outs, tok, eos_ids):
    per = {}
    samples = {}
    for it, ids in zip(items, outs):
        body = ids[:-1] if ids and ids[-1] in eos_ids else ids
        text = tok.decode(body, skip_special_tokens=False)
        s = per.setdefault(it["task"], {"n": 0, "exact": 0})
        s["n"] += 1
        s["exact"] += int(text == it["answer"])
        if it["task"] == "json":
            s["json_valid"] = s.get("json_valid", 0) + int(json_valid(text, it["meta"]["schema"]))
        if it["task"] == "tool_call":
            s["call_valid"] = s.get("call_valid", 0) + int(tool_call_valid(text, it["prompt"]))
        s["stopped"] = s.get("stopped", 0) + int(bool(ids) and ids[-1] in eos_ids)
        sm = samples.setdefault(it["task"], [])
        if len(sm) < 3:
            sm.append({"answer": it["answer"], "output": text})
    for s in per.values():
        n = s["n"]
        for key in list(s):
            if key != "n":
                s[key] = round(s[key] / n, 4)
    return per, samples


def acceptance(items, target_outs, draft_preds, k):
    total = {"accepted": 0, "proposed": 0, "rounds": 0, "tokens": 0}
    per_task = {}
    for it, y, pred in zip(items, target_outs, draft_preds):
        start = len(it["prompt_ids"]) - 1  # pred[start + j] is the draft's guess for y[j]
        match = [pred[start + j] == y[j] for j in range(len(y))]
        acc = {"accepted": 0, "proposed": 0, "rounds": 0, "tokens": len(y)}
        p = 0
        while p < len(y):
            n = min(k, len(y) - p)
            a = 0
            while a < n and match[p + a]:
                a += 1
            acc["accepted"] += a
            acc["proposed"] += n
            acc["rounds"] += 1
            p += a + 1
        t = per_task.setdefault(it["task"], {"accepted": 0, "proposed": 0, "rounds": 0, "tokens": 0})
        for key in acc:
            t[key] += acc[key]
            total[key] += acc[key]

    def summary(c):
        return {
            "acceptance": round(c["accepted"] / max(1, c["proposed"]), 4),
            "tokens_per_round": round(c["tokens"] / max(1, c["rounds"]), 3),
            "target_tokens": c["tokens"],
        }

    return {"k": k, **summary(total), "per_task": {t: summary(c) for t, c in sorted(per_task.items())}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--out", required=True)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0, help="items per task (0: all)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    t0 = time.time()
    import torch
    import transformers
    from tokenizers import Tokenizer

    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    tok = Tokenizer.from_file(os.path.join(args.target, "tokenizer.json"))
    eos_ids = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    pad_id = eos_ids[1]
    items, seen = [], {}
    with open(args.eval, encoding="utf-8") as f:
        for line in f:
            it = json.loads(line)
            seen[it["task"]] = seen.get(it["task"], 0) + 1
            if args.limit and seen[it["task"]] > args.limit:
                continue
            items.append(it)
    encs = tok.encode_batch([it["prompt"] for it in items], add_special_tokens=False)
    answers = tok.encode_batch([it["answer"] for it in items], add_special_tokens=False)
    for it, e, a in zip(items, encs, answers):
        it["prompt_ids"], it["answer_ids"] = e.ids, a.ids

    result = {"items": len(items), "device": str(device), "torch": torch.__version__, "transformers": transformers.__version__}
    target = load_model(args.target, torch, transformers).to(device)
    target_outs = generate_all(target, items, tok, device, torch, eos_ids, pad_id, args.batch_size)
    result["target"], result["target_samples"] = score(items, target_outs, tok, eos_ids)
    print("[eval] target:", json.dumps({t: s["exact"] for t, s in result["target"].items()}), flush=True)
    if args.draft:
        draft = load_model(args.draft, torch, transformers).to(device)
        draft_outs = generate_all(draft, items, tok, device, torch, eos_ids, pad_id, args.batch_size)
        result["draft"], result["draft_samples"] = score(items, draft_outs, tok, eos_ids)
        print("[eval] draft:", json.dumps({t: s["exact"] for t, s in result["draft"].items()}), flush=True)
        seqs = [it["prompt_ids"] + y for it, y in zip(items, target_outs)]
        draft_preds = teacher_forced_argmax(draft, seqs, device, torch, pad_id, args.batch_size)
        result["speculative"] = acceptance(items, target_outs, draft_preds, args.k)
        # The target's own teacher-forced argmax should reproduce its greedy output; a low
        # value would mean the batched (left-padded) decoding drifted.
        target_preds = teacher_forced_argmax(target, seqs, device, torch, pad_id, args.batch_size)
        same = sum(int(target_preds[i][len(it["prompt_ids"]) - 1 + j] == y[j]) for i, (it, y) in enumerate(zip(items, target_outs)) for j in range(len(y)))
        result["speculative"]["target_self_agreement"] = round(same / max(1, sum(len(y) for y in target_outs)), 4)
        print("[eval] draft acceptance (k=%d): %.3f, %.2f tokens per target step" % (args.k, result["speculative"]["acceptance"], result["speculative"]["tokens_per_round"]), flush=True)
    result["seconds"] = round(time.time() - t0, 1)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
    print("[eval] wrote %s (%.0f s)" % (args.out, result["seconds"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())

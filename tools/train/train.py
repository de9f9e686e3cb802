#!/usr/bin/env python3
"""Trains one of parley's small chat models (issue 24) from the encoded conversations.

    train.py --data train_tokens.npz --tokenizer TOKDIR --out MODELDIR --size target --minutes 4
    train.py ... --size draft --minutes 4
    train.py ... --smoke [--arch qwen2]          # a few CPU steps at a tiny size

The model is transformers' Qwen3ForCausalLM (or, with --arch qwen2, Qwen2ForCausalLM, only so
that the data, batching and loss code can be smoke-tested with an older transformers that
lacks Qwen3). The loss is the next-token cross entropy on the assistant tokens only (the
mask from tokenizer.py encode), computed by applying lm_head to those positions alone.
Batches are padded, not packed: conversations of similar length are grouped so that each
batch holds about --batch-tokens tokens; padding sits on the right, so a causal model needs
no attention mask (no real token attends to a later pad). Training runs in bf16 autocast on
CUDA (float32 weights and AdamW state), with a linear warm-up and a cosine decay to 10 %.

--minutes bounds the whole run, from start to saved model: after the first steps the
throughput fixes the step count that fits the remaining time (or --steps fixes it), the
cosine schedule is laid over that count, and a hard deadline ends the loop cleanly in any
case. The loss curve goes to MODELDIR/train_log.json; the model is saved in the Hugging Face
layout (config.json, model.safetensors in bf16, generation_config.json) with the tokenizer
files beside it.
"""
import argparse
import json
import math
import os
import random
import shutil
import sys
import time

import numpy as np

SIZES = {
    # hidden, layers, heads, kv heads, head_dim, intermediate
    "target": (384, 8, 6, 2, 64, 1024),
    "draft": (192, 4, 3, 1, 64, 512),
    "small": (256, 6, 4, 2, 64, 768),  # a lighter target (~6.8 M) if the committed size matters more
    "tiny": (64, 2, 4, 2, 16, 128),
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="train_tokens.npz from tokenizer.py encode")
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="target")
    ap.add_argument("--arch", choices=["qwen3", "qwen2"], default="qwen3")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock budget of this run")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (0: fit the budget)")
    ap.add_argument("--batch-tokens", type=int, default=131072)
    ap.add_argument("--lr", type=float, default=0.0, help="peak learning rate (0: by size)")
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (off by default)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (eager for torch < 2)")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--smoke", action="store_true", help="tiny model, a few steps, CPU")
    args = ap.parse_args()
    if args.smoke:
        args.size, args.steps, args.batch_tokens, args.warmup, args.log_every = "tiny", args.steps or 12, 4096, 3, 2
        if args.device == "auto":
            args.device = "cpu"
    if args.arch == "qwen2" and args.attn == "sdpa":
        import torch

        if int(torch.__version__.split(".")[0]) < 2:
            args.attn = "eager"
    if not args.lr:
        args.lr = {"target": 2e-3, "small": 2.5e-3, "draft": 3e-3, "tiny": 3e-3}[args.size]
    return args


def special_ids(tokenizer_dir):
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    n = max([max(tj["model"]["vocab"].values())] + list(ids.values())) + 1
    for t in ("<|endoftext|>", "<|im_end|>", "<|im_start|>"):
        if t not in ids:
            raise SystemExit("[train] tokenizer lacks " + t)
    return ids, n


ROPE_THETA = 1000000.0


def check_rope(model, head_dim):
    """The rotary frequencies the model computes must be those of ROPE_THETA, which the
    config records and export_gguf.py writes."""
    import torch

    rot = getattr(model.model, "rotary_emb", None)
    inv = getattr(rot, "inv_freq", None)
    if inv is None:
        print("[train] note: no model.rotary_emb.inv_freq to check the RoPE base against", flush=True)
        return
    want = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if inv.shape != want.shape or not torch.allclose(inv.double().cpu(), want, rtol=1e-4):
        raise SystemExit("[train] the model's RoPE frequencies are not those of theta %g" % ROPE_THETA)


def make_model(args, vocab_size, ids):
    import transformers

    hidden, layers, heads, kv, head_dim, inter = SIZES[args.size]
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        hidden_act="silu",
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        initializer_range=0.02,
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        attn_implementation=args.attn,
        use_cache=True,
    )
    if args.arch == "qwen3":
        if not hasattr(transformers, "Qwen3ForCausalLM"):
            raise SystemExit("[train] transformers %s has no Qwen3ForCausalLM (use --arch qwen2 for a smoke test)" % transformers.__version__)
        # rope_theta for configs that keep it as its own key, rope_parameters for those that
        # fold it in (transformers 5.2x); check_rope below verifies what the model uses.
        config = transformers.Qwen3Config(
            head_dim=head_dim,
            rope_theta=ROPE_THETA,
            rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
            **common,
        )
        if getattr(config, "head_dim", head_dim) != head_dim:
            raise SystemExit("[train] Qwen3Config ignored head_dim")
        model = transformers.Qwen3ForCausalLM(config)
        check_rope(model, head_dim)
    else:
        # Qwen2 derives head_dim from hidden / heads; the smoke test needs no exact twin.
        config = transformers.Qwen2Config(rope_theta=ROPE_THETA, **common)
        model = transformers.Qwen2ForCausalLM(config)
        check_rope(model, hidden // heads)
    return model, config


class Batches:
    """Length-grouped, right-padded batches of about batch_tokens tokens, reshuffled every epoch."""

    def __init__(self, starts, batch_tokens, seed, pad_to=16):
        self.lengths = np.diff(starts)
        self.batch_tokens = batch_tokens
        self.rng = np.random.default_rng(seed)
        self.pad_to = pad_to
        self.epoch = 0
        self.queue = []

    def _epoch(self):
        order = self.rng.permutation(len(self.lengths))
        # Sort within large random windows: similar lengths per batch, random batch order.
        window = 64 * max(1, self.batch_tokens // 256)
        batches = []
        for w in range(0, len(order), window):
            chunk = order[w : w + window]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            i = 0
            while i < len(chunk):
                j, longest = i, 0
                while j < len(chunk):
                    longest2 = max(longest, int(self.lengths[chunk[j]]))
                    padded = -(-longest2 // self.pad_to) * self.pad_to
                    if j > i and padded * (j - i + 1) > self.batch_tokens:
                        break
                    longest = longest2
                    j += 1
                batches.append(chunk[i:j])
                i = j
        self.rng.shuffle(batches)
        self.queue = batches
        self.epoch += 1

    def next(self):
        if not self.queue:
            self._epoch()
        return self.queue.pop()


def main():
    args = parse_args()
    t_start = time.time()
    deadline = t_start + args.minutes * 60.0
    import torch
    import torch.nn.functional as F
    import transformers

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    ids_map, vocab_n = special_ids(args.tokenizer)
    vocab_size = -(-vocab_n // 64) * 64  # rows of the embedding, a multiple of 64
    data = np.load(args.data)
    ids_np, mask_np, starts = data["ids"], data["mask"], data["starts"]
    if len(starts) < 2:
        raise SystemExit("[train] no conversations in " + args.data)
    if int(ids_np.max()) >= vocab_n:
        raise SystemExit("[train] token id %d outside the tokenizer's %d" % (int(ids_np.max()), vocab_n))
    pad_id = ids_map["<|endoftext|>"]
    # The whole corpus lives on the device; batches are gathered there.
    ids_all = torch.from_numpy(ids_np.astype(np.int64)).to(device)
    mask_all = torch.from_numpy(mask_np.astype(np.bool_)).to(device)
    starts_t = torch.from_numpy(starts).to(device)
    lengths_t = starts_t[1:] - starts_t[:-1]

    model, config = make_model(args, vocab_size, ids_map)
    model.to(device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    print(
        "[train] %s %s: %.2f M parameters (%.2f M without the embedding), vocab %d (tokenizer %d), %d conversations, %d tokens, device %s"
        % (args.arch, args.size, n_params / 1e6, (n_params - n_embed) / 1e6, vocab_size, vocab_n, len(starts) - 1, len(ids_np), device),
        flush=True,
    )
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in name else no_decay).append(p)
    opt_kwargs = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if device.type == "cuda":
        opt_kwargs["fused"] = True
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], **opt_kwargs
    )
    body = model.model
    if args.compile:
        body = torch.compile(body, dynamic=True)
    autocast = device.type == "cuda"

    batches = Batches(starts, args.batch_tokens, args.seed)

    def get_batch():
        idx = torch.from_numpy(batches.next().astype(np.int64)).to(device)
        lens = lengths_t[idx]
        width = int(-(-int(lens.max()) // 16) * 16)
        pos = torch.arange(width, device=device)
        valid = pos[None, :] < lens[:, None]
        gather = (starts_t[idx][:, None] + pos[None, :]).clamp_max(len(ids_np) - 1)
        x = torch.where(valid, ids_all[gather], torch.full_like(gather, pad_id))
        m = mask_all[gather] & valid
        return x, m

    def loss_of(x, m):
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
            h = body(input_ids=x, use_cache=False).last_hidden_state
            sel = m[:, 1:]
            logits = model.lm_head(h[:, :-1][sel])
        return F.cross_entropy(logits.float(), x[:, 1:][sel])

    total_steps = args.steps
    reserve = 15.0  # seconds kept for saving
    log = {"args": vars(args), "params": n_params, "points": []}
    step, tokens = 0, 0
    acc, acc_n = torch.zeros((), device=device), 0
    t_measure, step_measure = None, 0
    min_lr = 0.1 * args.lr
    stop_reason = "steps"
    while True:
        if total_steps and step >= total_steps:
            break
        if time.time() > deadline - reserve:
            stop_reason = "time"
            break
        # Once throughput is known (steps 10-40, then refined over 40-300, past warm-up and
        # with the other run sharing the GPU), fit the step count to the budget.
        if not args.steps and step in (40, 300):
            per_step = (time.time() - t_measure) / (step - step_measure)
            total_steps = step + max(1, int((deadline - reserve - time.time()) / per_step * 0.97))
            print("[train] %.1f ms/step -> %d steps in the budget" % (per_step * 1e3, total_steps), flush=True)
        if not args.steps and step in (10, 40):
            t_measure, step_measure = time.time(), step
        horizon = total_steps or 10**9
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        else:
            frac = min(1.0, (step - args.warmup) / max(1, horizon - args.warmup))
            lr = min_lr + 0.5 * (args.lr - min_lr) * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        x, m = get_batch()
        loss = loss_of(x, m)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        acc += loss.detach()
        acc_n += 1
        if step % args.log_every == 0 or step == total_steps:
            value = float(acc) / acc_n
            point = {"step": step, "seconds": round(time.time() - t_start, 2), "lr": lr, "loss": round(value, 5), "tokens": tokens, "epoch": batches.epoch}
            log["points"].append(point)
            if step % (args.log_every * 8) == 0 or args.smoke:
                print("[train] step %d/%s loss %.4f lr %.2e %.0fs epoch %d" % (step, total_steps or "?", value, lr, point["seconds"], batches.epoch), flush=True)
            if not math.isfinite(value):
                raise SystemExit("[train] loss is not finite at step %d" % step)
            acc.zero_()
            acc_n = 0
    if acc_n:
        log["points"].append({"step": step, "seconds": round(time.time() - t_start, 2), "lr": lr, "loss": round(float(acc) / acc_n, 5), "tokens": tokens, "epoch": batches.epoch})
    log["steps"] = step
    log["stop"] = stop_reason
    log["train_seconds"] = round(time.time() - t_start, 1)
    log["final_loss"] = log["points"][-1]["loss"] if log["points"] else None

    os.makedirs(args.out, exist_ok=True)
    model.eval()
    model.to(torch.bfloat16)
    model.config.use_cache = True
    try:
        model.save_pretrained(args.out)
    except Exception as e:  # keep the trained weights even if this transformers' saver balks
        print("[train] save_pretrained failed (%s); writing config.json and model.safetensors directly" % e, flush=True)
        from safetensors.torch import save_file

        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(args.out)
    gen = transformers.GenerationConfig(
        bos_token_id=None,
        eos_token_id=[ids_map["<|im_end|>"], ids_map["<|endoftext|>"]],
        pad_token_id=ids_map["<|endoftext|>"],
        do_sample=False,
    )
    gen.save_pretrained(args.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    log["total_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)
    print("[train] %s: %d steps (%s), final loss %s, %.0f s -> %s" % (args.size, step, stop_reason, log["final_loss"], log["total_seconds"], args.out), flush=True)


if __name__ == "__main__":
    sys.exit(main())

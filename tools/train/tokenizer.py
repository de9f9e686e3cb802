#!/usr/bin/env python3
"""Trains the byte-level BPE of parley's small chat models and encodes the training data.

    tokenizer.py train  --data DIR/train.jsonl --out TOKDIR [--vocab 8192] [--sample 60000]
    tokenizer.py encode --data DIR/train.jsonl --tokenizer TOKDIR --out DIR/train_tokens.npz [--max-len 512]

`train` fits a BPE with the `tokenizers` package on the text of the first --sample
conversations (the special tokens cut out, so no merge spans them) and writes TOKDIR/
tokenizer.json and tokenizer_config.json. The layout is Qwen2/Qwen3's: NFC normalizer,
Qwen2's pre-tokenizer regex (a Split that isolates every digit, which helps arithmetic)
followed by ByteLevel without its own regex, ByteLevel decoder and post-processor, and the
ChatML specials added after the learned vocabulary (<|endoftext|>, <|im_start|>, <|im_end|>
special; <think>, </think>, <tool_call>, </tool_call>, <tool_response>, </tool_response>
added but not special, as in Qwen3). tokenizer_config.json carries the Qwen3 chat template,
eos_token <|im_end|>, pad_token <|endoftext|> and no bos token, so AutoTokenizer loads it as
Qwen3's own.

`encode` turns train.jsonl into token ids with a loss mask: it encodes the pieces between the
assistant-span boundaries separately (each boundary is a special token or a newline followed
by text, which the pre-tokenizer always splits at, so the pieces concatenate to the whole
text's encoding; the first conversations are checked against that), marks the assistant
pieces, and drops conversations longer than --max-len tokens. The .npz holds ids (uint16),
mask (uint8, 1 = loss), starts (int64 offsets of each conversation, plus the end); worker
processes encode chunks of conversations in parallel, in file order.
"""
import argparse
import itertools
import json
import os
import re
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Qwen2's pre-tokenizer regex (tokenizer.json of Qwen2/Qwen2.5/Qwen3).
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
SPLIT_SPECIALS = re.compile("|".join(re.escape(t) for t in SPECIAL + ADDED))


def build(vocab_size, texts):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(
        models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False)
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL) - len(ADDED),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )

    def pieces():
        for t in texts:
            for piece in SPLIT_SPECIALS.split(t):
                if piece:
                    yield piece

    tok.train_from_iterator(pieces(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    return tok


def tokenizer_config(tok):
    with open(os.path.join(HERE, "chat_template.jinja"), encoding="utf-8") as f:
        template = f.read()
    decoder = {}
    for t in SPECIAL + ADDED:
        decoder[str(tok.token_to_id(t))] = {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t in SPECIAL,
        }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": template,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def read_jsonl(path, limit=None):
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                return
            yield json.loads(line)


def cmd_train(args):
    texts = [d["text"] for d in read_jsonl(args.data, args.sample)]
    if not texts:
        raise SystemExit("[tokenizer] no conversations in " + args.data)
    tok = build(args.vocab, texts)
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(tok), f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("[tokenizer] %d tokens from %d conversations -> %s" % (tok.get_vocab_size(), len(texts), args.out))


def _encode_ids(tok, pieces):
    fast = getattr(tok, "encode_batch_fast", None)  # skips offsets (tokenizers >= 0.21)
    encs = (fast or tok.encode_batch)(pieces, add_special_tokens=False)
    return [e.ids for e in encs]


def encode_conversations(tok, docs, max_len, check=0):
    """(ids, mask, lengths, dropped) for conversations with text and spans."""
    pieces, flags, owner = [], [], []
    for n, d in enumerate(docs):
        text, pos = d["text"], 0
        for s, e in d["spans"]:
            for a, b, flag in ((pos, s, 0), (s, e, 1)):
                if b > a:
                    pieces.append(text[a:b])
                    flags.append(flag)
                    owner.append(n)
            pos = e
        if pos < len(text):
            pieces.append(text[pos:])
            flags.append(0)
            owner.append(n)
    piece_ids = _encode_ids(tok, pieces)
    piece_len = np.fromiter((len(p) for p in piece_ids), dtype=np.int64, count=len(piece_ids))
    ids = np.fromiter(itertools.chain.from_iterable(piece_ids), dtype=np.uint16, count=int(piece_len.sum()))
    mask = np.repeat(np.array(flags, dtype=np.uint8), piece_len)
    conv_len = np.bincount(np.array(owner, dtype=np.int64), weights=piece_len, minlength=len(docs)).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(conv_len)])
    for n in range(min(check, len(docs))):
        whole = tok.encode(docs[n]["text"], add_special_tokens=False).ids
        if whole != ids[starts[n] : starts[n + 1]].tolist():
            raise SystemExit("[tokenizer] piecewise encoding differs from the whole text's (conversation %d)" % n)
    keep = conv_len <= max_len
    token_keep = np.repeat(keep, conv_len)
    return ids[token_keep], mask[token_keep], conv_len[keep], int((~keep).sum())


_WORKER_TOK = None


def _encode_chunk(job):
    global _WORKER_TOK
    tok_path, lines, max_len, check = job
    if _WORKER_TOK is None:
        from tokenizers import Tokenizer

        _WORKER_TOK = Tokenizer.from_file(tok_path)
    try:
        return encode_conversations(_WORKER_TOK, [json.loads(line) for line in lines], max_len, check)
    except SystemExit as e:
        # SystemExit would kill the pool worker and leave imap waiting forever.
        raise RuntimeError(str(e)) from None


def _chunks(path, size):
    with open(path, encoding="utf-8") as f:
        lines = []
        for line in f:
            lines.append(line)
            if len(lines) == size:
                yield lines
                lines = []
        if lines:
            yield lines


def cmd_encode(args):
    tok_path = os.path.join(args.tokenizer, "tokenizer.json")
    with open(tok_path, encoding="utf-8") as f:
        tj = json.load(f)
    if len(tj["model"]["vocab"]) + len(tj["added_tokens"]) > 65535:
        raise SystemExit("[tokenizer] vocabulary too large for uint16 ids")
    # Each worker parses and encodes a chunk (the Rust encoder runs single-threaded there);
    # imap keeps the chunks in file order.
    jobs = ((tok_path, lines, args.max_len, 200 if i == 0 else 0) for i, lines in enumerate(_chunks(args.data, 20000)))
    parts = []
    if args.workers > 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            parts = list(pool.imap(_encode_chunk, jobs))
    else:
        parts = [_encode_chunk(j) for j in jobs]
    if not parts:
        raise SystemExit("[tokenizer] no conversations in " + args.data)
    ids = np.concatenate([p[0] for p in parts])
    mask = np.concatenate([p[1] for p in parts])
    lengths = np.concatenate([p[2] for p in parts])
    dropped = sum(p[3] for p in parts)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    np.savez(args.out, ids=ids, mask=mask, starts=starts)
    print(
        "[tokenizer] %d conversations, %d tokens (%.1f%% loss), mean %.0f, max %d; dropped %d over %d tokens -> %s"
        % (len(lengths), len(ids), 100.0 * mask.mean(), lengths.mean(), lengths.max(), dropped, args.max_len, args.out)
    )


def copy_tokenizer(src, dst):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--vocab", type=int, default=8192)
    t.add_argument("--sample", type=int, default=60000, help="conversations to learn merges from")
    e = sub.add_parser("encode")
    e.add_argument("--data", required=True)
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--out", required=True)
    e.add_argument("--max-len", type=int, default=512)
    e.add_argument("--workers", type=int, default=max(1, min(16, os.cpu_count() or 1)))
    args = ap.parse_args()
    cmd_train(args) if args.cmd == "train" else cmd_encode(args)


if __name__ == "__main__":
    sys.exit(main())

"""Live parity of parley's chat Tokenizer with the Hugging Face `tokenizers` package.

Usage: tokenizer_parity_test.py TOKENIZE_TOOL LLM_DATA_DIR

On Qwen3's tokenizer.json (LLM_DATA_DIR, from_file and from_dir against transformers'
AutoTokenizer) and on small tokenizers this script builds with tokenizers' own classes
(a Llama-3-style byte-level BPE with a regex Split and ignore_merges; SentencePiece-style
BPEs with byte_fallback, one with a Prepend + Replace normalizer, one with NFKC and a
Metaspace pre-tokenizer), every text of a multilingual corpus must encode to the same ids
(with and without special tokens), decode to the same text (with and without
skip_special_tokens), and stream-decode (one id at a time) to decode(ids) in valid UTF-8
pieces. Random id sequences must decode the same. Exits 1 on the first tokenizer with a
difference, printing what differs.
"""

import json
import os
import random
import subprocess
import sys
import tempfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers
from tokenizers import processors, trainers

CORPUS = [
    "",
    "Hello world",
    " Hello world",
    "Hello  World!  ",
    "def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { x[i] = i * 3.14159; }  // comment",
    "I'm sure you've seen it, they'll say we'd LOVE it; DON'T they?",
    "Numbers: 1 12 123 1234 12345 123456789 3.141592653589793 1,000,000",
    "Emoji: 👋🌍🎉 👨‍👩‍👧‍👦 ❤️ 🇫🇷 and text",
    "中文测试：你好，世界！这是一个分词器的测试。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트입니다",
    "مرحبا بالعالم، هذا اختبار.",
    "Accents: café naïve résumé Äpfel Ångström façade coöperate",
    "Decomposed: e\u0301 a\u0300 n\u0303 (NFD input)",
    "Ligatures and widths: ﬁ ﬂ １２３ ＡＢＣ ℌ ①",
    "Whitespace runs:    four   three  two\n\n\nthree newlines\r\nCRLF\t\ttabs \t mixed",
    "   leading spaces",
    "trailing spaces   ",
    "\n",
    " ",
    "\t",
    "Русский текст и ελληνικά γράμματα",
    "<s>special inside</s> text <unk> and <|begin_of_text|> plus <|eot_id|>",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>",
    "tags <think>reasoning</think> and <tool_call>{\"a\": 1}</tool_call>",
    "mark_here MARK mark-up MARKED [MARK] a MARK  b",
    "hello\u00a0nbsp and zero\u200bwidth",
    "Math: ∑_{i=1}^{n} x_i² ≤ ∞ → ∀ε>0 ∃δ",
    "URL https://example.com/path?q=1&r=two#frag e-mail: a.b@c.de",
    "ALL CAPS SENTENCE WITH SOME lowercase",
    "!!!???...,,,;;;:::---___===+++",
]

TRAIN_TEXT = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Hello world, hello tokenizer, hello byte pair encoding.",
    "def function(argument): return argument * 2  # python code",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 and more numbers.",
    "I'm you're they'll we'd it's don't won't can't shouldn't.",
    "Accents café naïve résumé über Äpfel façade.",
    "mark MARK marking marked markers",
]


def llama3_byte_level(folder):
    """A Llama-3-style tokenizer: Split(regex) + ByteLevel, ignore_merges, BOS template."""
    pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(pattern, behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|eot_id|>"])
    tok.train_from_iterator(TRAIN_TEXT, trainer)
    tok.add_tokens([AddedToken("MARK", single_word=True, normalized=False),
                    AddedToken("<think>", normalized=False),
                    AddedToken(" lstrip_me", lstrip=True, normalized=False)])
    tok.add_special_tokens([AddedToken("<tool_call>", rstrip=True, special=True)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    path = os.path.join(folder, "llama3_style.json")
    tok.save(path)
    return path


def sentencepiece_style(folder, variant):
    """SentencePiece-style BPE: byte_fallback with <0xNN> tokens, unk, ByteFallback decoder.

    variant "prepend": Prepend("▁") + Replace(" ", "▁") normalizer (Llama 2, Mistral);
    variant "metaspace": NFKC normalizer + Metaspace(prepend_scheme first, split) pre-tokenizer
    and Metaspace decoder."""
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, limit_alphabet=60,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    base.train_from_iterator(TRAIN_TEXT, trainer)
    trained = json.loads(base.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for token, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if token not in vocab:
            vocab[token] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.add_special_tokens([AddedToken("<unk>", special=True), AddedToken("<s>", special=True),
                            AddedToken("</s>", special=True)])
    if variant == "prepend":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                           special_tokens=[("<s>", 1)])
    else:
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                     split=True)
        tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement="▁",
                                                            prepend_scheme="first")])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>",
                                                           special_tokens=[("<s>", 1),
                                                                           ("</s>", 2)])
    path = os.path.join(folder, "sp_%s.json" % variant)
    tok.save(path)
    return path


def kitchen_sink(folder, variant):
    """Less common components: "a" NFD + StripAccents + Lowercase + Replace(regex) + Strip
    normalizers, Punctuation / Digits / ByteLevel(add_prefix_space) pre-tokenizers and
    normalized added tokens; "b" NFKC, Whitespace + Metaspace(always, no split), unk without
    byte fallback (fuse_unk off) and no decoder (tokens joined by spaces)."""
    if variant == "a":
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.Sequence([
            normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
            normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()])
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Punctuation("contiguous"), pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=500, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      special_tokens=["<s>", "</s>"])
        tok.train_from_iterator(TRAIN_TEXT, trainer)
        tok.add_tokens([AddedToken("mark", normalized=True), AddedToken("tags", rstrip=True)])
        tok.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0))
    else:
        tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False))
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Whitespace(),
            pre_tokenizers.Metaspace(replacement="_", prepend_scheme="always", split=False)])
        trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False, limit_alphabet=40,
                                      special_tokens=["[UNK]", "[CLS]", "[SEP]"])
        tok.train_from_iterator(TRAIN_TEXT, trainer)
        tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    path = os.path.join(folder, "kitchen_%s.json" % variant)
    tok.save(path)
    return path


def run_tool(tool, folder, path, is_dir, texts, decode_ids):
    req = os.path.join(folder, "request.json")
    with open(req, "w", encoding="utf-8") as f:
        json.dump({"path": path, "dir": is_dir, "texts": texts, "decode_ids": decode_ids}, f)
    out = subprocess.run([tool, req], check=True, capture_output=True, text=True)
    reply = json.loads(out.stdout)
    if "error" in reply:
        raise SystemExit("FAIL: parley could not load %s: %s" % (path, reply["error"]))
    return reply


def random_texts(rng, count=24):
    """Seeded random strings over ASCII, Latin-1, combining marks, joiners, CJK, emoji,
    Arabic and whitespace, so that pre-tokenizer and normalizer corner cases come up. Only
    characters assigned long ago: the crate's Punctuation uses old Unicode tables (U+061D,
    new in Unicode 14, is punctuation to PCRE2 but not to it)."""
    ranges = [(0x20, 0x7e), (0x20, 0x7e), (0xa0, 0xff), (0x300, 0x36f), (0x200b, 0x200d),
              (0x4e00, 0x4e80), (0x1f600, 0x1f64f), (0x621, 0x64a), (0x3041, 0x3096),
              (0x30a1, 0x30fa)]
    spaces = [" ", "  ", "\n", "\t", "\r\n", "\u3000"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(1, 30)):
            if rng.random() < 0.2:
                parts.append(rng.choice(spaces))
            else:
                lo, hi = rng.choice(ranges)
                parts.append(chr(rng.randint(lo, hi)))
        out.append("".join(parts))
    return out


def random_ids(n_vocab, rng):
    return [[rng.randrange(n_vocab) for _ in range(rng.randrange(1, 12))] for _ in range(40)]


def compare(label, ref_encode, ref_decode, got, texts, decode_ids):
    problems = []
    for text, r in zip(texts, got["encoded"]):
        want_ids, want_plain = ref_encode(text, True), ref_encode(text, False)
        if r["ids"] != want_ids:
            problems.append("encode %r:\n  parley %s\n  ref    %s" % (text, r["ids"], want_ids))
        if r["plain"] != want_plain:
            problems.append("encode(no specials) %r:\n  parley %s\n  ref    %s"
                            % (text, r["plain"], want_plain))
        if r["decoded"] != ref_decode(want_plain, False):
            problems.append("decode %r: parley %r ref %r"
                            % (text, r["decoded"], ref_decode(want_plain, False)))
        if r["decoded_skip"] != ref_decode(want_ids, True):
            problems.append("decode(skip) %r: parley %r ref %r"
                            % (text, r["decoded_skip"], ref_decode(want_ids, True)))
        if r["stream"] != r["stream_full"] or not r["stream_pieces_valid"]:
            problems.append("stream %r: %r != %r (valid pieces: %s)"
                            % (text, r["stream"], r["stream_full"], r["stream_pieces_valid"]))
    for ids, (plain, skip) in zip(decode_ids, got["decoded"]):
        if plain != ref_decode(ids, False) or skip != ref_decode(ids, True):
            problems.append("decode ids %s: parley %r / %r ref %r / %r"
                            % (ids, plain, skip, ref_decode(ids, False), ref_decode(ids, True)))
    status = "ok" if not problems else "%d differences" % len(problems)
    print("%-28s %d texts, %d id lists: %s" % (label, len(texts), len(decode_ids), status))
    for p in problems[:10]:
        print("  " + p)
    return not problems


def main():
    tool, data_dir = sys.argv[1], sys.argv[2]
    rng = random.Random(1234)
    texts = CORPUS + random_texts(rng)
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        fixtures = [("llama3-style byte-level", llama3_byte_level(folder)),
                    ("sentencepiece prepend", sentencepiece_style(folder, "prepend")),
                    ("sentencepiece metaspace", sentencepiece_style(folder, "metaspace")),
                    ("normalizers + punctuation", kitchen_sink(folder, "a")),
                    ("whitespace + unk, no decoder", kitchen_sink(folder, "b"))]
        qwen = os.path.join(data_dir, "tokenizer.json")
        if os.path.exists(qwen):
            fixtures.insert(0, ("qwen3 tokenizer.json", qwen))
        else:
            print("note: no %s, Qwen3 skipped" % qwen)
        for label, path in fixtures:
            ref = Tokenizer.from_file(path)
            n_vocab = ref.get_vocab_size(with_added_tokens=True)
            ids = random_ids(n_vocab, rng)
            # Byte tokens next to each other, complete and cut characters.
            if ref.token_to_id("<0xE2>") is not None:
                b = [ref.token_to_id("<0x%02X>" % x) for x in (0xE2, 0x82, 0xAC, 0xE2, 0x41)]
                ids += [b[:3], b[:2], b[3:], b, [b[0], ref.token_to_id("<s>"), b[1]]]
            got = run_tool(tool, folder, path, False, texts, ids)
            ok &= compare(label, lambda t, s: ref.encode(t, add_special_tokens=s).ids,
                          lambda i, s: ref.decode(i, skip_special_tokens=s), got, texts, ids)
        # from_dir against transformers, which reads tokenizer_config.json too.
        if os.path.exists(os.path.join(data_dir, "tokenizer_config.json")):
            from transformers import AutoTokenizer
            hf = AutoTokenizer.from_pretrained(data_dir)
            got = run_tool(tool, folder, data_dir, True, texts, [])
            ok &= compare("qwen3 from_dir (transformers)",
                          lambda t, s: hf(t, add_special_tokens=s)["input_ids"],
                          lambda i, s: hf._tokenizer.decode(i, skip_special_tokens=s),
                          got, texts, [])
            if got["eos"] != hf.eos_token_id:
                print("  eos: parley %s transformers %s" % (got["eos"], hf.eos_token_id))
                ok = False
        # A SentencePiece-style folder whose tokenizer_config.json asks for BOS and EOS.
        sp_dir = os.path.join(folder, "sp_dir")
        os.makedirs(sp_dir)
        os.replace(os.path.join(folder, "sp_prepend.json"), os.path.join(sp_dir, "tokenizer.json"))
        with open(os.path.join(sp_dir, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                       "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
                       "add_eos_token": True}, f)
        from transformers import AutoTokenizer
        hf = AutoTokenizer.from_pretrained(sp_dir)
        got = run_tool(tool, folder, sp_dir, True, texts, [])
        ok &= compare("sentencepiece from_dir", lambda t, s: hf(t, add_special_tokens=s)["input_ids"],
                      lambda i, s: hf._tokenizer.decode(i, skip_special_tokens=s), got, texts, [])
    if not ok:
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

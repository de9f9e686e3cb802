#!/usr/bin/env python3
"""Generates the conversations that train and evaluate parley's own small chat models (issue 24).

    data.py train --seed 1 --count 600000 --out DIR [--workers N]
    data.py eval  --seed 2 --per-task 100 --out DIR

Every conversation is rendered with the real Qwen3 chat template (chat_template.jinja, copied
byte for byte from Qwen3's tokenizer_config.json) through jinja2, configured the way
transformers' apply_chat_template configures it, in the no-think format (enable_thinking=False:
the answering assistant turn carries an empty <think>\\n\\n</think>\\n\\n block). The tasks
have answers a program can check: integer arithmetic, copying and quoting passages, sorting
and counting lists, key/value recall from a long context, JSON objects that follow a schema,
tool calls in Qwen3's <tool_call> format with a tool result and an answer, and English prose
continuation (the Python documentation text that ships with CPython's standard library as
pydoc_data/topics.py, PSF License Version 2; on Debian/Ubuntu it is in libpython3.X-stdlib).

`train` writes DIR/train.jsonl: one line per conversation, {"tasks", "text", "spans"}, where
spans are the [start, end) character ranges of the assistant turns that carry the loss (from
after "<|im_start|>assistant\\n" through "<|im_end|>"). `eval` writes DIR/eval.jsonl: one
line per held-out assistant turn, {"task", "prompt", "answer", "meta"}; prompt is the
rendered history plus the generation prompt, answer the exact text the template renders for
the turn (without <|im_end|>). Training skips any conversation that contains a user turn of
the evaluation set (pass --exclude DIR/eval.jsonl), so the held-out prompts are unseen.

The output is a function of the seed and the count only (shards have fixed seeds and are
written in order, whatever the worker count), so the same seed gives the same bytes on the
same Python.
"""
import argparse
import datetime
import hashlib
import json
import multiprocessing
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE_PATH = os.path.join(HERE, "chat_template.jinja")
SHARDS = 64

# ----------------------------------------------------------------------------- rendering


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' filter: keeps non-ASCII, default separators.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise(message):
    raise ValueError("[template] " + message)


def load_template():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    with open(TEMPLATE_PATH, encoding="utf-8") as f:
        return env.from_string(f.read())


_TEMPLATE = None


def render(messages, tools=None, add_generation_prompt=False):
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = load_template()
    return _TEMPLATE.render(
        messages=messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        enable_thinking=False,
        bos_token="",
        eos_token="<|im_end|>",
    )


ASSISTANT_OPEN = "<|im_start|>assistant\n"
IM_END = "<|im_end|>"


def assistant_spans(text):
    spans = []
    pos = 0
    while True:
        i = text.find(ASSISTANT_OPEN, pos)
        if i < 0:
            return spans
        start = i + len(ASSISTANT_OPEN)
        end = text.index(IM_END, start) + len(IM_END)
        spans.append([start, end])
        pos = end


# ----------------------------------------------------------------------------- vocabulary

NAMES = (
    "Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Leo Maria Nina Oscar Paula Quinn Rosa Sam "
    "Tina Umar Vera Walter Xenia Yusuf Zoe Amir Bianca Chen Dmitri Elena Farah Goran Hana Ivan Julia Kofi Lena "
    "Mateo Noor Olga Pedro Rui Sofia Tomas Ines Yara Lukas Mei"
).split()
SURNAMES = (
    "Smith Garcia Müller Rossi Kim Novak Silva Jensen Okafor Dubois Tanaka Costa Larsen Weber Moreau Kowalski "
    "Ivanova Nguyen Haddad Fischer Brown Lopez Sato Berg Horvat"
).split()
CITIES = (
    "Paris London Berlin Madrid Rome Vienna Prague Lisbon Dublin Oslo Stockholm Helsinki Warsaw Athens Cairo "
    "Nairobi Lagos Tokyo Seoul Beijing Delhi Mumbai Sydney Auckland Toronto Chicago Denver Boston Lima Bogota "
    "Santiago Quito Havana Reykjavik Zurich Geneva Munich Milan Porto Krakow"
).split()
ANIMALS = (
    "fox otter falcon badger heron lynx wolf bear eagle owl hare moose bison crane gecko koala lemur llama "
    "marten newt panda quail raven salmon tiger viper walrus yak zebra beaver camel dingo ferret gopher ibex "
    "jackal mole seal toad trout"
).split()
FRUITS = "apple banana cherry date fig grape kiwi lemon mango melon olive peach pear plum lime guava papaya".split()
COLORS = "red blue green yellow black white orange purple silver gold brown pink gray teal amber ivory".split()
ADJECTIVES = (
    "quiet bright silent hidden golden frozen distant gentle hollow ancient crimson swift lonely wild broken "
    "narrow secret silver stormy velvet"
).split()
NOUNS = (
    "river garden mountain harbor forest window lantern castle island bridge meadow valley shadow letter "
    "journey mirror engine orchard tower voyage"
).split()
WORDS = sorted(set(ANIMALS + FRUITS + COLORS + ADJECTIVES + NOUNS))
SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are Parley, a small assistant that answers exactly.",
    "Answer the user's questions accurately.",
]

# ----------------------------------------------------------------------------- prose corpus


def _clean_paragraph(p):
    p = re.sub(r"\*([^*\s][^*]*?)\*", r"\1", p)
    return re.sub(r"\s+", " ", p).strip()


def load_prose():
    """Paragraphs of plain English prose, and a description of their source."""
    paragraphs = []
    source = ""
    try:
        from pydoc_data import topics

        for key in sorted(topics.topics):
            for block in re.split(r"\n\s*\n", topics.topics[key]):
                lines = block.split("\n")
                if any(line.startswith(" ") for line in lines):
                    continue  # code, grammar rules and indented lists
                p = _clean_paragraph(block)
                if (
                    100 <= len(p) <= 700
                    and p[0].isupper()
                    and p.endswith(".")
                    and "::=" not in p
                    and ">>>" not in p
                    and "***" not in p
                ):
                    paragraphs.append(p)
        source = "CPython pydoc_data/topics.py (Python %s documentation, PSF License Version 2)" % sys.version.split()[0]
    except ImportError:
        pass
    # The license texts Debian/Ubuntu ship in base-files (each allows verbatim copying) add
    # a second register of plain English.
    base = "/usr/share/common-licenses"
    count = len(paragraphs)
    if os.path.isdir(base):
        for name in ("Apache-2.0", "GPL-3", "MPL-2.0"):
            try:
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            for block in re.split(r"\n\s*\n", text):
                p = _clean_paragraph(block)
                if 100 <= len(p) <= 700 and p[0].isupper() and p.endswith("."):
                    paragraphs.append(p)
        if len(paragraphs) > count:
            source += "; Apache-2.0, GPL-3 and MPL-2.0 texts from /usr/share/common-licenses (package base-files)"
    if not paragraphs:
        raise SystemExit("[data] no prose source found (pydoc_data or /usr/share/common-licenses)")
    return paragraphs, source


def split_prose(paragraphs):
    """Train and held-out paragraphs, split by a hash of the text (stable across runs)."""
    train, held = [], []
    for p in paragraphs:
        h = int(hashlib.sha1(p.encode("utf-8")).hexdigest()[:8], 16)
        (held if h % 10 == 0 else train).append(p)
    return train, held


SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“(])")


def sentences(p):
    return [s for s in SENTENCE_SPLIT.split(p) if s]


def trim_passage(p, limit):
    out = []
    for s in sentences(p):
        if out and len(" ".join(out + [s])) > limit:
            break
        out.append(s)
    return " ".join(out)[: max(limit, 1) * 2]


# ----------------------------------------------------------------------------- tasks
# Each episode function returns a list of (user_text, assistant_text, task_tag, meta).


def ndigit(rng, digits):
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


ADD_PROMPTS = ["What is {a} + {b}?", "Compute {a} + {b}.", "{a} + {b} = ?", "Calculate {a} plus {b}.", "Add {a} and {b}."]
SUB_PROMPTS = ["What is {a} - {b}?", "Compute {a} - {b}.", "{a} - {b} = ?", "Calculate {a} minus {b}.", "Subtract {b} from {a}."]
MUL_PROMPTS = ["What is {a} * {b}?", "Compute {a} * {b}.", "{a} * {b} = ?", "Calculate {a} times {b}.", "Multiply {a} by {b}."]


def ep_arith(rng, op=None):
    op = op or rng.choices(["add3", "add", "sub", "mul"], weights=[3, 3, 3, 3])[0]
    if op == "add3":
        a, b = ndigit(rng, 3), ndigit(rng, 3)
        q, r, tag = rng.choice(ADD_PROMPTS).format(a=a, b=b), a + b, "add3"
    elif op == "add":
        a, b = ndigit(rng, rng.randint(1, 4)), ndigit(rng, rng.randint(1, 4))
        q, r, tag = rng.choice(ADD_PROMPTS).format(a=a, b=b), a + b, "add"
    elif op == "sub":
        a, b = ndigit(rng, rng.randint(1, 4)), ndigit(rng, rng.randint(1, 4))
        if rng.random() < 0.7 and b > a:
            a, b = b, a
        q, r, tag = rng.choice(SUB_PROMPTS).format(a=a, b=b), a - b, "sub"
    else:
        # Small multipliers dominate: 4x4-digit products are beyond a model this size.
        a = ndigit(rng, rng.randint(1, 4))
        b = ndigit(rng, rng.choices([1, 2, 3, 4], weights=[5, 4, 2, 1])[0])
        if rng.random() < 0.5:
            a, b = b, a
        q, r, tag = rng.choice(MUL_PROMPTS).format(a=a, b=b), a * b, "mul"
    turns = [(q, str(r), tag, {})]
    if rng.random() < 0.3:
        c = ndigit(rng, rng.randint(1, 2))
        kind = rng.randrange(3)
        if kind == 0:
            turns.append(("Now add %d to that." % c, str(r + c), "arith_chain", {}))
        elif kind == 1:
            turns.append(("Now subtract %d from that." % c, str(r - c), "arith_chain", {}))
        else:
            c = rng.randint(2, 9)
            turns.append(("Now multiply that by %d." % c, str(r * c), "arith_chain", {}))
    return turns


def ep_copy(rng, prose):
    kind = rng.randrange(4)
    p = trim_passage(rng.choice(prose), rng.randint(80, 360) if kind < 2 else rng.randint(200, 450))
    if kind == 0:
        q = rng.choice(["Repeat the following text exactly:\n\n{p}", "Copy this passage word for word:\n\n{p}"])
        return [(q.format(p=p), p, "copy", {})]
    if kind == 1:
        items = ", ".join(rng.sample(WORDS, rng.randint(4, 12)))
        return [("Repeat this list exactly: " + items, items, "copy", {})]
    ss = sentences(p)
    if len(ss) < 2:
        return [("Repeat the following text exactly:\n\n" + p, p, "copy", {})]
    if kind == 2:
        first = rng.random() < 0.5
        q = "What is the %s sentence of this text?\n\n%s" % ("first" if first else "last", p)
        return [(q, ss[0] if first else ss[-1], "quote", {})]
    # A word that occurs in exactly one sentence picks the sentence to quote.
    counts = {}
    for s in ss:
        for w in set(re.findall(r"[A-Za-z]{5,}", s)):
            counts[w] = counts.get(w, 0) + 1
    order = list(range(len(ss)))
    rng.shuffle(order)
    for i in order:
        cands = sorted(w for w in set(re.findall(r"[A-Za-z]{5,}", ss[i])) if counts[w] == 1)
        if cands:
            w = rng.choice(cands)
            q = '%s\n\nQuote the sentence from the text above that contains the word "%s".' % (p, w)
            return [(q, ss[i], "quote", {})]
    return [("Repeat the following text exactly:\n\n" + p, p, "copy", {})]


def ep_sort(rng):
    kind = rng.randrange(3)
    if kind == 0:
        xs = [rng.randint(0, 999) for _ in range(rng.randint(3, 10))]
        desc = rng.random() < 0.3
        q = "Sort these numbers in %s order: %s" % ("descending" if desc else "ascending", ", ".join(map(str, xs)))
        return [(q, ", ".join(map(str, sorted(xs, reverse=desc))), "sort", {})]
    ws = rng.sample(WORDS, rng.randint(3, 9))
    if kind == 1:
        q = rng.choice(["Sort these words alphabetically: %s", "Put these words in alphabetical order: %s"])
        return [(q % ", ".join(ws), ", ".join(sorted(ws)), "sort", {})]
    q = "Sort these words by length, shortest first (keep the original order for ties): %s"
    return [(q % ", ".join(ws), ", ".join(sorted(ws, key=len)), "sort", {})]


def ep_count(rng):
    if rng.random() < 0.5:
        pool = rng.sample(WORDS, rng.randint(2, 10))
        xs = [rng.choice(pool) for _ in range(rng.randint(2, 14))]
        q = rng.choice(["How many items are in this list: %s?", "Count the items in this list: %s"])
        return [(q % ", ".join(xs), str(len(xs)), "count", {})]
    pool = rng.sample(FRUITS, rng.randint(2, 5))
    xs = [rng.choice(pool) for _ in range(rng.randint(3, 14))]
    w = rng.choice(pool)
    q = 'How many times does "%s" appear in this list: %s?' % (w, ", ".join(xs))
    return [(q, str(xs.count(w)), "count", {})]


def ep_recall(rng):
    n = rng.randint(8, 36)
    keys = []
    while len(keys) < n:
        k = rng.choice(ADJECTIVES + COLORS) + "-" + rng.choice(ANIMALS)
        if k not in keys:
            keys.append(k)
    vals = [str(ndigit(rng, rng.randint(3, 4))) for _ in keys]
    what = rng.choice(["code", "number", "value"])
    ctx = "\n".join("%s: %s" % kv for kv in zip(keys, vals))
    asked = rng.sample(range(n), rng.randint(1, 3))
    turns = []
    for j, i in enumerate(asked):
        if j == 0:
            q = "Here is a list of %ss:\n%s\n\nWhat is the %s for %s?" % (what, ctx, what, keys[i])
        else:
            q = rng.choice(["And for %s?", "What about %s?", "What is the " + what + " for %s?"]) % keys[i]
        turns.append((q, vals[i], "recall", {}))
    return turns


# JSON entities: field -> (schema, value generator, label used in the description).
def _title(rng):
    return "The %s %s" % (rng.choice(ADJECTIVES).title(), rng.choice(NOUNS).title())


def _person(rng):
    return "%s %s" % (rng.choice(NAMES), rng.choice(SURNAMES))


def _date(rng):
    return "%04d-%02d-%02d" % (rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28))


S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
ARR = {"type": "array", "items": {"type": "string"}}
ENTITIES = {
    "person": [
        ("name", S, _person),
        ("age", I, lambda r: r.randint(18, 90)),
        ("city", S, lambda r: r.choice(CITIES)),
        ("member", B, lambda r: r.random() < 0.5),
        ("favorite_color", {"type": "string", "enum": COLORS[:6]}, lambda r: r.choice(COLORS[:6])),
        ("pets", ARR, lambda r: r.sample(ANIMALS, r.randint(0, 3))),
    ],
    "book": [
        ("title", S, _title),
        ("author", S, _person),
        ("year", I, lambda r: r.randint(1800, 2025)),
        ("pages", I, lambda r: r.randint(40, 1200)),
        ("genre", {"type": "string", "enum": ["fiction", "history", "science", "poetry"]}, lambda r: r.choice(["fiction", "history", "science", "poetry"])),
        ("available", B, lambda r: r.random() < 0.5),
    ],
    "product": [
        ("name", S, lambda r: "%s %s" % (r.choice(COLORS).title(), r.choice(NOUNS))),
        ("price", N, lambda r: r.randint(100, 99999) / 100),
        ("quantity", I, lambda r: r.randint(0, 500)),
        ("color", {"type": "string", "enum": COLORS[:8]}, lambda r: r.choice(COLORS[:8])),
        ("tags", ARR, lambda r: r.sample(ADJECTIVES, r.randint(1, 3))),
        ("in_stock", B, lambda r: r.random() < 0.5),
    ],
    "event": [
        ("title", S, _title),
        ("date", S, _date),
        ("city", S, lambda r: r.choice(CITIES)),
        ("attendees", I, lambda r: r.randint(2, 5000)),
        ("online", B, lambda r: r.random() < 0.5),
        ("speakers", ARR, lambda r: [r.choice(NAMES) for _ in range(r.randint(1, 3))]),
    ],
}


def _describe(key, value):
    label = key.replace("_", " ")
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, list):
        text = "none" if not value else (value[0] if len(value) == 1 else ", ".join(value[:-1]) + " and " + value[-1])
    else:
        text = str(value)
    return "the %s is %s" % (label, text)


def ep_json(rng):
    entity = rng.choice(sorted(ENTITIES))
    fields = ENTITIES[entity]
    chosen = sorted(rng.sample(range(len(fields)), rng.randint(3, len(fields))))
    props, required, obj, parts = {}, [], {}, []
    for i in chosen:
        key, schema, gen = fields[i]
        props[key] = schema
        optional = rng.random() < 0.2
        if not optional:
            required.append(key)
        if optional and rng.random() < 0.5:
            continue  # an optional field the description leaves out is omitted
        obj[key] = gen(rng)
        parts.append(_describe(key, obj[key]))
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    rng.shuffle(parts)
    desc = "%s %s: %s." % ("An" if entity == "event" else "A", entity, "; ".join(parts))
    q = rng.choice(
        [
            "Fill in a JSON object that matches this schema:\n%s\n\n%s\nAnswer with the JSON only.",
            "Schema:\n%s\n\nWrite the JSON object for this description. %s",
        ]
    ) % (json.dumps(schema), desc)
    return [(q, json.dumps(obj, ensure_ascii=False), "json", {"schema": schema, "object": obj})]


def _fn(name, desc, params, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": params, "required": required},
        },
    }


CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD"]
CONDITIONS = ["sunny", "cloudy", "rainy", "snowy", "windy", "foggy"]
TOOLS = {
    "get_weather": _fn(
        "get_weather",
        "Get the current weather in a city.",
        {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["city", "unit"],
    ),
    "convert_currency": _fn(
        "convert_currency",
        "Convert an amount of money between currencies.",
        {"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
        ["amount", "from_currency", "to_currency"],
    ),
    "get_stock_price": _fn("get_stock_price", "Get the latest price of a stock.", {"symbol": {"type": "string"}}, ["symbol"]),
    "set_timer": _fn(
        "set_timer",
        "Start a countdown timer.",
        {"minutes": {"type": "integer"}, "label": {"type": "string"}},
        ["minutes", "label"],
    ),
    "get_time": _fn("get_time", "Get the local time in a city.", {"city": {"type": "string"}}, ["city"]),
    "add_numbers": _fn(
        "add_numbers", "Add two integers exactly.", {"a": {"type": "integer"}, "b": {"type": "integer"}}, ["a", "b"]
    ),
}


def _tool_case(rng, name):
    """(user request, arguments, tool result, final answer) for one tool."""
    if name == "get_weather":
        city, unit = rng.choice(CITIES), rng.choice(["celsius", "fahrenheit"])
        t = rng.randint(-10, 35) if unit == "celsius" else rng.randint(14, 95)
        cond = rng.choice(CONDITIONS)
        q = rng.choice(["What's the weather in %s in %s?", "How warm is it in %s right now? Use %s."]) % (city, unit)
        return q, {"city": city, "unit": unit}, {"temperature": t, "condition": cond}, "It is %d degrees %s and %s in %s." % (t, unit, cond, city)
    if name == "convert_currency":
        amt = rng.randint(1, 5000)
        fr, to = rng.sample(CURRENCIES, 2)
        res = round(amt * rng.uniform(0.5, 150), 2)
        q = rng.choice(["Convert %d %s to %s.", "How much is %d %s in %s?"]) % (amt, fr, to)
        return q, {"amount": amt, "from_currency": fr, "to_currency": to}, {"result": res}, "%d %s is %s %s." % (amt, fr, res, to)
    if name == "get_stock_price":
        sym = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(2, 4)))
        price = rng.randint(100, 99999) / 100
        q = rng.choice(["What is the stock price of %s?", "How much does one share of %s cost?"]) % sym
        return q, {"symbol": sym}, {"price": price, "currency": "USD"}, "%s is trading at %s USD." % (sym, price)
    if name == "set_timer":
        m, label = rng.randint(1, 120), rng.choice(NOUNS + FRUITS)
        q = rng.choice(["Set a %d minute timer called %s.", "Start a timer for %d minutes named %s."]) % (m, label)
        tid = rng.randint(1, 999)
        return q, {"minutes": m, "label": label}, {"status": "ok", "timer_id": tid}, "Your %s timer is set for %d minutes." % (label, m)
    if name == "get_time":
        city = rng.choice(CITIES)
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        q = rng.choice(["What time is it in %s?", "Tell me the local time in %s."]) % city
        return q, {"city": city}, {"time": "%02d:%02d" % (hh, mm)}, "It is %02d:%02d in %s." % (hh, mm, city)
    a, b = ndigit(rng, rng.randint(3, 6)), ndigit(rng, rng.randint(3, 6))
    q = rng.choice(["Use the tool to add %d and %d.", "What is %d + %d? Use add_numbers."]) % (a, b)
    return q, {"a": a, "b": b}, {"result": a + b}, "The sum is %d." % (a + b)


def tool_conversation(rng, tools_needed=None):
    """A conversation with tools: returns (messages with tags, tools)."""
    name = tools_needed or rng.choice(sorted(TOOLS))
    others = [t for t in sorted(TOOLS) if t != name]
    offered = [name] + rng.sample(others, rng.randint(0, 2))
    rng.shuffle(offered)
    tools = [TOOLS[t] for t in offered]
    msgs = []
    if rng.random() < 0.3:
        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    if tools_needed is None and rng.random() < 0.15:
        # Tools are offered but the question needs none.
        for q, a, tag, meta in ep_arith(rng):
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a, "_task": tag, "_meta": meta}]
        return msgs, tools
    q, args, result, answer = _tool_case(rng, name)
    call = {"name": name, "arguments": args}
    msgs.append({"role": "user", "content": q})
    msgs.append({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}], "_task": "tool_call", "_meta": {"call": call, "tool": TOOLS[name]}})
    msgs.append({"role": "tool", "content": json.dumps(result)})
    msgs.append({"role": "assistant", "content": answer, "_task": "tool_answer", "_meta": {}})
    return msgs, tools


def ep_prose(rng, prose):
    p = rng.choice(prose)
    ss = sentences(p)
    if len(ss) < 2:
        words = p.split()
        cut = max(3, len(words) // 3)
        head, tail = " ".join(words[:cut]), " ".join(words[cut:])
    else:
        k = rng.randint(1, max(1, min(2, len(ss) - 1)))
        head, tail = " ".join(ss[:k]), trim_passage(" ".join(ss[k:]), 300)
    q = rng.choice(["Continue this text:\n\n%s", "Write the next sentences of this passage:\n\n%s"]) % head
    return [(q, tail, "prose", {})]


EPISODES = ["arith", "copy", "sort", "count", "recall", "json", "prose"]
EPISODE_WEIGHTS = [30, 12, 9, 8, 7, 15, 8]


def episode(rng, kind, prose):
    if kind == "arith":
        return ep_arith(rng)
    if kind == "copy":
        return ep_copy(rng, prose)
    if kind == "sort":
        return ep_sort(rng)
    if kind == "count":
        return ep_count(rng)
    if kind == "recall":
        return ep_recall(rng)
    if kind == "json":
        return ep_json(rng)
    return ep_prose(rng, prose)


def plain_conversation(rng, prose, last_kind=None):
    msgs = []
    if rng.random() < 0.35:
        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    kinds = [rng.choices(EPISODES, weights=EPISODE_WEIGHTS)[0] for _ in range(rng.choices([1, 2, 3], weights=[5, 3, 2])[0])]
    if last_kind:
        kinds = kinds[: rng.randint(0, 1)] + [last_kind]
    if "recall" in kinds:
        kinds = ["recall"]  # long contexts stand alone so conversations stay short
    for kind in kinds:
        for q, a, tag, meta in episode(rng, kind, prose):
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a, "_task": tag, "_meta": meta}]
    return msgs


def strip(msgs):
    return [{k: v for k, v in m.items() if not k.startswith("_")} for m in msgs]


def user_key(text):
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


FOLLOW_UP = re.compile(r"^(Now |And for |What about |What is the (code|number|value) for )")


def conversation_keys(msgs):
    """Keys of the user turns that pose a problem (follow-ups and tiny prompts are not
    distinctive); a tool request is keyed together with its tool result."""
    keys = []
    for i, m in enumerate(msgs):
        if m["role"] != "user" or len(m["content"]) < 16 or FOLLOW_UP.match(m["content"]):
            continue
        text = m["content"]
        if i + 2 < len(msgs) and msgs[i + 2]["role"] == "tool":
            text += "\n" + msgs[i + 2]["content"]
        keys.append(user_key(text))
    return keys


# ----------------------------------------------------------------------------- train / eval


def _train_shard(job):
    try:
        return _train_shard_body(*job)
    except SystemExit as e:
        # SystemExit would kill the pool worker and leave imap waiting forever.
        raise RuntimeError(str(e)) from None


def _train_shard_body(seed, shard, count, exclude):
    rng = random.Random(seed * 1000003 + shard)
    prose, _ = split_prose(load_prose()[0])
    lines = []
    skipped = 0
    while len(lines) < count:
        if rng.random() < 0.16:
            msgs, tools = tool_conversation(rng)
        else:
            msgs, tools = plain_conversation(rng, prose), None
        if any(k in exclude for k in conversation_keys(msgs)):
            skipped += 1
            continue
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        if len(turns) > 1 and rng.random() < 0.5:
            # End at an earlier assistant turn so that it, as the answering turn, gets the empty
            # think block the generation prompt puts before it.
            msgs = msgs[: rng.choice(turns[:-1]) + 1]
        text = render(strip(msgs), tools)
        tasks = [m["_task"] for m in msgs if m["role"] == "assistant"]
        lines.append(json.dumps({"tasks": tasks, "text": text, "spans": assistant_spans(text)}, ensure_ascii=False))
    return lines, skipped


def make_train(seed, count, out, workers, exclude_path):
    exclude = set()
    if exclude_path:
        with open(exclude_path, encoding="utf-8") as f:
            for line in f:
                for k in json.loads(line)["meta"].get("user_keys", []):
                    exclude.add(k)
    per = [count // SHARDS + (1 if i < count % SHARDS else 0) for i in range(SHARDS)]
    jobs = [(seed, i, per[i], exclude) for i in range(SHARDS)]
    path = os.path.join(out, "train.jsonl")
    skipped = 0
    with open(path, "w", encoding="utf-8") as f:
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                for lines, sk in pool.imap(_train_shard, jobs):
                    f.write("\n".join(lines) + "\n" if lines else "")
                    skipped += sk
        else:
            for job in jobs:
                lines, sk = _train_shard(job)
                f.write("\n".join(lines) + "\n" if lines else "")
                skipped += sk
    return path, skipped


EVAL_TASKS = ["add3", "add", "sub", "mul", "arith_chain", "copy", "quote", "sort", "count", "recall", "json", "tool_call", "tool_answer", "prose"]


def _eval_conversation(rng, task, prose_held):
    if task in ("tool_call", "tool_answer"):
        return tool_conversation(rng, tools_needed=rng.choice(sorted(TOOLS)))
    if task in ("add3", "add", "sub", "mul", "arith_chain"):
        msgs = plain_conversation(rng, prose_held, last_kind="json") if rng.random() < 0.2 else []
        while True:
            turns = ep_arith(rng, op=None if task == "arith_chain" else task)
            if task != "arith_chain" or turns[-1][2] == "arith_chain":
                break
        for q, a, tag, meta in turns:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a, "_task": tag, "_meta": meta}]
        return msgs, None
    kind = {"copy": "copy", "quote": "copy", "sort": "sort", "count": "count", "recall": "recall", "json": "json", "prose": "prose"}[task]
    while True:
        msgs = plain_conversation(rng, prose_held, last_kind=kind)
        if msgs[-1]["_task"] == task:
            return msgs, None


def make_eval(seed, per_task, out):
    rng = random.Random(seed * 1000003 + 999)
    _, prose_held = split_prose(load_prose()[0])
    path = os.path.join(out, "eval.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for task in EVAL_TASKS:
            done = 0
            while done < per_task:
                msgs, tools = _eval_conversation(rng, task, prose_held)
                idx = max(i for i, m in enumerate(msgs) if m.get("_task") == task)
                full_msgs = msgs
                msgs = msgs[: idx + 1]
                prompt = render(strip(msgs[:idx]), tools, add_generation_prompt=True)
                full = render(strip(msgs), tools)
                if not full.startswith(prompt) or not full.endswith(IM_END + "\n"):
                    raise SystemExit("[data] template prefix property broken for task " + task)
                answer = full[len(prompt) : -len(IM_END) - 1]
                meta = dict(msgs[idx]["_meta"])
                meta["user_keys"] = conversation_keys(full_msgs)
                f.write(json.dumps({"task": task, "prompt": prompt, "answer": answer, "meta": meta}, ensure_ascii=False) + "\n")
                done += 1
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["train", "eval", "prose-source"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100000, help="training conversations")
    ap.add_argument("--per-task", type=int, default=100, help="held-out turns per task")
    ap.add_argument("--workers", type=int, default=max(1, min(16, os.cpu_count() or 1)))
    ap.add_argument("--exclude", help="eval.jsonl whose user turns training must not contain")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    if args.mode == "prose-source":
        paragraphs, source = load_prose()
        digest = hashlib.sha256("\n".join(paragraphs).encode("utf-8")).hexdigest()
        print(json.dumps({"source": source, "paragraphs": len(paragraphs), "sha256": digest}))
        return
    os.makedirs(args.out, exist_ok=True)
    if args.mode == "eval":
        print("[data] wrote", make_eval(args.seed, args.per_task, args.out))
    else:
        path, skipped = make_train(args.seed, args.count, args.out, args.workers, args.exclude)
        print("[data] wrote %s (%d conversations; %d skipped as held-out)" % (path, args.count, skipped))


if __name__ == "__main__":
    main()

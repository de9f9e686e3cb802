#!/usr/bin/env python3
"""Chat server throughput and latency under concurrency (continuous batching; not a test).

    bench/chat_server_load.py --parley build/parley --shape qwen3-0.6b --layers 4 \\
        --concurrency 1 8 32 --max-running 1 8 32 --mixed on off \\
        --prompt-tokens 64 --output-tokens 64 --requests 2

Makes a seeded chat model with `parley synth llm --shape S --layers L` (the real shape's
vocabulary, widths and heads; fewer layers to keep a 2-core run short) and copies the Qwen3
tokenizer from the shared data beside it. For every server configuration (--max-running M,
--mixed-prefill X) it starts `parley serve` on loopback, and for every concurrency C runs C
clients that each send --requests streaming POST /v1/completions: a prompt of P random token
ids (different for every request of a run: no prefix-cache hits; the same across
configurations, so their answers are compared), max_tokens O, greedy, ignore_eos,
logprobs 1 (one SSE chunk per token, so chunk gaps are inter-token latencies). Every answer
is checked: HTTP 200, O tokens, and the same text as the same request made alone (the CPU
path is batch-invariant, so batching must not change a greedy answer). Prints one JSON line
per (configuration, concurrency): output tokens/s, requests/s, TTFT and inter-token
latency p50/p99 (ms), errors, and the server's /metrics scheduler figures (forwards,
iterations, preemptions). Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

from serve_proc import ParleyServe

HERE = os.path.dirname(os.path.abspath(__file__))


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def make_model(args):
    folder = os.path.join(args.work, f"{args.shape}-l{args.layers}")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        subprocess.run([args.parley, "synth", "llm", "--shape", args.shape, "--layers",
                        str(args.layers), "--out", folder], check=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.data, "llm", name), folder)
    return folder


class Server(ParleyServe):
    def __init__(self, args, model, max_running, mixed):
        cmd = [args.parley, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
               "--max-running", str(max_running), "--mixed-prefill", mixed,
               "--chat-queue", "4096", "--context", str(args.prompt_tokens + args.output_tokens + 16),
               "--whisper-residency", "per-request"]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        super().__init__(cmd)

    def metrics(self):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=60).read()
        out = {}
        for line in text.decode().splitlines():
            if line.startswith("parley_chat_") and " " in line and "{" not in line:
                k, v = line.split(" ", 1)
                out[k] = float(v)
        return out


def prompt_of(args, key):
    rng = random.Random(key)
    return [rng.randrange(1000, 150000) for _ in range(args.prompt_tokens)]


def one_request(port, args, prompt, model_name, timeout):
    """Streams one completion; returns (text, tokens, ttft_s, gaps_s, error)."""
    body = json.dumps({"model": model_name, "prompt": prompt, "max_tokens": args.output_tokens,
                       "temperature": 0, "ignore_eos": True, "logprobs": 1, "stream": True,
                       "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return None, 0, None, [], f"HTTP {r.status}: {r.read()[:200]!r}"
        text, tokens, first, last, gaps = [], None, None, None, []
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            doc = json.loads(data)
            now = time.perf_counter()
            if doc.get("usage"):
                tokens = doc["usage"]["completion_tokens"]
            for c in doc.get("choices", []):
                lp = c.get("logprobs") or {}
                n = len(lp.get("tokens") or [])
                if n == 0:
                    continue
                text.append(c.get("text", ""))
                if first is None:
                    first = now - t0
                else:
                    gaps.append((now - last) / n)
                last = now
        return "".join(text), tokens, first, gaps, None
    except Exception as e:  # noqa: BLE001 - every failure is counted
        return None, 0, None, [], repr(e)
    finally:
        conn.close()


def run(server, args, model_name, concurrency, reference):
    results = []
    lock = threading.Lock()

    def client(i):
        for j in range(args.requests):
            key = (concurrency * 1000000 + i * 1000 + j) % args.distinct
            out = one_request(server.port, args, prompt_of(args, key), model_name, args.timeout)
            with lock:
                results.append((key,) + out)

    before = server.metrics()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    after = server.metrics()
    errors = [r[5] for r in results if r[5]]
    wrong = 0
    tokens = 0
    ttft, gaps = [], []
    for key, text, n, first, g, err in results:
        if err:
            continue
        tokens += n or 0
        if n != args.output_tokens:
            wrong += 1
        if key in reference and reference[key] != text:
            wrong += 1
        reference.setdefault(key, text)
        ttft.append(first)
        gaps.extend(g)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in (
        "parley_chat_forwards_total", "parley_chat_iterations_total",
        "parley_chat_preemptions_total", "parley_chat_generated_tokens_total",
        "parley_chat_host_seconds_total", "parley_chat_forward_seconds_total")}
    ms = lambda v: None if v is None else round(1000 * v, 2)  # noqa: E731
    return {"concurrency": concurrency, "requests": len(results), "errors": len(errors),
            "wrong": wrong, "wall_s": round(wall, 2),
            "output_tokens_per_s": round(tokens / wall, 1),
            "requests_per_s": round(len(results) / wall, 3),
            "ttft_ms": {"p50": ms(pct(ttft, 50)), "p99": ms(pct(ttft, 99))},
            "itl_ms": {"p50": ms(pct(gaps, 50)), "p99": ms(pct(gaps, 99))},
            "forwards": delta["parley_chat_forwards_total"],
            "iterations": delta["parley_chat_iterations_total"],
            "preemptions": delta["parley_chat_preemptions_total"],
            "host_us_per_iteration": round(1e6 * delta["parley_chat_host_seconds_total"] /
                                           max(1, delta["parley_chat_iterations_total"]), 1),
            "forward_ms_per_iteration": round(1e3 * delta["parley_chat_forward_seconds_total"] /
                                              max(1, delta["parley_chat_iterations_total"]), 2),
            "error_samples": errors[:3]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parley", default="build/parley")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--work", default="/tmp/parley_chat_bench")
    ap.add_argument("--shape", default="qwen3-0.6b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--max-running", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--mixed", nargs="+", default=["on"], choices=["on", "off"])
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2, help="per client")
    ap.add_argument("--distinct", type=int, default=1 << 30,
                    help="distinct prompts (keys repeat beyond it)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = make_model(args)
    name = os.path.basename(model)
    reference = {}  # prompt key -> text: every configuration must give the same answers
    for mixed in args.mixed:
        for m in args.max_running:
            server = Server(args, model, m, mixed)
            try:
                for c in args.concurrency:
                    row = run(server, args, name, c, reference)
                    row.update({"max_running": m, "mixed_prefill": mixed, "shape": args.shape,
                                "layers": args.layers, "prompt_tokens": args.prompt_tokens,
                                "output_tokens": args.output_tokens})
                    print(json.dumps(row), flush=True)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

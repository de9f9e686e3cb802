#!/usr/bin/env python3
"""Bounded load test for `parley serve` on loopback (not a test: it reports numbers).

Starts the server (or uses --url), runs CLIENTS concurrent clients that each send
REQUESTS transcriptions in turn, a fixed mix of short and long clips from
../shared/data/audio, checks every answer (HTTP 200 and the clip's known text), and
prints one JSON document: counts, errors, lost requests, wall time, and latency
percentiles overall and per clip. Standard library only.

  bench/server_load.py --parley build/parley --model ~/.local/share/parley/models/whisper-tiny.en \
      --clients 64 --requests 4 --workers 2

With --chat-model DIR the server also serves that chat model, and --chat-clients more
clients each send --chat-requests greedy /v1/completions (one of --chat-prompts fixed
prompts of token ids, --chat-tokens tokens with ignore_eos) beside the audio clients. A
chat answer is checked too: HTTP 200, --chat-tokens tokens, and the same text as every
other answer to the same prompt (greedy answers do not depend on the batch).

  bench/server_load.py --chat-model /tmp/qwen3-tiny --chat-clients 256 --chat-requests 4 \
      --clients 64 --requests 1
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

CLIPS = {  # name -> (file, words the transcript must contain)
    "short": ("english.wav", ["one", "two", "three"]),
    "medium": ("jfk.wav", ["fellow", "americans", "country"]),
    "long": ("multilingual.mp3", ["permission", "software"]),
}


def plan(client, request, args):
    """Which clip client `client` sends as its request `request`: mostly short, every
    `medium_every`-th request overall a medium one, every `long_every`-th a long one."""
    k = client * args.requests + request
    if args.long_every and k % args.long_every == args.long_every - 1:
        return "long"
    return "medium" if args.medium_every and k % args.medium_every == 1 else "short"


def multipart(path, response_format="json"):
    boundary = "parleyload0123456789"
    data = open(path, "rb").read()
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n"
            f"{response_format}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{os.path.basename(path)}\"\r\nContent-Type: application/octet-stream"
            f"\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


async def post(host, port, body, ctype, timeout, path="/v1/audio/transcriptions"):
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write((f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                      f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                      f"Connection: close\r\n\r\n").encode() + body)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, payload


async def client(i, args, bodies, results):
    for j in range(args.requests):
        kind = plan(i, j, args)
        body, ctype = bodies[kind]
        t0 = time.perf_counter()
        try:
            status, payload = await post(args.host, args.port, body, ctype, args.timeout)
            ok = status == 200
            text = json.loads(payload)["text"].lower() if ok else payload.decode(errors="replace")
            ok = ok and all(w in text for w in CLIPS[kind][1])
            error = None if ok else f"HTTP {status}: {text[:200]}"
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            error = f"{type(e).__name__}: {e}"
        results.append({"client": i, "kind": kind, "seconds": time.perf_counter() - t0,
                        "error": error})


def chat_prompt(key, args):
    return [(7919 * key + 104729 * i) % args.chat_vocab for i in range(16 + 3 * (key % 8))]


async def chat_client(i, args, answers, results):
    for j in range(args.chat_requests):
        key = (i + j) % args.chat_prompts
        body = json.dumps({"model": args.chat_name, "prompt": chat_prompt(key, args),
                           "max_tokens": args.chat_tokens, "temperature": 0,
                           "ignore_eos": True}).encode()
        t0 = time.perf_counter()
        try:
            status, payload = await post(args.host, args.port, body, "application/json",
                                         args.timeout, "/v1/completions")
            error = None
            if status != 200:
                error = f"HTTP {status}: {payload[:200]!r}"
            else:
                doc = json.loads(payload)
                text = doc["choices"][0]["text"]
                if doc["usage"]["completion_tokens"] != args.chat_tokens:
                    error = f"{doc['usage']['completion_tokens']} tokens"
                elif answers.setdefault(key, text) != text:
                    error = f"prompt {key}: an answer differs from an earlier one"
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            error = f"{type(e).__name__}: {e}"
        results.append({"client": i, "kind": "chat", "seconds": time.perf_counter() - t0,
                        "error": error})


def pct(values, p):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (k - lo), 3)


def summary(rows):
    s = [r["seconds"] for r in rows]
    return {"n": len(rows), "p50": pct(s, 50), "p90": pct(s, 90), "p95": pct(s, 95),
            "p99": pct(s, 99), "max": round(max(s), 3) if s else None,
            "mean": round(statistics.mean(s), 3) if s else None}


async def main_async(args):
    bodies = {k: multipart(os.path.join(args.data, "audio", f)) for k, (f, _) in CLIPS.items()}
    results = []
    answers = {}
    t0 = time.perf_counter()
    chats = [chat_client(i, args, answers, results) for i in range(args.chat_clients)]
    await asyncio.wait_for(
        asyncio.gather(*(client(i, args, bodies, results) for i in range(args.clients)), *chats),
        args.deadline)
    wall = time.perf_counter() - t0
    expected = args.clients * args.requests + args.chat_clients * args.chat_requests
    errors = [r for r in results if r["error"]]
    out = {
        "clients": args.clients, "requests_per_client": args.requests, "expected": expected,
        "completed": len(results) - len(errors), "errors": len(errors),
        "lost": expected - len(results), "wall_seconds": round(wall, 2),
        "requests_per_second": round(len(results) / wall, 3),
        "latency_seconds": {"all": summary(results)},
        "error_samples": [r["error"] for r in errors[:5]],
    }
    for kind in list(CLIPS) + ["chat"]:
        rows = [r for r in results if r["kind"] == kind]
        if rows:
            out["latency_seconds"][kind] = summary(rows)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="an already running server (http://HOST:PORT)")
    ap.add_argument("--parley", default="build/parley")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.local/share/parley/models/whisper-tiny.en"))
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../shared/data"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--long-every", type=int, default=128,
                    help="every Nth request overall is the 60 s clip (0: none)")
    ap.add_argument("--medium-every", type=int, default=8,
                    help="every Nth request overall is the 11 s clip (0: none)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--queue", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per request")
    ap.add_argument("--deadline", type=float, default=3600, help="seconds for the whole run")
    ap.add_argument("--chat-model", help="a chat model folder served beside Whisper")
    ap.add_argument("--chat-clients", type=int, default=0)
    ap.add_argument("--chat-requests", type=int, default=4)
    ap.add_argument("--chat-prompts", type=int, default=16)
    ap.add_argument("--chat-tokens", type=int, default=16)
    ap.add_argument("--chat-vocab", type=int, default=1000, help="prompt ids below this")
    ap.add_argument("--max-running", type=int, default=32)
    args = ap.parse_args()
    args.chat_name = os.path.basename(os.path.normpath(args.chat_model or ""))
    if args.chat_clients and not (args.chat_model or args.url):
        sys.exit("--chat-clients needs --chat-model (or --url of a server with one)")

    proc = None
    if args.url:
        hostport = args.url.split("://", 1)[-1].rstrip("/")
        args.host, args.port = hostport.rsplit(":", 1)[0], int(hostport.rsplit(":", 1)[1])
    else:
        cmd = [args.parley, "serve", "--model", args.model, "--port", "0",
               "--workers", str(args.workers), "--queue", str(args.queue)]
        if args.chat_model:
            cmd[3:4] = [args.chat_model, "--whisper", args.model, "--chat-queue",
                        str(max(64, args.chat_clients)), "--max-running", str(args.max_running)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = ""
        for _ in range(40):  # start-up notes may come first
            line = proc.stdout.readline()
            if not line or "listening on http://" in line:
                break
        if "listening on http://" not in line:
            sys.exit("server did not start: " + line)
        args.host = "127.0.0.1"
        args.port = int(line.split("http://127.0.0.1:")[1].split()[0])
    try:
        out = asyncio.run(main_async(args))
    finally:
        if proc:
            proc.terminate()
            proc.wait(60)
    out["server"] = {"workers": args.workers, "queue": args.queue}
    if args.chat_model or args.chat_clients:
        out["server"].update({"chat_model": args.chat_name, "max_running": args.max_running,
                              "chat_clients": args.chat_clients,
                              "chat_requests": args.chat_requests, "chat_tokens": args.chat_tokens})
    out["mix"] = {k: sum(1 for i in range(args.clients) for j in range(args.requests)
                         if plan(i, j, args) == k) for k in CLIPS}
    print(json.dumps(out, indent=2))
    sys.exit(0 if out["errors"] == 0 and out["lost"] == 0 else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Whisper server throughput under concurrency against the offline batch (not a test).

Starts `parley serve --whisper-batch B` on loopback for each --clients C, has C concurrent
clients send a fixed list of clips (CLIPS, repeated --repeat times, dealt round robin) as
POST /v1/audio/transcriptions (verbose_json), checks every answer (HTTP 200 and the clip's
known words), and prints one JSON line per run: audio seconds, wall seconds, x real time,
requests per second, latency percentiles and the server's /metrics batching figures. Then
runs `parley bench batch` on the same list of files (--batch-size B, real transcription)
and prints its JSON line. Standard library only.

  bench/whisper_server_batch.py --parley build/parley --clients 8 64 --repeat 8 --batch 16
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

from server_load import multipart, pct, post  # the load test's request and percentile helpers

CLIPS = {  # file -> words its transcript must contain
    "english.wav": ["one", "two", "three"],
    "jfk.wav": ["fellow", "country"],
    "stereo_diarization.wav": [],
    "hotwords.mp3": [],
}


async def run_clients(port, work, clients, bodies, timeout):
    results = []

    async def client(i):
        for name in work[i::clients]:
            body, ctype = bodies[name]
            t0 = time.perf_counter()
            error, duration = None, 0.0
            try:
                status, payload = await post("127.0.0.1", port, body, ctype, timeout)
                if status != 200:
                    error = f"HTTP {status}: {payload[:200]!r}"
                else:
                    j = json.loads(payload)
                    duration = float(j.get("duration", 0))
                    missing = [w for w in CLIPS[name] if w not in j["text"].lower()]
                    error = f"{name}: missing {missing}" if missing else None
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                error = f"{type(e).__name__}: {e}"
            results.append({"seconds": time.perf_counter() - t0, "audio": duration,
                            "error": error})

    t0 = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return results, time.perf_counter() - t0


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("parley_whisper_"):
            name, value = line.split()[:2]
            out[name] = float(value)
    return out


def serve(args):
    cmd = [args.parley, "serve", "--model", args.model, "--port", "0", "--whisper-batch",
           str(args.batch), "--queue", "1024", "--vad", "off"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on http://" not in line:
        sys.exit("server did not start: " + line)
    return proc, int(line.split("http://127.0.0.1:")[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parley", default="build/parley")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.local/share/parley/models/whisper-tiny.en"))
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../shared/data"))
    ap.add_argument("--clients", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--repeat", type=int, default=8, help="times the clip list is sent per run")
    ap.add_argument("--batch", type=int, default=16, help="--whisper-batch and --batch-size")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per request")
    args = ap.parse_args()

    paths = {name: os.path.join(args.data, "audio", name) for name in CLIPS}
    bodies = {name: multipart(p, "verbose_json") for name, p in paths.items()}
    work = [name for _ in range(args.repeat) for name in CLIPS]
    ok = True
    for clients in args.clients:
        proc, port = serve(args)
        try:
            asyncio.run(run_clients(port, list(CLIPS), 1, bodies, args.timeout))  # warm-up
            before = metrics(port)
            results, wall = asyncio.run(run_clients(port, work, clients, bodies, args.timeout))
            after = metrics(port)
        finally:
            proc.terminate()
            proc.wait(60)
        errors = [r["error"] for r in results if r["error"]]
        audio = sum(r["audio"] for r in results)
        lat = [r["seconds"] for r in results]
        delta = {k.removeprefix("parley_whisper_"): after[k] - before.get(k, 0) for k in after
                 if k.endswith("_total")}
        print(json.dumps({
            "bench": "whisper_server", "clients": clients, "whisper_batch": args.batch,
            "requests": len(work), "errors": len(errors), "error_samples": errors[:3],
            "audio_seconds": round(audio, 2), "wall_seconds": round(wall, 2),
            "x_real_time": round(audio / wall, 2), "requests_per_second": round(len(work) / wall, 3),
            "latency_p50": pct(lat, 50), "latency_p95": pct(lat, 95), "latency_max": pct(lat, 100),
            "batching": delta, "threads": args.threads}), flush=True)
        ok = ok and not errors
    cmd = [args.parley, "bench", "batch", "-m", args.model, "--batch-size", str(args.batch),
           "--runs", "1", "--warmup", "1"] + [paths[n] for n in work]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    offline = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    print(offline.splitlines()[-1], flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Live transcription figures (issue 26 item 7), not a test. Standard library only, so it runs
on the GPU machine as it is.

Starts `parley serve` on loopback (--parley, --model, extra flags after --serve-args) and
runs one or more scenarios against it, printing one JSON line per measurement:

  session   A take uploaded to /v1/audio/sessions as raw pcm16 in --chunk-s chunks at
            real-time speed (each chunk sent when its audio would have been recorded); the
            figure is the time from the last chunk's answer to the close's answer (the final
            transcript), --runs times; --commit agreed|windows picks what the session
            commits during capture (default: the server's --session-commit).
  realtime  --streams N concurrent /v1/realtime?intent=transcription WebSockets, each
            streaming the take as 24 kHz pcm16 in 100 ms appends at real-time speed for
            --seconds, with server_vad (or --manual: the client commits after each clip);
            figures: commit -> `.completed` latency per item (from the client's receipt of
            `input_audio_buffer.committed`, or from sending the commit with --manual),
            percentiles, and the server's own figure for the same span (its /metrics
            histogram: mean, and the buckets holding p50 and p95), which leaves out the
            client processes' delays; the gaps between interim deltas while an item is
            spoken; items, errors, and how late the clients sent (a client that cannot keep
            real time says so).
  wer       The long take streamed through the Realtime endpoint (server_vad, --speed x real
            time), uploaded to a streaming session as above (--speed x real time) and sent
            through /v1/audio/transcriptions; the word error rate of each against the take's
            reference text after Whisper's English normalizer (openai-whisper's, when
            importable; else lower case without punctuation).

The take: `--take jfk62` is jfk.wav followed by silero_test.wav, cut at 62 s (the issue's
62 s take); `--take long` is real English speech with known words, jfk.wav and the
pocketsphinx-testdata recordings (Debian `pocketsphinx-testdata`: five LibriVox sentences
and five card names) with 0.8 s pauses, --repeat times (2: about 150 s).

  bench/live.py --parley build/parley --model DIR session realtime
  .venv-ref/bin/python bench/live.py --parley build/parley --model DIR wer
  bench/live.py --parley B --model TURBO realtime --streams 50 200 500 --seconds 60 \
      --serve-args --device cuda --dtype f16 --whisper-batch 64
"""
import argparse
import array
import asyncio
import base64
import json
import multiprocessing
import os
import random
import re
import statistics
import struct
import sys
import time
import warnings
import wave

from serve_proc import ParleyServe

with warnings.catch_warnings():  # deprecated in 3.11, present through 3.12 (the GPU machine's)
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("PARLEY_TEST_DATA", os.path.join(HERE, "..", "..", "shared", "data"))
PSTD = os.environ.get("PARLEY_PSTD", "/usr/share/pocketsphinx/test/data")  # Debian package
RATE = 16000

# --take long: (file, reference words); the LibriVox sentences are consecutive in the book.
LONG = [
    (os.path.join(DATA, "audio", "jfk.wav"),
     "and so my fellow americans ask not what your country can do for you ask what you can "
     "do for your country"),
] + [(os.path.join(PSTD, "librivox", f"sense_and_sensibility_01_austen_64kb-{n}.wav"), t) for n, t in [
    ("0870", "and mister john dashwood had then leisure to consider how much there might be "
             "prudently in his power to do for them"),
    ("0880", "he was not an ill disposed young man"),
    ("0890", "unless to be rather cold hearted and rather selfish is to be ill disposed"),
    ("0920", "had he married a more a amiable woman he might have been made still more "
             "respectable than he was"),
    ("0930", "he might even have been made amiable himself"),
]] + [(os.path.join(PSTD, "cards", f"{n}.wav"), t) for n, t in [
    ("001", "ten of clubs"), ("002", "four queen of clubs"), ("003", "seven of clubs"),
    ("004", "five five"), ("005", "eight of spades four of clubs seven of hearts"),
]]


def read_wav16(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != RATE or w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit(f"{path}: expected 16 kHz mono pcm16")
        return w.readframes(w.getnframes())


def make_take(name, repeat):
    """(pcm16 bytes at 16 kHz, [(start_s, end_s) of each clip], reference text or None)."""
    if name == "jfk62":
        pcm = read_wav16(os.path.join(DATA, "audio", "jfk.wav"))
        pcm += read_wav16(os.path.join(DATA, "audio", "silero_test.wav"))
        pcm = pcm[:62 * RATE * 2]
        return pcm, [(0.0, len(pcm) / 2 / RATE)], None
    if name != "long":
        sys.exit(f"unknown take {name}")
    pause = b"\0\0" * int(0.8 * RATE)
    pcm, clips, words = b"", [], []
    for _ in range(repeat):
        for path, text in LONG:
            if not os.path.exists(path):
                sys.exit(f"{path} is missing (apt-get install pocketsphinx-testdata)")
            start = len(pcm) / 2 / RATE
            pcm += read_wav16(path)
            clips.append((start, len(pcm) / 2 / RATE))
            pcm += pause
            words.append(text)
    return pcm, clips, " ".join(words)


def wav_bytes(pcm, rate):
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1,
                         1, rate, rate * 2, 2, 16, b"data", len(pcm))
    return header + pcm


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(q / 100 * len(v)))], 2)


def summary(values):
    return {"n": len(values), "p50": pct(values, 50), "p95": pct(values, 95),
            "max": round(max(values), 2) if values else None,
            "mean": round(statistics.fmean(values), 2) if values else None}


# ---- the server -------------------------------------------------------------------------

def start_server(parley, model, extra):
    vad = os.path.join(DATA, "vad", "silero_vad_v6.2.onnx")
    return ParleyServe([parley, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
                        "--vad-model", vad, *extra])


# ---- a WebSocket client (RFC 6455, text frames), enough for the Realtime endpoint --------

class WebSocket:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port, path):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError("upgrade refused: " + head.decode(errors="replace")[:200])
        return cls(reader, writer)

    def _frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        mask = os.urandom(4)
        full = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(full, "big")).to_bytes(n, "big")
        return head + mask + masked

    async def send(self, text):
        self.writer.write(self._frame(0x1, text.encode()))
        await self.writer.drain()

    async def recv(self):
        """The next text message; None once the server closed."""
        message = b""
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", await self.reader.readexactly(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(n)  # server frames are not masked
            opcode = b0 & 0x0F
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                self.writer.write(self._frame(0xA, payload))
                continue
            if opcode in (0x1, 0x0):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self):
        try:
            self.writer.write(self._frame(0x8, struct.pack("!H", 1000)))
            self.writer.close()
        except Exception:  # noqa: BLE001 - already gone
            pass


# ---- realtime streams ---------------------------------------------------------------------

def session_update(manual):
    turn = None if manual else {"type": "server_vad", "threshold": 0.5,
                                "prefix_padding_ms": 300, "silence_duration_ms": 500}
    return {"type": "session.update", "session": {
        "type": "transcription",
        "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000},
                            "transcription": {"model": "whisper-1", "language": "en"},
                            "turn_detection": turn}}}}


async def stream(port, pcm24, clips, seconds, speed, manual, start_delay, out):
    """One client: streams pcm24 (looped) for `seconds` of audio; appends its items to out."""
    await asyncio.sleep(start_delay)
    ws = await WebSocket.connect(port, "/v1/realtime?intent=transcription")
    await ws.send(json.dumps(session_update(manual)))
    items = {}  # item_id -> {"committed": t, "deltas": [t...], "started": t, "text": ...}
    pending_commits = []  # manual: times the client sent its commits
    errors = []
    done = asyncio.Event()
    state = {"outstanding": 0, "sending": True}

    async def reader():
        while True:
            msg = await ws.recv()
            if msg is None:
                break
            now = time.monotonic()
            e = json.loads(msg)
            t = e.get("type", "")
            if t == "error":
                errors.append(e.get("error", {}).get("message", msg)[:200])
            elif t == "input_audio_buffer.committed":
                it = items.setdefault(e["item_id"], {"deltas": []})
                it["committed"] = pending_commits.pop(0) if manual and pending_commits else now
                state["outstanding"] += 1
            elif t == "input_audio_buffer.speech_started":
                items.setdefault(e["item_id"], {"deltas": []})["started"] = now
            elif t.endswith("input_audio_transcription.delta"):
                it = items.setdefault(e["item_id"], {"deltas": []})
                if "committed" not in it:
                    it["deltas"].append(now)
            elif t.endswith("input_audio_transcription.completed"):
                it = items.setdefault(e["item_id"], {"deltas": []})
                it["completed"] = now
                it["text"] = e.get("transcript", "")
                state["outstanding"] -= 1
                if not state["sending"] and state["outstanding"] <= 0:
                    done.set()

    read_task = asyncio.create_task(reader())
    chunk = 2400 * 2  # 100 ms at 24 kHz
    step = 0.1 / speed
    total = int(seconds * 24000) * 2
    clip_ends = sorted(int(e * 24000) * 2 for _, e in clips)
    t0 = time.monotonic()
    lateness = []
    sent = 0
    next_end = 0
    while sent < total:
        due = t0 + (sent // chunk) * step
        now = time.monotonic()
        if due > now:
            await asyncio.sleep(due - now)
        else:
            lateness.append(now - due)
        offset = sent % len(pcm24)
        piece = pcm24[offset:offset + chunk]
        await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                  "audio": base64.b64encode(piece).decode()}))
        sent += len(piece)
        if manual:  # commit right after each clip's end went out
            pos = sent % len(pcm24) or len(pcm24)
            while next_end < len(clip_ends) and clip_ends[next_end] <= pos:
                next_end += 1
                pending_commits.append(time.monotonic())
                await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            if next_end == len(clip_ends) and pos == len(pcm24):
                next_end = 0
    if not manual:  # a second of silence so the last turn ends
        silence = base64.b64encode(b"\0" * chunk).decode()
        for _ in range(int(1.0 / 0.1)):
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": silence}))
            await asyncio.sleep(step)
    state["sending"] = False
    if state["outstanding"] > 0:
        try:
            await asyncio.wait_for(done.wait(), timeout=120)
        except asyncio.TimeoutError:
            errors.append("items still waiting 120 s after the stream ended")
    else:
        await asyncio.sleep(0.5)
    ws.close()
    read_task.cancel()
    out.append({"items": list(items.values()), "errors": errors,
                "late_p95": pct(lateness, 95) if lateness else 0.0,
                "late_max": max(lateness) if lateness else 0.0})


def run_streams(args):
    """A worker process's share of the streams (asyncio); returns their results."""
    port, pcm24, clips, seconds, speed, manual, delays = args
    out = []

    async def main():
        await asyncio.gather(*(stream(port, pcm24, clips, seconds, speed, manual, d, out)
                               for d in delays), return_exceptions=False)

    asyncio.run(main())
    return out


ENGINE_COUNTERS = ["windows", "fitted_windows", "batch_encodes", "batch_steps",
                   "background_yielded", "encoder_runs", "decoder_runs", "encode_seconds",
                   "decode_seconds", "fallback_seconds", "start_seconds"]


def metrics_lines(server):
    """GET /metrics: its lines."""
    status, body = server.request("GET", "/metrics", timeout=30)
    if status != 200:
        raise RuntimeError(f"GET /metrics answered {status}")
    return body.decode().splitlines()


def engine_counters(lines):
    """The Whisper engine's counters from /metrics lines (parley_whisper_<name>_total)."""
    out = {}
    for line in lines:
        for name in ENGINE_COUNTERS:
            if line.startswith(f"parley_whisper_{name}_total "):
                out[name] = float(line.split()[1])
    return out


TURN_HISTOGRAM = "parley_realtime_commit_to_completed_seconds"


def server_turns(lines):
    """The server's own commit -> completed histogram from /metrics lines: ({upper bound:
    cumulative count}, sum, count)."""
    buckets, total, count = {}, 0.0, 0.0
    for line in lines:
        if line.startswith(TURN_HISTOGRAM + "_bucket{le=\""):
            le = line.split('"')[1]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.split()[1])
        elif line.startswith(TURN_HISTOGRAM + "_sum "):
            total = float(line.split()[1])
        elif line.startswith(TURN_HISTOGRAM + "_count "):
            count = float(line.split()[1])
    return buckets, total, count


def server_turn_summary(before, after):
    """The turns between two server_turns() readings: their count, mean ms, and the bucket
    bounds (ms) that hold the 50th and 95th percentiles ("<= X ms")."""
    n = after[2] - before[2]
    if n <= 0:
        return {"turns": 0}
    out = {"turns": int(n), "mean_ms": round(1000 * (after[1] - before[1]) / n, 1)}
    for name, q in (("p50_le_ms", 0.5), ("p95_le_ms", 0.95)):
        for le in sorted(after[0]):
            if after[0][le] - before[0].get(le, 0) >= q * n:
                out[name] = "inf" if le == float("inf") else round(1000 * le)
                break
    return out


def realtime(server, args, pcm16, clips):
    pcm24, _ = audioop.ratecv(pcm16, 2, 1, RATE, 24000, None)
    seconds = args.seconds or len(pcm16) / 2 / RATE
    for n in args.streams:
        lines = metrics_lines(server)
        before, turns_before = engine_counters(lines), server_turns(lines)
        rng = random.Random(n)
        delays = [rng.uniform(0, args.stagger) for _ in range(n)]
        procs = max(1, min(args.procs, n))
        shares = [(server.port, pcm24, clips, seconds, args.speed, args.manual,
                   delays[i::procs]) for i in range(procs)]
        t0 = time.monotonic()
        with multiprocessing.Pool(procs) as pool:
            results = [r for part in pool.map(run_streams, shares) for r in part]
        wall = time.monotonic() - t0
        latency, gaps, first, errors, late = [], [], [], [], []
        for r in results:
            errors += r["errors"]
            late.append(r["late_max"])
            for it in r["items"]:
                if "committed" in it and "completed" in it:
                    latency.append(1000 * (it["completed"] - it["committed"]))
                d = it["deltas"]
                if "started" in it and d:
                    first.append(1000 * (d[0] - it["started"]))
                gaps += [1000 * (b - a) for a, b in zip(d, d[1:])]
        items = sum(len(r["items"]) for r in results)
        lines = metrics_lines(server)
        after = engine_counters(lines)
        engine = {k: after[k] - before[k] for k in after}
        print(json.dumps({
            "bench": "realtime", "streams": n, "seconds": round(seconds, 1), "speed": args.speed,
            "turns": "manual" if args.manual else "server_vad", "wall_s": round(wall, 1),
            "items": items, "completed": len(latency),
            "commit_to_completed_ms": summary(latency),
            "server_commit_to_completed": server_turn_summary(turns_before, server_turns(lines)),
            "interim_gap_ms": summary(gaps), "first_delta_after_speech_ms": summary(first),
            "client_late_max_s": round(max(late), 3) if late else 0.0,
            "errors": len(errors), "first_errors": errors[:3], "engine": engine,
            "serve_args": args.serve_args}), flush=True)


# ---- sessions -----------------------------------------------------------------------------

def stream_session(server, args, pcm16):
    """Uploads pcm16 to a new session at --speed x real time in --chunk-s chunks and closes
    it: (ms from the last chunk's answer to the close's, the final text, seconds committed
    before the close)."""
    chunk = int(args.chunk_s * RATE) * 2
    fields = {"input_format": "pcm16", "sample_rate": RATE, "language": "en"}
    if args.commit:
        fields["commit"] = args.commit
    status, data = server.request("POST", "/v1/audio/sessions", json.dumps(fields),
                                  {"Content-Type": "application/json"})
    if status != 200:
        sys.exit(f"create: HTTP {status} {data[:200]!r}")
    sid = json.loads(data)["id"]
    t0 = time.monotonic()
    transcribed = 0.0
    for off in range(0, len(pcm16), chunk):
        piece = pcm16[off:off + chunk]
        due = t0 + (off + len(piece)) / 2 / RATE / args.speed  # recorded by then
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        status, data = server.request("POST", f"/v1/audio/sessions/{sid}/audio", piece,
                                      {"Content-Type": "application/octet-stream"})
        if status != 200:
            sys.exit(f"append: HTTP {status} {data[:200]!r}")
        transcribed = json.loads(data).get("seconds_transcribed", 0.0)
    t1 = time.monotonic()
    status, data = server.request("POST", f"/v1/audio/sessions/{sid}/close")
    ms = 1000 * (time.monotonic() - t1)
    if status != 200:
        sys.exit(f"close: HTTP {status} {data[:200]!r}")
    return ms, json.loads(data)["text"], transcribed


def session(server, args, pcm16):
    for run in range(args.runs):
        ms, text, transcribed = stream_session(server, args, pcm16)
        print(json.dumps({"bench": "session_close", "run": run, "audio_s": len(pcm16) / 2 / RATE,
                          "chunk_s": args.chunk_s, "commit": args.commit or "server default",
                          "seconds_transcribed_before_close": transcribed,
                          "last_chunk_to_final_ms": round(ms, 1), "words": len(text.split()),
                          "serve_args": args.serve_args}), flush=True)


# ---- word error rate ----------------------------------------------------------------------

def normalizer():
    try:
        from whisper.normalizers import EnglishTextNormalizer
        return EnglishTextNormalizer(), "openai-whisper EnglishTextNormalizer"
    except ImportError:
        return (lambda s: re.sub(r"[^a-z0-9' ]+", " ", s.lower())), "lower case, no punctuation"


def wer(ref, hyp):
    r, h = ref.split(), hyp.split()
    prev = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        cur = [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
        prev = cur
    return 100.0 * prev[-1] / max(1, len(r))


def word_error(server, args, pcm16, clips, reference):
    if reference is None:
        sys.exit("wer needs a take with a reference (--take long)")
    norm, norm_name = normalizer()
    boundary = "parleylivebench"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nen\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\n"
            f"text\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"take.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode()
    body += wav_bytes(pcm16, RATE) + f"\r\n--{boundary}--\r\n".encode()
    status, data = server.request("POST", "/v1/audio/transcriptions", body,
                                  {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    if status != 200:
        sys.exit(f"offline: HTTP {status} {data[:200]!r}")
    offline = data.decode()
    pcm24, _ = audioop.ratecv(pcm16, 2, 1, RATE, 24000, None)
    seconds = len(pcm16) / 2 / RATE
    live = run_streams((server.port, pcm24, clips, seconds, args.speed, args.manual, [0.0]))[0]
    # In the order the turns began (completions of different turns may come in any order).
    items = [it for it in live["items"] if "completed" in it]
    committed = " ".join(it["text"] for it in items)
    _, session_text, _ = stream_session(server, args, pcm16)
    ref = norm(reference)
    print(json.dumps({
        "bench": "live_wer", "audio_s": round(seconds, 1), "speed": args.speed,
        "turns": "manual" if args.manual else "server_vad", "normalizer": norm_name,
        "reference_words": len(ref.split()), "items": len(items),
        "wer_offline": round(wer(ref, norm(offline)), 2),
        "wer_live": round(wer(ref, norm(committed)), 2),
        "wer_session": round(wer(ref, norm(session_text)), 2),
        "session_commit": args.commit or "server default", "errors": live["errors"][:3],
        "offline": offline.strip(), "live": committed, "session": session_text.strip(),
        "serve_args": args.serve_args}),
        flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("scenarios", nargs="+", choices=["session", "realtime", "wer"])
    p.add_argument("--parley", default=os.path.join(HERE, "..", "build", "parley"))
    p.add_argument("--model", required=True)
    p.add_argument("--take", default=None, help="jfk62 or long (default: jfk62, long for wer)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--chunk-s", type=float, default=1.0)
    p.add_argument("--streams", type=int, nargs="+", default=[1])
    p.add_argument("--seconds", type=float, default=None, help="audio per stream (default: the take)")
    p.add_argument("--speed", type=float, default=1.0, help="x real time")
    p.add_argument("--stagger", type=float, default=5.0, help="streams start within this many s")
    p.add_argument("--procs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    p.add_argument("--manual", action="store_true", help="turn_detection null, commit per clip")
    p.add_argument("--commit", choices=["agreed", "windows"], default=None,
                   help="sessions: what they commit during capture (default: the server's)")
    p.add_argument("--serve-args", nargs=argparse.REMAINDER, default=[])
    args = p.parse_args()
    server = start_server(args.parley, args.model, args.serve_args)
    try:
        for scenario in args.scenarios:
            take = args.take or ("long" if scenario == "wer" else "jfk62")
            pcm16, clips, reference = make_take(take, args.repeat)
            if scenario == "session":
                session(server, args, pcm16)
            elif scenario == "realtime":
                realtime(server, args, pcm16, clips)
            else:
                word_error(server, args, pcm16, clips, reference)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

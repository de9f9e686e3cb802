"""/v1/realtime?intent=transcription through the official openai SDK's realtime client
(client.realtime.connect, over `websockets`) against `parley serve` with the real tiny.en:
jfk.wav streamed as 24 kHz pcm16 faster than real time with server_vad (speech_started,
speech_stopped, committed, interim deltas before the item completes, deltas never
retracting, the transcript equal after normalization to /v1/audio/transcriptions of the same
24 kHz file), manual commit with G.711 mu-law (GA) and A-law (beta
transcription_session.update), error events on a connection that stays open, ephemeral keys
with --api-key, a client gone mid-turn, and three concurrent sessions sharing the engine's
encoder calls."""
import audioop
import base64
import io
import os
import threading
import time
import wave

import pytest
from openai import OpenAI

from conftest import DATA, JFK, audio, multipart, normalized

VAD = os.path.join(DATA, "vad", "silero_vad_v6.2.onnx")


def jfk_pcm(rate):
    """jfk.wav as 16-bit mono PCM at `rate` (audioop's converter: independent of parley's)."""
    with wave.open(audio("jfk.wav"), "rb") as w:
        pcm, src = w.readframes(w.getnframes()), w.getframerate()
    if rate != src:
        pcm, _ = audioop.ratecv(pcm, 2, 1, src, rate, None)
    return pcm


def wav_bytes(pcm, rate):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buf.getvalue()


def offline(server, wav):
    body, ctype = multipart([("model", "whisper-1"), ("response_format", "text")],
                            [("file", "audio.wav", wav)])
    status, _, data = server.request("POST", "/v1/audio/transcriptions", body=body,
                                     headers={"Content-Type": ctype})
    assert status == 200, data
    return data.decode().strip()


def b64(data):
    return base64.b64encode(data).decode()


class Events:
    """Every server event of a connection, read on a thread as they come."""

    def __init__(self, conn):
        self.conn = conn
        self.items = []
        self.cv = threading.Condition()
        self.closed = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for event in self.conn:
                with self.cv:
                    self.items.append((time.monotonic(), event))
                    self.cv.notify_all()
        except Exception as e:  # the connection closed
            self.closed = e
        with self.cv:
            self.closed = self.closed or True
            self.cv.notify_all()

    def wait(self, predicate, timeout=45):
        """The first event matching predicate (waiting for it)."""
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for _, e in self.items:
                    if predicate(e):
                        return e
                left = deadline - time.monotonic()
                assert left > 0 and self.closed is None, (
                    "no such event; got " + str([e.type for _, e in self.items]))
                self.cv.wait(left)

    def of(self, type_):
        with self.cv:
            return [e for _, e in self.items if e.type == type_]

    def times(self):
        with self.cv:
            return list(self.items)


def connect(server, api_key="unused", **kw):
    client = OpenAI(base_url=server.url + "/v1", api_key=api_key)
    return client.realtime.connect(extra_query={"intent": "transcription"}, **kw)


@pytest.fixture(scope="module")
def rt(make_server):
    return make_server("--vad-model", VAD, "--whisper-batch", "4")


@pytest.fixture(scope="module")
def make_server():
    from conftest import Server
    started = []

    def make(*args):
        s = Server(*args)
        started.append(s)
        return s

    yield make
    for s in started:
        assert s.terminate() == 0


def stream(conn, pcm, bytes_per_chunk, seconds_per_chunk, speed):
    for i in range(0, len(pcm), bytes_per_chunk):
        conn.send({"type": "input_audio_buffer.append", "audio": b64(pcm[i:i + bytes_per_chunk])})
        time.sleep(seconds_per_chunk / speed)


def test_server_vad_pcm16_24k(rt):
    pcm = jfk_pcm(24000)
    want = offline(rt, wav_bytes(pcm, 24000))
    assert normalized(want) == JFK
    with connect(rt) as conn:
        ev = Events(conn)
        created = ev.wait(lambda e: e.type == "session.created")
        assert created.session.type == "transcription"
        conn.send({"type": "session.update", "session": {
            "type": "transcription",
            "audio": {"input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": {"type": "server_vad", "threshold": 0.5,
                                   "prefix_padding_ms": 300, "silence_duration_ms": 700}}},
            "include": ["item.input_audio_transcription.logprobs"]}})
        updated = ev.wait(lambda e: e.type == "session.updated")
        td = updated.session.audio.input.turn_detection
        assert (td.type, td.silence_duration_ms, td.prefix_padding_ms) == ("server_vad", 700, 300)
        t0 = time.monotonic()
        # 100 ms chunks at half real time (interim passes must have time to agree while the
        # user speaks, also on a busy 2-core machine where a pass takes ~1 s: at 1.5x a CI run
        # saw none), then 1.5 s of silence to end the turn.
        stream(conn, pcm + b"\0" * (24000 * 2 * 3 // 2), 4800, 0.1, 0.5)
        sent_at = time.monotonic()
        ev.wait(lambda e: e.type == "input_audio_buffer.speech_stopped")
        committed = ev.wait(lambda e: e.type == "input_audio_buffer.committed")
        ev.wait(lambda e: e.type == "conversation.item.input_audio_transcription.completed"
                and settled(ev))
        done_at = time.monotonic()

    started = ev.of("input_audio_buffer.speech_started")
    stopped = ev.of("input_audio_buffer.speech_stopped")
    commits = ev.of("input_audio_buffer.committed")
    completed = {e.item_id: e for e in ev.of("conversation.item.input_audio_transcription.completed")}
    assert len(started) == len(stopped) == len(commits) >= 1
    assert committed.previous_item_id is None
    total_ms = len(pcm) // 48
    for s, t, c in zip(started, stopped, commits):
        assert s.item_id == t.item_id == c.item_id and s.item_id.startswith("item_")
        assert 0 <= s.audio_start_ms < t.audio_end_ms <= total_ms + 1500
    assert started[0].audio_start_ms < 1000  # jfk speaks from ~0.3 s, 300 ms prefix
    for prev, c in zip(commits, commits[1:]):
        assert c.previous_item_id == prev.item_id
    # Deltas never retract: per item they add up to a prefix of the completed transcript, and
    # some came before the item was committed (interim text while speech went on).
    times = ev.times()
    interim = 0
    for c in commits:
        done = completed[c.item_id]
        deltas = [(t, e) for t, e in times
                  if e.type == "conversation.item.input_audio_transcription.delta"
                  and e.item_id == c.item_id]
        text = "".join(e.delta for _, e in deltas)
        # The deltas' words lead the transcript's (punctuation aside: an interim "And so my"
        # may complete as "And so, my", which the completed event's transcript carries).
        assert normalized(done.transcript).startswith(normalized(text)), (text, done.transcript)
        commit_t = next(t for t, e in times if e is c)
        interim += sum(1 for t, _ in deltas if t < commit_t)
        assert done.usage.type == "duration" and done.usage.seconds > 0
        assert done.logprobs and all(p.logprob <= 0 for p in done.logprobs)
        assert done.content_index == 0
    assert interim >= 1, "no interim delta while the user spoke"
    latency = [next(t for t, e in times if e is completed[c.item_id])
               - next(t for t, e in times if e is c) for c in commits]
    transcript = " ".join(completed[c.item_id].transcript for c in commits)
    assert normalized(transcript) == normalized(want)
    print(f"\nrealtime: {len(commits)} item(s), {interim} interim deltas, committed -> "
          f"completed {', '.join(f'{x:.2f}' for x in latency)} s, last completed "
          f"{done_at - sent_at:.2f} s after the audio was sent ({sent_at - t0:.1f} s to send)")


def test_manual_commit_mulaw(rt):
    pcm8 = jfk_pcm(8000)
    ulaw = audioop.lin2ulaw(pcm8, 2)
    # The reference: the same mu-law audio decoded by audioop, as an 8 kHz WAV.
    want = offline(rt, wav_bytes(audioop.ulaw2lin(ulaw, 2), 8000))
    with connect(rt) as conn:
        ev = Events(conn)
        ev.wait(lambda e: e.type == "session.created")
        conn.send({"type": "session.update", "session": {"type": "transcription", "audio": {
            "input": {"format": {"type": "audio/pcmu"}, "turn_detection": None}}}})
        updated = ev.wait(lambda e: e.type == "session.updated")
        assert updated.session.audio.input.turn_detection is None
        assert updated.session.audio.input.format.type == "audio/pcmu"
        stream(conn, ulaw, 1600, 0.2, 20)
        t = time.monotonic()
        conn.send({"type": "input_audio_buffer.commit"})
        c = ev.wait(lambda e: e.type == "input_audio_buffer.committed")
        done = ev.wait(lambda e: e.type == "conversation.item.input_audio_transcription.completed")
        latency = time.monotonic() - t
    assert done.item_id == c.item_id
    assert not ev.of("input_audio_buffer.speech_started")  # no VAD in manual mode
    assert normalized(done.transcript) == normalized(want) == JFK
    assert abs(done.usage.seconds - len(pcm8) / 16000) < 0.01
    print(f"\nmu-law manual commit: completed {latency:.2f} s after the commit")


def test_beta_alaw_and_clear(rt):
    alaw = audioop.lin2alaw(jfk_pcm(8000), 2)
    with connect(rt, extra_headers={"OpenAI-Beta": "realtime=v1"}) as conn:
        ev = Events(conn)
        created = ev.wait(lambda e: e.type == "transcription_session.created")
        conn.send({"type": "transcription_session.update", "session": {
            "input_audio_format": "g711_alaw", "turn_detection": None,
            "input_audio_transcription": {"model": "whisper-1"}}})
        updated = ev.wait(lambda e: e.type == "transcription_session.updated")
        session = dict(updated.session)  # the GA SDK keeps the beta session as a dict
        assert session["input_audio_format"] == "g711_alaw" and session["turn_detection"] is None
        # Audio then clear: nothing is committed from it.
        conn.send({"type": "input_audio_buffer.append", "audio": b64(alaw[:16000])})
        conn.send({"type": "input_audio_buffer.clear"})
        ev.wait(lambda e: e.type == "input_audio_buffer.cleared")
        conn.send({"type": "input_audio_buffer.commit", "event_id": "c1"})
        err = ev.wait(lambda e: e.type == "error")
        assert err.error.code == "input_audio_buffer_commit_empty" and err.error.event_id == "c1"
        conn.send({"type": "input_audio_buffer.append", "audio": b64(alaw)})
        conn.send({"type": "input_audio_buffer.commit"})
        done = ev.wait(lambda e: e.type == "conversation.item.input_audio_transcription.completed")
    assert dict(created.session)["id"].startswith("sess_")
    assert normalized(done.transcript) == JFK
    assert ev.of("conversation.item.created")  # the beta item event


def test_errors_keep_the_connection(rt):
    with connect(rt) as conn:
        ev = Events(conn)
        ev.wait(lambda e: e.type == "session.created")
        bad = [
            ({"type": "no.such.event", "event_id": "e1"}, "invalid_value", "type"),
            ({"type": "input_audio_buffer.append", "audio": "!!notbase64", "event_id": "e2"},
             "invalid_value", "audio"),
            ({"type": "input_audio_buffer.append", "event_id": "e3"},
             "missing_required_parameter", "audio"),
            ({"type": "session.update", "event_id": "e4", "session": {"type": "transcription",
              "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}},
             "invalid_value", "session.audio.input.format.rate"),
            ({"type": "session.update", "event_id": "e5", "session": {"type": "transcription",
              "audio": {"input": {"transcription": {"model": "gpt-4o-transcribe"}}}}},
             "model_not_found", "session.audio.input.transcription.model"),
            ({"type": "session.update", "event_id": "e6", "session": {"type": "realtime"}},
             "unsupported_value", "session.type"),
            ({"type": "session.update", "event_id": "e7", "session": {"type": "transcription",
              "audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}}},
             "unsupported_value", "session.audio.input.turn_detection.type"),
            ({"type": "response.create", "event_id": "e8"}, "invalid_value", "type"),
            ({"type": "input_audio_buffer.commit", "event_id": "e9"},
             "input_audio_buffer_commit_empty", None),
        ]
        for event, _, _ in bad:
            conn.send(event)
        conn._connection.send("{not json")  # the SDK sends only valid events
        conn._connection.send(b"\x00\x01")
        for i, (event, code, param) in enumerate(bad):
            e = ev.wait(lambda e, i=i: e.type == "error" and e.error.event_id == f"e{i + 1}")
            assert (e.error.code, e.error.param) == (code, param), e
            assert e.error.type == "invalid_request_error" and e.error.message
            assert e.event_id.startswith("event_")
        ev.wait(lambda e: e.type == "error" and e.error.code == "invalid_json")
        ev.wait(lambda e: e.type == "error" and "binary" in e.error.message)
        # Still serving: a manual turn of jfk goes through.
        conn.send({"type": "session.update", "session": {"type": "transcription", "audio": {
            "input": {"turn_detection": None}}}})
        conn.send({"type": "input_audio_buffer.append", "audio": b64(jfk_pcm(24000))})
        conn.send({"type": "input_audio_buffer.commit"})
        done = ev.wait(lambda e: e.type == "conversation.item.input_audio_transcription.completed")
    assert normalized(done.transcript) == JFK
    assert not ev.of("session.updated")[0].session.audio.input.turn_detection


def test_ephemeral_keys(make_server):
    from websockets.exceptions import InvalidStatus
    s = make_server("--vad-model", VAD, "--api-key", "sekret")
    with pytest.raises(InvalidStatus):  # no key
        with connect(s, api_key="wrong") as conn:
            conn.recv()
    admin = OpenAI(base_url=s.url + "/v1", api_key="sekret")
    secret = admin.realtime.client_secrets.create(
        expires_after={"anchor": "created_at", "seconds": 10},
        session={"type": "transcription",
                 "audio": {"input": {"format": {"type": "audio/pcmu"}, "turn_detection": None}}})
    assert secret.value.startswith("ek_") and secret.expires_at > time.time() + 5
    assert secret.session.type == "transcription"
    # The ephemeral key opens a session preset as the secret said; it mints no keys itself.
    with connect(s, api_key=secret.value) as conn:
        created = conn.recv()
        assert created.type == "session.created"
        assert created.session.audio.input.format.type == "audio/pcmu"
        assert created.session.audio.input.turn_detection is None
    with pytest.raises(Exception):
        OpenAI(base_url=s.url + "/v1", api_key=secret.value, max_retries=0
               ).realtime.client_secrets.create(session={"type": "transcription"})
    with pytest.raises(InvalidStatus):  # an unknown ek_
        with connect(s, api_key="ek_" + "x" * 32) as conn:
            conn.recv()
    status, _, body = s.request("POST", "/v1/realtime/client_secrets",
                                body=b'{"expires_after": {"seconds": 5}}',
                                headers={"Authorization": "Bearer sekret"})
    assert status == 400 and b"expires_after.seconds" in body
    time.sleep(max(0.0, secret.expires_at - time.time()) + 1.0)
    with pytest.raises(InvalidStatus):  # expired
        with connect(s, api_key=secret.value) as conn:
            conn.recv()


def settled(ev):
    """Every turn VAD started has stopped, been committed and completed."""
    n = len(ev.of("input_audio_buffer.speech_started"))
    return n >= 1 and all(len(ev.of(t)) == n for t in (
        "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed"))


def test_three_concurrent_sessions_share_the_engine(rt):
    pcm = jfk_pcm(24000)
    before = rt.metrics()
    results = [None] * 3
    completions = [0] * 3

    def one(i):
        with connect(rt) as conn:
            ev = Events(conn)
            ev.wait(lambda e: e.type == "session.created")
            conn.send({"type": "session.update", "session": {"type": "transcription", "audio": {
                "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 700}}}}})
            ev.wait(lambda e: e.type == "session.updated")
            stream(conn, pcm + b"\0" * 72000, 9600, 0.2, 4)
            ev.wait(lambda e: e.type == "conversation.item.input_audio_transcription.completed"
                    and settled(ev), timeout=55)
            # Completions of different turns may come in any order (OpenAI's transcription
            # guide says the same: match them to the commits by item_id); the commits give
            # the order. Here each turn is its own engine job beside the others' work.
            done = {e.item_id: e.transcript for e in
                    ev.of("conversation.item.input_audio_transcription.completed")}
            results[i] = " ".join(done[c.item_id] for c in ev.of("input_audio_buffer.committed"))
            completions[i] = len(done)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    after = rt.metrics()
    for r in results:
        assert r is not None and normalized(r) == JFK, results
    windows = after["parley_whisper_windows_total"] - before["parley_whisper_windows_total"]
    calls = (after["parley_whisper_batch_encodes_total"]
             - before["parley_whisper_batch_encodes_total"])
    print(f"\n3 sessions: {windows:.0f} windows in {calls:.0f} encoder calls")
    assert windows > calls > 0, (windows, calls)  # some encoder calls served several streams
    # --live-audio-ctx fit (the default): the turns' windows were encoded over 15 s
    assert after["parley_whisper_fitted_windows_total"] > before["parley_whisper_fitted_windows_total"]
    # Every completed turn's commit -> completed is in the histogram once, within its sum.
    h = "parley_realtime_commit_to_completed_seconds"
    turns = after[h + "_count"] - before[h + "_count"]
    assert turns == sum(completions) >= 3, (turns, completions)
    assert after[h + '_bucket{le="+Inf"}'] == after[h + "_count"], after
    assert 0 < after[h + "_sum"] - before[h + "_sum"] < 60 * turns


def test_live_audio_ctx(rt, make_server):
    """--live-audio-ctx: fit (the default) encodes jfk.wav's 11 s turn over 15 s (750
    positions) rather than 30 s, full over 30 s; both say the words, and a file request keeps
    the full context either way."""
    pcm = jfk_pcm(24000)
    for server, fit in ((rt, True), (make_server("--vad-model", VAD, "--live-audio-ctx", "full"),
                                     False)):
        before = server.metrics()["parley_whisper_fitted_windows_total"]
        with connect(server) as conn:
            ev = Events(conn)
            ev.wait(lambda e: e.type == "session.created")
            conn.send({"type": "session.update", "session": {"type": "transcription", "audio": {
                "input": {"turn_detection": None}}}})
            ev.wait(lambda e: e.type == "session.updated")
            stream(conn, pcm, 48000, 1.0, 20)
            conn.send({"type": "input_audio_buffer.commit"})
            done = ev.wait(
                lambda e: e.type == "conversation.item.input_audio_transcription.completed")
        assert normalized(done.transcript) == JFK, done.transcript
        fitted = server.metrics()["parley_whisper_fitted_windows_total"] - before
        assert (fitted >= 1) if fit else (fitted == 0), (fit, fitted)
        offline(server, wav_bytes(pcm, 24000))  # a file request: the full context
        assert server.metrics()["parley_whisper_fitted_windows_total"] == before + fitted


def test_client_gone_mid_turn_cancels(rt):
    pcm = jfk_pcm(24000)
    with connect(rt) as conn:
        ev = Events(conn)
        ev.wait(lambda e: e.type == "session.created")
        stream(conn, pcm[:24000 * 2 * 4], 9600, 0.2, 4)  # 4 s of speech, no end yet
        ev.wait(lambda e: e.type == "input_audio_buffer.speech_started")
    # The server keeps serving and its engine empties.
    deadline = time.time() + 20
    while time.time() < deadline:
        m = rt.metrics()
        if m.get("parley_requests_running", 0) == 0 and m.get("parley_queue_depth", 0) == 0:
            break
        time.sleep(0.2)
    assert m.get("parley_requests_running", 0) == 0
    assert normalized(offline(rt, wav_bytes(pcm, 24000))) == JFK

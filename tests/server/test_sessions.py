"""/v1/audio/sessions end to end against `parley serve` with the real tiny.en: audio appended
in chunks faster than real time, windows transcribed during capture (the partial transcript
grows before the close), with `commit: windows` (the default) the final transcript equal to
transcribing the whole file at once, with `commit: agreed` segments committed before any
window is whole and never taken back, a server killed mid-session and restarted on the same
spool, corrupt spool folders, limits, idle expiry and bad input."""
import json
import os
import subprocess
import tempfile
import time
import wave

import pytest

from conftest import BIN, JFK, MODEL, Server, audio, error_of, multipart, normalized

SESSIONS = "/v1/audio/sessions"


def call(server, method, path, body=None, ctype=None):
    headers = {"Content-Type": ctype} if ctype else {}
    status, _, data = server.request(method, path, body=body, headers=headers)
    return status, data


def create(server, **fields):
    status, data = call(server, "POST", SESSIONS, json.dumps(fields), "application/json")
    assert status == 200, data
    doc = json.loads(data)
    assert doc["object"] == "audio.session" and doc["status"] == "open", doc
    return doc["id"]


def append(server, sid, chunk):
    status, data = call(server, "POST", f"{SESSIONS}/{sid}/audio", chunk,
                        "application/octet-stream")
    assert status == 200, data
    return json.loads(data)


def get(server, sid):
    status, data = call(server, "GET", f"{SESSIONS}/{sid}")
    assert status == 200, data
    return json.loads(data)


def close(server, sid, fmt=None):
    path = f"{SESSIONS}/{sid}/close" + (f"?response_format={fmt}" if fmt else "")
    return call(server, "POST", path)


def offline(server, path, fmt="json"):
    """The same audio through /v1/audio/transcriptions in one request (the offline seek loop)."""
    with open(path, "rb") as f:
        body, ctype = multipart([("model", "whisper-1"), ("response_format", fmt)],
                                [("file", os.path.basename(path), f.read())])
    status, data = call(server, "POST", "/v1/audio/transcriptions", body, ctype)
    assert status == 200, data
    return data


def pcm16(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        return w.readframes(w.getnframes()), w.getframerate()


def wait_until(predicate, timeout=45):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out")


@pytest.fixture(scope="module")
def spool():
    with tempfile.TemporaryDirectory(prefix="parley-sessions-") as d:
        yield d


@pytest.fixture(scope="module")
def server(spool):
    s = Server("--sessions-dir", os.path.join(spool, "main"), "--vad", "off")
    yield s
    assert s.terminate() == 0


def chunks(data, size):
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_jfk_wav_in_chunks_equals_one_request_and_the_cli(server, tmp_path):
    path = audio("jfk.wav")
    sid = create(server, model="whisper-1", filename="jfk.wav", commit="windows")
    with open(path, "rb") as f:
        data = f.read()
    for c in chunks(data, 16384):  # a WAV container arriving in pieces
        doc = append(server, sid, c)
    assert doc["bytes_received"] == len(data)
    status, body = close(server, sid, "verbose_json")
    assert status == 200, body
    got = json.loads(body)
    want = json.loads(offline(server, path, "verbose_json"))
    assert got["text"] == want["text"]
    assert normalized(got["text"]) == JFK
    assert [(s["start"], s["end"], s["text"]) for s in got["segments"]] == \
        [(s["start"], s["end"], s["text"]) for s in want["segments"]]
    assert got["duration"] == pytest.approx(11.0, abs=0.01)
    # `parley transcribe` of the file: the same text.
    subprocess.run([BIN, "transcribe", path, "--model", MODEL, "-f", "json", "-o", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    with open(tmp_path / "jfk.json") as f:
        assert json.load(f)["text"] == got["text"]
    # Closing again gives the same answer, in any format; the session reads completed.
    for fmt, check in [("text", lambda b: b.decode() == got["text"].strip() + "\n"),
                       ("srt", lambda b: b.startswith(b"1\n00:00:00,000 --> ")),
                       ("vtt", lambda b: b.startswith(b"WEBVTT\n")),
                       ("json", lambda b: json.loads(b)["text"] == got["text"])]:
        status, body = close(server, sid, fmt)
        assert status == 200 and check(body), (fmt, body)
    doc = get(server, sid)
    assert doc["status"] == "completed" and doc["text"] == got["text"]


def test_long_pcm_transcribed_during_capture(server):
    """60 s of raw pcm16: windows are committed while audio still arrives; the close's
    transcript equals the one-request transcript of the file."""
    path = audio("silero_test.wav")
    data, rate = pcm16(path)
    sid = create(server, input_format="pcm16", sample_rate=rate, response_format="json",
                 commit="windows")
    second = 2 * rate
    first = data[:46 * second]
    for c in chunks(first, second):
        append(server, sid, c)
    t0 = time.time()
    doc = wait_until(lambda: (d := get(server, sid))["seconds_transcribed"] > 0 and d)
    assert doc["status"] == "open" and doc["text"].strip(), doc
    assert 0 < doc["seconds_transcribed"] <= 46
    partial = doc["text"]
    print(f"first window committed {time.time() - t0:.1f} s after 46 s of audio:"
          f" {doc['seconds_transcribed']:.2f} s, {partial!r}")
    for c in chunks(data[46 * second:], second):
        append(server, sid, c)
    t0 = time.time()
    status, body = close(server, sid)
    print(f"close took {time.time() - t0:.1f} s")
    assert status == 200, body
    got = json.loads(body)["text"]
    want = json.loads(offline(server, path))["text"]
    assert got.startswith(partial)
    assert got == want


def word_errors(got, want):
    """Word-level edit distance between two transcripts (after normalized)."""
    a, b = normalized(got).split(), normalized(want).split()
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def test_agreed_segments_committed_before_a_whole_window(server):
    """`commit: agreed`: 60 s of pcm16 at about 4x real time. Segments two tail
    passes agree on are committed before 30 s of audio is past the seek, the committed text
    only ever grows (each poll's is a prefix of the next and of the final transcript), the
    close leaves only the audio after the last agreed segment, and the transcript is the
    offline one's words within a few."""
    path = audio("silero_test.wav")
    data, rate = pcm16(path)
    assert get(server, create(server))["commit"] == "windows"  # the server's default
    sid = create(server, input_format="pcm16", sample_rate=rate, commit="agreed")
    assert get(server, sid)["commit"] == "agreed"
    second = 2 * rate
    seen = []
    for i, c in enumerate(chunks(data, second)):
        doc = append(server, sid, c)
        seen.append((i + 1, doc["seconds_transcribed"], doc["text"]))
        time.sleep(0.25)
    early = [(t, s) for t, s, _ in seen if 0 < s and t < 30]
    assert early, seen  # committed while less than one window had arrived
    for (_, _, a), (_, _, b) in zip(seen, seen[1:]):
        assert b.startswith(a), (a, b)
    last = seen[-1]
    status, body = close(server, sid, "verbose_json")
    assert status == 200, body
    got = json.loads(body)
    assert got["text"].startswith(last[2])
    assert got["duration"] == pytest.approx(len(data) / 2 / rate, abs=0.01)
    starts = [s["start"] for s in got["segments"]]
    assert starts == sorted(starts) and starts[-1] < got["duration"]
    want = json.loads(offline(server, path))["text"]
    errors = word_errors(got["text"], want)
    print(f"committed during capture: {last[1]:.2f} of {len(data) / 2 / rate:.1f} s; "
          f"{errors} word errors against offline's {len(normalized(want).split())} words")
    assert errors <= 0.1 * len(normalized(want).split()), (got["text"], want)
    assert get(server, sid)["status"] == "completed"


def test_mp3_container_in_chunks(server):
    path = audio("jfk.mp3")
    sid = create(server, filename="jfk.mp3", response_format="text", commit="windows")
    with open(path, "rb") as f:
        data = f.read()
    for c in chunks(data, 4000):
        append(server, sid, c)
    status, body = close(server, sid)
    assert status == 200, body
    assert body.decode() == offline(server, path, "text").decode()


def test_restart_mid_session_loses_nothing(spool):
    """Killed (SIGKILL) after 46 s of a 60 s recording: a new server on the same spool has the
    audio and the committed windows; the rest is appended and the close gives the whole
    transcript."""
    d = os.path.join(spool, "restart")
    path = audio("silero_test.wav")
    data, rate = pcm16(path)
    second = 2 * rate
    a = Server("--sessions-dir", d, "--vad", "off")
    try:
        sid = create(a, input_format="pcm16", sample_rate=rate, commit="windows")
        for c in chunks(data[:46 * second], second):
            append(a, sid, c)
        before = wait_until(lambda: (x := get(a, sid))["seconds_transcribed"] > 0 and x)
    finally:
        a.proc.kill()
        a.proc.wait()
    b = Server("--sessions-dir", d, "--vad", "off")
    try:
        assert any("1 session(s) reloaded, 0 skipped" in line for line in b.lines), b.lines
        after = get(b, sid)
        assert after["bytes_received"] == 46 * second
        assert after["text"] == before["text"]
        assert after["seconds_transcribed"] == before["seconds_transcribed"]
        for c in chunks(data[46 * second:], second):
            append(b, sid, c)
        status, body = close(b, sid)
        assert status == 200, body
        assert json.loads(body)["text"] == json.loads(offline(b, path))["text"]
    finally:
        assert b.terminate() == 0


def test_corrupt_spool_is_skipped(spool):
    d = os.path.join(spool, "corrupt")
    os.makedirs(os.path.join(d, "sess_0badc0ffee"))
    with open(os.path.join(d, "sess_0badc0ffee", "meta.json"), "w") as f:
        f.write('{"version": 1, "id": "sess_0bad')  # truncated
    os.makedirs(os.path.join(d, "sess_noaudio"))
    with open(os.path.join(d, "sess_noaudio", "meta.json"), "w") as f:
        f.write("[]")
    s = Server("--sessions-dir", d, "--vad", "off")
    try:
        time.sleep(0.2)
        assert any("0 session(s) reloaded, 2 skipped" in line for line in s.lines), s.lines
        status, data = call(s, "GET", f"{SESSIONS}/sess_0badc0ffee")
        assert status == 404 and error_of(data)["code"] == "session_not_found"
        sid = create(s)  # and it serves
        assert get(s, sid)["status"] == "open"
    finally:
        assert s.terminate() == 0


def test_limits_and_expiry(spool):
    d = os.path.join(spool, "limits")
    s = Server("--sessions-dir", d, "--vad", "off", "--max-sessions", "1", "--max-session-mb",
               "0.05", "--session-idle-timeout", "2")
    try:
        sid = create(s)
        status, data = call(s, "POST", SESSIONS, "{}", "application/json")
        assert status == 429 and error_of(data)["code"] == "too_many_sessions", data
        status, data = call(s, "POST", f"{SESSIONS}/{sid}/audio", b"x" * 60000)
        assert status == 413 and error_of(data)["code"] == "session_too_large", data
        assert append(s, sid, b"x" * 1000)["bytes_received"] == 1000  # nothing lost
        time.sleep(3.5)  # idle past the timeout: deleted with its spool
        status, data = call(s, "GET", f"{SESSIONS}/{sid}")
        assert status == 404 and error_of(data)["code"] == "session_not_found", data
        assert not os.path.exists(os.path.join(d, sid))
        create(s)  # its place is free
    finally:
        assert s.terminate() == 0


@pytest.mark.parametrize("fields,param", [
    ({"input_format": "opus"}, "input_format"),
    ({"input_format": "pcm16"}, "sample_rate"),
    ({"input_format": "f32", "sample_rate": 12.5}, "sample_rate"),
    ({"sample_rate": 16000}, "sample_rate"),
    ({"response_format": "xml"}, "response_format"),
    ({"temperature": 3}, "temperature"),
    ({"langauge": "en"}, "langauge"),
    ({"commit": "sentences"}, "commit"),
])
def test_bad_create_fields(server, fields, param):
    status, data = call(server, "POST", SESSIONS, json.dumps(fields), "application/json")
    assert status == 400, data
    assert error_of(data)["param"] == param


def test_bad_requests(server):
    status, data = call(server, "POST", SESSIONS, json.dumps({"model": "gpt-4o"}),
                        "application/json")
    assert status == 404 and error_of(data)["code"] == "model_not_found"
    status, data = call(server, "POST", SESSIONS, "{", "application/json")
    assert status == 400 and error_of(data)["code"] == "invalid_json"
    for method, path in [("GET", "/sess_doesnotexist"), ("POST", "/sess_nope/close"),
                         ("POST", "/sess_nope/audio"), ("DELETE", "/sess_nope"),
                         ("GET", "/..%2f..%2fetc")]:
        status, data = call(server, method, SESSIONS + path, b"abc" if "audio" in path else None)
        assert status == 404, (method, path, data)
        error_of(data)
    # A form body works too; then: an empty chunk, an empty close, a bad close format.
    body, ctype = multipart([("input_format", "f32"), ("sample_rate", "16000")])
    status, data = call(server, "POST", SESSIONS, body, ctype)
    assert status == 200, data
    sid = json.loads(data)["id"]
    status, data = call(server, "POST", f"{SESSIONS}/{sid}/audio", b"")
    assert status == 400 and error_of(data)
    status, data = close(server, sid)
    assert status == 400 and "no audio" in error_of(data)["message"]
    status, data = close(server, sid, "xml")
    assert status == 400 and error_of(data)["param"] == "response_format"
    status, data = call(server, "PUT", f"{SESSIONS}/{sid}")
    assert status == 405
    assert get(server, sid)["status"] == "open"  # the failed close kept it
    # Undecodable container bytes: the close says so; the session stays open.
    sid2 = create(server, filename="x.mp3")
    append(server, sid2, b"this is not audio" * 100)
    status, data = close(server, sid2)
    assert status == 400, data
    assert get(server, sid2)["status"] == "open"
    # DELETE aborts.
    status, data = call(server, "DELETE", f"{SESSIONS}/{sid}")
    assert status == 200 and json.loads(data)["deleted"] is True
    status, data = call(server, "GET", f"{SESSIONS}/{sid}")
    assert status == 404
    call(server, "DELETE", f"{SESSIONS}/{sid2}")

"""Raw HTTP against `parley serve`: bad requests get the right status and an OpenAI-shaped
error, and the server keeps serving; plus JSON/base64 bodies, CORS, and the operations
(queue bound, body limit, client disconnect, SIGTERM drain, per-request residency)."""
import base64
import json
import socket
import threading
import time

import pytest

from conftest import JFK, audio, error_of, multipart, normalized, wait_for

ENGLISH = open(audio("english.wav"), "rb").read()
TRANSCRIBE = "/v1/audio/transcriptions"


def still_serves(server):
    """The server answers a real transcription after whatever came before."""
    body, ctype = multipart([("model", "whisper-1"), ("response_format", "text")],
                            [("file", "english.wav", ENGLISH)])
    status, _, out = server.request("POST", TRANSCRIBE, body, {"Content-Type": ctype})
    assert status == 200, out
    assert normalized(out.decode()) == "one two three"


def post(server, body, ctype, path=TRANSCRIBE, headers=None):
    h = {"Content-Type": ctype}
    h.update(headers or {})
    return server.request("POST", path, body, h)


def raw_post(server, body, ctype, timeout=None, length=None):
    """Opens a socket and sends a transcription POST with BODY (Content-Length: LENGTH, by
    default len(BODY)) on it; returns the open socket."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.sendall((f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                  f"Content-Length: {len(body) if length is None else length}\r\n\r\n").encode()
                 + body)
    return sock


@pytest.mark.parametrize("case", [
    "no_closing_delimiter", "no_boundary", "no_disposition_name", "garbage"])
def test_malformed_multipart(server, case):
    good, ctype = multipart([("model", "whisper-1")], [("file", "a.wav", ENGLISH)])
    body = {
        "no_closing_delimiter": good[: len(good) // 2],
        "no_boundary": good,
        "no_disposition_name": b"--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--\r\n",
        "garbage": b"this is not multipart at all",
    }[case]
    if case == "no_boundary":
        ctype = "multipart/form-data"
    elif case == "no_disposition_name":
        ctype = "multipart/form-data; boundary=b"
    status, _, out = post(server, body, ctype)
    assert status == 400, out
    err = error_of(out)
    assert err["type"] == "invalid_request_error"
    assert "multipart" in err["message"]


def test_wrong_content_type(server):
    status, _, out = post(server, ENGLISH, "audio/wav")
    assert status == 415
    assert "multipart/form-data or application/json" in error_of(out)["message"]


def test_no_file(server):
    body, ctype = multipart([("model", "whisper-1")])
    status, _, out = post(server, body, ctype)
    assert status == 400
    err = error_of(out)
    assert err["param"] == "file" and err["code"] == "missing_file"


def test_no_model(server):
    body, ctype = multipart([], [("file", "a.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400 and error_of(out)["param"] == "model"


def test_unsupported_audio(server):
    body, ctype = multipart([("model", "whisper-1")], [("file", "notes.mp3", b"\x00\x01 not audio " * 100)])
    status, _, out = post(server, body, ctype)
    assert status == 400
    assert "[audio]" in error_of(out)["message"]
    still_serves(server)


def test_bad_json(server):
    status, _, out = post(server, b'{"model": "whisper-1", "file": ', "application/json")
    assert status == 400
    assert error_of(out)["code"] == "invalid_json"


@pytest.mark.parametrize("doc,param", [
    ({"model": "whisper-1", "file": "not an object"}, "file"),
    ({"model": "whisper-1", "file": {"data": "@@@not base64@@@"}}, "file"),
    ({"model": "whisper-1", "file": {"data": "AAAA"}, "temperature": "hot"}, "temperature"),
    ({"model": "whisper-1", "file": {"data": "AAAA"}, "temperature": 3}, "temperature"),
    ({"model": "whisper-1", "file": {"data": "AAAA"}, "response_format": "docx"}, "response_format"),
    ({"model": "whisper-1", "file": {"data": "AAAA"}, "stream": "maybe"}, "stream"),
    ({"model": "whisper-1", "file": {"data": "AAAA"}, "timestamp_granularities": ["segment"]},
     "timestamp_granularities"),
])
def test_bad_fields(server, doc, param):
    status, _, out = post(server, json.dumps(doc).encode(), "application/json")
    assert status == 400, out
    assert error_of(out)["param"] == param


def test_unknown_field(server):
    body, ctype = multipart([("model", "whisper-1"), ("frobnicate", "1")], [("file", "a.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400
    err = error_of(out)
    assert err["message"] == "Unrecognized request argument supplied: frobnicate"
    assert err["param"] == "frobnicate"
    # language is a transcription field, not a translation one
    body, ctype = multipart([("model", "whisper-1"), ("language", "en")], [("file", "a.wav", ENGLISH)])
    status, _, out = post(server, body, ctype, path="/v1/audio/translations")
    assert status == 400 and error_of(out)["param"] == "language"


@pytest.mark.parametrize("field,value", [("chunking_strategy", '{"type": "server_vad"}')])
def test_extras_not_supported_yet(server, field, value):
    body, ctype = multipart([("model", "whisper-1"), (field, value)], [("file", "a.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400
    err = error_of(out)
    assert "not supported yet" in err["message"] and err["code"] == "unsupported"


def test_extras_at_their_defaults_are_accepted(server):
    body, ctype = multipart([("model", "whisper-1"), ("beam_size", "1"), ("vad", "false"),
                             ("chunking_strategy", "auto"), ("response_format", "text")],
                            [("file", "english.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 200 and normalized(out.decode()) == "one two three"


def test_json_base64_body(server):
    doc = {"model": "whisper-1", "response_format": "verbose_json",
           "timestamp_granularities": ["segment"],
           "file": {"data": base64.b64encode(ENGLISH).decode(), "filename": "english.wav"}}
    status, headers, out = post(server, json.dumps(doc).encode(), "application/json")
    assert status == 200, out
    assert headers["Content-Type"] == "application/json"
    t = json.loads(out)
    assert t["task"] == "transcribe" and normalized(t["text"]) == "one two three"


def test_bad_key(make_server):
    s = make_server("--api-key", "k1", "--workers", "1")
    body, ctype = multipart([("model", "whisper-1")], [("file", "a.wav", ENGLISH)])
    for auth in [None, "Bearer nope", "k1"]:
        status, _, out = post(s, body, ctype, headers={"Authorization": auth} if auth else {})
        assert status == 401
        assert error_of(out)["code"] == "invalid_api_key"
    assert s.request("GET", "/health")[0] == 200  # health needs no key
    status, _, _ = s.request("GET", "/v1/models", headers={"Authorization": "Bearer k1"})
    assert status == 200


def test_unknown_route_and_method(server):
    status, _, out = server.request("GET", "/v1/nothing")
    assert status == 404 and error_of(out)["code"] == "unknown_url"
    status, headers, out = server.request("GET", TRANSCRIBE)
    assert status == 405 and headers["Allow"] == "POST"
    error_of(out)


def test_cors(server):
    status, headers, _ = server.request("OPTIONS", TRANSCRIBE, headers={
        "Origin": "http://example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert headers["Access-Control-Allow-Headers"] == "authorization, content-type"
    assert server.request("GET", "/health")[1]["Access-Control-Allow-Origin"] == "*"


def test_oversize_body(make_server):
    s = make_server("--max-body-mb", "1", "--workers", "1")
    # Announce 3 MB, send only the start: the limit is enforced from Content-Length.
    body, ctype = multipart([("model", "whisper-1")], [("file", "big.wav", b"\0" * (3 << 20))])
    sock = raw_post(s, body[:65536], ctype, timeout=30, length=len(body))
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    sock.close()
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert error_of(payload)["code"] == "request_too_large"
    # A body under the limit still goes through, on a fresh connection.
    still_serves(s)


def test_metrics(server):
    before = server.metrics().get('parley_errors_total{kind="bad_request"}', 0)
    assert post(server, b"{", "application/json")[0] == 400
    still_serves(server)
    m = server.metrics()
    assert m['parley_errors_total{kind="bad_request"}'] == before + 1
    assert m['parley_requests_total{route="/v1/audio/transcriptions",status="200"}'] >= 1
    assert m["parley_audio_seconds_total"] >= 2.7
    assert 0 < m["parley_real_time_factor"] < 10
    assert m["parley_queue_depth"] == 0
    assert m["parley_model_loaded"] == 1
    assert m["process_resident_memory_bytes"] > 50 << 20
    # Where the engine's time went: every part is counted, and they add up to no more than
    # the engine's whole compute time (/metrics prints 6 significant digits).
    parts = [m[f"parley_whisper_{k}_seconds_total"] for k in ("encode", "decode", "start")]
    assert all(p > 0 for p in parts), parts
    assert sum(parts) + m["parley_whisper_fallback_seconds_total"] <= \
        m["parley_compute_seconds_total"] * 1.0001 + 1e-3


def test_queue_full_429(make_server):
    s = make_server("--workers", "1", "--queue", "0")
    long_body, ctype = multipart([("model", "whisper-1")],
                                 [("file", "jfk.wav", open(audio("jfk.wav"), "rb").read())])
    results = []
    t = threading.Thread(target=lambda: results.append(post(s, long_body, ctype)))
    t.start()
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 1, 30)
    body, ctype2 = multipart([("model", "whisper-1")], [("file", "e.wav", ENGLISH)])
    status, _, out = post(s, body, ctype2)
    assert status == 429
    assert error_of(out)["code"] == "queue_full"
    t.join()
    assert results[0][0] == 200 and normalized(json.loads(results[0][2])["text"]) == JFK
    still_serves(s)


def test_disconnect_cancels(make_server):
    s = make_server("--workers", "1")
    # 60 s of audio: about half a minute of work on 2 cores, unless it is cancelled.
    body, ctype = multipart([("model", "whisper-1")],
                            [("file", "m.mp3", open(audio("multilingual.mp3"), "rb").read())])
    sock = raw_post(s, body, ctype)
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 1, 30)
    time.sleep(0.5)
    sock.close()
    t0 = time.time()
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 0, 10)
    assert time.time() - t0 < 10
    m = s.metrics()
    assert m['parley_errors_total{kind="cancelled"}'] == 1
    assert m["parley_audio_seconds_total"] == 0  # the job did not complete
    still_serves(s)


def test_sigterm_drains(make_server):
    s = make_server("--workers", "1")
    body, ctype = multipart([("model", "whisper-1")],
                            [("file", "jfk.wav", open(audio("jfk.wav"), "rb").read())])
    results = []
    t = threading.Thread(target=lambda: results.append(post(s, body, ctype)))
    t.start()
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 1, 30)
    assert s.terminate(timeout=60) == 0
    t.join()
    status, _, out = results[0]
    assert status == 200 and normalized(json.loads(out)["text"]) == JFK
    assert any("finishing admitted requests" in line for line in s.lines)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5)


def test_per_request_residency_frees_memory(make_server):
    s = make_server("--whisper-residency", "per-request", "--workers", "1")
    idle = s.rss_bytes()
    assert s.metrics()["parley_model_loaded"] == 0
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], s.rss_bytes())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    still_serves(s)
    stop.set()
    sampler.join()
    after = s.rss_bytes()
    print(f"RSS idle {idle >> 20} MiB, peak {peak[0] >> 20} MiB, after {after >> 20} MiB")
    assert peak[0] - idle > 100 << 20  # the f32 tiny.en and its session were in memory
    assert after - idle < 40 << 20    # and went back
    assert s.metrics()["parley_model_loaded"] == 0


def test_expect_100_continue(server):
    # curl sends "Expect: 100-continue" for uploads over 1 MB and waits for the 100 first.
    body, ctype = multipart([("model", "whisper-1"), ("response_format", "text")],
                            [("file", "english.wav", ENGLISH)])
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    sock.sendall((f"POST {TRANSCRIBE} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
                  f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode())
    sock.settimeout(5)
    assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    sock.settimeout(60)
    sock.sendall(body)
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += sock.recv(65536)
    head, _, payload = reply.partition(b"\r\n\r\n")
    length = int([h.split(b":")[1] for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length:")][0])
    while len(payload) < length:
        payload += sock.recv(65536)
    sock.close()
    assert head.startswith(b"HTTP/1.1 200"), head
    assert normalized(payload.decode()) == "one two three"


def test_short_request_not_blocked_by_long(make_server):
    # The concurrency policy: with a free worker, a short request runs beside a long one
    # and is answered while the long one is still being decoded.
    s = make_server("--workers", "2")
    body, ctype = multipart([("model", "whisper-1")],
                            [("file", "m.mp3", open(audio("multilingual.mp3"), "rb").read())])
    sock = raw_post(s, body, ctype)
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 1, 30)
    still_serves(s)
    m = s.metrics()
    assert m["parley_requests_running"] == 1  # the 60 s file is still being decoded
    assert m["parley_audio_seconds_total"] < 3  # only the short one has finished
    sock.close()  # cancels the long one
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 0, 10)


def test_temperature_above_zero_samples(server):
    # A temperature > 0 decodes at that temperature only (sampling, seeded): the same
    # request twice gives the same text.
    body, ctype = multipart([("model", "whisper-1"), ("temperature", "0.5"),
                             ("response_format", "text")], [("file", "english.wav", ENGLISH)])
    first = post(server, body, ctype)
    second = post(server, body, ctype)
    assert first[0] == 200 and second[0] == 200, first
    assert first[2] == second[2]
    for bad in ("1.5", "-0.1", "hot"):
        body, ctype = multipart([("model", "whisper-1"), ("temperature", bad)],
                                [("file", "english.wav", ENGLISH)])
        status, _, out = post(server, body, ctype)
        assert status == 400 and error_of(out)["param"] == "temperature"


def test_logprobs_need_json(server):
    body, ctype = multipart([("model", "whisper-1"), ("include[]", "logprobs"),
                             ("response_format", "srt")], [("file", "english.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400 and error_of(out)["param"] == "include"
    body, ctype = multipart([("model", "whisper-1"), ("include[]", "tokens")],
                            [("file", "english.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400 and error_of(out)["param"] == "include"


def test_beam_size(server):
    body, ctype = multipart([("model", "whisper-1"), ("beam_size", "5"),
                             ("response_format", "text")], [("file", "english.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 200 and normalized(out.decode()) == "one two three", out
    body, ctype = multipart([("model", "whisper-1"), ("beam_size", "0")],
                            [("file", "english.wav", ENGLISH)])
    status, _, out = post(server, body, ctype)
    assert status == 400 and error_of(out)["param"] == "beam_size"


def test_hotwords_reach_the_decoder(server):
    # tiny.en hears "comfy eye" in hotwords.mp3; with the hint it writes the product name.
    clip = open(audio("hotwords.mp3"), "rb").read()
    texts = []
    for fields in ([], [("hotwords", "ComfyUI")]):
        body, ctype = multipart([("model", "whisper-1"), ("response_format", "text"), *fields],
                                [("file", "hotwords.mp3", clip)])
        status, _, out = post(server, body, ctype)
        assert status == 200, out
        texts.append(out.decode())
    assert "ComfyUI" not in texts[0] and "ComfyUI" in texts[1], texts


def wav_bytes(samples):
    """16 kHz mono 16-bit PCM WAV of float samples in [-1, 1]."""
    import struct
    pcm = b"".join(struct.pack("<h", max(-32768, min(32767, int(round(x * 32767))))) for x in samples)
    return (b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" +
            struct.pack("<I", len(pcm)) + pcm)


def test_vad_gate_skips_whisper_on_silence(server):
    import random
    rng = random.Random(0)
    noise = wav_bytes([rng.gauss(0, 10 ** (-50 / 20)) for _ in range(16000 * 3)])  # -50 dBFS
    before = server.metrics()
    body, ctype = multipart([("model", "whisper-1")], [("file", "noise.wav", noise)])
    status, _, out = post(server, body, ctype)
    assert status == 200 and json.loads(out)["text"] == "", out
    after = server.metrics()
    assert after["parley_vad_skipped_total"] == before["parley_vad_skipped_total"] + 1
    assert after["parley_whisper_encoder_runs_total"] == before["parley_whisper_encoder_runs_total"]
    assert after["parley_whisper_decoder_runs_total"] == before["parley_whisper_decoder_runs_total"]
    # vad=false: the same audio goes to Whisper.
    body, ctype = multipart([("model", "whisper-1"), ("vad", "false")],
                            [("file", "noise.wav", noise)])
    status, _, out = post(server, body, ctype)
    assert status == 200, out
    assert server.metrics()["parley_whisper_encoder_runs_total"] > \
        after["parley_whisper_encoder_runs_total"]
    still_serves(server)


def test_stream_disconnect_cancels(make_server):
    s = make_server("--workers", "1")
    body, ctype = multipart([("model", "whisper-1"), ("stream", "true")],
                            [("file", "m.mp3", open(audio("multilingual.mp3"), "rb").read())])
    sock = raw_post(s, body, ctype, timeout=60)
    got = b""
    while b"transcript.text.delta" not in got:  # the first delta: decoding is under way
        chunk = sock.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/event-stream" in got
    sock.close()
    assert wait_for(lambda: s.metrics()["parley_requests_running"] == 0, 10)
    assert s.metrics()["parley_audio_seconds_total"] == 0  # it did not run to the end
    still_serves(s)

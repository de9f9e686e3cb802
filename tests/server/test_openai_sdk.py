"""The official openai Python SDK against `parley serve` with the real tiny.en: every
response format, streaming, translations, models, API keys."""
import openai
import pytest

from conftest import JFK, audio, normalized


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def open_audio(name):
    return open(audio(name), "rb")


def test_json_real_text(client):
    with open_audio("jfk.wav") as f:
        t = client.audio.transcriptions.create(model="whisper-1", file=f)
    assert normalized(t.text) == JFK
    assert t.usage.type == "duration"
    assert 10.9 < t.usage.seconds < 11.2


def test_verbose_json_segments(client):
    with open_audio("jfk.mp3") as f:
        t = client.audio.transcriptions.create(model="whisper-tiny.en", file=f,
                                               response_format="verbose_json",
                                               timestamp_granularities=["segment"])
    assert t.language == "en"
    assert 10.9 < t.duration < 11.2
    assert normalized(t.text) == JFK
    assert len(t.segments) >= 1
    assert t.segments[0].start == 0.0
    assert all(a.end <= b.start + 1e-9 for a, b in zip(t.segments, t.segments[1:]))
    assert t.segments[-1].end <= t.duration + 0.5
    assert normalized(" ".join(s.text for s in t.segments)) == JFK
    assert all(s.tokens for s in t.segments)
    assert t.usage.type == "duration" and t.usage.seconds == pytest.approx(t.duration, abs=1e-3)


def test_text_format(client):
    with open_audio("english.wav") as f:
        text = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="text")
    assert isinstance(text, str)
    assert normalized(text) == "one two three"
    assert text.endswith("\n") and not text.startswith(" ")


def test_srt_format(client):
    with open_audio("english.wav") as f:
        srt = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="srt")
    lines = srt.splitlines()
    assert lines[0] == "1"
    assert lines[1].startswith("00:00:00,000 --> 00:00:0")
    assert normalized(lines[2]) == "one two three"


def test_vtt_format(client):
    with open_audio("english.wav") as f:
        vtt = client.audio.transcriptions.create(model="whisper-1", file=f, response_format="vtt")
    lines = vtt.splitlines()
    assert lines[0] == "WEBVTT"
    assert lines[2].startswith("00:00.000 --> 00:0")
    assert normalized(lines[3]) == "one two three"


def test_prompt_reaches_the_model(client):
    # Without a prompt tiny.en writes "One, two, three." (test_text_format); the prompt
    # conditions the first window and changes how the numbers come out.
    with open_audio("english.wav") as f:
        t = client.audio.transcriptions.create(model="whisper-1", file=f, language="en",
                                               prompt="Counting:", temperature=0.0)
    assert normalized(t.text) == "1 2 3"


def test_streaming_deltas_then_done(client):
    with open_audio("jfk.wav") as f:
        stream = client.audio.transcriptions.create(model="whisper-1", file=f, stream=True)
        events = list(stream)
    types = [e.type for e in events]
    assert types[-1] == "transcript.text.done"
    assert types.count("transcript.text.done") == 1
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    # tiny.en cuts jfk.wav into two segments ("... can do for you" | "ask what ..."): the
    # first is sent when its closing timestamp pair is decoded, the second when the window
    # is done (docs/SERVER.md, streaming policy); never one event at the end.
    assert len(deltas) >= 2
    assert normalized(deltas[0]) == "and so my fellow americans ask not what your country can do for you"
    assert "".join(deltas) == events[-1].text
    assert normalized(events[-1].text) == JFK


def test_translation(client):
    with open_audio("jfk.wav") as f:
        t = client.audio.translations.create(model="whisper-1", file=f)
    assert normalized(t.text) == JFK


def test_translation_verbose(client):
    with open_audio("english.wav") as f:
        t = client.audio.translations.create(model="whisper-1", file=f,
                                             response_format="verbose_json")
    assert normalized(t.text) == "one two three"
    assert t.segments and t.duration > 2.5


def test_translation_srt(client):
    with open_audio("english.wav") as f:
        srt = client.audio.translations.create(model="whisper-1", file=f, response_format="srt")
    assert srt.splitlines()[0] == "1"


def test_logprobs(client):
    with open_audio("jfk.wav") as f:
        t = client.audio.transcriptions.create(model="whisper-1", file=f, include=["logprobs"])
    assert t.logprobs, t
    # The tokens spell the text; each has its bytes and a log-probability <= 0, and the
    # clearly spoken clip is mostly confident.
    assert "".join(lp.token for lp in t.logprobs) == t.text
    # (the SDK types bytes as floats)
    assert all(bytes(int(b) for b in lp.bytes).decode() == lp.token for lp in t.logprobs)
    assert all(lp.logprob <= 0 for lp in t.logprobs)
    assert sum(lp.logprob for lp in t.logprobs) / len(t.logprobs) > -1.0


def test_word_timestamps(client):
    with open_audio("jfk.wav") as f:
        t = client.audio.transcriptions.create(model="whisper-1", file=f,
                                               response_format="verbose_json",
                                               timestamp_granularities=["word"])
    words = t.words
    assert words, t
    # The words spell the transcript, in order, inside the audio, times non-decreasing.
    assert normalized(" ".join(w.word for w in words)) == normalized(t.text)
    assert all(0 <= w.start <= w.end <= t.duration + 0.01 for w in words)
    assert all(a.start <= b.start for a, b in zip(words, words[1:]))
    assert words[0].word.strip().lower().startswith("and") and words[-1].end > 9


def test_unknown_model(client):
    with open_audio("english.wav") as f:
        with pytest.raises(openai.NotFoundError) as e:
            client.audio.transcriptions.create(model="no-such-model", file=f)
    assert e.value.body["code"] == "model_not_found"


def test_models(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["whisper-tiny.en"]
    assert client.models.retrieve("whisper-1").id == "whisper-tiny.en"


def test_api_key(make_server):
    s = make_server("--api-key", "sekret", "--workers", "1")
    good = openai.OpenAI(base_url=s.url + "/v1", api_key="sekret", max_retries=0)
    bad = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.models.list()
    assert e.value.status_code == 401 and e.value.body["code"] == "invalid_api_key"
    with open_audio("english.wav") as f:
        with pytest.raises(openai.AuthenticationError):
            bad.audio.transcriptions.create(model="whisper-1", file=f)
    with open_audio("english.wav") as f:
        assert normalized(good.audio.transcriptions.create(model="whisper-1", file=f).text) == \
            "one two three"

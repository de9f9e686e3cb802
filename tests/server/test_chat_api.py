"""The chat routes (/v1/chat/completions, /v1/completions) through the official openai SDK
and raw HTTP, against `parley serve --model CHAT_DIR --whisper TINY_EN`.

The chat model is a small Qwen3 with seeded random weights (2 layers, hidden 64) and the
real Qwen3 tokenizer and chat template from the shared data (PARLEY_TEST_DATA/llm), made
here with numpy + safetensors; its text is noise, so the checks are about the API's
contract: shapes, streaming equal to the whole answer, seeds, stop strings, logprobs,
limits and errors. Meaningful answers are the trained model's tests (issue 24).
"""
import json
import os
import shutil
import socket
import time

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import DATA, MODEL, Server, error_of

openai = pytest.importorskip("openai")

CONTEXT = 256


def make_qwen3(folder, seed=0):
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": CONTEXT,
        "tie_word_embeddings": True, "attention_bias": False, "torch_dtype": "float32",
        "bos_token_id": 151643, "eos_token_id": 151645,
    }
    rng = np.random.default_rng(seed)

    def w(*shape, scale=0.08):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {"model.embed_tokens.weight": w(151936, 64, scale=0.5), "model.norm.weight": np.ones(64, np.float32)}
    for i in range(2):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(64, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(64, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(64, 64)
        t[p + "self_attn.k_proj.weight"] = w(32, 64)
        t[p + "self_attn.v_proj.weight"] = w(32, 64)
        t[p + "self_attn.o_proj.weight"] = w(64, 64)
        t[p + "self_attn.q_norm.weight"] = np.ones(16, np.float32)
        t[p + "self_attn.k_norm.weight"] = np.ones(16, np.float32)
        t[p + "mlp.gate_proj.weight"] = w(128, 64)
        t[p + "mlp.up_proj.weight"] = w(128, 64)
        t[p + "mlp.down_proj.weight"] = w(64, 128)
    os.makedirs(folder, exist_ok=True)
    save_file(t, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(DATA, "llm", name), folder)


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory):
    if not os.path.exists(os.path.join(DATA, "llm", "tokenizer.json")):
        pytest.skip("no Qwen3 tokenizer in the shared data")
    folder = str(tmp_path_factory.mktemp("chat") / "qwen3-test")
    make_qwen3(folder)
    s = Server("--whisper", MODEL, "--whisper-residency", "per-request", model=folder)
    s.model = "qwen3-test"
    yield s
    assert s.terminate() == 0


@pytest.fixture(scope="module")
def client(chat_server):
    return openai.OpenAI(base_url=chat_server.url + "/v1", api_key="unused", max_retries=0)


def chat(client, **kw):
    args = {"model": "qwen3-test", "messages": [{"role": "user", "content": "Hello there!"}],
            "max_tokens": 12, "temperature": 0}
    args.update(kw)
    return client.chat.completions.create(**args)


def test_models_lists_chat_and_whisper(client):
    ids = {m.id for m in client.models.list().data}
    assert "qwen3-test" in ids and os.path.basename(MODEL.rstrip("/")) in ids


def test_chat_completion_shape_and_usage(client):
    r = chat(client, extra_body={"ignore_eos": True})
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert len(r.choices) == 1 and r.choices[0].message.role == "assistant"
    assert isinstance(r.choices[0].message.content, str)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert r.usage.prompt_tokens > 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12


def test_prefix_cache_reports_cached_tokens(client):
    msgs = [{"role": "user", "content": "Tell me about the history of tea. " * 12}]
    first = chat(client, messages=msgs, max_tokens=4)
    again = chat(client, messages=msgs, max_tokens=4)
    assert again.choices[0].message.content == first.choices[0].message.content
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 16 <= cached < again.usage.prompt_tokens and cached % 16 == 0
    salted = chat(client, messages=msgs, max_tokens=4, extra_body={"cache_salt": "tenant-b"})
    assert salted.usage.prompt_tokens_details.cached_tokens == 0
    assert salted.choices[0].message.content == first.choices[0].message.content


def test_stream_equals_whole_answer(client):
    whole = chat(client, extra_body={"ignore_eos": True}).choices[0].message.content
    chunks = list(chat(client, stream=True, stream_options={"include_usage": True},
                       extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12


def test_seed_reproducible_and_choices_are_streams(client):
    kw = {"temperature": 1.0, "seed": 1234, "max_tokens": 16, "extra_body": {"ignore_eos": True}}
    a = chat(client, **kw).choices[0].message.content
    b = chat(client, **kw).choices[0].message.content
    assert a == b
    two = chat(client, n=2, **kw)
    assert [c.index for c in two.choices] == [0, 1]
    assert two.choices[0].message.content == a  # choice 0 is stream 0 of the same seed
    assert two.choices[1].message.content != a
    other = chat(client, **{**kw, "seed": 99}).choices[0].message.content
    assert other != a


def test_stop_string_cuts_before_it(client):
    kw = {"temperature": 1.0, "seed": 5, "max_tokens": 24, "extra_body": {"ignore_eos": True}}
    full = chat(client, **kw).choices[0].message.content
    assert len(full) > 8
    stop = full[4:7]
    r = chat(client, stop=[stop], **kw).choices[0]
    assert r.message.content == full[: full.index(stop)]
    assert r.finish_reason == "stop"


def test_logprobs(client):
    r = chat(client, logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True}).choices[0]
    content = r.logprobs.content
    assert len(content) == 12
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.logprob <= 0
        # greedy: the chosen token is the most likely one
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
        # bytes are the token's raw bytes; token is their text (a piece of a character
        # that is not valid UTF-8 on its own comes back replaced)
        assert entry.bytes and all(0 <= b < 256 for b in entry.bytes)
        try:
            assert bytes(entry.bytes).decode("utf-8") == entry.token
        except UnicodeDecodeError:
            assert "\ufffd" in entry.token


def test_completions_route(client):
    r = client.completions.create(model="qwen3-test", prompt="The capital of France is",
                                  max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 6
    chunks = list(client.completions.create(model="qwen3-test", prompt="The capital of France is",
                                            max_tokens=6, temperature=0, stream=True,
                                            extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
    echo = client.completions.create(model="qwen3-test", prompt="Hi", max_tokens=3, temperature=0,
                                     echo=True, logprobs=2, extra_body={"ignore_eos": True})
    assert echo.choices[0].text.startswith("Hi")
    assert len(echo.choices[0].logprobs.tokens) == 3


def test_context_length_exceeded(client):
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, max_tokens=CONTEXT + 1)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, messages=[{"role": "user", "content": "word " * (CONTEXT * 2)}])
    assert e.value.code == "context_length_exceeded"


def test_speculative_decoding_and_predicted_outputs(chat_server, client):
    # The answers are noise (random weights), so the checks are the contract: a request's
    # speculative method or prediction never changes its tokens, and the usage counts the
    # drafts (OpenAI's accepted / rejected prediction tokens).
    plain = chat(client, max_tokens=24, logprobs=True)
    text = plain.choices[0].message.content
    details = plain.usage.completion_tokens_details
    assert details.accepted_prediction_tokens == 0 and details.rejected_prediction_tokens == 0
    for method in ("ngram", "suffix", {"method": "ngram", "num_speculative_tokens": 6,
                                       "prompt_lookup_min": 1, "prompt_lookup_max": 3}):
        r = chat(client, max_tokens=24, logprobs=True, extra_body={"speculative": method})
        assert r.choices[0].message.content == text, method
        assert [t.logprob for t in r.choices[0].logprobs.content] == \
            [t.logprob for t in plain.choices[0].logprobs.content], method
    # The answer itself as the prediction: most of it comes through as accepted drafts.
    def accepted_total():
        return chat_server.metrics()["parley_chat_spec_accepted_tokens_total"]
    def settled():  # the engine publishes its counters at the end of an iteration
        before = accepted_total()
        time.sleep(0.2)
        return accepted_total() == before
    wait_idle(chat_server)
    assert wait_for(settled, 10)
    accepted0 = accepted_total()
    r = chat(client, max_tokens=24, prediction={"type": "content", "content": text})
    assert r.choices[0].message.content == text
    d = r.usage.completion_tokens_details
    assert d.accepted_prediction_tokens >= 12, d
    assert d.accepted_prediction_tokens + d.rejected_prediction_tokens >= 12, d
    # (The metrics are the engine's snapshot at the end of its iteration: they may trail the
    # answer by a moment.)
    assert wait_for(lambda: accepted_total() - accepted0 == d.accepted_prediction_tokens, 10), d
    # A prediction that has nothing to do with it: rejected drafts, the same answer.
    r = chat(client, max_tokens=24, stream=True, stream_options={"include_usage": True},
             prediction={"type": "content", "content": [{"type": "text", "text": "Hello there! " * 4}]})
    chunks = list(r)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_bad_requests(chat_server):
    def post(body, path="/v1/chat/completions"):
        return chat_server.request("POST", path, body=body,
                                   headers={"Content-Type": "application/json"})

    ok = {"model": "qwen3-test", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    cases = [
        (b"{not json", "body"),
        (json.dumps({**ok, "temperature": 3}), "temperature"),
        (json.dumps({**ok, "top_logprobs": 3}), "top_logprobs"),
        (json.dumps({**ok, "messages": []}), "messages"),
        (json.dumps({**ok, "messages": [{"role": "wizard", "content": "x"}]}), "messages[0].role"),
        (json.dumps({**ok, "n": 0}), "n"),
        (json.dumps({**ok, "logit_bias": {"999999999": 5}}), "logit_bias"),
        (json.dumps({**ok, "response_format": {"type": "xml"}}), "response_format"),
        (json.dumps({**ok, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "patternProperties": {"a": {}}}}}}),
         "response_format"),
        (json.dumps({**ok, "response_format": {"type": "json_object"}, "regex": "a"}), "regex"),
        (json.dumps({**ok, "grammar": "root ::= missing"}), "grammar"),
        (json.dumps({**ok, "guided_json": {"type": "strnig"}}), "guided_json"),
        (json.dumps({**ok, "tool_choice": "required"}), "tool_choice"),
        (json.dumps({**ok, "tool_choice": {"type": "function", "function": {"name": "f"}},
                     "tools": [{"type": "function", "function": {"name": "g"}}]}), "tool_choice"),
        (json.dumps({**ok, "speculative": "medusa"}), "speculative"),
        (json.dumps({**ok, "speculative": {"method": "ngram", "k": 3}}), "speculative.k"),
        (json.dumps({**ok, "speculative": {"method": "ngram", "prompt_lookup_min": 6,
                                            "prompt_lookup_max": 3}}), "speculative"),
        (json.dumps({**ok, "prediction": {"type": "content", "content": 5}}), "prediction.content"),
        (json.dumps({**ok, "prediction": "text"}), "prediction"),
        (json.dumps({**ok, "regex": "(a"}), "regex"),
        (json.dumps({**ok, "guided_regex": "(?=x)y"}), "guided_regex"),
        (b'{"model": "qwen3-test", "messages": [{"role": "user", "content": "\xff\xfe"}]}', "body"),
    ]
    for body, param in cases:
        status, _, resp = post(body)
        assert status == 400, (body, resp)
        assert error_of(resp)["param"] == param, (body, resp)
    status, _, resp = post(json.dumps({**ok, "model": "nope"}))
    assert status == 404 and error_of(resp)["code"] == "model_not_found"
    status, _, resp = post(json.dumps({"model": "qwen3-test", "prompt": ""}), "/v1/completions")
    assert status == 400
    # the server still answers after all of them
    status, _, resp = post(json.dumps(ok))
    assert status == 200 and json.loads(resp)["usage"]["completion_tokens"] >= 1


def test_client_disconnect_mid_stream(chat_server, client):
    body = json.dumps({"model": "qwen3-test", "messages": [{"role": "user", "content": "go"}],
                       "max_tokens": 200, "stream": True, "ignore_eos": True}).encode()
    sock = socket.create_connection(("127.0.0.1", chat_server.port), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b"data:" not in got:
        piece = sock.recv(4096)
        assert piece, got
        got += piece
    assert got.startswith(b"HTTP/1.1 200")
    gen0 = chat_server.metrics()["parley_chat_generated_tokens_total"]
    sock.close()
    t = time.time()
    r = chat(client, max_tokens=3)
    assert r.choices[0].message.content is not None
    assert time.time() - t < 30
    assert chat_server.proc.poll() is None
    # The server notices the closed socket at a write and cancels the request: it ends well
    # before its 200 tokens, and nothing of it runs on into the next test's counters.
    wait_idle(chat_server)
    generated = chat_server.metrics()["parley_chat_generated_tokens_total"] - gen0
    assert generated < 3 + 200, generated


def wait_for(cond, timeout, step=0.05):
    """Polls cond() until it is true (returns True) or timeout seconds pass (False)."""
    deadline = time.time() + timeout
    while not cond():
        if time.time() >= deadline:
            return False
        time.sleep(step)
    return True


def wait_idle(server, timeout=30):
    """Waits until the chat engine has no running or waiting request."""
    def idle():
        m = server.metrics()
        return m["parley_chat_requests_running"] == 0 and m["parley_chat_requests_waiting"] == 0
    assert wait_for(idle, timeout), server.metrics()


def complete(server, prompt, max_tokens, timeout=120):
    """A greedy /v1/completions of token ids that runs to max_tokens; the answer's JSON."""
    body = json.dumps({"model": "qwen3-test", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True}).encode()
    status, _, raw = server.request("POST", "/v1/completions", body,
                                    {"Content-Type": "application/json"}, timeout=timeout)
    assert status == 200, raw
    return json.loads(raw)


def test_concurrent_clients_share_iterations_with_the_same_answers(chat_server, client):
    """16 clients at once (the engine runs 8 at a time): each answer equals the same request
    made alone, and the engine's forwards are far fewer than the tokens it sampled."""
    from concurrent.futures import ThreadPoolExecutor
    reqs = [dict(messages=[{"role": "user", "content": "word " * (1 + 7 * i)}],
                 max_tokens=6 + i % 5, temperature=0.8 if i % 2 else 0, seed=100 + i,
                 extra_body={"ignore_eos": True}) for i in range(16)]
    alone = [chat(client, **r).choices[0].message.content for r in reqs[:4]]
    wait_idle(chat_server)
    fwd0 = chat_server.metrics()["parley_chat_forwards_total"]
    gen0 = chat_server.metrics()["parley_chat_generated_tokens_total"]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda r: chat(client, **r), reqs))
    for i, a in enumerate(alone):
        assert answers[i].choices[0].message.content == a, i
    for i, r in enumerate(answers):
        assert r.usage.completion_tokens == reqs[i]["max_tokens"], i
        assert r.choices[0].finish_reason == "length"
        t = r.model_extra["timings"]
        assert t["first_token_ms"] >= t["queue_ms"] >= 0 and t["per_token_ms"] > 0
    forwards = chat_server.metrics()["parley_chat_forwards_total"] - fwd0
    generated = chat_server.metrics()["parley_chat_generated_tokens_total"] - gen0
    assert generated == sum(r["max_tokens"] for r in reqs)
    assert forwards < generated / 3, (forwards, generated)
    assert chat_server.metrics()["parley_chat_requests_running"] == 0
    assert chat_server.metrics()["parley_chat_kv_blocks_used"] == 0
    assert chat_server.metrics()["parley_chat_time_to_first_token_seconds_count"] >= 16


def test_ids_past_the_tokenizer_add_no_text(client):
    """Qwen3's 151936 rows hold 151669 tokens: a sampled id without a token (forced here by
    logit_bias) adds no text, as the tokenizers crate's decode skips it, and is no error."""
    r = client.completions.create(model="qwen3-test", prompt="Hi", max_tokens=3, temperature=0,
                                  logit_bias={"151700": 100}, logprobs=1,
                                  extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3
    assert r.choices[0].text == ""
    assert r.choices[0].logprobs.tokens == ["", "", ""]
    stream = client.completions.create(model="qwen3-test", prompt="Hi", max_tokens=3,
                                       temperature=0, logit_bias={"151700": 100}, stream=True,
                                       extra_body={"ignore_eos": True})
    assert [c.choices[0].finish_reason for c in stream if c.choices][-1] == "length"


def test_kill_9_while_the_ssd_tier_writes_then_a_restart_serves_correctly(tmp_path):
    """A one-row pool (16 blocks) under 12 concurrent clients evicts blocks to the SSD tier
    all the time; SIGKILL lands while it writes. A new server on the same folder removes the
    half-written temps, skips a truncated and a garbage block file, and answers as a server
    without the folder does, reusing blocks from the files."""
    import threading
    folder = str(tmp_path / "qwen3-test")
    make_qwen3(folder)
    kv = tmp_path / "kv"
    base = ["--whisper", MODEL, "--whisper-residency", "per-request", "--max-running", "4"]

    def prompt(i):
        return [(977 * i + 31 * k) % 150000 for k in range(60)]

    fresh = Server(*base, model=folder)
    want = {i: complete(fresh, prompt(i), 6)["choices"][0]["text"] for i in range(3)}
    assert fresh.terminate() == 0

    s = Server(*base, "--kv-cache-dir", str(kv), "--kv-cache-gb", "0.000001", model=folder)
    stop = threading.Event()

    def load(c):
        i = c
        while not stop.is_set():
            try:
                complete(s, prompt(i % 40), 20)
            except Exception:  # noqa: BLE001 - the server is killed under it
                return
            i += 12

    threads = [threading.Thread(target=load, args=(c,)) for c in range(12)]
    for t in threads:
        t.start()
    wait_for(lambda: s.metrics().get("parley_chat_kv_ssd_writes_total", 0) >= 40, 60)
    s.proc.kill()  # SIGKILL: no shutdown, no persist
    s.proc.wait()
    stop.set()
    for t in threads:
        t.join()
    blocks = sorted(kv.glob("*.kvb"))
    assert len(blocks) >= 10
    (kv / "x.kvb.tmp999_0").write_bytes(b"half a block")  # as a kill mid-write leaves it
    blocks[0].write_bytes(blocks[0].read_bytes()[:100])   # truncated
    blocks[1].write_bytes(b"\0" * blocks[1].stat().st_size)  # garbage

    again = Server(*base, "--kv-cache-dir", str(kv), model=folder)
    try:
        m = again.metrics()
        assert m["parley_chat_kv_ssd_corrupt_total"] == 2
        assert m["parley_chat_kv_ssd_stale_temps_total"] >= 1
        assert not list(kv.glob("*.tmp*"))
        for i in range(3):
            assert complete(again, prompt(i), 6)["choices"][0]["text"] == want[i], i
        assert again.metrics()["parley_chat_kv_ssd_hits_total"] > 0
    finally:
        assert again.terminate() == 0


def test_sigterm_drains_running_requests_and_persists_the_prefix_cache(tmp_path):
    """SIGTERM while six requests run: each still gets every token, the server exits 0 after
    writing its cached blocks to --kv-cache-dir, and a restarted server serves the same
    prompt's prefix from those files."""
    import signal
    import threading
    folder = str(tmp_path / "qwen3-test")
    make_qwen3(folder)
    kv = tmp_path / "kv"
    args = ["--whisper", MODEL, "--whisper-residency", "per-request", "--kv-cache-dir", str(kv)]
    prompts = [[(131 * k + 7 + 1000 * i) % 150000 for k in range(70)] for i in range(6)]
    s = Server(*args, model=folder)
    got = {}

    def long_request(i):
        got[i] = complete(s, prompts[i], 150)

    threads = [threading.Thread(target=long_request, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    # Every request accepted (a request not yet connected at SIGTERM would be refused).
    def accepted():
        m = s.metrics()
        return sum(m.get("parley_chat_requests_" + k, 0) for k in ("running", "waiting", "total"))
    wait_for(lambda: accepted() >= 6, 30, step=0.005)
    s.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(120)
    for i in range(6):
        assert got[i]["usage"]["completion_tokens"] == 150, i  # complete() asserted the 200
    assert s.proc.wait(60) == 0
    assert len(list(kv.glob("*.kvb"))) >= 6 * 4  # every prompt's 4 full blocks at least

    again = Server(*args, model=folder)
    try:
        usage = complete(again, prompts[0], 2)["usage"]
        assert usage["prompt_tokens_details"]["cached_tokens"] == 64
        assert again.metrics()["parley_chat_kv_ssd_hits_total"] >= 4
    finally:
        assert again.terminate() == 0


# ---- Tool calls, with the trained model (models/parley-chat-target) -----------------------
# It learned Qwen3's hermes format (<tool_call>{"name": ..., "arguments": {...}}</tool_call>)
# from the training mix, which tools/train/data.py's get_time tool comes from.
TRAINED = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "models", "parley-chat-target")
GET_TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@pytest.fixture(scope="module")
def trained_client():
    s = Server("--whisper", MODEL, "--whisper-residency", "per-request", model=TRAINED)
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    assert s.terminate() == 0


def ask_time(client, **kw):
    return client.chat.completions.create(
        model="parley-chat-target", messages=[{"role": "user", "content": "What time is it in Denver?"}],
        tools=[GET_TIME], temperature=0, max_tokens=48,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}}, **kw)


def test_tool_calls_are_parsed_whole_and_streamed(trained_client):
    r = ask_time(trained_client)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_time"
    assert json.loads(call.function.arguments) == {"city": "Denver"}
    # Streamed: the same call in one tool_calls delta, no text, the same finish reason.
    chunks = list(ask_time(trained_client, stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].function.name == "get_time"
    assert json.loads(calls[0].function.arguments) == {"city": "Denver"}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # tool_choice none: no tools shown, no parsing; without tools the answer is text.
    r = trained_client.chat.completions.create(
        model="parley-chat-target", messages=[{"role": "user", "content": "What is 123 + 456?"}],
        temperature=0, max_tokens=16, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].message.content == "579" and not r.choices[0].message.tool_calls
    # A follow-up turn with the call and its result: the model answers in text.
    follow = trained_client.chat.completions.create(
        model="parley-chat-target", temperature=0, max_tokens=48, tools=[GET_TIME],
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        messages=[{"role": "user", "content": "What time is it in Denver?"},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"id": call.id, "type": "function",
                       "function": {"name": "get_time", "arguments": call.function.arguments}}]},
                  {"role": "tool", "tool_call_id": call.id, "content": "{\"time\": \"14:05\"}"}])
    assert follow.choices[0].finish_reason == "stop"
    assert "14:05" in follow.choices[0].message.content


def test_regex_constrains_the_answer(trained_client):
    import re
    kw = {"chat_template_kwargs": {"enable_thinking": False}}
    msgs = [{"role": "user", "content": "What is 482 + 317?"}]
    for pattern in (r"The answer is [0-9]{3}\.", r"(yes|no)", r"[0-9]+"):
        r = trained_client.chat.completions.create(
            model="parley-chat-target", messages=msgs, temperature=0, max_tokens=32,
            extra_body={**kw, "regex": pattern})
        assert re.fullmatch(pattern, r.choices[0].message.content), (pattern, r.choices[0].message.content)
        assert r.choices[0].finish_reason == "stop"
    # Streamed and sampled, vLLM's field name: the pieces join into a match.
    chunks = list(trained_client.chat.completions.create(
        model="parley-chat-target", messages=msgs, temperature=1.0, seed=3, max_tokens=32, stream=True,
        extra_body={**kw, "guided_regex": r"[0-9]{2,4}!"}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert re.fullmatch(r"[0-9]{2,4}!", text), text


def test_response_format_json_schema_and_json_object(trained_client):
    kw = {"chat_template_kwargs": {"enable_thinking": False}}
    # The trained model's JSON task (tools/train/data.py ep_json), then a tighter schema it
    # has to bend to.
    task = {"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"},
                                             "pages": {"type": "integer"}},
            "required": ["title", "year", "pages"], "additionalProperties": False}
    msgs = [{"role": "user", "content": "Fill in a JSON object that matches this schema:\n%s\n\n"
             "A book: the year is 1952; the pages is 310; the title is The Quiet Harbor.\n"
             "Answer with the JSON only." % json.dumps(task)}]
    schema = {"type": "object", "additionalProperties": False, "required": ["title", "year"],
              "properties": {"title": {"type": "string", "maxLength": 12},
                             "year": {"type": "integer", "minimum": 2000, "maximum": 2030}}}
    for temperature in (0, 1.0):
        r = trained_client.chat.completions.create(
            model="parley-chat-target", messages=msgs, temperature=temperature, seed=5,
            max_tokens=96, extra_body=kw,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "book", "strict": True, "schema": schema}})
        doc = json.loads(r.choices[0].message.content)
        assert list(doc) == ["title", "year"], doc
        assert isinstance(doc["title"], str) and len(doc["title"]) <= 12
        assert isinstance(doc["year"], int) and 2000 <= doc["year"] <= 2030
        assert r.choices[0].finish_reason == "stop"
    # json_object, streamed: the pieces join into one JSON object (the model's own answer).
    chunks = list(trained_client.chat.completions.create(
        model="parley-chat-target", messages=msgs, temperature=0, max_tokens=96, stream=True,
        extra_body=kw, response_format={"type": "json_object"}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(text) == {"title": "The Quiet Harbor", "year": 1952, "pages": 310}, text
    # A GBNF grammar (the `grammar` extension).
    r = trained_client.chat.completions.create(
        model="parley-chat-target", messages=[{"role": "user", "content": "Is seven larger than three?"}],
        temperature=0, max_tokens=16,
        extra_body={**kw, "grammar": 'root ::= ("yes" | "no") "."'})
    assert r.choices[0].message.content in ("yes.", "no."), r.choices[0].message.content


def test_tool_choice_required_and_named(trained_client):
    kw = {"chat_template_kwargs": {"enable_thinking": False}}
    add = {"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": False}}}
    # A question the model answers in text under auto: required forces a call.
    msgs = [{"role": "user", "content": "What is 123 + 456?"}]
    auto = trained_client.chat.completions.create(
        model="parley-chat-target", messages=msgs, tools=[GET_TIME, add], temperature=0,
        max_tokens=64, extra_body=kw)
    assert auto.choices[0].finish_reason == "stop" and auto.choices[0].message.content == "579"
    for choice in ("required", {"type": "function", "function": {"name": "add"}}):
        r = trained_client.chat.completions.create(
            model="parley-chat-target", messages=msgs, tools=[GET_TIME, add], tool_choice=choice,
            parallel_tool_calls=False, temperature=0, max_tokens=96, extra_body=kw)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c
        [call] = c.message.tool_calls
        args = json.loads(call.function.arguments)
        if choice == "required":
            assert call.function.name in ("get_time", "add")
        else:
            assert call.function.name == "add"
        if call.function.name == "add":
            assert set(args) == {"a", "b"} and all(isinstance(v, int) for v in args.values()), args
        else:
            assert isinstance(args.get("city"), str), args
    # Streamed, a named function: one tool_calls delta.
    chunks = list(trained_client.chat.completions.create(
        model="parley-chat-target", messages=[{"role": "user", "content": "What time is it in Paris?"}],
        tools=[GET_TIME, add], tool_choice={"type": "function", "function": {"name": "get_time"}},
        temperature=0, max_tokens=64, stream=True, extra_body=kw))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) >= 1 and calls[0].function.name == "get_time", calls
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

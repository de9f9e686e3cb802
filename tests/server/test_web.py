"""The web page at GET / in Debian's Chromium driven by playwright (no browser download:
executable_path is the system chromium), with a fake microphone that plays jfk.wav
(--use-file-for-fake-audio-capture, %noloop: silence after the clip).

Transcription-only page (Whisper only): holding the mic button while the clip plays shows
interim deltas, and on release the transcript area gets the JFK words. Chat page
(models/parley-chat-target + tiny.en): the words land in the composer, and sending a
message streams an answer into the log (several updates of the bubble). With --api-key the
page asks for the key and the WebSocket carries it as an `openai-insecure-api-key.KEY`
subprotocol. Every test asserts that the page asked nothing of any other origin (offline)
and leaves a screenshot in PARLEY_TEST_OUTPUT (printed).

Environment beside conftest's: PARLEY_CHROMIUM (default /usr/bin/chromium),
PARLEY_TEST_OUTPUT (screenshots; default build/test-output/web).
"""
import os
import time

import pytest

from conftest import JFK, MODEL, Server, audio, normalized

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")
OUTPUT = os.environ.get("PARLEY_TEST_OUTPUT", "build/test-output/web")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAT_MODEL = os.path.join(ROOT, "models", "parley-chat-target")
CLIP_SECONDS = 11.0  # jfk.wav
HOLD = CLIP_SECONDS + 0.4

if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    # Chromium's fake capture reads a WAV (16-bit PCM, any rate: jfk.wav is 16 kHz mono) and
    # resamples it to the device's rate; %noloop plays it once from each capture's start.
    # The path without '..' (Chromium refuses a capture file whose path has one).
    wav = os.path.realpath(audio("jfk.wav"))
    args = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}%noloop"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield b
        b.close()


class Page:
    """A fresh page on `server`'s origin that records every URL it asks for."""

    def __init__(self, browser, server, name):
        self.server, self.name = server, name
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.urls = []
        self.console = []
        self.page.on("request", lambda r: self.urls.append(r.url))
        self.page.on("websocket", lambda ws: self.urls.append(ws.url))
        self.page.on("console", lambda m: self.console.append(m.text))
        self.page.goto(server.url + "/")

    def hold_mic(self, seconds):
        """Holds the mic button down for `seconds` from when audio flows (the fake capture
        starts the clip when the page opens the microphone); the interim texts seen."""
        box = self.page.locator("#mic").bounding_box()
        self.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        self.page.mouse.down()
        self.page.wait_for_selector("#mic[data-capturing=true]", timeout=10000)
        interim, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            text = self.page.inner_text("#interim")
            if text and (not interim or interim[-1] != text):
                interim.append(text)
            time.sleep(0.2)
        self.page.mouse.up()
        return interim

    def finish(self):
        os.makedirs(OUTPUT, exist_ok=True)
        path = os.path.abspath(os.path.join(OUTPUT, self.name + ".png"))
        self.page.screenshot(path=path, full_page=True)
        print(f"screenshot: {path}")
        # Offline: nothing but the server's own origin (and the worklet's blob: URL).
        host = f"127.0.0.1:{self.server.port}"
        others = [u for u in self.urls
                  if not (u.startswith(f"http://{host}/") or u.startswith(f"ws://{host}/")
                          or u.startswith("blob:http://" + host))]
        assert not others, others
        assert f"http://{host}/" in self.urls, self.urls  # the listener saw the page itself
        self.context.close()


def wait_value(page, selector, timeout_s=30):
    page.wait_for_function(
        f"document.querySelector('{selector}').value.length > 0 || "
        "document.getElementById('status').className === 'error'", timeout=timeout_s * 1000)
    assert page.get_attribute("#status", "class") != "error", page.inner_text("#status")
    return page.input_value(selector)


def test_transcription_page(browser, make_server):
    server = make_server()
    p = Page(browser, server, "transcription")
    page = p.page
    page.wait_for_selector("body[data-mode=transcription]")
    assert page.is_hidden("#composer") and page.is_visible("#transcript")
    interim = p.hold_mic(HOLD)
    text = wait_value(page, "#transcript")
    assert JFK in normalized(text), text
    # Interim deltas were shown while the button was held, and grew.
    assert interim and normalized(interim[0]) and JFK.startswith(normalized(interim[0])[:10]), interim
    assert page.inner_text("#interim") == ""
    p.finish()


def test_chat_page(browser, make_server):
    server = make_server("--whisper", MODEL, "--context", "512", model=CHAT_MODEL)
    p = Page(browser, server, "chat")
    page = p.page
    page.wait_for_selector("body[data-mode=chat]")
    assert page.is_visible("#composer") and page.is_hidden("#transcript")
    p.hold_mic(HOLD)
    text = wait_value(page, "#input")
    assert JFK in normalized(text), text

    # Send a short message: the answer streams into one bubble, delta by delta (the page
    # counts the SSE chunks that carried content; the think block and "42" are several).
    page.fill("#input", "What is 12 + 30?")
    page.click("#send")
    page.wait_for_selector(".msg.assistant[data-done=true], .msg.assistant.error", timeout=60000)
    answer = page.inner_text(".msg.assistant")
    assert "error" not in page.get_attribute(".msg.assistant", "class"), answer
    assert answer.strip(), "empty answer"
    assert int(page.get_attribute(".msg.assistant", "data-deltas")) >= 2, "the answer did not stream"
    assert "<think>" not in answer  # the empty think block is not shown
    assert page.inner_text(".msg.user") == "What is 12 + 30?"
    p.finish()


def test_api_key_page(browser, make_server):
    server = make_server("--api-key", "sk-web-test")
    p = Page(browser, server, "api_key")
    page = p.page
    page.wait_for_selector("#keybox:not([hidden])")
    page.fill("#key", "sk-web-test")
    page.dispatch_event("#key", "change")
    page.wait_for_selector("body[data-mode=transcription]")
    # The first ~3 s of the clip: "And so, my fellow Americans".
    p.hold_mic(3.2)
    text = wait_value(page, "#transcript")
    assert "fellow americans" in normalized(text), text
    p.finish()


def test_page_is_self_contained(make_server):
    """The served HTML names no other origin (no external script, style, font or image)."""
    server = make_server()
    status, headers, body = server.request("GET", "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    html = body.decode()
    assert "<html" in html and "/v1/realtime?intent=transcription" in html
    for needle in ("http://", "https://", "//fonts", "<link", "src=", "@import", "url("):
        assert needle not in html, needle
    status, _, same = server.request("GET", "/index.html")
    assert status == 200 and same == body
    status, _, _ = server.request("POST", "/")
    assert status == 405

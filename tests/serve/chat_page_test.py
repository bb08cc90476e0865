#!/usr/bin/env python3
"""The chat page (GET /) in a real browser against a real `sinklm serve` on loopback (label e2e).

Headless Chromium driven by selenium through chromedriver (Debian's chromium and chromium-driver, selenium
from PyPI: scripts/test.sh installs them). Exit 77 (skipped), saying what is missing, without them.

The model is the tiny byte-vocabulary model of the other serve tests with its weights set so that its output
is known: its blocks add nothing to the residual stream (attention and MLP output projections are zero), so
each next token depends on the current one only, and the unembedding maps ":" (the end of every chat prompt,
"...Assistant:") to "<" and then cycles through "<script>". Every reply is therefore "<script><script>...",
markup the page must show as text, one token per character, at any temperature.

The page is opened with the server's API key entered in its settings; a message with markup is sent with
Enter and its reply arrives in pieces while the session's stream grows past the window and its K/V entries
stop at the window; Shift+Enter makes a new line; the server is SIGKILLed and restarted on the same port and
session directory, and after a reload the page shows the same conversation and stream length; a long reply is
stopped; the session is deleted and a new one made. The page must raise no Content-Security-Policy violation.
A screenshot of the page goes to $SINKLM_TEST_OUTPUT (default: test-output/ under the working directory)."""
import hashlib
import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request

from sinklm_test import check, failures, skip


def find_browser():
    """(chromium, chromedriver) paths, or exits 77 naming what is missing."""
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package (pip)")
    chromium = next(filter(None, map(shutil.which, ["chromium", "chromium-browser", "google-chrome"])), None)
    driver = shutil.which("chromedriver")
    if not chromium:
        missing.append("a Chromium browser (apt: chromium)")
    if not driver:
        missing.append("chromedriver (apt: chromium-driver)")
    if missing:
        skip("no browser to test the chat page with: missing " + ", ".join(missing) + " (scripts/test.sh installs them)")
    return chromium, driver


CHROMIUM, CHROMEDRIVER = find_browser()

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import serve_support  # noqa: E402
from serve_support import with_byte_model  # noqa: E402

KEY = "chat-page-key"
WINDOW = 128         # 1 sink token + 127 recent; the first prompt and reply piece fit, the first reply does not
REPLY_TOKENS = 400   # one character each: long enough to arrive in many pieces
CYCLE = "<script>"
MARKUP = "<img src=x onerror=alert(1)> & <b>bold</b>"  # 43 characters: the first prompt stays under the window


# ---- the model --------------------------------------------------------------------------------------------

def make_markup_model(checkpoint):
    """Rewrites the checkpoint's weights as described above and its manifest to match."""
    from safetensors.numpy import load_file, save_file
    path = os.path.join(checkpoint, "model.safetensors")
    tensors = load_file(path)
    for name, tensor in tensors.items():
        if ".attention.dense." in name or ".mlp.dense_4h_to_h." in name:
            tensor[...] = 0  # the blocks add nothing: the residual stream is the token's embedding
    tensors["gpt_neox.final_layer_norm.weight"][...] = 1
    tensors["gpt_neox.final_layer_norm.bias"][...] = 0
    embed, unembed = tensors["gpt_neox.embed_in.weight"], tensors["embed_out.weight"]
    unembed[...] = 0
    chain = ":" + CYCLE + "<"  # ":" -> "<" -> "s" -> ... -> ">" -> "<"
    dims = {c: i for i, c in enumerate(dict.fromkeys(chain))}
    for current, following in zip(chain, chain[1:]):
        embed[ord(current)] = 0
        embed[ord(current), dims[current]] = 1
        unembed[ord(following), dims[current]] = 4  # a logit about 45 above every other token's
    save_file(tensors, path)
    manifest_path = os.path.join(checkpoint, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    with open(path, "rb") as f:
        manifest["files"]["model.safetensors"] = {"bytes": os.path.getsize(path),
                                                  "sha256": hashlib.sha256(f.read()).hexdigest()}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
    return checkpoint


# ---- the server -------------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(checkpoint, sessions, port, log):
    """The same port every time: the page's origin, and with it its stored session and key, depend on it."""
    proc, _ = serve_support.start_server(checkpoint, "--window", str(WINDOW), "--api-key", KEY, "--session-dir", sessions,
                                         "--threads", "1", "--max-tokens-limit", "4096", port=port, stderr=log)
    return proc


def get(base, path, key=KEY):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


# ---- the browser ------------------------------------------------------------------------------------------

def open_browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,800",
                "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", f"--user-data-dir={profile}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # The page itself 1200x800 (--window-size counts the window's frame), the size of the screenshot in docs.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 800, "deviceScaleFactor": 1,
                                                                  "mobile": False})
    return driver


def wait(driver, condition, what, timeout=60):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception:
        reply = last_reply(driver)
        check(False, f"timed out waiting for {what} (status {text_of(driver, 'status')!r}, last reply "
              + (f"{reply.get_attribute('data-state')!r}: {reply.find_element(By.CLASS_NAME, 'meta').text!r})" if reply else "none)"))
        raise


# Records, at every change of the page, the last reply's length and the session's numbers as shown.
RECORD = """
window.samples = [];
const number = (id) => Number(document.getElementById(id).textContent);
new MutationObserver(() => {
  const replies = document.querySelectorAll('#transcript .msg.assistant .body');
  const reply = replies.length ? replies[replies.length - 1].textContent : '';
  window.samples.push({reply: reply.length, stream: number('stat-stream'), kv: number('stat-kv')});
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""
TRANSCRIPT = """
return [...document.querySelectorAll('#transcript .msg')].map(
  (m) => [m.classList[1], m.querySelector('.body').textContent, m.dataset.state || '']);
"""


def last_reply(driver):
    replies = driver.find_elements(By.CSS_SELECTOR, "#transcript .msg.assistant")
    return replies[-1] if replies else None


def reply_state(driver):
    reply = last_reply(driver)
    return reply.get_attribute("data-state") if reply else None


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def set_field(driver, element_id, value):
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(value)


def send_and_wait(driver, text):
    """Types `text`, presses Enter, waits for the reply to finish; returns the samples recorded meanwhile."""
    driver.execute_script(RECORD)
    driver.find_element(By.ID, "message").send_keys(text, Keys.ENTER)
    wait(driver, lambda d: reply_state(d) in ("done", "error", "stopped"), "the reply to finish")
    wait(driver, lambda d: d.find_element(By.ID, "send").is_enabled(), "the page to be idle again")
    return driver.execute_script("return window.samples")


# ---- the checks -------------------------------------------------------------------------------------------

def sign_in(driver, base):
    driver.get(base + "/")
    wait(driver, lambda d: "API key" in text_of(d, "status"), "the page to ask for the API key")
    check(True, "without the key the page asks for it (the server answered 401)")
    set_field(driver, "api-key", KEY)
    set_field(driver, "max-tokens", str(REPLY_TOKENS))
    driver.find_element(By.ID, "save-settings").click()
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true", "the model card")
    card = text_of(driver, "card")
    check("tiny-bytes" in card and "sink_window" in card and "128 = 1 sink + 127 recent" in card
          and "token (1 sink token)" in card, f"the model card: checkpoint, sink mode, cache policy, window: {card!r}")
    wait(driver, lambda d: "generated tokens" in text_of(d, "metrics"), "the /metrics highlights")
    check(KEY not in driver.current_url and driver.current_url == base + "/", "no secret in the page's URL")


def first_reply_streams_past_the_window(driver):
    samples = send_and_wait(driver, MARKUP)
    reply = last_reply(driver)
    body = reply.find_element(By.CLASS_NAME, "body").text
    check(reply.get_attribute("data-state") == "done" and body == (CYCLE * REPLY_TOKENS)[:REPLY_TOKENS],
          f"the reply is the model's markup, {REPLY_TOKENS} characters, shown as text: {body[:40]!r}...")
    pieces = sorted({s["reply"] for s in samples if 0 < s["reply"] < REPLY_TOKENS})
    check(len(pieces) >= 3, f"the reply arrived in pieces ({len(pieces)} partial lengths seen: {pieces[:8]}...)")
    # Where the stream began is the final length less the reply (one token per character): the first update
    # the page shows may already hold a hundred reply tokens on a fast machine, so it cannot tell.
    start = int(text_of(driver, "stat-stream")) - REPLY_TOKENS
    streaming = [s["stream"] for s in samples if s["stream"] > 0 and s["reply"] < REPLY_TOKENS]
    check(streaming and start < WINDOW < max(streaming),
          f"the stream length grew past the window while it streamed ({start} -> {max(streaming, default=0)})")
    check(all(s["kv"] == min(s["stream"], WINDOW) for s in samples if s["stream"] > 0),
          "K/V entries followed min(stream length, window) at every update: they never passed the window")
    check(int(text_of(driver, "stat-kv")) == WINDOW and int(text_of(driver, "stat-stream")) > WINDOW,
          f"after the reply: stream {text_of(driver, 'stat-stream')}, K/V entries {text_of(driver, 'stat-kv')}")
    meta = reply.find_element(By.CLASS_NAME, "meta").text
    check(f"{REPLY_TOKENS} tokens" in meta and "tokens/s" in meta and "first token" in meta,
          f"beside the reply: tokens, tokens/s, time to first token: {meta!r}")


def markup_is_text(driver, what):
    transcript = driver.find_element(By.ID, "transcript")
    elements = driver.execute_script(
        "return [...arguments[0].querySelectorAll('.body *')].map((e) => e.tagName)", transcript)
    users = [m.find_element(By.CLASS_NAME, "body").text for m in driver.find_elements(By.CSS_SELECTOR, ".msg.user")]
    check(not elements and MARKUP in users and CYCLE in transcript.text,
          f"{what}: markup in messages and replies shows as text (elements made from it: {elements})")
    try:
        driver.switch_to.alert
        check(False, f"{what}: no script ran (an alert is open)")
    except NoAlertPresentException:
        pass


def shift_enter_is_a_new_line(driver):
    box = driver.find_element(By.ID, "message")
    box.send_keys("line one")
    ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    box.send_keys("line two")
    check(box.get_attribute("value") == "line one\nline two" and reply_state(driver) == "done",
          "Shift+Enter makes a new line and sends nothing")
    driver.execute_script(RECORD)
    box.send_keys(Keys.ENTER)
    wait(driver, lambda d: reply_state(d) == "done" and d.find_element(By.ID, "send").is_enabled(), "the second reply")
    users = driver.find_elements(By.CSS_SELECTOR, ".msg.user .body")
    check(users[-1].text == "line one\nline two", "Enter sent the two-line message")


def survives_sigkill(driver, base, restart):
    before = driver.execute_script(TRANSCRIPT)
    stream, kv = text_of(driver, "stat-stream"), text_of(driver, "stat-kv")
    session = driver.execute_script("return localStorage.getItem('sinklm.session')")
    code, body = get(base, f"/v1/sessions/{session}")
    check(code == 200 and str(json.loads(body)["tokens"]) == stream, f"the page's stream length {stream} is the server's")
    restart()
    driver.refresh()
    wait(driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"
         and len(d.execute_script(TRANSCRIPT)) == len(before), "the conversation after the restart")
    after = driver.execute_script(TRANSCRIPT)
    check([m[:2] for m in after] == [m[:2] for m in before] and len(before) == 4,
          f"after SIGKILL, restart and reload: the same conversation ({len(after)} messages)")
    check(text_of(driver, "stat-stream") == stream and text_of(driver, "stat-kv") == kv
          and text_of(driver, "session-id") == session,
          f"... the same session {session}, stream length {stream} and K/V entries {kv}")
    markup_is_text(driver, "after the reload")


def stop_button_stops(driver, base):
    set_field(driver, "max-tokens", "4000")
    stream_before = int(text_of(driver, "stat-stream"))
    driver.find_element(By.ID, "message").send_keys("and now a long one", Keys.ENTER)
    wait(driver, lambda d: len(last_reply(d).find_element(By.CLASS_NAME, "body").text) > 0, "the long reply to start")
    driver.find_element(By.ID, "stop").click()
    wait(driver, lambda d: reply_state(d) == "stopped" and d.find_element(By.ID, "send").is_enabled(), "Stop")
    shown = len(last_reply(driver).find_element(By.CLASS_NAME, "body").text)
    deadline = time.time() + 30
    while time.time() < deadline and "sinklm_active_streams 0" not in get(base, "/metrics")[1]:
        time.sleep(0.1)
    check("sinklm_active_streams 0" in get(base, "/metrics")[1], "Stop ended the generation on the server too")
    time.sleep(0.3)
    check(shown < 4000 and len(last_reply(driver).find_element(By.CLASS_NAME, "body").text) == shown,
          f"Stop: the reply ended at {shown} characters and nothing more arrived")
    wait(driver, lambda d: int(text_of(d, "stat-stream")) > stream_before, "the stream length after Stop")
    set_field(driver, "max-tokens", str(REPLY_TOKENS))


def delete_and_new(driver, base):
    session = text_of(driver, "session-id")
    driver.find_element(By.ID, "delete-session").click()
    driver.switch_to.alert.accept()  # "Delete session ...?"
    wait(driver, lambda d: text_of(d, "session-id") == "none yet", "the deletion")
    check(get(base, f"/v1/sessions/{session}")[0] == 404 and not driver.execute_script(TRANSCRIPT)
          and driver.execute_script("return localStorage.getItem('sinklm.session')") is None,
          "Delete removes the session on the server and in the page")
    driver.find_element(By.ID, "new-session").click()
    wait(driver, lambda d: text_of(d, "session-id").startswith("sess_"), "a new session")
    check(get(base, f"/v1/sessions/{text_of(driver, 'session-id')}")[0] == 200, "New chat creates a server session")


def no_policy_violations(driver):
    logs = driver.get_log("browser")
    violations = [e["message"] for e in logs if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]
    check(not violations, f"the page broke none of its Content-Security-Policy rules: {violations}")


def screenshot(driver):
    out = os.environ.get("SINKLM_TEST_OUTPUT", os.path.join(os.getcwd(), "test-output"))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "chat-page.png")
    driver.save_screenshot(path)
    check(os.path.getsize(path) > 0, f"screenshot written: {path}")


def run(work, checkpoint):
    make_markup_model(checkpoint)
    sessions, port = os.path.join(work, "sessions"), free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(work, "server.log"), "w")
    server = [start_server(checkpoint, sessions, port, log)]

    def restart():
        server[0].kill()  # SIGKILL: no clean shutdown, no final snapshot
        check(server[0].wait(timeout=30) == -signal.SIGKILL, "the server was SIGKILLed")
        server[0] = start_server(checkpoint, sessions, port, log)

    driver = open_browser(os.path.join(work, "profile"))
    try:
        sign_in(driver, base)
        first_reply_streams_past_the_window(driver)
        markup_is_text(driver, "while streaming")
        shift_enter_is_a_new_line(driver)
        screenshot(driver)  # the conversation with its live numbers, before the restart resets /metrics
        survives_sigkill(driver, base, restart)
        stop_button_stops(driver, base)
        delete_and_new(driver, base)
        no_policy_violations(driver)
    finally:
        driver.quit()
        server[0].send_signal(signal.SIGTERM)
        server[0].wait(timeout=30)
        log.close()
        if failures():  # what the server said, to tell a page fault from a server fault
            print(open(os.path.join(work, "server.log")).read()[-4000:])


def main():
    with_byte_model("sinklm-chat-page-test-", run)


if __name__ == "__main__":
    main()

// The chat panel: a conversation with one chosen instance, streamed from
// /v1/chat/completions (SSE read from fetch's body, so the API key travels in a header);
// Stop aborts the request, which cancels the generation on the server.
import {h, api, replaceKeepingFocus} from "./util.js";

const kMaxHistory = 40;  // messages sent back with each turn

export function setupChat(status) {
  const select = document.getElementById("chat-instance");
  const log = document.getElementById("chat-log");
  const prompt = document.getElementById("chat-prompt");
  const send = document.getElementById("chat-send");
  const stop = document.getElementById("chat-stop");
  const maxTokens = document.getElementById("chat-max-tokens");
  const history = [];
  let controller = null;

  const bubble = (role, text) => {
    const body = h("div", {class: "chat-text"}, text);
    const el = h("div", {class: `chat-msg ${role}`, "data-role": role}, h("span", {class: "chat-role"}, role), body);
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return body;
  };
  const busy = (on) => {
    send.disabled = on;
    stop.disabled = !on;
  };

  document.getElementById("chat-clear").addEventListener("click", () => {
    history.length = 0;
    log.replaceChildren();
  });
  stop.addEventListener("click", () => { if (controller) controller.abort(); });
  // Enter sends, Shift+Enter is a new line.
  prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); document.getElementById("chat-form").requestSubmit(); }
  });
  document.getElementById("chat-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = prompt.value.trim();
    if (!text || controller) return;
    if (!select.value) { status("chat: no ready instance to talk to", true); return; }
    prompt.value = "";
    history.push({role: "user", content: text});
    bubble("user", text);
    const out = bubble("assistant", "");
    out.parentElement.setAttribute("data-streaming", "true");
    controller = new AbortController();
    busy(true);
    let reply = "";
    try {
      const n = Number(maxTokens.value) || 128;
      const res = await api("/v1/chat/completions", {method: "POST", raw: true, signal: controller.signal,
        body: {model: select.value, messages: history.slice(-kMaxHistory), stream: true, max_tokens: n}});
      await readEvents(res.body, (event) => {
        if (event.error) throw new Error(event.error.message || JSON.stringify(event.error));
        const delta = event.choices && event.choices[0] && event.choices[0].delta;
        if (delta && delta.content) {
          reply += delta.content;
          out.textContent = reply;
          log.scrollTop = log.scrollHeight;
        }
      });
      history.push({role: "assistant", content: reply});
    } catch (e) {
      if (e.name !== "AbortError") {
        out.parentElement.classList.add("bad");
        out.append(h("span", {class: "chat-error"}, ` [${e.message}]`));
        status(`chat: ${e.message}`, true);
      } else if (reply) {
        history.push({role: "assistant", content: reply});
      }
    } finally {
      out.parentElement.setAttribute("data-streaming", "false");
      controller = null;
      busy(false);
    }
  });
  busy(false);
}

// Calls `onEvent` with each `data:` JSON of an SSE body until `[DONE]` or its end.
async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

// Keeps the instance choice across polls; offers the ready instances.
export function drawChatInstances(select, instances) {
  const ready = instances.filter((i) => i.ready).map((i) => i.id);
  const had = [...select.options].map((o) => o.value);
  if (JSON.stringify(ready) === JSON.stringify(had)) return;
  const keep = select.value;
  replaceKeepingFocus(select, ready.map((id) => h("option", {value: id}, id)));
  if (ready.includes(keep)) select.value = keep;
  select.disabled = ready.length === 0;
}

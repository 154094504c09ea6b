// The chat page: sends a message, reads the server-sent events of its turn, answers asks.
// Everything from the server is put on the page with textContent, never parsed as HTML.
"use strict";

(function () {
  const main = document.getElementById("chat");
  if (!main) return;
  const session = main.dataset.session;
  const csrf = main.dataset.csrf;
  const transcript = document.getElementById("transcript");
  const form = document.getElementById("send");
  const input = document.getElementById("message");
  const sendButton = document.getElementById("send-button");
  const stopButton = document.getElementById("stop-button");
  const status = document.getElementById("status");

  // Reloading the tab continues its session instead of starting another.
  const here = new URL(window.location.href);
  if (here.searchParams.get("session") !== session) {
    here.searchParams.set("session", session);
    window.history.replaceState(null, "", here.toString());
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-csrf-token": csrf,
        "x-clawloop-session": session,
      },
      body: JSON.stringify(body || {}),
      credentials: "same-origin",
    });
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function add(node) {
    transcript.appendChild(node);
    node.scrollIntoView({ block: "end" });
    return node;
  }

  let answer = null; // the element the streamed text goes into
  const calls = {}; // tool call id -> its element

  function show(ev) {
    switch (ev.type) {
      case "token":
        if (!answer) answer = add(el("div", "msg assistant streaming", ""));
        answer.textContent += ev.text;
        break;
      case "tool_call": {
        answer = null;
        const box = add(el("div", "tool-call"));
        box.dataset.callId = ev.id;
        box.appendChild(el("div", "name", "tool call: " + ev.name));
        box.appendChild(el("pre", "args", ev.arguments));
        calls[ev.id] = box;
        break;
      }
      case "approval":
        showAsk(ev);
        break;
      case "approval_resolved": {
        const ask = document.getElementById("ask-" + ev.id);
        if (ask) {
          ask.classList.add("resolved");
          ask.querySelectorAll("button").forEach((b) => (b.disabled = true));
          ask.appendChild(el("div", "outcome", ev.outcome + " (" + ev.by + ")"));
        }
        break;
      }
      case "tool_result": {
        const box = calls[ev.call_id] || add(el("div", "tool-call"));
        const res = el("div", "tool-result " + (ev.ok ? "ok" : "failed"));
        let head = (ev.ok ? "result" : "error") + " (" + ev.seconds + " s)";
        if (ev.decision) head += ", " + ev.decision + " by " + ev.decided_by;
        res.appendChild(el("div", "head", head));
        res.appendChild(el("pre", "output", ev.content));
        box.appendChild(res);
        break;
      }
      case "final":
        if (answer) answer.remove();
        answer = null;
        add(el("div", "msg assistant final", ev.content));
        break;
      case "stopped":
        add(el("div", "stopped", ev.message));
        break;
      case "error":
        add(el("div", "error", ev.message));
        break;
      case "usage":
        add(el("div", "usage", ev.steps + " step(s), " + ev.prompt_tokens + " prompt tokens (" +
          ev.cached_tokens + " cached), " + ev.completion_tokens + " generated, " + ev.seconds + " s"));
        break;
    }
  }

  function showAsk(ev) {
    const box = add(el("div", "approval"));
    box.id = "ask-" + ev.id;
    box.appendChild(el("div", "title", "Approve this tool call? " + ev.name));
    box.appendChild(el("pre", "args", ev.arguments));
    box.appendChild(el("div", "summary", ev.summary));
    box.appendChild(el("div", "reason", "why asked: " + ev.reason));
    if (ev.suggestion && !ev.person_only) {
      box.appendChild(el("div", "suggestion", "\"always\" saves: allow " + ev.suggestion));
    }
    const row = el("div", "buttons");
    const choices = ev.person_only ? ["once", "deny"] : ["once", "always", "deny"];
    for (const choice of choices) {
      const b = el("button", "answer " + choice, choice);
      b.type = "button";
      b.addEventListener("click", async () => {
        row.querySelectorAll("button").forEach((x) => (x.disabled = true));
        const r = await post("/chat/approve", { id: ev.id, answer: choice });
        if (!r.ok) box.appendChild(el("div", "error", "not answered: " + (await r.text())));
      });
      row.appendChild(b);
    }
    box.appendChild(row);
  }

  function frames(buffer, onEvent) {
    // Server-sent events are separated by a blank line; each has one JSON data line.
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
      if (data.length) onEvent(JSON.parse(data.join("\n")));
    }
    return buffer;
  }

  function busy(on) {
    sendButton.disabled = on;
    stopButton.disabled = !on;
    status.textContent = on ? "working…" : "";
    main.dataset.busy = on ? "1" : "";
  }

  // Files: chosen with the file input, or dropped onto the chat (when the browser can drag).
  const fileInput = document.getElementById("files");
  const chosen = document.getElementById("files-chosen");
  let dropped = [];

  function pending() {
    return Array.from(fileInput.files).concat(dropped);
  }

  function showChosen() {
    const names = pending().map((f) => f.name);
    chosen.textContent = names.length ? "to send: " + names.join(", ") : "";
  }

  fileInput.addEventListener("change", showChosen);
  main.addEventListener("dragover", (e) => {
    if (e.dataTransfer && Array.from(e.dataTransfer.types).includes("Files")) {
      e.preventDefault();
      main.classList.add("dropping");
    }
  });
  main.addEventListener("dragleave", () => main.classList.remove("dropping"));
  main.addEventListener("drop", (e) => {
    main.classList.remove("dropping");
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    dropped = dropped.concat(Array.from(e.dataTransfer.files));
    showChosen();
  });

  function base64(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      // A data: URL is "data:TYPE;base64,DATA": the part after the comma is the file.
      reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }

  async function refusal(r) {
    const body = await r.text();
    try {
      return JSON.parse(body).error || body;
    } catch (err) {
      return body;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = input.value.trim();
    const files = pending();
    if (!text && !files.length) return;
    input.value = "";
    fileInput.value = "";
    dropped = [];
    showChosen();
    const names = files.map((f) => f.name);
    add(el("div", "msg user", text + (names.length ? "\n(files: " + names.join(", ") + ")" : "")));
    answer = null;
    busy(true);
    try {
      const sent = [];
      for (const f of files) sent.push({ name: f.name, data: await base64(f) });
      const r = await post("/chat/send", { message: text, files: sent });
      if (!r.ok || !r.body) {
        add(el("div", "error", "not sent: " + (await refusal(r))));
        return;
      }
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = frames(buffer + decoder.decode(value, { stream: true }), show);
      }
    } catch (err) {
      add(el("div", "error", "the connection to the server broke: " + err));
    } finally {
      busy(false);
      add(el("div", "turn-done"));
    }
  });

  stopButton.addEventListener("click", async () => {
    stopButton.disabled = true;
    status.textContent = "stopping…";
    await post("/chat/stop", {});
  });

  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
})();

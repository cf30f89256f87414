// Runs from the browser (issue 30): answer an interrupt, replay from a checkpoint, edit state and
// run. A form of class run-form (or a submit button with a /run/ formaction) is POSTed with its
// CSRF token and the answer streams back as server-sent events (text/event-stream read from the
// fetch body), each shown as it arrives. Values are only ever set through textContent.
"use strict";

(() => {
  function line(log, cls, text) {
    const div = document.createElement("div");
    div.className = `ev ${cls}`;
    div.textContent = text;
    log.appendChild(div);
    return div;
  }

  function messageText(m) {
    const role = m.type === "ai" ? "ai" : m.type === "human" ? "user" : m.type || "?";
    let text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
    for (const c of m.tool_calls || []) text += ` → ${c.name}(${JSON.stringify(c.args)})`;
    return `${role}${m.tool_call_id ? ` [${m.tool_call_id}]` : ""}: ${text}`;
  }

  function show(log, event, data) {
    if (event === "started") return line(log, "started", `${data.action} started…`);
    if (event === "error") return line(log, "error", `error: ${data.message}`);
    if (event === "done") {
      const s = data.status || {};
      const div = line(log, "done", `done: the thread is now ${s.kind || "?"}. `);
      const a = document.createElement("a");
      a.href = data.thread_url;
      a.textContent = "Open the thread";
      div.appendChild(a);
      document.dispatchEvent(new CustomEvent("tl:run-done", { detail: data }));
      return div;
    }
    const { node, update } = data;
    if (node === "__interrupt__") {
      for (const i of update || []) line(log, "interrupt", `waiting for an answer: ${JSON.stringify(i.value !== undefined ? i.value : i)}`);
      return null;
    }
    const messages = update && Array.isArray(update.messages) ? update.messages : null;
    if (messages) for (const m of messages) line(log, "update", `${node}  ${messageText(m)}`);
    else line(log, "update", `${node}  ${JSON.stringify(update)}`);
    document.dispatchEvent(new CustomEvent("tl:run-update", { detail: data }));
    return null;
  }

  async function start(action, body, log) {
    log.textContent = "";
    const r = await fetch(action, { method: "POST", body, credentials: "same-origin", headers: { "X-CSRF-Token": TL.csrf, Accept: "text/event-stream" } });
    if (!r.ok || !(r.headers.get("content-type") || "").startsWith("text/event-stream")) {
      const page = new DOMParser().parseFromString(await r.text(), "text/html");
      const msg = page.querySelector(".error-message");
      line(log, "error", `error: ${msg ? msg.textContent : `HTTP ${r.status}`}`);
      return;
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const chunk = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let event = "message", data = "";
        for (const l of chunk.split("\n")) {
          if (l.startsWith("event: ")) event = l.slice(7);
          else if (l.startsWith("data: ")) data += l.slice(6);
        }
        show(log, event, data ? JSON.parse(data) : {});
      }
    }
  }

  function logOf(form) {
    return form.querySelector(".run-log") || document.getElementById("run-log");
  }

  document.addEventListener("submit", (evt) => {
    const form = evt.target;
    const btn = evt.submitter;
    const action = (btn && btn.getAttribute("formaction")) || form.getAttribute("action") || "";
    if (!action.startsWith("/run/")) return;
    evt.preventDefault();
    const body = new FormData(form);
    const text = body.get("json");
    body.delete("json");
    if (action === "/run/resume") body.set("value", btn && btn.dataset.useText ? text : (btn && btn.value) || text || "");
    const log = logOf(form);
    form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    start(action, body, log)
      .catch((e) => line(log, "error", `error: ${e.message}`))
      .finally(() => {
        form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
        // an answered interrupt is not answered twice: its buttons go once the run is done
        if (action === "/run/resume" && log.querySelector(".ev.done")) form.querySelectorAll(".answer-buttons, .answer-json").forEach((e) => e.remove());
      });
  });

  // "Replay from here" in the thread page's side panel: streams into the page's run card.
  document.addEventListener("click", (evt) => {
    const b = evt.target.closest("button[data-run]");
    if (!b) return;
    const body = new FormData();
    body.set("csrf", TL.csrf);
    body.set("thread_id", b.dataset.thread);
    body.set("checkpoint_id", b.dataset.checkpoint);
    const card = document.getElementById("run-card");
    if (card) card.classList.remove("hidden");
    const log = document.getElementById("run-log");
    b.disabled = true;
    start(`/run/${b.dataset.run}`, body, log).catch((e) => line(log, "error", `error: ${e.message}`)).finally(() => { b.disabled = false; });
  });
})();

// threadline ui: what every page shares — fetching, polling for changes, live regions.
// Server-rendered fragments are escaped by the server's templates; values from the
// database are only ever put in the page through them or through textContent.
"use strict";

const TL = (() => {
  const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content;
  const pollMs = Number(meta("poll-ms")) || 2000;

  async function get(url, kind) {
    const r = await fetch(url, { headers: { Accept: kind === "json" ? "application/json" : "text/html" }, credentials: "same-origin" });
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return kind === "json" ? r.json() : r.text();
  }

  // Poll a change marker (JSON) and call onChange(marker) when it differs from the last one seen.
  function watch(url, onChange) {
    let last = null;
    async function tick() {
      if (!document.hidden) {
        try {
          const marker = await get(url, "json");
          const key = JSON.stringify(marker);
          if (last !== null && key !== last) await onChange(marker);
          last = key;
        } catch (e) { /* server restarting or gone: keep trying */ }
      }
      setTimeout(tick, pollMs);
    }
    tick();
  }

  return { get, watch, pollMs, csrf: meta("csrf-token") };
})();

// Live regions: replace the element's content with data-live-src whenever data-live-changes changes.
document.querySelectorAll("[data-live-src]").forEach((el) => {
  TL.watch(el.dataset.liveChanges, async () => {
    el.innerHTML = await TL.get(el.dataset.liveSrc, "html");
    el.dispatchEvent(new CustomEvent("tl:updated", { bubbles: true }));
  });
});

// A checkpoint page tells when its thread moves on.
document.querySelectorAll("[data-head-watch]").forEach((el) => {
  TL.watch(el.dataset.headWatch, async (marker) => {
    if (el.dataset.head && marker.head === el.dataset.head) return;
    el.textContent = "This thread has new checkpoints. ";
    const a = document.createElement("a");
    a.href = el.dataset.threadUrl;
    a.textContent = "See the thread";
    el.appendChild(a);
    el.classList.remove("hidden");
  });
});

// Edit-and-branch: the value box follows the chosen channel.
(() => {
  const select = document.getElementById("edit-channel");
  const box = document.getElementById("edit-value");
  const data = document.getElementById("edit-values");
  if (!select || !box || !data) return;
  const values = JSON.parse(data.textContent);
  select.addEventListener("change", () => { box.value = values[select.value] || ""; });
})();

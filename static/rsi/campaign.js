// Campaign page: cells follow their attempts in place over a WebSocket (status, steps, calls,
// elapsed, ETA, latest picture); when a cell finishes, the cells and aggregates are fetched again
// and swapped in. The page itself never reloads.
(function () {
  "use strict";
  const root = document.getElementById("campaign");
  if (!root) return;
  const PICTURE_INTERVAL_MS = 1500;
  const pictureAt = {};
  let socket = null;
  let refreshing = false;
  let again = false; // a cell finished while the page was being fetched: fetch it once more

  function duration(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  }

  function text(cell, selector, value) {
    const node = cell.querySelector(selector);
    if (node) node.textContent = value;
  }

  function running(cell, startedAt) {
    if (cell.dataset.status !== "running") {
      cell.dataset.status = "running";
      cell.classList.remove("pending", "queued");
      cell.classList.add("running");
      text(cell, ".status", "running");
    }
    if (startedAt && !cell.dataset.started) cell.dataset.started = String(Math.round(startedAt));
  }

  function picture(cell, seq) {
    if (!seq) return; // no frame published yet: the placeholder stays (asking for one would be a 404)
    const now = Date.now();
    if (now - (pictureAt[cell.id] || 0) < PICTURE_INTERVAL_MS) return;
    pictureAt[cell.id] = now;
    let img = cell.querySelector(".picture img");
    if (!img) {
      const box = cell.querySelector(".picture");
      box.textContent = "";
      img = document.createElement("img");
      img.className = "thumb";
      img.alt = "latest picture";
      box.appendChild(img);
    }
    img.src = `${cell.dataset.thumb}?seq=${seq}`;
  }

  function progress(cell, counters) {
    if (!counters) return;
    const done = counters.environment_steps, total = counters.max_executable_steps;
    cell.dataset.steps = done;
    cell.dataset.maxSteps = total;
    text(cell, ".steps", `${done} / ${total} steps`);
    text(cell, ".calls", `${counters.policy_calls} / ${counters.max_policy_calls} calls`);
    tick(cell);
  }

  function tick(cell) {
    const started = Number(cell.dataset.started || 0);
    if (!started || cell.dataset.status !== "running") return;
    const elapsed = Date.now() - started;
    text(cell, ".elapsed", `elapsed ${duration(elapsed)}`);
    const done = Number(cell.dataset.steps || 0), total = Number(cell.dataset.maxSteps || 0);
    // An upper bound: an episode may end before its step budget does.
    text(cell, ".eta", done > 0 && total > done ? `· at most ${duration((elapsed / done) * (total - done))} left` : "");
  }

  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    again = false;
    try {
      const response = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of ["cells", "aggregates-section", "progress-line", "sequential-section"]) {
        const now = document.getElementById(id), next = fresh.getElementById(id);
        if (now && next) now.replaceWith(next);
      }
      const form = document.getElementById("start-form");
      if (form && !fresh.getElementById("start-form")) form.remove();
      root.dataset.refreshed = String(Number(root.dataset.refreshed || 0) + 1);
    } finally {
      refreshing = false;
      if (again) refresh();
    }
  }

  function onEvent(e) {
    const cell = document.getElementById(`cell-${e.attempt}`);
    // An ended cell, or one a human paused, took over or stopped (no longer autonomous): fetch the cells again.
    if (e.kind === "finished" || e.kind === "intervention") { refresh(); return; }
    // A re-run, or a cell this page does not draw (yet, or on another page of the grid): its steps change
    // nothing drawn here, its other events may (the progress line, a new re-run).
    if (!cell) { if (e.kind !== "step") refresh(); return; }
    running(cell, e.started_at);
    if (e.kind === "step" || e.kind === "state") {
      progress(cell, e.counters);
      picture(cell, e.frame_seq);
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + root.dataset.socket);
    socket.onopen = () => { root.dataset.connected = "1"; };
    socket.onmessage = (message) => {
      const data = JSON.parse(message.data);
      if (data.type === "event") onEvent(data.event);
    };
    socket.onclose = () => {
      root.dataset.connected = "0";
      setTimeout(connect, 3000); // the server restarted: pick up again, and catch up on what finished
      setTimeout(refresh, 3000);
    };
  }

  connect();
  setInterval(() => document.querySelectorAll(".cell[data-status=running]").forEach(tick), 1000);
})();

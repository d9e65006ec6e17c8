// Episode review: the stored video, the exact frame of each step and a timeline, kept in step.
(function () {
  "use strict";
  const root = document.getElementById("review");
  if (!root) return;
  const video = document.getElementById("video");
  const exact = document.getElementById("exact-frame");
  const svg = document.getElementById("timeline");
  const frameUrl = (step) => root.dataset.frame.replace(/0\.png$/, step + ".png");
  const fileUrl = (name) => root.dataset.files.replace(/x$/, name);
  let data = null;
  let current = 0;

  function decisionOf(step) {
    // The decision whose chunk executed this step; step 0 is the reset frame.
    if (step === 0) return null;
    const record = data.steps[step - 1];
    return data.decisions.find((d) => d.index === record.decision__index) || null;
  }

  function messageFor(step) {
    // The call that observed the state after `step` executed steps, if any did.
    return data.decisions.find((d) => d.observation_step === step && d.actor === "policy") || null;
  }

  function show(step, seek = true) {
    const last = data.steps.length;
    current = Math.max(0, Math.min(last, step));
    document.getElementById("step-number").textContent = current;
    const link = document.getElementById("deep-link");
    link.href = "#step=" + current;
    history.replaceState(null, "", "#step=" + current);
    exact.src = frameUrl(current);
    exact.dataset.step = current;
    const record = current > 0 ? data.steps[current - 1] : null;
    const decision = decisionOf(current);
    document.getElementById("step-decision").textContent = decision
      ? `#${decision.index} (${decision.kind}, ${decision.actor}, executed ${decision.executed})` : "reset";
    document.getElementById("step-latency").textContent =
      decision && decision.latency_ms !== null ? decision.latency_ms.toFixed(1) + " ms" : "–";
    document.getElementById("step-success").textContent = record ? String(record.native_success) : "–";
    document.getElementById("step-instruction").textContent = record ? record.instruction
      : (data.decisions[0] ? data.decisions[0].instruction : "–");
    const message = messageFor(current);
    const cell = document.getElementById("step-message");
    cell.textContent = "";
    if (message) {
      const name = "messages/call-" + String(message.call_index).padStart(4, "0");
      for (const ext of ["png", "json"]) {
        const a = document.createElement("a");
        a.href = fileUrl(name + "." + ext);
        a.textContent = `call ${message.call_index} ${ext}`;
        a.className = "message-" + ext;
        cell.append(a, " ");
      }
      for (const sent of data.sent[message.call_index] || []) {
        const a = document.createElement("a");
        a.href = fileUrl(sent);
        a.textContent = sent.split(".").slice(-2).join(".");  // e.g. sent-1.json: the exact request body
        a.className = "message-sent";
        cell.append(a, " ");
      }
    } else cell.textContent = "–";
    const table = document.getElementById("action-values");
    table.textContent = "";
    data.action_components.forEach((name, i) => {
      const row = table.insertRow();
      row.insertCell().textContent = name;
      const value = row.insertCell();
      value.className = "action-value";
      value.dataset.component = i;
      value.textContent = record ? String(record.action[i]) : "–";
    });
    const notes = document.getElementById("step-notes");
    notes.textContent = "";
    for (const i of data.interventions.filter((x) => x.step === current)) {
      const p = document.createElement("p");
      p.className = "intervention";
      p.textContent = `${i.kind} by ${i.user} at ${i.at}${i.note ? ": " + i.note : ""}`;
      notes.append(p);
    }
    if (seek && data.fps) {
      const frame = data.frames.indexOf(current);
      if (frame >= 0) video.currentTime = (frame + 0.5) / data.fps;
    }
    const cursor = svg.querySelector(".cursor");
    if (cursor) cursor.setAttribute("x", x(current) - 1);
  }

  const left = 40;
  const width = () => svg.clientWidth || 900;
  const x = (step) => left + (step / Math.max(1, data.steps.length)) * (width() - left - 10);

  function el(name, attrs, parent = svg) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    parent.append(node);
    return node;
  }

  function draw() {
    svg.textContent = "";
    const n = data.steps.length;
    const comps = data.action_components;
    const actionTop = 10, actionHeight = 120;
    const y = (v) => actionTop + actionHeight / 2 - Math.max(-1.6, Math.min(1.6, v)) * (actionHeight / 3.2);
    el("text", { x: 2, y: actionTop + 10, class: "label" }).textContent = "action";
    comps.forEach((name, i) => {
      if (i === comps.length - 1) return; // the gripper has its own row
      const points = data.steps.map((s, k) => `${x(k + 1)},${y(s.action[i])}`).join(" ");
      el("polyline", { points, class: `series s${i}`, fill: "none" }).append(
        Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "title"), { textContent: name }));
    });
    const rows = { gripper: 150, success: 175, decisions: 200, instruction: 220, events: 240 };
    for (const [label, top] of Object.entries(rows)) el("text", { x: 2, y: top + 4, class: "label" }).textContent = label;
    data.steps.forEach((s, k) => {
      const g = s.action[comps.length - 1];
      el("rect", { x: x(k + 1) - 1, y: rows.gripper - 6, width: Math.max(2, x(1) - x(0)), height: 12,
                   class: "grip", "fill-opacity": (Math.abs(g) * 0.8 + 0.1).toFixed(2), fill: g >= 0 ? "#2a7" : "#c52" });
      if (s.native_success) el("rect", { x: x(k + 1) - 1, y: rows.success - 5, width: Math.max(2, x(1) - x(0)), height: 10, class: "success" });
      if (k > 0 && s.instruction !== data.steps[k - 1].instruction) {
        el("circle", { cx: x(k + 1), cy: rows.instruction, r: 4, class: "instruction-change" }).append(
          Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "title"), { textContent: s.instruction }));
      }
    });
    for (const d of data.decisions) {
      const tick = el("line", { x1: x(d.observation_step), x2: x(d.observation_step), y1: rows.decisions - 7, y2: rows.decisions + 7,
                               class: "decision " + d.kind + " " + d.actor });
      tick.append(Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "title"),
        { textContent: `call ${d.index}: ${d.kind}, ${d.executed} executed, ${d.latency_ms ? d.latency_ms.toFixed(1) : "?"} ms` }));
    }
    for (const i of data.interventions) {
      el("rect", { x: x(i.step) - 3, y: rows.events - 6, width: 6, height: 12, class: "intervention-mark" }).append(
        Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "title"), { textContent: `${i.kind} by ${i.user}` }));
    }
    if (data.error) {
      el("text", { x: x(n) - 4, y: rows.events + 4, class: "error-mark" }).textContent = "✕ " + data.error.type;
    }
    el("rect", { x: x(current) - 1, y: 0, width: 2, height: 255, class: "cursor" });
  }

  svg.addEventListener("click", (event) => {
    const box = svg.getBoundingClientRect();
    const step = Math.round(((event.clientX - box.left - left) / (width() - left - 10)) * data.steps.length);
    show(step);
  });
  document.addEventListener("keydown", (event) => {
    if (!data || ["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName)) return;
    const moves = { ArrowRight: current + 1, ArrowLeft: current - 1, Home: 0, End: data.steps.length };
    if (event.key in moves) {
      event.preventDefault();
      video.pause();
      show(moves[event.key]);
    } else if (event.key === " ") {
      event.preventDefault();
      video.paused ? video.play() : video.pause();
    }
  });
  video.addEventListener("timeupdate", () => {
    if (video.paused || !data.fps) return;
    const frame = Math.min(data.frames.length - 1, Math.floor(video.currentTime * data.fps));
    if (data.frames[frame] !== current) show(data.frames[frame], false);
  });

  window.addEventListener("hashchange", () => {
    const match = location.hash.match(/step=(\d+)/);
    if (data && match && parseInt(match[1], 10) !== current) show(parseInt(match[1], 10));
  });

  fetch(root.dataset.timeline, { credentials: "same-origin" })
    .then((r) => r.json())
    .then((json) => {
      data = json;
      document.getElementById("step-count").textContent = data.steps.length;
      draw();
      const match = location.hash.match(/step=(\d+)/);
      show(match ? parseInt(match[1], 10) : 0);
      root.dataset.ready = "1";
    });
})();

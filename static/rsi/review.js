// Episode review: one picture (the exact frame of the step while paused or stepping, the stored
// video while playing), transport buttons and speeds, the step's record, a timeline with a legend,
// step ticks and a readout, and the list of interventions and errors.
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
  const $ = (id) => document.getElementById(id);
  const { rounded, legendItem, ticks, linkedStep, remember, keys } = window.RSISteps;

  // The contract's groups (body parts, or the end effector), and the gripper as its own group if there is one.
  function shownGroups() {
    const gripper = data.gripper === null ? [] : [{ label: "gripper", components: [data.gripper] }];
    return data.action_groups.concat(gripper);
  }

  function initializationText() {
    const init = data.initialization;
    return init ? `${init.controls} initialization controls (${init.backend}) before step 0, outside the policy's budgets` : "";
  }

  function localTime(iso) {
    return new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  }

  function playing(on) {
    // The video is shown only while it plays; paused, the exact frame of the step is.
    video.hidden = !on;
    exact.hidden = on;
    $("btn-play").textContent = on ? "❚❚ pause" : "▶ play";
    $("view-mode").textContent = on ? "video" : "exact frame";
  }

  function play() {
    if (current >= data.steps.length) show(0);
    video.playbackRate = parseFloat($("speed").value);
    playing(true);
    video.play();
  }

  function videoStep() {
    // The step whose frame the video shows now (the last one once it ended).
    if (video.ended) return data.frames[data.frames.length - 1];
    return data.frames[Math.min(data.frames.length - 1, Math.floor(video.currentTime * data.fps))];
  }

  function pause() {
    video.pause();
    playing(false);
    show(data.fps ? videoStep() : current, false);
  }

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
    remember(current);
    if (video.paused) {
      exact.src = frameUrl(current);
      exact.dataset.step = current;
    }
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
      // The call that saw this frame chose what comes after it: at step K that is call K+1 of a one-action policy.
      cell.append(`call ${message.call_index} saw this frame and chose what follows: `);
      for (const ext of ["png", "json"]) {
        const a = document.createElement("a");
        a.href = fileUrl(name + "." + ext);
        a.textContent = ext;
        a.className = "message-" + ext;
        cell.append(a, " ");
      }
      for (const sent of data.sent[message.call_index] || []) {
        const a = document.createElement("a");
        a.href = fileUrl(sent);
        // e.g. sent-1.json: the exact request body (served whole also when stored apart from its frame, .split)
        a.textContent = sent.replace(/\.split$/, "").split(".").slice(-2).join(".");
        a.className = "message-sent";
        cell.append(a, " ");
      }
    } else cell.textContent = "–";
    const table = document.getElementById("action-values");
    table.textContent = "";
    for (const group of shownGroups()) {
      const head = table.insertRow();
      head.className = "action-group";
      const th = document.createElement("th");
      th.colSpan = 2;
      th.textContent = group.label;
      head.append(th);
      for (const i of group.components) {
        const row = table.insertRow();
        row.insertCell().textContent = data.action_components[i];
        const value = row.insertCell();
        value.className = "action-value";
        value.dataset.component = i;
        value.textContent = record ? rounded(record.action[i]) : "–";
        if (record) {
          value.title = String(record.action[i]);
          value.dataset.value = String(record.action[i]);
        }
      }
    }
    const notes = document.getElementById("step-notes");
    notes.textContent = "";
    for (const i of data.interventions.filter((x) => x.step === current)) {
      const p = document.createElement("p");
      p.className = "intervention";
      p.textContent = `${i.kind} by ${i.user} at ${localTime(i.at)}${i.note ? ": " + i.note : ""}`;
      notes.append(p);
    }
    if (seek && data.fps) {
      const frame = data.frames.indexOf(current);
      if (frame >= 0) video.currentTime = (frame + 0.5) / data.fps;
    }
    const cursor = svg.querySelector(".cursor");
    if (cursor) cursor.setAttribute("x", x(current) - 1);
    $("btn-prev").disabled = current === 0;
    $("btn-start").disabled = current === 0;
    $("btn-next").disabled = current === last;
    $("btn-end").disabled = current === last;
  }

  function step(to) {
    if (!video.paused) pause();
    show(to);
  }

  const left = 40;
  const width = () => svg.clientWidth || 900;
  const x = (step) => left + (step / Math.max(1, data.steps.length)) * (width() - left - 10);

  const el = (name, attrs, parent = svg) => window.RSISteps.el(name, attrs, parent);  // the timeline by default

  function legend() {
    const box = $("legend");
    box.textContent = "";
    const comps = data.action_components;
    const entries = [];
    for (const group of data.action_groups) {
      if (group.components.length > 6) entries.push([`series s0`, `${group.label}: ${group.components.length} traces (hover one for its name)`, "line"]);
      else group.components.forEach((c, k) => entries.push([`series s${k % 6}`, comps[c], "line"]));
    }
    if (data.gripper !== null) entries.push(["grip", `${comps[data.gripper]} (row: green open, red closed)`, "box"]);
    entries.push(["success", "native success", "box"], ["decision", "policy decision", "tick"],
      ["decision human", "human decision", "tick"], ["decision rejected", "rejected / failed call", "tick"],
      ["instruction-change", "instruction changes", "dot"], ["intervention-mark", "intervention", "box"]);
    for (const [cls, label, shape] of entries) box.append(legendItem(cls, label, shape, cls === "grip" ? "#2a7" : ""));
  }

  function axis(n) {
    const top = 224;
    el("line", { x1: x(0), x2: x(n), y1: top - 8, y2: top - 8, class: "axis" });
    for (const s of ticks(n)) {
      el("line", { x1: x(s), x2: x(s), y1: top - 11, y2: top - 5, class: "axis" });
      el("text", { x: x(s), y: top + 4, class: "label tick-label" }).textContent = s;
    }
  }

  function readout(stepAt) {
    const s = Math.max(0, Math.min(data.steps.length, stepAt));
    const record = s > 0 ? data.steps[s - 1] : null;
    if (!record) {
      const init = initializationText();
      $("readout").textContent = `step ${s}: the reset frame` + (init ? `, after ${init}` : "");
      return;
    }
    const values = data.action_components.map((name, i) => `${name} ${rounded(record.action[i])}`).join(", ");
    const decision = decisionOf(s);
    $("readout").textContent = `step ${s}: ${values}; native success ${record.native_success}` +
      (decision ? `; decision #${decision.index} (${decision.actor})` : "");
  }

  function events() {
    const list = $("events-list");
    list.textContent = "";
    const items = data.interventions.map((i) => [i.step, `${i.kind} by ${i.user} at ${localTime(i.at)}${i.note ? ": " + i.note : ""}`, "intervention"]);
    for (const d of data.decisions) {
      if (d.kind === "rejected" || d.kind === "failed") {
        items.push([d.observation_step, `call ${d.call_index || d.index} ${d.kind}${d.violation ? ": " + (d.violation.message || d.violation.type || "") : ""}`, "error"]);
      }
    }
    const unheld = data.pause_never_held;
    if (unheld) items.push([data.steps.length, `the ${unheld.request} (by ${unheld.set_by}) never held: the episode ended first, and it stays autonomous`, "intervention"]);
    if (data.initialization) items.push([0, initializationText(), "initialization"]);
    if (data.error) items.push([data.steps.length, `the attempt ended with ${data.error.type}: ${data.error.detail.split("\n")[0]}`, "error"]);
    items.sort((a, b) => a[0] - b[0]);
    for (const [at, text, kind] of items) {
      const li = document.createElement("li");
      li.className = kind;
      const jump = document.createElement("button");
      jump.className = "link-button jump";
      jump.textContent = `step ${at}`;
      jump.addEventListener("click", () => step(at));
      li.append(jump, " " + text);
      list.append(li);
    }
    if (!items.length) list.textContent = "none: the policy ran on its own and no call was refused";
  }

  function draw() {
    svg.textContent = "";
    const n = data.steps.length;
    const comps = data.action_components;
    const actionTop = 10, actionHeight = 110;
    const band = actionHeight / Math.max(1, data.action_groups.length);
    data.action_groups.forEach((group, g) => {
      // One band per group, scaled to its largest value (at least 1): joint targets, velocities and heights differ.
      const top = actionTop + g * band;
      const scale = Math.max(1, ...group.components.flatMap((c) => data.steps.map((s) => Math.abs(s.action[c]))));
      const y = (v) => top + band / 2 - (v / scale) * (band / 2 - 2);
      el("text", { x: 2, y: top + 10, class: "label group-label" }).textContent = `${group.label} ±${rounded(scale)}`;
      group.components.forEach((c, k) => {
        const points = data.steps.map((s, i) => `${x(i + 1)},${y(s.action[c])}`).join(" ");
        el("polyline", { points, class: `series s${k % 6}`, fill: "none", "data-component": c }).append(
          Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "title"), { textContent: comps[c] }));
      });
    });
    const rows = { gripper: 134, success: 152, decisions: 170, instruction: 186, events: 202 };
    for (const [label, top] of Object.entries(rows)) {
      if (label !== "gripper" || data.gripper !== null) el("text", { x: 2, y: top + 4, class: "label" }).textContent = label;
    }
    data.steps.forEach((s, k) => {
      if (data.gripper !== null) {
        const g = s.action[data.gripper];
        el("rect", { x: x(k + 1) - 1, y: rows.gripper - 6, width: Math.max(2, x(1) - x(0)), height: 12,
                     class: "grip", "fill-opacity": (Math.abs(g) * 0.8 + 0.1).toFixed(2), fill: g >= 0 ? "#2a7" : "#c52" });
      }
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
    axis(n);
    el("rect", { x: x(current) - 1, y: 0, width: 2, height: 215, class: "cursor" });
  }

  const stepAt = (event) => {
    const box = svg.getBoundingClientRect();
    return Math.round(((event.clientX - box.left - left) / (width() - left - 10)) * data.steps.length);
  };
  // Dragging on the timeline scrubs while it drags (a click is a drag of no length); hovering reads out the step.
  let scrubbing = false;
  const scrubTo = (event) => {
    const target = Math.max(0, Math.min(data.steps.length, stepAt(event)));
    if (target !== current) step(target);
  };
  svg.addEventListener("pointerdown", (event) => {
    if (!data) return;
    scrubbing = true;
    svg.setPointerCapture(event.pointerId);
    scrubTo(event);
  });
  svg.addEventListener("pointermove", (event) => {
    if (!data) return;
    if (scrubbing) scrubTo(event);
    readout(stepAt(event));
  });
  const endScrub = (event) => {
    scrubbing = false;
    if (svg.hasPointerCapture(event.pointerId)) svg.releasePointerCapture(event.pointerId);
  };
  svg.addEventListener("pointerup", endScrub);
  svg.addEventListener("pointercancel", endScrub);
  // The picture: full screen, and a zoom (2x, 4x) that follows the pointer across the picture.
  const screen = document.querySelector("#review .screen");
  $("btn-fullscreen").addEventListener("click", () =>
    document.fullscreenElement ? document.exitFullscreen() : screen.requestFullscreen());
  let zoom = 1;
  $("btn-zoom").addEventListener("click", () => {
    zoom = zoom === 1 ? 2 : zoom === 2 ? 4 : 1;
    screen.style.setProperty("--zoom", zoom);
    screen.classList.toggle("zoomed", zoom > 1);
    $("btn-zoom").textContent = `zoom ${zoom}×`;
    $("btn-zoom").setAttribute("aria-pressed", String(zoom > 1));
  });
  screen.addEventListener("pointermove", (event) => {
    if (zoom === 1) return;
    const box = screen.getBoundingClientRect();
    screen.style.setProperty("--zoom-x", `${((event.clientX - box.left) / box.width) * 100}%`);
    screen.style.setProperty("--zoom-y", `${((event.clientY - box.top) / box.height) * 100}%`);
  });
  $("btn-prev").addEventListener("click", () => step(current - 1));
  $("btn-next").addEventListener("click", () => step(current + 1));
  $("btn-start").addEventListener("click", () => step(0));
  $("btn-end").addEventListener("click", () => step(data.steps.length));
  $("btn-play").addEventListener("click", () => (video.paused ? play() : pause()));
  $("speed").addEventListener("change", () => { video.playbackRate = parseFloat($("speed").value); });
  video.addEventListener("ended", () => pause());
  keys({
    ready: () => data !== null,
    current: () => current,
    last: () => data.steps.length,
    step,
    toggle: () => (video.paused ? play() : pause()),
  });
  video.addEventListener("timeupdate", () => {
    if (video.paused || !data.fps) return;
    if (videoStep() !== current) show(videoStep(), false);
  });

  fetch(root.dataset.timeline, { credentials: "same-origin" })
    .then((r) => r.json())
    .then((json) => {
      data = json;
      document.getElementById("step-count").textContent = data.steps.length;
      legend();
      draw();
      events();
      const linked = linkedStep();
      show(linked === null ? 0 : linked);
      root.dataset.ready = "1";
    });
})();

// Two attempts side by side with review's player: both at the same step, the exact frame of each while paused or
// stepping, the stored videos while playing (one request each, not one picture a step); each one's action trace
// with its legend, value scale and step axis, and a cursor. An attempt that ended first stays on its last step.
(function () {
  "use strict";
  const root = document.getElementById("pair");
  if (!root) return;
  const { el, titled, rounded, legendItem, ticks, linkedStep, remember, keys } = window.RSISteps;
  const $ = (id) => document.getElementById(id);
  const sides = ["side-a", "side-b"].map((id) => {
    const node = $(id);
    return { node, data: null, exact: node.querySelector(".pair-frame"), video: node.querySelector(".pair-video") };
  });
  let current = 0;
  let playing = false;
  const last = () => Math.max(...sides.map((s) => s.data.steps.length));
  const own = (side, step) => Math.min(step, side.data.steps.length);

  const LEFT = 44, HEIGHT = 150, AXIS = 132;
  function trace(side) {
    const svg = side.node.querySelector(".trace");
    const width = svg.clientWidth || 500, n = Math.max(1, last());
    side.x = (step) => LEFT + (step / n) * (width - LEFT - 8);
    const comps = side.data.action_components;
    const scale = Math.max(1, ...side.data.steps.flatMap((s) => s.action.map(Math.abs)));
    const y = (v) => 60 - (v / scale) * 52;
    el("line", { x1: LEFT, x2: side.x(n), y1: y(0), y2: y(0), class: "axis" }, svg);
    for (const [v, label] of [[scale, "+" + rounded(scale)], [0, "0"], [-scale, "−" + rounded(scale)]]) {
      el("text", { x: LEFT - 4, y: y(v) + 3, class: "label value-label" }, svg).textContent = label;
    }
    comps.forEach((name, i) => {
      const points = side.data.steps.map((s, k) => `${side.x(k + 1)},${y(s.action[i])}`).join(" ");
      titled(el("polyline", { points, class: `series s${i % 6}`, fill: "none" }, svg), name);
    });
    el("line", { x1: side.x(0), x2: side.x(n), y1: AXIS, y2: AXIS, class: "axis" }, svg);
    for (const s of ticks(n)) {
      el("line", { x1: side.x(s), x2: side.x(s), y1: AXIS - 3, y2: AXIS + 3, class: "axis" }, svg);
      el("text", { x: side.x(s), y: AXIS + 14, class: "label tick-label" }, svg).textContent = s;
    }
    side.cursor = el("rect", { x: 0, y: 0, width: 2, height: AXIS, class: "cursor" }, svg);
    const legend = side.node.querySelector(".side-legend");
    comps.forEach((name, i) => legend.append(legendItem(`series s${i % 6}`, name)));
    legend.append(Object.assign(document.createElement("span"), { className: "muted", textContent: `values ±${rounded(scale)}, steps across` }));
  }

  function show(step, seek = true) {
    current = Math.max(0, Math.min(last(), step));
    $("step-number").textContent = current;
    root.dataset.step = current;
    remember(current);
    for (const side of sides) {
      const at = own(side, current);
      if (!playing || !side.video) {
        side.exact.src = side.node.dataset.frame.replace(/0\.png$/, at + ".png");
        side.exact.dataset.step = at;
      }
      if (seek && side.video && side.data.fps) {
        const frame = side.data.frames.indexOf(at);
        if (frame >= 0) side.video.currentTime = (frame + 0.5) / side.data.fps;
      }
      const record = at > 0 ? side.data.steps[at - 1] : null;
      side.node.querySelector(".side-step").textContent = record
        ? `step ${at}: ${record.action.map(rounded).join(", ")}` + (at < current ? " (it ended here)" : "")
        : "the reset frame";
      side.cursor.setAttribute("x", side.x(at) - 1);
    }
    $("btn-prev").disabled = $("btn-start").disabled = current === 0;
    $("btn-next").disabled = $("btn-end").disabled = current === last();
  }

  // The step a side's video shows now (its last once it ended).
  function videoStep(side) {
    const { frames, fps } = side.data;
    if (!side.video || !fps || side.video.ended) return side.data.steps.length;
    return frames[Math.min(frames.length - 1, Math.floor(side.video.currentTime * fps))];
  }

  function setPlaying(on) {
    playing = on;
    for (const side of sides) {
      if (!side.video) continue;
      side.video.hidden = !on;
      side.exact.hidden = on;
    }
    $("btn-play").textContent = on ? "❚❚ pause" : "▶ play";
    $("view-mode").textContent = on ? "videos" : "exact frames";
  }

  function play() {
    if (current >= last()) show(0);
    setPlaying(true);
    const rate = parseFloat($("speed").value);
    for (const side of sides) {
      if (side.video && own(side, current) < side.data.steps.length) {
        side.video.playbackRate = rate;
        side.video.play();
      }
    }
  }

  function pause() {
    sides.forEach((side) => side.video && side.video.pause());
    setPlaying(false);
    show(Math.max(...sides.map(videoStep).map((s, i) => Math.min(s, sides[i].data.steps.length))), false);
  }

  function following() {
    if (!playing) return;
    const steps = sides.map(videoStep);
    show(Math.max(...steps), false);
    if (sides.every((side) => !side.video || side.video.ended || side.video.paused)) pause();
  }

  const step = (to) => { if (playing) pause(); show(to); };
  $("btn-prev").addEventListener("click", () => step(current - 1));
  $("btn-next").addEventListener("click", () => step(current + 1));
  $("btn-start").addEventListener("click", () => step(0));
  $("btn-end").addEventListener("click", () => step(last()));
  $("btn-play").addEventListener("click", () => (playing ? pause() : play()));
  $("speed").addEventListener("change", () => sides.forEach((s) => { if (s.video) s.video.playbackRate = parseFloat($("speed").value); }));
  for (const side of sides) {
    if (side.video) {
      side.video.addEventListener("timeupdate", following);
      side.video.addEventListener("ended", following);
    }
  }
  keys({ ready: () => root.dataset.ready === "1", current: () => current, last, step, toggle: () => (playing ? pause() : play()) });

  Promise.all(sides.map((s) => fetch(s.node.dataset.timeline, { credentials: "same-origin" }).then((r) => r.json())))
    .then((timelines) => {
      timelines.forEach((data, i) => { sides[i].data = data; });
      $("step-count").textContent = last();
      sides.forEach(trace);
      const linked = linkedStep();
      show(linked === null ? 0 : linked);
      root.dataset.ready = "1";
    });
})();

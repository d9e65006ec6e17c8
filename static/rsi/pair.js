// Two attempts side by side, kept at the same step: the exact frame of each (or its last, once it
// ended), and each one's action trace with a cursor. Playing advances both one step at a time.
(function () {
  "use strict";
  const root = document.getElementById("pair");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  const sides = ["side-a", "side-b"].map((id) => ({ node: $(id), data: null }));
  let current = 0;
  let timer = null;
  const last = () => Math.max(...sides.map((s) => s.data.steps.length));

  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    parent.append(node);
    return node;
  }

  function trace(side) {
    const svg = side.node.querySelector(".trace");
    const width = svg.clientWidth || 500, n = Math.max(1, last());
    side.x = (step) => 4 + (step / n) * (width - 8);
    const y = (v) => 60 - Math.max(-1.6, Math.min(1.6, v)) * 35;
    side.data.action_components.forEach((name, i) => {
      const points = side.data.steps.map((s, k) => `${side.x(k + 1)},${y(s.action[i])}`).join(" ");
      el("polyline", { points, class: `series s${i}`, fill: "none" }, svg);
    });
    side.cursor = el("rect", { x: 0, y: 0, width: 2, height: 120, class: "cursor" }, svg);
  }

  function show(step) {
    current = Math.max(0, Math.min(last(), step));
    $("step-number").textContent = current;
    root.dataset.step = current;
    for (const side of sides) {
      const own = Math.min(current, side.data.steps.length); // an attempt that ended stays on its last step
      const img = side.node.querySelector(".pair-frame");
      img.src = side.node.dataset.frame.replace(/0\.png$/, own + ".png");
      img.dataset.step = own;
      const record = own > 0 ? side.data.steps[own - 1] : null;
      side.node.querySelector(".side-step").textContent = record
        ? `step ${own}: ${record.action.map((v) => Number(v.toFixed(3))).join(", ")}` + (own < current ? " (ended)" : "")
        : "the reset frame";
      side.cursor.setAttribute("x", side.x(own) - 1);
    }
  }

  function pause() {
    clearInterval(timer);
    timer = null;
    $("btn-play").textContent = "▶ play";
  }

  function play() {
    if (current >= last()) show(0);
    const fps = sides[0].data.fps || 25;
    timer = setInterval(() => (current >= last() ? pause() : show(current + 1)), 1000 / (fps * parseFloat($("speed").value)));
    $("btn-play").textContent = "❚❚ pause";
  }

  const step = (to) => { pause(); show(to); };
  $("btn-prev").addEventListener("click", () => step(current - 1));
  $("btn-next").addEventListener("click", () => step(current + 1));
  $("btn-start").addEventListener("click", () => step(0));
  $("btn-end").addEventListener("click", () => step(last()));
  $("btn-play").addEventListener("click", () => (timer ? pause() : play()));
  $("speed").addEventListener("change", () => { if (timer) { pause(); play(); } });

  Promise.all(sides.map((s) => fetch(s.node.dataset.timeline, { credentials: "same-origin" }).then((r) => r.json())))
    .then((timelines) => {
      timelines.forEach((data, i) => { sides[i].data = data; });
      sides.forEach(trace);
      show(0);
      root.dataset.ready = "1";
    });
})();

// What the review and side-by-side players share: SVG drawing, step ticks, the #step=N link and the keys.
window.RSISteps = (function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    parent.append(node);
    return node;
  }

  function titled(node, text) {
    node.append(Object.assign(document.createElementNS(SVG, "title"), { textContent: text }));
    return node;
  }

  // A value rounded for reading (three decimals, or two significant in exponent form when tiny or huge); the
  // full value stays in a title beside it.
  function rounded(value) {
    if (value === null || value === undefined) return "–";
    const magnitude = Math.abs(value);
    if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e4)) return value.toExponential(2);
    return String(Number(value.toFixed(3)));
  }

  // A legend entry: a key drawn as a line, a tick, a dot or a box in the class of what it stands for, and its label.
  function legendItem(cls, label, shape = "line", fill = "") {
    const item = document.createElement("span");
    item.className = "legend-item";
    const key = document.createElementNS(SVG, "svg");
    key.setAttribute("width", 18);
    key.setAttribute("height", 10);
    if (shape === "line") el("line", { x1: 0, x2: 18, y1: 5, y2: 5, class: cls }, key);
    else if (shape === "tick") el("line", { x1: 9, x2: 9, y1: 0, y2: 10, class: cls }, key);
    else if (shape === "dot") el("circle", { cx: 9, cy: 5, r: 4, class: cls }, key);
    else el("rect", { x: 2, y: 1, width: 14, height: 8, class: cls, fill }, key);
    item.append(key, " " + label);
    return item;
  }

  // About ten step ticks on round numbers (1, 2, 5 times a power of ten) from 0 to n.
  function ticks(n) {
    const raw = Math.max(1, n / 10);
    const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    const every = [1, 2, 5, 10].map((m) => m * magnitude).find((v) => v >= raw);
    const out = [];
    for (let s = 0; s <= n; s += every) out.push(s);
    return out;
  }

  // The step a #step=N link names, or null.
  function linkedStep() {
    const match = location.hash.match(/step=(\d+)/);
    return match ? parseInt(match[1], 10) : null;
  }

  function remember(step) {
    history.replaceState(null, "", "#step=" + step);
    const link = document.getElementById("deep-link");
    if (link) link.href = "#step=" + step;
  }

  // ← → Home End step, Space plays or pauses; keys typed into a field stay there. `player` has current(), last(),
  // step(n) and toggle(); a changed #step=N (the reader edits the address) goes there too.
  function keys(player) {
    document.addEventListener("keydown", (event) => {
      if (!player.ready() || ["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName)) return;
      const moves = { ArrowRight: player.current() + 1, ArrowLeft: player.current() - 1, Home: 0, End: player.last() };
      if (event.key in moves) {
        event.preventDefault();
        player.step(moves[event.key]);
      } else if (event.key === " ") {
        event.preventDefault();
        player.toggle();
      }
    });
    window.addEventListener("hashchange", () => {
      const linked = linkedStep();
      if (player.ready() && linked !== null && linked !== player.current()) player.step(linked);
    });
  }

  return { SVG, el, titled, rounded, legendItem, ticks, linkedStep, remember, keys };
})();

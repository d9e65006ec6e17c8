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

  return { SVG, el, titled, ticks, linkedStep, remember, keys };
})();

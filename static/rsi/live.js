// Live view: pictures as binary frames (acknowledged one at a time), events as JSON, interventions.
(function () {
  "use strict";
  const root = document.getElementById("live");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const img = $("live-frame");
  const placeholder = $("live-placeholder");
  let pictured = false; // a frame has been shown: it stays (while paused too) until the next one
  const latencies = (window.rsiLatencies = []);
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  let socket = null;
  let retryMs = 1000; // after a lost connection (a restarted server): 1 s, doubling to 10 s
  let lastUrl = null;
  let takenOver = false;
  let paused = false;
  let ended = false; // the last control has executed: the attempt is closing, no intervention is taken
  let status = root.dataset.status;
  const logged = new Set();
  const WITHDRAWS = {
    pause: "Pause this attempt? The episode becomes non-autonomous for good: it is reported apart from the policy's own results.",
    take_over: "Take over this attempt? The episode becomes non-autonomous for good: it is reported apart from the policy's own results.",
    stop: "Stop this attempt now? It ends as human_stop and the episode becomes non-autonomous for good.",
    pause_at: "Pause this attempt when it reaches that step? Once the pause holds, the episode is non-autonomous for good: it is reported apart from the policy's own results. A pause the episode never reaches changes nothing.",
  };

  // Each button only while it applies: resume while paused, release while taken over.
  function buttons() {
    const live = status === "running" && !ended;
    const enable = {
      "btn-pause": live && !paused,
      "btn-resume": live && paused,
      "btn-take-over": live && !takenOver,
      "btn-release": live && takenOver,
      "btn-stop": live,
      "btn-send": live && takenOver,
      "btn-annotate": live,
      "btn-pause-at": live && !paused,
    };
    for (const [id, on] of Object.entries(enable)) if ($(id)) $(id).disabled = !on;
    $("live-status").textContent = status !== "running" ? status : ended ? "closing" : takenOver ? "taken over" : paused ? "paused" : "running";
    // What the enabled buttons would do now, so that Resume and Release are never a guess.
    const hint = $("control-hint");
    if (hint) {
      hint.textContent = ended && status === "running" ? "The last control has executed: the attempt is closing, and nothing is left to intervene in."
        : !live ? ""
        : takenOver && paused ? "Held while taken over: Resume lets your sent actions drive it; Release hands it back to the policy."
        : takenOver ? "You drive it: each action you send is checked and executed; Release hands it back to the policy."
        : paused ? "Held between decisions: Resume lets the policy go on; Take over to drive it yourself."
        : "";
    }
  }

  function counters(c) {
    if (!c) return;
    $("live-calls").textContent = `${c.policy_calls} / ${c.max_policy_calls}`;
    $("live-controls").textContent = `${c.environment_steps} / ${c.max_executable_steps}`;
    $("live-decisions").textContent = c.action_decisions;
    $("live-rejected").textContent = c.rejected_calls;
  }

  function apply(state) {
    if (!state) return;
    if (state.status) status = state.status;
    if (state.autonomous === false) $("autonomy").hidden = false;
    if (state.taken_over !== undefined) takenOver = state.taken_over;
    if (state.paused !== undefined) paused = state.paused;
    if (state.controls_ended) ended = true;
    if (state.status === "finished") finished();
    buttons();
    if (state.step !== undefined) $("live-step").textContent = state.step;
    counters(state.counters);
    if (state.instruction) $("live-instruction").textContent = state.instruction;
    if (!pictured) placeholder.textContent = waiting();
  }

  // What the picture's place says until the first frame arrives.
  function waiting() {
    if (status === "finished") return "The attempt ended before a picture was sent: its review page has its evidence.";
    if (status === "running" && paused) return "Paused before the first picture: it comes when the episode goes on.";
    if (status === "running") return "Starting: the simulator is loading; the picture comes with the first observation.";
    if (status === "queued") return "Queued: waiting for an executor slot.";
    if (status === "pending") return "Not started yet: the picture comes with the episode's first observation.";
    return "Waiting for the connection.";
  }

  function log(text, seq) {
    if (seq !== undefined) {
      if (logged.has(seq)) return; // an event seen twice (a reconnect) is logged once
      logged.add(seq);
    }
    const item = document.createElement("li");
    item.textContent = text;
    $("live-log").append(item); // oldest first, as a log reads
  }

  // The executed action by the contract's groups (a humanoid's 36 numbers by body part), the rest as given.
  const groups = JSON.parse(document.getElementById("action-groups").textContent);
  function grouped(action) {
    const shown = new Set(groups.flatMap((g) => g.components));
    const parts = groups.map((g) => `${g.label}: ${g.components.map((i) => action[i].toFixed(3)).join(", ")}`);
    const rest = action.map((v, i) => [v, i]).filter(([, i]) => !shown.has(i)).map(([v]) => v.toFixed(3));
    return groups.length > 1 ? parts.join(" · ") + (rest.length ? " · " + rest.join(", ") : "") : action.map((v) => v.toFixed(3)).join(", ");
  }

  function event(e) {
    latencies.push(Date.now() - e.t);
    if (e.kind === "step") {
      $("live-step").textContent = e.step;
      root.dataset.step = e.step;
      counters(e.counters);
      $("live-instruction").textContent = e.instruction;
      if (e.action) {
        $("live-action").textContent = grouped(e.action) + (e.actor === "human" ? " (human)" : "");
        $("live-action").title = "full precision: " + JSON.stringify(e.action);
      }
      if (e.chunk) {
        // Rounded like the action above it; the exact values on hover.
        const rows = e.chunk.map((a) => "[" + a.map((v) => v.toFixed(3)).join(", ") + "]");
        $("live-chunk").textContent = `${e.chunk.length} action${e.chunk.length === 1 ? "" : "s"}: ${rows.join(" ")}`;
        $("live-chunk").title = "full precision: " + JSON.stringify(e.chunk);
      }
      if (e.decision) $("live-decision").textContent = `#${e.decision} (${e.actor})`;
      $("live-latency").textContent = e.latency_ms != null ? e.latency_ms.toFixed(1) + " ms" : "–";
      if (e.native_success !== undefined) $("live-success").textContent = String(e.native_success);
      if (status !== "running") { status = "running"; buttons(); }
    } else if (e.kind === "started") {
      status = "running";
      buttons();
    } else if (e.kind === "call") {
      counters(e.counters);
    } else if (e.kind === "intervention") {
      log(`${e.intervention} by ${e.user} at step ${e.step}${e.note ? ": " + e.note : ""}`, e.seq);
      if (e.autonomous === false) $("autonomy").hidden = false;
      if (e.intervention === "pause") paused = true;
      if (e.intervention === "resume") paused = false;
      if (e.intervention === "take_over") takenOver = true;
      if (e.intervention === "release") takenOver = false;
      buttons();
    } else if (e.kind === "rejected") {
      // One line per rejected decision (the episode also says so to the runner's control: not logged again).
      const what = e.actor === "human" ? "your action" : "the policy's reply";
      log(`decision #${e.decision}: ${what} rejected: ${e.violation && e.violation.message}`, e.seq);
    } else if (e.kind === "paused_at_step") {
      log(`paused at step ${e.step}, as set`, e.seq);
      paused = true;
      buttons();
    } else if (e.kind === "controls_ended") {
      ended = true;
      log("the last control has executed: the controls have ended", e.seq);
      buttons();
    } else if (e.kind === "hold_expired") {
      log(`held longer than ${e.max_hold_s} s: the attempt stops`, e.seq);
    } else if (e.kind === "finished") {
      status = "finished";
      if (e.autonomous === false) $("autonomy").hidden = false;
      finished();
      buttons();
    }
  }

  function finished() {
    root.dataset.finished = "1";
    $("finished-banner").hidden = false;
  }

  function onmessage(message) {
    if (typeof message.data === "string") {
      const data = JSON.parse(message.data);
      if (data.type === "state") {
        if (root.dataset.connected === "0") $("live-message").textContent = "reconnected";
        apply(data.state);
        root.dataset.connected = "1";
        retryMs = 1000;
      }
      else if (data.type === "events") data.events.forEach(event);
      else if (data.type === "refused") $("live-message").textContent = `refused ${data.kind}: ${data.reason}`;
      // An intervention takes effect when accepted; an action is only handed over: the episode checks it, and a
      // rejection comes back as an event.
      else if (data.type === "accepted") $("live-message").textContent = data.event.intervention !== "action" ? `${data.event.intervention} accepted` : "action sent: the episode checks it before executing it";
      return;
    }
    const view = new DataView(message.data);
    const seq = view.getUint32(0), step = view.getUint32(4);
    const url = URL.createObjectURL(new Blob([message.data.slice(8)], { type: "image/jpeg" }));
    img.onload = () => {
      if (!pictured) { pictured = true; img.hidden = false; placeholder.hidden = true; }
      if (lastUrl) URL.revokeObjectURL(lastUrl);
      lastUrl = url;
      img.dataset.step = step;
      socket.send(JSON.stringify({ type: "ack", seq }));
    };
    img.src = url;
  }

  function connect() {
    socket = new WebSocket(scheme + location.host + root.dataset.socket);
    socket.binaryType = "arraybuffer";
    socket.onmessage = onmessage;
    socket.onclose = () => {
      root.dataset.connected = "0";
      if (root.dataset.finished) return;
      status = "disconnected";
      buttons();
      $("live-message").textContent = `connection lost; reconnecting in ${retryMs / 1000} s`;
      setTimeout(connect, retryMs);
      retryMs = Math.min(retryMs * 2, 10000);
    };
  }
  connect();

  function intervene(kind, extra = {}) {
    socket.send(JSON.stringify({ type: "intervene", kind, ...extra }));
  }
  document.querySelectorAll("button[data-kind]").forEach((b) =>
    b.addEventListener("click", () => {
      const warning = WITHDRAWS[b.dataset.kind];
      if (warning && !window.confirm(warning)) return;
      intervene(b.dataset.kind);
    }),
  );
  buttons();
  const manual = () => Array.from(document.querySelectorAll("#manual input")).map((i) => parseFloat(i.value) || 0);
  if ($("btn-send")) $("btn-send").addEventListener("click", () => intervene("action", { action: manual() }));
  // A pause set for a step: it holds once the episode has executed that step (at the decision boundary there).
  if ($("btn-pause-at")) $("btn-pause-at").addEventListener("click", () => {
    const step = parseInt($("pause-at").value, 10);
    if (Number.isNaN(step) || !window.confirm(WITHDRAWS.pause_at)) return;
    intervene("pause_at", { action: [step] });
  });
  if ($("btn-annotate")) $("btn-annotate").addEventListener("click", () => { intervene("annotate", { note: $("note").value }); $("note").value = ""; });
  const keys = { a: [0, -0.5], d: [0, 0.5], s: [1, -0.5], w: [1, 0.5], f: [2, -0.5], r: [2, 0.5] };
  let gripper = 1; // the last component: open (1) until G closes it (-1); every key action carries it
  function keyAction(key) {
    const n = parseInt(root.dataset.contract, 10);
    const action = new Array(n).fill(0);
    if (key in keys) action[keys[key][0]] = keys[key][1];
    else if (key === "g") gripper = -gripper;
    else return false;
    action[n - 1] = gripper;
    intervene("action", { action });
    return true;
  }
  document.addEventListener("keydown", (e) => {
    if (!takenOver || e.target.tagName === "INPUT") return;
    keyAction(e.key);
  });
  // The touch pad sends what the keys send (a phone has no A/D, W/S keys to type).
  document.querySelectorAll("#touch-pad button[data-key]").forEach((b) =>
    b.addEventListener("click", () => { if (takenOver) keyAction(b.dataset.key); }));
})();

// Launch form: only the chosen benchmark's fields, tasks, sensor tracks and task scopes; what an empty field stands
// for as its placeholder; "all tasks" stands for every task; the policy picker fills the policy field.
(function () {
  "use strict";
  const benchmark = document.getElementById("id_benchmark");
  const tasks = document.getElementById("id_tasks");
  const all = document.getElementById("id_all_tasks");
  if (!benchmark || !tasks) return;
  const defaults = JSON.parse(document.getElementById("launch-defaults").textContent);
  const budgetMode = document.getElementById("id_budget_mode");

  // Sensor tracks and task scopes are selects grouped by benchmark: only the chosen one's group is offered.
  const grouped = [document.getElementById("id_sensors"), document.getElementById("id_task_scope")].filter(Boolean);
  // The task checkboxes come in one block per benchmark, each headed by the benchmark's name.
  const taskGroups = Array.from(tasks.children).filter((node) => node.querySelector(":scope > label"));

  function follow() {
    const chosen = benchmark.value;
    for (const select of grouped) {
      select.querySelectorAll("optgroup").forEach((group) => {
        const shown = group.label === chosen;
        group.hidden = !shown;
        group.disabled = !shown;
        if (!shown) Array.from(group.children).forEach((option) => { option.selected = false; });
      });
    }
    for (const group of taskGroups) {
      const shown = group.querySelector(":scope > label").textContent.trim() === chosen;
      group.hidden = !shown;
      if (!shown) group.querySelectorAll("input").forEach((box) => { box.checked = false; });
    }
    // A field (or a whole section) that means nothing for this benchmark is hidden and sends nothing.
    document.querySelectorAll("#launch-form [data-benchmarks]").forEach((node) => {
      const shown = node.dataset.benchmarks.split(" ").includes(chosen);
      node.hidden = !shown;
      node.querySelectorAll("input, select").forEach((input) => { input.disabled = !shown; });
    });
    const readiness = document.querySelector(`#readiness tr[data-benchmark="${chosen}"]`);
    benchmark.classList.toggle("not-ready", !!readiness && readiness.dataset.ready === "0");
    placeholders();
    allTasks();
  }
  // Empty fields show what they stand for: the benchmark's default, in the chosen budget mode.
  function placeholders() {
    const mine = defaults[benchmark.value];
    if (!mine) return;
    const mode = (budgetMode && budgetMode.value) || mine.budget_mode;
    for (const [name, value] of Object.entries(mine.budgets[mode] || {})) {
      const input = document.getElementById(`id_${name}`);
      if (input) input.placeholder = `default ${value}`;
    }
    for (const [name, value] of Object.entries(mine.choices)) {
      const blank = document.querySelector(`#id_${name} option[value=""]`);
      if (blank) blank.textContent = `default (${value})`;
    }
    if (budgetMode) budgetMode.querySelector('option[value=""]').textContent = `default (${mine.budget_mode})`;
  }
  function allTasks() {
    if (!all) return;
    tasks.querySelectorAll("input").forEach((box) => { box.disabled = all.checked; });
    tasks.classList.toggle("muted", all.checked);
  }
  // A benchmark whose fast mode fixes the seed (SIMPLE) gets that seed; another one keeps what was typed.
  const fastSeeds = JSON.parse(document.getElementById("fast-seeds").textContent);
  const seed = document.getElementById("id_seed");
  function fastSeed() {
    if (seed && benchmark.value in fastSeeds) seed.value = fastSeeds[benchmark.value];
  }
  // The picker of registered policies writes the policy field; typing a registered name there selects it.
  const picker = document.getElementById("policy-picker");
  const policy = document.getElementById("id_policy");
  if (picker && policy) {
    const registered = new Set(Array.from(picker.options).map((option) => option.value).filter(Boolean));
    picker.addEventListener("change", () => {
      policy.value = picker.value;
      if (!picker.value) policy.focus();
    });
    const match = () => { picker.value = registered.has(policy.value.trim()) ? policy.value.trim() : ""; };
    policy.addEventListener("input", match);
    match();
  }
  // The baseline picker: choosing a finished campaign fills its benchmark, cells and protocol, as the plan must be.
  const against = document.getElementById("id_against");
  const plans = new Map(JSON.parse(document.getElementById("baseline-plans").textContent).map((b) => [String(b.id), b]));
  function fillFrom(initial) {
    benchmark.value = initial.benchmark;
    follow();
    if (all) { all.checked = false; allTasks(); }
    const chosen = new Set(initial.tasks || []);
    const group = taskGroups.find((g) => !g.hidden);
    if (group) group.querySelectorAll("input").forEach((box) => { box.checked = chosen.has(box.value); });
    for (const [name, value] of Object.entries(initial)) {
      if (name === "benchmark" || name === "tasks") continue;
      const input = document.getElementById(`id_${name}`);
      if (!input) continue;
      if (input.type === "checkbox") input.checked = !!value;
      else input.value = value;
    }
    placeholders();
  }
  if (against) {
    const filled = document.getElementById("baseline-filled");
    against.addEventListener("input", () => {
      const baseline = plans.get(against.value.trim());
      if (baseline) fillFrom(baseline.initial);
      if (filled) filled.hidden = !baseline;
    });
  }
  benchmark.addEventListener("change", follow);
  benchmark.addEventListener("change", fastSeed);
  if (budgetMode) budgetMode.addEventListener("change", placeholders);
  if (all) all.addEventListener("change", allTasks);
  follow();
})();

// Launch form: the task list, sensor tracks and task scopes follow the chosen benchmark; "all tasks" stands for every one of them.
(function () {
  "use strict";
  const benchmark = document.getElementById("id_benchmark");
  const tasks = document.getElementById("id_tasks");
  const all = document.getElementById("id_all_tasks");
  if (!benchmark || !tasks) return;

  // Tasks, sensor tracks and task scopes are grouped by benchmark: only the chosen one's group is offered.
  const grouped = [tasks, document.getElementById("id_sensors"), document.getElementById("id_task_scope")].filter(Boolean);

  function follow() {
    for (const select of grouped) {
      select.querySelectorAll("optgroup").forEach((group) => {
        const shown = group.label === benchmark.value;
        group.hidden = !shown;
        group.disabled = !shown;
        if (!shown) Array.from(group.children).forEach((option) => { option.selected = false; });
      });
    }
    const readiness = document.querySelector(`#readiness tr[data-benchmark="${benchmark.value}"]`);
    benchmark.classList.toggle("not-ready", !!readiness && readiness.dataset.ready === "0");
  }
  function allTasks() {
    if (all) tasks.disabled = all.checked;
  }
  // A benchmark whose fast mode fixes the seed (SIMPLE) gets that seed; another one keeps what was typed.
  const fastSeeds = JSON.parse(document.getElementById("fast-seeds").textContent);
  const seed = document.getElementById("id_seed");
  function fastSeed() {
    if (seed && benchmark.value in fastSeeds) seed.value = fastSeeds[benchmark.value];
  }
  benchmark.addEventListener("change", follow);
  benchmark.addEventListener("change", fastSeed);
  if (all) all.addEventListener("change", allTasks);
  follow();
  allTasks();
})();

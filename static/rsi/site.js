// On every page: times in the reader's local time, and the menu button of narrow screens.
(function () {
  "use strict";
  // Times are stored and sent in UTC; each <time datetime> is shown in local time (UTC on hover).
  document.querySelectorAll("time[datetime]").forEach((node) => {
    const when = new Date(node.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) return;
    node.title = node.getAttribute("datetime");
    node.textContent = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  });
  const toggle = document.getElementById("menu-toggle");
  const menu = document.getElementById("site-menu");
  if (toggle && menu) {
    toggle.addEventListener("click", () => {
      const open = !menu.classList.contains("open");
      menu.classList.toggle("open", open);
      toggle.setAttribute("aria-expanded", String(open));
    });
  }
})();

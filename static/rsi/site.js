// On every page: times in the reader's local time, the menu button of narrow screens, and the copy buttons of
// shortened identifiers.
(function () {
  "use strict";
  // Times are stored and sent in UTC; each <time datetime> is shown in local time (UTC on hover).
  document.querySelectorAll("time[datetime]").forEach((node) => {
    const when = new Date(node.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) return;
    node.title = node.getAttribute("datetime");
    // In a table, to the minute (the seconds are in the title): the column stays narrow.
    const style = node.closest("td") ? { dateStyle: "medium", timeStyle: "short" } : { dateStyle: "medium", timeStyle: "medium" };
    node.textContent = when.toLocaleString(undefined, style);
  });
  // A shortened identifier's button copies its full value; where the clipboard is not offered (plain http on
  // another host) the value is selected for Ctrl-C instead.
  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.copy[data-copy]");
    if (!button) return;
    const value = button.dataset.copy;
    const done = (how) => {
      button.classList.add("copied");
      button.title = how;
      setTimeout(() => button.classList.remove("copied"), 1500);
    };
    const select = () => {
      const code = button.parentElement.querySelector("code");
      if (code) window.getSelection().selectAllChildren(code);
      done("selected: press Ctrl-C to copy");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(value).then(() => done("copied"), select);
    } else {
      select();
    }
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

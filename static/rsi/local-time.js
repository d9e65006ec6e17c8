// Times are stored and sent in UTC; each <time datetime> is shown in the reader's local time.
(function () {
  "use strict";
  document.querySelectorAll("time[datetime]").forEach((node) => {
    const when = new Date(node.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) return;
    node.title = node.getAttribute("datetime");
    node.textContent = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  });
})();

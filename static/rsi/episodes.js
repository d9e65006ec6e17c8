// The review page's episode links by key: k the previous episode, j the next, f the next failure, n the next
// non-autonomous one (each link says its key as data-key); keys typed into a field stay there.
(function () {
  "use strict";
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName)) return;
    const link = document.querySelector(`#episode-nav a[data-key="${event.key}"]`);
    if (link) {
      event.preventDefault();
      link.click();
    }
  });
})();

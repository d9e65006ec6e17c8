// The review page of an attempt that has not ended: follow its status, and show its evidence once it has.
(function () {
  "use strict";
  const box = document.getElementById("unfinished");
  if (!box) return;
  const POLL_MS = 3000;
  async function poll() {
    try {
      const response = await fetch(box.dataset.follow, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok && (await response.json()).record.status !== box.dataset.status) {
        location.reload(); // started, or ended: the page as it is now
        return;
      }
    } catch (error) {
      // the server restarting: ask again later
    }
    setTimeout(poll, POLL_MS);
  }
  setTimeout(poll, POLL_MS);
})();

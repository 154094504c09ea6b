// The operations page's buttons: each change is a POST with the page's CSRF token; the page
// then reloads to show the state as the commands now list it.
"use strict";

(function () {
  const main = document.getElementById("ops");
  if (!main) return;
  const status = document.getElementById("ops-status");
  const DONE = "clawloop-ops-done";
  const enable = (on) => main.querySelectorAll("button.act").forEach((b) => (b.disabled = !on));

  window.clawloopAct.showDone(DONE, status);

  main.querySelectorAll("button.act").forEach((button) => {
    button.addEventListener("click", async () => {
      enable(false);
      status.textContent = "working…";
      await window.clawloopAct.post({
        url: "/ops/act",
        body: { action: button.dataset.action, target: button.dataset.target },
        main,
        status,
        key: DONE,
        refused: "not done: ",
        enable: () => enable(true),
      });
    });
  });
})();

// The operations page's buttons: each change is a POST with the page's CSRF token; the page
// then reloads to show the state as the commands now list it.
"use strict";

(function () {
  const main = document.getElementById("ops");
  if (!main) return;
  const status = document.getElementById("ops-status");
  const DONE = "clawloop-ops-done";

  // What the last change did, kept across the reload that shows its effect.
  const last = window.sessionStorage.getItem(DONE);
  if (last) {
    status.textContent = last;
    window.sessionStorage.removeItem(DONE);
  }

  main.querySelectorAll("button.act").forEach((button) => {
    button.addEventListener("click", async () => {
      main.querySelectorAll("button.act").forEach((b) => (b.disabled = true));
      status.textContent = "working…";
      let r;
      try {
        r = await fetch("/ops/act", {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-csrf-token": main.dataset.csrf,
            "x-clawloop-session": main.dataset.session,
          },
          body: JSON.stringify({ action: button.dataset.action, target: button.dataset.target }),
          credentials: "same-origin",
        });
      } catch (err) {
        status.textContent = "the connection to the server broke: " + err;
        main.querySelectorAll("button.act").forEach((b) => (b.disabled = false));
        return;
      }
      const text = await r.text();
      let reply = {};
      try {
        reply = JSON.parse(text);
      } catch (err) {
        reply = { error: text };
      }
      if (r.ok) {
        window.sessionStorage.setItem(DONE, reply.done);
        window.location.reload();
      } else {
        status.textContent = "not done: " + (reply.error || text);
        main.querySelectorAll("button.act").forEach((b) => (b.disabled = false));
      }
    });
  });
})();

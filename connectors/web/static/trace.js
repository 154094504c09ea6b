// A timeline's grade buttons: each grade is a POST with the page's CSRF token, as
// `agent traces grade ID good|bad --note` would write it; the page then reloads to show it.
"use strict";

(function () {
  const main = document.getElementById("trace");
  if (!main) return;
  const status = document.getElementById("grade-status");
  const note = document.getElementById("grade-note");
  const buttons = main.querySelectorAll("button.grade");
  const DONE = "clawloop-grade-done";

  // What the last grade did, kept across the reload that shows it.
  const last = window.sessionStorage.getItem(DONE);
  if (last) {
    status.textContent = last;
    window.sessionStorage.removeItem(DONE);
  }

  buttons.forEach((button) => {
    button.addEventListener("click", async () => {
      buttons.forEach((b) => (b.disabled = true));
      status.textContent = "grading…";
      let r;
      try {
        r = await fetch("/traces/" + encodeURIComponent(main.dataset.run) + "/grade", {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-csrf-token": main.dataset.csrf,
            "x-clawloop-session": main.dataset.session,
          },
          body: JSON.stringify({ grade: button.dataset.grade, note: note.value }),
          credentials: "same-origin",
        });
      } catch (err) {
        status.textContent = "the connection to the server broke: " + err;
        buttons.forEach((b) => (b.disabled = false));
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
        status.textContent = "not graded: " + (reply.error || text);
        buttons.forEach((b) => (b.disabled = false));
      }
    });
  });
})();

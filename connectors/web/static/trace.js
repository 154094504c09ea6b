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

  window.clawloopAct.showDone(DONE, status);

  buttons.forEach((button) => {
    button.addEventListener("click", async () => {
      buttons.forEach((b) => (b.disabled = true));
      status.textContent = "grading…";
      await window.clawloopAct.post({
        url: "/traces/" + encodeURIComponent(main.dataset.run) + "/grade",
        body: { grade: button.dataset.grade, note: note.value },
        main,
        status,
        key: DONE,
        refused: "not graded: ",
        enable: () => buttons.forEach((b) => (b.disabled = false)),
      });
    });
  });
})();

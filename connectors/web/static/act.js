// What the operations and trace pages' buttons share: a change is a JSON POST with the page's
// CSRF token and session; what it did is kept across the reload that shows its effect.
"use strict";

window.clawloopAct = {
  // Shows, once, what the change before the reload did.
  showDone(key, status) {
    const last = window.sessionStorage.getItem(key);
    if (last) {
      status.textContent = last;
      window.sessionStorage.removeItem(key);
    }
  },

  // POSTs `body` to `url`; on success keeps the reply's `done` under `key` and reloads, else
  // writes `refused` and the error to `status` and calls `enable` to give the buttons back.
  async post({ url, body, main, status, key, refused, enable }) {
    let r;
    try {
      r = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-csrf-token": main.dataset.csrf,
          "x-clawloop-session": main.dataset.session,
        },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
    } catch (err) {
      status.textContent = "the connection to the server broke: " + err;
      enable();
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
      window.sessionStorage.setItem(key, reply.done);
      window.location.reload();
    } else {
      status.textContent = refused + (reply.error || text);
      enable();
    }
  },
};

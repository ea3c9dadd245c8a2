// ledger ui: keeps a page's live part current without a reload. The only script any page loads.
//
// Every POLL_MS it asks /api/version (the branch tip and the staging area, hashed); when that
// changed since the page was made, it fetches the page's live part again (the same address, with
// the header X-Ledger-Part: live) and swaps it in, keeping what a person set there: the runs
// picked in the table and the chart groups folded. Nothing is asked while the tab is hidden.
(function () {
  "use strict";
  var POLL_MS = 2000;
  var live = document.getElementById("live");
  var conn = document.getElementById("conn");
  if (!live || !live.dataset.version) {
    return;
  }

  function say(state, text) {
    if (conn) {
      conn.dataset.state = state;
      conn.textContent = text;
    }
  }

  function kept() {
    var picked = {}, folded = {};
    live.querySelectorAll("input[type=checkbox][name=run]:checked").forEach(function (box) {
      picked[box.value] = true;
    });
    live.querySelectorAll("details[data-group]").forEach(function (group) {
      if (!group.open) {
        folded[group.dataset.group] = true;
      }
    });
    return {picked: picked, folded: folded};
  }

  function restore(state) {
    live.querySelectorAll("input[type=checkbox][name=run]").forEach(function (box) {
      box.checked = Boolean(state.picked[box.value]);
    });
    live.querySelectorAll("details[data-group]").forEach(function (group) {
      if (state.folded[group.dataset.group]) {
        group.open = false;
      }
    });
  }

  function refresh() {
    return fetch(location.pathname + location.search, {headers: {"X-Ledger-Part": "live"}, cache: "no-store"})
      .then(function (answer) {
        var at = answer.headers.get("X-Ledger-Version");
        return answer.text().then(function (text) {
          var state = kept();
          live.innerHTML = text;  // made by the server, every value escaped there
          live.dataset.version = at || "";
          live.dataset.refreshed = String(Number(live.dataset.refreshed || "0") + 1);
          restore(state);
        });
      });
  }

  function poll() {
    if (document.hidden) {
      setTimeout(poll, POLL_MS);
      return;
    }
    fetch("/api/version", {cache: "no-store"})
      .then(function (answer) { return answer.json(); })
      .then(function (now) {
        say("live", "live");
        if (now.version !== live.dataset.version) {
          return refresh();
        }
        return null;
      })
      .catch(function () { say("offline", "offline: is `ledger ui` still running?"); })
      .then(function () { setTimeout(poll, POLL_MS); });
  }

  say("live", "live");
  setTimeout(poll, POLL_MS);
})();

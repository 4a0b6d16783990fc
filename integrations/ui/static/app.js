// Live updates: poll /api/feed; when the store changed, refresh the live lists and counters.
(function () {
  "use strict";
  var ms = parseInt(document.body.dataset.pollMs || "3000", 10);
  var last = null;
  var status = document.getElementById("live");

  function li(badge, href, text, extra) {
    var item = document.createElement("li");
    var b = document.createElement("span");
    b.className = "badge b-" + badge;
    b.textContent = badge;
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    item.append(b, " ", a);
    if (extra) {
      var c = document.createElement("code");
      c.textContent = extra;
      item.append(" ", c);
    }
    return item;
  }

  function render(data) {
    var exps = document.getElementById("live-experiences");
    if (exps) {
      exps.replaceChildren.apply(exps, data.experiences.map(function (e) {
        return li(e.outcome, "/experiences/" + encodeURIComponent(e.id), e.task, e.action);
      }));
    }
    var les = document.getElementById("live-lessons");
    if (les) {
      les.replaceChildren.apply(les, data.lessons.map(function (l) {
        return li(l.status, "/lessons/" + encodeURIComponent(l.id), l.rule, null);
      }));
    }
    var ne = document.getElementById("n-exp");
    if (ne) { ne.textContent = data.pulse.experiences; }
    var nl = document.getElementById("n-les");
    if (nl) { nl.textContent = data.pulse.lessons; }
  }

  function tick() {
    fetch("/api/feed", { headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        var key = JSON.stringify(data.pulse);
        if (last !== null && key !== last) {
          render(data);
          if (status) { status.textContent = "updated " + new Date().toLocaleTimeString(); }
        } else if (status && last === null) {
          status.textContent = "live";
        }
        last = key;
      })
      .catch(function () { if (status) { status.textContent = "offline"; } })
      .finally(function () { setTimeout(tick, ms); });
  }
  if (window.fetch && ms > 0) { setTimeout(tick, 0); }
})();

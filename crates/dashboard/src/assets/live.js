// Tether dashboard: keep a page live without reloading. The server holds
// one watch on the Applications; each change arrives here as a
// server-sent event, and the page's live part (the element #live) is
// fetched again from the URL in its data-live attribute, relative to the
// page's <base>. Without JavaScript the page still works: reload it.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch) return;
  var connection = document.getElementById("connection");
  var busy = false, again = false;

  function say(text) { if (connection) connection.textContent = text; }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var current = document.getElementById("live");
    if (!current || !current.dataset.live) { busy = false; return; }
    fetch(current.dataset.live, { headers: { accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        var live = document.getElementById("live");
        if (html && live) {
          var focused = document.activeElement && document.activeElement.closest("#live")
            ? document.activeElement.getAttribute("href") : null;
          live.outerHTML = html;
          if (focused) {
            var link = document.querySelector('#live a[href="' + CSS.escape(focused) + '"]');
            if (link) link.focus();
          }
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  // Only a page with a live part listens, and it stops when left: a
  // browser keeps at most six connections to one host, and an event
  // stream left open by each page visited would use them all up.
  var part = document.getElementById("live");
  if (part && part.dataset.live) {
    var events = new EventSource("events");
    events.addEventListener("change", refresh);
    events.onopen = function () { say("Live: updates as Applications change."); refresh(); };
    events.onerror = function () { say("Disconnected; reconnecting…"); };
    window.addEventListener("pagehide", function () { events.close(); });
    window.addEventListener("pageshow", function (event) {
      if (event.persisted) window.location.reload();
    });
  }

  // Break-glass windows: the time left, counted down every second from
  // each element's data-expires (RFC 3339), in words.
  function countdown() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (element) {
      var left = Math.floor((Date.parse(element.dataset.expires) - now) / 1000);
      if (isNaN(left)) return;
      if (left <= 0) { element.textContent = "expired"; return; }
      var h = Math.floor(left / 3600), m = Math.floor(left % 3600 / 60), s = left % 60;
      var two = function (n) { return (n < 10 ? "0" : "") + n; };
      element.textContent = h > 0 ? h + "h " + two(m) + "m left" : m + "m " + two(s) + "s left";
    });
  }
  setInterval(countdown, 1000);
})();

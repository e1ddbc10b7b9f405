// vminit's first-boot page, live: follow the stream the page names and
// put each re-rendered part in place. The server renders and escapes
// everything; without JavaScript the page works, only not live.
"use strict";
(function () {
  var live = document.getElementById("live");
  if (!live || !live.dataset.stream || !window.EventSource) {
    return;
  }
  var source = new EventSource(live.dataset.stream);
  source.addEventListener("render", function (e) {
    live.innerHTML = e.data;
    document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  });
  source.addEventListener("open", function () {
    document.body.classList.remove("offline");
  });
  source.addEventListener("error", function () {
    document.body.classList.add("offline");
  });
})();

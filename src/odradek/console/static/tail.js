// The message browser's live tail: an EventSource on /topics/{name}/tail,
// each event one record (JSON) prepended to the #tail table.
(function () {
  "use strict";
  var button = document.getElementById("tail-toggle");
  var status = document.getElementById("tail-status");
  var body = document.querySelector("#tail tbody");
  var source = null;
  var MAX_ROWS = 500;

  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text;
    return td;
  }

  function show(r) {
    var tr = document.createElement("tr");
    tr.className = "record";
    tr.appendChild(cell(String(r.partition)));
    tr.appendChild(cell(String(r.offset)));
    tr.appendChild(cell(r.time));
    tr.appendChild(cell(r.key === null ? "null" : r.key, "mono"));
    var value = cell("", "mono value");
    if (r.json) {
      var pre = document.createElement("pre");
      pre.textContent = r.json;
      value.appendChild(pre);
    } else {
      value.textContent = r.value === null ? "null" : r.value;
    }
    tr.appendChild(value);
    tr.appendChild(cell(r.headers.map(function (h) { return h[0] + "=" + h[1]; }).join("\n"), "mono"));
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > MAX_ROWS) { body.deleteRow(body.rows.length - 1); }
  }

  function stop(text) {
    if (source) { source.close(); source = null; }
    button.textContent = "Start live tail";
    status.textContent = text;
  }

  button.addEventListener("click", function () {
    if (source) { stop("stopped"); return; }
    source = new EventSource(button.dataset.url);
    button.textContent = "Stop live tail";
    status.textContent = "connecting…";
    source.onopen = function () { status.textContent = "tailing: new records appear here"; };
    source.onmessage = function (e) { show(JSON.parse(e.data)); };
    source.addEventListener("end", function () { stop("ended (start it again to go on)"); });
    source.onerror = function () { status.textContent = "reconnecting…"; };
  });
})();

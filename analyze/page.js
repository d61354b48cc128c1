// vram analyze: hover text and the stacking switch. Hand-written, no
// libraries; the data comes from the JSON element above.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("vram-data").textContent);
  var tip = document.getElementById("tip");

  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    var u = "KMGTPE", v = n / 1024, i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " " + u[i] + "iB";
  }
  function fmtX(axis, x) {
    if (axis !== "time_us") return "event " + x;
    if (x < 1e3) return x + " µs";
    if (x < 1e6) return (x / 1e3).toFixed(3) + " ms";
    return (x / 1e6).toFixed(3) + " s";
  }
  function show(text, ev) {
    tip.textContent = text;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = ev.clientY - h - 14;
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hide() { tip.hidden = true; }

  // Elements that carry their own hover text: blocks, segments, OOM marks.
  document.addEventListener("mousemove", function (ev) {
    var el = ev.target.closest ? ev.target.closest("[data-tip]") : null;
    if (el) show(el.getAttribute("data-tip"), ev);
    else if (!ev.target.classList || !ev.target.classList.contains("hit")) hide();
  });

  document.querySelectorAll("section.device").forEach(function (sec) {
    var d = data[sec.getAttribute("data-device")];
    var mode = 0;
    sec.querySelectorAll(".mode-btn").forEach(function (b) {
      b.addEventListener("click", function () {
        mode = +b.getAttribute("data-mode");
        sec.classList.remove("mode0", "mode1");
        sec.classList.add("mode" + mode);
        sec.querySelectorAll(".mode-btn").forEach(function (o) { o.classList.toggle("on", o === b); });
      });
    });
    var svg = sec.querySelector("svg.timeline");
    if (!svg || !d || !d.x || !d.x.length) return;
    var hit = svg.querySelector(".hit"), cursor = svg.querySelector(".cursor");
    hit.addEventListener("mouseleave", function () { hide(); cursor.setAttribute("visibility", "hidden"); });
    hit.addEventListener("mousemove", function (ev) {
      var box = svg.getBoundingClientRect();
      var sx = svg.viewBox.baseVal.width / box.width, sy = svg.viewBox.baseVal.height / box.height;
      var px = (ev.clientX - box.left) * sx, py = (ev.clientY - box.top) * sy;
      var xv = (px - d.plotX) / d.plotW * d.xmax, yv = (d.plotY + d.plotH - py) / d.plotH * d.ymax;
      // The last point at or before the cursor holds until the next one.
      var lo = 0, hi = d.x.length - 1;
      while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (d.x[mid] <= xv) lo = mid; else hi = mid - 1; }
      var i = lo;
      cursor.setAttribute("x1", px); cursor.setAttribute("x2", px); cursor.setAttribute("visibility", "visible");
      var g = d.groups[mode], sum = 0, k = -1;
      for (var c = 0; c < g.names.length; c++) {
        var v = g.values[i][c];
        if (yv >= sum && yv < sum + v) { k = c; break; }
        sum += v;
      }
      var lines = [fmtX(d.axis, d.x[i]) + ": allocated " + fmtBytes(d.alloc[i]) + ", reserved " + fmtBytes(d.res[i])];
      if (k >= 0) {
        lines.push((mode === 0 ? "region " : "frame ") + g.names[k] + ": " + fmtBytes(g.values[i][k]));
        var best = null;
        (g.spans[k] || []).forEach(function (s) {
          if (s.a <= d.x[i] && d.x[i] < s.b && (!best || s.s > best.s)) best = s;
        });
        if (best) lines.push("largest live allocation here: " + fmtBytes(best.s) + " (" + fmtX(d.axis, best.a) + " to " + fmtX(d.axis, best.b) + ")" + (best.l ? "\n" + best.l : ""));
      }
      show(lines.join("\n"), ev);
    });
  });
})();

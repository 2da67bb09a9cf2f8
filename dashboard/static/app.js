// dbqueue dashboard: confirms dangerous actions, and on the queues page
// polls api/stats to refresh the counts and draw the charts. No library,
// nothing loaded from elsewhere; every URL is relative so the dashboard
// works under any prefix.
"use strict";

document.addEventListener("submit", function (e) {
  var b = e.submitter;
  if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) {
    e.preventDefault();
  }
});

(function () {
  var tbody = document.getElementById("queues");
  if (!tbody) return;
  var interval = parseInt(document.body.dataset.interval, 10) || 5000;
  var readOnly = document.body.hasAttribute("data-read-only");
  var SVG = "http://www.w3.org/2000/svg";
  var lastRows = "";

  function el(tag, attrs, text) {
    var n = document.createElement(tag);
    for (var k in attrs || {}) n.setAttribute(k, attrs[k]);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function age(s) {
    s = Math.floor(s);
    if (s <= 0) return "\u2014";
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  // count writes n into node: "10,000+" and words for screen readers when
  // the count stopped at its cap (a lower bound), as the server does.
  function count(node, n, capped) {
    var s = String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    node.textContent = capped ? s + "+" : s;
    if (capped) node.appendChild(el("span", { class: "sr-only" }, " (at least; counting stopped there)"));
    return node;
  }

  function hidden(form, name, value) {
    form.appendChild(el("input", { type: "hidden", name: name, value: value }));
  }

  function row(q, csrf) {
    var tr = el("tr", { "data-queue": q.name });
    var name = el("td");
    name.appendChild(el("a", { href: "jobs?queue=" + encodeURIComponent(q.name) }, q.name));
    tr.appendChild(name);
    ["pending", "delayed", "reserved"].forEach(function (k) {
      tr.appendChild(count(el("td", { class: "n " + k }), q[k], q[k + "_capped"]));
    });
    var f = el("td", { class: "n failed" });
    f.appendChild(count(el("a", { href: "failed?queue=" + encodeURIComponent(q.name) }), q.failed, q.failed_capped));
    tr.appendChild(f);
    tr.appendChild(el("td", { class: "oldest" }, age(q.oldest_pending_seconds)));
    var st = el("td", { class: "state" });
    if (q.paused) st.appendChild(el("span", { class: "paused" }, "paused"));
    else st.textContent = "running";
    tr.appendChild(st);
    if (!readOnly) {
      var td = el("td", { class: "actions" });
      var form = el("form", { method: "post", action: "action" });
      hidden(form, "csrf", csrf);
      hidden(form, "back", "./");
      hidden(form, "queue", q.name);
      var op = q.paused ? "resume" : "pause";
      form.appendChild(el("button", { name: "op", value: op }, q.paused ? "Resume" : "Pause"));
      td.appendChild(form);
      tr.appendChild(td);
    }
    return tr;
  }

  function fmtTime(ms) {
    var d = new Date(ms);
    function p(n) { return (n < 10 ? "0" : "") + n; }
    return p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
  }

  function fmtNum(v) {
    if (v >= 10000) return Math.round(v / 1000) + "k";
    if (v >= 100) return String(Math.round(v));
    if (v >= 10) return v.toFixed(0);
    return String(Math.round(v * 10) / 10);
  }

  // nice rounds a chart's top up to a round number, so the axis reads well.
  function nice(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  // chart draws series of history points as lines, broken at gaps.
  function chart(svg, legend, points, series) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = Math.max(svg.clientWidth || 600, 200), H = 200, L = 44, R = 8, T = 10, B = 22;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    function add(tag, attrs, text) {
      var n = document.createElementNS(SVG, tag);
      for (var k in attrs) n.setAttribute(k, attrs[k]);
      if (text !== undefined) n.textContent = text;
      svg.appendChild(n);
      return n;
    }
    var usable = points.filter(function (p) {
      return series.some(function (s) { return p[s.key] !== null && p[s.key] !== undefined; });
    });
    if (usable.length < 2) {
      add("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "chart-note" },
        "collecting samples \u2014 the chart fills in while this page is open");
      legend.textContent = "";
      return;
    }
    var t0 = usable[0].t, t1 = usable[usable.length - 1].t, top = 0;
    usable.forEach(function (p) {
      series.forEach(function (s) { if (p[s.key] > top) top = p[s.key]; });
    });
    top = nice(top * 1.05);
    function x(t) { return L + (W - L - R) * (t - t0) / Math.max(t1 - t0, 1); }
    function y(v) { return T + (H - T - B) * (1 - v / top); }
    [0, 0.5, 1].forEach(function (f) {
      var v = top * f;
      add("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" });
      add("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, fmtNum(v));
    });
    add("text", { x: L, y: H - 4, class: "axis" }, fmtTime(t0));
    add("text", { x: W - R, y: H - 4, "text-anchor": "end", class: "axis" }, fmtTime(t1));
    series.forEach(function (s) {
      var segs = [], cur = [];
      usable.forEach(function (p) {
        var v = p[s.key];
        if (v === null || v === undefined || p.gap) {
          if (cur.length) segs.push(cur);
          cur = [];
        }
        if (v !== null && v !== undefined) cur.push(x(p.t).toFixed(1) + "," + y(v).toFixed(1));
      });
      if (cur.length) segs.push(cur);
      segs.forEach(function (pts) {
        add("polyline", { points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 2, "stroke-linejoin": "round" });
      });
    });
    legend.textContent = "";
    var last = usable[usable.length - 1];
    series.forEach(function (s) {
      var item = el("span", { class: "key" });
      var sw = el("i");
      sw.style.background = s.color;
      item.appendChild(sw);
      var v = last[s.key];
      item.appendChild(document.createTextNode(s.label + " " + (v === null || v === undefined ? "\u2014" : fmtNum(v) + (last[s.key + "_capped"] ? "+ (at least)" : ""))));
      legend.appendChild(item);
    });
  }

  function draw(data) {
    ["pending", "delayed", "reserved", "failed"].forEach(function (k) {
      count(document.getElementById("total-" + k), data.totals[k], data.totals[k + "_capped"]);
    });
    // Rows are rebuilt only when a count changed, so that a button
    // under the pointer is not replaced between press and release.
    var key = JSON.stringify(data.queues);
    if (key !== lastRows) {
      var rows = document.createDocumentFragment();
      data.queues.forEach(function (q) { rows.appendChild(row(q, data.csrf)); });
      tbody.replaceChildren(rows);
      lastRows = key;
    }
    document.getElementById("queue-count").textContent =
      data.count + " on this page" + (data.next ? ", more after" : "");
    document.getElementById("cap").textContent = String(data.cap).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    document.querySelectorAll("input[name=csrf]").forEach(function (i) { i.value = data.csrf; });
    chart(document.getElementById("chart-depth"), document.getElementById("legend-depth"), data.history, [
      { key: "pending", label: "pending", color: "#2563eb" },
      { key: "delayed", label: "delayed", color: "#d97706" },
      { key: "reserved", label: "reserved", color: "#059669" },
      { key: "failed", label: "failed", color: "#dc2626" }
    ]);
    var upd = document.getElementById("updated");
    upd.textContent = "counts from " + fmtTime(data.time) +
      (data.age_ms >= 2000 ? " (" + Math.round(data.age_ms / 1000) + "s old)" : "") +
      (data.sample_pending ? ", a newer sample is being taken" : "");
    upd.classList.remove("stale");
    document.body.dataset.updated = String(data.time);
  }

  var timer = null, busy = false;
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, interval);
  }
  function poll() {
    if (busy) return;
    if (document.hidden) { // a background tab costs the database nothing
      schedule();
      return;
    }
    busy = true;
    fetch("api/stats" + location.search, { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(draw)
      .catch(function (err) {
        var upd = document.getElementById("updated");
        upd.textContent = "refresh failed: " + err.message;
        upd.classList.add("stale");
      })
      .finally(function () {
        busy = false;
        schedule();
      });
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      clearTimeout(timer);
      poll();
    }
  });
  poll();
})();

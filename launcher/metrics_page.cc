#include "launcher/metrics_page.h"

namespace hvd {
namespace launcher {

// Plain HTML and script, no outside resources: the page works where the
// cluster has no internet. Element ids and data-* attributes are what the
// headless-browser test reads.
const char kMetricsPage[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>hvd job</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
  h1 { font-size: 1.3em; margin: 0 0 .5em; }
  #phase { font-weight: bold; }
  #failure { color: #a00; font-weight: bold; white-space: pre-wrap;
             margin: .5em 0; }
  #failure:empty { display: none; }
  table { border-collapse: collapse; margin-top: .5em; }
  th, td { padding: .25em .8em; border-bottom: 1px solid #ddd;
           text-align: right; }
  th:nth-child(-n+3), td:nth-child(-n+3) { text-align: left; }
  tr.ended td { color: #888; }
  tr.failed td, tr.stalled td { color: #a00; }
  #updated { color: #888; font-size: .9em; }
</style>
</head>
<body>
<h1>hvd job: <span id="phase">loading</span></h1>
<div id="failure"></div>
<table>
  <thead><tr><th>rank</th><th>host</th><th>state</th><th>steps/s</th>
    <th>busbw GB/s</th><th>stalled</th><th>collectives</th><th>RSS MB</th>
  </tr></thead>
  <tbody id="ranks"></tbody>
</table>
<p id="updated"></p>
<script>
"use strict";
function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
}
function render(job) {
  document.getElementById("phase").textContent = job.phase;
  document.getElementById("failure").textContent = job.failure;
  const body = document.getElementById("ranks");
  body.replaceChildren();
  for (const r of job.ranks) {
    const row = document.createElement("tr");
    row.id = "rank-" + r.rank;
    row.dataset.state = r.state;
    const failed = r.state !== "running" && r.state !== "starting" &&
        r.state !== "exited with code 0";
    row.className = r.stalled ? "stalled" : failed ? "failed" :
        r.state === "running" || r.state === "starting" ? "" : "ended";
    cell(row, r.rank);
    cell(row, r.host);
    cell(row, r.state);
    cell(row, r.stepSeconds > 0 ? (1 / r.stepSeconds).toFixed(2) : "");
    cell(row, r.busbwGbps > 0 ? r.busbwGbps.toFixed(3) : "");
    cell(row, r.stalled ? "yes: " + r.stalled : "no");
    cell(row, r.collectives);
    cell(row, (Number(r.residentBytes) / 1048576).toFixed(0));
    body.appendChild(row);
  }
  document.getElementById("updated").textContent =
      "updated " + new Date().toLocaleTimeString();
}
async function refresh() {
  try {
    const got = await fetch("/status.json", {cache: "no-store"});
    render(await got.json());
  } catch (e) {
    document.getElementById("updated").textContent =
        "hvdrun is gone: the job has ended";
    return;
  }
  setTimeout(refresh, 1000);
}
refresh();
</script>
</body>
</html>
)html";

}  // namespace launcher
}  // namespace hvd

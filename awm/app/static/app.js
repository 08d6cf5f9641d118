// awm serve: what every page shares. No framework and no CDN: the app works offline.
"use strict";

// An episode address pasted with its '#' unencoded reaches the server cut at the '#'; the rest is the
// fragment, which only the page sees. The page that lists the episodes the cut address may name
// follows the one the fragment completes.
function followCutEpisode() {
  const note = document.getElementById("cut-at-hash");
  if (!note || !location.hash) return;
  const wanted = note.dataset.stem + decodeURIComponent(location.hash);
  const link = [...document.querySelectorAll("#cut-episodes a[data-id]")].find((a) => a.dataset.id === wanted);
  if (link) location.replace(link.href);
}

// A cell's sort key: a number when the cell reads as one ("1,234/56" is 1234, "75%" is 75), else its
// text. A `data-sort` attribute, when a cell has one, is read instead of its text.
function sortKey(cell) {
  const text = ((cell && (cell.dataset.sort ?? cell.textContent)) || "").trim();
  const number = Number(text.replace(/[,%\s]/g, "").split("/")[0]);
  return text !== "" && !Number.isNaN(number) ? number : text.toLowerCase();
}

function compareKeys(a, b) {
  if (typeof a !== typeof b) return typeof a === "number" ? -1 : 1; // numbers before words and "-"
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortTable(table, index, th) {
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  for (const cell of table.tHead.rows[0].cells) cell.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  // A row with `data-parent` (an ablation's arm) stays under its parent: the parents are sorted, and
  // the children among themselves.
  const all = [...body.rows].map((row, at) => ({ row, at, key: sortKey(row.cells[index]) }));
  const order = (x, y) => (ascending ? 1 : -1) * compareKeys(x.key, y.key) || x.at - y.at;
  const children = all.filter((r) => r.row.dataset.parent).sort(order);
  const parents = all.filter((r) => !r.row.dataset.parent).sort(order);
  body.append(...parents.flatMap((p) => [p.row, ...children.filter((c) => c.row.dataset.parent === p.row.dataset.key).map((c) => c.row)]));
}

// Every table with a header sorts by a click on a column's name (again: the other way round).
function makeSortable(table) {
  if (!table.tHead || !table.tBodies.length || table.tBodies[0].rows.length < 2) return;
  [...table.tHead.rows[0].cells].forEach((th, index) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.title = "sort by " + th.textContent.trim();
    button.append(...th.childNodes);
    button.addEventListener("click", () => sortTable(table, index, th));
    th.append(button);
  });
}

// The episode page: j or → shows the next step, k or ← the one before (workflow sub-steps included),
// each brought to the top of the window and outlined; the address keeps it (#step-N) for a link.
function stepThroughByKeys() {
  const steps = [...document.querySelectorAll("#steps section.step")];
  if (!steps.length) return;
  const onScreen = (el) => {
    const box = el.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  };
  const mark = (step) => {
    steps.forEach((s) => s.classList.toggle("current", s === step));
  };
  const fromAddress = steps.find((s) => "#" + s.id === location.hash);
  if (fromAddress) mark(fromAddress);
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.target.closest && event.target.closest("input, textarea, select, [contenteditable]")) return;
    const move = { j: 1, ArrowRight: 1, k: -1, ArrowLeft: -1 }[event.key];
    if (!move) return;
    event.preventDefault();
    let at = steps.findIndex((s) => s.classList.contains("current") && onScreen(s));
    if (at < 0) {
      // none shown: start from the step at the top of the window
      const top = steps.findIndex((s) => s.getBoundingClientRect().bottom > 0);
      at = top < 0 ? steps.length : steps[top].getBoundingClientRect().top > 1 && move > 0 ? top - 1 : top;
    }
    const next = steps[Math.max(0, Math.min(steps.length - 1, at + move))];
    mark(next);
    next.scrollIntoView({ block: "start" });
    history.replaceState(null, "", "#" + next.id);
  });
}

followCutEpisode();
stepThroughByKeys();
document.querySelectorAll("table.grid").forEach(makeSortable);

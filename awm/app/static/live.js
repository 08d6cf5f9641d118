// awm serve: the live-run form and the live-run page (steps streamed as server-sent events).
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === "") continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function field(label, value, cls) {
  if (value === null || value === undefined || value === "") return null;
  return el("div", { class: "field " + (cls || "") }, el("b", {}, label), value);
}

// ---- the form --------------------------------------------------------------------------------
function setUpForm(form) {
  const show = () => {
    const intent = form.querySelector("input[name=intent]:checked").value;
    form.querySelector(".intent-goal").hidden = intent !== "goal";
    form.querySelector(".intent-label").hidden = intent === "goal";
    form.querySelector(".intent-text").hidden = intent !== "type";
  };
  form.querySelectorAll("input[name=intent]").forEach((r) => r.addEventListener("change", show));
  show();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const refusal = document.getElementById("live-refusal");
    refusal.textContent = "";
    const data = new FormData(form);
    const body = { url: data.get("url"), intent: data.get("intent"), judge: data.get("judge") === "on" };
    if (body.intent === "goal") body.goal = data.get("goal"); else body.label = data.get("label");
    if (body.intent === "type") body.text = data.get("text");
    const response = await fetch("/api/live", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const answer = await response.json();
    if (response.status === 202) { window.location = "/live/" + answer.run_id; return; }
    refusal.textContent = describeRefusal(response.status, answer.detail);
  });
}

function describeRefusal(status, detail) {
  if (status === 429) return "Refused: " + detail + " (at most 2 live runs at once; try again when one ends).";
  if (detail && detail.rail) return "Refused by the rails (" + detail.rail + "): " + detail.reason;
  if (Array.isArray(detail)) return "Refused: " + detail.map((d) => (d.msg || "").replace(/^Value error, /, "")).join("; ");
  return "Refused (" + status + "): " + JSON.stringify(detail);
}

// ---- the live page ---------------------------------------------------------------------------
function stepCard(step) {
  // the picture (cropped to the page, the element acted on outlined); a click opens the full frame
  const shot = step.screenshot_url
    ? el("a", { href: step.screenshot_url, title: "open the full frame" },
        el("img", { src: step.picture_url || step.screenshot_url, alt: "the page the agent saw at step " + step.index }))
    : el("div", { class: "noshot" }, "no screenshot");
  const okClass = step.outcome === "ok" ? "ok" : (["refused", "denied"].includes(step.outcome) ? step.outcome : "failed");
  const approval = step.approval
    ? (step.approval.approved ? "approved" : "denied") + " by " + step.approval.approver + " (" + step.approval.reason + ")"
    : null;
  return el("section", { class: "step", id: "live-step-" + step.index, "data-step": step.index },
    el("div", { class: "shot" }, shot),
    el("div", { class: "detail" },
      el("h3", {}, "Step " + step.index + (step.called_by !== null && step.called_by !== undefined ? " (workflow " + step.workflow + ")" : "") + " ",
        el("span", { class: "badge " + okClass }, step.outcome)),
      field("url", step.url, "mono"),
      field("thought", step.thought),
      field("action", step.action_str || "(none)", "mono"),
      field("error", step.error, "error"),
      field("feedback", step.feedback),
      field("page showed", step.reaction),
      field("gate", approval),
    ));
}

function approvalBox(runId, question) {
  const box = el("div", { class: "approval", id: "approval-" + question.id },
    el("h3", {}, "The agent wants to: ", el("code", {}, question.action)),
    field("why a person must approve", question.reason),
    field("element", question.element),
    field("value", question.value),
    field("page", question.url, "mono"),
    question.screenshot_url ? el("img", { src: question.screenshot_url, alt: "what the page showed", style: "max-width:480px" }) : null,
  );
  const buttons = el("p", {},
    el("button", { type: "button", class: "approve" }, "Approve"), " ",
    el("button", { type: "button", class: "danger deny" }, "Deny"),
    el("span", { class: "muted" }, "  no answer in " + Math.round(question.timeout_s) + " s denies"));
  box.append(buttons);
  const answer = async (approve) => {
    buttons.querySelectorAll("button").forEach((b) => (b.disabled = true));
    const response = await fetch("/api/live/" + runId + "/approval", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ approve: approve, question: question.id }),
    });
    const result = await response.json();
    box.classList.add("answered");
    buttons.replaceWith(el("p", { class: "answered" },
      response.ok ? (approve ? "Approved" : "Denied") + ": the run goes on." : "Not recorded: " + result.detail));
  };
  buttons.querySelector(".approve").addEventListener("click", () => answer(true));
  buttons.querySelector(".deny").addEventListener("click", () => answer(false));
  return box;
}

function setUpStream(container) {
  const runId = container.dataset.run;
  const state = document.getElementById("live-state");
  const end = document.getElementById("live-end");
  const approvals = document.getElementById("approvals");
  const source = new EventSource("/api/live/" + runId + "/events");
  let finished = false;
  source.addEventListener("step", (event) => {
    const step = JSON.parse(event.data);
    const card = stepCard(step);
    const old = document.getElementById(card.id);  // a reconnect replays the run: replace, never repeat
    if (old) old.replaceWith(card); else container.append(card);
    state.textContent = "running: " + container.children.length + " step(s) so far";
  });
  source.addEventListener("approval", (event) => {
    const question = JSON.parse(event.data);
    if (!document.getElementById("approval-" + question.id)) approvals.append(approvalBox(runId, question));
  });
  const terminal = (kind) => (event) => {
    finished = true;
    source.close();
    const data = JSON.parse(event.data);
    let text;
    if (kind === "verdict") {
      text = "Ended (" + data.end + "). " + data.facts.join(" · ");
    } else {
      text = "Error: " + data.message + (data.detail ? " — " + data.detail : "");
    }
    end.replaceChildren(el("div", { class: "terminal " + kind, id: "terminal", "data-kind": kind }, text,
      data.run ? el("div", {}, el("a", { href: "/runs/" + encodeURIComponent(data.run) + (data.episode ? "/episodes/" + encodeURIComponent(data.episode) : "") }, "open the recorded episode")) : null));
    state.textContent = kind === "verdict" ? "finished" : "stopped";
  };
  source.addEventListener("verdict", terminal("verdict"));
  source.addEventListener("error", (event) => {
    if (event.data) terminal("error")(event);  // an `error` event from the server (a connection error has no data)
    else if (!finished && source.readyState === EventSource.CLOSED) state.textContent = "the stream closed";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("live-form");
  if (form) setUpForm(form);
  const steps = document.getElementById("live-steps");
  if (steps) setUpStream(steps);
});

// Actae console: draws each page from the JSON API (/api) and follows a run live (SSE).
// Plain DOM, no framework, no build step; text always goes in as text, never as HTML.
"use strict";

(() => {
  const main = document.getElementById("main");
  const app = document.getElementById("app");
  const notice = document.getElementById("notice");
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const mayAct = main.dataset.role === "operator";
  const SVG = "http://www.w3.org/2000/svg";
  const ENDED = ["completed", "failed", "cancelled"];

  // -- small helpers ------------------------------------------------------------------------

  /** An element: h("td", {class: "num"}, "3"); attributes starting with "on" are listeners. */
  function h(tag, attrs, ...children) {
    const svg = ["svg", "g", "rect", "text", "path", "a", "title", "tspan", "polygon", "defs", "marker"]
      .includes(tag) && (attrs && attrs.svg);
    const el = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "svg" || value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }
  const s = (tag, attrs, ...children) => h(tag, { ...attrs, svg: true }, ...children);

  /** Replace ``el``'s children, leaving out the null ones (conditional parts). */
  function fill(el, ...children) {
    el.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return el;
  }

  function say(text, kind = "info") {
    notice.textContent = text;
    notice.dataset.kind = kind;
  }

  class ApiError extends Error {
    constructor(status, error) {
      super(error.message || `HTTP ${status}`);
      this.status = status;
      this.code = error.code;
    }
  }

  async function api(path, { method = "GET", body } = {}) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") {
      headers["Content-Type"] = "application/json";
      headers["X-CSRF-Token"] = csrf;
    }
    const response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
    if (response.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
      throw new ApiError(401, { message: "signed out" });
    }
    const document = await response.json();
    if (!response.ok) throw new ApiError(response.status, document.error || {});
    return document;
  }

  const short = (id) => String(id).slice(0, 8);
  const runLink = (id, text) => h("a", { href: `/runs/${id}`, class: "mono" }, text || short(id));

  function when(iso) {
    if (!iso) return h("span", { class: "muted" }, "—");
    const date = new Date(iso);
    const today = new Date().toDateString() === date.toDateString();
    const text = today
      ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" })
      : date.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
    return h("time", { datetime: iso, title: iso }, text);
  }

  /** A run's usage: tokens in and out, cost, and anything else it recorded. */
  function usage(amounts) {
    const number = (v) => Number(v).toLocaleString([], { maximumFractionDigits: 3 });
    const parts = Object.entries(amounts).map(([name, v]) =>
      name === "cost" ? `$${Number(v).toFixed(3)}`
        : name === "input_tokens" ? `${number(v)} tokens in`
          : name === "output_tokens" ? `${number(v)} out` : `${name.replace(/_/g, " ")} ${number(v)}`);
    return parts.join(" · ") || "—";
  }

  const badge = (status) => h("span", { class: `status status-${status}` }, status);
  const json = (value) => h("pre", { class: "json" }, JSON.stringify(value, null, 2));
  const compact = (value, most = 90) => {
    const text = brief(JSON.stringify(value));
    return text.length > most ? `${text.slice(0, most - 2)}…` : text;
  };
  /** Text with every uuid cut to its first 8 digits (they stay in the links and titles). */
  const brief = (text) => String(text || "").replace(/\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, "$1…");

  function table(columns, rows, empty) {
    if (!rows.length) return h("p", { class: "empty" }, empty);
    return h("table", {},
      h("thead", {}, h("tr", {}, columns.map(([label, cls]) => h("th", { class: cls, scope: "col" }, label)))),
      h("tbody", {}, rows));
  }

  function panel(title, ...children) {
    return h("section", { class: "panel", "aria-label": title },
      h("header", {}, h("h2", {}, title)), ...children);
  }

  // -- asking the operator ------------------------------------------------------------------

  /** A modal form; resolves to its values, or null when cancelled. */
  function ask(title, fields, confirm, { danger = false } = {}) {
    return new Promise((resolve) => {
      const problem = h("p", { class: "problem", role: "alert" });
      const inputs = {};
      const form = h("form", { method: "dialog" },
        h("h2", {}, title),
        fields.map((field) => {
          const id = `ask-${field.name}`;
          let input;
          if (field.options) {
            input = h("select", { id, name: field.name },
              field.options.map((option) => h("option", { value: option }, option)));
          } else if (field.multiline) {
            input = h("textarea", { id, name: field.name, required: field.required, placeholder: field.placeholder || "" });
          } else {
            input = h("input", { id, name: field.name, required: field.required, value: field.value || "" });
          }
          inputs[field.name] = input;
          return h("div", { class: "field" }, h("label", { for: id }, field.label), input);
        }),
        problem,
        h("menu", {},
          h("button", { type: "button", class: "quiet", onclick: () => dialog.close("") }, "Cancel"),
          h("button", { type: "submit", class: danger ? "danger" : "", value: "ok" }, confirm)));
      const dialog = h("dialog", { "aria-label": title }, form);
      form.addEventListener("submit", (event) => {
        const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
        for (const field of fields) {
          if (field.parse && values[field.name]) {
            try { values[field.name] = JSON.parse(values[field.name]); } catch {
              event.preventDefault();
              problem.textContent = `${field.label}: not valid JSON`;
              return;
            }
          } else if (field.parse) values[field.name] = null;
        }
        dialog.returnValue = "ok";
        dialog.values = values;
      });
      dialog.addEventListener("close", () => {
        dialog.remove();
        resolve(dialog.returnValue === "ok" ? dialog.values : null);
      });
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  async function perform(what, request, after) {
    try {
      const result = await request();
      say(what, "done");
      if (after) await after(result);
    } catch (error) {
      say(`${error.message}`, "error");
    }
  }

  function decisionButtons(run, after) {
    if (!mayAct) return [];
    const name = run.waiting_name || (run.waiting && run.waiting.name);
    const id = run.run_id;
    const answer = (verb) => async () => {
      const values = await ask(`${verb === "approve" ? "Approve" : "Deny"} “${name}”`,
        [{ name: "note", label: "Note (kept with the decision)", multiline: true }],
        verb === "approve" ? "Approve" : "Deny", { danger: verb === "deny" });
      if (values === null) return;
      await perform(`${verb === "approve" ? "Approved" : "Denied"} ${name} of ${short(id)}.`,
        () => api(`/api/runs/${id}/${verb}`, { method: "POST", body: { name, note: values.note || null } }), after);
    };
    return [
      h("button", { class: "small", onclick: answer("approve") }, "Approve"),
      h("button", { class: "small quiet", onclick: answer("deny") }, "Deny"),
    ];
  }

  function overrideButton(effect, after) {
    if (!mayAct || !(effect.in_doubt || effect.status === "needs_review")) return null;
    return h("button", {
      class: "small", onclick: async () => {
        const values = await ask(`Override ${effect.effect_key}`, [
          { name: "outcome", label: "What happened at the provider", options: ["completed", "failed"] },
          { name: "reason", label: "Reason", multiline: true, required: true },
          { name: "evidence", label: "Evidence (a JSON object, optional)", multiline: true, parse: true, placeholder: '{"dashboard": "refund rf_81 seen"}' },
          { name: "result", label: "Result if completed (JSON: what ctx.effect returns)", multiline: true, parse: true, placeholder: '{"message_id": "msg_81"}' },
        ], "Record outcome");
        if (values === null) return;
        await perform(`Recorded ${values.outcome} for ${effect.effect_key}.`,
          () => api(`/api/effects/${encodeURIComponent(effect.effect_key)}/override`, { method: "POST", body: values }), after);
      },
    }, "Override…");
  }

  // -- runs ---------------------------------------------------------------------------------

  const FILTERS = ["running", "waiting", "retrying", "blocked"];
  const OTHERS = ["paused", "failed", "completed", "cancelled"];

  async function runsPage() {
    const query = new URLSearchParams(location.search);
    const status = query.get("status") || "";
    const draw = async () => {
      const params = new URLSearchParams();
      for (const name of ["status", "workflow", "agent", "after"]) if (query.get(name)) params.set(name, query.get(name));
      const data = await api(`/api/runs?${params}`);
      const total = Object.values(data.counts).reduce((a, b) => a + b, 0);
      const link = (value, label, count, minor) => {
        const next = new URLSearchParams(query);
        next.delete("after");
        if (value) next.set("status", value); else next.delete("status");
        return h("a", { href: `?${next}`, "aria-current": status === value ? "true" : null, class: minor ? "minor" : null },
          label, h("span", { class: "count" }, count));
      };
      const filters = h("nav", { class: "filters", "aria-label": "Filter by status" },
        link("", "All", total),
        FILTERS.map((name) => link(name, name === "running" ? "Executing" : name[0].toUpperCase() + name.slice(1), data.counts[name])),
        OTHERS.map((name) => link(name, name[0].toUpperCase() + name.slice(1), data.counts[name], true)));
      const search = h("form", { class: "inline", role: "search" },
        status ? h("input", { type: "hidden", name: "status", value: status }) : null,
        h("div", {}, h("label", { for: "workflow" }, "Workflow"), h("input", { id: "workflow", name: "workflow", value: query.get("workflow") || "" })),
        h("div", {}, h("label", { for: "agent" }, "Agent"), h("input", { id: "agent", name: "agent", value: query.get("agent") || "" })),
        h("button", { type: "submit", class: "quiet" }, "Filter"));
      const rows = data.runs.map((run) => h("tr", { "data-run": run.run_id },
        h("td", {}, runLink(run.run_id)),
        h("td", {}, h("a", { href: `/runs/${run.run_id}` }, run.workflow_id)),
        h("td", {}, run.agent_id),
        h("td", {}, badge(run.status)),
        h("td", { title: run.next_action }, brief(run.next_action)),
        h("td", { class: "num" }, run.head_cursor),
        h("td", { class: "num" }, run.state_version),
        h("td", {}, when(run.updated_at))));
      const more = data.next ? (() => {
        const next = new URLSearchParams(query);
        next.set("after", data.next);
        return h("p", {}, h("a", { href: `?${next}` }, "Next page →"));
      })() : null;
      fill(app, filters, search, h("section", { class: "panel", "aria-label": "Runs" },
        table([["Run"], ["Workflow"], ["Agent"], ["Status"], ["Next action"], ["Cursor", "num"], ["Version", "num"], ["Updated"]],
          rows, "No runs match."), more));
    };
    await draw();
    refreshEvery(5000, draw);
  }

  function refreshEvery(ms, draw) {
    setInterval(() => { if (!document.hidden && !document.querySelector("dialog[open]")) draw().catch(() => {}); }, ms);
  }

  // -- approvals ----------------------------------------------------------------------------

  async function approvalsPage() {
    const draw = async () => {
      const data = await api("/api/approvals");
      const rows = data.runs.map((run) => h("tr", { "data-run": run.run_id },
        h("td", {}, h("a", { href: `/runs/${run.run_id}` }, run.workflow_id), " ", h("span", { class: "mono muted" }, short(run.run_id))),
        h("td", {}, run.agent_id),
        h("td", { class: "mono" }, run.waiting_name),
        h("td", {}, when(run.updated_at)),
        h("td", {}, run.wake_at ? when(run.wake_at) : h("span", { class: "muted" }, "never")),
        h("td", {}, run.escalated ? h("span", { class: "doubt" }, "escalated") : ""),
        h("td", {}, h("div", { class: "actions" }, decisionButtons(run, draw)))));
      fill(app, panel("Waiting for an approval",
        table([["Run"], ["Agent"], ["Approval"], ["Waiting since"], ["Expires"], [""], ["Decide"]], rows,
          "Nothing waits for an approval.")));
    };
    await draw();
    refreshEvery(5000, draw);
  }

  // -- effects ------------------------------------------------------------------------------

  function leaseWindow(effect) {
    if (!effect.claimed_at) return h("span", { class: "muted" }, "—");
    return h("span", {}, when(effect.claimed_at), " → ", when(effect.expires_at));
  }

  function effectRows(effects, after, { withRun = false } = {}) {
    return effects.map((effect) => {
      const attempts = h("div");
      const details = h("details", {
        ontoggle: async (event) => {
          if (!event.target.open || attempts.childElementCount) return;
          const info = await api(`/api/effects/${encodeURIComponent(effect.effect_key)}`);
          fill(attempts, h("ul", { class: "attempts" }, info.attempts.map((a) =>
            h("li", {}, `#${a.attempt} token ${a.token} by ${a.worker} at `, when(a.claimed_at),
              ` → ${a.outcome || "open"}`, a.detail ? ` (${a.detail})` : ""))));
        },
      }, h("summary", {}, h("span", { class: "mono" }, effect.effect_key)), attempts);
      return h("tr", { "data-effect": effect.effect_key },
        h("td", {}, details),
        withRun ? h("td", {}, runLink(effect.run_id)) : null,
        h("td", {}, effect.status.replace("_", " "), " ", effect.in_doubt ? h("span", { class: "doubt" }, "in doubt") : ""),
        h("td", { class: "num" }, effect.token),
        h("td", { class: "num" }, effect.attempts),
        h("td", {}, effect.holder || h("span", { class: "muted" }, "—")),
        h("td", {}, leaseWindow(effect)),
        h("td", {}, effect.last_error || effect.settled_by || ""),
        h("td", {}, overrideButton(effect, after)));
    });
  }

  const EFFECT_COLUMNS = (withRun) => [["Key"], withRun ? ["Run"] : null, ["Status"], ["Token", "num"], ["Attempts", "num"],
    ["Holder"], ["Lease (claimed → expires)"], ["Error / settled"], [""]].filter(Boolean);

  async function effectsPage() {
    const draw = async () => {
      const [doubt, review] = await Promise.all([
        api("/api/effects?in_doubt=true"), api("/api/effects?status=needs_review")]);
      fill(app,
        panel("In doubt", h("p", { class: "muted" },
          "Claimed, and the lease ran out (or the claim went unanswered): it may have happened. Check with the provider, then record what it says."),
          table(EFFECT_COLUMNS(true), effectRows(doubt.effects, draw, { withRun: true }), "No effect is in doubt.")),
        panel("Needs review", table(EFFECT_COLUMNS(true), effectRows(review.effects, draw, { withRun: true }), "No effect needs review.")));
    };
    await draw();
    refreshEvery(5000, draw);
  }

  // -- audit --------------------------------------------------------------------------------

  function auditTable(rows, withRun) {
    return table([["When"], withRun ? ["Run"] : null, ["Who"], ["Action"], ["Effect"], ["Reason"], ["Detail"]].filter(Boolean),
      rows.map((row) => h("tr", {},
        h("td", {}, when(row.at)),
        withRun ? h("td", {}, runLink(row.run_id)) : null,
        h("td", {}, h("strong", {}, row.actor || "")),
        h("td", {}, row.action),
        h("td", { class: "mono", title: row.effect_key || "" }, brief(row.effect_key)),
        h("td", {}, row.reason || ""),
        h("td", { class: "mono" }, row.detail && Object.keys(row.detail).length ? compact(row.detail) : ""))),
      "No operator action yet.");
  }

  async function auditPage() {
    const data = await api("/api/audit?limit=200");
    fill(app, panel("Recent operator actions", auditTable(data.audit, true)));
  }

  // -- one run ------------------------------------------------------------------------------

  async function runPage() {
    let run = await api(`/api/runs/${encodeURIComponent(main.dataset.run)}`);
    const id = run.run_id;
    const header = h("section", { class: "panel", "aria-label": "Run" });
    const effects = h("section", { class: "panel", "aria-label": "Effects" });
    const timelineBody = h("tbody");
    const live = h("span", { class: "live", "data-state": "connecting" }, "connecting");
    const statePanel = h("div");
    const diffPanel = h("div");
    const lineage = h("section", { class: "panel", "aria-label": "Lineage" });
    const audit = h("section", { class: "panel", "aria-label": "Audit" });
    let last = 0;

    const drawHeader = () => {
      document.title = `${run.workflow_id} · Actae console`;
      main.querySelector("h1").textContent = run.workflow_id;
      const act = (verb, label, danger = false) => h("button", {
        class: danger ? "danger" : "quiet", onclick: async () => {
          const values = await ask(`${label} ${run.workflow_id}`, [{ name: "reason", label: "Reason (kept in the audit log)", multiline: true, required: true }], label, { danger });
          if (values === null) return;
          await perform(`${label}: done.`, () => api(`/api/runs/${id}/${verb}`, { method: "POST", body: { reason: values.reason } }), refresh);
        },
      }, label);
      const ended = ENDED.includes(run.lifecycle);
      const possible = mayAct ? [
        run.waiting && run.waiting.reason === "approval" ? decisionButtons({ run_id: id, waiting: run.waiting }, refresh) : null,
        !ended && run.lifecycle !== "paused" ? act("pause", "Pause") : null,
        run.lifecycle === "paused" ? act("unpause", "Unpause") : null,
        run.lifecycle === "failed" ? act("retry", "Retry") : null,
        !ended ? act("cancel", "Cancel", true) : null,
      ].flat().filter(Boolean) : [];
      const facts = [
        ["Agent", run.agent_id],
        ["Next action", h("span", { title: run.next_action }, brief(run.next_action))],
        ["Head", `cursor ${run.head_cursor} · state v${run.state_version}`],
        ["Started", when(run.created_at)],
        ["Updated", when(run.read_model && run.read_model.updated_at)],
        ["Usage", usage(run.usage)],
        ["Pins", Object.entries(run.pins).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${v}`).join(" · ") || "—", "wide"],
        run.forked_from ? ["Forked from", h("span", {}, runLink(run.forked_from.parent_run_id), ` at cursor ${run.forked_from.resolved_boundary}`)] : null,
        run.parent_run_id ? ["Parent", runLink(run.parent_run_id)] : null,
      ].filter(Boolean);
      fill(header,
        h("div", { class: "title-line" }, h("span", { id: "run-status" }, badge(run.status)),
          h("span", { class: "mono" }, id), run.lifecycle !== run.status ? h("span", { class: "muted" }, `(lifecycle ${run.lifecycle})`) : null,
          possible.length ? h("div", { class: "actions", role: "group", "aria-label": "Actions" }, possible) : null),
        run.waiting ? h("p", { class: "callout" }, run.waiting.reason === "child"
          ? h("span", {}, "Waiting for child run ", runLink(run.waiting.name.replace(/^child:/, "")))
          : `Waiting for ${run.waiting.reason} “${run.waiting.name}”`,
          run.waiting.until ? h("span", {}, " until ", when(run.waiting.until)) : null,
          run.waiting.escalated ? " — escalated" : "") : null,
        run.error ? h("p", { class: "callout error" }, run.error) : null,
        h("dl", { class: "summary" }, facts.map(([k, v, cls]) => h("div", { class: cls }, h("dt", {}, k), h("dd", {}, v)))),
        run.result ? h("details", {}, h("summary", {}, "Result"), json(run.result)) : null,
        Object.keys(run.decisions).length ? h("details", {}, h("summary", {}, "Decisions"), json(run.decisions)) : null);
      fill(effects, h("header", {}, h("h2", {}, "Effects")),
        table(EFFECT_COLUMNS(false), effectRows(run.effects, refresh), "No effects."));
    };

    const eventRow = (event, fresh) => {
      const made = event.state_cursor === event.cursor;
      const faded = (e) => e.currentTarget.classList.remove("fresh");
      return h("tr", { class: fresh ? "fresh" : null, "data-cursor": event.cursor, onanimationend: faded },
        h("td", { class: "num" }, event.cursor),
        h("td", {}, when(event.timestamp)),
        h("td", { class: "kind" }, event.kind),
        h("td", { class: "num" }, made ? h("span", { class: "version-made", title: "this event made the version" }, `v${event.state_version}`) : `v${event.state_version}`),
        h("td", { class: "mono muted" }, event.operation_id ? event.operation_id.split(":").slice(-3).join(":") : ""),
        h("td", { class: "payload" }, h("details", {}, h("summary", {}, compact(event.payload, 72)), json(event.payload))),
        h("td", {}, h("button", { class: "small quiet", onclick: () => showState(event.cursor), "aria-label": `State at cursor ${event.cursor}` }, "State")));
    };

    const showState = async (cursor) => {
      const input = statePanel.querySelector("input");
      if (input && cursor) input.value = cursor;
      const at = input && input.value ? `?cursor=${input.value}` : "";
      try {
        const state = await api(`/api/runs/${id}/state${at}`);
        fill(statePanel.querySelector(".out"),
          h("p", { class: "muted" }, `Version ${state.version}, made at cursor ${state.cursor} · checksum `, h("span", { class: "mono" }, state.checksum.slice(0, 16))),
          json(state.state));
      } catch (error) { say(error.message, "error"); }
    };

    const showDiff = async () => {
      const [from, to] = diffPanel.querySelectorAll("input");
      const params = new URLSearchParams();
      if (from.value) params.set("from", from.value);
      if (to.value) params.set("to", to.value);
      try {
        const d = await api(`/api/runs/${id}/diff?${params}`);
        from.value = d.from.version; to.value = d.to.version;
        const path = (c) => c.path.join(".") || "(the whole state)";
        fill(diffPanel.querySelector(".out"), d.changes.length ? h("ul", { class: "changes" }, d.changes.map((c) =>
          h("li", { class: c.kind },
            c.kind === "added" ? `+ ${path(c)}: ${JSON.stringify(c.after)}`
              : c.kind === "removed" ? `− ${path(c)}: ${JSON.stringify(c.before)}`
                : `~ ${path(c)}: ${JSON.stringify(c.before)} → ${JSON.stringify(c.after)}`)))
          : h("p", { class: "empty" }, d.from.version === d.to.version
            ? `Only state version ${d.to.version} so far.`
            : `Versions ${d.from.version} and ${d.to.version} hold the same state.`));
      } catch (error) { say(error.message, "error"); }
    };

    statePanel.append(
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); showState(); } },
        h("div", {}, h("label", { for: "state-cursor" }, "Cursor"), h("input", { id: "state-cursor", type: "number", min: 1, value: run.head_cursor })),
        h("button", { type: "submit", class: "quiet" }, "Show state")),
      h("div", { class: "out" }));
    diffPanel.append(
      h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); showDiff(); } },
        h("div", {}, h("label", { for: "diff-from" }, "From version"), h("input", { id: "diff-from", type: "number", min: 1 })),
        h("div", {}, h("label", { for: "diff-to" }, "To version"), h("input", { id: "diff-to", type: "number", min: 1 })),
        h("button", { type: "submit", class: "quiet" }, "Compare")),
      h("div", { class: "out" }));

    const drawLineage = async () => {
      const graph = await api(`/api/runs/${id}/lineage`);
      fill(lineage, h("header", {}, h("h2", {}, "Lineage")), ...lineageView(graph));
    };
    const drawAudit = async () => {
      const data = await api(`/api/runs/${id}/audit`);
      fill(audit, h("header", {}, h("h2", {}, "Audit log")), auditTable(data.audit, false));
    };
    async function refresh() {
      run = await api(`/api/runs/${id}`);
      drawHeader();
      await drawAudit();
    }

    drawHeader();
    fill(app, header,
      h("section", { class: "panel", "aria-label": "Timeline" },
        h("header", {}, h("h2", {}, "Timeline"), live),
        h("div", { class: "scroll" }, h("table", { id: "timeline" },
          h("thead", {}, h("tr", {}, ["Cursor", "Time", "Event", "Version", "Operation", "Payload", ""].map((c, i) =>
            h("th", { scope: "col", class: i === 0 || i === 3 ? "num" : null }, c)))),
          timelineBody))),
      h("div", { class: "grid" },
        h("section", { class: "panel", "aria-label": "State" }, h("header", {}, h("h2", {}, "State at a cursor")), statePanel),
        h("section", { class: "panel", "aria-label": "Diff" }, h("header", {}, h("h2", {}, "Diff of two state versions")), diffPanel)),
      effects, lineage, audit);

    const history = await api(`/api/runs/${id}/events?limit=500`);
    timelineBody.append(...history.events.map((event) => eventRow(event, false)));
    last = history.events.length ? history.events[history.events.length - 1].cursor : 0;
    showState();
    showDiff();
    drawLineage().catch((e) => say(e.message, "error"));
    drawAudit().catch((e) => say(e.message, "error"));

    const stream = new EventSource(`/api/runs/${id}/stream?after=${last}`);
    stream.addEventListener("open", () => { live.dataset.state = "open"; live.textContent = "live"; });
    stream.addEventListener("error", () => { live.dataset.state = "closed"; live.textContent = "reconnecting…"; });
    stream.addEventListener("event", (message) => {
      const event = JSON.parse(message.data);
      if (event.cursor <= last) return;
      last = event.cursor;
      timelineBody.append(eventRow(event, true));
      if (/fork|child/.test(event.kind)) drawLineage().catch(() => {});
    });
    stream.addEventListener("status", (message) => {
      const next = JSON.parse(message.data);
      const moved = next.status !== run.status;
      const previous = run.status;
      run = next;
      if (document.querySelector("dialog[open]")) return;
      drawHeader();
      if (moved) {
        say(`Status: ${previous} → ${run.status}`);
        drawAudit().catch(() => {});
      }
    });
    window.addEventListener("pagehide", () => stream.close());
  }

  // -- lineage as a graph -------------------------------------------------------------------

  function lineageView(graph) {
    if (!graph.edges.length) return [h("p", { class: "empty" }, "No forks or child runs: this run stands alone.")];
    const W = 220, H = 68, GAPX = 230, GAPY = 30, PAD = 14;
    const byId = new Map(graph.nodes.map((n) => [n.run_id, n]));
    const below = new Map();
    const isChild = new Set();
    for (const edge of graph.edges) {
      if (!below.has(edge.parent)) below.set(edge.parent, []);
      below.get(edge.parent).push(edge);
      isChild.add(edge.child);
    }
    const roots = graph.nodes.filter((n) => !isChild.has(n.run_id));
    const place = new Map();
    let row = 0;
    const layout = (id, depth) => {
      const kids = below.get(id) || [];
      kids.forEach((edge) => layout(edge.child, depth + 1));
      const y = kids.length ? (place.get(kids[0].child).y + place.get(kids[kids.length - 1].child).y) / 2 : row++ * (H + GAPY);
      place.set(id, { x: depth * (W + GAPX), y });
    };
    roots.forEach((root) => layout(root.run_id, 0));
    const width = Math.max(...[...place.values()].map((p) => p.x)) + W + 2 * PAD;
    const height = Math.max(...[...place.values()].map((p) => p.y)) + H + 2 * PAD;
    const svg = s("svg", { width, height, viewBox: `${-PAD} ${-PAD} ${width} ${height}`, role: "img",
      "aria-label": `Lineage graph: ${graph.nodes.length} runs, ${graph.edges.length} edges` },
      s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))));
    for (const edge of graph.edges) {
      const a = place.get(edge.parent), b = place.get(edge.child);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      const r = edge.receipt;
      const label = edge.relation === "fork"
        ? `fork at cursor ${r.requested_boundary}→${r.resolved_boundary} · v${r.state_version} · ${String(r.state_checksum || "").replace("sha256:", "").slice(0, 8)}` : "child run";
      const reason = (r && r.reason) || "";
      const sub = edge.relation === "fork" ? `${reason.length > 32 ? `${reason.slice(0, 31)}…` : reason}` : "";
      svg.append(s("g", {},
        s("title", {}, edge.relation === "fork"
          ? `Fork receipt: requested cursor ${r.requested_boundary}, resolved ${r.resolved_boundary}, state version ${r.state_version}, checksum ${r.state_checksum}, reason: ${r.reason || "—"}`
          : `Child run ${edge.child} of ${edge.parent}`),
        s("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, class: `edge ${edge.relation}`, "marker-end": "url(#arrow)" }),
        s("text", { x: mx, y: (y1 + y2) / 2 - 6, "text-anchor": "middle", class: "edge-label" }, label),
        sub ? s("text", { x: mx, y: (y1 + y2) / 2 + 8, "text-anchor": "middle", class: "edge-label sub" }, sub) : null));
    }
    for (const [id, p] of place) {
      const node = byId.get(id) || { run_id: id };
      svg.append(s("a", { href: `/runs/${id}`, "aria-label": `run ${node.workflow_id || id}` },
        s("g", { class: `node${node.current ? " current" : ""}`, transform: `translate(${p.x} ${p.y})` },
          s("rect", { width: W, height: H, rx: 8 }),
          s("text", { x: 12, y: 22, "font-weight": 600 }, (node.workflow_id || short(id)).slice(0, 28)),
          s("text", { x: 12, y: 40, class: "sub" }, `${short(id)} · ${node.status || "?"}`),
          node.model ? s("text", { x: 12, y: 56, class: "sub" }, node.model.slice(0, 30)) : null)));
    }
    const receipts = graph.edges.filter((e) => e.relation === "fork").map((edge) => {
      const r = edge.receipt;
      const inherited = r.inherited ? `${r.inherited.steps} steps, ${r.inherited.transitions} transitions, ${r.inherited.effects} effects` : "—";
      return h("tr", {},
        h("td", {}, runLink(edge.parent), " → ", runLink(edge.child)),
        h("td", { class: "num" }, r.requested_boundary), h("td", { class: "num" }, r.resolved_boundary),
        h("td", { class: "num" }, `v${r.state_version}`), h("td", { class: "mono" }, String(r.state_checksum).slice(0, 16)),
        h("td", {}, r.reason || ""), h("td", {}, inherited));
    });
    return [h("div", { class: "lineage" }, svg), receipts.length ? h("details", { open: true }, h("summary", {}, "Fork receipts"),
      table([["Edge"], ["Requested", "num"], ["Resolved", "num"], ["Version", "num"], ["Checksum"], ["Reason"], ["Inherited"]], receipts, "")) : null];
  }

  // -- start --------------------------------------------------------------------------------

  const pages = { runs: runsPage, run: runPage, approvals: approvalsPage, effects: effectsPage, audit: auditPage };
  const page = pages[document.body.dataset.page];
  if (page) page().catch((error) => {
    fill(app);
    say(error.message, "error");
  });
})();

// reactorflow dashboard: renders the API's JSON with DOM calls only (textContent and
// attributes, never HTML strings), so every user value is shown escaped.
"use strict";
(() => {
  const TOKEN_KEY = "reactorflow-token";
  const $ = (id) => document.getElementById(id);
  const api = (path) => new URL(path, document.baseURI).toString();
  let reactors = {}; // name -> the newest version's graph (GET api/reactors)
  const versionGraphs = {}; // "name@version" -> that version's graph, or null: not declared here
  let fieldCount = 0; // radio groups need a name unique on the page
  let stream = null;
  let session = { token: null, role: null }; // GET api/session: the token's name and role
  const READ_ONLY = "your token may only read";
  const readOnly = () => session.role === "read";
  function guard(button) { // a read token sees every action, disabled, and why
    if (!readOnly()) return button;
    button.disabled = true; button.title = READ_ONLY;
    return button;
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY); }
  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    if (token()) h.Authorization = "Bearer " + token();
    return h;
  }

  class ApiError extends Error {
    constructor(status, body) { super(body.message || ("HTTP " + status)); this.status = status; this.kind = body.error; }
  }

  async function call(path, options) {
    const response = await fetch(api(path), Object.assign({ headers: headers(options && options.body ? { "Content-Type": "application/json" } : {}) }, options || {}));
    let body = {};
    try { body = await response.json(); } catch (e) { body = {}; }
    // a refused read asks for the token; a refused change shows why where it was asked for
    if (response.status === 401 && !(options && options.method === "POST")) { showLogin(body.message); throw new ApiError(401, body); }
    if (!response.ok) throw new ApiError(response.status, body);
    return body;
  }

  // Server-sent events over fetch (EventSource cannot send the Authorization header).
  function follow(path, onEvent, onError) {
    const controller = new AbortController();
    (async () => {
      $("live").classList.add("on");
      try {
        const response = await fetch(api(path), { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
        if (response.status === 401) { showLogin(); return; }
        if (!response.ok || !response.body) {
          let body = {};
          try { body = await response.json(); } catch (e) { body = {}; }
          if (onError) onError(new ApiError(response.status, body));
          return;
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
            let event = "message"; const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) event = line.slice(7);
              else if (line.startsWith("data: ")) data.push(line.slice(6));
            }
            if (data.length) onEvent(event, JSON.parse(data.join("\n")));
          }
        }
      } catch (e) { if (e.name !== "AbortError") console.warn(e); }
      finally { if (!controller.signal.aborted) $("live").classList.remove("on"); }
    })();
    return () => { controller.abort(); $("live").classList.remove("on"); };
  }

  function stopStream() { if (stream) { stream(); stream = null; } }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }
  const pad = (n, w) => String(n).padStart(w || 2, "0");
  const when = (t) => {
    if (!t) return "-";
    const d = new Date(t * 1000);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };
  const clock = (t) => { const d = new Date(t * 1000); return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`; };
  const label = (l) => (Array.isArray(l) ? l.join("/") : l);
  const badge = (s) => el("span", { class: "status s-" + s, text: s });
  const pretty = (v) => (v === null || v === undefined ? "-" : JSON.stringify(v, null, 2));
  // a value this server cannot open reads "<encrypted>" (no key for it) or "<erased>" (its
  // subject was forgotten): shown as that word, muted, never as a quoted JSON string
  const PROTECTED = { "<encrypted>": ["encrypted", "encrypted: this server holds no key for this value"],
    "<erased>": ["erased", "erased: this run's subject was forgotten; the value can never be read again"] };
  const protectedAs = (v) => (typeof v === "string" && Object.hasOwn(PROTECTED, v) ? PROTECTED[v] : null);
  function showValue(node, v, otherwise) { // a <pre> of a value: pretty JSON, or the protected word
    const sealed = protectedAs(v);
    node.classList.toggle("protected", !!sealed);
    if (sealed) { node.dataset.protected = sealed[0]; node.title = sealed[1]; node.textContent = v; return; }
    delete node.dataset.protected; node.removeAttribute("title");
    node.textContent = otherwise === undefined ? pretty(v) : otherwise;
  }
  const NEEDS_VALUES = ["undo", "retry", "retry-step", "skip-step", "rewind"];
  const SEALED_NOTE = {
    encrypted: "This run's values are encrypted, and this server holds no key for them: they show as <encrypted>. Undo, retry, rewind and continuing it need a server that holds the key.",
    erased: "This run's subject was forgotten: its values are erased and show as <erased>. They can never be read again, so it cannot be undone, retried or rewound." };
  const sealedText = (text) => { // error text: the protected word as a muted mark, else the text
    const sealed = protectedAs(text);
    return sealed ? el("span", { class: "protected", "data-protected": sealed[0], title: sealed[1], text }) : text || "";
  };
  // a run.migrated event's detail, "1 -> 2: completed fraud_check; undo given up: bill" (what
  // the hooks did, hop by hop), reads "version 1 → 2: completed fraud_check; undo given up: bill"
  const MIGRATED = "run.migrated";
  const migration = (detail) => (detail || "").replace(/(^|; )(\d+) -> (\d+): /g, "$1version $2 \u2192 $3: ");

  // -- a step's note: its error, until when it sleeps, the gate it waits for. Phrased as the
  // CLI's `runs show` phrases it (reactorflow/cli/notes.py): "sleeping until 2026-12-04 10:00
  // UTC (in 2 d 3 h)".
  const MINUTE = 60, HOUR = 3600, DAY = 86400;
  const pair = (big, bigUnit, small, smallUnit) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  function inWords(seconds) { // two largest units, rounded to the smaller: "2 d 3 h", "4 min 10 s"
    seconds = Math.abs(seconds);
    const r = Math.round;
    if (r(seconds / MINUTE) >= DAY / MINUTE) { const h = r(seconds / HOUR); return pair(Math.floor(h / 24), "d", h % 24, "h"); }
    if (r(seconds) >= HOUR) { const m = r(seconds / MINUTE); return pair(Math.floor(m / 60), "h", m % 60, "min"); }
    if (r(seconds) >= MINUTE) { const s = r(seconds); return pair(Math.floor(s / 60), "min", s % 60, "s"); }
    return `${r(seconds)} s`;
  }
  function momentUtc(iso) { // "2026-12-04 10:00 UTC" (":SS" when its seconds are not 0)
    const d = new Date(iso);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` +
      (d.getUTCSeconds() ? ":" + pad(d.getUTCSeconds()) : "") + " UTC";
  }
  function until(iso, now) {
    const left = new Date(iso).getTime() / 1000 - now;
    if (Math.round(left) === 0) return "due now";
    return left > 0 ? "in " + inWords(left) : "due " + inWords(left) + " ago";
  }
  const sleeping = (at, now) => "sleeping until " + momentUtc(at) + " (" + until(at, now) + ")";
  function stepNote(s, now) {
    const notes = [];
    if (s.wake_at && s.status === "waiting") notes.push(sleeping(s.wake_at, now));
    if (s.gate) notes.push("waiting for " + s.gate);
    if (s.error) notes.push(s.error);
    return notes.join("; ");
  }

  function show(id) {
    for (const s of ["login", "list-view", "run-view"]) $(s).hidden = s !== id;
    $("forget").hidden = !token();
  }

  function showLogin(message) {
    stopStream();
    show("login");
    $("login-error").textContent = token() ? (message || "That token was refused.") : "";
    if (!token() && message && !/needs a bearer token/.test(message)) $("login-error").textContent = message;
    $("token").focus();
  }

  // -- the run list -----------------------------------------------------------------------------
  const listState = { cursors: [null] };

  // the list's filters, each a field of GET api/runs and of the page's own query string (so a
  // filtered list can be linked and reloaded)
  const FILTERS = { reactor: "f-reactor", status: "f-status", since: "f-since", until: "f-until",
    error_type: "f-error-type", version: "f-version", correlation_id: "f-correlation-id",
    idempotency_key: "f-idempotency-key", limit: "f-limit" };

  function listQuery(cursor) {
    const q = new URLSearchParams();
    for (const [field, id] of Object.entries(FILTERS)) if ($(id).value.trim()) q.set(field, $(id).value.trim());
    if (cursor) q.set("cursor", cursor);
    return q.toString();
  }

  function filtersFromUrl() { // the page's query string into the filter fields
    const q = new URLSearchParams(location.search);
    for (const [field, id] of Object.entries(FILTERS)) {
      const value = q.get(field);
      if (field === "reactor" && value) addReactorOption(value);
      if (value !== null || field !== "limit") $(id).value = value || "";
    }
    if (!$("f-limit").value) $("f-limit").value = "50";
  }

  function filtersToUrl() {
    const q = new URLSearchParams(listQuery(null));
    if (q.get("limit") === "50") q.delete("limit");
    const wanted = q.toString() ? "?" + q.toString() : location.pathname;
    if (wanted !== location.search) history.replaceState(null, "", wanted);
  }

  // -- times: UTC or this browser's zone (remembered), relative ("3 min ago"), durations ---------
  const ZONE_KEY = "reactorflow.timezone";
  const inUtc = () => localStorage.getItem(ZONE_KEY) === "utc";
  function at(t) { // "2026-12-04 10:00:05 UTC" or the same in local time
    if (!t) return "-";
    if (!inUtc()) return when(t);
    const d = new Date(t * 1000);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
  }
  const agoAt = (t, now) => (Math.round(now - t) <= 0 ? "just now" : inWords(now - t) + " ago");
  function showZone() { $("tz-toggle").textContent = "Times: " + (inUtc() ? "UTC" : "local"); }
  let lastPage = null;

  // -- the search box: a run id opens it; a correlation id or idempotency key finds its run ----
  async function find(text) {
    const message = $("search-message");
    message.textContent = "";
    if (!text) return;
    try { await call("api/runs/" + encodeURIComponent(text)); location.search = "?run=" + encodeURIComponent(text); return; }
    catch (e) { if (e.status !== 404) { message.textContent = e.message; return; } }
    for (const field of ["correlation_id", "idempotency_key"]) {
      const found = (await call("api/runs?" + new URLSearchParams({ [field]: text }))).runs;
      if (found.length === 1) { location.search = "?run=" + encodeURIComponent(found[0].id); return; }
      if (found.length > 1) { // one per reactor: the list shows them
        for (const id of Object.values(FILTERS)) if (id !== "f-limit") $(id).value = "";
        $(FILTERS[field]).value = text;
        listState.cursors = [null]; filtersToUrl(); loadList();
        return;
      }
    }
    message.textContent = "No run has the id, correlation id or idempotency key " + JSON.stringify(text) + ".";
  }

  function renderList(page) {
    lastPage = page;
    const body = $("runs").tBodies[0];
    const now = Date.now() / 1000;
    body.replaceChildren();
    for (const run of page.runs) {
      const href = "?run=" + encodeURIComponent(run.id);
      const link = el("a", { href, text: run.id });
      const note = run.waiting_on.length ? ["waiting on " + run.waiting_on.map(label).join(", ")]
        : run.error ? [(run.error.step ? run.error.step + ": " : "") + run.error.type + ": ", sealedText(run.error.message)] : [];
      const row = el("tr", { "data-run": run.id, class: "run-row" }, el("td", {}, link), el("td", { text: run.reactor }),
        el("td", { class: "version", text: run.version }), el("td", {}, badge(run.status)),
        el("td", { class: "nowrap created", title: agoAt(run.created_at, now) }, el("span", { class: "at", text: at(run.created_at) }),
          el("span", { class: "ago", text: agoAt(run.created_at, now) })),
        el("td", { class: "nowrap updated", title: at(run.updated_at), text: agoAt(run.updated_at, now) }),
        el("td", { class: "nowrap took", text: inWords(Math.max(0, run.updated_at - run.created_at)) }), el("td", { class: "note" }, ...note));
      // the whole row leads to the run (its id is the link; a click elsewhere follows it too)
      row.addEventListener("click", (event) => { if (!event.target.closest("a, button, input") && !String(window.getSelection())) location.href = href; });
      body.append(row);
      addReactorOption(run.reactor);
    }
    $("no-runs").textContent = "No runs.";
    $("no-runs").hidden = page.runs.length > 0;
    if (cursorRow >= 0) moveCursor(cursorRow); // (kept on its place across a refresh)
    listState.next = page.next_cursor;
    $("older").disabled = !page.next_cursor;
    $("newest").disabled = listState.cursors.length <= 1;
    renderSelection();
  }

  // -- the keyboard on the run list: j/k (or the arrows) move, Enter (or o) opens, x ticks, / finds
  let cursorRow = -1; // the row the keyboard is on (-1: none yet)

  function moveCursor(to) {
    const rows = $("runs").tBodies[0].rows;
    if (!rows.length) return;
    cursorRow = Math.max(0, Math.min(rows.length - 1, to));
    for (const [index, row] of Array.from(rows).entries()) {
      row.classList.toggle("current", index === cursorRow);
      row.setAttribute("aria-selected", String(index === cursorRow));
    }
    rows[cursorRow].scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", (event) => {
    if ($("list-view").hidden || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest("input, textarea, select, button, dialog")) return;
    const rows = $("runs").tBodies[0].rows;
    const row = rows[cursorRow];
    if (event.key === "j" || event.key === "ArrowDown") moveCursor(cursorRow + 1);
    else if (event.key === "k" || event.key === "ArrowUp") moveCursor(cursorRow < 0 ? 0 : cursorRow - 1);
    else if ((event.key === "Enter" || event.key === "o") && row) location.href = row.querySelector("a").href;
    else if (event.key === "x" && row) { const box = row.querySelector("input.pick"); if (box) box.click(); }
    else if (event.key === "/") $("search").focus();
    else return;
    event.preventDefault();
  });

  // -- bulk actions on the run list: a checkbox per row, "select all matching", the action bar
  const BULK_FILTERS = ["reactor", "status", "since", "until", "error_type", "version", "correlation_id", "idempotency_key"];
  const bulk = { ids: new Set(), matching: null }; // matching: {filter, count} once "all matching" is chosen

  function bulkFilter() { // the list's own filters, as the bulk API names them
    const query = new URLSearchParams(listQuery(null));
    const filter = {};
    for (const name of BULK_FILTERS) if (query.get(name)) filter[name] = name === "version" ? Number(query.get(name)) : query.get(name);
    return filter;
  }

  function renderSelection() { // a checkbox on every row (kept across re-renders) and one in the header
    const head = $("runs").tHead.rows[0];
    if (!head.querySelector("th.pick")) {
      const all = el("input", { type: "checkbox", id: "bulk-page", "aria-label": "select every run on this page" });
      all.addEventListener("change", () => {
        bulk.matching = null;
        for (const box of $("runs").tBodies[0].querySelectorAll("input.pick")) { box.checked = all.checked; pick(box.dataset.run, all.checked); }
        showBulkBar();
      });
      head.prepend(el("th", { class: "pick" }, all));
    }
    for (const row of $("runs").tBodies[0].rows) {
      const id = row.dataset.run;
      const box = el("input", { type: "checkbox", class: "pick", "data-run": id, "aria-label": "select run " + id });
      box.checked = bulk.matching !== null || bulk.ids.has(id);
      box.addEventListener("change", () => { bulk.matching = null; pick(id, box.checked); showBulkBar(); });
      row.prepend(el("td", { class: "pick" }, box));
    }
    showBulkBar();
  }

  function pick(id, on) { if (on) bulk.ids.add(id); else bulk.ids.delete(id); }

  function showBulkBar() {
    const count = bulk.matching ? bulk.matching.count : bulk.ids.size;
    $("bulk-bar").hidden = $("runs").tBodies[0].rows.length === 0;
    for (const button of $("bulk-bar").querySelectorAll("button[data-bulk]")) button.disabled = count === 0;
    $("bulk-count").textContent = bulk.matching ? "All " + count + " matching run(s) selected" : count + " run(s) selected";
    $("bulk-page").checked = !bulk.matching && count > 0 && [...$("runs").tBodies[0].querySelectorAll("input.pick")].every((b) => b.checked);
  }

  function bulkBody(action) { // the selected rows by id, or everything the list's filters match
    if (!bulk.matching) return { action, filter: { ids: [...bulk.ids] } };
    const filter = bulk.matching.filter;
    return Object.keys(filter).length ? { action, filter } : { action, all: true };
  }

  async function selectMatching() {
    const filter = bulkFilter();
    const body = Object.keys(filter).length ? { action: "cancel", filter, dry_run: true } : { action: "cancel", all: true, dry_run: true };
    try {
      const found = await call("api/runs:bulk", { method: "POST", body: JSON.stringify(body) });
      bulk.matching = { filter, count: found.matched };
      for (const box of $("runs").tBodies[0].querySelectorAll("input.pick")) box.checked = true;
      showBulkBar();
    } catch (e) { bulkMessage(e.message); }
  }

  function bulkMessage(text) { $("bulk-result").hidden = false; $("bulk-summary").className = "bad"; $("bulk-summary").textContent = text; $("bulk-outcomes").replaceChildren(); }

  const LISTED = 20; // the runs a bulk confirmation names one by one, at most
  function bulkWhich(count) { // which runs a bulk action acts on: their ids, or the filters that match them
    if (bulk.matching) {
      const filter = Object.entries(bulk.matching.filter).map(([k, v]) => k + "=" + v).join(", ");
      return "all " + count + " run(s) matching the list's filters (" + (filter || "none: every run") + ")";
    }
    const ids = [...bulk.ids];
    const more = ids.length > LISTED ? " and " + (ids.length - LISTED) + " more" : "";
    return count + " selected run(s): " + ids.slice(0, LISTED).join(", ") + more;
  }

  async function runBulk(action) {
    const count = bulk.matching ? bulk.matching.count : bulk.ids.size;
    if (!count) return;
    const verb = { cancel: "Cancel", undo: "Undo (roll back every completed step of)", retry: "Retry (start a new run with the inputs of)", resume: "Resume" }[action];
    if (!window.confirm(verb + " " + bulkWhich(count) + "?")) return;
    try {
      const done = await call("api/runs:bulk", { method: "POST", body: JSON.stringify(bulkBody(action)) });
      const refused = done.runs.filter((r) => !r.ok).length;
      $("bulk-result").hidden = false;
      $("bulk-summary").className = refused ? "bad" : "";
      $("bulk-summary").textContent = action + ": " + (done.runs.length - refused) + " ok, " + refused + " refused (of " + done.matched + ")";
      $("bulk-outcomes").replaceChildren(...done.runs.map((r) => el("li", { "data-run": r.id, class: r.ok ? "ok" : "bad" },
        el("a", { href: "?run=" + encodeURIComponent(r.id), text: r.id }), " ", badge(r.status),
        r.ok ? (r.retried_as ? " retried as " + r.retried_as : r.note ? " (" + r.note + ")" : "") : " refused: " + r.error)));
      clearSelection();
      loadList(); // the rows as the action left them
    } catch (e) { bulkMessage(e.message); }
  }

  function addReactorOption(name) {
    const select = $("f-reactor");
    if ([...select.options].some((o) => o.value === name)) return;
    select.append(el("option", { value: name, text: name }));
  }

  // -- schedules (below the run list) --------------------------------------------------------------
  function renderSchedules(found) {
    $("schedules-box").hidden = found.length === 0;
    $("schedules").tBodies[0].replaceChildren(...found.map((s) => {
      const last = s.last_run ? el("a", { href: "?run=" + encodeURIComponent(s.last_run), text: s.last_run }) : "-";
      const action = s.paused ? "resume" : "pause";
      const button = el("button", { type: "button", "data-action": action, text: s.paused ? "Resume" : "Pause" });
      button.addEventListener("click", () => toggleSchedule(s.schedule, action));
      return el("tr", { "data-schedule": s.schedule }, el("td", { class: "nowrap", text: s.schedule }),
        el("td", { class: "nowrap", text: s.cron + " (" + s.timezone + ")" }),
        el("td", { class: "nowrap", text: s.next ? s.next.replace("T", " ") : "-" }), el("td", {}, last),
        el("td", {}, el("span", { class: "status " + (s.paused ? "s-paused" : "s-completed"), text: s.paused ? "paused" : "active" })),
        el("td", { class: "error", text: s.error || "" }), el("td", {}, guard(button)));
    }));
  }

  let schedulesAsked = 0;
  async function loadSchedules() {
    const asked = ++schedulesAsked; // an older answer arriving late is dropped
    try { const found = (await call("api/schedules")).schedules; if (asked === schedulesAsked) renderSchedules(found); }
    catch (e) { $("schedule-message").className = "bad"; $("schedule-message").textContent = e.message; }
  }

  async function toggleSchedule(key, action) {
    const message = $("schedule-message");
    if (!window.confirm((action === "pause" ? "Pause" : "Resume") + " schedule " + key + "?")) return;
    try {
      await call("api/schedules/" + encodeURIComponent(key) + "/" + action, { method: "POST" });
      message.className = ""; message.textContent = "Schedule " + key + ": " + (action === "pause" ? "paused." : "resumed.");
      await loadSchedules();
    } catch (e) { message.className = "bad"; message.textContent = e.message; }
  }

  // -- workers (below the schedules): the live ones, by their heartbeats ----------------------------
  function secondsAgo(iso) {
    const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return seconds + " s ago";
  }

  function renderWorkers(found) {
    $("no-workers").hidden = found.length > 0;
    $("workers").hidden = found.length === 0;
    $("workers").tBodies[0].replaceChildren(...found.map((w) => {
      const versions = Object.entries(w.versions).map(([name, v]) => el("div", { text: name + " v" + v.join(",") }));
      return el("tr", { "data-process": String(w.process) }, el("td", { text: w.host }),
        el("td", { text: String(w.process) }), el("td", { text: w.queues.join(", ") || "-" }),
        el("td", {}, ...(versions.length ? versions : ["-"])), el("td", { text: String(w.jobs_in_flight) }),
        el("td", { class: "nowrap", text: when(Date.parse(w.started_at) / 1000) }),
        el("td", { class: "nowrap last-seen", "data-at": w.last_seen, text: secondsAgo(w.last_seen) }));
    }));
  }

  let workersAsked = 0;
  async function loadWorkers() {
    const asked = ++workersAsked; // an older answer arriving late is dropped
    try { const found = (await call("api/workers")).workers; if (asked === workersAsked) renderWorkers(found); }
    catch (e) { $("no-workers").hidden = false; $("no-workers").textContent = e.message; }
  }

  async function loadList() {
    stopStream();
    const cursor = listState.cursors[listState.cursors.length - 1];
    loadWorkers();
    if (cursor) { renderList(await call("api/runs?" + listQuery(cursor))); loadSchedules(); }
    else stream = follow("api/events?" + listQuery(null), (event, page) => { if (event === "runs") { renderList(page); loadSchedules(); } },
      (error) => { $("no-runs").hidden = false; $("no-runs").textContent = error.message; });
  }

  // -- one run ----------------------------------------------------------------------------------
  let current = null;

  function renderRun(run) {
    // an action's answer is the run without its maps' progress: keep the last one read
    if (!run.maps && current && current.id === run.id) run.maps = current.maps;
    current = run;
    $("run-id").textContent = run.id;
    $("run-status").replaceChildren(badge(run.status));
    const facts = [["Reactor", run.reactor], ["Version", String(run.version)], ["Created", when(run.created_at)], ["Updated", when(run.updated_at)]];
    for (const e of run.history) if (e.kind === MIGRATED) facts.push(["Migrated", migration(e.detail) + " (" + when(e.at) + ")"]);
    if (run.retried_from) facts.push(["Retried from", run.retried_from]);
    if (run.waiting_on.length) facts.push(["Waiting on", run.waiting_on.map(label).join(", ")]);
    if (run.timeout_at) facts.push(["Times out", when(run.timeout_at)]);
    if (run.cancel_reason) facts.push(["Cancel reason", run.cancel_reason]);
    if (run.halt_reason) facts.push(["Halt reason", run.halt_reason]);
    if (run.paused_by) facts.push(["Paused by", run.paused_by.by + " at " + when(run.paused_by.at) + (run.paused_by.reason ? ": " + run.paused_by.reason : "")]);
    if (run.status === "held") facts.push(["Held at", heldStep(run) + ": it failed and waits for an operator (retry or skip the step, undo or cancel the run)"]);
    $("facts").replaceChildren(...facts.flatMap(([k, v]) => {
      const dd = el("dd", { text: v, "data-fact": k.toLowerCase().replace(/ /g, "-") });
      if (k === "Retried from") dd.replaceChildren(el("a", { href: "?run=" + encodeURIComponent(v), text: v }));
      return [el("dt", { text: k }), dd];
    }));
    const terminal = ["completed", "failed", "cancelled", "aborted", "halted"].includes(run.status);
    // a run that only sleeps is undone at once, as a paused one (the server refuses, saying why,
    // when something else is also out)
    const asleep = run.status === "running" && Object.values(run.steps).some((s) => s.status === "waiting" && s.wake_at);
    // which operation each status allows (the server refuses the others, saying why)
    const held = run.status === "held";
    const allowed = { undo: ["completed", "paused", "aborted", "cancelled", "halted", "held"].includes(run.status) || asleep,
      cancel: ["running", "paused", "held"].includes(run.status), retry: ["failed", "cancelled", "aborted"].includes(run.status),
      "retry-step": held, "skip-step": held,
      rewind: ["completed", "paused", "held", "cancelled", "aborted"].includes(run.status),
      pause: run.status === "running", resume: run.status === "paused" && !!run.paused_by };
    // a run whose values this server cannot open: the operations that read them are refused
    // (rf.KeyUnavailable), so they are disabled, saying why
    const sealed = protectedAs(run.inputs);
    $("protected-note").hidden = !sealed;
    $("protected-note").textContent = sealed ? SEALED_NOTE[sealed[0]] : "";
    for (const button of document.querySelectorAll("#actions button")) {
      const unreadable = sealed && NEEDS_VALUES.includes(button.dataset.action);
      button.disabled = !allowed[button.dataset.action] || unreadable;
      button.title = unreadable ? SEALED_NOTE[sealed[0]] : "";
      guard(button);
    }
    for (const name of ["retry-step", "skip-step"]) document.querySelector(`#actions button[data-action='${name}']`).hidden = !held;
    document.querySelector("#actions .sep").hidden = !held;
    const open = $("repair").dataset;
    if (open.run !== run.id || (open.kind === "skip" && !held) || (open.kind === "rewind" && !allowed.rewind)) closeSkip();
    renderError(run.error);
    renderWhy(run);
    renderInterrupts(run);
    renderGraph(run);
    renderSteps(run);
    showValue($("inputs"), run.inputs);
    showValue($("value"), run.status === "completed" ? run.value : null, run.status === "completed" ? undefined : (terminal ? "-" : "(not finished)"));
    $("history").tBodies[0].replaceChildren(...run.history.map((e) => el("tr", { "data-kind": e.kind, class: e.kind === MIGRATED ? "migrated" : "" },
      el("td", { class: "nowrap", text: clock(e.at) }), el("td", { text: e.kind }), el("td", { text: e.step }),
      el("td", { text: e.attempt || "" }), el("td", { class: "detail" }, e.kind === MIGRATED ? migration(e.detail) : sealedText(e.detail)),
      el("td", { class: "actor", text: e.actor || "" }))));
  }

  // -- versions: a run is drawn with the graph of its own version, fetched when it is not the
  // newest; a version this server does not declare is drawn from the steps stored with the run

  function versionOf(run) { // the run's version's graph; undefined while it is being fetched
    const newest = reactors[run.reactor];
    if (!newest) return null;
    if (newest.version === run.version) return newest;
    const key = run.reactor + "@" + run.version;
    if (!(key in versionGraphs)) {
      if (!(newest.versions || []).includes(run.version)) versionGraphs[key] = null;
      else {
        versionGraphs[key] = undefined;
        const path = "api/reactors/" + encodeURIComponent(run.reactor) + "?version=" + run.version;
        call(path).then((form) => { versionGraphs[key] = form; }, () => { versionGraphs[key] = null; })
          .then(() => { if (current && current.reactor === run.reactor && current.version === run.version) renderRun(current); });
      }
    }
    return versionGraphs[key];
  }

  // what the run waits on, and since when (GET api/runs/{id}/why: rf.explain), or that it moves
  const utc = (iso) => new Date(iso).toISOString().slice(0, 19).replace("T", " ") + " UTC";
  const ago = (iso) => inWords(Date.now() / 1000 - Date.parse(iso) / 1000);
  async function renderWhy(run) {
    const banner = $("why-banner");
    let blockers = [];
    try { blockers = await call("api/runs/" + encodeURIComponent(run.id) + "/why"); } catch (e) { blockers = []; }
    if (!current || current.id !== run.id) return;
    const ended = ["completed", "failed", "cancelled", "aborted", "halted"].includes(run.status);
    banner.hidden = ended && !blockers.length;
    banner.classList.toggle("moving", !blockers.length);
    if (!blockers.length) {
      const steps = Object.values(run.steps);
      const done = steps.filter((s) => s.status === "completed").length;
      banner.replaceChildren(el("p", { "data-kind": "moving", text: `Moving: ${done} of ${steps.length} steps done; last change ${utc(run.updated_at * 1000)}.` }));
      return;
    }
    banner.replaceChildren(...blockers.map((b) => el("p", { "data-kind": b.kind },
      el("span", { class: "why-kind", text: "Waiting on " + b.kind.replace("_", " ") + (b.step ? " (step " + b.step + ")" : "") }),
      el("span", { text: (b.since ? " since " + utc(b.since) + " (" + ago(b.since) + " ago)" : "") +
        (b.until ? ", until " + utc(b.until) : "") + ": " + b.detail }))));
  }

  function renderError(error) {
    $("error-box").hidden = !error;
    if (!error) return;
    $("error-text").replaceChildren((error.step ? "Step " + error.step + " failed: " : "The run failed: ") + error.type + ": ", sealedText(error.message));
    $("rollback-failures").replaceChildren(...error.rollback_failures.map((f) =>
      el("li", {}, "rollback failure: " + f.kind + " of " + f.step + ": " + (f.type ? f.type + ": " : ""), sealedText(f.message))));
    showValue($("traceback"), error.traceback, error.traceback || "(none recorded)");
  }

  function graphOf(reactor, run) {
    if (reactor && reactor.steps.length) return reactor.steps;
    return Object.keys(run.steps).map((key) => ({ key, kind: "step", deps: [], level: "" }));
  }

  // the graph is laid out by dagre and drawn by graph.js; this says what each box shows
  function describeStep(s, state) {
    const asleep = state.wake_at && state.status === "waiting" ? sleeping(state.wake_at, Date.now() / 1000) : "";
    const kind = s.kind === "step" ? "" : " (" + s.kind + ")";
    return { word: asleep ? "sleeping" : state.status, title: s.key + kind + ": " + (asleep || state.status) };
  }

  function renderGraph(run) {
    const reactor = versionOf(run);
    const graph = $("graph");
    if (reactor === undefined) { graph.replaceChildren(); return; } // drawn once it arrives
    // which graph is drawn: the declared one of the run's version, or the one stored with it
    graph.dataset.version = String(run.version);
    graph.dataset.source = reactor && reactor.steps.length ? "declared" : "stored";
    window.reactorflowGraph.draw(graph, graphOf(reactor, run), run, describeStep);
  }

  function renderSteps(run) {
    const now = Date.now() / 1000;
    const times = Object.values(run.steps).flatMap((s) => [s.started_at, s.finished_at]).filter(Boolean);
    const start = Math.min(run.created_at, ...times), end = Math.max(run.updated_at, ...times);
    const span = Math.max(end - start, 1e-3);
    $("steps").tBodies[0].replaceChildren(...Object.entries(run.steps).map(([key, s]) => {
      const bar = el("div", { class: "bar" });
      if (s.started_at) {
        const left = ((s.started_at - start) / span) * 100, right = (((s.finished_at || end) - start) / span) * 100;
        const fill = el("span", { class: "s-" + s.status });
        fill.style.left = left.toFixed(2) + "%";
        fill.style.width = Math.max(right - left, 0.6).toFixed(2) + "%";
        bar.append(fill);
      }
      const duration = s.started_at && s.finished_at ? ((s.finished_at - s.started_at) * 1000).toFixed(0) + " ms" : "-";
      return el("tr", { "data-step": key }, el("td", { text: key }), el("td", {}, badge(s.status)),
        el("td", { text: s.attempts }), el("td", { text: duration }), el("td", { class: "wide" }, bar),
        el("td", { class: "note", text: stepNote(s, now) }));
    }));
  }

  // -- interrupt forms from JSON Schema -----------------------------------------------------------
  function resolve(schema, root) {
    while (schema && schema.$ref) schema = (root.$defs || {})[schema.$ref.split("/").pop()];
    return schema || {};
  }

  // what a JSON Schema refuses, field by field ("ship_to.zip: must be ≥ 3"): a form checks its
  // values before anything is sent (the server checks again, naming the field). Every schema
  // rule is checked by @cfworker/json-schema (vendor/json-schema.min.js, the global
  // `jsonSchema`; see vendor/README.md); this code only prepares the schema and words the
  // library's errors: each leaf error as "path: why", the chain of its parents left out.
  const within = (path, key) => (path ? path + "." + key : key);
  const KIND = { string: "a string", integer: "a whole number", number: "a number", boolean: "true or false", null: "null", array: "a list", object: "an object" };
  const kindOf = (v) => (v === null ? "null" : Array.isArray(v) ? "a list" : typeof v === "object" ? "an object" : typeof v === "boolean" ? String(v) : KIND[typeof v] || typeof v);

  // the schema as reactorflow reads a value, for the library: a record refuses a field its type
  // does not declare (an object schema with properties and no additionalProperties gets one
  // that nothing matches), and a `false` schema is written {not: {}} (the same meaning; the
  // library files a `false` schema's error under no keyword location). Left to the server: a
  // format (an annotation in 2020-12, and msgspec reads values the library's formats refuse,
  // a date-time without an offset) and a pattern this browser cannot compile (Python's syntax).
  const SUB = ["items", "additionalItems", "unevaluatedItems", "contains", "additionalProperties", "unevaluatedProperties", "propertyNames", "not", "if", "then", "else"];
  const SUBS = ["prefixItems", "allOf", "anyOf", "oneOf"];
  const MAPS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
  const compiles = (pattern) => { try { new RegExp(pattern, "u"); return true; } catch (e) { return false; } };
  function strict(schema) {
    if (schema === false) return { not: {} };
    if (schema === true) return {};
    if (!schema || typeof schema !== "object" || Array.isArray(schema)) return schema;
    const out = { ...schema };
    delete out.format;
    if (typeof out.pattern === "string" && !compiles(out.pattern)) delete out.pattern;
    for (const k of SUB) if (k in out) out[k] = Array.isArray(out[k]) ? out[k].map(strict) : strict(out[k]);
    for (const k of SUBS) if (Array.isArray(out[k])) out[k] = out[k].map(strict);
    for (const k of MAPS) if (out[k] && typeof out[k] === "object") out[k] = Object.fromEntries(Object.entries(out[k]).map(([n, s]) => [n, strict(s)]));
    if (out.properties && out.additionalProperties === undefined && out.patternProperties === undefined && out.unevaluatedProperties === undefined) out.additionalProperties = { not: {} };
    return out;
  }

  // one validator per schema (a field's own, or the root), its $refs read in the root's $defs
  const checkers = new WeakMap();
  function checker(schema, root) {
    let found = checkers.get(schema);
    if (!found) {
      const doc = strict(schema === root || !root.$defs ? schema : { ...schema, $defs: root.$defs });
      found = { doc, validator: new jsonSchema.Validator(doc, "2020-12", false) }; // false: every error, not the first
      checkers.set(schema, found);
    }
    return found;
  }

  // JSON Pointers as the library writes its locations ("#/ship_to/zip": URI-encoded, ~ escaped)
  const segments = (pointer) => (pointer === "#" || pointer === "" ? [] : pointer.replace(/^#?\//, "").split("/")
    .map((s) => decodeURIComponent(s).replace(/~1/g, "/").replace(/~0/g, "~")));
  const step = (v, key) => (v !== null && typeof v === "object" ? v[key] : undefined);
  const valueAt = (value, pointer) => segments(pointer).reduce(step, value);
  const schemaAt = (doc, parts) => parts.reduce((node, part) => (part === "$ref" && node && typeof node.$ref === "string" ? segments(node.$ref).reduce(step, doc) : step(node, part)), doc);
  function placeOf(path, value, pointer) { // "#/ship_to/zip" → "ship_to.zip", "#/tags/1" → "tags[1]"
    let name = path, v = value;
    for (const part of segments(pointer)) {
      name = Array.isArray(v) ? (name || "value") + "[" + part + "]" : within(name, part);
      v = step(v, part);
    }
    return name;
  }

  function refusals(schema, root, value, path) { // ["path: why", ...]: empty when the value fits
    let doc, result;
    try { const found = checker(schema, root); doc = found.doc; result = found.validator.validate(value); }
    catch (e) { // a schema the library cannot read (an unresolved $ref): the server checks
      if (e instanceof ReferenceError || e instanceof TypeError) throw e; // (not a schema's: a bug)
      return [];
    }
    return result.valid ? [] : explain(result.errors, doc, value, path);
  }

  // the library's errors come parent first, each followed by its descendants' (their keyword
  // locations under its own): a parent is left out (its leaves say what is wrong), but for a
  // choice (anyOf, oneOf), which speaks for its branches
  function explain(errors, doc, value, path) {
    const lines = [], said = new Map();
    for (let i = 0; i < errors.length; i++) {
      const e = errors[i];
      let end = i + 1;
      while (end < errors.length && errors[end].keywordLocation.startsWith(e.keywordLocation + "/")) end++;
      if (e.keyword === "anyOf" || e.keyword === "oneOf") { lines.push(...choice(e, errors.slice(i + 1, end), doc, value, path)); i = end - 1; continue; }
      if (end > i + 1 || e.keyword === "if") continue; // (an if's then/else errors follow it)
      const line = leaf(e, doc, value, path, said);
      if (!lines.includes(line)) lines.push(line);
    }
    return lines;
  }

  const SHAPE = ["type", "const", "enum"];
  function choice(e, inside, doc, value, path) {
    const parts = segments(e.keywordLocation), options = schemaAt(doc, parts) || [];
    const owner = schemaAt(doc, parts.slice(0, -1)) || {};
    const branches = options.map((_, k) => inside.filter((x) => x.keywordLocation.startsWith(e.keywordLocation + "/" + k + "/")));
    const name = placeOf(path, value, e.instanceLocation) || "value";
    if (branches.some((errs) => !errs.length)) return [name + ": matches more than one of the schema's choices"]; // (oneOf)
    // the branch the value's shape picks (its type, and a tagged union's tag, fit): its errors
    const tag = owner.discriminator && owner.discriminator.propertyName;
    const places = [e.instanceLocation].concat(tag ? [e.instanceLocation + "/" + tag] : []);
    const picked = branches.map((errs, k) => [errs, k]).filter(([errs]) => !errs.some((x) => SHAPE.includes(x.keyword) && places.includes(x.instanceLocation)));
    if (picked.length) {
      const [errs] = picked.reduce((best, b) => (b[0].length < best[0].length ? b : best));
      return explain(errs, doc, value, path);
    }
    const said = (s) => (s.const !== undefined ? [JSON.stringify(s.const)] : s.enum ? s.enum.map((v) => JSON.stringify(v)) : []);
    const schemas = options.map((o) => (o && o.$ref ? schemaAt(doc, segments(o.$ref)) || {} : o || {}));
    if (tag && branches.every((errs) => errs.some((x) => SHAPE.includes(x.keyword) && x.instanceLocation === places[1]))) {
      // a tagged union's tag none of its types has
      return [within(name, tag) + ": must be one of " + schemas.flatMap((s) => said(step(step(s, "properties"), tag) || {})).join(", ")];
    }
    const kinds = [...new Set(schemas.flatMap((s) => (said(s).length ? said(s) : [].concat(s.type || []).map((t) => KIND[t] || t))))];
    const kind = kindOf(valueAt(value, e.instanceLocation));
    if (!kinds.length || kinds.includes(kind)) return [name + ": fits none of the schema's choices" + (kinds.length ? " (" + kinds.join(", ") + ")" : "")];
    return [name + ": must be " + kinds.join(" or ") + ", not " + kind];
  }

  function leaf(e, doc, value, path, said) {
    const parts = segments(e.keywordLocation), owner = schemaAt(doc, parts.slice(0, -1)) || {};
    const v = owner[e.keyword], at = valueAt(value, e.instanceLocation);
    const name = placeOf(path, value, e.instanceLocation);
    const here = (why) => (name || "value") + ": " + why;
    switch (e.keyword) {
      case "type": {
        const types = [].concat(v || []);
        if (types.includes("integer") && !types.includes("number") && typeof at === "number") return here("must be a whole number, not " + at);
        return here("must be " + types.map((t) => KIND[t] || t).join(" or ") + ", not " + kindOf(at));
      }
      case "const": return here("must be " + JSON.stringify(v));
      case "enum": return here("must be one of " + v.map((x) => JSON.stringify(x)).join(", "));
      case "minimum": return here("must be \u2265 " + v);
      case "maximum": return here("must be \u2264 " + v);
      case "exclusiveMinimum": return here("must be > " + v);
      case "exclusiveMaximum": return here("must be < " + v);
      case "multipleOf": return here("must be a multiple of " + v);
      case "minLength": return here("at least " + v + " characters");
      case "maxLength": return here("at most " + v + " characters");
      case "pattern": return here("must match " + v);
      case "minItems": return here("at least " + v + " items");
      case "maxItems": return here("at most " + v + " items");
      case "uniqueItems": return here("no item may appear twice");
      case "minProperties": return here("at least " + v + " entries");
      case "maxProperties": return here("at most " + v + " entries");
      case "required": { // one error per missing key, in the keyword's order
        const missing = (v || []).filter((key) => !(at && Object.hasOwn(at, key)));
        const n = said.get(e.keywordLocation + " " + e.instanceLocation) || 0;
        said.set(e.keywordLocation + " " + e.instanceLocation, n + 1);
        return within(name, missing[n] === undefined ? "?" : missing[n]) + ": required";
      }
      case "not": {
        const under = parts[parts.length - 2];
        if (under === "additionalProperties" || under === "unevaluatedProperties") {
          // a field the record does not declare (reactorflow reads none: the server refuses it too)
          const record = schemaAt(doc, parts.slice(0, -2)) || {};
          const outer = placeOf(path, value, e.instanceLocation.replace(/\/[^/]*$/, ""));
          return here("not a field of " + (record.title || outer || "the value") + " (its fields: " + Object.keys(record.properties || {}).join(", ") + ")");
        }
        if (["items", "prefixItems", "additionalItems", "unevaluatedItems"].includes(under)) return here("no item expected here");
        return here("must not match the schema here");
      }
      default: return here(e.error); // (the library's own words)
    }
  }

  // a form refused: each invalid control by the field it fills ("Fix the highlighted fields.
  // amount: must be ≤ 100; ship_to.zip: at least 3 characters"), nothing sent
  function refuse(form, message) {
    const said = new Map();
    for (const control of form.elements) {
      if (!control.willValidate || control.validity.valid) continue;
      const name = control.dataset.field || control.name, text = control.validationMessage.replace(/\.$/, ""); // (joined by "; " below)
      if (!said.has(name)) said.set(name, [":", ".", "["].some((s) => text.startsWith(name + s)) ? text : name + ": " + text);
    }
    form.reportValidity();
    message.textContent = ("Fix the highlighted fields. " + [...said.values()].join("; ")).trim();
  }

  // one form field per schema (`path`: the field's place in the value, which its messages name)
  function field(schema, root, name, required, path) {
    const declared = schema;
    const where = path || name;
    schema = resolve(schema, root);
    let nullable = false;
    if (schema.anyOf) {
      const options = schema.anyOf.map((s) => resolve(s, root));
      nullable = options.some((s) => s.type === "null");
      const rest = options.filter((s) => s.type !== "null");
      if (rest.length === 1) schema = rest[0];
    }
    const title = schema.title || name;
    if (schema.type === "object" && schema.properties) {
      // an optional record (not required, or null allowed) is left out until its box is
      // ticked: its fields are disabled (so neither the browser nor the schema check asks for
      // them) and it is sent as null where null is allowed, else not at all (its default)
      const optional = !required || nullable;
      const include = optional ? el("input", { type: "checkbox", "data-field": where, "data-include": "" }) : null;
      const legend = include
        ? el("legend", {}, el("label", { class: "include" }, include, el("span", { text: name + ": optional " + (title !== name ? title : "record") + ", tick to give it" })))
        : el("legend", { text: title });
      const box = el("fieldset", { "data-record": where }, legend);
      const parts = Object.entries(schema.properties).map(([key, sub]) => {
        const f = field(sub, root, key, (schema.required || []).includes(key), within(path, key));
        box.append(f.node);
        return [key, f];
      });
      const whole = () => Object.fromEntries(parts.map(([k, f]) => [k, f.value()]).filter(([, v]) => v !== undefined));
      if (!include) return { node: box, value: whole };
      box.disabled = true; // (a fieldset's first legend, the box, stays enabled)
      include.addEventListener("change", () => { box.disabled = !include.checked; });
      return { node: box, value: () => (include.checked ? whole() : (nullable ? null : undefined)) };
    }
    const wrap = (input, hint) => el("label", {}, el("span", { text: title + (required ? " *" : "") }), input, ...(hint ? [el("span", { class: "hint", text: hint })] : []));
    if (schema.enum) {
      const select = el("select", { name, "data-field": where });
      select.append(el("option", { value: "", text: required && !nullable ? "choose\u2026" : "" }));
      schema.enum.forEach((v, i) => select.append(el("option", { value: String(i), text: String(v) })));
      if (required && !nullable) select.required = true;
      if (schema.default !== undefined) select.value = String(schema.enum.indexOf(schema.default));
      return { node: wrap(select), value: () => (select.value === "" ? (nullable ? null : undefined) : schema.enum[Number(select.value)]) };
    }
    if (schema.type === "boolean") {
      // an explicit choice, never an unticked box read as false: nothing is chosen unless the
      // schema has a default, and a required one must be chosen
      const group = "f" + (++fieldCount) + "-" + name;
      const choices = [["yes", true], ["no", false]];
      if (nullable) choices.push(["none", null]);
      const box = el("fieldset", { class: "choice", "data-field": where }, el("legend", { text: title + (required ? " *" : "") }));
      const radios = choices.map(([text, v]) => {
        const radio = el("input", { type: "radio", name: group, value: String(v), "data-field": where });
        radio.required = required;
        if (schema.default === v) radio.checked = true;
        box.append(el("label", {}, radio, el("span", { text })));
        return [radio, v];
      });
      return { node: box, value: () => { const picked = radios.find(([r]) => r.checked); return picked ? picked[1] : undefined; } };
    }
    if (schema.type === "integer" || schema.type === "number") {
      const input = el("input", { type: "number", name, step: schema.type === "integer" ? "1" : "any", "data-field": where });
      const hints = [];
      if (schema.type === "integer") hints.push("whole number");
      if (schema.minimum !== undefined) { input.min = schema.minimum; hints.push("\u2265 " + schema.minimum); }
      if (schema.maximum !== undefined) { input.max = schema.maximum; hints.push("\u2264 " + schema.maximum); }
      if (schema.exclusiveMinimum !== undefined) hints.push("> " + schema.exclusiveMinimum);
      if (schema.exclusiveMaximum !== undefined) hints.push("< " + schema.exclusiveMaximum);
      input.required = required && !nullable;
      if (schema.default !== undefined) input.value = schema.default;
      const check = () => { // (text that is no number at all: the input's own badInput)
        input.setCustomValidity(input.value === "" ? "" : refusals(declared, root, Number(input.value), where).join("; "));
      };
      input.addEventListener("input", check);
      return { node: wrap(input, hints.join(", ")), value: () => { check(); return input.value === "" ? (nullable ? null : undefined) : Number(input.value); } };
    }
    if (schema.type === "string") {
      const input = el("input", { type: "text", name, "data-field": where });
      if (schema.minLength !== undefined) input.minLength = schema.minLength;
      if (schema.maxLength !== undefined) input.maxLength = schema.maxLength;
      // a required text must be typed in: an untouched field is not an answer
      input.required = required && !nullable;
      if (schema.default !== undefined) input.value = schema.default;
      const hints = [];
      if (schema.minLength || schema.maxLength) hints.push((schema.minLength || 0) + "\u2013" + (schema.maxLength || "\u221e") + " characters");
      if (schema.pattern) hints.push("matching " + schema.pattern);
      const check = () => input.setCustomValidity(input.value === "" ? "" : refusals(declared, root, input.value, where).join("; "));
      input.addEventListener("input", check);
      // left empty: null where the schema allows it, else not sent (an optional field keeps its default)
      return { node: wrap(input, hints.join(", ")), value: () => { check(); return input.value === "" && (nullable || !required) ? (nullable ? null : undefined) : input.value; } };
    }
    const area = el("textarea", { name, rows: "3", placeholder: "JSON", "data-field": where });
    area.required = required && !nullable;
    if (schema.default !== undefined) area.value = JSON.stringify(schema.default);
    const kinds = [].concat(schema.type || []).map((t) => KIND[t] || t);
    return { node: wrap(area, "JSON" + (kinds.length ? ": " + kinds.join(" or ") : "")), value: () => {
      area.setCustomValidity("");
      if (area.value.trim() === "") return nullable ? null : undefined; // (a required one: the area's own valueMissing)
      let v;
      try { v = JSON.parse(area.value); } catch (e) { area.setCustomValidity("not JSON"); return undefined; }
      area.setCustomValidity(refusals(declared, root, v, where).join("; "));
      return v;
    } };
  }

  function renderInterrupts(run) {
    const box = $("interrupts");
    const pending = run.status === "paused" || run.status === "running" ? run.waiting_on : [];
    // the interrupts' schemas of the run's version (a version not declared here: the newest's,
    // which continuing would migrate it onto; the server refuses, saying why, when it cannot)
    const own = versionOf(run);
    if (own === undefined) return; // drawn once its version's graph arrives
    const reactor = own || reactors[run.reactor];
    // a run whose values this server cannot open: continue_ would be refused (rf.KeyUnavailable,
    // nothing stored), so no form is drawn, saying why
    const sealed = protectedAs(run.inputs);
    const keys = pending.map(label).join("|") + "@" + run.id + "@" + (reactor ? reactor.version : "-") + (sealed ? "@" + sealed[0] : "");
    if (box.dataset.keys === keys) return; // keep what the user is typing
    box.dataset.keys = keys;
    box.replaceChildren();
    for (const waiting of pending) {
      const key = Array.isArray(waiting) ? waiting.join(".") : waiting;
      const schema = reactor && reactor.interrupts[key];
      const form = el("form", { class: "interrupt entry", "data-interrupt": key, novalidate: "" },
        el("h2", { text: "Interrupt " + label(waiting) }));
      // no form where this server cannot take the payload, saying why
      const why = sealed ? SEALED_NOTE[sealed[0]]
        : !reactor ? "This server does not declare this reactor, so it cannot resume it."
        : !schema ? "This server cannot describe this interrupt's payload type, so it draws no form: continue the run with the CLI or the API." : null;
      if (why) { form.append(el("p", { class: "no-form", text: why })); box.append(form); continue; }
      const root = field(schema, schema, "payload", true);
      const message = el("p", { class: "error", role: "alert" });
      form.append(root.node, guard(el("button", { type: "submit", class: "primary", text: "Continue" })), message);
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const payload = root.value();
        if (!form.checkValidity()) { refuse(form, message); return; }
        const path = "api/runs/" + encodeURIComponent(run.id) + "/continue";
        const body = JSON.stringify({ step: Array.isArray(waiting) ? waiting : key, payload });
        // the server checks first (nothing is sent, no attempt counted), then the user confirms
        try { await call(path + "/check", { method: "POST", body }); }
        catch (e) { message.textContent = e.message; return; }
        if (!window.confirm("Continue run " + run.id + " at interrupt " + label(waiting) + " with this payload?\n\n" + JSON.stringify(payload, null, 2))) { message.textContent = "Not sent."; return; }
        try {
          const updated = await call(path, { method: "POST", body });
          message.textContent = "";
          renderRun(updated);
        } catch (e) { message.textContent = e.message; }
      });
      box.append(form);
    }
  }

  // -- repairing a held run: retry its failed step, or skip it with a result typed in a form
  // generated from the step's return type's JSON Schema -------------------------------------
  const heldStep = (run) => (run.error && run.error.step) || "";

  function closeSkip() { $("repair").replaceChildren(); $("repair").dataset.run = ""; $("repair").dataset.kind = ""; }

  function closeButton() {
    const button = el("button", { type: "button", text: "Close" });
    button.addEventListener("click", closeSkip);
    return button;
  }

  // the changed input fields of a rewind, checked against the inputs' schema with none of its
  // fields required (the changes are merged into the run's inputs: only the fields given are
  // checked here; one not declared is refused)
  const partials = new WeakMap();
  function changedProblems(schema, changed) {
    if (!schema) return [];
    if (!partials.has(schema)) partials.set(schema, { ...resolve(schema, schema), required: [] });
    return refusals(partials.get(schema), schema, changed, "");
  }

  // Rewind: choose the step to go back to, and optionally change input fields (JSON)
  function openRewind(run) {
    const box = $("repair");
    if (box.dataset.run === run.id && box.dataset.kind === "rewind") return;
    box.dataset.run = run.id; box.dataset.kind = "rewind";
    // the run's own graph's root steps (a nested step's key has a "."): what `to` may name
    const steps = graphOf(versionOf(run) || null, run).filter((s) => !s.element_of && !s.level && !s.key.includes(".")).map((s) => s.key);
    const select = el("select", { name: "to", "data-field": "to" }, el("option", { value: "", text: "choose\u2026" }), ...steps.map((k) => el("option", { value: k, text: k })));
    select.required = true;
    const inputs = el("textarea", { name: "inputs", rows: "3", placeholder: '{"field": "new value"}', "data-field": "inputs" });
    // the inputs' JSON Schema of the run's version (null: not declared here, the server checks)
    const schema = (versionOf(run) || {}).inputs || null;
    const message = el("p", { class: "error", role: "alert" });
    const form = el("form", { class: "rewind entry", "data-rewind": run.id, novalidate: "" },
      el("h2", { text: "Rewind" }),
      el("p", { class: "hint", text: "The step and every step that depends on it are undone, newest first (their undo handlers run), then run again in this run. The other steps keep their results." }),
      el("label", {}, el("span", { text: "to step *" }), select),
      el("label", {}, el("span", { text: "changed inputs" }), inputs, el("span", { class: "hint", text: "JSON object, optional" + (schema && resolve(schema, schema).properties ? "; the input fields: " + Object.keys(resolve(schema, schema).properties).join(", ") : "") })),
      el("div", { class: "buttons" }, el("button", { type: "submit", class: "primary", text: "Rewind" }), " ", closeButton()), message);
    form.addEventListener("input", () => { message.textContent = ""; inputs.setCustomValidity(""); });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let changed = null;
      if (inputs.value.trim()) {
        try { changed = JSON.parse(inputs.value); } catch (e) { changed = undefined; }
        if (changed === undefined || changed === null || typeof changed !== "object" || Array.isArray(changed)) inputs.setCustomValidity("a JSON object of the changed fields");
        else inputs.setCustomValidity(changedProblems(schema, changed).join("; "));
      }
      if (!form.checkValidity()) { refuse(form, message); return; }
      const to = select.value;
      const asked = "Rewind run " + run.id + " to step " + to + " (undo it and every step that depends on it, newest first, then run them again)?" +
        (changed ? "\n\nWith these inputs changed:\n" + JSON.stringify(changed, null, 2) : "");
      if (!window.confirm(asked)) { message.textContent = "Not sent."; return; }
      try {
        const updated = await call("api/runs/" + encodeURIComponent(run.id) + "/rewind", { method: "POST", body: JSON.stringify({ to, inputs: changed }) });
        closeSkip();
        $("message").className = ""; $("message").textContent = "Rewound to step " + to + ": the run is " + updated.status + ".";
        renderRun(updated);
      } catch (e) { message.textContent = e.message; }
    });
    box.replaceChildren(form);
  }

  async function openSkip(run) {
    const step = heldStep(run);
    const box = $("repair");
    if (box.dataset.run === run.id && box.dataset.kind === "skip") return; // keep what is typed
    box.dataset.run = run.id; box.dataset.kind = "skip";
    const form = el("form", { class: "skip entry", "data-skip": step, novalidate: "" },
      el("h2", { text: "Skip step " + step }),
      el("p", { class: "hint", text: "The result is recorded as if the step had returned it, and the run goes on. It must fit the step's return type." }));
    const message = el("p", { class: "error", role: "alert" });
    box.replaceChildren(form);
    let schema;
    try { schema = (await call("api/runs/" + encodeURIComponent(run.id) + "/steps/" + encodeURIComponent(step) + "/schema")).schema; }
    catch (e) { form.append(message); message.textContent = e.message; return; }
    const root = field(schema, schema, "result", true);
    form.append(root.node, el("div", { class: "buttons" }, el("button", { type: "submit", class: "primary", text: "Skip step" }), " ", closeButton()), message);
    form.addEventListener("input", () => { message.textContent = ""; });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const result = root.value();
      if (!form.checkValidity() || result === undefined) { refuse(form, message); return; }
      if (!window.confirm("Skip step " + step + " of run " + run.id + " with this result?\n\n" + JSON.stringify(result, null, 2))) { message.textContent = "Not sent."; return; }
      try {
        const updated = await call("api/runs/" + encodeURIComponent(run.id) + "/skip-step", { method: "POST", body: JSON.stringify({ step, result }) });
        closeSkip();
        $("message").className = ""; $("message").textContent = "Skipped step " + step + ": the run is " + updated.status + ".";
        renderRun(updated);
      } catch (e) { message.textContent = e.message; }
    });
  }

  // Pause asks why (the prompt is its confirmation: Cancel sends nothing)
  async function pauseRun(run) {
    const reason = window.prompt("Pause run " + run.id + "? It stops at its next step boundary (steps in flight finish). Why (recorded with the run):", "");
    const message = $("message");
    if (reason === null) return;
    try {
      const updated = await call("api/runs/" + encodeURIComponent(run.id) + "/pause", { method: "POST", body: JSON.stringify({ reason }) });
      message.className = ""; message.textContent = updated.status === "paused" ? "Paused." : "Pause requested: it stops at its next step boundary.";
      renderRun(updated);
    } catch (e) { message.className = "bad"; message.textContent = e.message; }
  }

  async function act(action) {
    if (!current) return;
    if (action === "skip-step") { openSkip(current); return; }
    if (action === "rewind") { openRewind(current); return; }
    if (action === "pause") { pauseRun(current); return; }
    const step = heldStep(current);
    const verb = { undo: "Undo (roll back every completed step of)", cancel: "Cancel", retry: "Retry (start a new run with the inputs of)",
      "retry-step": "Retry step " + step + " (run it again with the code now deployed) of",
      resume: "Resume (take on again)" }[action];
    if (!window.confirm(verb + " run " + current.id + "?")) return;
    const message = $("message");
    const options = action === "retry-step" ? { method: "POST", body: JSON.stringify({ step }) } : { method: "POST" };
    try {
      const run = await call("api/runs/" + encodeURIComponent(current.id) + "/" + action, options);
      message.className = ""; message.textContent = action === "retry" ? "Retried as " + run.id + "."
        : action === "retry-step" ? "Retried step " + step + ": the run is " + run.status + "." : "Done: " + run.status + ".";
      if (action === "retry") { history.pushState(null, "", "?run=" + encodeURIComponent(run.id)); openRun(run.id); }
      else renderRun(run);
    } catch (e) { message.className = "bad"; message.textContent = e.message; }
  }

  function openRun(id) {
    stopStream();
    show("run-view");
    $("interrupts").dataset.keys = "";
    closeSkip();
    $("run-id").textContent = id;
    $("message").textContent = "";
    stream = follow("api/runs/" + encodeURIComponent(id) + "/events", (event, run) => { if (event === "run") renderRun(run); },
      (error) => { $("message").className = "bad"; $("message").textContent = error.message; });
  }

  async function route() {
    try {
      const found = await call("api/reactors");
      reactors = Object.fromEntries(found.reactors.map((r) => [r.name, r]));
      for (const name of Object.keys(reactors)) addReactorOption(name);
      session = await call("api/session");
    } catch (e) { return; }
    document.body.classList.toggle("read-only", readOnly());
    $("session").textContent = session.token ? "token " + session.token + (readOnly() ? " (read only: " + READ_ONLY + ")" : "") : "";
    const id = new URLSearchParams(location.search).get("run");
    if (id) openRun(id);
    else { show("list-view"); filtersFromUrl(); listState.cursors = [null]; loadList(); }
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token").value = "";
    route();
  });
  $("forget").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showLogin(); });
  for (const id of Object.values(FILTERS)) $(id).addEventListener("change", () => { listState.cursors = [null]; filtersToUrl(); loadList(); });
  $("filters").addEventListener("submit", (event) => event.preventDefault());
  $("search-form").addEventListener("submit", (event) => { event.preventDefault(); find($("search").value.trim()); });
  $("tz-toggle").addEventListener("click", () => {
    localStorage.setItem(ZONE_KEY, inUtc() ? "local" : "utc");
    showZone();
    if (lastPage) renderList(lastPage);
  });
  showZone();
  $("older").addEventListener("click", () => { listState.cursors.push(listState.next); loadList(); });
  $("newest").addEventListener("click", () => { listState.cursors = [null]; loadList(); });
  for (const button of document.querySelectorAll("#actions button")) button.addEventListener("click", () => act(button.dataset.action));
  $("graph-fit").addEventListener("click", () => window.reactorflowGraph.fit($("graph")));
  for (const button of document.querySelectorAll("#bulk-bar button[data-bulk]")) button.addEventListener("click", () => runBulk(button.dataset.bulk));
  $("bulk-matching").addEventListener("click", selectMatching);
  function clearSelection() {
    bulk.ids.clear(); bulk.matching = null;
    for (const box of $("runs").tBodies[0].querySelectorAll("input.pick")) box.checked = false;
    showBulkBar();
  }
  $("bulk-clear").addEventListener("click", clearSelection);
  $("filters").addEventListener("change", clearSelection); // another filter selects other runs
  window.addEventListener("popstate", route);
  // the browser tests read the notes through these (the same cases as the CLI's)
  window.reactorflowNotes = Object.freeze({ inWords, stepNote });
  // "in 2 d 3 h" counts down while the page is open, between the run's own updates
  setInterval(() => { if (current && !$("run-view").hidden) { renderGraph(current); renderSteps(current); } }, 30000);
  // the workers' "last seen 2 s ago" (and who is alive) stays current on the list page
  setInterval(() => { if (!$("list-view").hidden) loadWorkers(); }, 2000);
  route();
})();

// The dashboard of a tenure node: plain ES2020, no framework, no build step.
// Served as /ui/app.js under a strict Content-Security-Policy: the DOM is built
// with createElement/textContent only (node data comes from the network) and
// nothing is evaluated. See README.md beside this file for what each number is.
"use strict";

(() => {
  // ---------------------------------------------------------------- limits
  const POLL_FAST_MS = 1000; // /v1/cluster and /v1/timeline
  const POLL_SLOW_MS = 2000; // elections, sessions, /metrics
  const REQUEST_TIMEOUT_MS = 3000; // every fetch is aborted after this
  const BACKOFF_MIN_MS = 250; // first reconnect delay of the event stream
  const BACKOFF_MAX_MS = 5000; // longest reconnect delay
  const STREAM_SILENCE_MS = 15000; // 3 keep-alive intervals of the server (5 s)
  const MAX_SSE_BUFFER = 1 << 20; // an event stream line longer than this is a broken stream
  const LIST_LIMIT = 100; // elections and sessions shown
  const VALUE_SHOWN_CHARS = 60; // an election value longer than this is cut (full text in a tooltip)
  const TOKEN_KEY = "tenure-token";
  const POLL_GROUP_LIST_MS = 5000; // the names of the groups
  const GROUP_LIST_MAX = 50; // groups listed
  const MAP_CELLS_MAX = 1024; // a cell per partition up to this; runs of one owner beyond
  const GROUP_ROWS_MAX = 200; // members, and runs of one owner, listed for a group
  const UNOWNED_ROWS = 20; // partitions listed with their time without an owner

  const URLS = {
    cluster: "/v1/cluster",
    timeline: "/v1/timeline",
    elections: `/v1/elections?limit=${LIST_LIMIT}&consistency=stale`,
    sessions: `/v1/sessions?limit=${LIST_LIMIT}&consistency=stale`,
    metrics: "/metrics",
    watch: "/v1/watch",
  };

  const SVG_NS = "http://www.w3.org/2000/svg";

  // ------------------------------------------------------------ DOM helpers
  const $ = (sel, root = document) => root.querySelector(sel);

  /** An element with attributes and children (strings become text nodes). */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    appendAll(e, children);
    return e;
  }

  /** An SVG element, the same way. */
  function svgEl(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    appendAll(e, children);
    return e;
  }

  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.setAttribute("class", v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
  }

  function appendAll(e, children) {
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  /** Sets text only when it changed (an aria-live region is announced on every change). */
  function setText(e, text) {
    if (e.textContent !== text) e.textContent = text;
  }

  /** A table with a caption, column headers and rows whose first cell is a row header. */
  function table(caption, headers, rows, cls) {
    const thead = el("thead", null, el("tr", null, headers.map((h) => el("th", { scope: "col" }, h))));
    const tbody = el(
      "tbody",
      null,
      rows.map((cells) =>
        el(
          "tr",
          null,
          cells.map((c, i) => (i === 0 ? el("th", { scope: "row" }, c) : el("td", null, c))),
        ),
      ),
    );
    const t = el("table", { class: cls || null }, caption ? el("caption", null, caption) : null, thead, tbody);
    return el("div", { class: "table-wrap" }, t);
  }

  /** A small labelled badge: the text carries the meaning, the class only the colour. */
  function badge(text, cls, hidden) {
    return el("span", { class: `badge ${cls}` }, hidden ? el("span", { class: "sr-only" }, hidden) : null, text);
  }

  // ------------------------------------------------------------- formatting
  const pad2 = (n) => String(n).padStart(2, "0");

  function clock(unixMs) {
    const d = new Date(unixMs);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function ago(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
    return `${Math.floor(s / 86400)} d ago`;
  }

  function millis(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
    if (ms >= 10000) return `${(ms / 1000).toFixed(1)} s`;
    if (ms < 10 && !Number.isInteger(ms)) return `${ms.toFixed(2)} ms`;
    return `${Math.round(ms)} ms`;
  }

  /** A duration: ms below a second, then seconds, then minutes. */
  function duration(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return "—";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${+(ms / 1000).toFixed(1)} s`;
    const s = Math.round(ms / 1000);
    return `${Math.floor(s / 60)} min ${s % 60} s`;
  }

  function seconds(s) {
    if (s === Infinity) return "∞";
    if (s < 1) return `${+(s * 1000).toFixed(3)} ms`;
    return `${+s.toFixed(3)} s`;
  }

  const orDash = (v) => (v === null || v === undefined ? "—" : String(v));
  const val = (o, k) => (o && o[k] !== undefined ? o[k] : null); // missing fields count as null

  // ------------------------------------------------------------------ token
  let memoryToken = null; // used when sessionStorage is unavailable

  function getToken() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch (_) {
      return memoryToken;
    }
  }

  function setToken(t) {
    memoryToken = t;
    try {
      if (t === null) window.sessionStorage.removeItem(TOKEN_KEY);
      else window.sessionStorage.setItem(TOKEN_KEY, t);
    } catch (_) {
      // Storage disabled: the token lives in this page only.
    }
  }

  // --------------------------------------------------------------- requests
  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** 401 or 403: the token is missing, unknown, or of too low a role. */
  class AuthError extends HttpError {}

  const page = {
    nodeId: null, // the serving node, from <body data-node> then /v1/cluster
    auth: "open", // "token" or "open"
    running: false,
    generation: 0, // bumped by every start and stop: late answers of an old run are dropped
    inFlight: new Set(), // AbortControllers of the requests now running
  };

  function authHeaders() {
    const headers = { Accept: "application/json, text/plain, text/event-stream" };
    if (page.auth === "token") {
      const t = getToken();
      if (t) headers.Authorization = `Bearer ${t}`;
    }
    return headers;
  }

  async function errorText(res) {
    try {
      const text = await res.text();
      try {
        const body = JSON.parse(text);
        if (body && typeof body.error === "string") return body.error;
      } catch (_) {
        // not JSON: the text itself
      }
      return text.slice(0, 200) || res.statusText || `HTTP ${res.status}`;
    } catch (_) {
      return res.statusText || `HTTP ${res.status}`;
    }
  }

  /** GET `url` as JSON (or text), aborted after REQUEST_TIMEOUT_MS, body included. */
  async function request(url, asText) {
    const ctrl = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ctrl.abort();
    }, REQUEST_TIMEOUT_MS);
    page.inFlight.add(ctrl);
    try {
      const res = await fetch(url, { headers: authHeaders(), signal: ctrl.signal, cache: "no-store" });
      if (res.status === 401 || res.status === 403) throw new AuthError(res.status, await errorText(res));
      if (!res.ok) throw new HttpError(res.status, `${res.status}: ${await errorText(res)}`);
      return asText ? await res.text() : await res.json();
    } catch (e) {
      if (timedOut) throw new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`);
      throw e;
    } finally {
      clearTimeout(timer);
      page.inFlight.delete(ctrl);
    }
  }

  /**
   * Polls one URL: never two requests of it at once. A periodic poll while
   * one runs is skipped; an urgent one (after a leadership event) runs as
   * soon as the running one ends.
   */
  class Poller {
    constructor(url, everyMs, asText, onData, onError, enabled) {
      this.url = url;
      this.everyMs = everyMs;
      this.asText = asText;
      this.onData = onData;
      this.onError = onError;
      this.enabled = enabled || (() => true);
      this.busy = null;
      this.again = false;
      this.timer = null;
    }

    /** Polls every `everyMs`, and at once unless `polledJustNow`. */
    start(polledJustNow) {
      this.stop();
      this.timer = setInterval(() => this.poll(false), this.everyMs);
      return polledJustNow ? Promise.resolve() : this.poll(false);
    }

    stop() {
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      this.again = false;
    }

    poll(urgent) {
      if (!page.running) return Promise.resolve();
      if (this.busy) {
        if (urgent) this.again = true;
        return this.busy;
      }
      if (!this.enabled()) {
        this.onError(null, true);
        return Promise.resolve();
      }
      const generation = page.generation;
      const startedAt = performance.now();
      this.busy = (async () => {
        try {
          const data = typeof this.url === "function" ? await this.url() : await request(this.url, this.asText);
          if (generation === page.generation) this.onData(data, startedAt);
        } catch (e) {
          if (generation !== page.generation) return;
          if (e instanceof AuthError) authRefused(e);
          else this.onError(e, false);
        }
      })().finally(() => {
        this.busy = null;
        if (this.again && page.running && generation === page.generation) {
          this.again = false;
          this.poll(false);
        }
      });
      return this.busy;
    }
  }

  // ------------------------------------------------------------------ state
  const state = {
    headline: { leader: null, term: null, fencing_token: null, role: null, known: false },
    lastEventAt: -Infinity, // performance.now() of the last leadership event
    cluster: null,
    timeline: null, // {entries, nowUnixMs, receivedAt}
    metrics: null,
    elections: null,
    sessions: null,
    errors: { elections: null, sessions: null, groupList: null, group: null },
    groups: { names: [], more: false, selected: null, body: null, listKey: "", mapKey: "" },
    updated: {}, // section -> Date.now() of its last good answer
  };

  /** A stale note in `section`: shown with `error`, hidden with null. */
  function setStale(sectionId, error) {
    const note = $(`#${sectionId} .stale`);
    if (!note) return;
    if (!error) {
      state.updated[sectionId] = Date.now();
      note.hidden = true;
      setText(note, "");
      return;
    }
    const at = state.updated[sectionId];
    const when = at ? `Not updated since ${clock(at)}` : "Not read yet";
    setText(note, `${when}: ${error}`);
    note.hidden = false;
  }

  // --------------------------------------------------------------- headline
  function setHeadline(leader, term, fencingToken, role) {
    state.headline = {
      leader: leader === undefined ? null : leader,
      term: term === undefined ? null : term,
      fencing_token: fencingToken === undefined ? null : fencingToken,
      role: role === undefined ? null : role,
      known: true,
    };
    renderHeadline();
  }

  function renderHeadline() {
    const h = state.headline;
    const e = $("#leader");
    if (!h.known) return;
    let text;
    if (h.leader !== null) {
      text = `Node ${h.leader} leads term ${h.term}`;
      if (h.fencing_token !== null) text += ` (fencing token ${h.fencing_token})`;
    } else {
      text = "No leader known";
    }
    setText(e, text);
    e.dataset.leader = h.leader === null ? "" : String(h.leader);
    e.dataset.term = h.term === null ? "" : String(h.term);
    e.dataset.state = h.leader === null ? "none" : h.leader === page.nodeId ? "self" : "other";
    renderHeadlineDetail();
  }

  function renderHeadlineDetail() {
    const h = state.headline;
    if (!h.known) return;
    const parts = [];
    if (h.leader !== null && state.timeline) {
      const since = newestEntry(h.term, h.leader);
      if (since) parts.push(`since ${clock(since.at_unix_ms)} (${ago(timelineNow() - since.at_unix_ms)})`);
    }
    if (h.leader === null && h.term !== null) parts.push(`term ${h.term}`);
    if (h.role) {
      const what = h.role === "leader" ? "the leader" : `a ${h.role}`;
      parts.push(`this node (${orDash(page.nodeId)}) is ${what}`);
    }
    setText($("#leader-detail"), parts.join(" · "));
  }

  // ---------------------------------------------------------------- cluster
  const ROLE_LABELS = {
    leader: "LEADER",
    follower: "follower",
    candidate: "candidate",
    "pre-candidate": "pre-candidate",
    down: "DOWN",
    unknown: "unknown",
  };

  /**
   * The state of a node whose status the serving node could not read:
   * "down" when the serving node has no peer connection to it either, else
   * "unknown" (alive as far as its link shows; only its status did not come:
   * no HTTP address known yet, a refused token, a slow answer).
   */
  function unreadState(n, servedBy) {
    const nodes = (state.cluster && state.cluster.nodes) || [];
    const server = nodes.find((x) => x.id === servedBy);
    const peers = server && server.status && Array.isArray(server.status.peers) ? server.status.peers : [];
    const link = peers.find((p) => p.id === n.id);
    return link && link.connected === false ? "down" : "unknown";
  }

  function onCluster(body, startedAt) {
    state.cluster = body;
    if (typeof body.served_by === "number") setNodeId(body.served_by);
    const self = (body.nodes || []).find((n) => n.id === body.served_by);
    // An answer asked for before the last event could undo the event's news.
    if (self && self.status && startedAt >= state.lastEventAt) {
      const s = self.status;
      setHeadline(val(s, "leader"), val(s, "term"), val(s, "fencing_token"), val(s, "role"));
    }
    setStale("cluster", null);
    setStale("replication", null);
    renderCluster();
    renderReplication();
  }

  function onClusterError(e) {
    setStale("cluster", e.message);
    setStale("replication", e.message);
  }

  /** The configuration of members the serving node's log holds, in a line. */
  function renderMembership() {
    const p = $("#membership");
    const nodes = (state.cluster && state.cluster.nodes) || [];
    const self = nodes.find((n) => n.id === state.cluster.served_by);
    const m = self && self.status ? val(self.status, "membership") : null;
    if (!m || !m.config) {
      setText(p, "");
      p.dataset.config = "";
      return;
    }
    const ids = (xs) => (Array.isArray(xs) && xs.length ? xs.map((x) => `node ${x}`).join(", ") : "none");
    const position = `${m.config.index}@${m.config.token}`;
    const committed = m.committed ? "committed" : "not committed yet";
    setText(p, `Members (configuration ${position}, ${committed}): voters ${ids(m.voters)}; learners ${ids(m.learners)}`);
    p.dataset.config = position;
  }

  /** What node `s` is in the configuration its own log holds. */
  function memberKind(s) {
    const m = val(s, "membership");
    if (!m) return null;
    if (Array.isArray(m.voters) && m.voters.includes(s.id)) return "voter";
    if (Array.isArray(m.learners) && m.learners.includes(s.id)) return "learner";
    return "not a member";
  }

  function renderCluster() {
    renderMembership();
    const section = $("#cluster");
    for (const old of section.querySelectorAll("article.node")) old.remove();
    const nodes = [...(state.cluster.nodes || [])].sort((a, b) => a.id - b.id);
    for (const n of nodes) section.append(nodeCard(n, state.cluster.served_by));
  }

  function nodeCard(n, servedBy) {
    const s = n.status || null;
    const role = s ? String(val(s, "role") || "unknown") : unreadState(n, servedBy);
    const self = n.id === servedBy;
    const article = el("article", {
      class: `node${self ? " self" : ""}`,
      "data-node": n.id,
      "data-state": role,
      "data-self": self ? "true" : null,
      "aria-labelledby": `node-${n.id}-title`,
    });
    const head = el(
      "header",
      { class: "node-head" },
      el("h3", { id: `node-${n.id}-title` }, `Node ${n.id}`),
      badge(ROLE_LABELS[role] || role, `role role-${role}`, "role: "),
      self ? badge("serves this page", "self-mark") : null,
    );
    article.append(head);
    if (!s) {
      const label = role === "down" ? "DOWN: " : `Status unknown (node ${servedBy} is connected to it): `;
      article.append(
        el("p", { class: `${role}-reason` }, el("strong", null, label), n.error || "the node did not answer"),
        el("dl", { class: "facts" }, fact("HTTP address", orDash(n.http_address))),
      );
      return article;
    }
    const storage = val(s, "storage_failed");
    const lsn = val(s, "lsn");
    const leader = val(s, "leader");
    article.append(
      el(
        "dl",
        { class: "facts" },
        fact("Term", orDash(val(s, "term"))),
        fact("Known leader", leader === null ? "none" : `node ${leader}`),
        fact("Fencing token", orDash(val(s, "fencing_token"))),
        fact("Protocol", orDash(val(s, "protocol"))),
        fact(
          "Storage",
          storage === true
            ? badge("STORAGE FAILED", "storage-bad")
            : storage === false
              ? badge("storage OK", "storage-ok")
              : "not reported",
        ),
        fact("Voted for", val(s, "voted_for") === null ? "nobody" : `node ${s.voted_for}`),
        fact("LSN", lsn ? `${lsn.term}.${lsn.counter}` : "—"),
        fact("HTTP address", orDash(val(s, "http_address") || n.http_address)),
        fact("Member", orDash(memberKind(s))),
        fact("Configuration", configText(val(s, "membership"))),
        fact("Data directory", directoryText(val(s, "directory"))),
      ),
    );
    const peers = Array.isArray(s.peers) ? [...s.peers].sort((a, b) => a.id - b.id) : [];
    if (peers.length) {
      article.append(
        table(
          `Peers as node ${n.id} sees them`,
          ["Peer", "Connected", "RTT", "Last heard"],
          peers.map((p) => [
            `node ${p.id}`,
            p.connected ? badge("yes", "link-up") : badge("NO", "link-down"),
            millis(val(p, "rtt_ms")),
            val(p, "last_heard_ms") === null ? "never" : `${duration(p.last_heard_ms)} ago`,
          ]),
          "peers",
        ),
      );
    }
    return article;
  }

  /** `index@token` of a configuration, marked while not known committed. */
  function configText(m) {
    if (!m || !m.config) return "—";
    return `${m.config.index}@${m.config.token}${m.committed ? "" : " (not committed yet)"}`;
  }

  /** The first 8 hex digits of a data directory's identity, the rest on hover. */
  function directoryText(d) {
    if (typeof d !== "string" || !d) return "—";
    return el("span", { class: "directory", title: d }, d.slice(0, 8));
  }

  function fact(term, value) {
    return el("div", null, el("dt", null, term), el("dd", null, value));
  }

  // ------------------------------------------------------------ replication
  function renderReplication() {
    const body = $("#replication .body");
    const nodes = state.cluster ? [...(state.cluster.nodes || [])].sort((a, b) => a.id - b.id) : [];
    const withLog = nodes.filter((n) => n.status && val(n.status, "replication"));
    const parts = [];
    if (!withLog.length) {
      parts.push(el("p", { class: "empty-state" }, "No replicated log on these nodes."));
    } else {
      parts.push(
        table(
          "Log position per node",
          ["Node", "Committed", "Applied", "Last index", "Revision"],
          nodes.map((n) => {
            const r = n.status ? val(n.status, "replication") : null;
            const role = n.status ? val(n.status, "role") : unreadState(n, state.cluster.served_by);
            const name = ["leader", "down", "unknown"].includes(role) ? `node ${n.id} (${ROLE_LABELS[role]})` : `node ${n.id}`;
            if (!r) return [name, "—", "—", "—", "—"];
            return [
              name,
              orDash(val(r, "commit_index")),
              orDash(val(r, "applied_index")),
              orDash(val(r, "last_index")),
              orDash(val(r, "revision")),
            ];
          }),
        ),
      );
    }
    parts.push(lagView(nodes));
    body.replaceChildren(...parts.filter(Boolean));
  }

  /** Per-follower lag: from the leader's status, else from this node's /metrics. */
  function lagView(nodes) {
    const leader = nodes.find((n) => n.status && val(n.status, "role") === "leader");
    const followers = leader && val(val(leader.status, "replication"), "followers");
    let rows = null;
    let caption = null;
    const membership = leader && val(leader.status, "membership");
    const kind = (id) => {
      if (!membership) return null;
      if (Array.isArray(membership.voters) && membership.voters.includes(id)) return "voter";
      if (Array.isArray(membership.learners) && membership.learners.includes(id)) return "learner";
      return "leaving";
    };
    if (Array.isArray(followers) && followers.length) {
      caption = `Follower lag, reported by the leader (node ${leader.id})`;
      rows = [...followers]
        .sort((a, b) => a.id - b.id)
        .map((f) => ({ id: f.id, match: val(f, "match_index"), lag: val(f, "lag_entries"), kind: kind(f.id) }));
    } else if (state.metrics && state.metrics.lag.size) {
      caption = `Follower lag, from this node's /metrics`;
      rows = [...state.metrics.lag.entries()]
        .sort((a, b) => Number(a[0]) - Number(b[0]))
        .map(([id, lag]) => ({ id, match: state.metrics.match.has(id) ? state.metrics.match.get(id) : null, lag, kind: null }));
    }
    if (!rows) return null;
    const maxLag = Math.max(1, ...rows.map((r) => r.lag || 0));
    return table(
      caption,
      ["Follower", "Member", "Match index", "Lag (entries)"],
      rows.map((r) => [
        `node ${r.id}`,
        orDash(r.kind),
        orDash(r.match),
        el("span", { class: "lag" }, lagBar(r.lag, maxLag), el("span", null, orDash(r.lag))),
      ]),
      "lag-table",
    );
  }

  function lagBar(lag, maxLag) {
    const bar = el("span", { class: `lag-bar${lag ? "" : " zero"}`, "aria-hidden": "true" });
    // CSSOM, allowed by the CSP (a style attribute would not be).
    bar.style.width = `${Math.round((100 * (lag || 0)) / maxLag)}%`;
    return el("span", { class: "lag-track", "aria-hidden": "true" }, bar);
  }

  // --------------------------------------------------------------- timeline
  const CAUSE_LABELS = {
    startup: "startup",
    transfer: "transfer",
    graceful_stop: "graceful stop",
    crash: "crash",
    partition: "partition",
    quorum_lost: "quorum lost",
    election: "election",
  };

  let timelineKey = "";

  function timelineNow() {
    const t = state.timeline;
    return t ? t.nowUnixMs + (performance.now() - t.receivedAt) : Date.now();
  }

  function newestEntry(term, leader) {
    const entries = state.timeline ? state.timeline.entries : [];
    for (let i = entries.length - 1; i >= 0; i--) {
      if (entries[i].term === term && entries[i].leader === leader) return entries[i];
    }
    return null;
  }

  function onTimeline(body) {
    const entries = Array.isArray(body.entries) ? body.entries : [];
    state.timeline = {
      entries,
      nowUnixMs: typeof body.now_unix_ms === "number" ? body.now_unix_ms : Date.now(),
      receivedAt: performance.now(),
    };
    setStale("timeline", null);
    const key = JSON.stringify(entries);
    if (key !== timelineKey) {
      timelineKey = key;
      renderTimeline();
    }
    updateAgo();
    renderHeadlineDetail();
  }

  function renderTimeline() {
    const entries = state.timeline.entries;
    $("#timeline .empty").hidden = entries.length > 0;
    const items = [];
    for (let i = entries.length - 1; i >= 0; i--) items.push(timelineItem(entries[i]));
    $("#timeline ol").replaceChildren(...items);
  }

  function timelineItem(e) {
    const leader = val(e, "leader");
    const cause = String(val(e, "cause") || "unknown");
    const gap = val(e, "no_leader_ms");
    const at = val(e, "at_unix_ms");
    const previous = val(e, "previous");
    const when =
      at === null
        ? el("p", { class: "when" }, "time unknown")
        : el(
            "p",
            { class: "when" },
            el("time", { datetime: new Date(at).toISOString(), title: new Date(at).toString() }, clock(at)),
            " ",
            el("span", { class: "ago", "data-at": at }, `(${ago(timelineNow() - at)})`),
          );
    const headline =
      leader === null ? `no leader in term ${orDash(e.term)}` : `node ${leader} leads term ${orDash(e.term)}`;
    const what = el(
      "p",
      { class: "what" },
      el("strong", null, headline),
      " ",
      badge(CAUSE_LABELS[cause] || cause, `cause cause-${cause.replace(/[^a-z_-]/gi, "")}`, "cause: "),
      " ",
      el("span", { class: "gap" }, gap === null || gap === 0 ? "no gap" : `no leader for ${millis(gap)}`),
      previous !== null && previous !== leader ? el("span", { class: "prev" }, ` · before: node ${previous}`) : null,
    );
    return el(
      "li",
      { "data-term": orDash(e.term), "data-leader": leader === null ? "" : leader, "data-cause": cause },
      when,
      what,
      val(e, "detail") ? el("p", { class: "detail" }, e.detail) : null,
    );
  }

  /** Refreshes the "x s ago" texts against the serving node's clock. */
  function updateAgo() {
    const now = timelineNow();
    for (const span of document.querySelectorAll("#timeline .ago[data-at]")) {
      setText(span, `(${ago(now - Number(span.dataset.at))})`);
    }
  }

  // -------------------------------------------------- elections and sessions
  function storeReadable() {
    return state.headline.known && state.headline.leader !== null;
  }

  const NO_LEADER_NOTE = "waiting for a leader (elections and sessions are read through it)";

  function onElections(body) {
    state.elections = body;
    state.errors.elections = null;
    renderElectionsNote();
    renderElections();
  }

  function onSessions(body) {
    state.sessions = body;
    state.errors.sessions = null;
    renderElectionsNote();
    renderSessions();
  }

  function onStoreError(which) {
    return (e, skipped) => {
      state.errors[which] = skipped ? NO_LEADER_NOTE : e.message;
      renderElectionsNote();
    };
  }

  function renderElectionsNote() {
    setStale("elections", state.errors.elections || state.errors.sessions);
  }

  function renderElections() {
    const b = state.elections;
    const list = Array.isArray(b.elections) ? b.elections : [];
    const body = $("#elections .body");
    if (!list.length) {
      body.replaceChildren(el("p", { class: "empty-state" }, "No application election has a candidate."));
      return;
    }
    const rows = list.map((x) => {
      const l = val(x, "leader");
      const c = val(x, "candidates");
      const queue = Array.isArray(c) ? c.length : c;
      return [
        x.name,
        l ? `session ${l.session}` : "nobody",
        l ? shortValue(val(l, "value")) : "—",
        l ? orDash(val(l, "token")) : "—",
        orDash(queue),
      ];
    });
    const caption = `${counted(list.length, "election", b.more)}, store revision ${orDash(b.revision)}`;
    const headers = ["Election", "Holder", "Value", "Token", "Queue length"];
    body.replaceChildren(table(caption, headers, rows, "elections-table"));
  }

  /** "3 elections", and whether the list was cut at LIST_LIMIT. */
  function counted(n, noun, more) {
    return `${n} ${noun}${n === 1 ? "" : "s"}${more ? ` (the first ${LIST_LIMIT}; more exist)` : ""}`;
  }

  function shortValue(v) {
    if (v === null || v === "") return el("span", { class: "muted" }, "(empty)");
    const s = String(v);
    if (s.length <= VALUE_SHOWN_CHARS) return s;
    return el("span", { title: s }, `${s.slice(0, VALUE_SHOWN_CHARS)}…`);
  }

  function renderSessions() {
    const b = state.sessions;
    const list = Array.isArray(b.sessions) ? b.sessions : [];
    const box = $("#elections .sessions");
    if (!list.length) {
      box.replaceChildren(el("p", { class: "empty-state" }, "No session is open."));
      return;
    }
    const rows = list.map((s) => {
      const keys = Array.isArray(s.keys) ? s.keys : [];
      return [
        `session ${s.id}`,
        duration(val(s, "ttl_ms")),
        val(s, "remaining_ms") === null ? "not reported" : duration(s.remaining_ms),
        keys.length ? el("ul", { class: "keys" }, keys.map((k) => el("li", null, el("code", null, k)))) : "none",
      ];
    });
    const caption = counted(list.length, "session", b.more);
    box.replaceChildren(table(caption, ["Session", "TTL", "Remaining", "Keys"], rows, "sessions-table"));
  }

  // ----------------------------------------------------- groups of partitions
  /** The names of the first groups (`GET /v1/groups`, one page). */
  async function listGroups() {
    const body = await request(`/v1/groups?limit=${GROUP_LIST_MAX}&consistency=stale`);
    const groups = Array.isArray(body.groups) ? body.groups : [];
    return { names: groups.map((g) => String(g.name)), more: !!body.more };
  }

  function groupUrl() {
    return `/v1/groups/${encodeURIComponent(state.groups.selected)}?consistency=stale`;
  }

  function groupReadable() {
    return storeReadable() && state.groups.selected !== null;
  }

  function onGroupList(data) {
    const g = state.groups;
    g.names = data.names;
    g.more = data.more;
    state.errors.groupList = null;
    renderGroupsNote();
    if (g.selected === null || !g.names.includes(g.selected)) {
      selectGroup(g.names.length ? g.names[0] : null);
    }
    renderGroupList();
  }

  function onGroupsError(which) {
    return (e, skipped) => {
      if (which === "group" && skipped && state.groups.selected === null) {
        state.errors.group = null;
      } else {
        state.errors[which] = skipped ? "waiting for a leader (groups are read through it)" : e.message;
      }
      renderGroupsNote();
    };
  }

  function renderGroupsNote() {
    setStale("groups", state.errors.groupList || state.errors.group);
  }

  function selectGroup(name) {
    const g = state.groups;
    if (g.selected === name) return;
    g.selected = name;
    g.body = null;
    g.mapKey = "";
    renderGroupList();
    renderGroup();
    if (name !== null) pollers.group.poll(true);
  }

  function renderGroupList() {
    const g = state.groups;
    const key = JSON.stringify([g.names, g.more, g.selected]);
    if (key === g.listKey) return;
    g.listKey = key;
    const box = $("#groups .group-list");
    if (!g.names.length) {
      box.replaceChildren(el("p", { class: "empty-state" }, "No group of partitions exists."));
      return;
    }
    const buttons = g.names.map((name) => {
      const b = el(
        "button",
        { type: "button", class: "group-choice", "data-group": name, "aria-pressed": name === g.selected ? "true" : "false" },
        name,
      );
      b.addEventListener("click", () => selectGroup(name));
      return b;
    });
    const more = g.more ? el("span", { class: "muted" }, ` (the first ${GROUP_LIST_MAX}; more exist)`) : null;
    box.replaceChildren(el("span", { class: "sub" }, "Group: "), ...buttons, ...(more ? [more] : []));
  }

  function onGroup(body) {
    if (!body || body.name !== state.groups.selected) return;
    state.groups.body = body;
    state.errors.group = null;
    renderGroupsNote();
    renderGroup();
  }

  /** A member's label on the map: A to Z, then M27, M28, … */
  function ownerLabel(i) {
    return i < 26 ? String.fromCharCode(65 + i) : `M${i + 1}`;
  }

  function renderGroup() {
    const detail = $("#group-detail");
    const b = state.groups.body;
    if (!b) {
      detail.dataset.group = "";
      detail.replaceChildren();
      return;
    }
    // The revision says whether the store's view changed; the leader's
    // figures (smaller than the group) say the rest.
    const key = JSON.stringify([b.name, b.revision, b.more, val(b, "stats"), val(b, "stats_error")]);
    if (key === state.groups.mapKey) return;
    state.groups.mapKey = key;
    detail.dataset.group = b.name;
    const n = b.spec.partitions;
    const members = Array.isArray(b.members) ? b.members : [];
    const owners = Array.isArray(b.owners) ? b.owners : [];
    // Labels: the members in id order, then owners not on the members' page.
    const labels = new Map();
    for (const m of members) labels.set(m.id, labels.size);
    for (const o of owners) if (!labels.has(o.member)) labels.set(o.member, labels.size);
    const byPartition = new Map(owners.map((o) => [o.partition, o]));
    const s = val(b, "stats");
    const spells = new Map((s && Array.isArray(s.partitions) ? s.partitions : []).map((p) => [p.partition, p]));

    const summary = el(
      "p",
      { id: "group-summary" },
      `${b.name}: ${n} partition${n === 1 ? "" : "s"}, ${members.length}${b.more ? "+" : ""} member${members.length === 1 ? "" : "s"}, ` +
        `${owners.length} owned, stabilise ${duration(b.spec.stabilise_ms)}, store revision ${b.revision}`,
    );
    const statsAttrs = s
      ? { id: "group-stats", "data-measured": "true", "data-moves": s.moves, "data-imbalance": s.imbalance, "data-unowned": s.unowned }
      : { id: "group-stats", "data-measured": "false" };
    const stats = s
      ? el(
          "p",
          statsAttrs,
          el("strong", null, `${s.moves} move${s.moves === 1 ? "" : "s"}`),
          ` · imbalance ${s.imbalance} (by weight) · `,
          el("strong", null, `${s.unowned} without an owner`),
          el("span", { class: "sub" }, ` — measured by the leader, node ${s.node}, for ${duration(s.watched_ms)}`),
        )
      : el("p", statsAttrs, `The leader's figures are not available: ${orDash(val(b, "stats_error"))}`);

    const memberById = new Map(members.map((m) => [m.id, m]));
    const heldBy = new Map();
    for (const o of owners) {
      if (!heldBy.has(o.member)) heldBy.set(o.member, []);
      heldBy.get(o.member).push(o);
    }
    const shownLabels = [...labels.entries()].slice(0, GROUP_ROWS_MAX);
    const ownerRows = shownLabels.map(([id, i]) => {
      const m = memberById.get(id);
      const held = heldBy.get(id) || [];
      const epochs = held.map((o) => o.epoch);
      const [lo, hi] = [Math.min(...epochs), Math.max(...epochs)];
      const range = !epochs.length ? "—" : lo === hi ? String(lo) : `${lo}–${hi}`;
      const tr = el(
        "tr",
        { "data-member": id, "data-owned": held.length },
        el("th", { scope: "row" }, el("span", { class: `swatch owner-${i % 8}`, "aria-hidden": "true" }), ownerLabel(i)),
        el("td", null, el("code", null, id)),
        el("td", null, m ? String(m.spec.weight) : "—"),
        el("td", null, m && m.spec.zone ? m.spec.zone : "—"),
        el("td", null, m ? (m.spec.ready ? "ready" : "not ready") : "(not on this page)"),
        el("td", null, String(held.length)),
        el("td", null, range),
      );
      return tr;
    });
    const ownersTable = el(
      "div",
      { class: "table-wrap" },
      el(
        "table",
        { id: "group-owners" },
        el(
          "caption",
          null,
          labels.size > GROUP_ROWS_MAX ? `Members and what they own (the first ${GROUP_ROWS_MAX} of ${labels.size})` : "Members and what they own",
        ),
        el(
          "thead",
          null,
          el("tr", null, ["Label", "Member", "Weight", "Zone", "Ready", "Owns", "Epochs"].map((h) => el("th", { scope: "col" }, h))),
        ),
        el("tbody", null, ownerRows),
      ),
    );

    const cellTitle = (p, o, sp) => {
      const spell = sp && sp.unowned_ms !== undefined && sp.unowned_ms !== null ? `, no owner for ${duration(sp.unowned_ms)}` : "";
      if (!o) return `partition ${p}: no owner${spell}`;
      return `partition ${p}: ${ownerLabel(labels.get(o.member))} (${o.member}), epoch ${o.epoch}${o.release ? ", asked to release" : ""}`;
    };
    let map;
    if (n <= MAP_CELLS_MAX) {
      const cells = [];
      for (let p = 0; p < n; p++) {
        const o = byPartition.get(p);
        const sp = spells.get(p);
        const i = o ? labels.get(o.member) : null;
        cells.push(
          el(
            "li",
            {
              class: o ? `cell owner-${i % 8}${o.release ? " releasing" : ""}` : "cell unowned",
              "data-partition": p,
              "data-owner": o ? o.member : "",
              title: cellTitle(p, o, sp),
            },
            el("span", { class: "cell-p" }, String(p)),
            el("span", { class: "cell-o" }, o ? `${ownerLabel(i)}${o.release ? "↻" : ""}` : "—"),
          ),
        );
      }
      map = el("ol", { id: "group-map", class: "map", "aria-label": `The ${n} partitions and their owners (label; ↻ asked to release; — no owner)` }, cells);
    } else {
      const runs = [];
      for (let p = 0; p < n; p++) {
        const o = byPartition.get(p);
        const who = o ? o.member : "";
        const last = runs[runs.length - 1];
        if (last && last.who === who && last.to === p - 1) last.to = p;
        else runs.push({ from: p, to: p, who });
      }
      const caption =
        runs.length > GROUP_ROWS_MAX
          ? `The ${n} partitions as runs of one owner (the first ${GROUP_ROWS_MAX} of ${runs.length} runs)`
          : `The ${n} partitions as runs of one owner`;
      map = table(
        caption,
        ["Partitions", "Owner"],
        runs.slice(0, GROUP_ROWS_MAX).map((r) => [r.from === r.to ? String(r.from) : `${r.from}–${r.to}`, r.who ? `${ownerLabel(labels.get(r.who))} (${r.who})` : "no owner"]),
        "runs-table",
      );
      map.id = "group-map";
    }

    const listed = [...spells.values()]
      .sort((x, y) => (y.unowned_ms ?? -1) - (x.unowned_ms ?? -1) || y.total_unowned_ms - x.total_unowned_ms || x.partition - y.partition)
      .slice(0, UNOWNED_ROWS);
    const unowned = listed.length
      ? table(
          `Time without an owner (${spells.size} partition${spells.size === 1 ? "" : "s"} had some; longest first)`,
          ["Partition", "Now", "Last spell", "In all", "Spells"],
          listed.map((p) => [
            String(p.partition),
            p.unowned_ms === undefined || p.unowned_ms === null ? "owned" : `no owner for ${duration(p.unowned_ms)}`,
            p.last_unowned_ms === undefined || p.last_unowned_ms === null ? "—" : duration(p.last_unowned_ms),
            duration(p.total_unowned_ms),
            String(p.spells),
          ]),
          "unowned-table",
        )
      : el("p", { class: "empty-state" }, s ? "No partition has been without an owner since the leader began to watch." : "");
    detail.replaceChildren(summary, stats, map, ownersTable, unowned);
  }

  // ---------------------------------------------------------------- metrics
  /** The samples of a Prometheus text exposition: [{name, labels, value}]. */
  function parsePrometheus(text) {
    const samples = [];
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (!line || line.startsWith("#")) continue;
      const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) {
        const re = /([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g;
        let l;
        while ((l = re.exec(m[2])) !== null) {
          labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        }
      }
      const value = m[3] === "+Inf" ? Infinity : m[3] === "-Inf" ? -Infinity : Number(m[3]);
      samples.push({ name: m[1], labels, value });
    }
    return samples;
  }

  function onMetrics(text) {
    const samples = parsePrometheus(text);
    const h = "tenure_failover_duration_seconds";
    const buckets = samples
      .filter((s) => s.name === `${h}_bucket` && s.labels.le !== undefined)
      .map((s) => ({ le: s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), cumulative: s.value }))
      .filter((b) => !Number.isNaN(b.le))
      .sort((a, b) => a.le - b.le);
    const one = (name) => {
      const s = samples.find((x) => x.name === name);
      return s ? s.value : null;
    };
    const lag = new Map();
    const match = new Map();
    for (const s of samples) {
      if (s.labels.follower === undefined) continue;
      if (s.name === "tenure_log_follower_lag_entries") lag.set(s.labels.follower, s.value);
      else if (s.name === "tenure_log_follower_match_index") match.set(s.labels.follower, s.value);
    }
    state.metrics = { buckets, count: one(`${h}_count`), sum: one(`${h}_sum`), lag, match };
    setStale("failovers", null);
    renderFailovers();
    renderReplication();
  }

  function bucketLabel(le) {
    return le === Infinity ? "> last" : `≤ ${seconds(le)}`;
  }

  /** Per-bucket counts from the cumulative ones; the last bucket's label names its lower bound. */
  function histogram() {
    const m = state.metrics;
    let prev = 0;
    return m.buckets.map((b, i) => {
      const n = Math.max(0, b.cumulative - prev);
      prev = b.cumulative;
      const label = b.le === Infinity ? (i > 0 ? `> ${seconds(m.buckets[i - 1].le)}` : "any") : bucketLabel(b.le);
      return { le: b.le, n, cumulative: b.cumulative, label };
    });
  }

  let chartKey = "";

  function renderFailovers() {
    const m = state.metrics;
    const summary = $("#failovers .summary");
    const chart = $("#failovers .chart");
    if (!m.buckets.length) {
      setText(summary, "This node's /metrics has no failover histogram.");
      chart.replaceChildren();
      chartKey = "";
      return;
    }
    const bins = histogram();
    const total = m.count !== null ? m.count : bins[bins.length - 1].cumulative;
    let text;
    let median = -1;
    if (!total) {
      text = "No failover measured by this node yet.";
    } else {
      median = bins.findIndex((b) => b.cumulative >= total / 2);
      const mean = m.sum !== null ? `, mean ${seconds(m.sum / total)}` : "";
      text = `${total} failover${total === 1 ? "" : "s"}, median bucket ${bins[median].label}${mean}.`;
    }
    setText(summary, text);
    const width = Math.max(260, Math.floor(chart.clientWidth || 0));
    const key = JSON.stringify([bins, width]);
    if (key === chartKey) return;
    chartKey = key;
    chart.replaceChildren(histogramSvg(bins, median, width), histogramTable(bins));
  }

  function histogramSvg(bins, median, width) {
    const labelW = 84;
    const rightPad = 100;
    const rowH = 20;
    const top = 26;
    const plotH = bins.length * rowH;
    const height = top + plotH + 44;
    const plotW = width - labelW - rightPad;
    const max = Math.max(1, ...bins.map((b) => b.n));
    const step = niceStep(max);
    const axisMax = Math.ceil(max / step) * step;
    const x = (n) => labelW + (plotW * n) / axisMax;
    const svg = svgEl("svg", {
      class: "histogram",
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-labelledby": "failovers-heading failovers-summary",
    });
    svg.append(svgEl("text", { x: 0, y: 14, class: "axis-title" }, "time without a leader (bucket)"));
    bins.forEach((b, i) => {
      const y = top + i * rowH;
      const textY = y + rowH * 0.7;
      svg.append(svgEl("text", { x: labelW - 8, y: textY, class: "tick-label", "text-anchor": "end" }, b.label));
      const w = b.n ? Math.max(2, x(b.n) - labelW) : 0;
      const bar = svgEl(
        "rect",
        { x: labelW, y: y + 3, width: w, height: rowH - 6, class: i === median ? "bar median" : "bar" },
        svgEl("title", null, `${b.n} failover${b.n === 1 ? "" : "s"} ${b.label}`),
      );
      svg.append(bar);
      if (b.n || i === median) {
        const count = `${b.n}${i === median ? " ◀ median" : ""}`;
        svg.append(svgEl("text", { x: labelW + w + 5, y: textY, class: "count-label" }, count));
      }
    });
    const axisY = top + plotH;
    svg.append(svgEl("line", { x1: labelW, y1: top, x2: labelW, y2: axisY, class: "axis" }));
    svg.append(svgEl("line", { x1: labelW, y1: axisY, x2: labelW + plotW, y2: axisY, class: "axis" }));
    for (let v = 0; v <= axisMax; v += step) {
      svg.append(svgEl("line", { x1: x(v), y1: axisY, x2: x(v), y2: axisY + 4, class: "axis" }));
      svg.append(svgEl("text", { x: x(v), y: axisY + 16, class: "tick-label", "text-anchor": "middle" }, String(v)));
    }
    const xTitle = { x: labelW + plotW / 2, y: axisY + 36, class: "axis-title", "text-anchor": "middle" };
    svg.append(svgEl("text", xTitle, "failovers (count)"));
    return svg;
  }

  function niceStep(max) {
    const rough = max / 4;
    const mag = 10 ** Math.floor(Math.log10(Math.max(1, rough)));
    for (const f of [1, 2, 5, 10]) if (f * mag >= rough) return Math.max(1, f * mag);
    return Math.max(1, 10 * mag);
  }

  function histogramTable(bins) {
    return el(
      "details",
      { class: "as-table" },
      el("summary", null, "The histogram as a table"),
      table(
        "Failovers per latency bucket",
        ["Took", "Failovers", "Cumulative"],
        bins.map((b) => [b.label, String(b.n), String(b.cumulative)]),
      ),
    );
  }

  // ------------------------------------------------------------ event stream
  const LIVE_TEXT = {
    idle: "not connected",
    connecting: "connecting…",
    live: "live",
    reconnecting: "reconnecting…",
  };

  function setLive(s) {
    const e = $("#live");
    e.dataset.state = s;
    setText(e, LIVE_TEXT[s]);
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  let watchCtrl = null;

  /** Reads /v1/watch until the page stops, reconnecting with backoff. */
  async function watchLoop(generation) {
    let delay = BACKOFF_MIN_MS;
    let first = true;
    while (page.running && generation === page.generation) {
      setLive(first ? "connecting" : "reconnecting");
      first = false;
      let gotEvent = false;
      try {
        gotEvent = await readStream(generation);
      } catch (e) {
        if (e instanceof AuthError) {
          if (generation === page.generation) authRefused(e);
          return;
        }
        // Any other failure: reconnect below.
      }
      if (!page.running || generation !== page.generation) return;
      if (gotEvent) delay = BACKOFF_MIN_MS;
      setLive("reconnecting");
      await sleep(delay);
      delay = Math.min(delay * 2, BACKOFF_MAX_MS);
    }
  }

  /** One connection of the stream; true when at least one event arrived. */
  async function readStream(generation) {
    const ctrl = new AbortController();
    watchCtrl = ctrl;
    let silence = null;
    const quiet = () => {
      clearTimeout(silence);
      silence = setTimeout(() => ctrl.abort(), STREAM_SILENCE_MS);
    };
    quiet();
    let gotEvent = false;
    try {
      const res = await fetch(URLS.watch, { headers: authHeaders(), signal: ctrl.signal, cache: "no-store" });
      if (res.status === 401 || res.status === 403) throw new AuthError(res.status, await errorText(res));
      if (!res.ok || !res.body) {
        await res.text().catch(() => "");
        return false;
      }
      if (generation === page.generation) setLive("live");
      const parser = new SseParser((type, data) => {
        if (type === "leadership" && generation === page.generation) {
          gotEvent = true;
          onLeadershipEvent(data);
        }
      });
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        quiet();
        if (!parser.push(decoder.decode(value, { stream: true }))) break;
      }
      return gotEvent;
    } finally {
      clearTimeout(silence);
      if (watchCtrl === ctrl) watchCtrl = null;
      ctrl.abort();
    }
  }

  /** Server-Sent Events: lines, `event:`, `data:`, `:` comments, a blank line ends an event. */
  class SseParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buffer = "";
      this.type = "";
      this.data = [];
    }

    /** Feeds text; false when the stream is broken (a line past the bound). */
    push(text) {
      this.buffer += text;
      for (;;) {
        const m = /\r\n|\n|\r/.exec(this.buffer);
        if (!m) break;
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (m[0] === "\r" && m.index === this.buffer.length - 1) break;
        const line = this.buffer.slice(0, m.index);
        this.buffer = this.buffer.slice(m.index + m[0].length);
        this.line(line);
      }
      return this.buffer.length <= MAX_SSE_BUFFER;
    }

    line(line) {
      if (line === "") {
        if (this.data.length) this.onEvent(this.type || "message", this.data.join("\n"));
        this.type = "";
        this.data = [];
        return;
      }
      if (line.startsWith(":")) return; // a comment: keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.type = value;
      else if (field === "data") this.data.push(value);
      // id and retry: not used (the stream starts with the current state).
    }
  }

  function onLeadershipEvent(data) {
    let body;
    try {
      body = JSON.parse(data);
    } catch (_) {
      return;
    }
    const hadLeader = state.headline.leader !== null;
    state.lastEventAt = performance.now();
    setHeadline(val(body, "leader"), val(body, "term"), val(body, "fencing_token"), val(body, "role"));
    pollers.cluster.poll(true);
    pollers.timeline.poll(true);
    // A new leader ends a failover: its time is in the histogram now.
    if (state.headline.leader !== null) pollers.metrics.poll(true);
    if (!hadLeader && state.headline.leader !== null) {
      // The store is readable again: do not wait for the next slow poll.
      pollers.elections.poll(true);
      pollers.sessions.poll(true);
      pollers.groupList.poll(true);
      pollers.group.poll(true);
    }
  }

  // ---------------------------------------------------------- start and stop
  const pollers = {
    cluster: new Poller(URLS.cluster, POLL_FAST_MS, false, onCluster, (e) => onClusterError(e)),
    timeline: new Poller(URLS.timeline, POLL_FAST_MS, false, onTimeline, (e) => setStale("timeline", e.message)),
    elections: new Poller(URLS.elections, POLL_SLOW_MS, false, onElections, onStoreError("elections"), storeReadable),
    sessions: new Poller(URLS.sessions, POLL_SLOW_MS, false, onSessions, onStoreError("sessions"), storeReadable),
    metrics: new Poller(URLS.metrics, POLL_SLOW_MS, true, onMetrics, (e) => setStale("failovers", e.message)),
    groupList: new Poller(listGroups, POLL_GROUP_LIST_MS, false, onGroupList, onGroupsError("groupList"), storeReadable),
    group: new Poller(() => request(groupUrl()), POLL_SLOW_MS, false, onGroup, onGroupsError("group"), groupReadable),
  };

  let ticker = null;

  async function start() {
    stop();
    page.running = true;
    page.generation += 1;
    const generation = page.generation;
    showTokenForm(false);
    // One request first: a wrong token then costs one refused request, not six.
    await pollers.cluster.poll(false);
    if (!page.running || generation !== page.generation) return;
    pollers.cluster.start(true);
    pollers.timeline.start();
    pollers.metrics.start();
    pollers.elections.start();
    pollers.sessions.start();
    pollers.groupList.start();
    pollers.group.start();
    ticker = setInterval(() => {
      updateAgo();
      renderHeadlineDetail();
    }, 1000);
    watchLoop(generation).catch(() => setLive("idle"));
  }

  function stop() {
    page.running = false;
    page.generation += 1;
    for (const p of Object.values(pollers)) p.stop();
    for (const c of page.inFlight) c.abort();
    page.inFlight.clear();
    if (watchCtrl) watchCtrl.abort();
    if (ticker !== null) clearInterval(ticker);
    ticker = null;
    setLive("idle");
  }

  function authRefused(e) {
    stop();
    setToken(null);
    const why =
      e.status === 403 ? "this token's role may not read the dashboard's data" : "the node does not know this token";
    showTokenForm(true, `Refused (${e.status}): ${why}${e.message ? ` (${e.message})` : ""}. Enter another token.`);
  }

  function showTokenForm(show, error) {
    $("#token-section").hidden = !show;
    for (const s of document.querySelectorAll("main > section.data")) s.hidden = show;
    setText($("#token-error"), error || "");
    if (show) {
      const input = $("#token");
      input.value = "";
      input.focus();
    }
  }

  function setNodeId(id) {
    if (page.nodeId === id) return;
    page.nodeId = id;
    setText($("#served-by"), `served by node ${id}`);
    document.title = `tenure · node ${id}`;
  }

  function init() {
    const body = document.body;
    const id = Number.parseInt(body.dataset.node || "", 10);
    if (Number.isInteger(id) && String(id) === body.dataset.node) setNodeId(id);
    page.auth = body.dataset.auth === "token" ? "token" : "open";

    $("#token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const t = $("#token").value.trim();
      if (!t) {
        setText($("#token-error"), "Enter a token.");
        return;
      }
      setToken(t);
      start().catch(() => setLive("idle"));
    });

    let resizeTimer = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        if (state.metrics) renderFailovers();
      }, 150);
    });

    if (page.auth === "token" && !getToken()) showTokenForm(true);
    else start().catch(() => setLive("idle"));
  }

  init();
})();

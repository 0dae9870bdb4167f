// The customers' portal: one application's webhook endpoints, messages and attempts, through
// the API on this origin. Opened as /portal/#token=…: the token is moved out of the address
// bar into this tab's sessionStorage (or, framed without storage, the page's memory), so it is
// never sent to a server as part of a URL.
// An owner's API token opens the same page as the tenant's console, across applications.
"use strict";

const STORE = "tickwork.portal";
// A framed page may be refused storage (a browser that blocks a third party's, as headless
// Chromium does): the token then lives in this page's memory while the page is open.
const store = (() => {
  try {
    window.sessionStorage.getItem(STORE);
    return window.sessionStorage;
  } catch {
    const held = new Map();
    return {
      getItem: (key) => held.get(key) ?? null,
      setItem: (key, value) => held.set(key, value),
      removeItem: (key) => held.delete(key),
    };
  }
})();
const state = { token: null, capabilities: new Set(), tenantWide: false, types: [], next: null };

function takeToken() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (token) {
    store.setItem(STORE, token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return store.getItem(STORE);
}

class Expired extends Error {}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method === "POST") headers["Idempotency-Key"] = crypto.randomUUID();
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) throw new Expired();
  const data = response.status === 204 ? null : await response.json();
  if (!response.ok) {
    const error = new Error(data && data.detail ? data.detail : `HTTP ${response.status}`);
    error.problem = data || { title: `HTTP ${response.status}`, status: response.status };
    throw error;
  }
  return data;
}

const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "onclick" || name === "onsubmit") node.addEventListener(name.slice(2), value);
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function can(capability) { return state.capabilities.has(capability); }

function notice(text) {
  $("#problem").hidden = true;
  $("#notice").textContent = text;
}

function showProblem(error) {
  if (error instanceof Expired) return showExpired();
  const problem = error.problem || { title: "Network error", detail: String(error) };
  const box = $("#problem");
  box.replaceChildren(
    el("h2", {}, `${problem.title || "Error"}${problem.status ? ` (HTTP ${problem.status})` : ""}`),
    el("p", {}, problem.detail || ""),
  );
  box.hidden = false;
  $("#notice").textContent = "";
  box.focus();
}

function showExpired() {
  store.removeItem(STORE);
  $("#console").hidden = true;
  $("#problem").hidden = true;
  $("#notice").textContent = "";
  $("#who").textContent = "";
  $("#expired").hidden = false;
}

// Run `action`; a problem is shown, an expired session ends the page.
async function act(action) {
  try { await action(); } catch (error) { showProblem(error); }
}

function applicationQuery(params = new URLSearchParams()) {
  const chosen = $("#application").value;
  if (state.tenantWide && chosen) params.set("application", chosen);
  const query = params.toString();
  return query ? `?${query}` : "";
}

// --- Event types ---------------------------------------------------------------------------
function typePicker(container, chosen, idPrefix) {
  container.replaceChildren(...state.types.map((name, index) => {
    const id = `${idPrefix}-${index}`;
    return el("label", { for: id },
      el("input", { type: "checkbox", id, name: "event_types", value: name, checked: chosen.includes(name) }),
      name);
  }));
}

function pickedTypes(form) {
  const names = [...form.querySelectorAll("input[name=event_types]:checked")].map((box) => box.value);
  return names.length ? names : null;
}

async function loadTypes() {
  const page = await api("GET", "/v1/event-types?archived=false");
  state.types = page.results.map((type) => type.name).sort();
  typePicker($("#endpoint-form .type-picker"), [], "new-type");
  const filter = $("#message-filter select[name=event_type]");
  filter.replaceChildren(el("option", { value: "" }, "Any type"),
    ...state.types.map((name) => el("option", { value: name }, name)));
}

// --- Endpoints -----------------------------------------------------------------------------
function endpointItem(endpoint) {
  const item = el("li", { "data-endpoint": endpoint.id });
  const status = endpoint.disabled ? `disabled${endpoint.disabled_reason ? ` (${endpoint.disabled_reason})` : ""}` : "enabled";
  const types = endpoint.event_types ? endpoint.event_types.join(", ") : "every type";
  const secret = el("p", { class: "secret", hidden: true, "aria-live": "polite" });
  const actions = el("div", { class: "actions" });
  const url = endpoint.url;
  if (can("manage_endpoints")) {
    actions.append(
      el("button", { type: "button", "aria-label": `Edit ${url}`, onclick: () => editEndpoint(item, endpoint) }, "Edit"),
      el("button", {
        type: "button", "aria-label": `${endpoint.disabled ? "Enable" : "Disable"} ${url}`,
        onclick: () => act(async () => {
          await api("PATCH", `/v1/webhook-endpoints/${endpoint.id}`, { disabled: !endpoint.disabled });
          notice(`Endpoint ${endpoint.disabled ? "enabled" : "disabled"}.`);
          await loadEndpoints();
        }),
      }, endpoint.disabled ? "Enable" : "Disable"),
      el("button", {
        type: "button", "aria-label": `Delete ${url}`,
        onclick: () => act(async () => {
          await api("DELETE", `/v1/webhook-endpoints/${endpoint.id}`);
          notice("Endpoint deleted.");
          await loadEndpoints();
        }),
      }, "Delete"));
  }
  if (can("view_secret")) {
    actions.append(el("button", {
      type: "button", "aria-label": `Reveal the secret of ${url}`,
      onclick: () => act(async () => {
        const shown = await api("GET", `/v1/webhook-endpoints/${endpoint.id}/secret`);
        secret.textContent = `Signing secret: ${shown.secret}`;
        secret.hidden = false;
      }),
    }, "Reveal secret"));
  }
  if (can("rotate_secret")) {
    actions.append(el("button", {
      type: "button", "aria-label": `Rotate the secret of ${url}`,
      onclick: () => act(async () => {
        const rotated = await api("POST", `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`);
        notice("Secret rotated; the old one keeps signing for a while.");
        if (rotated.secret) { secret.textContent = `Signing secret: ${rotated.secret}`; secret.hidden = false; }
      }),
    }, "Rotate secret"));
  }
  if (can("resend")) {
    const since = `recover-since-${endpoint.id}`;
    actions.append(el("form", {
      class: "recover",
      onsubmit: (event) => {
        event.preventDefault();
        act(async () => {
          const value = event.target.elements.since.value;
          const task = await api("POST", `/v1/webhook-endpoints/${endpoint.id}/recover`, { since: new Date(value).toISOString() });
          notice(`Recovering failed deliveries since ${value} (task ${task.task_id}).`);
        });
      },
    },
    el("label", { for: since }, `Recover ${url} since`,
      el("input", { id: since, name: "since", type: "datetime-local", required: true })),
    el("button", {}, "Recover")));
  }
  item.append(
    el("strong", {}, url),
    ...(endpoint.description ? [el("p", {}, endpoint.description)] : []),
    el("p", { class: "muted" }, `${status} · ${types} · health: ${endpoint.health.state}`),
    secret, actions);
  return item;
}

function editEndpoint(item, endpoint) {
  const form = el("form", {
    onsubmit: (event) => {
      event.preventDefault();
      act(async () => {
        await api("PATCH", `/v1/webhook-endpoints/${endpoint.id}`, {
          url: form.elements.url.value, description: form.elements.description.value,
          event_types: pickedTypes(form),
        });
        notice("Endpoint saved.");
        await loadEndpoints();
      });
    },
  },
  el("label", {}, `New URL for ${endpoint.url}`, el("input", { name: "url", type: "url", required: true, value: endpoint.url })),
  el("label", {}, `Description of ${endpoint.url}`, el("input", { name: "description", maxlength: "500", value: endpoint.description })),
  el("fieldset", { class: "types" }, el("legend", {}, "Event types"), el("div", { class: "type-picker" })),
  el("button", { class: "primary" }, "Save"));
  typePicker($(".type-picker", form), endpoint.event_types || [], `edit-${endpoint.id}`);
  item.append(form);
  form.elements.url.focus();
}

async function loadEndpoints() {
  const page = await api("GET", `/v1/webhook-endpoints${applicationQuery()}`);
  state.endpoints = Object.fromEntries(page.results.map((endpoint) => [endpoint.id, endpoint]));
  const list = $("#endpoint-list");
  list.replaceChildren(...page.results.map(endpointItem));
  if (!page.results.length) list.append(el("li", { class: "muted" }, "No endpoints yet."));
}

// --- Messages and attempts -----------------------------------------------------------------
function attemptsTable(rows) {
  const endpointUrl = (id) => (state.endpoints[id] ? state.endpoints[id].url : id);
  return el("div", { class: "table-wrap" }, el("table", {},
    el("caption", { class: "muted" }, "Attempts"),
    el("thead", {}, el("tr", {}, ["#", "Endpoint", "Outcome", "HTTP", "Why", "When"].map((name) => el("th", { scope: "col" }, name)))),
    el("tbody", {}, rows.map((row) => el("tr", { class: row.outcome === "delivered" ? "" : "failed" },
      el("td", {}, String(row.attempt)),
      el("td", {}, endpointUrl(row.endpoint_id)),
      el("td", {}, row.outcome),
      el("td", {}, row.http_status === null ? "–" : String(row.http_status)),
      el("td", {}, row.outcome === "delivered" ? "" : [row.error_category, row.error].filter(Boolean).join(": ")),
      el("td", {}, new Date(row.created_at).toLocaleString()))))));
}

function messageItem(message) {
  const item = el("li", { "data-message": message.id });
  const details = el("div", { class: "attempts" });
  const actions = el("div", { class: "actions" },
    el("button", {
      type: "button", "aria-label": `Attempts of ${message.event_type} ${message.id}`,
      onclick: () => act(async () => {
        const page = await api("GET", `/v1/messages/${message.id}/attempts`);
        details.replaceChildren(page.results.length ? attemptsTable(page.results) : el("p", { class: "muted" }, "No attempts yet."));
      }),
    }, "Attempts"));
  if (can("resend")) {
    for (const endpointId of message.endpoints) {
      const url = state.endpoints[endpointId] ? state.endpoints[endpointId].url : endpointId;
      actions.append(el("button", {
        type: "button", "aria-label": `Resend ${message.event_type} ${message.id} to ${url}`,
        onclick: () => act(async () => {
          await api("POST", `/v1/messages/${message.id}/endpoints/${endpointId}/resend`);
          notice(`Message resent to ${url}.`);
        }),
      }, `Resend to ${url}`));
    }
  }
  item.append(
    el("strong", {}, message.event_type),
    el("p", { class: "muted" }, `${new Date(message.created_at).toLocaleString()} · ${message.id}`),
    actions, details);
  return item;
}

function messagesPath(cursor) {
  if (cursor) return cursor;
  const form = $("#message-filter");
  const params = new URLSearchParams();
  if (form.elements.event_type.value) params.set("event_type", form.elements.event_type.value);
  if (form.elements.since.value) params.set("since", new Date(form.elements.since.value).toISOString());
  return `/v1/messages${applicationQuery(params)}`;
}

function inWindow(message) {
  const until = $("#message-filter").elements.until.value;
  return !until || new Date(message.created_at) < new Date(until);
}

async function loadMessages(cursor) {
  const page = await api("GET", messagesPath(cursor));
  const list = $("#message-list");
  const items = page.results.filter(inWindow).map(messageItem);
  if (cursor) list.append(...items); else list.replaceChildren(...items);
  if (!list.children.length) list.append(el("li", { class: "muted" }, "No messages."));
  state.next = page.next;
  $("#more-messages").hidden = !page.next;
}

// --- The tenant's console: an application picker --------------------------------------------
async function loadApplications() {
  try {
    const page = await api("GET", "/v1/applications");
    $("#application").append(...page.results.map((application) => el("option", { value: application.id }, `${application.name} (${application.uid})`)));
    $("#application-form").hidden = false;
  } catch (error) {
    if (error instanceof Expired) throw error;
    // Without an applications API to list, the console shows every endpoint and message.
  }
}

async function start() {
  state.token = takeToken();
  if (!state.token) return showExpired();
  await act(async () => {
    const caller = await api("GET", "/v1/portal-sessions/current");
    state.capabilities = new Set(caller.capabilities);
    state.tenantWide = caller.application_id === null;
    $("#who").textContent = state.tenantWide ? "The tenant's console: every application." : "Your webhook endpoints and the messages sent to them.";
    for (const node of document.querySelectorAll("[data-needs]")) node.hidden = !can(node.dataset.needs);
    $("#console").hidden = false;
    if (state.tenantWide) await loadApplications();
    await loadTypes();
    await loadEndpoints();
    await loadMessages();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("#endpoint-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    act(async () => {
      const body = {
        url: form.elements.url.value, description: form.elements.description.value,
        event_types: pickedTypes(form),
      };
      const created = await api("POST", `/v1/webhook-endpoints`, body);
      notice(`Endpoint ${created.url} added.`);
      form.reset();
      await loadEndpoints();
    });
  });
  $("#message-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    act(() => loadMessages());
  });
  $("#more-messages").addEventListener("click", () => act(() => loadMessages(state.next)));
  $("#application").addEventListener("change", () => act(async () => { await loadEndpoints(); await loadMessages(); }));
  start();
});

// The Tickwork example front end: plain DOM and fetch against the API on another origin.
//
// The session token lives in sessionStorage (this tab only, gone when it closes); the API's
// address and the CAPTCHA token in localStorage. Every API problem (RFC 9457) is shown with
// its title and detail; a request that gets no answer at all is shown as a network error,
// which is what a browser reports when the API does not allow this page's origin (CORS).
"use strict";

const DEFAULT_API = "http://localhost:8000";
// Turnstile's documented dummy answer: the demo's stand-in siteverify passes it.
const DEMO_CAPTCHA_TOKEN = "XXXX.DUMMY.TOKEN.XXXX";
const SESSION = "tickwork.session";
const TENANT = "tickwork.tenant";
const API = "tickwork.api";
const CAPTCHA = "tickwork.captcha";
const LINK_STEPS = {
  "/signup/verify": "signup",
  "/signin/verify": "signin",
  "/invitations/accept": "invitation",
};

const $ = (selector) => document.querySelector(selector);
const state = { link: null, me: null, tenant: null };

// --- Talking to the API ---------------------------------------------------------------

class ApiProblem extends Error {
  constructor(status, problem, retryAfter) {
    super((problem && problem.title) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.retryAfter = retryAfter;
  }
}

class NetworkError extends Error {}

function apiBase() {
  return (localStorage.getItem(API) || DEFAULT_API).replace(/\/+$/, "");
}

function session() {
  const saved = sessionStorage.getItem(SESSION);
  return saved ? JSON.parse(saved) : null;
}

// Calls the API; the answer's JSON (null for 204), or throws ApiProblem / NetworkError.
// `signedIn: false` sends no token (the public routes); `key` is an Idempotency-Key.
async function api(method, path, { body, key, signedIn = true } = {}) {
  const headers = {};
  const current = session();
  if (signedIn && current) headers.Authorization = `Bearer ${current.token}`;
  if (signedIn && state.tenant) headers["X-Tenant-ID"] = state.tenant.id;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key;
  let response;
  try {
    response = await fetch(apiBase() + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new NetworkError(
      `The API at ${apiBase()} did not answer. Is it running, and does its ` +
        `CORS_ALLOWED_ORIGINS allow this page's origin (${location.origin})?`,
    );
  }
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) throw new ApiProblem(response.status, data, response.headers.get("Retry-After"));
  return data;
}

// An Idempotency-Key per submission of `form`: kept while a request got no answer, so
// submitting again after a network error cannot do the thing twice.
function submissionKey(form) {
  if (!form.dataset.key) form.dataset.key = newKey();
  return form.dataset.key;
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// --- Showing what happened -----------------------------------------------------------

function notify(message) {
  $("#problem").hidden = true;
  $("#notice").textContent = message;
}

function showProblem(error) {
  const box = $("#problem");
  box.replaceChildren();
  const heading = el("h2", {}, "Something went wrong");
  if (error instanceof ApiProblem) {
    const { title, detail, errors } = error.problem;
    heading.textContent = `${title || "Error"} (HTTP ${error.status})`;
    if (detail) box.append(heading, el("p", {}, detail));
    else box.append(heading);
    if (errors) {
      const list = el("ul");
      for (const [field, messages] of Object.entries(errors)) {
        list.append(el("li", {}, `${field}: ${[].concat(messages).join(" ")}`));
      }
      box.append(list);
    }
    if (error.retryAfter) box.append(el("p", {}, `Try again in ${error.retryAfter} seconds.`));
  } else if (error instanceof NetworkError) {
    heading.textContent = "Network error";
    box.append(heading, el("p", {}, error.message));
  } else {
    box.append(heading, el("p", {}, String(error)));
  }
  $("#notice").textContent = "";
  box.hidden = false;
  box.focus();
}

function el(tag, attributes = {}, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

// Runs `work` for a form or button, disabled meanwhile; a problem is shown, and an expired
// or revoked session signs the page out.
async function act(control, work) {
  control.disabled = true;
  control.setAttribute("aria-busy", "true");
  try {
    await work();
  } catch (error) {
    if (error instanceof ApiProblem && error.status === 401 && session()) forgetSession();
    if (!(error instanceof NetworkError) && control.dataset) delete control.dataset.key;
    showProblem(error);
    render();
  } finally {
    control.disabled = false;
    control.removeAttribute("aria-busy");
  }
}

// --- Session -----------------------------------------------------------------------

function keepSession(answer) {
  sessionStorage.setItem(SESSION, JSON.stringify({ token: answer.token, expires_at: answer.expires_at }));
}

function forgetSession() {
  sessionStorage.removeItem(SESSION);
  state.me = null;
  state.tenant = null;
}

async function loadAccount() {
  state.tenant = null; // /v1/me names no tenant
  state.me = await api("GET", "/v1/me");
  const wanted = sessionStorage.getItem(TENANT);
  state.tenant = state.me.tenants.find((t) => t.id === wanted) || state.me.tenants[0] || null;
  if (state.tenant) await loadTeam();
}

async function loadTeam() {
  const [projects, members, invitations] = await Promise.all([
    api("GET", "/v1/projects"),
    api("GET", "/v1/members"),
    state.tenant.role === "owner" ? api("GET", "/v1/invitations?status=pending") : null,
  ]);
  state.projects = projects.results;
  state.members = members.results;
  state.invitations = invitations ? invitations.results : [];
}

// --- Rendering -----------------------------------------------------------------------

function render() {
  const signedIn = Boolean(session() && state.me);
  $("#signed-in").hidden = !signedIn || Boolean(state.link);
  $("#signed-out").hidden = signedIn || Boolean(state.link);
  $("#link-step").hidden = !state.link;
  $("#who").textContent = signedIn
    ? `Signed in as ${state.me.email}` + (state.tenant ? ` · ${state.tenant.name} (${state.tenant.role})` : "")
    : "Signed out.";
  if (signedIn) renderTeam();
}

function renderTeam() {
  const tenant = state.tenant;
  $("#team").textContent = tenant
    ? `${tenant.name} — you are ${tenant.role === "owner" ? "an owner" : "a member"}. ` +
      `Your session ends ${when(session().expires_at)}.`
    : "You belong to no team yet.";
  const select = $("#tenant-form select");
  select.replaceChildren(...state.me.tenants.map((t) => el("option", { value: t.id }, t.name)));
  if (tenant) select.value = tenant.id;
  $("#tenant-form").hidden = state.me.tenants.length < 2;
  $("#invite-section").hidden = !tenant || tenant.role !== "owner";
  if (!tenant) return;

  $("#projects").replaceChildren(...state.projects.map(projectItem));
  if (!state.projects.length) $("#projects").append(el("li", { class: "muted" }, "No projects yet."));
  $("#members").replaceChildren(
    ...state.members.map((m) => row(m.email, m.role, when(m.joined_at))),
  );
  $("#invitations").replaceChildren(
    ...state.invitations.map((i) => row(i.email, i.role, `${i.status}, until ${when(i.expires_at)}`)),
  );
  if (!state.invitations.length) $("#invitations").append(row("No pending invitations.", "", ""));
}

function row(...cells) {
  const tr = el("tr");
  tr.append(...cells.map((text) => el("td", {}, text)));
  return tr;
}

function projectItem(project) {
  const item = el("li");
  item.append(el("strong", {}, project.name), el("span", { class: "muted" }, ` · ${project.status}`));
  const form = el("form", { "data-project": project.id });
  const input = el("input", { name: "name", required: "", maxlength: "200", value: project.name });
  const label = el("label", {}, `New name for ${project.name}`);
  label.append(input);
  form.append(label, el("button", {}, "Rename"));
  if (state.tenant.role === "owner") {
    form.append(el("button", { type: "button", "data-delete": project.id }, `Delete ${project.name}`));
  }
  item.append(form);
  return item;
}

// --- Steps opened from an emailed link ---------------------------------------------------

async function openLink() {
  const kind = LINK_STEPS[location.pathname];
  const token = new URLSearchParams(location.search).get("token");
  if (!kind) return;
  if (!token) {
    showProblem(new Error("This link has no token: open the whole link from the e-mail."));
    return leaveLink();
  }
  state.link = { kind, token };
  const text = {
    signup: ["Confirm your signup", "Create your team and sign in.", "Create my team"],
    signin: ["Finish signing in", "This link signs you in once, within 15 minutes.", "Sign in"],
    invitation: ["You are invited", "Reading the invitation…", "Accept invitation"],
  }[kind];
  [$("#link-heading").textContent, $("#link-text").textContent, $("#link-go").textContent] = text;
  render();
  if (kind !== "invitation") return;
  try {
    // What the invitation opens, without using it up.
    const preview = await api("POST", "/v1/invitations/preview", { body: { token }, signedIn: false });
    $("#link-text").textContent =
      `${preview.invited_by || "An owner"} invites ${preview.email} to join ` +
      `${preview.tenant_name} as ${preview.role}. The invitation ends ${when(preview.expires_at)}.`;
  } catch (error) {
    showProblem(error);
    leaveLink();
  }
}

function leaveLink() {
  state.link = null;
  history.replaceState(null, "", "/");
  render();
}

async function followLink() {
  const { kind, token } = state.link;
  const path = { signup: "/v1/signup/verify", signin: "/v1/signin/verify", invitation: "/v1/invitations/accept" }[kind];
  let answer;
  try {
    answer = await api("POST", path, { body: { token }, signedIn: false });
  } catch (error) {
    if (error instanceof ApiProblem && error.status === 400) leaveLink(); // a dead link
    throw error;
  }
  if (session()) await signOut({ quietly: true });
  keepSession(answer);
  if (answer.tenant_id) sessionStorage.setItem(TENANT, answer.tenant_id);
  leaveLink();
  await loadAccount();
  notify(
    { signup: "Your team is ready.", signin: "You are signed in.", invitation: `You joined ${state.tenant.name}.` }[kind],
  );
  render();
}

async function signOut({ quietly = false } = {}) {
  try {
    await api("DELETE", "/v1/tokens/current");
  } catch (error) {
    if (!quietly && !(error instanceof ApiProblem && error.status === 401)) throw error;
  }
  forgetSession();
  sessionStorage.removeItem(TENANT);
}

// --- Forms -------------------------------------------------------------------------

function captchaToken() {
  return localStorage.getItem(CAPTCHA) || DEMO_CAPTCHA_TOKEN;
}

function on(selector, handler) {
  $(selector).addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    act(form, () => handler(form, new FormData(form)));
  });
}

on("#signup-form", async (form, data) => {
  await api("POST", "/v1/signup", {
    body: { email: data.get("email"), tenant_name: data.get("tenant_name"), captcha_token: captchaToken() },
    key: submissionKey(form),
    signedIn: false,
  });
  delete form.dataset.key;
  form.reset();
  notify(`Check ${data.get("email")} for a link to confirm your signup (the demo prints it under tick |).`);
});

on("#signin-form", async (form, data) => {
  await api("POST", "/v1/signin", {
    body: { email: data.get("email"), captcha_token: captchaToken() },
    key: submissionKey(form),
    signedIn: false,
  });
  delete form.dataset.key;
  notify(`If ${data.get("email")} has an account, a sign-in link is on its way (the demo prints it under tick |).`);
});

on("#project-form", async (form, data) => {
  const project = await api("POST", "/v1/projects", { body: { name: data.get("name") }, key: submissionKey(form) });
  delete form.dataset.key;
  form.reset();
  await loadTeam();
  notify(`Project ${project.name} created.`);
  render();
});

$("#projects").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  act(form, async () => {
    const name = new FormData(form).get("name");
    const project = await api("PATCH", `/v1/projects/${form.dataset.project}`, { body: { name } });
    await loadTeam();
    notify(`Project renamed to ${project.name}.`);
    render();
  });
});

$("#projects").addEventListener("click", (event) => {
  const id = event.target.dataset.delete;
  if (!id) return;
  act(event.target, async () => {
    await api("DELETE", `/v1/projects/${id}`);
    await loadTeam();
    notify("Project deleted.");
    render();
  });
});

on("#invite-form", async (form, data) => {
  const invitation = await api("POST", "/v1/invitations", {
    body: { email: data.get("email"), role: data.get("role") },
    key: submissionKey(form),
  });
  delete form.dataset.key;
  form.reset();
  await loadTeam();
  notify(`Invitation sent to ${invitation.email} (the demo prints its link under tick |).`);
  render();
});

on("#tenant-form", async (form, data) => {
  sessionStorage.setItem(TENANT, data.get("tenant"));
  await loadAccount();
  render();
});

on("#settings-form", async (form, data) => {
  localStorage.setItem(API, data.get("api"));
  localStorage.setItem(CAPTCHA, data.get("captcha"));
  notify(`Settings saved: the API is ${apiBase()}.`);
});

$("#signout").addEventListener("click", (event) => {
  act(event.target, async () => {
    await signOut();
    notify("You are signed out.");
    render();
  });
});

$("#link-go").addEventListener("click", (event) => act(event.target, followLink));
$("#link-cancel").addEventListener("click", leaveLink);

// --- Start ----------------------------------------------------------------------------

async function start() {
  const query = new URLSearchParams(location.search);
  if (query.get("api")) {
    // `?api=` names the API once (manage.py demo prints it when the API is not on :8000).
    localStorage.setItem(API, query.get("api"));
    query.delete("api");
    const rest = query.toString();
    history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : ""));
  }
  $("#settings-form").api.value = apiBase();
  $("#settings-form").captcha.value = captchaToken();
  render();
  if (session()) {
    await act($("#signout"), async () => {
      await loadAccount();
      render();
    });
  }
  await openLink();
}

start();

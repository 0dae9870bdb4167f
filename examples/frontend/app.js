// The Tickwork example front end: plain DOM and fetch against the API on another origin.
//
// The session token lives in localStorage with its expiry, so every tab of this browser shares
// it (an e-mailed link opened in a new tab is signed in); it is dropped once past its expiry,
// on sign out and on a 401. The API's address and the CAPTCHA token live there too. Every API
// problem (RFC 9457) is shown with its title and detail; a request that gets no answer at all
// is shown as a network error, which is what a browser reports when the API does not allow
// this page's origin (CORS).
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
// Following a job or the pending invitations: the first look after half a second, each wait
// twice the last, never more than 8 seconds, and nobody follows for more than 10 minutes.
const FIRST_POLL_MS = 500;
const LONGEST_POLL_MS = 8000;
const FOLLOW_FOR_MS = 10 * 60 * 1000;
const FINISHED_JOB_STATUSES = ["completed", "dead_lettered"];

const $ = (selector) => document.querySelector(selector);
const state = {
  link: null,
  me: null,
  tenant: null,
  projects: [],
  members: [],
  invitations: [],
  tokens: [],
  // The destructive action waiting for its "Confirm" click, e.g. "delete-project:<id>".
  confirming: null,
  // Bumped whenever the account or team shown changes: a poll of an older one stops.
  epoch: 0,
  followedProjects: new Set(),
  followingInvitations: false,
};

// --- Talking to the API ---------------------------------------------------------------

class ApiProblem extends Error {
  constructor(status, problem, retryAfter) {
    super((problem && problem.title) || `The API answered HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.retryAfter = retryAfter;
  }
}

class NetworkError extends Error {}

function apiBase() {
  return (localStorage.getItem(API) || DEFAULT_API).replace(/\/+$/, "");
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

// --- Following what the API finishes later -------------------------------------------

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Calls `look` with a growing pause before each call (see FIRST_POLL_MS) until it answers
// something other than undefined; undefined when the page moved on to another account or
// team, or after FOLLOW_FOR_MS.
async function pollWithBackoff(look) {
  const epoch = state.epoch;
  const giveUpAt = Date.now() + FOLLOW_FOR_MS;
  let wait = FIRST_POLL_MS;
  while (Date.now() < giveUpAt) {
    await pause(wait);
    if (epoch !== state.epoch) return undefined;
    try {
      const found = await look();
      if (epoch !== state.epoch) return undefined;
      if (found !== undefined) return found;
    } catch (error) {
      if (!(error instanceof NetworkError)) throw error; // no answer this time: look again
    }
    wait = Math.min(wait * 2, LONGEST_POLL_MS);
  }
  return undefined;
}

// A new project is provisioned by a job (the create answers 202 with it): follow the job
// until it finishes, then show the project as the API has it, active or failed.
async function followProvisioning(project) {
  const followed = `${state.epoch}:${project.id}`;
  if (project.status !== "provisioning" || !project.job || state.followedProjects.has(followed)) return;
  state.followedProjects.add(followed);
  try {
    const job = await pollWithBackoff(async () => {
      const current = await api("GET", `/v1/jobs/${project.job.id}`);
      return FINISHED_JOB_STATUSES.includes(current.status) ? current : undefined;
    });
    if (!job) return;
    const provisioned = await api("GET", `/v1/projects/${project.id}`);
    provisioned.failure = job.status === "dead_lettered" ? job.last_error : null;
    state.projects = state.projects.map((p) => (p.id === provisioned.id ? provisioned : p));
    showProjectStatus(provisioned);
  } catch (error) {
    // 404: the project was deleted meanwhile, and its job with it.
    if (!(error instanceof ApiProblem && error.status === 404)) backgroundProblem(error);
  } finally {
    state.followedProjects.delete(followed);
  }
}

// While invitations are pending, an owner's page looks for them to be accepted (or revoked
// or expired elsewhere) and then shows the members and invitations anew.
async function followInvitations() {
  if (state.followingInvitations || !isOwner() || !state.invitations.length) return;
  state.followingInvitations = true;
  const epoch = state.epoch;
  let changed = false;
  try {
    const seen = state.invitations.map((i) => i.id).join();
    const pending = await pollWithBackoff(async () => {
      const answer = await api("GET", "/v1/invitations?status=pending");
      return answer.results.map((i) => i.id).join() === seen ? undefined : answer.results;
    });
    if (pending) {
      state.members = (await api("GET", "/v1/members")).results;
      state.invitations = pending;
      renderMembers();
      renderInvitations();
      changed = true;
    }
  } catch (error) {
    backgroundProblem(error);
  } finally {
    state.followingInvitations = false;
  }
  // Another team's (or a new) list may have been loaded meanwhile: follow that one now.
  if (changed || epoch !== state.epoch) followInvitations();
}

function followWhatIsUnfinished() {
  state.projects.forEach(followProvisioning);
  followInvitations();
}

// A problem met while following: a revoked or expired session signs the page out.
function backgroundProblem(error) {
  if (error instanceof ApiProblem && error.status === 401) forgetSession();
  showProblem(error);
  render();
}

// --- Showing what happened -----------------------------------------------------------

function notify(message) {
  $("#problem").hidden = true;
  $("#notice").textContent = message;
}

function clearNotices() {
  $("#problem").hidden = true;
  $("#notice").textContent = "";
}

function showProblem(error) {
  const box = $("#problem");
  box.replaceChildren();
  const heading = el("h2", {}, "Something went wrong");
  if (error instanceof ApiProblem) {
    const { title, detail, errors } = error.problem;
    heading.textContent = title || `The API answered HTTP ${error.status}`;
    box.append(heading);
    if (detail) box.append(el("p", {}, detail));
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

// "2026-12-07 20:05 CET": the browser's own zone, named, so a time is never ambiguous.
const DATE_PARTS = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "2-digit",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  hourCycle: "h23",
  timeZoneName: "short",
});

function whenText(iso) {
  const parts = {};
  for (const { type, value } of DATE_PARTS.formatToParts(new Date(iso))) parts[type] = value;
  return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute} ${parts.timeZoneName}`;
}

function when(iso) {
  return iso ? el("time", { datetime: iso }, whenText(iso)) : "";
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

// The session this browser keeps, or null; one past its expiry is dropped here.
function session() {
  let saved = null;
  try {
    saved = JSON.parse(localStorage.getItem(SESSION));
  } catch (error) {
    saved = null; // not ours: dropped below
  }
  if (saved && saved.token && Date.parse(saved.expires_at) > Date.now()) return saved;
  if (localStorage.getItem(SESSION) !== null) localStorage.removeItem(SESSION);
  return null;
}

function keepSession(answer) {
  localStorage.setItem(SESSION, JSON.stringify({ token: answer.token, expires_at: answer.expires_at }));
}

function forgetSession() {
  localStorage.removeItem(SESSION);
  localStorage.removeItem(TENANT);
  state.me = null;
  state.tenant = null;
  state.epoch += 1;
}

function isOwner() {
  return Boolean(state.tenant && state.tenant.role === "owner");
}

async function loadAccount() {
  state.epoch += 1;
  state.confirming = null;
  state.tenant = null; // /v1/me names no tenant
  state.me = await api("GET", "/v1/me");
  const wanted = localStorage.getItem(TENANT);
  state.tenant = state.me.tenants.find((t) => t.id === wanted) || state.me.tenants[0] || null;
  state.tokens = (await api("GET", "/v1/tokens")).results;
  if (state.tenant) await loadTeam();
}

async function loadTeam() {
  const [projects, members, invitations] = await Promise.all([
    api("GET", "/v1/projects"),
    api("GET", "/v1/members"),
    isOwner() ? api("GET", "/v1/invitations?status=pending") : null,
  ]);
  state.projects = projects.results;
  state.members = members.results;
  state.invitations = invitations ? invitations.results : [];
  followWhatIsUnfinished();
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
  if (signedIn) renderAccount();
}

function renderAccount() {
  const tenant = state.tenant;
  const team = $("#team");
  team.replaceChildren();
  if (tenant) {
    team.append(`${tenant.name} — you are ${isOwner() ? "an owner" : "a member"}. Your session ends `);
    team.append(when(session().expires_at), ".");
  } else {
    team.append("You belong to no team yet.");
  }
  const select = $("#tenant-form select");
  select.replaceChildren(...state.me.tenants.map((t) => el("option", { value: t.id }, t.name)));
  if (tenant) select.value = tenant.id;
  $("#tenant-form").hidden = state.me.tenants.length < 2;
  $("#leave").replaceChildren(...(tenant ? [leaveButton(tenant)] : []));
  $("#team-sections").hidden = !tenant;
  $("#invite-section").hidden = !isOwner();
  $("#portal-link").href = `${apiBase()}/portal/`;
  $("#portal-link").textContent = `${apiBase()}/portal/`;
  renderTokens();
  if (!tenant) return;
  renderProjects();
  renderMembers();
  renderInvitations();
}

function renderProjects() {
  $("#projects").replaceChildren(...state.projects.map(projectItem));
  if (!state.projects.length) $("#projects").append(el("li", { class: "muted" }, "No projects yet."));
}

function renderMembers() {
  $("#members").replaceChildren(...state.members.map(memberRow));
  $("#members-actions-heading").hidden = !isOwner();
}

function renderInvitations() {
  $("#invitations").replaceChildren(...state.invitations.map(invitationRow));
  if (!state.invitations.length) {
    $("#invitations").append(row([["Invited", "No pending invitations."]]));
  }
}

function renderTokens() {
  $("#tokens").replaceChildren(...state.tokens.map(tokenRow));
}

// A table row of [label, content] cells; the label shows beside the content on a narrow
// screen, where the table's header is hidden (see index.html).
function row(cells) {
  const tr = el("tr");
  for (const [label, ...content] of cells) {
    const td = el("td", { "data-label": label });
    td.append(...content);
    tr.append(td);
  }
  return tr;
}

function projectItem(project) {
  const item = el("li", { "data-project": project.id });
  item.append(el("strong", {}, project.name), " · ", el("span", { class: "status" }));
  fillProjectStatus(item, project);
  const form = el("form", { "data-project": project.id });
  const input = el("input", { name: "name", required: "", maxlength: "200", value: project.name });
  const label = el("label", {}, `New name for ${project.name}`);
  label.append(input);
  form.append(label, el("button", {}, "Rename"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    act(form, () => renameProject(project, new FormData(form).get("name")));
  });
  if (isOwner()) {
    form.append(
      ...confirmable({
        key: `delete-project:${project.id}`,
        label: `Delete ${project.name}`,
        confirmLabel: `Confirm delete ${project.name}`,
        action: () => deleteProject(project),
      }),
    );
  }
  item.append(form);
  return item;
}

function fillProjectStatus(item, project) {
  const status = item.querySelector(".status");
  status.textContent = project.status;
  status.dataset.status = project.status;
  item.querySelector(".failure")?.remove();
  if (project.failure) status.after(el("span", { class: "failure muted" }, ` (${project.failure})`));
}

// Only the status changes, so whatever is typed in the item's rename field stays.
function showProjectStatus(project) {
  const item = [...$("#projects").children].find((li) => li.dataset.project === project.id);
  if (item) fillProjectStatus(item, project);
}

function memberRow(member) {
  const you = state.me.email === member.email;
  const cells = [
    ["E-mail", member.email + (you ? " (you)" : "")],
    ["Role", member.role],
    ["Joined", when(member.joined_at)],
  ];
  if (isOwner()) cells.push(["Actions", ...(you ? [] : memberControls(member))]);
  return row(cells);
}

function memberControls(member) {
  const form = el("form", { class: "inline" });
  const select = el("select", { name: "role", "aria-label": `Role of ${member.email}` });
  select.append(...["member", "owner"].map((role) => el("option", { value: role }, role)));
  select.value = member.role;
  form.append(select, el("button", {}, `Change role of ${member.email}`));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    act(form, () => changeRole(member, select.value));
  });
  const remove = confirmable({
    key: `remove-member:${member.user_id}`,
    label: `Remove ${member.email}`,
    confirmLabel: `Confirm remove ${member.email}`,
    action: () => removeMember(member),
  });
  return [form, ...remove];
}

function invitationRow(invitation) {
  return row([
    ["Invited", invitation.email],
    ["Role", invitation.role],
    ["Status", `${invitation.status}, until `, when(invitation.expires_at)],
    [
      "Actions",
      ...confirmable({
        key: `revoke-invitation:${invitation.id}`,
        label: `Revoke invitation to ${invitation.email}`,
        confirmLabel: `Confirm revoke invitation to ${invitation.email}`,
        action: () => revokeInvitation(invitation),
      }),
    ],
  ]);
}

function tokenRow(token) {
  const current = session().token.startsWith(token.prefix);
  return row([
    ["Name", token.name + (current ? " (this browser's session)" : "")],
    ["Starts", `${token.prefix}…`],
    ["Last used", token.last_used_at ? when(token.last_used_at) : "never"],
    ["Ends", token.expires_at ? when(token.expires_at) : "never"],
    [
      "Actions",
      // This session ends with "Sign out", which also leaves the page signed out.
      ...(current
        ? []
        : confirmable({
            key: `revoke-token:${token.id}`,
            label: `Revoke token ${token.name}`,
            confirmLabel: `Confirm revoke token ${token.name}`,
            action: () => revokeToken(token),
          })),
    ],
  ]);
}

function leaveButton(tenant) {
  const controls = confirmable({
    key: `leave:${tenant.id}`,
    label: `Leave ${tenant.name}`,
    confirmLabel: `Confirm leave ${tenant.name}`,
    action: () => leaveTeam(tenant),
  });
  const group = el("span");
  group.append(...controls);
  return group;
}

// A destructive action as two steps: its button asks, a "Confirm …" button in its place
// does it, and "Cancel" puts the first button back.
function confirmable({ key, label, confirmLabel, action }) {
  if (state.confirming !== key) {
    const ask = el("button", { type: "button", class: "danger" }, label);
    ask.addEventListener("click", () => {
      state.confirming = key;
      render();
      document.querySelector(`[data-confirm="${CSS.escape(key)}"]`)?.focus();
    });
    return [ask];
  }
  const confirm = el("button", { type: "button", class: "danger", "data-confirm": key }, confirmLabel);
  confirm.addEventListener("click", () =>
    act(confirm, async () => {
      state.confirming = null;
      await action();
    }),
  );
  const cancel = el("button", { type: "button" }, "Cancel");
  cancel.addEventListener("click", () => {
    state.confirming = null;
    render();
  });
  return [confirm, cancel];
}

// --- Team actions --------------------------------------------------------------------

async function renameProject(project, name) {
  const renamed = await api("PATCH", `/v1/projects/${project.id}`, { body: { name } });
  await loadTeam();
  notify(`Project renamed to ${renamed.name}.`);
  render();
}

async function deleteProject(project) {
  await api("DELETE", `/v1/projects/${project.id}`);
  await loadTeam();
  notify(`Project ${project.name} deleted.`);
  render();
}

async function changeRole(member, role) {
  const changed = await api("PATCH", `/v1/members/${member.user_id}`, { body: { role } });
  await loadTeam();
  notify(`${changed.email} is now ${changed.role === "owner" ? "an owner" : "a member"}.`);
  render();
}

async function removeMember(member) {
  await api("DELETE", `/v1/members/${member.user_id}`);
  await loadTeam();
  notify(`${member.email} was removed from ${state.tenant.name}.`);
  render();
}

async function revokeInvitation(invitation) {
  await api("DELETE", `/v1/invitations/${invitation.id}`);
  await loadTeam();
  notify(`The invitation to ${invitation.email} is revoked.`);
  render();
}

async function revokeToken(token) {
  await api("DELETE", `/v1/tokens/${token.id}`);
  state.tokens = (await api("GET", "/v1/tokens")).results;
  notify(`Token ${token.name} is revoked.`);
  render();
}

async function leaveTeam(tenant) {
  const mine = state.members.find((m) => m.email === state.me.email);
  await api("DELETE", `/v1/members/${mine ? mine.user_id : state.me.id}`);
  localStorage.removeItem(TENANT);
  await loadAccount();
  notify(`You left ${tenant.name}.`);
  render();
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
    $("#link-text").replaceChildren(
      `${preview.invited_by || "An owner"} invites ${preview.email} to join ` +
        `${preview.tenant_name} as ${preview.role}. The invitation ends `,
      when(preview.expires_at),
      ".",
    );
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
  if (answer.tenant_id) localStorage.setItem(TENANT, answer.tenant_id);
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
  clearNotices(); // what they said was about the team shown until now
  localStorage.setItem(TENANT, data.get("tenant"));
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

// Another tab of this browser signed in or out: this one follows.
window.addEventListener("storage", (event) => {
  if (event.key !== SESSION && event.key !== null) return;
  if (!session()) {
    forgetSession();
    render();
    return;
  }
  act($("#signout"), async () => {
    await loadAccount();
    render();
  });
});

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

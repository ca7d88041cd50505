// The dashboard's helpers: building DOM nodes without markup strings (names and paths from
// the cluster are never parsed as HTML), number formatting, and the one fetch wrapper that
// adds the API key kept in session storage.

const kKeyStorage = "cohort.apiKey";

// h("div", {class: "x", onclick: f}, child, "text", [more]) -> an element.
export function h(tag, attrs, ...children) {
  const el = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces `container`'s children, keeping the keyboard focus on the element with the same
// data-key (the page re-renders every second; focus must not jump away).
// Nothing is replaced when the new children render the same, so an idle page does not churn
// (a click between mousedown and mouseup on a replaced button would be lost).
export function replaceKeepingFocus(container, ...children) {
  const fresh = container.cloneNode(false);
  append(fresh, children);
  if (fresh.innerHTML === container.innerHTML) return;
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute("data-key") : null;
  container.replaceChildren(...fresh.childNodes);
  if (key) {
    const again = container.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

const kUnits = ["B", "KiB", "MiB", "GiB", "TiB"];
export function bytes(n) {
  if (!(n >= 0)) return "–";
  let i = 0;
  while (n >= 1024 && i < kUnits.length - 1) { n /= 1024; ++i; }
  return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${kUnits[i]}`;
}

// 1.2e9 -> "1.2 G" (+ unit).
export function si(n, unit) {
  if (!(n > 0)) return "–";
  const prefixes = ["", "k", "M", "G", "T", "P"];
  let i = 0;
  while (n >= 1000 && i < prefixes.length - 1) { n /= 1000; ++i; }
  return `${n >= 100 ? n.toFixed(0) : n.toFixed(1)} ${prefixes[i]}${unit}`;
}

export function micros(us) {
  if (!(us > 0)) return "–";
  return us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(0)} µs`;
}

export function apiKey() { return sessionStorage.getItem(kKeyStorage) || ""; }
export function setApiKey(key) {
  if (key) sessionStorage.setItem(kKeyStorage, key);
  else sessionStorage.removeItem(kKeyStorage);
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// fetch with the key; JSON bodies in and out. Throws ApiError with the server's message.
export async function api(path, {method = "GET", body, signal, raw = false} = {}) {
  const headers = {};
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body)});
  if (raw) {
    if (!res.ok) throw new ApiError(res.status, await errorText(res));
    return res;
  }
  if (!res.ok) throw new ApiError(res.status, await errorText(res));
  const type = res.headers.get("Content-Type") || "";
  return type.includes("json") ? res.json() : res.text();
}

async function errorText(res) {
  const text = await res.text();
  try {
    const j = JSON.parse(text);
    if (j.error && j.error.message) return `${res.status}: ${j.error.message}`;
  } catch (_) { /* not JSON */ }
  return `${res.status}: ${text.slice(0, 200) || res.statusText}`;
}

// Prometheus text -> {name: value} for unlabelled samples.
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*) (\S+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

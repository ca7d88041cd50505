// The dashboard's main loop: polls GET /v1/cluster every second (and /metrics of each ready
// instance), redraws the topology and the instances, and wires the API-key field, the place
// form and the chat panel. A node without instances (`cohort node`) shows its membership only.
import {api, apiKey, setApiKey, ApiError} from "./util.js";
import {drawGraph, drawNodeTable} from "./topology.js";
import {drawInstances, fetchLive} from "./instances.js";
import {setupPlace, drawModelList} from "./place.js";
import {setupChat, drawChatInstances} from "./chat.js";

const kPollMs = 1000;

const $ = (id) => document.getElementById(id);

function status(text, bad = false) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("bad", bad);
}

function connection(text, ok) {
  const el = $("connection");
  el.textContent = text;
  el.setAttribute("data-ok", ok ? "true" : "false");
}

let timer = null;
async function poll() {
  clearTimeout(timer);
  try {
    const cluster = await api("/v1/cluster");
    const members = cluster.members || [];
    const alive = members.filter((m) => m.state === "alive").length;
    const self = members.find((m) => m.self);
    connection(`${self ? self.name : "?"}: ${alive} of ${members.length} nodes alive · state v${cluster.state.version}`, true);
    const links = drawGraph($("graph"), members);
    $("graph").setAttribute("data-nodes", members.length);
    $("graph").setAttribute("data-links", links);
    drawNodeTable($("nodes"), members);
    const hasInstances = Array.isArray(cluster.instances);
    for (const id of ["instances-section", "place-section", "chat-section"]) $(id).hidden = !hasInstances;
    if (hasInstances) {
      const live = await fetchLive(cluster.instances);
      drawInstances($("instances"), cluster.instances, live, status, poll);
      drawModelList($("models-list"), cluster.state);
      drawChatInstances($("chat-instance"), cluster.instances);
    }
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      connection("this node wants an API key: enter it above", false);
      $("api-key").focus();
    } else {
      connection(`cannot reach this node: ${e.message}`, false);
    }
  }
  timer = setTimeout(poll, kPollMs);
}

function setupKey() {
  const input = $("api-key");
  input.value = apiKey();
  $("key-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setApiKey(input.value.trim());
    status(input.value.trim() ? "API key kept for this tab" : "API key cleared");
    poll();
  });
}

setupKey();
setupPlace(status, poll);
setupChat(status);
poll();

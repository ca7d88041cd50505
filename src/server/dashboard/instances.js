// The instances: one card per instance of GET /v1/cluster (state, plan, predicted and live
// tokens/s, queue and slots from /metrics?model=ID), its shard plan drawn per node (layers,
// heads, FFN columns, experts and vocabulary rows as bars over the model's extent, weight and
// KV bytes), and its Rebalance and Remove buttons.
import {h, bytes, api, parseMetrics, replaceKeepingFocus} from "./util.js";

// A bar: the range [begin, end) of `total`, as an SVG strip with a caption.
function bar(range, total, caption) {
  if (!range || !(total > 0) || range[1] <= range[0]) return h("td", {class: "muted"}, "–");
  const w = 84;
  const x = (range[0] / total) * w, width = Math.max(1.5, ((range[1] - range[0]) / total) * w);
  return h("td", {class: "bar-cell"},
    h("svg:svg", {class: "bar", viewBox: `0 0 ${w} 10`, width: w, height: 10, "aria-hidden": "true"},
      h("svg:rect", {class: "bar-bg", x: 0, y: 0, width: w, height: 10}),
      h("svg:rect", {class: "bar-fg", x, y: 0, width, height: 10})),
    h("span", {class: "bar-caption"}, caption));
}

function memory(r) {
  return h("td", {class: "num"}, `weights ${bytes(r.weight_bytes)}`, h("br", {}), `KV ${bytes(r.kv_bytes)}`);
}

function span(range) { return range ? `${range[0]}–${range[1]}` : "–"; }
function share(range, total) {
  return range && total > 0 ? `${(((range[1] - range[0]) / total) * 100).toFixed(1)}%` : "–";
}

function planTable(inst) {
  const plan = inst.shard_plan;
  const ranks = inst.ranks || [];
  if (!ranks.length) return null;
  const rows = [];
  if (!plan || !plan.stages) {
    const r = ranks[0];
    rows.push(h("tr", {"data-node": r.name},
      h("td", {}, "0"), h("th", {scope: "row"}, r.name),
      h("td", {colspan: 5}, "the whole model"), memory(r)));
  } else {
    const s = plan.shape;
    for (const stage of plan.stages) {
      for (const rk of stage.ranks) {
        const r = ranks[rk.rank] || {name: "?"};
        rows.push(h("tr", {"data-node": r.name, "data-rank": rk.rank},
          h("td", {}, rk.rank), h("th", {scope: "row"}, r.name),
          bar(stage.layers, s.n_layer, `layers ${span(stage.layers)} of ${s.n_layer}`),
          bar(rk.q_heads, s.n_head, `heads ${span(rk.q_heads)} (kv ${span(rk.kv_heads)})`),
          bar(rk.ff_cols, s.n_ff, `ffn ${span(rk.ff_cols)}`),
          s.n_expert > 0 ? bar(rk.experts, s.n_expert, `experts ${span(rk.experts)}`) : h("td", {class: "muted"}, "dense"),
          bar(rk.output_rows, s.n_vocab, `vocab ${share(rk.output_rows, s.n_vocab)}`),
          memory(r)));
      }
    }
  }
  return h("div", {class: "scroll"}, h("table", {class: "plan", "data-instance": inst.id},
    h("caption", {}, `Plan ${inst.plan || ""} on ${ranks.length} node${ranks.length === 1 ? "" : "s"}`),
    h("thead", {}, h("tr", {},
      ["Rank", "Node", "Layers", "Heads", "FFN", "Experts", "Vocabulary", "Memory"].map((c) => h("th", {scope: "col"}, c)))),
    h("tbody", {}, rows)));
}

function figure(label, value) {
  return h("div", {class: "figure"}, h("span", {class: "figure-label"}, label), h("span", {class: "figure-value"}, value));
}

// While an instance waits for its placement or loads: a bar of its bytes (shares streamed and
// read from disk, every node together), the rate and time left, and a line per node.
function loading(p) {
  if (!p) return null;
  const pct = p.percent || 0;
  const left = p.eta_s === null || p.eta_s === undefined ? "" : `, ${Math.ceil(p.eta_s)} s left`;
  const caption = p.phase === "placement" ? "waiting for a placement"
    : `${p.phase} ${pct.toFixed(1)}% · ${bytes(p.bytes_done)} of ${bytes(p.bytes_total)} · ${bytes(p.rate_bytes_per_s)}/s${left}`;
  return h("div", {class: "loading", "data-phase": p.phase, "data-percent": pct},
    h("progress", {class: "load-bar", max: 100, value: pct, "aria-label": `loading ${pct.toFixed(0)}%`}),
    h("span", {class: "load-caption"}, caption),
    (p.nodes || []).length > 1 ? h("ul", {class: "load-nodes"}, p.nodes.map((n) =>
      h("li", {"data-node": n.name}, `${n.name}: ${n.phase} ${(n.percent || 0).toFixed(0)}%`))) : null);
}

function card(inst, live, act) {
  const m = live[inst.id];
  const why = inst.error || inst.reason;
  const state = inst.state;
  return h("article", {class: `instance state-${state}`, "data-instance": inst.id, "data-state": state,
                       "aria-label": `instance ${inst.id}`},
    h("header", {},
      h("h3", {}, inst.id),
      h("span", {class: `pill state-${state}`}, state),
      h("span", {class: "muted"}, `${inst.model} · layout ${inst.layout}${inst.nodes ? ` · ${inst.nodes} nodes` : ""}`),
      h("div", {class: "actions"},
        h("button", {type: "button", "data-key": `rebalance-${inst.id}`, onclick: () => act("rebalance", inst.id)}, "Rebalance"),
        h("button", {type: "button", class: "danger", "data-key": `remove-${inst.id}`, onclick: () => act("remove", inst.id)}, "Remove"))),
    why && state !== "ready" ? h("p", {class: `reason ${state === "failed" || state === "unplaced" ? "bad" : ""}`}, why) : null,
    loading(inst.progress),
    h("div", {class: "figures"},
      figure("plan", inst.plan || "–"),
      figure("predicted", inst.predicted_tok_s > 0 ? `${inst.predicted_tok_s.toFixed(1)} tok/s` : "–"),
      figure("live", m ? `${m.cohort_generation_tokens_per_second.toFixed(1)} tok/s` : "–"),
      figure("queue", m ? m.cohort_queue_depth : "–"),
      figure("slots", m ? `${m.cohort_slots_active} / ${m.cohort_slots_total}` : "–"),
      figure("generated", m ? m.cohort_generated_tokens_total : "–")),
    planTable(inst));
}

// `live`: instance id -> its /metrics samples. `onChange` is called after an action.
export function drawInstances(container, instances, live, status, onChange) {
  const act = async (what, id) => {
    try {
      if (what === "remove") {
        if (!window.confirm(`Remove instance ${id}?`)) return;
        await api(`/v1/instances/${encodeURIComponent(id)}`, {method: "DELETE"});
        status(`removed ${id}`);
      } else {
        await api(`/v1/instances/${encodeURIComponent(id)}/rebalance`, {method: "POST", body: {}});
        status(`rebalancing ${id}`);
      }
    } catch (e) {
      status(`${what} ${id}: ${e.message}`, true);
    }
    onChange();
  };
  if (!instances.length) {
    replaceKeepingFocus(container, h("p", {class: "muted"}, "No instance yet: place a model below."));
    return;
  }
  replaceKeepingFocus(container, instances.map((i) => card(i, live, act)));
}

// /metrics for each ready instance (relayed to its coordinator), samples by instance id.
export async function fetchLive(instances) {
  const out = {};
  await Promise.all(instances.filter((i) => i.ready).map(async (i) => {
    try {
      out[i.id] = parseMetrics(await api(`/metrics?model=${encodeURIComponent(i.id)}`));
    } catch (_) { /* shown as "–" until the next poll */ }
  }));
  return out;
}

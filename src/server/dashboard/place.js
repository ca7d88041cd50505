// Placing a model: the form (model path or name, layout, node count), the planner's
// prediction from POST /v1/plan (tokens/s, time to first token and memory per node for each
// tp, pp and hybrid layout it scored, and which one placing would choose), then POST
// /v1/instances. "Place" is enabled only once the prediction for the form's values is shown.
import {h, bytes, api, replaceKeepingFocus} from "./util.js";

const kKinds = ["tp", "pp", "hybrid", "single"];
const kPerKind = 3;  // the best few of each kind keep the table readable

function form() {
  const model = document.getElementById("place-model");
  const layout = document.getElementById("place-layout");
  const nodes = document.getElementById("place-nodes");
  const n = nodes.value === "" ? 0 : Number(nodes.value);
  return {model: model.value.trim(), layout: layout.value, nodes: n};
}

function candidateRows(preview) {
  const chosen = preview.choice ? preview.choice.plan : null;
  const rows = [];
  for (const kind of kKinds) {
    const of = preview.candidates.filter((c) => c.kind === kind);
    of.sort((a, b) => (b.eligible - a.eligible) || (b.gen_tok_s - a.gen_tok_s));
    for (const c of of.slice(0, kPerKind)) {
      const memory = c.ranks.map((r) =>
        h("li", {class: r.fits ? "" : "bad", title: `${r.name} can hold ${bytes(r.usable_bytes)}`},
          `${r.name} ${bytes(r.memory_bytes)}`, r.fits ? null : ` > ${bytes(r.usable_bytes)}`));
      const cls = [c.label === chosen ? "chosen" : "", c.fits ? "" : "too-big", c.fits && !c.eligible ? "other-count" : ""];
      rows.push(h("tr", {class: cls.join(" ").trim(), title: c.fits && !c.eligible ? "not the node count asked" : null,
                         "data-kind": c.kind, "data-label": c.label},
        h("th", {scope: "row"}, c.label, c.label === chosen ? h("span", {class: "badge"}, "chosen") : null),
        h("td", {}, c.kind),
        h("td", {class: "num"}, c.nodes),
        h("td", {class: "num"}, `${c.gen_tok_s.toFixed(1)}`),
        h("td", {class: "num"}, `${c.gen_tok_s_batch.toFixed(1)}`),
        h("td", {class: "num"}, `${(c.ttft_s * 1000).toFixed(1)} ms`),
        h("td", {}, c.fits ? "yes" : "no"),
        h("td", {}, h("ul", {class: "memory"}, memory))));
    }
  }
  return rows;
}

function drawPreview(container, preview) {
  let summary = preview.choice
    ? `Placing would choose ${preview.choice.plan}: ${preview.choice.predicted_tok_s.toFixed(1)} tok/s predicted.`
    : `Nothing fits: ${preview.unplaced}`;
  // The placer passes over a faster layout whose first rank would sit on a node without the
  // file (its coordinator must read it); say so rather than look inconsistent.
  const fastest = Math.max(0, ...preview.candidates.filter((c) => c.eligible).map((c) => c.gen_tok_s));
  if (preview.choice && fastest > preview.choice.predicted_tok_s * 1.001) {
    summary += " Faster layouts would put their first rank on a node that does not hold the file (yet).";
  }
  replaceKeepingFocus(container,
    h("p", {class: preview.choice ? "" : "reason bad", id: "preview-summary"}, summary),
    h("p", {class: "muted"},
      `${preview.model} (${bytes(preview.file_bytes)}) on ${preview.live_nodes} live node(s); link ${preview.link.name}; ` +
      `KV for ${preview.sequences} × ${preview.context_tokens} tokens. Greyed: too big, or not the node count asked.`),
    h("table", {class: "preview"},
      h("caption", {}, "The planner's prediction per layout"),
      h("thead", {}, h("tr", {},
        ["Layout", "Kind", "Nodes", "tok/s (1 seq)", `tok/s (${preview.sequences} seq)`, "First token", "Fits", "Memory by rank"]
          .map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, candidateRows(preview))));
}

// Wires the form; `status(text, bad)` reports, `onChange()` refreshes the page's data.
export function setupPlace(status, onChange) {
  const container = document.getElementById("preview");
  const placeButton = document.getElementById("place-submit");
  let previewed = null;  // the form values the shown prediction is for
  const stale = () => {
    const f = form();
    placeButton.disabled = !previewed || JSON.stringify(f) !== JSON.stringify(previewed);
  };
  for (const id of ["place-model", "place-layout", "place-nodes"]) {
    document.getElementById(id).addEventListener("input", stale);
  }
  document.getElementById("place-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = form();
    if (!f.model) { status("model: give a GGUF path or a registered model name", true); return; }
    const body = {model: f.model, layout: f.layout, nodes: f.nodes};
    if (ev.submitter === placeButton) {
      try {
        const inst = await api("/v1/instances", {method: "POST", body});
        status(`placing ${inst.id}: ${inst.state}`);
      } catch (e) { status(`place: ${e.message}`, true); }
      onChange();
      return;
    }
    status("asking the planner…");
    try {
      const preview = await api("/v1/plan", {method: "POST", body});
      drawPreview(container, preview);
      previewed = f;
      status(preview.choice ? `prediction for ${preview.model} ready` : `nothing fits ${preview.model}`, !preview.choice);
    } catch (e) {
      previewed = null;
      replaceKeepingFocus(container, h("p", {class: "reason bad"}, e.message));
      status(`prediction: ${e.message}`, true);
    }
    stale();
  });
}

// The model names and files the cluster knows, for the model field's suggestions.
export function drawModelList(datalist, state) {
  const options = new Set();
  for (const [key, value] of Object.entries((state && state.models) || {})) {
    if (key.startsWith("model:")) options.add(key.slice(6));
    if (key.startsWith("node:") && value && value.files) for (const path of Object.values(value.files)) options.add(path);
  }
  const now = [...options].sort();
  const had = [...datalist.children].map((o) => o.value);
  if (JSON.stringify(now) !== JSON.stringify(had)) datalist.replaceChildren(...now.map((v) => h("option", {value: v})));
}

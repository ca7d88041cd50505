// The topology: the members of GET /v1/cluster drawn as a graph (SVG: a circle per node,
// coloured by liveness, a line per measured link labelled with its latency and bandwidth),
// and a table of each node's resources.
import {h, bytes, si, micros, replaceKeepingFocus} from "./util.js";

const kWidth = 640;
const kHeight = 340;
const kRadius = 38;

// Links as undirected pairs: {a, b, latency_us, bandwidth_Bps} from whichever side measured
// (both sides: the slower latency and the lower bandwidth, what a transfer would see).
export function linksOf(members) {
  const ids = new Set(members.map((m) => m.id));
  const pairs = new Map();
  for (const m of members) {
    for (const l of m.links || []) {
      if (!ids.has(l.peer) || l.peer === m.id) continue;
      const [a, b] = m.id < l.peer ? [m.id, l.peer] : [l.peer, m.id];
      const key = `${a}-${b}`;
      const old = pairs.get(key);
      if (!old) pairs.set(key, {a, b, latency_us: l.latency_us, bandwidth_Bps: l.bandwidth_Bps});
      else {
        old.latency_us = Math.max(old.latency_us, l.latency_us);
        old.bandwidth_Bps = Math.min(old.bandwidth_Bps, l.bandwidth_Bps);
      }
    }
  }
  return [...pairs.values()];
}

function positions(members) {
  const pos = new Map();
  const n = members.length;
  const cx = kWidth / 2, cy = kHeight / 2;
  const rx = n === 1 ? 0 : kWidth / 2 - 90, ry = n === 1 ? 0 : kHeight / 2 - 60;
  members.forEach((m, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / n;
    pos.set(m.id, {x: cx + rx * Math.cos(angle), y: cy + ry * Math.sin(angle)});
  });
  return pos;
}

function linkLabel(l) {
  const bw = l.bandwidth_Bps > 0 ? si(l.bandwidth_Bps, "B/s") : "–";
  return `${micros(l.latency_us)} · ${bw}`;
}

export function drawGraph(svg, members) {
  const sorted = [...members].sort((x, y) => x.name.localeCompare(y.name));
  const pos = positions(sorted);
  const byId = new Map(sorted.map((m) => [m.id, m]));
  const links = linksOf(sorted);
  const edges = links.map((l) => {
    const p = pos.get(l.a), q = pos.get(l.b);
    const down = byId.get(l.a).state !== "alive" || byId.get(l.b).state !== "alive";
    const mx = (p.x + q.x) / 2, my = (p.y + q.y) / 2;
    return h("svg:g", {class: `link${down ? " down" : ""}`, "data-a": byId.get(l.a).name, "data-b": byId.get(l.b).name},
      h("svg:line", {x1: p.x, y1: p.y, x2: q.x, y2: q.y}),
      h("svg:text", {x: mx, y: my - 6, "text-anchor": "middle", class: "link-label"}, linkLabel(l)),
      h("svg:title", {}, `${byId.get(l.a).name} ↔ ${byId.get(l.b).name}: ${linkLabel(l)}`));
  });
  const nodes = sorted.map((m) => {
    const p = pos.get(m.id);
    const label = `${m.name}, ${m.address}, ${m.state}${m.leader ? ", leader" : ""}`;
    return h("svg:g", {class: `node state-${m.state}`, "data-name": m.name, "data-state": m.state,
                        "data-leader": m.leader ? "true" : "false", "data-key": `node-${m.name}`, tabindex: 0, role: "img", "aria-label": label},
      h("svg:circle", {cx: p.x, cy: p.y, r: kRadius}),
      m.leader ? h("svg:circle", {class: "leader-ring", cx: p.x, cy: p.y, r: kRadius + 5}) : null,
      h("svg:text", {x: p.x, y: p.y - 4, "text-anchor": "middle", class: "node-name"}, m.name),
      h("svg:text", {x: p.x, y: p.y + 13, "text-anchor": "middle", class: "node-state"}, m.state),
      h("svg:text", {x: p.x, y: p.y + kRadius + 18, "text-anchor": "middle", class: "node-address"},
        m.address + (m.leader ? "  ★ leader" : "")),
      h("svg:title", {}, label));
  });
  svg.setAttribute("viewBox", `0 0 ${kWidth} ${kHeight}`);
  replaceKeepingFocus(svg, edges, nodes);
  return links.length;
}

export function drawNodeTable(container, members) {
  const sorted = [...members].sort((x, y) => x.name.localeCompare(y.name));
  const rows = sorted.map((m) => {
    const p = m.profile || {};
    const used = p.memory_total_bytes > 0 ? p.memory_total_bytes - p.memory_available_bytes : NaN;
    const flags = [m.leader ? "leader" : null, m.self ? "this node" : null].filter(Boolean).join(", ");
    return h("tr", {"data-name": m.name, "data-state": m.state},
      h("th", {scope: "row"}, m.name, flags ? h("span", {class: "badge"}, flags) : null),
      h("td", {}, m.address),
      h("td", {}, h("span", {class: `pill state-${m.state}`}, m.state),
        m.state !== "alive" && !m.self ? ` (silent ${(m.silent_ms / 1000).toFixed(1)} s)` : ""),
      h("td", {class: "num"}, `${bytes(used)} / ${bytes(p.memory_total_bytes)}`),
      h("td", {class: "num"}, p.cores || "–"),
      h("td", {class: "num"}, p.measured ? si(p.memory_bandwidth_Bps, "B/s") : "not measured"),
      h("td", {class: "num"}, p.measured ? si(p.matmul_flops, "FLOP/s") : "not measured"),
      h("td", {}, p.simd || "–"));
  });
  replaceKeepingFocus(container,
    h("table", {class: "nodes"},
      h("caption", {class: "sr-only"}, "Nodes of the cluster"),
      h("thead", {}, h("tr", {},
        ["Node", "Address", "State", "Memory used / total", "Cores", "Bandwidth", "Matmul", "SIMD"]
          .map((c) => h("th", {scope: "col"}, c)))),
      h("tbody", {}, rows)));
}

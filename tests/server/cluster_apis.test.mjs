// Every client API through a cluster node that does not serve the instance: two real `cohort
// serve --cluster` processes on loopback, the demo model (with a ChatML template written into
// its GGUF) placed over both, and requests sent to the node that is not its coordinator,
// which relays them. The
// relayed answers must equal the coordinator's own: `curl -d` without a JSON content type
// (a form body holding '?', '&' and '=', which the forwarder once re-sent as a query string),
// a query string kept as sent, the official Anthropic, Ollama and OpenAI (Responses) clients
// plain and streamed, Ollama's model list, and embeddings (OpenAI's and Ollama's).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { cohortBin, fixture, sleep } from './serve_helper.mjs';
import { withChatTemplate } from './gguf_template.mjs';

const KEY = 'k-cluster';
const auth = { authorization: `Bearer ${KEY}` };
let dir;
let nodes = [];
let coordinator;  // the base URL of the node serving the instance
let relay;        // the other node's
let model;        // the instance id

// A port free for both TCP and UDP (a node's control address takes both).
async function freePort() {
  for (;;) {
    const port = await new Promise((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
    const ok = await new Promise((resolve) => {
      const u = dgram.createSocket('udp4');
      u.on('error', () => resolve(false));
      u.bind(port, '127.0.0.1', () => u.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}

function startNode(self, peer, name) {
  const proc = spawn(cohortBin, ['-t', '1', 'serve', '--cluster', '--listen', `127.0.0.1:${self}`, '--peers', `127.0.0.1:${peer}`,
                                 '--port', '0', '--secret', 's', '--no-multicast',
                                 // Any ports for the worker and the relay: the fixed ones follow --listen's
                                 // random port and may be taken on a shared test machine.
                                 '--worker-listen', '127.0.0.1:0', '--relay-listen', '127.0.0.1:0', '--no-benchmarks', '-c', '256',
                                 '--state-dir', path.join(dir, name), '--models-dir', dir, '--api-key', KEY], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const base = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${log}`)), 30000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/API http:\/\/([0-9.]+:\d+)/);
      if (m) { clearTimeout(timer); resolve(`http://${m[1]}`); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited (${code}):\n${log}`)); });
  });
  return { proc, base, log: () => log };
}

async function getJson(base, p) {
  const r = await fetch(`${base}${p}`, { headers: auth });
  return r.json();
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-cluster-apis-'));
  const file = path.join(dir, 'stories-chatml.gguf');
  withChatTemplate(fixture('stories260K'), file);
  const [a, b] = [await freePort(), await freePort()];
  nodes = [startNode(a, b, 'a'), startNode(b, a, 'b')];
  const bases = await Promise.all(nodes.map((n) => n.base));
  for (let i = 0; i < 100; i++) {
    const c = await getJson(bases[0], '/v1/cluster');
    if (c.members?.filter((m) => m.state === 'alive').length === 2) break;
    await sleep(100);
  }
  const placed = await fetch(`${bases[0]}/v1/instances`, {
    method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: file, nodes: 2, wait_s: 60 }),
  });
  const instance = await placed.json();
  assert.equal(instance.state, 'ready', JSON.stringify(instance));
  model = instance.id;
  const ids = await Promise.all(bases.map(async (base) => (await getJson(base, '/health')).node));
  const at = ids.indexOf(instance.coordinator);
  assert.ok(at >= 0, `coordinator ${instance.coordinator} is neither of ${ids}`);
  coordinator = bases[at];
  relay = bases[1 - at];
  // The relaying node learns the instance is ready from the agreed state.
  for (let i = 0; i < 100; i++) {
    const list = await getJson(relay, '/v1/models');
    if (list.data?.some((m) => m.id === model && m.ready)) break;
    await sleep(100);
  }
});

after(async () => {
  for (const n of nodes) {
    if (n.proc.exitCode === null) {
      const exited = new Promise((resolve) => n.proc.on('exit', resolve));
      n.proc.kill('SIGTERM');
      await exited;
    }
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const run = promisify(execFile);

test('curl -d (a form body holding ? & =) through the relaying node equals the coordinator', async () => {
  const body = JSON.stringify({ model, prompt: 'Why? Lily & Tom = friends?', max_tokens: 8, temperature: 0 });
  const answers = [];
  for (const base of [coordinator, relay]) {
    const { stdout } = await run('curl', ['-s', '-w', '\\n%{http_code}', '-H', `Authorization: Bearer ${KEY}`, '-d', body,
                                          `${base}/v1/completions`]);
    const [json, code] = stdout.split('\n');
    assert.equal(code, '200', `${base}: ${stdout}`);
    answers.push(JSON.parse(json).choices[0].text);
  }
  assert.equal(answers[1], answers[0]);
  assert.ok(answers[0].length > 0);
  // A query string reaches the coordinator as sent.
  const metrics = await fetch(`${relay}/metrics?model=${encodeURIComponent(model)}`, { headers: auth });
  assert.equal(metrics.status, 200);
  assert.match(await metrics.text(), /cohort_slots_total/);
});

const user = (content) => [{ role: 'user', content }];

test('anthropic through the relaying node: plain and streamed equal the coordinator', async () => {
  const params = { model, max_tokens: 12, temperature: 0, messages: user('Once upon a time') };
  const [here, there] = [coordinator, relay].map((base) => new Anthropic({ apiKey: KEY, baseURL: base, maxRetries: 0 }));
  const expected = (await here.messages.create(params)).content[0].text;
  assert.equal((await there.messages.create(params)).content[0].text, expected);
  const types = [];
  let text = '';
  for await (const e of await there.messages.create({ ...params, stream: true })) {
    types.push(e.type);
    if (e.type === 'content_block_delta') text += e.delta.text;
  }
  assert.equal(text, expected);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
});

test('ollama through the relaying node: streamed chat (NDJSON), generate and list', async () => {
  const [here, there] = [coordinator, relay].map((host) => new Ollama({ host, headers: auth }));
  const params = { model, messages: user('Once upon a time'), options: { temperature: 0, num_predict: 12 } };
  const expected = (await here.chat({ ...params, stream: false })).message.content;
  const parts = [];
  for await (const p of await there.chat({ ...params, stream: true })) parts.push(p);
  assert.ok(parts.length >= 2);  // text, then the final line
  assert.equal(parts.map((p) => p.message.content).join(''), expected);
  assert.equal(parts.at(-1).done, true);
  const gen = await there.generate({ model, prompt: 'Once upon a time', stream: false, options: { temperature: 0, num_predict: 12 } });
  assert.equal(gen.response, expected);
  assert.deepEqual((await there.list()).models.map((m) => m.name), [model]);
});

test('responses through the relaying node: plain and streamed equal the coordinator', async () => {
  const [here, there] = [coordinator, relay].map((base) => new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 }));
  const params = { model, input: 'Once upon a time', max_output_tokens: 12, temperature: 0 };
  const expected = (await here.responses.create(params)).output_text;
  assert.equal((await there.responses.create(params)).output_text, expected);
  let text = '';
  let last = null;
  for await (const e of await there.responses.create({ ...params, stream: true })) {
    if (e.type === 'response.output_text.delta') text += e.delta;
    last = e.type;
  }
  assert.equal(text, expected);
  assert.ok(last === 'response.completed' || last === 'response.incomplete', last);
  const one = await there.models.retrieve(model);
  assert.equal(one.id, model);
  assert.equal(typeof one.created, 'number');
});

test('embeddings through the relaying node (an instance over both nodes) equal the coordinator', async () => {
  const [here, there] = [coordinator, relay].map((base) => new OpenAI({ apiKey: KEY, baseURL: `${base}/v1`, maxRetries: 0 }));
  const params = { model, input: ['Once upon a time', 'Lily & Tom?'], encoding_format: 'float' };
  const expected = await here.embeddings.create(params);
  const got = await there.embeddings.create(params);
  assert.equal(got.data.length, 2);
  assert.deepEqual(got.data.map((d) => d.embedding), expected.data.map((d) => d.embedding));
  assert.ok(Math.abs(Math.hypot(...got.data[0].embedding) - 1) < 1e-5);
  const ollama = new Ollama({ host: relay, headers: auth });
  const viaOllama = await ollama.embed({ model, input: 'Once upon a time' });
  assert.deepEqual(viaOllama.embeddings[0], expected.data[0].embedding);
});

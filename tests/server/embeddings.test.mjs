// Embeddings through the official clients against a real `cohort serve`: openai's
// embeddings.create (its default base64 and floats, several inputs, token-id inputs,
// dimensions) and ollama's embed and legacy embeddings, checked against llama.cpp's pooled
// vectors of the fixtures' golden prompts (tests/data/embeddings, made by
// tools/make-embedding-goldens.sh): a chat model without pooling_type pools by the mean, a
// Qwen3 with pooling_type 3 (Qwen3-Embedding's) by its last position.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { startServer, fixture, testData } from './serve_helper.mjs';
import { withUint32 } from './gguf_template.mjs';

const KEY = 'sk-embed';
let llama;  // tiny-llama-f32: no pooling_type, so the mean
let qwen;   // tiny-qwen3-f32 with qwen3.pooling_type = 3 (last)
let dir;

const golden = (name, pooling) => {
  const b = fs.readFileSync(path.join(testData, 'embeddings', `${name}.${pooling}.f32`));
  return Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
};
const promptIds = (name) =>
  JSON.parse(fs.readFileSync(path.join(testData, 'fixtures', 'golden', `${name}.golden.json`))).prompt_ids;
const unit = (v) => { const n = Math.hypot(...v); return v.map((x) => x / n); };
const maxDiff = (a, b) => { assert.equal(a.length, b.length); return Math.max(...a.map((x, i) => Math.abs(x - b[i]))); };

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-embed-'));
  const qwenFile = path.join(dir, 'qwen3-embedding.gguf');
  withUint32(fixture('tiny-qwen3-f32'), qwenFile, 'qwen3.pooling_type', 3);
  const common = ['--ctx', '256', '--kv-type', 'f32', '--api-key', KEY];
  llama = await startServer(['-m', fixture('tiny-llama-f32'), '--name', 'tiny-llama', ...common]);
  qwen = await startServer(['-m', qwenFile, '--name', 'qwen3-embedding', ...common]);
});

after(async () => {
  assert.equal(await llama.stop(), 0, llama.log());
  assert.equal(await qwen.stop(), 0, qwen.log());
  fs.rmSync(dir, { recursive: true, force: true });
});

test('openai: token ids embed as llama.cpp pools them, unit length, base64 and floats alike', async () => {
  const client = new OpenAI({ baseURL: `${llama.base}/v1`, apiKey: KEY });
  const ids = promptIds('tiny-llama-f32');
  const want = unit(golden('tiny-llama-f32', 'mean'));
  const b64 = await client.embeddings.create({ model: 'tiny-llama', input: ids });  // the client asks for base64
  assert.equal(b64.object, 'list');
  assert.equal(b64.model, 'tiny-llama');
  assert.equal(b64.data.length, 1);
  assert.equal(b64.data[0].index, 0);
  assert.equal(b64.data[0].embedding.length, 256);
  assert.ok(maxDiff(b64.data[0].embedding, want) <= 1e-4, `max diff ${maxDiff(b64.data[0].embedding, want)}`);
  assert.ok(Math.abs(Math.hypot(...b64.data[0].embedding) - 1) < 1e-5);
  assert.deepEqual(b64.usage, { prompt_tokens: ids.length, total_tokens: ids.length });
  const floats = await client.embeddings.create({ model: 'tiny-llama', input: ids, encoding_format: 'float' });
  assert.deepEqual(floats.data[0].embedding, b64.data[0].embedding);  // the same float32 values
});

test('openai: several inputs keep their order; text, token ids and dimensions', async () => {
  const client = new OpenAI({ baseURL: `${llama.base}/v1`, apiKey: KEY });
  const ids = promptIds('tiny-llama-f32');
  const r = await client.embeddings.create({ model: 'tiny-llama', input: [ids.slice(0, 5), ids, ids.slice(0, 5)] });
  assert.deepEqual(r.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(maxDiff(r.data[1].embedding, unit(golden('tiny-llama-f32', 'mean'))) <= 1e-4);
  assert.deepEqual(r.data[0].embedding, r.data[2].embedding);
  assert.ok(maxDiff(r.data[0].embedding, r.data[1].embedding) > 1e-2);  // a different input, another vector
  assert.equal(r.usage.prompt_tokens, 5 + ids.length + 5);
  // Text is tokenized with BOS, as llama-server does: the same vector as its ids.
  const text = await client.embeddings.create({ model: 'tiny-llama', input: ['Once upon a time', 'The cat'] });
  assert.equal(text.data.length, 2);
  assert.ok(maxDiff(text.data[0].embedding, text.data[1].embedding) > 1e-2);
  // dimensions: the first N, normalized again.
  const short = await client.embeddings.create({ model: 'tiny-llama', input: ids, dimensions: 32 });
  assert.equal(short.data[0].embedding.length, 32);
  assert.ok(maxDiff(short.data[0].embedding, unit(golden('tiny-llama-f32', 'mean').slice(0, 32))) <= 1e-4);
});

test('a model whose GGUF says pooling_type 3 pools its last position', async () => {
  const client = new OpenAI({ baseURL: `${qwen.base}/v1`, apiKey: KEY });
  const ids = promptIds('tiny-qwen3-f32');
  const r = await client.embeddings.create({ model: 'qwen3-embedding', input: ids, encoding_format: 'float' });
  assert.ok(maxDiff(r.data[0].embedding, unit(golden('tiny-qwen3-f32', 'last'))) <= 1e-4);
  assert.ok(maxDiff(r.data[0].embedding, unit(golden('tiny-qwen3-f32', 'mean'))) > 1e-2);
});

for (const layout of ['tp', 'pp']) {
  test(`${layout} over 2 local ranks: the same embedding as llama.cpp's, from the last stage`, async () => {
    const dist = await startServer(['-m', fixture('tiny-llama-f32'), '--name', 'tiny-llama', '--ctx', '256', '--kv-type', 'f32',
                                    '--api-key', KEY, '--local-ranks', '2', '--layout', layout, '--parallel', '2']);
    try {
      const client = new OpenAI({ baseURL: `${dist.base}/v1`, apiKey: KEY });
      const ids = promptIds('tiny-llama-f32');
      // Beside a generation, which must go on and end as it does alone.
      const gen = client.completions.create({ model: 'tiny-llama', prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
      const r = await client.embeddings.create({ model: 'tiny-llama', input: [ids, ids.slice(0, 3)], encoding_format: 'float' });
      assert.ok(maxDiff(r.data[0].embedding, unit(golden('tiny-llama-f32', 'mean'))) <= 1e-4,
                `max diff ${maxDiff(r.data[0].embedding, unit(golden('tiny-llama-f32', 'mean')))}`);
      const one = await new OpenAI({ baseURL: `${llama.base}/v1`, apiKey: KEY })
        .embeddings.create({ model: 'tiny-llama', input: ids.slice(0, 3), encoding_format: 'float' });
      assert.ok(maxDiff(r.data[1].embedding, one.data[0].embedding) <= 1e-4);
      const alone = await new OpenAI({ baseURL: `${llama.base}/v1`, apiKey: KEY })
        .completions.create({ model: 'tiny-llama', prompt: 'Once upon a time', max_tokens: 24, temperature: 0 });
      assert.equal((await gen).choices[0].text, alone.choices[0].text);
    } finally {
      assert.equal(await dist.stop(), 0, dist.log());
    }
  });
}

test('ollama: embed (normalized, several inputs) and the legacy embeddings (as it comes)', async () => {
  const ollama = new Ollama({ host: llama.base, headers: { Authorization: `Bearer ${KEY}` } });
  const openai = new OpenAI({ baseURL: `${llama.base}/v1`, apiKey: KEY });
  const r = await ollama.embed({ model: 'tiny-llama', input: ['Once upon a time', 'The cat'] });
  assert.equal(r.model, 'tiny-llama');
  assert.equal(r.embeddings.length, 2);
  const viaOpenAi = await openai.embeddings.create({ model: 'tiny-llama', input: ['Once upon a time', 'The cat'] });
  assert.ok(maxDiff(r.embeddings[0], viaOpenAi.data[0].embedding) <= 1e-7);
  assert.ok(maxDiff(r.embeddings[1], viaOpenAi.data[1].embedding) <= 1e-7);
  assert.equal(r.prompt_eval_count, viaOpenAi.usage.prompt_tokens);
  assert.ok(r.total_duration > 0);
  const legacy = await ollama.embeddings({ model: 'tiny-llama', prompt: 'Once upon a time' });
  assert.ok(Math.abs(Math.hypot(...legacy.embedding) - 1) > 1e-3, 'the legacy route does not normalize');
  assert.ok(maxDiff(unit(legacy.embedding), r.embeddings[0]) <= 1e-6);
  // Ollama truncates a long input to the context unless told not to.
  const long = 'once upon a time '.repeat(200);
  const cut = await ollama.embed({ model: 'tiny-llama', input: long });
  assert.equal(cut.prompt_eval_count, 256);
  await assert.rejects(ollama.embed({ model: 'tiny-llama', input: long, truncate: false }), /input: has \d+ tokens/);
});

test('bad embedding requests get a 400 naming the field, and the server serves on', async () => {
  const post = async (route, body) => {
    const res = await fetch(`${llama.base}${route}`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` }, body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const r = await post('/v1/embeddings', { input: ['x', 'word '.repeat(400)] });
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.code, 'context_length_exceeded');
  assert.match(r.body.error.message, /^input\[1\]: has \d+ tokens/);
  // 300,000 tokens in all at most: 1,200 inputs of 256 are refused before any runs.
  const started = Date.now();
  const many = await post('/v1/embeddings', { input: Array.from({ length: 1200 }, () => Array(256).fill(5)) });
  assert.equal(many.status, 400, JSON.stringify(many.body).slice(0, 200));
  assert.match(many.body.error.message, /^input: has 307200 tokens in all; at most 300000 per request/);
  assert.ok(Date.now() - started < 5000, 'refused before running');
  const unauthorized = await fetch(`${llama.base}/v1/embeddings`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input: 'x' }),
  });
  assert.equal(unauthorized.status, 401);
  const ok = await post('/v1/embeddings', { input: 'x' });
  assert.equal(ok.status, 200);
  assert.equal(ok.body.data[0].embedding.length, 256);
});

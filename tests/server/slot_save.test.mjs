// Slot save and restore (--slot-save-path), through the official `openai` client and plain
// fetch: a chat's cached prefix saved to a file survives a restart — after restore, the next
// request with that system prompt reports it in usage.prompt_tokens_details.cached_tokens and
// answers, at temperature 0, as a fresh server does. Hostile files and names (traversal,
// slashes, hidden names, symbolic links in and out, truncated, altered, another model's)
// get a 4xx and change neither the cache nor any file; the routes need the API key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, fixture, metrics } from './serve_helper.mjs';

const KEY = 'slot-test-key';
const model = fixture('stories260K');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-slots-'));
const saves = path.join(dir, 'saves');
const common = ['-m', model, '--chat-template', 'chatml', '--parallel', '1', '--ctx', '512', '--api-key', KEY];
const withSlots = [...common, '--cache-ram', String(64 << 20), '--slot-save-path', saves];
const system = 'You are a storyteller. Once upon a time there was a little girl named Lily who lived in a small ' +
               'house near the woods with her mom, her dad and her dog Max, and every day she went out to play.';
let fresh;  // no prefix cache, no slot files: the reference
const running = [];

const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
async function slotAction(server, id, action, body, headers = auth) {
  const r = await fetch(`${server.base}/slots/${id}?action=${action}`, {
    method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

async function serve(args) {
  const s = await startServer(args);
  running.push(s);
  return s;
}

async function stop(server) {
  const code = await server.stop();
  assert.equal(code, 0, `server exit: ${code}\n${server.log()}`);
  running.splice(running.indexOf(server), 1);
}

async function chat(server, user) {
  const client = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
  const r = await client.chat.completions.create({
    model: 'stories260K', max_tokens: 24, temperature: 0,
    messages: [{ role: 'system', content: system }, { role: 'user', content: user }],
  });
  return { text: r.choices[0].message.content, usage: r.usage };
}

before(async () => {
  fresh = await serve([...common, '--cache-ram', '0']);
});

after(async () => {
  for (const s of [...running]) await stop(s);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a saved prefix survives a restart and gives the fresh server\'s text', async () => {
  let first = await serve(withSlots);
  await chat(first, 'Tell me about Lily.');
  const saved = await slotAction(first, 0, 'save', { filename: 'system.bin' });
  assert.equal(saved.status, 200, JSON.stringify(saved.body));
  assert.equal(saved.body.id_slot, 0);
  assert.equal(saved.body.filename, 'system.bin');
  assert.ok(saved.body.n_saved >= 16 && saved.body.n_saved % 16 === 0, JSON.stringify(saved.body));
  assert.equal(saved.body.n_written, fs.statSync(path.join(saves, 'system.bin')).size);
  assert.equal(typeof saved.body.timings.save_ms, 'number');
  await stop(first);

  const second = await serve(withSlots);
  const before = await metrics(second.base, KEY);
  assert.equal(before.cohort_prefix_cache_blocks, 0);
  const restored = await slotAction(second, 0, 'restore', { filename: 'system.bin' });
  assert.equal(restored.status, 200, JSON.stringify(restored.body));
  assert.equal(restored.body.n_restored, saved.body.n_saved);
  assert.equal(restored.body.n_read, saved.body.n_written);
  const slots = await (await fetch(`${second.base}/slots`, { headers: auth })).json();
  assert.deepEqual(slots.map((s) => [s.id, s.is_processing, s.n_saved]), [[0, false, saved.body.n_saved]]);

  const got = await chat(second, 'What did Max do?');
  const want = await chat(fresh, 'What did Max do?');
  assert.equal(got.text, want.text);
  assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens);
  const cached = got.usage.prompt_tokens_details.cached_tokens;
  // The system prompt's whole blocks at least (it is most of the prompt), never the whole prompt.
  assert.ok(cached >= 48 && cached < got.usage.prompt_tokens, `cached ${cached} of ${got.usage.prompt_tokens}`);
  assert.equal(want.usage.prompt_tokens_details.cached_tokens, 0);

  // Erase drops what the slot's last request left (the restored prefix's tail it extended).
  const erased = await slotAction(second, 0, 'erase');
  assert.equal(erased.status, 200);
  assert.equal(erased.body.id_slot, 0);
  assert.ok(erased.body.n_erased > cached, JSON.stringify(erased.body));
  await stop(second);
});

test('hostile names and files get a 4xx and change nothing', async () => {
  const other = path.join(dir, 'other-saves');
  // A file of another model (same format, same block size and KV type).
  const llama = await serve(['-m', fixture('tiny-llama-q8_0'), '--parallel', '1', '--ctx', '256', '--api-key', KEY,
                             '--cache-ram', String(16 << 20), '--slot-save-path', other]);
  const done = await fetch(`${llama.base}/v1/completions`, {
    method: 'POST', headers: auth, body: JSON.stringify({ prompt: 'Once upon a time there was a girl who liked to play outside',
                                                         max_tokens: 24, temperature: 0 }),
  });
  assert.equal(done.status, 200);
  assert.equal((await slotAction(llama, 0, 'save', { filename: 'llama.bin' })).status, 200);
  await stop(llama);
  fs.copyFileSync(path.join(other, 'llama.bin'), path.join(saves, 'llama.bin'));

  const s = await serve(withSlots);
  const good = fs.readFileSync(path.join(saves, 'system.bin'));
  fs.writeFileSync(path.join(saves, 'truncated.bin'), good.subarray(0, good.length - 100));
  const altered = Buffer.from(good);
  altered[Math.floor(altered.length / 2)] ^= 1;
  fs.writeFileSync(path.join(saves, 'altered.bin'), altered);
  fs.writeFileSync(path.join(saves, 'empty.bin'), Buffer.alloc(0));
  const outside = path.join(dir, 'outside.txt');
  fs.writeFileSync(outside, 'keep me');
  fs.symlinkSync(outside, path.join(saves, 'link-out.bin'));
  fs.symlinkSync(path.join(saves, 'system.bin'), path.join(saves, 'link-in.bin'));
  fs.mkdirSync(path.join(saves, 'adir.bin'));

  const cases = [
    [{ filename: '../outside.txt' }, 400, /Invalid filename/],
    [{ filename: 'a/b.bin' }, 400, /Invalid filename/],
    [{ filename: '/etc/passwd' }, 400, /Invalid filename/],
    [{ filename: '.hidden' }, 400, /Invalid filename/],
    [{ filename: '' }, 400, /Invalid filename/],
    [{ filename: 7 }, 400, /filename/],
    [{}, 400, /filename/],
    [{ filename: 'missing.bin' }, 404, /does not exist/],
    [{ filename: 'truncated.bin' }, 400, /checksum|truncated/],
    [{ filename: 'altered.bin' }, 400, /checksum/],
    [{ filename: 'empty.bin' }, 400, /too short/],
    [{ filename: 'llama.bin' }, 400, /another model/],
    [{ filename: 'link-out.bin' }, 400, /symbolic link/],
    [{ filename: 'link-in.bin' }, 400, /symbolic link/],
    [{ filename: 'adir.bin' }, 400, /regular file/],
  ];
  for (const [body, status, message] of cases) {
    const r = await slotAction(s, 0, 'restore', body);
    assert.equal(r.status, status, `${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
    assert.match(r.body.error.message, message, JSON.stringify(body));
  }
  const m = await metrics(s.base, KEY);
  assert.equal(m.cohort_prefix_cache_blocks, 0, 'no hostile file put anything in the cache');
  assert.equal(m.cohort_prefix_cache_bytes, 0);

  // Bad slot ids and actions; a save with nothing cached.
  assert.equal((await slotAction(s, 1, 'restore', { filename: 'system.bin' })).status, 400);
  assert.equal((await slotAction(s, 'x', 'restore', { filename: 'system.bin' })).status, 400);
  assert.equal((await slotAction(s, 0, 'explode', { filename: 'system.bin' })).status, 400);
  assert.equal((await slotAction(s, 0, 'save', { filename: 'nothing.bin' })).status, 400);
  assert.ok(!fs.existsSync(path.join(saves, 'nothing.bin')));

  // Behind the key, like every route: no key, no action and no listing.
  const noKey = { 'Content-Type': 'application/json' };
  assert.equal((await slotAction(s, 0, 'restore', { filename: 'system.bin' }, noKey)).status, 401);
  assert.equal((await fetch(`${s.base}/slots`)).status, 401);
  assert.equal((await metrics(s.base, KEY)).cohort_prefix_cache_blocks, 0);

  // A save onto a symbolic link replaces the link, never writes through it.
  assert.equal((await slotAction(s, 0, 'restore', { filename: 'system.bin' })).status, 200);
  await chat(s, 'Tell me about Lily.');
  const over = await slotAction(s, 0, 'save', { filename: 'link-out.bin' });
  assert.equal(over.status, 200, JSON.stringify(over.body));
  assert.equal(fs.readFileSync(outside, 'utf8'), 'keep me');
  assert.ok(fs.lstatSync(path.join(saves, 'link-out.bin')).isFile());
  // No temporary file is left behind.
  assert.deepEqual(fs.readdirSync(saves).filter((n) => n.startsWith('.')), []);
  await stop(s);

  // Without --slot-save-path the actions are not offered (llama-server's 501).
  const r = await slotAction(fresh, 0, 'save', { filename: 'x.bin' });
  assert.equal(r.status, 501);
});

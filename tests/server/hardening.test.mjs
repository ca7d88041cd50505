// The API as an attacker meets it (issue 23), against real `cohort serve` processes:
// a burst of 64 simultaneous clients on fresh connections gets no TCP reset (each is served
// or told 429/503); a slow-loris client dribbling its headers is cut off at the request
// deadline; keys come from a file with names, SIGHUP reloads it (a revoked key stops working,
// the process lives), the log names keys and never shows one; a key past its rate gets 429
// with Retry-After while another key is served; /metrics needs a key, /health does not; and
// over TLS (a CA and certificate made here by `openssl`) the official openai client works
// while plain HTTP to the same port gets no HTTP answer.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startServer, fixture, rawExchange, sleep } from './serve_helper.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-hardening-'));
const servers = [];
after(async () => {
  for (const s of servers) await s.stop();
  fs.rmSync(work, { recursive: true, force: true });
});

async function serve(args, options) {
  const s = await startServer(['-m', fixture('stories260K'), ...args], options);
  servers.push(s);
  return s;
}

// One request on a connection of its own (no keep-alive pool): what a burst of clients is.
function freshRequest(port, { method = 'GET', path: p = '/health', body, headers = {} } = {}) {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, agent: false,
                               headers: { 'Content-Type': 'application/json', ...headers } }, (res) => {
      let data = '';
      res.on('data', (d) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: data }));
    });
    req.on('error', (e) => resolve({ error: e.code ?? String(e) }));
    if (body) req.write(body);
    req.end();
  });
}

test('64 simultaneous clients: no resets, each served or told 429/503', async () => {
  const s = await serve(['--parallel', '4', '--max-queue', '8', '--ctx', '256']);
  // The kernel's view of the listening socket: Send-Q is its backlog (cpp-httplib's own is 5).
  const listening = execFileSync('ss', ['-ltnH', `sport = :${s.port}`]).toString().trim().split(/\s+/);
  assert.ok(Number(listening[2]) >= 512, `listen backlog ${listening[2]}`);
  for (const route of ['health', 'completions']) {
    const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    const replies = await Promise.all(Array.from({ length: 64 }, () => route === 'health'
      ? freshRequest(s.port)
      : freshRequest(s.port, { method: 'POST', path: '/v1/completions', body })));
    const errors = replies.filter((r) => r.error).map((r) => r.error);
    assert.deepEqual(errors, [], `${route}: connection errors ${errors.join(',')}`);
    const statuses = replies.map((r) => r.status);
    for (const st of statuses) assert.ok([200, 429, 503].includes(st), `${route}: status ${st}`);
    assert.ok(statuses.filter((st) => st === 200).length >= 4, `${route}: ${statuses}`);
  }
});

test('slow-loris headers are cut off at the request deadline', async () => {
  const s = await serve(['--request-timeout', '2', '--timeout', '10']);
  const dribble = ['GET /health HTTP/1.1\r\n', ...Array.from('X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')];
  const r = await rawExchange(s.port, dribble, { delayMs: 400, timeoutMs: 15000 });
  assert.ok(r.closedByServer, 'the server should have closed the connection');
  assert.ok(r.ms < 4500, `closed after ${r.ms} ms (deadline 2 s)`);
  // A prompt client on the same server is still answered.
  assert.equal((await freshRequest(s.port)).status, 200);
});

test('named keys from a file, reloaded on SIGHUP; logs name keys; rate limits per key', async () => {
  const keys = path.join(work, 'keys');
  fs.writeFileSync(keys, '# name key\nalice sk-alice-0123456789\nbob sk-bob-0123456789\n', { mode: 0o600 });
  const s = await serve(['--api-key-file', keys, '--rate-limit', '1', '--rate-burst', '3'], { global: ['-v'] });
  const as = (key) => ({ headers: { Authorization: `Bearer ${key}` }, path: '/v1/models' });
  assert.equal((await freshRequest(s.port, as('sk-alice-0123456789'))).status, 200);
  assert.equal((await freshRequest(s.port, as('sk-bob-0123456789'))).status, 200);
  assert.equal((await freshRequest(s.port, as('sk-mallory-012345'))).status, 401);
  assert.equal((await freshRequest(s.port, { path: '/metrics' })).status, 401, '/metrics needs a key');
  assert.equal((await freshRequest(s.port, { path: '/health' })).status, 200, '/health is open');
  // alice has 3 at once, then 1 per second: her 4th and 5th now are refused with Retry-After...
  await freshRequest(s.port, as('sk-alice-0123456789'));
  const limited = [await freshRequest(s.port, as('sk-alice-0123456789')),
                   await freshRequest(s.port, as('sk-alice-0123456789'))];
  assert.ok(limited.some((r) => r.status === 429), limited.map((r) => r.status).join(','));
  const r429 = limited.find((r) => r.status === 429);
  assert.ok(Number(r429.headers['retry-after']) >= 1, `Retry-After ${r429.headers['retry-after']}`);
  assert.equal(JSON.parse(r429.body).error.code, 'rate_limit_exceeded');
  // ...while bob is not.
  assert.equal((await freshRequest(s.port, as('sk-bob-0123456789'))).status, 200);
  // Revoke bob, add carol; SIGHUP.
  fs.writeFileSync(keys, 'alice sk-alice-0123456789\ncarol sk-carol-0123456789\n');
  s.proc.kill('SIGHUP');
  await sleep(700);
  assert.equal(s.proc.exitCode, null, 'SIGHUP must not stop the server');
  assert.equal((await freshRequest(s.port, as('sk-bob-0123456789'))).status, 401, 'bob was revoked');
  assert.equal((await freshRequest(s.port, as('sk-carol-0123456789'))).status, 200, 'carol was added');
  // A broken file leaves the keys as they were.
  fs.writeFileSync(keys, 'just-one-word\n');
  s.proc.kill('SIGHUP');
  await sleep(700);
  assert.equal((await freshRequest(s.port, as('sk-carol-0123456789'))).status, 200);
  const log = s.log();
  assert.match(log, /key=carol/);
  assert.match(log, /key=alice/);
  assert.doesNotMatch(log, /sk-(alice|bob|carol|mallory)/, 'a key was written to the log');
});

test('TLS: the openai client over https with a test CA works; plain http gets no answer', async () => {
  const f = (n) => path.join(work, n);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
       '-subj', '/CN=cohort test CA', '-keyout', f('ca.key'), '-out', f('ca.pem'));
  ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1',
       '-keyout', f('server.key'), '-out', f('server.csr'));
  fs.writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ossl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
       '-days', '1', '-extfile', f('ext.cnf'), '-out', f('server.pem'));
  const s = await serve(['--tls-cert', f('server.pem'), '--tls-key', f('server.key'), '--api-key', 'tls-key-123']);
  assert.match(s.base, /^https:/);
  const run = (env) => new Promise((resolve) => {
    execFile(process.execPath, [path.join(here, 'tls_client.mjs'), s.base, 'tls-key-123'],
             { env: { ...process.env, ...env }, cwd: here, timeout: 60000 },
             (err, stdout) => resolve(JSON.parse(stdout || JSON.stringify({ error: String(err) }))));
  });
  const trusted = await run({ NODE_EXTRA_CA_CERTS: f('ca.pem') });
  assert.equal(trusted.error, undefined, JSON.stringify(trusted));
  assert.ok(trusted.text.length > 0);
  // Without the CA the client refuses the certificate: the server is not trusted by accident.
  const untrusted = await run({ NODE_EXTRA_CA_CERTS: '' });
  assert.ok(untrusted.error, JSON.stringify(untrusted));
  // Plain HTTP to the TLS port: no HTTP answer, the connection is closed.
  const plain = await rawExchange(s.port, ['GET /health HTTP/1.1\r\nHost: x\r\n\r\n'], { timeoutMs: 5000 });
  assert.doesNotMatch(plain.text, /^HTTP\//);
  assert.ok(plain.closedByServer);
  assert.ok((await freshRequest(s.port)).error, 'plain http must fail');
});

// Starts a real `cohort serve` on a free port of 127.0.0.1 for the node tests, and small
// helpers around it (metrics, raw sockets). COHORT_BIN and COHORT_TEST_DATA come from ctest.
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const testData = process.env.COHORT_TEST_DATA ?? path.join(here, '..', 'data');
export const cohortBin = process.env.COHORT_BIN ?? path.join(here, '..', '..', 'build', 'release', 'bin', 'cohort');
export const fixture = (name) => path.join(testData, 'fixtures', 'models', `${name}.gguf`);

// Spawns `cohort serve --port 0 ...args` and resolves once it prints its address.
export async function startServer(args, { startTimeoutMs = 60000, env = process.env, global = [] } = {}) {
  const proc = spawn(cohortBin, ['-t', '1', ...global, 'serve', '--host', '127.0.0.1', '--port', '0', ...args],
                     { stdio: ['ignore', 'ignore', 'pipe'], env });
  let log = '';
  let scheme = 'http';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), startTimeoutMs);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (https?):\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); scheme = m[1]; resolve(Number(m[2])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}):\n${log}`)); });
  });
  const base = `${scheme}://127.0.0.1:${port}`;
  return {
    port,
    base,
    proc,
    log: () => log,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
      proc.kill('SIGTERM');
      return exited;
    },
  };
}

// GET /metrics parsed into { name or name{labels}: number } (with `key` where the server has keys).
export async function metrics(base, key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const text = await (await fetch(`${base}/metrics`, { headers })).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// Waits until /metrics shows `pred` true, or `ms` passed; returns the last metrics.
export async function metricsUntil(base, pred, ms, key) {
  const deadline = Date.now() + ms;
  let m = await metrics(base, key);
  while (!pred(m) && Date.now() < deadline) {
    await sleep(10);
    m = await metrics(base, key);
  }
  return m;
}

// Sends raw bytes on a fresh TCP connection; resolves with everything the server sent back
// before closing (or before `timeoutMs`), and whether the server closed the connection.
export function rawExchange(port, chunks, { timeoutMs = 15000, delayMs = 0, endAfter = false } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let closed = false;
    let started = Date.now();  // reset on connect: time is counted from the server's accept
    const timer = setTimeout(() => { socket.destroy(); finish(); }, timeoutMs);
    function finish() {
      clearTimeout(timer);
      resolve({ text: data.toString('latin1'), closedByServer: closed, ms: Date.now() - started });
    }
    socket.on('data', (d) => { data = Buffer.concat([data, d]); });
    socket.on('error', () => {});
    socket.on('close', () => { closed = true; finish(); });
    socket.on('connect', async () => {
      started = Date.now();
      for (const c of chunks) {
        if (socket.destroyed) break;
        socket.write(c);
        if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      }
      if (endAfter) socket.end();
    });
  });
}

export const statusOf = (raw) => Number((raw.match(/^HTTP\/1\.[01] (\d{3})/) ?? [])[1] ?? 0);
export const bodyOf = (raw) => raw.slice(raw.indexOf('\r\n\r\n') + 4);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Drives the dashboard in Debian's headless chromium through playwright-core; started by
// dashboard_netns_test.sh, which runs the 3-node cluster and passes it in the environment:
// DASHBOARD_URL (node 1's page), DASHBOARD_KEY (its API key), DASHBOARD_MODEL (the GGUF
// path), DASHBOARD_VICTIM / DASHBOARD_VICTIM_PID (the node to kill), DASHBOARD_ARTIFACTS
// (where the screenshots go) and CHROMIUM. Each step checks what the page shows, not the
// JSON behind it (the instance's loading bar included), and leaves a screenshot; at the end Rebalance and Remove are pressed. Exits non-zero on the first failed step.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const url = env('DASHBOARD_URL');
const artifacts = env('DASHBOARD_ARTIFACTS');
const victim = env('DASHBOARD_VICTIM');

const log = (...a) => console.log('dashboard_test:', ...a);
let step = 0;
async function shot(page, name) {
  const file = path.join(artifacts, `${++step}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
}

const browser = await chromium.launch({
  executablePath: env('CHROMIUM'),
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
let page;
try {
  page = await browser.newPage({ viewport: { width: 1440, height: 900 } });  // a laptop screen
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('dialog', (d) => d.accept());

  // 1. Without the key the page says so; with it, 3 nodes alive and the 3 links between them.
  await page.goto(url);
  await page.locator('#connection[data-ok="false"]', { hasText: 'API key' }).waitFor({ timeout: 10000 });
  await page.locator('#api-key').fill(env('DASHBOARD_KEY'));
  await page.locator('#api-key').press('Enter');
  await page.locator('#graph .node[data-state="alive"]').nth(2).waitFor({ timeout: 30000 });
  await page.waitForFunction(() => document.querySelectorAll('#graph .link').length === 3, null, { timeout: 30000 });
  // Measured figures arrive with the nodes' first heartbeats after their benchmarks.
  await page.waitForFunction(
    () => [...document.querySelectorAll('#nodes tbody tr')].filter((r) => !r.textContent.includes('not measured')).length === 3,
    null, { timeout: 30000 });
  // A link's latency and bandwidth are measured apart (each ping, each transfer) and may reach
  // the page in different heartbeats: wait for both on every link, then check them.
  await page.waitForFunction(
    () => [...document.querySelectorAll('#graph .link-label')].every((l) => /(µs|ms) · [\d.]+ [kMG]?B\/s/.test(l.textContent)),
    null, { timeout: 30000 }).catch(() => {});
  assert.equal(await page.locator('#graph .node').count(), 3, 'three nodes drawn');
  assert.equal(await page.locator('#graph .node[data-leader="true"]').count(), 1, 'one leader');
  const linkLabels = await page.locator('#graph .link-label').allTextContents();
  for (const l of linkLabels) assert.match(l, /(µs|ms) · [\d.]+ [kMG]?B\/s/, `link label '${l}' has latency and bandwidth`);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('cohort.apiKey')), env('DASHBOARD_KEY'));
  log(`3 nodes alive, links: ${linkLabels.join(' | ')}`);
  await shot(page, 'topology');

  // 2. The planner's prediction for the demo model on 3 nodes, then placing it from the page.
  await page.locator('#place-model').fill(env('DASHBOARD_MODEL'));
  await page.locator('#place-nodes').fill('3');
  assert.ok(await page.locator('#place-submit').isDisabled(), 'Place waits for a prediction');
  await page.locator('#place-preview').click();
  await page.locator('#preview-summary', { hasText: 'Placing would choose' }).waitFor({ timeout: 30000 });
  const kinds = new Set(await page.locator('#preview tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.kind)));
  for (const k of ['tp', 'pp']) assert.ok(kinds.has(k), `prediction lists ${k} layouts (got ${[...kinds]})`);
  log(`prediction: ${await page.locator('#preview-summary').textContent()} (kinds ${[...kinds].join(', ')})`);
  await shot(page, 'prediction');
  // While it loads, the card shows a progress bar: the shares stream from the one node with the
  // file over a throttled link (dashboard_netns_test.sh), so it is seen part-way, and it never
  // goes back. The page is sampled every 50 ms from inside.
  await page.evaluate(() => {
    window.loadSamples = [];
    window.loadSampler = setInterval(() => {
      const l = document.querySelector('#instances .instance .loading');
      if (!l) return;
      const bar = l.querySelector('progress.load-bar');
      window.loadSamples.push({ phase: l.dataset.phase, percent: Number(l.dataset.percent), bar: bar ? bar.value : -1,
                                caption: l.querySelector('.load-caption').textContent });
    }, 50);
  });
  await page.locator('#place-submit').click();
  const partway = page.locator('#instances .instance .loading[data-phase="transfer"]');
  await page.waitForFunction(() => {
    const l = document.querySelector('#instances .instance .loading[data-phase="transfer"]');
    return l && Number(l.dataset.percent) > 0 && Number(l.dataset.percent) < 100;
  }, null, { timeout: 30000 });
  const caption = await partway.locator('.load-caption').textContent();
  assert.match(caption, /^transfer [\d.]+% · [\d.]+ (B|KiB|MiB) of [\d.]+ (B|KiB|MiB) · [\d.]+ (B|KiB|MiB)\/s/,
               `the loading caption '${caption}' has percent, bytes of bytes and a rate`);
  assert.doesNotMatch(await page.locator('#status').textContent(), /^place:/, 'the placement is answered without an error');
  await shot(page, 'loading');
  const card = page.locator('#instances .instance[data-state="ready"]');
  await card.waitFor({ timeout: 60000 });
  const samples = await page.evaluate(() => { clearInterval(window.loadSampler); return window.loadSamples; });
  const transfer = samples.filter((x) => x.phase === 'transfer');
  assert.ok(transfer.some((x) => x.percent > 0 && x.percent < 100 && Math.abs(x.bar - x.percent) < 0.01),
            'a progress bar part-way, at the percent it says');
  for (let i = 1; i < transfer.length; ++i) {
    assert.ok(transfer[i].percent >= transfer[i - 1].percent,
              `the progress never goes back: ${transfer[i - 1].percent}% then ${transfer[i].percent}%`);
  }
  assert.equal(await page.locator('#instances .instance[data-state="ready"] .loading').count(), 0,
               'a ready instance shows no progress bar');
  log(`loading seen in ${transfer.length} samples, '${caption}'`);
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll('#instances .instance[data-state="ready"] table.plan tbody tr');
    return new Set([...rows].map((r) => r.dataset.node)).size === 3;
  }, null, { timeout: 10000 });
  const planText = await card.locator('table.plan').textContent();
  assert.match(planText, /layers \d+–\d+ of \d+/, 'the plan shows layer ranges');
  assert.match(planText, /weights [\d.]+ (B|KiB|MiB)/, 'the plan shows weight bytes');
  log(`placed: ${await card.locator('header').textContent()}`);
  await shot(page, 'placed');

  // 3. A story streamed into the chat panel: the reply grows over many SSE events.
  await page.waitForFunction(() => !document.getElementById('chat-instance').disabled, null, { timeout: 10000 });
  await page.evaluate(() => {
    window.chatUpdates = 0;
    new MutationObserver(() => { window.chatUpdates++; })
      .observe(document.getElementById('chat-log'), { subtree: true, childList: true, characterData: true });
  });
  await page.locator('#chat-prompt').fill('Tell me a story about a little dog.');
  await page.locator('#chat-prompt').press('Enter');
  await page.locator('#chat-log .chat-msg.assistant[data-streaming="true"]').waitFor({ timeout: 10000 });
  await page.locator('#chat-log .chat-msg.assistant[data-streaming="false"]').waitFor({ timeout: 60000 });
  const story = await page.locator('#chat-log .chat-msg.assistant .chat-text').textContent();
  const updates = await page.evaluate(() => window.chatUpdates);
  assert.ok(!(await page.locator('#chat-log .chat-error').count()), `no chat error: ${story}`);
  assert.ok(story.split(/\s+/).length >= 10, `a story of some words: '${story}'`);
  assert.ok(updates >= 10, `the reply arrived in pieces (${updates} updates)`);
  log(`story in ${updates} updates: '${story.slice(0, 160)}…'`);
  // The live figures of the instance show the tokens it generated.
  await page.waitForFunction(() => {
    const f = [...document.querySelectorAll('#instances .instance .figure')].find((x) => x.textContent.startsWith('generated'));
    return f && Number(f.querySelector('.figure-value').textContent) > 0;
  }, null, { timeout: 10000 });
  await shot(page, 'chat');

  // 4. A node killed turns dead on the page within 5 s.
  const t0 = Date.now();
  process.kill(Number(env('DASHBOARD_VICTIM_PID')), 'SIGKILL');
  await page.locator(`#graph .node[data-name="${victim}"][data-state="dead"]`).waitFor({ timeout: 5000 });
  const ms = Date.now() - t0;
  await page.locator(`#nodes tr[data-name="${victim}"][data-state="dead"]`).waitFor({ timeout: 1000 });
  log(`${victim} shown dead ${ms} ms after SIGKILL`);
  await shot(page, 'node-dead');

  // 5. Rebalance and Remove from the instance's card (Remove asks first; the dialog is accepted).
  await page.locator('#instances .instance button', { hasText: 'Rebalance' }).click();
  await page.locator('#status', { hasText: 'rebalancing stories260K' }).waitFor({ timeout: 5000 });
  await page.locator('#instances .instance button', { hasText: 'Remove' }).click();
  await page.locator('#status', { hasText: 'removed stories260K' }).waitFor({ timeout: 5000 });
  await page.locator('#instances', { hasText: 'No instance yet' }).waitFor({ timeout: 5000 });
  log('rebalanced and removed from the page');
  assert.deepEqual(pageErrors, [], 'no script error on the page');
  log('PASS');
} catch (e) {
  if (page) await shot(page, 'failure').catch(() => {});
  console.error('dashboard_test: FAIL:', e.message);
  process.exitCode = 1;
} finally {
  await browser.close();
}

// The hub's page in headless Chromium (playwright-core, as page_test.mjs): a hub with two
// pods, one of them named "<b>x</b>". The page lists both with their names (as text, not
// markup), models and tok/s, draws fields the JSON lacks as "—", survives odd JSON, and
// drops the pod that is killed once the hub has dropped it.
// Run by tests/hub_page_test.sh: HERD_HUB_URL, HERD_KILL_PID (the "<b>x</b>" pod), and
// HERD_SCREENSHOT (optional: where to save a picture of the page with both pods).
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const url = process.env.HERD_HUB_URL;
const killPid = Number(process.env.HERD_KILL_PID);
const strangeName = '<b>x</b>';
const dash = '—';

// The page's table columns, in order (web/hub/index.html).
const kColumns = ['name', 'short_id', 'models', 'decode', 'prefill', 'slots', 'uptime', 'rtt',
  'reputation', 'requests', 'tokens', 'earned', 'pending'];
// Columns drawn from one field of a pod each: "—" exactly when the JSON lacks the field.
const kOptional = { rtt: 'rtt_ms', reputation: 'reputation', requests: 'requests',
  tokens: 'tokens_served', earned: 'credits_earned', pending: 'credits_pending' };

const network = async () => (await fetch(url + '/api/network')).json();

// The pods table as the user sees it: one object of cell texts per pod row.
async function podRows(page) {
  return page.$$eval('#pods tbody tr[data-pod]', (rows, columns) => rows.map((tr) => {
    const row = { id: tr.dataset.pod, flagged: tr.classList.contains('flagged') };
    [...tr.cells].forEach((td, i) => { row[columns[i]] = td.textContent; });
    return row;
  }), kColumns);
}

// The files of the page: content types, the security headers, a 304 for a known ETag.
async function checkFiles() {
  for (const [path, type] of [['/', 'text/html'], ['/hub.js', 'text/javascript'],
    ['/hub.css', 'text/css']]) {
    const r = await fetch(url + path);
    assert.equal(r.status, 200, path);
    assert.ok(r.headers.get('content-type').startsWith(type), `${path}: ${r.headers.get('content-type')}`);
    assert.equal(r.headers.get('cache-control'), 'no-cache', path);
    assert.match(r.headers.get('content-security-policy'), /default-src 'self'/, path);
    const again = await fetch(url + path, { headers: { 'If-None-Match': r.headers.get('etag') } });
    assert.equal(again.status, 304, `${path} with its ETag`);
  }
  // The page loads nothing from elsewhere.
  const html = await (await fetch(url + '/')).text();
  assert.doesNotMatch(html, /(src|href)="(https?:)?\/\//);
}

await checkFiles();
const before = await network();
assert.equal(before.pods.length, 2, JSON.stringify(before));
// The server's page is web/*, not web/hub/: a pod has no /hub nor /hub.js.
for (const path of ['/hub', '/hub.js']) {
  assert.equal((await fetch(before.pods[0].url + path)).status, 404, `pod ${path}`);
}

const defaultBrowser = process.platform === 'darwin'
  ? '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome'
  : '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || defaultBrowser,
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  await page.goto(url + '/');
  await page.waitForFunction(() => document.querySelectorAll('#pods tbody tr[data-pod]').length === 2);

  // Both pods, by name and model, with the speeds they measured.
  const net = await network();
  const rows = await podRows(page);
  assert.equal(rows.length, 2);
  for (const pod of net.pods) {
    const row = rows.find((r) => r.id === pod.id);
    assert.ok(row, `pod ${pod.name} is not listed: ${JSON.stringify(rows)}`);
    assert.ok(row.name.startsWith(pod.name), `${row.name} vs ${pod.name}`);
    assert.equal(row.models, pod.models.map((m) => m.name).join(', '));
    assert.ok(pod.id.startsWith(row.short_id.slice(0, 8)), row.short_id);
    for (const [column, field] of [['decode', 'decode_tokens_per_s'], ['prefill', 'prefill_tokens_per_s']]) {
      const shown = Number(row[column].replace(/,/g, ''));
      assert.ok(shown > 0, `${pod.name} ${column}: ${row[column]}`);
      assert.ok(Math.abs(shown - pod[field]) <= Math.max(0.051, pod[field] * 0.01),
                `${pod.name} ${column}: ${row[column]} vs ${pod[field]}`);
    }
    assert.match(row.slots, new RegExp(`^\\d+ / ${pod.slots}$`));
    assert.match(row.uptime, /^\d+ s$|min|h/);
    for (const [column, field] of Object.entries(kOptional)) {
      if (pod[field] === undefined) assert.equal(row[column], dash, `${column} without ${field}`);
      else assert.notEqual(row[column], dash, `${column} with ${field} = ${pod[field]}`);
    }
    const low = pod.flagged === true || pod.reputation < 0.5 || pod.failed_verifications > 0;
    assert.equal(row.flagged, low, `${pod.name} flagged`);
  }
  assert.deepEqual(rows.map((r) => r.models).sort(), ['alpha', 'beta']);

  // A stranger's name is text: no <b> element in the table, the markup escaped.
  const strange = rows.find((r) => r.name.startsWith(strangeName));
  assert.ok(strange, `no row named ${strangeName}: ${JSON.stringify(rows)}`);
  assert.equal(await page.$$eval('#pods tbody b', (b) => b.length), 0);
  assert.ok((await page.$$eval('#pods td.name', (tds) => tds.map((td) => td.innerHTML)))
    .some((h) => h.startsWith('&lt;b&gt;x&lt;/b&gt;')));

  // The summary.
  assert.equal(await page.textContent('#sum-pods'), '2');
  assert.equal(await page.textContent('#sum-models'), '2');
  const hub = net.hub ?? {};
  if (hub.requests?.total === undefined) assert.equal(await page.textContent('#sum-requests'), dash);
  else assert.ok(Number((await page.textContent('#sum-requests')).replace(/,/g, '')) >= 1);
  if (hub.verification?.checked === undefined) assert.equal(await page.textContent('#sum-verified'), dash);
  if (hub.uptime_seconds === undefined) assert.equal(await page.textContent('#sum-uptime'), dash);

  // The requests flowing: the completion the test sent through the hub, once the hub lists them.
  const recent = await page.$$eval('#recent tbody tr', (trs) => trs.map((tr) => tr.textContent));
  if (net.recent === undefined) {
    assert.deepEqual(recent, ['This hub does not list its requests.']);
  } else {
    assert.ok(recent.some((r) => r.includes('alpha') && r.includes('pod-a')), JSON.stringify(recent));
  }
  if (process.env.HERD_SCREENSHOT) await page.screenshot({ path: process.env.HERD_SCREENSHOT, fullPage: true });

  // Odd JSON never breaks the page: wrong types, nulls, a script in a name, not an object.
  const odd = {
    hub: { uptime_seconds: 'long', requests: [], verification: { checked: 12, failed: 3, sample_rate: 0.05 } },
    pods: [null, 7, 'pod', [],
      { id: 'odd-1', name: { a: 1 }, models: 'all', slots: 'NaN', active: null, decode_tokens_per_s: -1,
        prefill_tokens_per_s: 'fast', uptime_seconds: 1e300, rtt_ms: {}, reputation: 'high',
        credits_earned: Infinity },
      { id: 'odd-2', name: '<img src=x onerror="window.__pwned=1">', url: 'javascript:alert(1)',
        models: [null, 5, { name: 7 }, { name: 'm', n_ctx: 'big' }], reputation: 0.1, failed_verifications: 2,
        memory_bytes: 3e9, last_seen_seconds: 0.5, tokens_served: 1234567, credits_pending: 0.125 }],
    recent: [null, 3, { at_ms: 'now', status: 503, seconds: 0 },
      { at_ms: Date.now(), model: 'm', pod: 'odd-2', prompt_tokens: 5, completion_tokens: 10, seconds: 2,
        status: 'ok' }],
  };
  for (const body of [JSON.stringify(odd), 'null', '[]', '"text"', '{"pods": {}, "recent": "x"}']) {
    let served = false;
    await page.route('**/api/network', (route) => {
      served = true;
      route.fulfill({ status: 200, contentType: 'application/json', body });
    });
    while (!served) await new Promise((r) => setTimeout(r, 100));
    await page.waitForTimeout(300);  // drawn (the next poll is 2 s away, and routed too)
    assert.deepEqual(errors, [], `after ${body}`);
    if (body === JSON.stringify(odd)) {
      const shown = await podRows(page);
      assert.equal(shown.length, 2, JSON.stringify(shown));
      const [one, two] = shown;
      assert.equal(one.name, dash);
      assert.equal(one.models, dash);
      assert.equal(one.decode, dash);
      assert.equal(one.reputation, dash);
      assert.equal(one.earned, dash);
      assert.equal(one.flagged, false);
      assert.ok(two.name.startsWith('<img src=x'), two.name);
      assert.equal(two.flagged, true);
      assert.equal(two.models, '7, m');
      assert.equal(two.reputation, '0.10');
      assert.equal(two.tokens, '1,234,567');
      assert.equal(await page.$$eval('#pods tbody img', (i) => i.length), 0);
      assert.equal(await page.textContent('#sum-verified'), '12');
      assert.equal(await page.textContent('#sum-verified-detail'), '3 failed · 5% sampled');
      assert.equal(await page.textContent('#sum-uptime'), dash);
      const flows = await page.$$eval('#recent tbody tr', (trs) => trs.map((tr) => tr.textContent));
      assert.equal(flows.length, 4, JSON.stringify(flows));
      assert.ok(flows[0].includes('odd-2') && flows[0].includes('5.0'), flows[0]);
    }
    await page.unroute('**/api/network');
  }
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  // The hub failing: the page says so and keeps its figures.
  await page.route('**/api/network', (route) => route.fulfill({ status: 500, body: 'down' }));
  await page.waitForSelector('#status.error');
  assert.match(await page.textContent('#status'), /does not answer \(HTTP 500\)/);
  await page.unroute('**/api/network');
  await page.waitForFunction(() => document.querySelectorAll('#pods tbody tr[data-pod]').length === 2);
  errors.splice(0, errors.length, ...errors.filter((e) => !/status of 500/.test(e)));

  // A pod killed is dropped by the hub (--pod-timeout 3), then by the page.
  process.kill(killPid, 'SIGKILL');
  await page.waitForFunction(() => document.querySelectorAll('#pods tbody tr[data-pod]').length === 1,
                             null, { timeout: 20000 });
  const left = await podRows(page);
  assert.ok(left[0].name.startsWith('pod-a'), JSON.stringify(left));
  assert.ok(!(await page.textContent('#pods')).includes(strangeName));
  assert.equal(await page.textContent('#sum-pods'), '1');
  assert.deepEqual(errors, []);
  console.log('hub_page: 2 pods listed by name, model and tok/s, a stranger\'s markup shown as text,',
              'odd JSON drawn as "—", the killed pod dropped');
} finally {
  await browser.close();
}

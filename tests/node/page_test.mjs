// The web page in headless Chromium (Debian's chromium, or Google Chrome on macOS, driven by
// playwright-core): a reply streams into the chat, the stop button ends a long one, the
// cluster view shows the node.
// Run by tests/serve_node_test.sh.
// playwright-core is pinned at 1.61.1 (package.json), the last release that runs on Node.js
// 18, the one Debian 12 ships (scripts/install-deps); 1.62 and later refuse to start below
// Node.js 20. It drives a newer Chromium over CDP well enough for what this test does.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const url = process.env.HERD_URL;
const defaultBrowser = process.platform === 'darwin'
  ? '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome'
  : '/usr/bin/chromium';
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || defaultBrowser,
  args: ['--no-sandbox'],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url + '/');
  await page.waitForFunction(() => document.querySelector('#model').options.length > 0);
  assert.equal(await page.inputValue('#model'), 'serve-e2e');

  // A message the (random-weight) model answers at length, greedily, as the page asks.
  let message = null;
  for (let i = 0; i < 20 && !message; i++) {
    const candidate = `Hello from the browser ${i}`;
    const r = await (await fetch(url + '/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: candidate }], max_tokens: 400,
        temperature: 0, chat_template_kwargs: { enable_thinking: true } }),
    })).json();
    if (r.choices[0].finish_reason === 'length') message = candidate;
  }
  assert.ok(message, 'no message gets a long reply');

  // A reply streams in: the assistant message grows over several renders, then is done.
  await page.fill('#max_tokens', '400');
  await page.fill('#temperature', '0');
  await page.fill('#input', message);
  const lengths = page.evaluate(() => new Promise((resolve) => {
    const seen = [];
    const observer = new MutationObserver(() => {
      const m = document.querySelector('.msg.assistant .body');
      if (m) seen.push(m.textContent.length);
      if (document.querySelector('.msg.assistant.done')) { observer.disconnect(); resolve(seen); }
    });
    observer.observe(document.querySelector('#messages'), { childList: true, subtree: true, characterData: true, attributes: true });
  }));
  await page.click('#send');
  const seen = await lengths;
  // Part of the reply was on the page before the rest had come.
  const final = seen[seen.length - 1];
  assert.ok(seen.some((n) => n > 0 && n < final), `the reply did not stream: ${JSON.stringify(seen)}`);
  assert.equal(await page.textContent('.msg.user .body'), message);
  const reply = await page.textContent('.msg.assistant .body');
  assert.ok(reply.length > 0);
  assert.match(await page.textContent('.msg.assistant .meta'), /finish: length · 400 tokens/);

  // Stop: a long reply is cut when the button is pressed, and the slot is freed. The page's
  // request gets ignore_eos (the page has no such setting), so that the model cannot end
  // the reply on its own before the click lands on a busy machine.
  const longReplies = async (route) => {
    const body = JSON.parse(route.request().postData());
    await route.continue({ postData: JSON.stringify({ ...body, ignore_eos: true }) });
  };
  await page.route('**/v1/chat/completions', longReplies);
  await page.click('#clear');
  await page.fill('#max_tokens', '4000');
  await page.fill('#input', message);  // the same long reply, from a new chat
  await page.click('#send');
  await page.waitForFunction(() => document.querySelector('.msg.assistant .body')?.textContent.length > 10);
  assert.equal(await page.isEnabled('#stop'), true);
  await page.click('#stop');
  await page.waitForSelector('.msg.assistant.done');
  assert.match(await page.textContent('.msg.assistant .meta'), /finish: stopped/);
  let health;
  for (let i = 0; i < 100; i++) {
    health = await (await fetch(url + '/health')).json();
    if (health.running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(health.running, 0, 'the stopped reply still holds a slot');
  await page.unroute('**/v1/chat/completions', longReplies);

  // Markdown renders; HTML in a message is shown as text, never run.
  await page.click('#clear');
  await page.fill('#max_tokens', '1');
  await page.fill('#input', '**bold** and `code` <img src=x onerror="window.injected=1">');
  await page.click('#send');
  await page.waitForSelector('.msg.assistant.done');
  assert.equal(await page.textContent('.msg.user .body strong'), 'bold');
  assert.equal(await page.textContent('.msg.user .body code'), 'code');
  assert.equal(await page.locator('.msg.user .body img').count(), 0);
  assert.match(await page.textContent('.msg.user .body'), /<img src=x/);
  assert.equal(await page.evaluate(() => window.injected), undefined);

  // The cluster view: the local node with its layers and live numbers.
  await page.click('#tab-cluster');
  await page.waitForSelector('#node-local');
  assert.match(await page.textContent('#node-local .layer-range'), /0–3 of 4/);
  assert.equal(await page.locator('#node-local .layers span').count(), 4);
  assert.equal(await page.isVisible('#view-chat'), false);
  await page.screenshot({ path: process.env.HERD_SCREENSHOT || '/tmp/herd-page.png' });
  assert.deepEqual(errors, []);
  console.log('page_test: all checks passed');
} finally {
  await browser.close();
}

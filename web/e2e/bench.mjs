// bench.mjs URL MODE STATE - the console's budgets in chromium (bench/web.sh
// runs it). MODE "baseline" (one instance exists): the bytes of JavaScript
// and CSS gzipped, the instances page's time with one row, axe-core on every
// page; saved into STATE. MODE "full" (N instances): the instances page's
// time with N rows, printed beside the baseline's, as a ratio.
import { readFileSync, writeFileSync } from 'node:fs';
import { axeSerious, launch, newPage } from './lib.mjs';

const [url, mode, state] = process.argv.slice(2);
const rounds = Number(process.env.ROUNDS ?? 5);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Bytes of every script and stylesheet index.html loads, as sent gzipped. */
async function assetBytes() {
  const html = await (await fetch(url + '/')).text();
  let total = 0;
  for (const [, path] of html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)) {
    const res = await fetch(url + path, { headers: { 'Accept-Encoding': 'gzip' } });
    // fetch decompresses; Content-Length is what crossed the wire
    total += Number(res.headers.get('content-length'));
    await res.arrayBuffer();
  }
  return total;
}

/**
 * One cold load of #/instances in a new tab: ms from navigation start until
 * all `rows` rows are drawn, and ms of that after the list's answer arrived.
 */
async function instancesPage(browser, rows) {
  const page = await newPage(browser);
  await page.goto(url + '/#/instances');
  await page.waitForFunction((n) => document.querySelectorAll('main table tbody tr').length >= n, rows, {
    polling: 'raf',
    timeout: 60000,
  });
  const t = await page.evaluate(() => {
    const now = performance.now();
    const list = performance
      .getEntriesByType('resource')
      .filter((e) => e.name.endsWith('/api/v1/replicaSet'))
      .map((e) => e.responseEnd);
    return { total: now, afterData: now - (list.length ? Math.min(...list) : now) };
  });
  await page.context().close();
  return t;
}

async function timeInstances(browser, rows) {
  const runs = [];
  for (let i = 0; i < rounds; i++) runs.push(await instancesPage(browser, rows));
  return { total: median(runs.map((r) => r.total)), afterData: median(runs.map((r) => r.afterData)) };
}

const browser = await launch();
const count = (await (await fetch(url + '/api/v1/replicaSet')).json()).data.replicaSets.length;
if (mode === 'baseline') {
  const bytes = await assetBytes();
  console.log(`JavaScript and CSS, gzipped: ${(bytes / 1024).toFixed(1)} KB (budget 150 KB: ${((bytes / (150 * 1024)) * 100).toFixed(0)}%)`);
  const serious = {};
  const page = await newPage(browser);
  for (const p of ['overview', 'instances', 'volumes', 'usage']) {
    await page.goto(`${url}/#/${p}`);
    await page.locator('main h1').first().waitFor();
    await page.waitForTimeout(300);
    serious[p] = (await axeSerious(page)).map((v) => v.id);
  }
  console.log(`axe-core serious or critical violations: ${JSON.stringify(serious)}`);
  const t = await timeInstances(browser, count);
  console.log(`instances page, ${count} row(s): ${t.total.toFixed(0)} ms from navigation (${t.afterData.toFixed(0)} ms after the list arrived); median of ${rounds}`);
  writeFileSync(state, JSON.stringify({ count, ...t }));
} else {
  const base = JSON.parse(readFileSync(state, 'utf8'));
  const t = await timeInstances(browser, count);
  console.log(`instances page, ${count} rows: ${t.total.toFixed(0)} ms from navigation (${t.afterData.toFixed(0)} ms after the list arrived); median of ${rounds}; budget 500 ms`);
  console.log(`ratio to ${base.count} row(s) in this run: ${(t.total / base.total).toFixed(2)}x from navigation, ${(t.afterData / Math.max(base.afterData, 1)).toFixed(2)}x after the list arrived`);
}
await browser.close();

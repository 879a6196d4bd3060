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

/** In the page: ms since navigation once `n` rows are drawn, and when the list arrived. */
async function rowsDrawn(page, n) {
  await page.waitForFunction((k) => document.querySelectorAll('main table tbody tr').length >= k, n, {
    polling: 'raf',
    timeout: 60000,
  });
  return page.evaluate(() => {
    const list = performance
      .getEntriesByType('resource')
      .filter((e) => e.name.endsWith('/api/v1/replicaSet'))
      .map((e) => e.responseEnd);
    return { at: performance.now(), list: list.length ? Math.min(...list) : 0 };
  });
}

/**
 * One cold load of #/instances in a new tab: when the first screenful (20
 * rows, what a 800 px window shows) and when all `rows` rows are drawn, in
 * ms from navigation start and after the list's answer arrived.
 */
async function instancesPage(browser, rows) {
  const page = await newPage(browser);
  await page.goto(url + '/#/instances');
  const first = await rowsDrawn(page, Math.min(rows, 20));
  const all = await rowsDrawn(page, rows);
  await page.context().close();
  return { first: first.at, firstAfterData: first.at - first.list, total: all.at, afterData: all.at - all.list };
}

async function timeInstances(browser, rows) {
  const runs = [];
  for (let i = 0; i < rounds; i++) runs.push(await instancesPage(browser, rows));
  const m = (k) => median(runs.map((r) => r[k]));
  return { first: m('first'), firstAfterData: m('firstAfterData'), total: m('total'), afterData: m('afterData') };
}

const show = (t) =>
  `first screenful ${t.first.toFixed(0)} ms from navigation (${t.firstAfterData.toFixed(0)} ms after the list arrived), ` +
  `every row ${t.total.toFixed(0)} ms (${t.afterData.toFixed(0)} ms after the list)`;

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
  console.log(`instances page, ${count} row(s): ${show(t)}; median of ${rounds}`);
  writeFileSync(state, JSON.stringify({ count, ...t }));
} else {
  const base = JSON.parse(readFileSync(state, 'utf8'));
  const t = await timeInstances(browser, count);
  console.log(`instances page, ${count} rows: ${show(t)}; median of ${rounds}; budget 500 ms`);
  console.log(`ratio to ${base.count} row(s) in this run: first screenful ${(t.first / base.first).toFixed(2)}x, ` +
    `every row ${(t.total / base.total).toFixed(2)}x (from navigation)`);
}
await browser.close();

// What the console's browser tests share: Debian's chromium driven by
// playwright-core, logging in through the form, calling the API directly
// (for changes made "elsewhere"), waiting for what a user would see, and
// collecting what the page must never do (errors, Content-Security-Policy
// violations).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);

export const env = {
  url: process.env.GPUBOX_URL,
  admin: process.env.GPUBOX_ADMIN_TOKEN,
  viewer: process.env.GPUBOX_VIEWER_TOKEN,
  image: process.env.GPUBOX_TEST_IMAGE ?? 'gpubox-test:latest',
  prefix: process.env.GPUBOX_PREFIX ?? 'e2web',
  shots: process.env.GPUBOX_SCREENSHOTS || null,
  chromium: process.env.CHROMIUM ?? '/usr/bin/chromium',
};

export async function launch() {
  return chromium.launch({
    executablePath: env.chromium,
    headless: true,
    // root in a test sandbox: chromium's own sandbox needs user namespaces
    // it may not get; /dev/shm may be small there
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

/** Every page made, for run.mjs to report the API's failures it saw. */
export const pages = [];

/**
 * A new tab of its own (its own sessionStorage), recording page errors,
 * console errors and CSP violations into `problems`. An API answer that is
 * an error is not the page's problem (the page shows it; chromium logs it
 * as "Failed to load resource"): 5xx ones go to `serverErrors`, reported
 * with the scenario's result.
 */
export async function newPage(browser, { width = 1280, height = 800 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.problems = [];
  page.serverErrors = [];
  pages.push(page);
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/the server responded with a status of \d\d\d/.test(m.text()))
      page.problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 500) page.serverErrors.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  });
  return page;
}

/** Nothing went wrong in the page: no script error, no CSP violation. */
export function assertClean(page) {
  assert.deepEqual(page.problems, [], 'the page reported problems');
}

export async function login(page, token) {
  await page.goto(env.url + '/');
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('navigation', { name: 'Pages' }).waitFor();
}

/** The API, from outside the browser (another client). */
export async function api(method, path, body, token = env.admin) {
  const res = await fetch(env.url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const envelope = await res.json();
  return { status: res.status, ...envelope };
}

export async function apiOk(method, path, body, token) {
  const r = await api(method, path, body, token);
  assert.equal(r.code, 200, `${method} ${path}: ${r.msg}`);
  return r.data;
}

/** Waits until fn() is truthy (returning it), or fails with what was waited for. */
export async function until(what, fn, timeoutMs = 10000, stepMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's check of the page as it is; returns the violations of impact
 * serious or critical. The script is evaluated through the DevTools
 * protocol, which the page's Content-Security-Policy does not govern.
 */
export async function axeSerious(page) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

export async function screenshot(page, name) {
  if (!env.shots) return;
  await page.screenshot({ path: `${env.shots}/${name}.png`, fullPage: true });
}

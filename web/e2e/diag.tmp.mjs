import { launch, newPage } from './lib.mjs';
const url = process.argv[2];
const browser = await launch();
for (let i = 0; i < 3; i++) {
  const page = await newPage(browser);
  await page.goto(url + '/#/instances');
  await page.waitForFunction(() => document.querySelectorAll('main table tbody tr').length >= 1, null, { polling: 'raf' });
  const t = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    return { now: performance.now(), nav: { rs: nav.responseStart, re: nav.responseEnd, dcl: nav.domContentLoadedEventEnd },
      res: performance.getEntriesByType('resource').map((e) => [e.name.replace(/^https?:\/\/[^/]+/, ''), Math.round(e.startTime), Math.round(e.responseEnd)]) };
  });
  console.log(JSON.stringify(t));
  await page.context().close();
}
await browser.close();

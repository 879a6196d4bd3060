// run.mjs SCENARIO... - run the console's browser scenarios (scenarios.mjs)
// against the gpuboxd at $GPUBOX_URL; tests/e2e/test_console.py starts that
// gpuboxd and runs each scenario as a test. Exit 0 when all pass.
import { launch, pages } from './lib.mjs';
import { scenarios } from './scenarios.mjs';

const names = process.argv.slice(2);
const unknown = names.filter((n) => !scenarios[n]);
if (!names.length || unknown.length) {
  console.error(`usage: node run.mjs SCENARIO...; unknown: ${unknown.join(' ')}; known: ${Object.keys(scenarios).join(' ')}`);
  process.exit(2);
}
const browser = await launch();
let failed = 0;
for (const name of names) {
  const start = Date.now();
  pages.length = 0;
  try {
    await scenarios[name](browser);
    console.log(`ok ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAILED ${name} (${Date.now() - start} ms): ${e.stack ?? e}`);
  }
  const serverErrors = pages.flatMap((p) => p.serverErrors);
  if (serverErrors.length) console.log(`  the API answered 5xx: ${serverErrors.join('; ')}`);
}
await browser.close();
process.exit(failed ? 1 : 0);

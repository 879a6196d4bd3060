// The console's browser scenarios: what an admin, a user and a viewer do,
// as they would do it (labels, buttons, what shows), against a real gpuboxd
// and dockerd. Each is a function of the browser; run.mjs runs them.
import assert from 'node:assert/strict';
import { api, apiOk, assertClean, axeSerious, env, login, newPage, screenshot, until } from './lib.mjs';

const P = env.prefix;
const gpuBar = (page, index) => page.getByRole('meter', { name: `GPU ${index} memory`, exact: true });

/** The tenants a card's bar shows. */
async function tenantsOn(page, index) {
  return gpuBar(page, index).locator('[data-tenant]').evaluateAll((els) => els.map((e) => e.dataset.tenant));
}

/** The card indexes a set holds, from the API. */
async function cardsOf(name) {
  const info = (await apiOk('GET', `/api/v1/replicaSet/${name}`)).info;
  const devices = (await apiOk('GET', '/api/v1/resources/gpus')).devices;
  return info.gpus.map((u) => devices.find((d) => d.uuid === u).index);
}

async function purge(name) {
  await api('DELETE', `/api/v1/replicaSet/${name}?purge=true`);
}

/** A running set made through the API (a change made elsewhere). */
async function createSet(name, gpuCount = 0, token = env.admin) {
  return apiOk('POST', '/api/v1/replicaSet', { replicaSetName: name, imageName: env.image, gpuCount,
    cmd: ['sleep', '3600'] }, token);
}

/** A row of the instances table, by the instance's name. */
const row = (page, name) => page.getByRole('row').filter({ has: page.getByRole('link', { name, exact: true }) });

export const scenarios = {
  async login(browser) {
    const page = await newPage(browser);
    await page.goto(env.url + '/');
    await page.getByLabel('API token').fill('gpbx_' + '0'.repeat(48));
    await page.getByRole('button', { name: 'Log in' }).click();
    // the API's own words, on the form, and still logged out
    await page.getByRole('alert').filter({ hasText: /token/i }).waitFor();
    await login(page, env.admin);
    await page.getByText('alice').first().waitFor();
    // the token lives in this tab only: a new tab asks again
    const other = await newPage(browser);
    await other.goto(env.url + '/');
    await other.getByLabel('API token').waitFor();
    // a reload keeps this tab logged in
    await page.reload();
    await page.getByRole('navigation', { name: 'Pages' }).waitFor();
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('API token').waitFor();
    assertClean(page);
  },

  async revoked(browser) {
    const user = `${P}_rev`;
    await api('DELETE', `/api/v1/users/${user}`);
    const made = await apiOk('POST', '/api/v1/users', { name: user, role: 'user' });
    const page = await newPage(browser);
    await login(page, made.token);
    await page.getByRole('link', { name: 'Instances' }).click();
    await apiOk('DELETE', `/api/v1/users/${user}/token`);
    // the next poll answers 401: back to the login, saying why, within 2 s
    const start = Date.now();
    await page.getByLabel('API token').waitFor({ timeout: 2500 });
    assert.ok(Date.now() - start < 2500);
    await page.getByText(/Logged out/).waitFor();
    await apiOk('DELETE', `/api/v1/users/${user}`);
  },

  async volumes(browser) {
    const name = `${P}_vol`;
    await api('DELETE', `/api/v1/volumes/${name}`);
    const page = await newPage(browser);
    await login(page, env.admin);
    await page.getByRole('link', { name: 'Volumes' }).click();
    const form = page.getByRole('region', { name: 'Create volume' });
    await form.getByLabel('Name').fill(name);
    await form.getByLabel('Size').fill('64MB');
    await page.getByRole('button', { name: 'Create volume' }).click();
    const bar = page.getByRole('meter', { name: `${name} used` });
    await bar.waitFor();
    assert.equal(Number(await bar.getAttribute('aria-valuemax')), 64 * 1024 * 1024);
    // the same name again: the API's message under the form, the fields kept
    await form.getByLabel('Name').fill(name);
    await form.getByLabel('Size').fill('64MB');
    await page.getByRole('button', { name: 'Create volume' }).click();
    await form.getByRole('alert').filter({ hasText: 'exists' }).waitFor();
    assert.equal(await form.getByLabel('Name').inputValue(), name);
    // resize: 64 MB -> 128 MB
    await page.getByRole('button', { name: `Resize ${name}` }).click();
    const dialog = page.getByRole('dialog', { name: `Resize ${name}` });
    await dialog.getByLabel('New size').fill('128MB');
    await dialog.getByRole('button', { name: 'Resize' }).click();
    await until('the bar to show 128 MB', async () => Number(await bar.getAttribute('aria-valuemax')) === 128 * 1024 * 1024);
    assert.equal((await apiOk('GET', `/api/v1/volumes/${name}`)).info.size, 128 * 1024 * 1024);
    // delete asks first; Cancel changes nothing
    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await api('GET', `/api/v1/volumes/${name}`)).code, 200);
    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await bar.waitFor({ state: 'detached' });
    // the list may drop it while the delete still runs: the answer follows
    await until('the volume to be gone', async () => (await api('GET', `/api/v1/volumes/${name}`)).code === 1100);
    assertClean(page);
  },

  async instance_life(browser) {
    const name = `${P}_life`;
    await purge(name);
    const page = await newPage(browser);
    await login(page, env.admin);
    await page.getByRole('link', { name: 'Instances' }).click();
    await page.getByRole('button', { name: 'Create instance' }).click();
    const form = page.getByRole('form', { name: 'Create instance' });
    await form.getByLabel('Name').fill(name);
    await form.getByLabel('Image').fill(env.image);
    await form.getByLabel('Whole cards').check();
    await form.getByLabel('GPU count').fill('1');
    await form.getByLabel('Command').fill('sleep 3600');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    // the instance's page, running, with its card
    await page.waitForURL(`**/#/instances/${name}`);
    const state = page.locator('main h1 + .state, main .state').first();
    await until('the instance to run', async () => (await state.textContent()).includes('running'), 30000);
    const [card] = await cardsOf(name);
    assert.equal((await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.gpus.length, 1);
    // its card's bar gains the tenant
    await page.getByRole('link', { name: 'Overview' }).click();
    await until(`card ${card}'s bar to show ${name}`, async () => (await tenantsOn(page, card)).includes(name));

    // scale to two cards
    await page.goto(`${env.url}/#/instances/${name}`);
    await page.getByRole('button', { name: 'Scale' }).click();
    const scale = page.getByRole('dialog', { name: `Scale ${name}` });
    await scale.getByLabel('GPUs').fill('2');
    await scale.getByRole('button', { name: 'Apply' }).click();
    await until('two cards', async () => (await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.gpus.length === 2, 60000);
    // the operation's steps, from /api/v1/operations/{id}, ending done
    const steps = page.getByRole('status', { name: 'Steps' });
    await steps.getByText(`patch ${name}: done`).waitFor();
    assert.ok((await steps.locator('li.step-done').count()) >= 3, 'the patch lists its steps');
    assert.equal(await steps.locator('li.step-pending').count(), 0);
    const cards = await cardsOf(name);
    await page.getByRole('link', { name: 'Overview' }).click();
    for (const c of cards) await until(`card ${c}'s bar to show ${name}`, async () => (await tenantsOn(page, c)).includes(name));

    // stop (the cards go back), start
    await page.goto(`${env.url}/#/instances/${name}`);
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await until('stopped', async () => (await state.textContent()).includes('stopped'), 30000);
    assert.deepEqual((await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.gpus, []);
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await until('running again', async () => (await state.textContent()).includes('running'), 30000);
    assert.equal((await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.gpus.length, 2);

    // run a command: its output and exit code
    await page.getByRole('button', { name: 'Run command' }).click();
    const exec = page.getByRole('dialog', { name: `Execute in ${name}` });
    await exec.getByLabel('Command').fill('echo hello-from-the-console; echo to-stderr >&2; exit 3');
    await exec.getByRole('button', { name: 'Run' }).click();
    await exec.getByText('Exit code 3').waitFor({ timeout: 30000 });
    await exec.getByText('hello-from-the-console').waitFor();
    await exec.getByText('to-stderr').waitFor();
    await exec.getByRole('button', { name: 'Close' }).first().click();

    // delete, after saying yes
    await page.getByRole('button', { name: 'Delete' }).click();
    const confirm = page.getByRole('dialog', { name: `Delete ${name}?` });
    await confirm.getByRole('button', { name: 'Delete' }).click();
    await page.waitForURL(/#\/instances$/);
    await row(page, name).waitFor({ state: 'detached' });
    assert.equal((await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.state, 'deleted');
    assertClean(page);
    await purge(name);
  },

  async viewer(browser) {
    const name = `${P}_seen`;
    await purge(name);
    await createSet(name, 1);
    const page = await newPage(browser);
    await login(page, env.viewer);
    await page.getByText('viewer').first().waitFor();
    const forbidden = ['Create instance', 'Create volume', 'Scale', 'Stop', 'Start', 'Pause', 'Continue',
      'Run command', 'Commit', 'Roll back', 'Delete', 'Cordon'];
    const noButtons = async (where) => {
      for (const label of forbidden) {
        const n = await page.getByRole('button', { name: label }).count();
        assert.equal(n, 0, `${where}: a viewer sees a "${label}" button`);
      }
      assert.equal(await page.locator('main form').count(), 0, `${where}: a viewer sees a form`);
    };
    await page.getByRole('link', { name: 'Instances' }).click();
    await row(page, name).waitFor();
    await noButtons('instances');
    await page.getByRole('link', { name, exact: true }).click();
    await page.locator('main h1', { hasText: name }).waitFor();
    await page.getByText('running').first().waitFor();
    await noButtons('an instance');
    await page.getByRole('link', { name: 'Volumes' }).click();
    await page.locator('main h1', { hasText: 'Volumes' }).waitFor();
    await noButtons('volumes');
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('meter', { name: 'GPU 0 memory', exact: true }).waitFor();
    await noButtons('overview');
    // and the API agrees: its token cannot change anything
    const r = await api('PATCH', `/api/v1/replicaSet/${name}/stop`, undefined, env.viewer);
    assert.equal(r.status, 403);
    assertClean(page);
    await purge(name);
  },

  async follows(browser) {
    const name = `${P}_else`;
    await purge(name);
    const page = await newPage(browser);
    await login(page, env.admin);
    await page.getByRole('link', { name: 'Instances' }).click();
    await page.getByRole('button', { name: 'Create instance' }).waitFor();
    // made elsewhere (the API, as the CLI does): on the list within 2 s
    let t = Date.now();
    await createSet(name, 1);
    await row(page, name).waitFor({ timeout: 2000 });
    const created = Date.now() - t;
    // stopped elsewhere: the row says so within 2 s
    t = Date.now();
    await apiOk('PATCH', `/api/v1/replicaSet/${name}/stop`);
    await row(page, name).getByText('stopped').waitFor({ timeout: 2000 });
    // on the overview, a card taken elsewhere shows its tenant within 2 s
    await apiOk('PATCH', `/api/v1/replicaSet/${name}/restart`);
    await page.getByRole('link', { name: 'Overview' }).click();
    const [card] = await cardsOf(name);
    await until(`card ${card} to show ${name}`, async () => (await tenantsOn(page, card)).includes(name), 2000);
    await purge(name);
    await until(`card ${card} to be free again`, async () => !(await tenantsOn(page, card)).includes(name), 2000);
    console.log(`  seen on the list ${created} ms after the create answered`);
    assertClean(page);
  },

  async errors(browser) {
    const name = `${P}_err`;
    await purge(name);
    await createSet(name);
    const page = await newPage(browser);
    await login(page, env.admin);
    await page.getByRole('link', { name: 'Instances' }).click();
    await page.getByRole('button', { name: 'Create instance' }).click();
    const form = page.getByRole('form', { name: 'Create instance' });
    // a taken name: the API's words in the form, every field kept
    await form.getByLabel('Name').fill(name);
    await form.getByLabel('Image').fill(env.image);
    await form.getByLabel('Command').fill('sleep 3600');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    const taken = (await api('POST', '/api/v1/replicaSet', { replicaSetName: name, imageName: env.image })).msg;
    // in the console's words: an instance, not a replica set
    await form.getByRole('alert').filter({ hasText: taken.replace(/replica set/g, 'instance') }).waitFor();
    assert.equal(await form.getByLabel('Name').inputValue(), name);
    assert.equal(await form.getByLabel('Command').inputValue(), 'sleep 3600');
    // more cards than the server has: the allocator's message
    await form.getByLabel('Name').fill(`${name}2`);
    await form.getByLabel('Whole cards').check();
    await form.getByLabel('GPU count').fill('9');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    await form.getByRole('alert').filter({ hasText: 'GPU not enough' }).waitFor();
    assert.equal((await api('GET', `/api/v1/replicaSet/${name}2`)).code, 1100);
    // a missing image
    await form.getByLabel('GPU count').fill('1');
    await form.getByLabel('Image').fill('gpubox-no-such-image:1');
    await form.getByRole('button', { name: 'Create', exact: true }).click();
    await form.getByRole('alert').filter({ hasText: 'gpubox-no-such-image' }).waitFor();
    // an action refused by the state: continue a running set is not offered,
    // so refuse one the API decides on: commit to a bad image name
    await form.getByRole('button', { name: 'Cancel' }).click();
    await page.goto(`${env.url}/#/instances/${name}`);
    await page.getByRole('button', { name: 'Commit' }).click();
    const commit = page.getByRole('dialog', { name: new RegExp(`Commit ${name}`) });
    await commit.getByLabel('Image name').fill('Bad Name!');
    await commit.getByRole('button', { name: 'Commit' }).click();
    await commit.getByRole('alert').waitFor();
    assert.match(await commit.getByRole('alert').textContent(), /image name|name/i);
    assert.equal(await commit.getByLabel('Image name').inputValue(), 'Bad Name!');
    assertClean(page);
    await purge(name);
  },

  /**
   * Issue 27: no request for /api/v1/nodes on a single server; the create
   * form's Create button and its error in sight at 900 px high (1400 and
   * 1000 wide), in the user's words; the roll-back table inside its dialog
   * at 1000 px.
   */
  async fits(browser) {
    const name = `${P}_fit`;
    await purge(name);
    await createSet(name);
    await apiOk('PATCH', `/api/v1/replicaSet/${name}`, { envPatch: ['FIT=1'] });
    await until('version 2', async () => (await apiOk('GET', `/api/v1/replicaSet/${name}`)).info.version === 2, 60000);
    for (const width of [1400, 1000]) {
      const page = await newPage(browser, { width, height: 900 });
      const asked = [];
      page.on('request', (r) => asked.push(r.url()));
      await login(page, env.admin);
      for (const link of ['Overview', 'Instances', 'Volumes', 'Usage']) {
        await page.getByRole('link', { name: link }).click();
        await page.waitForTimeout(300);
      }
      assert.deepEqual(asked.filter((u) => u.includes('/api/v1/nodes')), [], 'a single server was asked for its nodes');
      assert.equal(await page.getByRole('alert').count(), 0, 'the Usage page shows an error');

      // the create form: a missing image's error and Create, without scrolling
      await page.getByRole('link', { name: 'Instances' }).click();
      await page.getByRole('button', { name: 'Create instance' }).click();
      const form = page.getByRole('form', { name: 'Create instance' });
      await form.getByLabel('Name').fill(`${name}new`);
      await form.getByLabel('Image').fill('gpubox-no-such-image:1');
      await form.getByLabel('Pull').selectOption('never');
      await form.getByLabel('CPU cores').waitFor();
      await form.getByLabel('Shm size').waitFor();
      await form.getByRole('button', { name: 'Create', exact: true }).click();
      const alert = form.getByRole('alert');
      await alert.waitFor();
      const text = await alert.textContent();
      assert.ok(!/docker pull|\/api\/v1|replica set/.test(text), `not in the user's words: ${text}`);
      assert.match(text, /Images page/);
      for (const [what, el] of [['Create', form.getByRole('button', { name: 'Create', exact: true })], ['the error', alert]]) {
        const box = await el.boundingBox();
        assert.ok(box && box.y >= 0 && box.y + box.height <= 900, `${what} is out of sight at ${width}x900: ${JSON.stringify(box)}`);
      }
      const scrolled = await page.evaluate(() => document.scrollingElement.scrollTop + (document.querySelector('.overlay')?.scrollTop ?? 0));
      assert.equal(scrolled, 0, 'the window scrolled');
      await form.getByRole('button', { name: 'Cancel' }).click();

      // the roll-back dialog's table fits
      await page.goto(`${env.url}/#/instances/${name}`);
      await page.getByRole('button', { name: 'Roll back' }).click();
      const dialog = page.getByRole('dialog', { name: `Roll back ${name}` });
      await dialog.getByRole('button', { name: 'Roll back to version 1' }).waitFor();
      const fit = await dialog.evaluate((d) => {
        const t = d.querySelector('table.history');
        const db = d.getBoundingClientRect();
        const tb = t.getBoundingClientRect();
        return { right: db.right, table: tb.right, inner: db.right - parseFloat(getComputedStyle(d).paddingRight) };
      });
      assert.ok(fit.right <= width && fit.table <= fit.inner + 1, `the roll-back table overflows at ${width}: ${JSON.stringify(fit)}`);
      assertClean(page);
    }
    await purge(name);
  },

  /** The logs panel shows what the container printed, and (Follow) what it prints next. */
  async logs(browser) {
    const name = `${P}_logs`;
    await purge(name);
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: name, imageName: env.image, gpuCount: 0,
      cmd: ['sh', '-c', `echo hello-from-${name}; i=0; while true; do i=$((i+1)); echo tick-$i; sleep 1; done`] });
    const page = await newPage(browser);
    await login(page, env.admin);
    await page.goto(`${env.url}/#/instances/${name}`);
    await page.locator('main h1', { hasText: name }).waitFor();
    await page.getByRole('button', { name: 'Show logs' }).click();
    const lines = page.getByLabel('Log lines');
    // the first answer may come before the container printed: ask again until it has
    await until('the line the container printed', async () => {
      if ((await lines.textContent()).includes(`hello-from-${name}`)) return true;
      await page.getByRole('button', { name: 'Refresh logs' }).click();
      return false;
    }, 30000, 500);
    // following: lines printed after the panel opened arrive without asking
    await page.getByLabel('Follow').check();
    await page.getByText(/Following: new lines show/).waitFor();
    const ticks = async () => Math.max(0, ...((await lines.textContent()).match(/tick-\d+/g) ?? []).map((t) => Number(t.slice(5))));
    const first = await until('a tick while following', async () => (await ticks()) || false, 15000);
    await until('a later tick, streamed', async () => (await ticks()) > first + 1, 15000);
    await page.getByLabel('Follow').uncheck();
    await page.getByRole('button', { name: 'Refresh logs' }).waitFor();
    assertClean(page);
    await purge(name);
  },

  /** The instance page's terminal: a shell, a command typed and its answer, the size following the window. */
  async terminal(browser) {
    const name = `${P}_term`;
    await purge(name);
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: name, imageName: env.image, gpuCount: 0, cmd: ['sleep', '3600'] });
    const page = await newPage(browser, { width: 1280, height: 900 });
    await login(page, env.admin);
    await page.goto(`${env.url}/#/instances/${name}`);
    await page.locator('main h1', { hasText: name }).waitFor();
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.getByRole('status').filter({ hasText: 'Connected' }).waitFor({ timeout: 20000 });
    const screen = page.locator('.terminal-box .xterm-rows');
    const shown = async () => (await screen.textContent()) ?? '';
    await page.locator('.terminal-box').click();
    await page.keyboard.type('echo hi-$((6*7))');
    await page.keyboard.press('Enter');
    await until('the answer of a typed command', async () => (await shown()).includes('hi-42'), 15000);
    const size = async (mark) => {
      await page.keyboard.type(`echo ${mark}-$(stty size | tr ' ' x)`);
      await page.keyboard.press('Enter');
      let found = null;
      await until(`stty size (${mark})`, async () => {
        const m = (await shown()).match(new RegExp(`${mark}-(\\d+)x(\\d+)`));
        found = m && { rows: Number(m[1]), cols: Number(m[2]) };
        return !!found;
      }, 15000);
      return found;
    };
    const wide = await size('sa');
    assert.ok(wide.cols >= 60 && wide.rows >= 10, `the shell's size: ${JSON.stringify(wide)}`);
    await page.setViewportSize({ width: 800, height: 900 });
    const narrow = await until('a narrower terminal', async () => {
      const s = await size(`sb${Date.now() % 1000}`);
      return s.cols < wide.cols ? s : false;
    }, 20000, 500);
    assert.ok(narrow.cols < wide.cols, `${JSON.stringify(narrow)} after ${JSON.stringify(wide)}`);
    await screenshot(page, 'terminal');
    await page.getByRole('button', { name: 'Close terminal' }).click();
    assertClean(page);
    await purge(name);
  },

  async accessibility(browser) {
    const name = `${P}_a11y`;
    await purge(name);
    await createSet(name, 1);
    const page = await newPage(browser);
    await page.goto(env.url + '/');
    await page.getByLabel('API token').waitFor();
    const found = { login: await axeSerious(page) };
    await login(page, env.admin);
    for (const [label, hash, ready] of [
      ['overview', '#/overview', () => page.getByRole('meter', { name: 'GPU 0 memory', exact: true }).waitFor()],
      ['instances', '#/instances', () => row(page, name).waitFor()],
      ['instance', `#/instances/${name}`, () => page.getByRole('button', { name: 'Scale' }).waitFor()],
      ['create', '#/instances', async () => {
        await page.getByRole('button', { name: 'Create instance' }).click();
        await page.getByRole('form', { name: 'Create instance' }).waitFor();
      }],
      ['volumes', '#/volumes', () => page.getByRole('region', { name: 'Create volume' }).waitFor()],
      ['usage', '#/usage', () => page.getByRole('table', { name: 'Usage by user' }).waitFor()],
    ]) {
      await page.goto(`${env.url}/${hash}`);
      await ready();
      found[label] = await axeSerious(page);
    }
    const bad = Object.entries(found).filter(([, v]) => v.length);
    assert.deepEqual(bad, [], `serious accessibility violations: ${JSON.stringify(bad, null, 1)}`);
    assertClean(page);
    await purge(name);
  },

  /** A busy lab, each page photographed (docs/img through `make screenshots`). */
  async screenshots(browser) {
    const names = { train: `${P}_train`, nb: `${P}_notebook`, infer: `${P}_infer`, bobs: `${P}_bobs` };
    const vol = `${P}_datasets`;
    const bob = `${P}_bob`;
    for (const n of Object.values(names)) await purge(n);
    await api('DELETE', `/api/v1/volumes/${vol}`);
    await api('DELETE', `/api/v1/users/${bob}`);
    await apiOk('POST', '/api/v1/volumes', { name: vol, size: '256MB' });
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: names.train, imageName: env.image, gpuCount: 2,
      cmd: ['sleep', '3600'], binds: [{ src: vol, dest: '/data' }], containerPorts: ['22', '8888'] });
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: names.nb, imageName: env.image, gpuMemory: '6GB',
      cmd: ['sleep', '3600'], env: ['JUPYTER_TOKEN=lab'] });
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: names.infer, imageName: env.image, gpuShared: true,
      cmd: ['sleep', '3600'] });
    const { token } = await apiOk('POST', '/api/v1/users', { name: bob, role: 'user', quota: { cards: 2 } });
    await apiOk('POST', '/api/v1/replicaSet', { replicaSetName: names.bobs, imageName: env.image, gpuMemory: '4GB',
      cmd: ['sleep', '3600'] }, token);
    await apiOk('PATCH', `/api/v1/replicaSet/${names.train}`, { envPatch: { set: ['EPOCHS=10'] } });

    const page = await newPage(browser, { width: 1280, height: 760 });
    await page.goto(env.url + '/');
    await page.getByLabel('API token').waitFor();
    await screenshot(page, 'console-login');
    await login(page, env.admin);
    await page.getByRole('meter', { name: 'GPU 0 memory', exact: true }).waitFor();
    await until('the tenants on the bars', async () => (await tenantsOn(page, 0)).length > 0);
    await screenshot(page, 'console-overview');
    await page.getByRole('link', { name: 'Instances' }).click();
    await row(page, names.bobs).waitFor();
    await screenshot(page, 'console-instances');
    await page.setViewportSize({ width: 1280, height: 1150 }); // the whole dialog
    await page.getByRole('button', { name: 'Create instance' }).click();
    const form = page.getByRole('form', { name: 'Create instance' });
    await form.getByLabel('Name').fill('resnet');
    await form.getByLabel('Image').fill('pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime');
    await form.getByLabel('Memory share').check();
    await form.getByLabel('Memory per card').fill('8GB');
    await form.getByLabel('Command').fill('python train.py --epochs 10');
    await screenshot(page, 'console-create');
    await form.getByRole('button', { name: 'Cancel' }).click();
    await page.setViewportSize({ width: 1280, height: 760 });
    await page.getByRole('link', { name: names.train, exact: true }).click();
    await page.getByRole('button', { name: 'Scale' }).waitFor();
    await screenshot(page, 'console-instance');
    await page.getByRole('link', { name: 'Volumes' }).click();
    await page.getByRole('meter', { name: `${vol} used` }).waitFor();
    await screenshot(page, 'console-volumes');
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('table', { name: 'Usage by user' }).waitFor();
    await page.getByRole('table', { name: 'Quotas' }).waitFor();
    await screenshot(page, 'console-usage');
    assertClean(page);
    for (const n of Object.values(names)) await purge(n);
    await apiOk('DELETE', `/api/v1/volumes/${vol}`);
    await apiOk('DELETE', `/api/v1/users/${bob}`);
  },

  /** A fleet of nodes a and b, each running ${P}a / ${P}b on one card (test_fleet_console.py). */
  async fleet(browser) {
    const page = await newPage(browser);
    await login(page, env.admin);
    for (const node of ['a', 'b']) {
      const region = page.getByRole('region', { name: `Node ${node}` });
      await region.getByRole('meter', { name: `${node} GPU 0 memory`, exact: true }).waitFor();
      await until(`node ${node}'s cards to show ${P}${node}`, async () =>
        (await region.locator(`[data-tenant="${P}${node}"]`).count()) === 1);
    }
    await page.getByRole('link', { name: 'Instances' }).click();
    for (const node of ['a', 'b']) {
      const r = row(page, `${P}${node}`);
      await r.waitFor();
      assert.ok((await r.getByRole('cell').allTextContents()).includes(node), `${P}${node} shows node ${node}`);
    }
    // cordon b from the console, then uncordon it
    await page.getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('button', { name: 'Cordon b' }).click();
    await page.getByRole('button', { name: 'Uncordon b' }).waitFor();
    const b = async () => (await apiOk('GET', '/api/v1/nodes')).nodes.find((n) => n.name === 'b');
    // The page may show the change from one node's answer a moment before
    // another node's view of the registry has it: wait, briefly, for both.
    await until('the API to show b cordoned', async () => (await b()).cordoned === true);
    await page.getByRole('button', { name: 'Uncordon b' }).click();
    await page.getByRole('button', { name: 'Cordon b' }).waitFor();
    await until('the API to show b uncordoned', async () => (await b()).cordoned === false);
    assertClean(page);
  },
};

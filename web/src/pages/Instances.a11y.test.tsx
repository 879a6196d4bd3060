// axe-core over the instance pages in their busiest forms (jsdom has no
// layout, so colour contrast is left to the browser tests).
import { fireEvent, screen, within } from '@testing-library/preact';
import { mockApi, renderAs, seriousViolations } from '../testing';
import { InstanceDetail } from './InstanceDetail';
import { Instances } from './Instances';
import { info, replicaSet, spec } from './instancesTestUtil';

afterEach(() => vi.unstubAllGlobals());

const OPERATION = {
  id: 'op1',
  kind: 'patch',
  target: 'foo',
  state: 'running',
  error: '',
  steps: [{ name: 'begin', done: true, time: null, ms: 1 }],
};

describe('accessibility', () => {
  it('the list and the create form', async () => {
    mockApi(({ url }) => {
      if (url === '/api/v1/replicaSet') return { data: { replicaSets: [replicaSet(), replicaSet({ name: 'bar' })] } };
      if (url === '/api/v1/volumes') return { data: { volumes: [{ name: 'data' }] } };
      return undefined;
    });
    renderAs('user', <Instances />, true);
    await screen.findByRole('link', { name: 'bar' });
    expect(await seriousViolations()).toEqual([]);

    fireEvent.click(screen.getByRole('button', { name: 'Create instance' }));
    const dialog = screen.getByRole('dialog');
    fireEvent.click(within(dialog).getByLabelText('Memory share'));
    fireEvent.click(within(dialog).getByRole('button', { name: 'Add bind' }));
    expect(await seriousViolations()).toEqual([]);
  });

  it('the detail with each dialog', async () => {
    mockApi(({ url }) => {
      const base = '/api/v1/replicaSet/foo';
      if (url === base)
        return {
          data: {
            info: info({
              operation: 'op1',
              gpuShares: [{ uuid: 'GPU-11111111-aaaa', memoryMiB: 8192, mode: 'memory' }],
              spec: spec({ gpuMemory: 8192, binds: [{ src: 'data', dest: '/d' }], env: ['A=1'] }),
            }),
          },
        };
      if (url === `${base}/history`)
        return { data: { history: [{ version: 1, reason: 'create', createTime: '', containerName: 'foo-1', spec: spec(), gpus: [], ports: [] }] } };
      if (url === `${base}/execute`)
        return { data: { stdout: 'x', stderr: '', exitCode: 0, stdoutTruncated: false, stderrTruncated: false, timedOut: true } };
      if (url === '/api/v1/operations/op1') return { data: OPERATION };
      if (url === `${base}/stop`) return new Promise(() => {});
      return undefined;
    });
    renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByText('ubuntu:22.04');
    fireEvent.click(screen.getByRole('button', { name: 'Stop' }));
    await screen.findByText('begin');
    expect(await seriousViolations()).toEqual([]);

    for (const open of ['Scale', 'Roll back', 'Commit', 'Run command', 'Auto-stop', 'Delete']) {
      fireEvent.click(screen.getByRole('button', { name: open }));
      const dialog = screen.getByRole('dialog');
      if (open === 'Run command') {
        fireEvent.input(within(dialog).getByLabelText('Command'), { target: { value: 'true' } });
        fireEvent.click(within(dialog).getByRole('button', { name: 'Run' }));
        await within(dialog).findByText('Exit code 0');
      }
      if (open === 'Roll back') await within(dialog).findByText('create');
      expect(await seriousViolations()).toEqual([]);
      fireEvent.click(within(dialog).getAllByRole('button', { name: /Close|Cancel/ })[0]);
    }
  });
});

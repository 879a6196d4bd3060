import { fireEvent, screen, waitFor } from '@testing-library/preact';
import { changes, mockApi, renderAs, type Answer, type Sent } from '../testing';
import { CreateInstance } from './CreateInstance';
import { commandArgv } from './instanceHelpers';

afterEach(() => vi.unstubAllGlobals());

/** The API with one volume; POST /replicaSet answers `create`. */
function api(create: (req: Sent) => Answer = () => ({ data: { replicaSetName: 'job', operationId: 'op1' } })) {
  return mockApi((req) => {
    if (req.url === '/api/v1/volumes') return { data: { volumes: [{ name: 'data' }] } };
    if (req.url === '/api/v1/replicaSet' && req.method === 'POST') return create(req);
    return undefined;
  });
}

const type = (label: string, value: string) => fireEvent.input(screen.getByLabelText(label), { target: { value } });

function show(fleet = false) {
  const onCreated = vi.fn();
  renderAs('user', <CreateInstance onCreated={onCreated} onCancel={() => {}} />, fleet);
  return onCreated;
}

async function submitted(sent: Sent[]) {
  fireEvent.click(screen.getByRole('button', { name: 'Create' }));
  await waitFor(() => expect(changes(sent)).toHaveLength(1));
  return changes(sent)[0].body;
}

describe('CreateInstance', () => {
  it('sends whole cards with binds, ports, env and a split command', async () => {
    const sent = api();
    const onCreated = show();
    type('Name', 'job');
    type('Image', 'pytorch:2.3');
    fireEvent.click(screen.getByLabelText('Whole cards'));
    type('GPU count', '2');
    fireEvent.click(screen.getByRole('button', { name: 'Add bind' }));
    type('Bind 1 source', 'data');
    type('Bind 1 destination', '/root/data');
    fireEvent.click(screen.getByRole('button', { name: 'Add bind' }));
    type('Bind 2 source', '/srv/models');
    type('Bind 2 destination', '/models');
    fireEvent.click(screen.getByLabelText('Bind 2 read-only'));
    type('Container ports', '22, 8888');
    type('Environment', 'A=1\n\nB=two words\n');
    type('Command', 'python train.py --epochs 3');

    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'pytorch:2.3',
      gpuCount: 2,
      binds: [
        { src: 'data', dest: '/root/data' },
        { src: '/srv/models', dest: '/models', readOnly: true },
      ],
      containerPorts: ['22', '8888'],
      env: ['A=1', 'B=two words'],
      cmd: ['python', 'train.py', '--epochs', '3'],
    });
    await waitFor(() => expect(onCreated).toHaveBeenCalledWith('job'));
  });

  it('sends a memory share with its policy', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    fireEvent.click(screen.getByLabelText('Memory share'));
    type('Memory per card', '12GB');
    fireEvent.change(screen.getByLabelText('Policy'), { target: { value: 'spread' } });
    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'ubuntu:22.04',
      gpuCount: 1,
      gpuMemory: '12GB',
      gpuPolicy: 'spread',
    });
  });

  it('sends a compute share (gpuCores) next to the memory share', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    expect(screen.queryByLabelText('Compute per card (%)')).toBeNull(); // no GPUs: no share
    fireEvent.click(screen.getByLabelText('Memory share'));
    type('Memory per card', '12GB');
    type('Compute per card (%)', '30');
    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'ubuntu:22.04',
      gpuCount: 1,
      gpuMemory: '12GB',
      gpuCores: 30,
      gpuPolicy: 'binpack',
    });
  });

  it('sends a time-slice, and a shell command under sh -c', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    fireEvent.click(screen.getByLabelText('Time-slice'));
    type('GPU count', '2');
    type('Command', 'sleep 5 && echo done | tee /tmp/x');
    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'ubuntu:22.04',
      gpuCount: 2,
      gpuShared: true,
      gpuPolicy: 'binpack',
      cmd: ['sh', '-c', 'sleep 5 && echo done | tee /tmp/x'],
    });
  });

  it('keeps every field and shows the API message when the create fails', async () => {
    const msg = 'GPU not enough: asked 1 card with 102400 MiB, no card can fit it';
    const sent = api(() => ({ status: 409, code: 1013, msg }));
    const onCreated = show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    fireEvent.click(screen.getByLabelText('Memory share'));
    type('Memory per card', '100GB');
    fireEvent.click(screen.getByRole('button', { name: 'Add bind' }));
    type('Bind 1 source', 'data');
    type('Bind 1 destination', '/root/data');
    type('Environment', 'A=1');
    await submitted(sent);

    expect((await screen.findByRole('alert')).textContent).toBe(msg);
    expect(onCreated).not.toHaveBeenCalled();
    const val = (label: string) => (screen.getByLabelText(label) as HTMLInputElement).value;
    expect(val('Name')).toBe('job');
    expect(val('Image')).toBe('ubuntu:22.04');
    expect((screen.getByLabelText('Memory share') as HTMLInputElement).checked).toBe(true);
    expect(val('Memory per card')).toBe('100GB');
    expect(val('Bind 1 source')).toBe('data');
    expect(val('Bind 1 destination')).toBe('/root/data');
    expect(val('Environment')).toBe('A=1');
    expect(screen.getByRole('button', { name: 'Create' })).toHaveProperty('disabled', false);
  });

  it('sends the stop rules only when filled in', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    type('Stop when idle for', ' 30m ');
    type('Maximum duration', '8h');
    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'ubuntu:22.04',
      idleStop: '30m',
      maxDuration: '8h',
    });
  });

  it('leaves out an empty stop rule', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    type('Stop when idle for', '   ');
    type('Maximum duration', '1h30m');
    expect(await submitted(sent)).toEqual({ replicaSetName: 'job', imageName: 'ubuntu:22.04', maxDuration: '1h30m' });
  });

  it('asks for a node only in a fleet', async () => {
    const sent = api();
    show(true);
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    type('Node', 'n2');
    expect(await submitted(sent)).toEqual({ replicaSetName: 'job', imageName: 'ubuntu:22.04', node: 'n2' });
  });

  it('sends pull only when changed, and SSH keys one a line only when given', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    expect((screen.getByLabelText('Pull') as HTMLSelectElement).value).toBe('missing');
    fireEvent.change(screen.getByLabelText('Pull'), { target: { value: 'always' } });
    type('SSH public keys', 'ssh-ed25519 AAAA1 me@a\n\n  ssh-rsa BBBB2 me@b  \n');
    expect(await submitted(sent)).toEqual({
      replicaSetName: 'job',
      imageName: 'ubuntu:22.04',
      pull: 'always',
      sshKeys: ['ssh-ed25519 AAAA1 me@a', 'ssh-rsa BBBB2 me@b'],
    });
  });

  it('leaves out pull at its default and empty SSH keys', async () => {
    const sent = api();
    show();
    type('Name', 'job');
    type('Image', 'ubuntu:22.04');
    fireEvent.change(screen.getByLabelText('Pull'), { target: { value: 'never' } });
    fireEvent.change(screen.getByLabelText('Pull'), { target: { value: 'missing' } });
    type('SSH public keys', '  \n ');
    expect(await submitted(sent)).toEqual({ replicaSetName: 'job', imageName: 'ubuntu:22.04' });
  });

  it('has no node field on a single server', () => {
    api();
    show();
    expect(screen.queryByLabelText('Node')).toBeNull();
  });

  it('splits a plain command and hands shell syntax to sh -c', () => {
    expect(commandArgv('  ')).toBeUndefined();
    expect(commandArgv('jupyter lab --port=8888')).toEqual(['jupyter', 'lab', '--port=8888']);
    expect(commandArgv('echo "a b"')).toEqual(['sh', '-c', 'echo "a b"']);
    expect(commandArgv('echo $HOME')).toEqual(['sh', '-c', 'echo $HOME']);
    expect(commandArgv('FOO=1 run')).toEqual(['sh', '-c', 'FOO=1 run']);
  });
});

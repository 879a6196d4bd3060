// A name with '-' is explained in the create forms as soon as it is typed,
// with the same name with '_' (gpuboxd refuses it with the same advice).
import { fireEvent, screen } from '@testing-library/preact';
import { mockApi, renderAs } from './testing';
import { dashNote } from './names';
import { CreateInstance } from './pages/CreateInstance';
import { Volumes } from './pages/Volumes';

afterEach(() => vi.unstubAllGlobals());

describe('dashNote', () => {
  it('says why and suggests the name with "_"', () => {
    expect(dashNote('my_job')).toBeNull();
    expect(dashNote('my-new-job')).toContain('Use "my_new_job" instead');
    expect(dashNote('my-new-job')).toContain('NAME-VERSION');
  });
});

describe('the forms explain a "-" in a name', () => {
  beforeEach(() => {
    mockApi((req) => (req.url === '/api/v1/volumes' ? { data: { volumes: [] } } : undefined));
  });

  it('in the create instance form', async () => {
    renderAs('user', <CreateInstance onCreated={() => {}} onCancel={() => {}} />);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'my-job' } });
    expect((await screen.findByText(/Use "my_job" instead/)).textContent).toContain('cannot contain "-"');
  });

  it('in the create volume form', async () => {
    renderAs('user', <Volumes />);
    fireEvent.input(await screen.findByLabelText('Name'), { target: { value: 'my-data' } });
    expect(await screen.findByText(/Use "my_data" instead/)).toBeTruthy();
  });
});

import { age, bytes, mib, percent, until } from './format';

describe('format', () => {
  it('writes sizes in powers of 1024', () => {
    expect(bytes(21474836480)).toBe('20 GB');
    expect(bytes(1536 * 1024 * 1024)).toBe('1.5 GB');
    expect(mib(16384)).toBe('16 GB');
    expect(bytes(null)).toBe('-');
  });
  it('writes ages', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(age('2026-11-24T11:59:30Z', now)).toBe('30s');
    expect(age('2026-11-24T09:00:00Z', now)).toBe('3h');
    expect(age('', now)).toBe('-');
    expect(until('2026-11-24T14:30:00Z', now)).toBe('2h');
    expect(until('2026-11-24T11:00:00Z', now)).toBe('0s');
  });
  it('writes utilization', () => {
    expect(percent(37)).toBe('37 %');
    expect(percent(-1)).toBe('unknown');
    expect(percent(undefined)).toBe('unknown');
  });
});

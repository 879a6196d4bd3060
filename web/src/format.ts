// Numbers as an operator reads them.

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];

/** 21474836480 -> "20 GB" (powers of 1024, as the API's sizes). */
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '-';
  let v = n;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  const text = v >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(1).replace(/\.0$/, '');
  return `${text} ${UNITS[i]}`;
}

/** MiB -> "16 GB" / "1.5 GB" / "512 MB". */
export function mib(n: number): string {
  return bytes(n * 1024 * 1024);
}

/** A time as the CLI and the API print it: ISO 8601 in UTC, to the second ("2026-11-27T04:27:51Z"). */
export function isoUtc(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** An RFC 3339 time -> "5s", "3m", "2h", "4d" before `now`. */
export function age(time: string | null | undefined, now = Date.now()): string {
  if (!time) return '-';
  const t = Date.parse(time);
  if (Number.isNaN(t)) return '-';
  return span(now - t);
}

/** An RFC 3339 time -> "5s", "3m", "2h", "4d" after `now` ("0s" once past). */
export function until(time: string | null | undefined, now = Date.now()): string {
  if (!time) return '-';
  const t = Date.parse(time);
  if (Number.isNaN(t)) return '-';
  return span(t - now);
}

function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** A utilization the API gives in percent (-1: unknown) -> "37 %" or "unknown". */
export function percent(p: number | null | undefined): string {
  return p === null || p === undefined || p < 0 ? 'unknown' : `${p} %`;
}

/** Seconds -> hours with one decimal ("2.5 h"). */
export function hours(seconds: number): string {
  return `${(seconds / 3600).toFixed(seconds && seconds < 360 ? 2 : 1)} h`;
}

/** "GPU-3214d4b6-..." -> "GPU-3214d4b6". */
export function shortUuid(uuid: string): string {
  const m = /^(GPU-[0-9a-fA-F]{8})/.exec(uuid);
  return m ? m[1] : uuid;
}

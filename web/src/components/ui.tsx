// Small shared pieces. Styles come only from styles.css (class names) or
// from style *objects* (Preact sets them through CSSOM, which the
// Content-Security-Policy allows; a style string or attribute is refused).
import type { ComponentChildren } from 'preact';

/** The API's message, where the user acted. */
export function ErrorNote({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

export interface Segment {
  /** Who holds it (a tenant's name), shown as the segment's label. */
  label: string;
  value: number;
}

/**
 * A bar `total` wide split into `segments` (for example a card's memory by
 * tenant), the rest free. `title` names the bar for screen readers.
 */
export function Bar({ title, total, segments }: { title: string; total: number; segments: Segment[] }) {
  const used = segments.reduce((a, s) => a + s.value, 0);
  const pct = (v: number) => (total > 0 ? Math.min(100, (v / total) * 100) : 0);
  return (
    <div
      class="bar"
      role="meter"
      aria-label={title}
      aria-valuemin={0}
      aria-valuemax={total}
      aria-valuenow={Math.min(used, total)}
    >
      {segments.map((s, i) => (
        <span
          key={s.label + i}
          class={`seg seg${i % 6}`}
          style={{ width: `${pct(s.value)}%` }}
          title={`${s.label}: ${s.value}`}
          data-tenant={s.label}
        >
          <span class="seg-label">{s.label}</span>
        </span>
      ))}
    </div>
  );
}

/**
 * One value out of `max` as a thin bar (a card's live memory use, under the
 * bar of what is held), in the warning colour when `over`. `text` says the
 * value in words for screen readers ("1.2 GB of 16 GB").
 */
export function Meter({
  title,
  value,
  max,
  text,
  over,
}: {
  title: string;
  value: number;
  max: number;
  text: string;
  over?: boolean;
}) {
  const pct = max > 0 ? Math.min(100, Math.max(0, (value / max) * 100)) : 0;
  return (
    <div
      class={`bar thin${over ? ' over' : ''}`}
      role="meter"
      aria-label={title}
      aria-valuemin={0}
      aria-valuemax={max}
      aria-valuenow={Math.min(Math.max(0, value), max)}
      aria-valuetext={text}
      title={text}
    >
      <span class="fill" style={{ width: `${pct}%` }} />
    </div>
  );
}

/** A modal dialog; `onClose` on Escape or the close button. */
export function Dialog({
  title,
  onClose,
  children,
  wide = false,
}: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  /** A wide dialog (the create form's two columns). */
  wide?: boolean;
}) {
  return (
    <div class="overlay" onKeyDown={(e) => e.key === 'Escape' && onClose()}>
      <div class={wide ? 'dialog wide' : 'dialog'} role="dialog" aria-modal="true" aria-label={title}>
        <header>
          <h2>{title}</h2>
          <button type="button" class="link" aria-label="Close" onClick={onClose}>
            ×
          </button>
        </header>
        {children}
      </div>
    </div>
  );
}

/** "Delete foo?" with the consequence spelled out, and a button that says what it does. */
export function Confirm({
  title,
  message,
  action,
  busy,
  error,
  onConfirm,
  onCancel,
}: {
  title: string;
  message: ComponentChildren;
  action: string;
  busy?: boolean;
  error?: string | null;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  return (
    <Dialog title={title} onClose={onCancel}>
      <div class="confirm-body">{message}</div>
      <ErrorNote error={error} />
      <div class="actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" disabled={busy} onClick={onConfirm}>
          {action}
        </button>
      </div>
    </Dialog>
  );
}

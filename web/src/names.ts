// The naming rule of instances and volumes as the forms explain it before
// anything is sent: gpuboxd refuses a '-' (it separates a name from its
// version, train-1), and says the same in its message; the form says it as
// soon as one is typed, with the name to use instead.

/** Why `name` would be refused for its '-', with the same name with '_'; null when it has none. */
export function dashNote(name: string): string | null {
  const n = name.trim();
  if (!n.includes('-')) return null;
  return `A name cannot contain "-": gpubox names each version's container NAME-VERSION (train-1). Use "${n.replace(/-/g, '_')}" instead.`;
}

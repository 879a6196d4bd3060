export function Volumes() {
  return <h1>Volumes</h1>;
}

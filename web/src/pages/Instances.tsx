export function Instances() {
  return <h1>Instances</h1>;
}

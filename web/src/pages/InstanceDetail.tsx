export function InstanceDetail({ name }: { name: string }) {
  return <h1>{name}</h1>;
}

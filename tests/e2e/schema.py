"""A small validator for the OpenAPI 3.0 schema objects docs/openapi.yaml
uses (stdlib only): type (with nullable), properties, required,
additionalProperties, items, enum, minimum/maximum, minLength/maxLength,
minItems/maxItems, maxProperties, pattern, allOf, oneOf, anyOf and $ref
within the document. Keywords it does not know it ignores, as an OpenAPI
tool ignores annotations (description, format, default, x-...).

validate(instance, schema, doc) returns a list of errors, each naming the
JSON path of the value that breaks the schema; [] means it conforms.
"""
import re

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def resolve(schema, doc):
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/"), f"only local $refs are supported: {ref}"
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = node
    return schema


def validate(value, schema, doc, path="$"):
    schema = resolve(schema, doc)
    errors = []
    if value is None:
        if schema.get("nullable"):
            return []
        if _has_shape(schema):
            return [f"{path}: null where {schema.get('type', 'a value')} is required"]
    for sub in schema.get("allOf", []):
        errors += validate(value, sub, doc, path)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            passing = [s for s in schema[key] if not validate(value, s, doc, path)]
            if not passing or (key == "oneOf" and len(passing) > 1):
                errors.append(f"{path}: {len(passing)} of the {key} alternatives match {value!r:.80}")
    t = schema.get("type")
    if t and not TYPES[t](value):
        return errors + [f"{path}: {type(value).__name__} {value!r:.80} is not {t}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r:.80} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r:.80} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate(item, schema["items"], doc, f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required {name!r}")
        for name, v in value.items():
            if name in props:
                errors += validate(v, props[name], doc, f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected property {name!r}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(v, schema["additionalProperties"], doc, f"{path}.{name}")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(f"{path}: more than {schema['maxProperties']} properties")
    return errors


def _has_shape(schema):
    """A schema that says what the value must be (so null does not pass)."""
    return any(k in schema for k in ("type", "properties", "items", "enum"))


def response_schema(doc, path, method, status):
    """The JSON schema of the answer to METHOD path with this HTTP status:
    the status's own entry, else the operation's default."""
    op = doc["paths"][path][method.lower()]
    responses = op["responses"]
    entry = responses.get(str(status)) or responses.get("default")
    assert entry is not None, f"{method} {path} documents no answer for HTTP {status}"
    entry = resolve(entry, doc)
    return entry["content"]["application/json"]["schema"]


def request_schema(doc, path, method):
    op = doc["paths"][path][method.lower()]
    body = resolve(op["requestBody"], doc)
    return body["content"]["application/json"]["schema"]

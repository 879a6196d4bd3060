// yaml2json.js - print a YAML file as JSON, read by js-yaml (a full YAML
// parser), so the tests can compare gpuboxd's own reading of
// docs/openapi.yaml (GET /openapi.json) with it.
'use strict';
const fs = require('fs');
const yaml = require('js-yaml');
process.stdout.write(JSON.stringify(yaml.load(fs.readFileSync(process.argv[2], 'utf8'))));

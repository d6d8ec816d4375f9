// Validates Kubernetes manifests against the API schemas shipped by the npm
// package kubernetes-models (types, required fields, enums, formats; it does
// not flag unknown fields). Usage: node validate.js FILE.yaml...
// Needs NODE_PATH with kubernetes-models and js-yaml (deploy/validate.sh sets it up).
"use strict";
const fs = require("fs");
const yaml = require("js-yaml");

// apiVersion "apps/v1" -> module folder "apps/v1"; core "v1" -> "v1".
function modelFor(doc) {
  const group = doc.apiVersion;
  try {
    return require(`kubernetes-models/${group}/${doc.kind}`)[doc.kind];
  } catch (e) {
    return null;
  }
}

let errors = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d);
  for (const doc of docs) {
    const what = `${file}: ${doc.kind}/${(doc.metadata || {}).name}`;
    if (doc.kind === "Kustomization") continue;  // not an API object
    const Model = modelFor(doc);
    if (!Model) {
      console.error(`${what}: unknown apiVersion/kind ${doc.apiVersion} ${doc.kind}`);
      errors++;
      continue;
    }
    try {
      new Model(doc).validate();
      checked++;
      console.log(`ok   ${what}`);
    } catch (e) {
      console.error(`FAIL ${what}: ${e.message}`);
      errors++;
    }
  }
}
console.log(`${checked} objects valid, ${errors} invalid`);
process.exit(errors === 0 && checked > 0 ? 0 : 1);

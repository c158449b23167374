// Verifies fencetoken proofs with jose, as a resource written in Node would:
// algorithms [EdDSA] and the issuer checked. Reads {"jwk", "issuer",
// "proofs"} on stdin and writes, for each proof, {"ok", "claims"} or
// {"ok": false, "error"}.
import { importJWK, jwtVerify } from "jose";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { jwk, issuer, proofs } = JSON.parse(input);
const key = await importJWK(jwk, "EdDSA");
const results = [];
for (const proof of proofs) {
  try {
    const { payload } = await jwtVerify(proof, key, { algorithms: ["EdDSA"], issuer });
    results.push({ ok: true, claims: payload });
  } catch (e) {
    results.push({ ok: false, error: `${e.code ?? e.name}: ${e.message}` });
  }
}
process.stdout.write(JSON.stringify(results));

"""Verifies fencetoken proofs with PyJWT, as a resource written in Python
would: algorithms ["EdDSA"] and the issuer checked. Reads {"jwk", "issuer",
"proofs"} on stdin and writes, for each proof, {"ok", "claims"} or
{"ok": false, "error"}."""
import json
import sys

import jwt
from jwt.algorithms import OKPAlgorithm

req = json.load(sys.stdin)
key = OKPAlgorithm.from_jwk(json.dumps(req["jwk"]))
results = []
for proof in req["proofs"]:
    try:
        claims = jwt.decode(proof, key, algorithms=["EdDSA"], issuer=req["issuer"],
                            options={"require": ["iss"]})
        results.append({"ok": True, "claims": claims})
    except Exception as e:  # every refusal, whatever PyJWT calls it
        results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
json.dump(results, sys.stdout)

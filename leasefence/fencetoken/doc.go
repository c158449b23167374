// Package fencetoken signs the tokens a coordinator grants and verifies them
// at the resource, so that a resource across a trust boundary can tell a
// fence the coordinator minted from one a caller made up.
//
// A proof is a compact JWS, a JWT signed with Ed25519 (header alg "EdDSA"
// and kid, the signing key's id) whose claims are:
//
//	iss       the issuer: the name of the deployment's coordinators
//	sub       the holder
//	lf_res    the resource
//	lf_fence  the fence, as a decimal string ("42"): a uint64 does not
//	          survive a JSON number in most languages
//	iat       when it was signed, in Unix seconds: informational only
//
// There is no expiry claim: whether a lease is still live is the fence's
// question, answered by the gate, never a clock comparison across domains.
// A proof says whom the coordinator granted which fence, nothing more.
//
// A Signer is a leasefence.Prover: give it to the coordinator
// (CoordinatorOptions.Prover, etcdlease.Options.Prover) and every grant
// carries its proof (Grant.Proof, Lease.Proof). A Verifier holds the public
// keys by key id, several at once while a key is rotated, and refuses with
// an error wrapping ErrInvalid anything the coordinator did not sign: a
// malformed proof, alg "none", an HMAC signed with the public key as its
// secret, an unknown or missing kid, a wrong issuer, a bad signature, or
// claims that do not name a holder, a resource and a decimal fence.
//
// One proof is one string, read one way. Verify refuses, before decoding,
// any character outside the base64url alphabet and the two dots (Go's
// base64 decoder would skip a line break), and a payload whose claim keys
// repeat or differ only in case (encoding/json would match "LF_FENCE" to
// lf_fence where other libraries would not). Prove refuses, with
// ErrUnsignable, what Verify would refuse: ids that break the rule of
// leasefence.MaxIDLen. Every token with valid ids is signed within
// MaxProofLength (about 6 kB, which an HTTP header carries): the claims'
// JSON is written without HTML escaping, so no byte of a valid id takes
// more than two bytes in it.
//
// The encoding is github.com/golang-jwt/jwt/v5, not hand-rolled: it
// verifies every proof, and signs it (its EdDSA method) over the header
// and claims that encoding/json writes, without the HTML escaping that
// jwt.Token.SignedString cannot turn off. It is the most widely used JWT
// library for Go, kept by a team that answers security reports, it
// verifies EdDSA with the standard library's crypto/ed25519,
// and it takes an explicit list of allowed algorithms and a key function
// that sees the header, which is where this package refuses every
// algorithm but EdDSA before any key is chosen (the classic confusion of
// an RSA or Ed25519 public key used as an HMAC secret cannot arise). It
// brings no other module. Any JOSE library in any language verifies the
// same proofs given the public key, with algorithms [EdDSA] and the issuer
// checked: the tests check jose (Node, a pinned version installed by npm
// ci) and PyJWT (Debian's python3-jwt), and that they refuse what Verify
// refuses but for the few altered strings their decoders are lenient
// about (TestInterop lists them).
package fencetoken

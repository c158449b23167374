package fencetoken_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/fencetoken"
)

// A resource need not be written in Go: proofs a Signer makes verify with
// jose (Node) and PyJWT, both with algorithms [EdDSA] and the issuer
// checked, and read as the same token; a wrong issuer, alg none, another
// key or an altered payload are refused by them too. Verify is the
// strictest of the three about the string itself: of the altered forms it
// refuses (alteredForms), jose 6 accepts those whose extra characters its
// base64 decoder skips, and PyJWT accepts padding; each accepts them as
// the genuine proof's claims, never other ones. Each runtime that is
// present is tested; the test skips, saying so, only when neither is.
func TestInterop(t *testing.T) {
	verifiers := []struct {
		name    string
		command func(t *testing.T) []string
		lenient map[string]bool // altered forms it accepts (as the genuine claims)
		exact   bool            // lenient is exactly what it accepts (a pinned version)
	}{
		{"jose", joseCommand, map[string]bool{
			"LF inside the signature": true, "CRLF inside the signature": true, "LF after the signature": true,
			"CRLF after the signature": true, "space after the signature": true, "padding": true,
		}, true},
		{"PyJWT", pyjwtCommand, map[string]bool{"padding": true}, false},
	}
	ran := 0
	for _, vr := range verifiers {
		t.Run(vr.name, func(t *testing.T) {
			argv := vr.command(t)
			ran++
			checkInterop(t, argv, vr.lenient, vr.exact)
		})
	}
	if ran == 0 {
		t.Skip("neither Node (node and npm, for jose) nor a Python with PyJWT (Debian's python3-jwt) is installed: the interop check did not run")
	}
}

type interopCase struct {
	proof   string
	want    *leasefence.Token // nil: refused
	altered string            // the name of an altered form of the first proof
}

func checkInterop(t *testing.T, argv []string, lenient map[string]bool, exact bool) {
	k := newKey(t)
	s := newSigner(t, k, "k1", issuer)
	v := newVerifier(t, map[string]ed25519.PublicKey{"k1": k.pub})
	var cases []interopCase
	for _, tok := range []leasefence.Token{
		testToken,
		{Resource: "r", Holder: "h", Fence: ^leasefence.Fence(0)},
		{Resource: "déploiement/😀", Holder: "<agent & co>", Fence: 1 << 53},
		{Resource: strings.Repeat("r", leasefence.MaxIDLen), Holder: strings.Repeat("<", 300), Fence: 9},
		// The widest valid ids, in JSON written without HTML escaping.
		{Resource: strings.Repeat(`"`, leasefence.MaxIDLen), Holder: strings.Repeat("<", leasefence.MaxIDLen), Fence: ^leasefence.Fence(0)},
		{Resource: strings.Repeat("\u2028", leasefence.MaxIDLen/3), Holder: strings.Repeat(`\`, leasefence.MaxIDLen), Fence: 3},
	} {
		cases = append(cases, interopCase{proof: prove(t, s, tok), want: &tok})
	}
	genuine := cases[0].proof
	for name, a := range alteredForms(genuine) {
		cases = append(cases, interopCase{proof: a, altered: name})
	}
	elsewhere := newSigner(t, k, "k1", "elsewhere.example")
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	other, _ := fencetoken.NewSigner(otherPriv, "k1", issuer)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`)) + "." + strings.Split(genuine, ".")[1] + "."
	cases = append(cases,
		interopCase{proof: prove(t, elsewhere, testToken)},
		interopCase{proof: prove(t, other, testToken)},
		interopCase{proof: none},
	)

	proofs := make([]string, len(cases))
	for i, c := range cases {
		proofs[i] = c.proof
		got, err := v.Verify(c.proof)
		if (err == nil) != (c.want != nil) || (c.want != nil && got != *c.want) {
			t.Fatalf("case %d: Go's Verify = %v, %v; want %v", i, got, err, c.want)
		}
	}
	results := runVerifier(t, argv, k.pub, proofs)
	for i, c := range cases {
		r := results[i]
		if c.altered != "" && (r.OK || (exact && lenient[c.altered])) {
			if !lenient[c.altered] {
				t.Errorf("the altered form %q: accepted as %v, which Go's Verify refuses", c.altered, r.Claims)
			} else if !r.OK {
				t.Errorf("the altered form %q: refused (%s), where this version was known to accept it: update the test", c.altered, r.Error)
			} else if sub, _ := r.Claims["sub"].(string); sub != testToken.Holder || r.Claims["lf_fence"] != "42" {
				t.Errorf("the altered form %q: accepted as %v, not the genuine proof's claims", c.altered, r.Claims)
			}
			continue
		}
		switch {
		case c.want == nil && r.OK:
			t.Errorf("case %d (%q): accepted as %v, which Go's Verify refuses", i, c.proof, r.Claims)
		case c.want != nil && !r.OK:
			t.Errorf("case %d: a genuine proof of %.60v refused: %s", i, *c.want, r.Error)
		case c.want != nil:
			want := map[string]string{"iss": issuer, "sub": c.want.Holder, "lf_res": c.want.Resource, "lf_fence": leasefenceFence(*c.want)}
			for claim, w := range want {
				if got, _ := r.Claims[claim].(string); got != w {
					t.Errorf("case %d: claim %s reads %.60q, want %.60q", i, claim, got, w)
				}
			}
		}
	}
}

func leasefenceFence(tok leasefence.Token) string { return strconv.FormatUint(uint64(tok.Fence), 10) }

type interopResult struct {
	OK     bool           `json:"ok"`
	Claims map[string]any `json:"claims"`
	Error  string         `json:"error"`
}

// runVerifier asks the program argv to verify proofs against pub.
func runVerifier(t *testing.T, argv []string, pub ed25519.PublicKey, proofs []string) []interopResult {
	t.Helper()
	in, err := json.Marshal(map[string]any{
		"jwk":    map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub)},
		"issuer": issuer,
		"proofs": proofs,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	var results []interopResult
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(proofs) {
		t.Fatalf("%s answered %q (%v), want %d results", strings.Join(argv, " "), out, err, len(proofs))
	}
	return results
}

// pyjwtCommand is a Python that imports jwt (PyJWT with its EdDSA support),
// trying python3 on PATH and then Debian's own, where python3-jwt installs
// it; or it skips t.
func pyjwtCommand(t *testing.T) []string {
	script, err := filepath.Abs(filepath.Join("testdata", "interop", "verify.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.CommandContext(t.Context(), path, "-c", "import jwt, jwt.algorithms; jwt.algorithms.OKPAlgorithm").Run() == nil {
			return []string{path, script}
		}
	}
	t.Skip("no python3 imports PyJWT with EdDSA: install Debian's python3-jwt (apt-get install python3-jwt) to run this check")
	return nil
}

// joseCommand is node running verify.mjs against the pinned jose, which
// npm ci installs once per lock file into the user's cache; or it skips t
// when node or npm is missing. An install that fails fails the test: CI
// reaches the npm registry.
func joseCommand(t *testing.T) []string {
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		t.Skip("node or npm is not installed: the jose check did not run")
	}
	dir, err := joseInstall(npm)
	if err != nil {
		t.Fatal(err)
	}
	return []string{node, filepath.Join(dir, "verify.mjs")}
}

var (
	joseOnce sync.Once
	joseDir  string
	joseErr  error
)

// joseInstall copies testdata/interop to a cache directory named by the
// hash of its files and runs npm ci there, once: later runs find it ready.
func joseInstall(npm string) (string, error) {
	joseOnce.Do(func() { joseDir, joseErr = installInterop(npm) })
	return joseDir, joseErr
}

func installInterop(npm string) (string, error) {
	files := []string{"package.json", "package-lock.json", "verify.mjs"}
	h := sha256.New()
	contents := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", "interop", f))
		if err != nil {
			return "", err
		}
		contents[f] = b
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "leasefence-interop", hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "jose", "package.json")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for f, b := range contents {
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("npm ci of the pinned jose failed (CI reaches the npm registry): " + err.Error() + "\n" + string(out))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "jose", "package.json")); statErr == nil {
			return dir, nil // installed beside us by another test process
		}
		return "", err
	}
	return dir, nil
}

package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report"
)

// reportDir is a report folder made from the H200 recording (a real run's
// test.json and host.json), rendered as gdrreport renders it.
func reportDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{report.EventsFile, "host.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "runs", "h200-structured-strict", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	r, err := report.FromDirs([]string{dir}, report.Options{})
	require.NoError(t, err)
	require.NoError(t, r.WriteAll(dir))
	return dir
}

func keys(t *testing.T) (priv, pub string) {
	t.Helper()
	d := t.TempDir()
	priv, pub = filepath.Join(d, "key.pem"), filepath.Join(d, "key.pub.pem")
	require.NoError(t, GenerateKey(priv, pub))
	return priv, pub
}

func bundle(t *testing.T) (path, pub string, s dsse.SignerVerifier) {
	t.Helper()
	dir := reportDir(t)
	priv, pub := keys(t)
	s, err := LoadSigner(priv)
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "pingpong.test")
	require.NoError(t, os.WriteFile(bin, []byte("a test binary"), 0o755))
	path = filepath.Join(dir, BundleFile)
	require.NoError(t, Create([]string{dir}, dir, path, s, Options{Binaries: []string{bin}, Now: time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)}))
	return path, pub, s
}

func verifyWith(t *testing.T, path, pub string) (*Result, error) {
	t.Helper()
	k, err := LoadPublicKey(pub)
	require.NoError(t, err)
	return Verify(path, k)
}

func TestBundleVerifies(t *testing.T) {
	path, pub, _ := bundle(t)
	res, err := verifyWith(t, path, pub)
	require.NoError(t, err)
	assert.Equal(t, "NOT QUALIFIED (22 must requirements failed)", res.Predicate.Verdict)
	assert.Equal(t, res.Predicate.Verdict, res.Rederived)
	assert.Equal(t, 1, res.Predicate.ExitCode)
	assert.Equal(t, "SHA256:", res.KeyID[:7], "the key's SSH-style SHA-256 fingerprint")
	assert.Len(t, res.Predicate.Binaries, 1)
	assert.Greater(t, res.Members, 6, "reports, raw stream, host.json, thresholds")
	m, err := readArchive(path)
	require.NoError(t, err)
	for _, want := range []string{"report/test.json", "report/host.json", "report/junit.xml", "report/summary.json", ThresholdsFile, EnvelopeFile} {
		assert.Contains(t, m, want)
	}
	var th []Threshold
	require.NoError(t, json.Unmarshal(m[ThresholdsFile], &th))
	assert.NotEmpty(t, th, "the recording's bounds with their sources")
}

// rewrite copies the bundle with member name changed by f (nil f: removed).
func rewrite(t *testing.T, path, name string, f func([]byte) []byte) string {
	t.Helper()
	m, err := readArchive(path)
	require.NoError(t, err)
	if f == nil {
		delete(m, name)
	} else {
		m[name] = f(m[name])
	}
	out := filepath.Join(t.TempDir(), "tampered.tar.gz")
	require.NoError(t, writeArchive(out, m, time.Time{}))
	return out
}

// One byte changed in a report, a verdict edited, a member added or
// removed: verify fails naming the member and what happened to it.
func TestBundleTampered(t *testing.T) {
	path, pub, _ := bundle(t)
	for name, tc := range map[string]struct {
		member string
		f      func([]byte) []byte
		want   string
	}{
		"one byte of the raw stream": {"report/test.json", func(b []byte) []byte { c := bytes.Clone(b); c[100] ^= 1; return c }, "report/test.json: sha256"},
		"the verdict edited":         {"report/summary.json", func(b []byte) []byte { return bytes.Replace(b, []byte("NOT QUALIFIED"), []byte("QUALIFIED"), 1) }, "report/summary.json: sha256"},
		"a member removed":           {"report/junit.xml", nil, "report/junit.xml: in the signed statement but not in the archive (removed)"},
		"a member added":             {"report/extra.txt", func([]byte) []byte { return []byte("x") }, "report/extra.txt: in the archive but not in the signed statement (added)"},
	} {
		_, err := verifyWith(t, rewrite(t, path, tc.member, tc.f), pub)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	// Another key: the signature does not verify.
	_, other := keys(t)
	_, err := verifyWith(t, path, other)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the signature does not verify")
	// The statement edited inside the envelope, signature kept.
	_, err = verifyWith(t, rewrite(t, path, EnvelopeFile, func(b []byte) []byte {
		var env dsse.Envelope
		require.NoError(t, json.Unmarshal(b, &env))
		p, _ := base64.StdEncoding.DecodeString(env.Payload)
		env.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(p, []byte("NOT QUALIFIED"), []byte("QUALIFIED"), 1))
		out, _ := json.Marshal(env)
		return out
	}), pub)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the signature does not verify")
}

// Someone with the key signs a verdict the raw streams do not give: the
// re-derivation catches it.
func TestBundleVerdictMustRederive(t *testing.T) {
	path, pub, s := bundle(t)
	m, err := readArchive(path)
	require.NoError(t, err)
	delete(m, EnvelopeFile)
	pred := Predicate{Verdict: "QUALIFIED", ExitCode: 0, Created: "2026-12-02T06:00:00Z"}
	st, err := statement(m, pred)
	require.NoError(t, err)
	es, err := dsse.NewEnvelopeSigner(s)
	require.NoError(t, err)
	env, err := es.SignPayload(context.Background(), PayloadType, st)
	require.NoError(t, err)
	eb, _ := json.Marshal(env)
	m[EnvelopeFile] = eb
	out := filepath.Join(t.TempDir(), "resigned.tar.gz")
	require.NoError(t, writeArchive(out, m, time.Time{}))
	_, err = verifyWith(t, out, pub)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `the raw streams give "NOT QUALIFIED (22 must requirements failed)" (exit 1), the signed predicate says "QUALIFIED" (exit 0)`)
}

// The buyer's check with standard tooling (README): the DSSE envelope's
// signature over the pre-authentication encoding verifies with openssl,
// and a member's digest with sha256sum.
func TestBundleVerifiesWithOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skipf("openssl not in PATH (%v): the README's standard-tool check is not exercised here", err)
	}
	path, pub, _ := bundle(t)
	m, err := readArchive(path)
	require.NoError(t, err)
	var env dsse.Envelope
	require.NoError(t, json.Unmarshal(m[EnvelopeFile], &env))
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	require.NoError(t, err)
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	require.NoError(t, err)
	d := t.TempDir()
	pae := []byte("DSSEv1 " + strconv.Itoa(len(env.PayloadType)) + " " + env.PayloadType + " " + strconv.Itoa(len(body)) + " ")
	pae = append(pae, body...)
	require.NoError(t, os.WriteFile(filepath.Join(d, "pae"), pae, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d, "sig"), sig, 0o644))
	out, err := exec.Command("openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", filepath.Join(d, "pae"), "-sigfile", filepath.Join(d, "sig")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Signature Verified Successfully")
}

// The bundle the H200 wrote (fixtures/runs/h200-inventory) verifies here
// with that run's public key: the raw stream re-derives its verdict.
func TestRecordedBundle(t *testing.T) {
	dir := filepath.Join("..", "..", "fixtures", "runs", "h200-inventory")
	res, err := verifyWith(t, filepath.Join(dir, BundleFile), filepath.Join(dir, "signer.pub.pem"))
	require.NoError(t, err)
	assert.Equal(t, "INCOMPLETE (23 must requirements skipped)", res.Predicate.Verdict)
	assert.Contains(t, res.Predicate.Binaries, "gpu.test")
}

// A merge: the report folder holds no raw stream, so the bundle carries the
// inputs under runs/ and the verdict re-derives from them.
func TestBundleOfMerge(t *testing.T) {
	a, b := reportDir(t), reportDir(t)
	hj := filepath.Join(b, "host.json")
	raw, err := os.ReadFile(hj)
	require.NoError(t, err)
	var id map[string]any
	require.NoError(t, json.Unmarshal(raw, &id))
	id["host"], id["machine_id"] = "gpu02", "m2"
	raw, _ = json.Marshal(id)
	require.NoError(t, os.WriteFile(hj, raw, 0o644))
	out := t.TempDir()
	r, err := report.FromDirs([]string{a, b}, report.Options{})
	require.NoError(t, err)
	require.NoError(t, r.WriteAll(out))
	priv, pub := keys(t)
	s, err := LoadSigner(priv)
	require.NoError(t, err)
	path := filepath.Join(out, BundleFile)
	require.NoError(t, Create([]string{a, b}, out, path, s, Options{}))
	res, err := verifyWith(t, path, pub)
	require.NoError(t, err)
	assert.Len(t, res.Predicate.Hosts, 2)
	m, err := readArchive(path)
	require.NoError(t, err)
	assert.Contains(t, m, "runs/1-"+filepath.Base(a)+"/test.json")
	assert.Contains(t, m, "report/summary.json")
}

// A key is never overwritten: an existing file (whatever its mode) or a
// link in its place is refused, and the private key is 0600 whatever the
// umask.
func TestGenerateKeyRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "k.pem"), filepath.Join(dir, "k.pub.pem")
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	require.NoError(t, GenerateKey(priv, pub))
	fi, err := os.Stat(priv)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	before, err := os.ReadFile(priv)
	require.NoError(t, err)
	assert.ErrorContains(t, GenerateKey(priv, pub), "exists: a key is never overwritten")
	after, _ := os.ReadFile(priv)
	assert.Equal(t, before, after)

	// A link where the key would go (pointing at a file of another owner's
	// choosing) is refused, not followed.
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("x"), 0o644))
	link := filepath.Join(dir, "l.pem")
	require.NoError(t, os.Symlink(target, link))
	assert.Error(t, GenerateKey(link, filepath.Join(dir, "l.pub.pem")))
	b, _ := os.ReadFile(target)
	assert.Equal(t, "x", string(b))
	dangling := filepath.Join(dir, "d.pem")
	require.NoError(t, os.Symlink(filepath.Join(dir, "nothing"), dangling))
	assert.Error(t, GenerateKey(dangling, filepath.Join(dir, "d.pub.pem")))
	assert.NoFileExists(t, filepath.Join(dir, "nothing"))
}

// The members are read before the signature is checked: their total is
// bounded, so an archive that expands without end stops with its name.
func TestBundleSizeBound(t *testing.T) {
	defer func(m int64) { maxBundle = m }(maxBundle)
	maxBundle = 1 << 20
	p := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(p)
	require.NoError(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for i := range 3 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("m%d", i), Mode: 0o644, Size: 1 << 19, Typeflag: tar.TypeReg}))
		_, err := tw.Write(make([]byte, 1<<19))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	require.NoError(t, f.Close())
	_, err = readArchive(p)
	assert.ErrorContains(t, err, "the members hold over 1048576 bytes before the signature is checked")
}

// A bundle signed over readable files that lie does not verify: each file
// people or pipelines read is compared with the report the raw streams
// give (before, only the predicate and summary.json's line were).
func TestReadableFilesMustMatchTheStreams(t *testing.T) {
	for _, c := range []struct {
		file, from, to, want string
	}{
		{report.SummaryText, "NOT QUALIFIED (22 must requirements failed)", "QUALIFIED", "summary.txt: headline"},
		{report.SummaryMD, "NOT QUALIFIED (22 must requirements failed)", "QUALIFIED", "summary.md: headline"},
		{report.HTMLFile, "NOT QUALIFIED (22 must requirements failed)", "QUALIFIED", "report.html: headline"},
		{report.ExitCodeFile, "1", "0", "exit-code: \"0\", the raw streams give 1"},
		{report.JUnitFile, "<failure ", "<skipped ", "junit.xml: tests/failures/errors/skipped"},
		{report.SummaryText, "INST-05  PASS", "INST-05  SKIP", "summary.txt: differs from the report the raw streams give"},
	} {
		t.Run(c.file+" "+c.to, func(t *testing.T) {
			dir := reportDir(t)
			p := filepath.Join(dir, c.file)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Contains(t, string(b), c.from)
			lie := strings.Replace(string(b), c.from, c.to, 1)
			if c.file == report.HTMLFile { // the title says it too
				lie = strings.ReplaceAll(string(b), c.from, c.to)
			}
			if c.file == report.JUnitFile {
				lie = strings.ReplaceAll(strings.ReplaceAll(string(b), "<failure ", "<skipped "), "</failure>", "</skipped>")
			}
			require.NoError(t, os.WriteFile(p, []byte(lie), 0o644))
			priv, pub := keys(t)
			s, err := LoadSigner(priv)
			require.NoError(t, err)
			path := filepath.Join(dir, BundleFile)
			require.NoError(t, Create([]string{dir}, dir, path, s, Options{}))
			_, err = verifyWith(t, path, pub)
			require.Error(t, err, "the signature holds, the files lie")
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report"
	"github.com/gdrconf/gdrconf/report/junitcheck"
)

// The lab checks the junit.xml it wrote against both schemas: the lab's
// own hosts (a peer that vanished, a skip, a test that never finished, a VM
// that died) give a valid file, and a file CI would reject fails the lab.
func TestJUnitProblems(t *testing.T) {
	t.Log("checked by", junitcheck.Method())
	dir := t.TempDir()
	require.NoError(t, report.Build(Runs(sampleSuites(), "6.1.0-57-amd64", nil)).WriteAll(dir))
	assert.Empty(t, JUnitProblems(dir))

	f := filepath.Join(dir, report.JUnitFile)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	bad := strings.Replace(string(b), "<testsuite ", `<testsuite bogus="x" `, 1)
	require.NoError(t, os.WriteFile(f, []byte(bad), 0o644))
	p := JUnitProblems(dir)
	require.Len(t, p, 2, "both schemas reject it")
	assert.Contains(t, p[0], "junit-10.xsd")
	assert.Contains(t, p[1], "Ant JUnit schema")

	b = []byte(strings.Replace(string(b), `<testsuite name="server/pingpong" tests="`, `<testsuite name="server/pingpong" tests="9`, 1))
	require.NoError(t, os.WriteFile(f, b, 0o644))
	p = JUnitProblems(dir)
	require.Len(t, p, 1, "valid, but its counts lie")
	assert.Contains(t, p[0], "beyond the schemas")
	assert.Contains(t, p[0], `tests="9`)

	require.NoError(t, os.Remove(f))
	assert.Len(t, JUnitProblems(dir), 1, "no junit.xml is a problem")
}

// The faults table quotes the failure, not the attribute lines go test
// prints before it.
func TestFirstFailLine(t *testing.T) {
	out := "=== RUN   TestPP05Read\n=== ATTR  TestPP05Read gdr.remedy check the peer\n" +
		"    pingpong_test.go:88: peer 198.18.0.2 vanished; remedy: check the peer\n--- FAIL: TestPP05Read (2.00s)\n"
	assert.Equal(t, "pingpong_test.go:88: peer 198.18.0.2 vanished; remedy: check the peer", firstFailLine(out))
	assert.Equal(t, "x_test.go:1: no remedy here", firstFailLine("=== ATTR  T gdr.cause c\n    x_test.go:1: no remedy here\n"))
	assert.Equal(t, "first", firstFailLine("=== ATTR  T gdr.cause c\n   first\nsecond\n"))
}

package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pickDist runs deploy/pick-dist.sh as the Dockerfile does, on a fake
// build context holding the given dists (folder -> the ARCH it records).
func pickDist(t *testing.T, dists map[string]string, arch string) (dst string, out string, err error) {
	t.Helper()
	ctx := t.TempDir()
	for d, a := range dists {
		require.NoError(t, os.MkdirAll(filepath.Join(ctx, d, "bin"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(ctx, d, "ARCH"), []byte(a+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ctx, d, "bin", "from"), []byte(d), 0o644))
	}
	dst = filepath.Join(t.TempDir(), "opt", "gdrconf")
	b, err := exec.Command("sh", "pick-dist.sh", ctx, arch, dst).CombinedOutput()
	return dst, string(b), err
}

// The image takes the dist built for its platform: dist-<arch>/ for a
// multi-arch build, dist/ when it was built for that platform, and a dist
// of another architecture is refused naming the make command, so an arm64
// image never ships x86 binaries.
func TestImagePicksThePlatformsDist(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dists map[string]string
		arch  string
		from  string // the dist copied; "" = refused
		says  string
	}{
		{"single amd64", map[string]string{"dist": "amd64"}, "amd64", "dist", "dist/ (amd64)"},
		{"multi-arch amd64", map[string]string{"dist": "amd64", "dist-amd64": "amd64", "dist-arm64": "arm64"}, "amd64", "dist-amd64", "dist-amd64/"},
		{"multi-arch arm64", map[string]string{"dist": "amd64", "dist-amd64": "amd64", "dist-arm64": "arm64"}, "arm64", "dist-arm64", "dist-arm64/"},
		{"native Grace build", map[string]string{"dist": "arm64"}, "arm64", "dist", "dist/ (arm64)"},
		{"arm64 image of an amd64 dist", map[string]string{"dist": "amd64"}, "arm64", "", "no dist built for arm64 in the build context (found: dist/ (amd64)): run make dist ARCH=arm64 first"},
		{"no dist", nil, "amd64", "", "(found: none): run make dist ARCH=amd64 first"},
		{"no platform", map[string]string{"dist": "amd64"}, "", "", "no target architecture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst, out, err := pickDist(t, tc.dists, tc.arch)
			assert.Contains(t, out, tc.says)
			if tc.from == "" {
				assert.Error(t, err, out)
				assert.NoDirExists(t, dst)
				return
			}
			require.NoError(t, err, out)
			b, err := os.ReadFile(filepath.Join(dst, "bin", "from"))
			require.NoError(t, err)
			assert.Equal(t, tc.from, string(b))
			assert.FileExists(t, filepath.Join(dst, "ARCH"))
		})
	}
}

// The Dockerfile hands pick-dist.sh the platform BuildKit sets, and
// .dockerignore, read with Docker's own matcher, sends the dists and the
// script as the context and leaves out the lab's cache (gigabytes) and the
// reports.
func TestImageContext(t *testing.T) {
	df, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	assert.Contains(t, string(df), "\nARG TARGETARCH\n")
	assert.Contains(t, string(df), `RUN --mount=type=bind,target=/ctx sh /ctx/deploy/pick-dist.sh /ctx "$TARGETARCH" /opt/gdrconf`)
	assert.NotContains(t, string(df), "COPY dist/", "the dist is picked per platform")

	f, err := os.Open("../.dockerignore")
	require.NoError(t, err)
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	require.NoError(t, err)
	pm, err := patternmatcher.New(patterns)
	require.NoError(t, err)
	for path, sent := range map[string]bool{
		"dist/run.sh": true, "dist/bin/pingpong.test": true, "dist/ARCH": true,
		"dist-arm64/bin/gpu.test": true, "dist-amd64/gdrcluster": true,
		"deploy/pick-dist.sh":        true,
		".cache/lab/parts-x/vmlinux": false, "reports/junit.xml": false, "deploy/k8s/job.yaml": false,
		"go.mod": false, ".git/HEAD": false,
	} {
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(path))
		require.NoError(t, err)
		assert.Equal(t, sent, !excluded, "%s in the build context", path)
	}
	sh, err := os.ReadFile("pick-dist.sh")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(sh), "#!/bin/sh\n"), "POSIX sh: the Dockerfile runs it with sh")
}

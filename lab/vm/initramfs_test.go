package vm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testJob is a vm.Job as package lab's is: a JSON file told the modules.
type testJob struct {
	Role    string   `json:"role"`
	Modules []string `json:"modules"`
}

func (j testJob) JobJSON(modules []string) ([]byte, error) {
	j.Modules = modules
	return json.Marshal(j)
}

// fakeParts is an unpacked parts tree whose tools are copies of this host's
// /bin/true, with fake modules for ModuleRoots and a Slurm-like library in a
// private folder that a test binary (bin, built here) needs.
func fakeParts(t *testing.T) (p *Parts, bin string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler (cc) in PATH to build a parts tree: %v", err)
	}
	root := t.TempDir()
	put := func(rel string, b []byte, mode os.FileMode) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), b, mode))
	}
	tr, err := os.ReadFile("/bin/true")
	require.NoError(t, err)
	for _, c := range Tools {
		put(c[0], tr, 0o755)
	}
	put("usr/lib/"+AMD64.Multiarch+"/libibverbs/librxe-rdmav34.so", tr, 0o644)
	put("etc/libibverbs.d/rxe.driver", []byte("driver rxe\n"), 0o644)
	mods := filepath.Join(root, "lib/modules/6.1.0-57-amd64")
	for _, m := range append(append([]string(nil), ModuleRoots...), "9p") {
		fakeModule(t, filepath.Join(mods, "kernel"), m+".ko", "name="+m)
	}

	src := t.TempDir()
	private := filepath.Join(root, "usr/lib", AMD64.Multiarch, "slurm-wlm")
	require.NoError(t, os.MkdirAll(private, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "p.c"), []byte("int privfn(void) { return 0; }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "m.c"), []byte("int privfn(void);\nint main(void) { return privfn(); }\n"), 0o644))
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-Wl,-soname,libgdrpriv.so", "-o", filepath.Join(private, "libgdrpriv.so"), filepath.Join(src, "p.c")},
		{"-o", filepath.Join(src, "m"), filepath.Join(src, "m.c"), "-L" + private, "-lgdrpriv"},
	} {
		out, err := exec.Command(cc, args...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return &Parts{Root: root, KernelVer: "6.1.0-57-amd64"}, filepath.Join(src, "m")
}

// gunzipNames is every entry name of a gzip newc archive.
func gunzipNames(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	b, err := io.ReadAll(zr)
	require.NoError(t, err)
	out := map[string][]byte{}
	for off := 0; ; {
		field := func(i int) int {
			v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
			require.NoError(t, err)
			return int(v)
		}
		size, nsize := field(6), field(11)
		name := string(b[off+110 : off+110+nsize-1])
		d := (off + 110 + nsize + 3) &^ 3
		if name == "TRAILER!!!" {
			return out
		}
		out[name] = b[d : d+size]
		off = (d + size + 3) &^ 3
	}
}

// The image holds the tools, the rxe provider under the multiarch library
// folder, the modules in load order (told to each job), and a library of a
// private folder in that folder; the layer holds what place keeps, where
// it puts it, and never the jobs.
func TestImageFromParts(t *testing.T) {
	p, bin := fakeParts(t)
	im := &Image{Parts: p, Agent: "/bin/true", Binaries: map[string]string{"/lab/m": bin},
		Jobs: map[string]Job{"server": testJob{Role: "server"}}, Modules: []string{"9p"},
		Data: map[string]DataFile{"/etc/x.conf": {Mode: 0o600, Bytes: []byte("x")}}}

	_, _, err := im.files()
	assert.ErrorContains(t, err, "libgdrpriv.so", "a private folder's library is not found unless the image names the folder")

	im.PrivateLibDirs = []string{"usr/lib/" + AMD64.Multiarch + "/slurm-wlm"}
	dst := filepath.Join(t.TempDir(), "initrd.gz")
	require.NoError(t, im.Build(dst))
	got := gunzipNames(t, dst)
	for gp := range Tools {
		assert.Contains(t, got, strings.TrimPrefix(gp, "/"))
	}
	assert.Contains(t, got, "usr/lib/"+AMD64.Multiarch+"/libibverbs/librxe-rdmav34.so")
	assert.Contains(t, got, "usr/lib/"+AMD64.Multiarch+"/slurm-wlm/libgdrpriv.so")
	assert.NotContains(t, got, "usr/lib/"+AMD64.Multiarch+"/libgdrpriv.so")
	assert.Equal(t, []byte("x"), got["etc/x.conf"])
	var j testJob
	require.NoError(t, json.Unmarshal(got["lab/job-server.json"], &j))
	want := []string{"/lab/modules/crc32_generic.ko"}
	assert.Equal(t, want, j.Modules[:1], "crc32_generic first, as ModuleRoots has it")
	assert.Contains(t, j.Modules, "/lab/modules/9p.ko", "the image's extra module roots")
	assert.Len(t, j.Modules, len(ModuleRoots)+1)

	layer := filepath.Join(t.TempDir(), "layer.tar")
	require.NoError(t, im.Layer(layer, func(gp string) (string, bool) {
		if gp == "/lab/m" {
			return "/opt/m", true
		}
		return gp, !strings.HasPrefix(gp, "/lab") && gp != "/init"
	}))
	lb, err := os.ReadFile(layer)
	require.NoError(t, err)
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(lb))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names[strings.TrimPrefix(h.Name, "/")] = true
	}
	assert.True(t, names["opt/m"], "place moves a file")
	assert.True(t, names["usr/lib/"+AMD64.Multiarch+"/slurm-wlm/libgdrpriv.so"])
	for n := range names {
		assert.False(t, strings.HasPrefix(n, "lab/") || n == "init" || n == "dev/console" || n == "dev/null", "%s in the layer", n)
	}
}

// A tool that Debian ships as an absolute link (/sbin/ip -> /bin/ip) is
// the parts' file, never this host's file of that name (another build, or
// another architecture's on a foreign lab).
func TestImageToolLinkStaysInParts(t *testing.T) {
	p, _ := fakeParts(t)
	ip := filepath.Join(p.Root, "sbin/ip")
	require.NoError(t, os.Remove(ip))
	require.NoError(t, os.Symlink("/bin/ip", ip))
	require.NoError(t, os.MkdirAll(filepath.Join(p.Root, "bin"), 0o755))
	tr, err := os.ReadFile("/bin/true")
	require.NoError(t, err)
	mine := append(tr, "the parts' ip"...) // an ELF still: the image reads its libraries
	require.NoError(t, os.WriteFile(filepath.Join(p.Root, "bin/ip"), mine, 0o755))
	im := &Image{Parts: p, Agent: "/bin/true", Jobs: map[string]Job{}}
	dst := filepath.Join(t.TempDir(), "initrd.gz")
	require.NoError(t, im.Build(dst))
	assert.Equal(t, mine, gunzipNames(t, dst)["usr/sbin/ip"])

	_, ok := inRoot(p.Root, "no/such/tool")
	assert.False(t, ok)
	require.NoError(t, os.Symlink("loop", filepath.Join(p.Root, "loop")))
	_, ok = inRoot(p.Root, "loop")
	assert.False(t, ok, "a link loop ends")
}

package kmod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

// The ofed_info MLNX_OFED and DOCA-OFED install answers -s from a line of
// its own (the shape of a DOCA-OFED 24.01 host's script).
const docaOFEDInfo = `#!/bin/bash
usage()
{
	cat <<EOF
Usage: $0 [options]
EOF
}
if [ "X$1" == "X-s" ]; then echo OFED-internal-24.01-0.3.3:; exit 0; fi
if [ "X$1" == "X-n" ]; then echo 24.01-0.3.3; exit 0; fi
`

func TestParseOFEDInfoScript(t *testing.T) {
	v, err := ParseOFEDInfoScript([]byte(docaOFEDInfo))
	require.NoError(t, err)
	assert.Equal(t, OFED{"OFED-internal", "24.01-0.3.3"}, v)
	v, err = ParseOFEDInfoScript([]byte(`if [ "X$1" == "X-s" ]; then echo MLNX_OFED_LINUX-5.8-1.0.1.1:; exit; fi`))
	require.NoError(t, err)
	assert.Equal(t, "MLNX_OFED_LINUX-5.8-1.0.1.1", v.String())
	_, err = ParseOFEDInfoScript([]byte("#!/bin/sh\necho hello\n"))
	assert.ErrorContains(t, err, "not the ofed_info")
}

func TestVersionFromSoname(t *testing.T) {
	assert.Equal(t, "44.0", VersionFromSoname("libibverbs.so.1.14.44.0"))
	assert.Equal(t, "50.0", VersionFromSoname("librdmacm.so.1.3.50.0"))
	assert.Equal(t, "2404mlnx51", VersionFromSoname("libibverbs.so.1.14.2404mlnx51"))
	assert.Empty(t, VersionFromSoname("libibverbs.so.1"))
	assert.Empty(t, VersionFromSoname("libcuda.so.1.1"))
}

func TestParseDpkgStatus(t *testing.T) {
	got := ParseDpkgStatus([]byte("Package: libibverbs1\nStatus: install ok installed\nVersion: 2404mlnx51-1.2404066\nDescription: x\n continued: line\n\n" +
		"Package: rdma-core\nStatus: deinstall ok config-files\nVersion: 44.0-2\n"))
	assert.Equal(t, map[string]string{"libibverbs1": "2404mlnx51-1.2404066"}, got)
}

// A DOCA-OFED node as its files show it, and an inbox Debian image.
func TestReadStackAndCompare(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "usr/lib/x86_64-linux-gnu")
	require.NoError(t, os.MkdirAll(lib, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "libibverbs.so.1.14.2404mlnx51"), nil, 0o644))
	require.NoError(t, os.Symlink("libibverbs.so.1.14.2404mlnx51", filepath.Join(lib, "libibverbs.so.1")))
	require.NoError(t, os.WriteFile(filepath.Join(lib, "librdmacm.so.1"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "usr/bin/ofed_info"), []byte(docaOFEDInfo), 0o755))
	node, err := hostfs.New(dir)
	require.NoError(t, err)
	ns, err := ReadStack(node)
	require.NoError(t, err)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", ns.Verbs)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/librdmacm.so.1", ns.RDMACM)
	assert.Equal(t, "2404mlnx51", ns.Version)
	assert.Contains(t, ns.VersionFrom, "libibverbs.so.1.14.2404mlnx51 (the library's file name)")
	require.NotNil(t, ns.OFED)
	assert.True(t, ns.Vendor())
	assert.Equal(t, "DOCA-OFED/MLNX_OFED OFED-internal-24.01-0.3.3", ns.Kind())

	image := hostfstest.Tree(t, map[string]string{
		"/usr/lib/x86_64-linux-gnu/libibverbs.so.1": "", "/usr/lib/x86_64-linux-gnu/librdmacm.so.1": "",
		DpkgStatus: "Package: libibverbs1\nStatus: install ok installed\nVersion: 44.0-2\n",
	})
	is, err := ReadStack(image)
	require.NoError(t, err)
	assert.Equal(t, "44.0-2", is.Version)
	assert.False(t, is.Vendor())
	assert.Equal(t, "inbox rdma-core 44.0-2", is.Kind())

	fact, warn := Compare(ns, is)
	assert.Contains(t, fact, "the node runs DOCA-OFED/MLNX_OFED OFED-internal-24.01-0.3.3 and this image inbox rdma-core 44.0-2")
	assert.Contains(t, warn, "out-of-tree kernel driver")
	fact, warn = Compare(is, is)
	assert.Empty(t, fact)
	assert.Empty(t, warn)

	// ld.so.conf.d directories count; a library nowhere is "".
	other := hostfstest.Tree(t, map[string]string{
		"/etc/ld.so.conf.d/ofed.conf": "# OFED\n/opt/mellanox/lib\n", "/opt/mellanox/lib/libibverbs.so.1": "",
	})
	os2, err := ReadStack(other)
	require.NoError(t, err)
	assert.Equal(t, "/opt/mellanox/lib/libibverbs.so.1", os2.Verbs)
	assert.Empty(t, os2.RDMACM)
	assert.Equal(t, "no rdma-core", Stack{}.Kind())

	bad := hostfstest.Tree(t, map[string]string{"/usr/bin/ofed_info": "#!/bin/sh\n"})
	_, err = ReadStack(bad)
	assert.ErrorContains(t, err, "/usr/bin/ofed_info")
}

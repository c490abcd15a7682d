package verbsprov

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

func TestInstalled(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
	}
	write("etc/libibverbs.d/mlx5.driver", "# comment\ndriver mlx5\n")
	write("etc/libibverbs.d/odd.driver", "driver\n")
	write("usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "")
	write("usr/lib64/libibverbs/libnot-a-provider.so", "")
	root, err := hostfs.New(dir)
	require.NoError(t, err)

	names, looked, err := Installed(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"mlx5": "/etc/libibverbs.d/mlx5.driver",
		"rxe":  "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
	}, names)
	assert.Equal(t, root.Host(ConfigDir)+"/*.driver", looked[0])
	assert.Len(t, looked, 1+len(Dirs))
	assert.Equal(t, "mlx5", For["mlx5_core"])

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "etc/libibverbs.d/dir.driver"), 0o755))
	_, _, err = Installed(root)
	assert.Error(t, err, "a config that cannot be read")
}

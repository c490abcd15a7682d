package kmod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

func TestInstalled(t *testing.T) {
	files := map[string]string{
		"etc/libibverbs.d/mlx5.driver":                          "# comment\ndriver mlx5\n",
		"etc/libibverbs.d/odd.driver":                           "driver\n",
		"usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so": "",
		"usr/lib64/libibverbs/libnot-a-provider.so":             "",
	}
	root := hostfstest.Tree(t, files)
	names, looked, err := Providers(root)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"mlx5": "/etc/libibverbs.d/mlx5.driver",
		"rxe":  "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so",
	}, names)
	assert.Equal(t, root.Host(ProviderConfigDir)+"/*.driver", looked[0])
	assert.Len(t, looked, 1+len(ProviderDirs))
	assert.Equal(t, "mlx5", ProviderFor["mlx5_core"])

	files["etc/libibverbs.d/dir.driver/x"] = "" // a directory where a file should be
	_, _, err = Providers(hostfstest.Tree(t, files))
	assert.Error(t, err, "a config that cannot be read")
}

package health

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/testenv"
)

// A traffic test that skipped (no NIC, the peer skipped) moved no data:
// the HLTH test must not count it as traffic it judged.
func TestAroundSkippedTestDroveNoTraffic(t *testing.T) {
	root, err := filepath.Abs("../../fixtures/hosts/rxe")
	require.NoError(t, err)
	t.Setenv("GDR_HOST_ROOT", root)
	sel := testenv.Selection(t)
	require.NotEmpty(t, sel.Rails)
	w := New()
	t.Run("skipped", func(t *testing.T) {
		w.Around(t, sel.Rails[0])
		t.Skip("stands for a traffic test that found nothing to run on")
	})
	t.Run("moved", func(t *testing.T) { w.Around(t, sel.Rails[0]) })
	assert.Equal(t, []string{t.Name() + "/moved"}, w.Ran())
}

package dl

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libc is on every glibc machine this suite builds on.
const libc = "libc.so.6"

func TestOpenLookupClose(t *testing.T) {
	l, err := Open(libc)
	require.NoError(t, err)
	assert.Equal(t, libc, l.Name())
	assert.NoError(t, l.Lookup("malloc"))

	err = l.Lookup("gdr_no_such_symbol_xyz")
	var de *Error
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "dlsym", de.Op)
	assert.Contains(t, err.Error(), "gdr_no_such_symbol_xyz")
	assert.Contains(t, de.Msg, "undefined symbol", "dlerror text kept")

	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close is a no-op")
	// go-nvml's dlsym on the closed (NULL) handle is RTLD_DEFAULT and
	// finds malloc in the process: the wrapper must not.
	assert.Error(t, l.Lookup("malloc"), "lookup after close")
}

func TestOpenMissingCarriesDlerror(t *testing.T) {
	_, err := Open("libgdr-does-not-exist.so.9")
	require.Error(t, err)
	var de *Error
	require.True(t, errors.As(err, &de))
	assert.Equal(t, "dlopen", de.Op)
	// glibc: "libgdr-does-not-exist.so.9: cannot open shared object file: No such file or directory"
	assert.True(t, strings.Contains(de.Msg, "cannot open shared object file"), "dlerror text kept: %q", de.Msg)
	assert.Contains(t, err.Error(), "libgdr-does-not-exist.so.9")
}

func TestOpenEmptyName(t *testing.T) {
	_, err := Open("")
	assert.Error(t, err, `dlopen("") is the main program and would open`)
}

func TestProbe(t *testing.T) {
	assert.NoError(t, Probe(libc))
	assert.Error(t, Probe("/nonexistent/libx.so"))
}

func TestHas(t *testing.T) {
	has, err := Has(libc, "malloc")
	require.NoError(t, err)
	assert.True(t, has)
	has, err = Has(libc, "gdr_no_such_symbol_xyz")
	require.NoError(t, err)
	assert.False(t, has)
	_, err = Has("libgdr-does-not-exist.so.9", "malloc")
	assert.Error(t, err)
}

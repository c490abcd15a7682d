package nvdriver

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const openFile = `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Thu Jun 26 22:03:48 UTC 2025
GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)
`

const propFile = `NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023
GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)
`

func TestParseVersionFile(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Info
	}{
		{"open", openFile, Info{Version: "580.159.04", Open: true, Arch: "x86_64", GCC: "13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"}},
		{"proprietary", propFile, Info{Version: "535.54.03", Arch: "x86_64", GCC: "12.2.0 (Debian 12.2.0-14)"}},
		{"open aarch64", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.15  Release Build  (dvs-builder@x)  Tue Mar  5 22:15:33 UTC 2024\n",
			Info{Version: "550.54.15", Open: true, Arch: "aarch64"}},
		{"two-part version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  390.157  Wed Oct 12 09:19:07 UTC 2022\n",
			Info{Version: "390.157", Arch: "x86_64"}},
	} {
		got, err := ParseVersionFile([]byte(tc.in))
		require.NoError(t, err, tc.name)
		got.Line = ""
		assert.Equal(t, tc.want, got, tc.name)
	}
	info, err := ParseVersionFile([]byte(openFile))
	require.NoError(t, err)
	assert.Equal(t, "open", info.Flavour())
	info, err = ParseVersionFile([]byte(propFile))
	require.NoError(t, err)
	assert.Equal(t, "proprietary", info.Flavour())
}

func TestParseVersionFileErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":      "",
		"no NVRM":    "GCC version: gcc version 12\n",
		"not NVIDIA": "NVRM version: something else 1.2.3\n",
		"no version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module\n",
		"garbage":    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  abc.def  Tue\n",
		"twice":      propFile + propFile,
		"for only":   "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64\n",
	} {
		_, err := ParseVersionFile([]byte(in))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), VersionFile, name)
	}
}

func TestDriverVersions(t *testing.T) {
	v, err := ParseDriverVersion("580.159.04")
	require.NoError(t, err)
	assert.Equal(t, []int{580, 159, 4}, v)
	for _, bad := range []string{"", "580", "580.", "a.b", "1.2.3.4", "-1.2", "+1.2", "580.1234567"} {
		_, err := ParseDriverVersion(bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, SameVersion("580.159.04", "580.159.04\n"))
	assert.True(t, SameVersion("580.159.4", "580.159.04"))
	assert.False(t, SameVersion("580.159.04", "580.159.03"))
	assert.False(t, SameVersion("580.159", "580.159.0"))
	assert.False(t, SameVersion("", ""))
}

func FuzzParseVersionFile(f *testing.F) {
	f.Add([]byte(openFile))
	f.Add([]byte(propFile))
	f.Add([]byte("NVRM version: NVIDIA UNIX Kernel Module for"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseVersionFile(b)
		if err != nil {
			return
		}
		if _, err := ParseDriverVersion(info.Version); err != nil {
			t.Fatalf("accepted version %q: %v", info.Version, err)
		}
	})
}

// Remedies name the installer of the architecture the suite runs on: a
// Grace host (arm64) cannot run NVIDIA's x86_64 runfile.
func TestRunfileNamesTheArchitecture(t *testing.T) {
	assert.Equal(t, "x86_64", Machine("amd64"))
	assert.Equal(t, "aarch64", Machine("arm64"))
	assert.Equal(t, "NVIDIA-Linux-"+Machine(runtime.GOARCH)+"-<version>.run", Runfile)
}

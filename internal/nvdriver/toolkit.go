package nvdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// ToolkitDirs are where the CUDA toolkit installs (NVIDIA's packages and
// runfile), newest-looking last after the default link.
var ToolkitDirs = []string{"/usr/local/cuda", "/usr/local/cuda-*"}

// Toolkit is a CUDA toolkit found as files: its version and the file that
// said so.
type Toolkit struct {
	Dir, From string
	Version   CUDAVersion
}

// toolkitJSON is the part of a toolkit's version.json (CUDA 11.1 and
// later) the suite reads: the SDK's and nvcc's versions.
type toolkitJSON struct {
	CUDA struct {
		Version string `json:"version"`
	} `json:"cuda"`
	NVCC struct {
		Version string `json:"version"`
	} `json:"cuda_nvcc"`
}

var dotted = regexp.MustCompile(`^(\d{1,3})\.(\d{1,3})(?:\.(\d{1,6}))?$`)

// ParseToolkitJSON reads a toolkit's version.json: nvcc's version
// ("12.4.131") when listed, else the SDK's ("12.4.1").
func ParseToolkitJSON(b []byte) (CUDAVersion, error) {
	var j toolkitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return CUDAVersion{}, fmt.Errorf("version.json is not JSON: %v", err)
	}
	v := j.NVCC.Version
	if v == "" {
		v = j.CUDA.Version
	}
	m := dotted.FindStringSubmatch(v)
	if m == nil || m[1] == "0" {
		return CUDAVersion{}, fmt.Errorf("version.json names no CUDA version (cuda_nvcc.version or cuda.version): %s", clip.QuoteN(string(b), 200))
	}
	var n [3]int
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1]) // the pattern admits only short digit runs
	}
	return CUDAVersion{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

// FindToolkit looks for a CUDA toolkit under r without running it: the
// first of ToolkitDirs with a version.json and an nvcc beside it. ok is
// false when there is none; looked names where it looked.
func FindToolkit(r *hostfs.Root) (tk Toolkit, ok bool, looked []string, err error) {
	var dirs []string
	for _, g := range ToolkitDirs {
		ms, _ := r.Glob(g)
		sort.Sort(sort.Reverse(sort.StringSlice(ms)))
		dirs = append(dirs, ms...)
	}
	for _, d := range dirs {
		f := d + "/version.json"
		looked = append(looked, r.Host(f))
		b, rerr := r.ReadFile(f)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue
		}
		if rerr != nil {
			return Toolkit{}, false, looked, rerr
		}
		if !r.Exists(d + "/bin/nvcc") {
			continue // a runtime-only install: no compiler
		}
		v, perr := ParseToolkitJSON(b)
		if perr != nil {
			return Toolkit{}, false, looked, fmt.Errorf("%s: %w", r.Host(f), perr)
		}
		return Toolkit{Dir: r.Host(d), From: r.Host(f), Version: v}, true, looked, nil
	}
	if len(looked) == 0 {
		for _, g := range ToolkitDirs {
			looked = append(looked, r.Host(g)+"/version.json")
		}
	}
	return Toolkit{}, false, looked, nil
}

package hosttool

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Look finds a host tool: in PATH, then in the extra directories (globs
// allowed, newest-looking match first), for tools a package installs
// outside PATH (nvidia-smi in /usr/local/nvidia/bin, nvcc under
// /usr/local/cuda-*/bin). looked lists where it searched, for the message
// that says it is missing.
func Look(name string, extra ...string) (found string, looked []string) {
	looked = append(looked, "PATH="+os.Getenv("PATH"))
	if p, err := exec.LookPath(name); err == nil {
		return p, looked
	}
	for _, e := range extra {
		dirs, _ := filepath.Glob(e)
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		looked = append(looked, e)
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, looked
			}
		}
	}
	return "", looked
}

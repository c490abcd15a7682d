package nvdriver

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// CUDAVersion is a CUDA major.minor, with the toolkit's patch when known.
type CUDAVersion struct {
	Major, Minor, Patch int
}

func (v CUDAVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Full is "13.0.88" when the patch is known, else "13.0".
func (v CUDAVersion) Full() string {
	if v.Patch == 0 {
		return v.String()
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// Int encodes the version the way the driver API does (major*1000 + minor*10).
func (v CUDAVersion) Int() int { return v.Major*1000 + v.Minor*10 }

// AtMost reports whether v (major.minor; patch ignored) is not newer than o.
func (v CUDAVersion) AtMost(o CUDAVersion) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor <= o.Minor
}

// CUDAFromInt decodes a driver version int. CUDA drivers report 1000 and up
// (1.0); anything else is an error naming the value.
func CUDAFromInt(n int) (CUDAVersion, error) {
	if n < 1000 || n > 999_990 || n%10 != 0 {
		return CUDAVersion{}, fmt.Errorf("CUDA driver version %d is not of the form major*1000+minor*10 (e.g. 13000 for 13.0)", n)
	}
	return CUDAVersion{Major: n / 1000, Minor: (n % 1000) / 10}, nil
}

// nvcc prints "Cuda compilation tools, release 13.0, V13.0.88".
var nvccRe = regexp.MustCompile(`(?m)^Cuda compilation tools, release (\d{1,3})\.(\d{1,3}), V(\d{1,3})\.(\d{1,3})\.(\d{1,6})\s*$`)

// ParseNvcc reads the toolkit version from `nvcc -V` (or --version) output.
// The "release" and "V" numbers must agree.
func ParseNvcc(out string) (CUDAVersion, error) {
	m := nvccRe.FindStringSubmatch(out)
	if m == nil {
		return CUDAVersion{}, fmt.Errorf("nvcc -V output has no line \"Cuda compilation tools, release X.Y, VX.Y.Z\": %s", clip.QuoteN(out, 200))
	}
	n := make([]int, 5)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1]) // the pattern admits only short digit runs
	}
	if n[0] != n[2] || n[1] != n[3] {
		return CUDAVersion{}, fmt.Errorf("nvcc -V: release %d.%d disagrees with V%d.%d.%d", n[0], n[1], n[2], n[3], n[4])
	}
	if n[0] == 0 {
		return CUDAVersion{}, fmt.Errorf("nvcc -V: release %d.%d is not a CUDA version", n[0], n[1])
	}
	return CUDAVersion{Major: n[0], Minor: n[1], Patch: n[4]}, nil
}

// CUDACompat is how a toolkit version relates to the CUDA version a driver
// supports.
type CUDACompat int

const (
	// CUDASupported: the toolkit is not newer than the driver.
	CUDASupported CUDACompat = iota
	// CUDAMinorCompat: same major, newer minor. CUDA's minor-version
	// compatibility runs such programs on the older driver, minus PTX JIT
	// and features new in that minor: a warning, not a failure.
	CUDAMinorCompat
	// CUDAUnsupported: a newer major; compatibility does not cross majors.
	CUDAUnsupported
)

// CUDACompatible says whether programs built by toolkit tk run on a driver
// that supports CUDA drv.
func CUDACompatible(tk, drv CUDAVersion) CUDACompat {
	switch {
	case tk.AtMost(drv):
		return CUDASupported
	case tk.Major == drv.Major:
		return CUDAMinorCompat
	}
	return CUDAUnsupported
}

package kmod

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// OFED is an MLNX_OFED / DOCA-OFED release as `ofed_info -s` names it
// ("MLNX_OFED_LINUX-23.10-1.1.9.0:", "OFED-internal-24.07-0.6.1:"): the
// out-of-tree RDMA kernel modules and their user space.
type OFED struct {
	Distro  string // MLNX_OFED_LINUX, OFED-internal, ...
	Release string // 23.10-1.1.9.0
}

func (v OFED) String() string { return v.Distro + "-" + v.Release }

// The release starts at the first "-<digit>"; the distro part is letters,
// digits, '_' and '-'.
var ofedRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]*?)-(\d+(?:\.\d+)+(?:-[0-9A-Za-z.]+)*)$`)

// ParseOFEDInfo parses `ofed_info -s` output: one line, with or without the
// trailing ':'. Anything else is an error quoting the text.
func ParseOFEDInfo(out string) (OFED, error) {
	line := strings.TrimSpace(out)
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		return OFED{}, fmt.Errorf("ofed_info -s printed more than one line: %s", clip.QuoteN(out, 200))
	}
	line = strings.TrimSuffix(line, ":")
	m := ofedRe.FindStringSubmatch(line)
	if m == nil {
		return OFED{}, fmt.Errorf("ofed_info -s output %s is not <distro>-<release> (e.g. MLNX_OFED_LINUX-23.10-1.1.9.0)", clip.QuoteN(out, 200))
	}
	return OFED{Distro: m[1], Release: m[2]}, nil
}

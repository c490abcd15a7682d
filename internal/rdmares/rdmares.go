// Package rdmares reads the kernel's RDMA resource tracker summary, as
// iproute2's `rdma -j resource show` prints it (one object per device with
// the number of PDs, CQs, QPs, MRs, contexts, CM IDs and SRQs), and compares
// two of them: a test that leaves a QP, CQ, MR or PD behind shows as a rise.
package rdmares

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Kinds are the objects a test must release, in the order they are reported.
var Kinds = []string{"qp", "cq", "mr", "pd"}

// Summary maps device name -> kind -> count.
type Summary map[string]map[string]uint64

// maxOutput bounds what Parse accepts: a summary is one short object per device.
const maxOutput = 1 << 20

// Parse reads `rdma -j resource show` output: a JSON array of objects, each
// with "ifname" and a number per kind. Kinds it does not know are kept.
func Parse(b []byte) (Summary, error) {
	if len(b) > maxOutput {
		return nil, fmt.Errorf("rdma resource show printed %d bytes, more than the %d a summary can take", len(b), maxOutput)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("rdma resource show output %s is not a JSON array of devices: %v", clip.Quote(string(b)), err)
	}
	out := Summary{}
	for i, r := range rows {
		name, _ := r["ifname"].(string)
		if name == "" {
			return nil, fmt.Errorf("rdma resource show: device %d has no ifname: %s", i, clip.Quote(fmt.Sprint(r)))
		}
		counts := map[string]uint64{}
		for k, v := range r {
			f, ok := v.(float64)
			if !ok || k == "ifindex" {
				continue
			}
			if f < 0 || f > math.MaxInt64 || f != math.Trunc(f) {
				return nil, fmt.Errorf("rdma resource show: %s %s is %v, not a count", name, k, f)
			}
			counts[k] = uint64(f)
		}
		out[name] = counts
	}
	return out, nil
}

// Rise is one kind that counts more objects after than before.
type Rise struct {
	Device, Kind  string
	Before, After uint64
}

func (r Rise) String() string {
	return fmt.Sprintf("%s %s %d -> %d (+%d)", r.Device, r.Kind, r.Before, r.After, r.After-r.Before)
}

// Leaked lists the Kinds that rose from before to after, by device then kind.
func Leaked(before, after Summary) []Rise {
	var out []Rise
	devs := make([]string, 0, len(after))
	for d := range after {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	for _, d := range devs {
		for _, k := range Kinds {
			b, a := before[d][k], after[d][k]
			if a > b {
				out = append(out, Rise{Device: d, Kind: k, Before: b, After: a})
			}
		}
	}
	return out
}

// Count is the number of objects the rises add up to.
func Count(rs []Rise) int {
	n := 0
	for _, r := range rs {
		n += int(r.After - r.Before)
	}
	return n
}

// Join formats rises for a message.
func Join(rs []Rise) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// ErrNoTool is returned by callers when iproute2's rdma is not installed.
var ErrNoTool = errors.New("iproute2's rdma command not found")

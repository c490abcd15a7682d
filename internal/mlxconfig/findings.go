package mlxconfig

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// ParseAt is Parse of the query src names (the tool's command line or a
// tree's recording), its error a finding the suite could not judge: the
// output is not the layout Parse knows.
func ParseAt(out, src string) (*Query, error) {
	q, err := Parse(out)
	if err != nil {
		return nil, verdict.NotJudgedf("run the query by hand and compare with the layout docs/checks.md describes", "%s: %v", src, err)
	}
	return q, nil
}

// Unmet is the finding for NIC name (PCI function bdf) whose checks
// include judged settings that are not the documented values, with how
// to set them; nil when every judged one is met. mstconfig only reads
// here: the remedy is the operator's set and reset.
func Unmet(name, bdf string, q *Query, checks []Check) *verdict.Finding {
	var unmet, sources []string
	for _, c := range checks {
		if c.Judged && !c.Met {
			unmet = append(unmet, c.String())
			sources = append(sources, c.Param+": "+c.Source)
		}
	}
	if len(unmet) == 0 {
		return nil
	}
	return &verdict.Finding{
		Device: name,
		Cause:  fmt.Sprintf("%s (%s, %s): firmware settings differ from the documented values for GPUDirect: %s", name, bdf, q.DeviceType, strings.Join(unmet, "; ")),
		Remedy: fmt.Sprintf("set them with mstconfig -d %s set <NAME>=<value> (or mlxconfig), then reboot or mlxfwreset; the suite only reads them", bdf),
		Source: strings.Join(sources, "; "),
		Part:   "nic firmware settings",
	}
}

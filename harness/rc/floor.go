//go:build rdma

package rc

import (
	"fmt"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// PathLimit is the slowest PCIe link this end's data crosses between its
// NIC and its buffer (internal/floors): for GPU memory the rail's GPU, the
// bridges between and the NIC; for host memory the NIC and the ports above
// it to the root complex. ok is false when no link is known (a software
// NIC, a NIC sysfs does not place); notes name links left out (speed or
// width unknown) and functions sysfs does not list.
func (e *End) PathLimit() (l floors.Limit, ok bool, notes []string, err error) {
	sel := testenv.Selection(e.T)
	var devs []rails.PathDevice
	var missing []string
	switch {
	case e.Software || e.sysDev == nil || e.sysDev.PCI == "":
		return floors.Limit{}, false, nil, nil
	case !e.Host() && e.Rail != nil && e.Rail.HasPath && e.Rail.NIC != nil && e.Rail.NIC.Name == e.Dev:
		devs, missing = sel.PathDevices(e.Rail)
	default:
		devs, missing = sel.UpstreamDevices("NIC", e.sysDev.PCI)
	}
	for _, m := range missing {
		notes = append(notes, m+" is not in sysfs: its link is not counted")
	}
	var links []floors.Link
	for _, d := range devs {
		if d.Dev.CurSpeed <= 0 || d.Dev.CurWidth <= 0 {
			notes = append(notes, fmt.Sprintf("%s %s: link speed or width unknown, not counted", d.Role, d.Dev.BDF))
			continue
		}
		lk := floors.LinkOf(d.Dev, d.Role, sel.Index.Device(d.Dev.Parent()))
		if !e.loopback {
			lk.Name = e.Role + " " + lk.Name
		}
		links = append(links, lk)
	}
	l, ok, err = floors.PathLimit(links)
	return l, ok, notes, err
}

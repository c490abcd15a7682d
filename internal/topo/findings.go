package topo

import (
	"errors"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The findings of checks that walk the PCIe tree when the tree lacks what
// they need; each carries what to do, so no test writes a remedy.

// Unclassified is the finding for a pair Classify could not place: what
// names the pair ("cannot classify <gpu> <-> <nic> (<pci>)"), err is
// Classify's error.
func Unclassified(what string, err error) verdict.Finding {
	return *verdict.Failf("check "+pci.DevicesDir, "%s: %v", what, err)
}

// ACSBridge is turn port b of the path gpu <-> nic (named in the cause)
// as a check of its config space (ACS) reads it: its device; needRoot
// when only root reads past the 64-byte header (pci.ErrNeedRoot), which
// the check reports once for all such ports; otherwise, a finding when
// b is not in the tree or its config space is unusable.
func (ix *Index) ACSBridge(b, gpu, nic string) (d *pci.Device, needRoot bool, f *verdict.Finding) {
	d = ix.Device(b)
	switch {
	case d == nil:
		return nil, false, verdict.Failf("check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, gpu, nic, pci.DevicesDir)
	case errors.Is(d.ConfigErr, pci.ErrNeedRoot):
		return d, true, nil
	case d.Config == nil || d.ConfigErr != nil:
		return d, false, verdict.Failf("check the bridge with lspci -vvv -s "+b, "bridge %s: config space unusable: %v", b, d.ConfigErr)
	}
	return d, false, nil
}

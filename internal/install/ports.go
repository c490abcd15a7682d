package install

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// PortSigns are what INST-12 saw on the ports of the NIC(s) it judged
// when none at GDR_IB_PORT is ACTIVE.
type PortSigns struct {
	Port      int    // GDR_IB_PORT
	OtherPort string // "mlx5_0 port 2": an ACTIVE port at another number
	Init      bool   // an InfiniBand port in INIT: link, no subnet manager
	PhysDown  bool   // a port whose phys_state is not LinkUp
}

// Remedy says what to do about the ports s describes, most specific
// first.
func (s PortSigns) Remedy() string {
	var r []string
	if s.OtherPort != "" {
		r = append(r, fmt.Sprintf("%s is ACTIVE: set GDR_IB_PORT to that port, or cable port %d", s.OtherPort, s.Port))
	}
	if s.Init {
		r = append(r, "a port in INIT has link but no subnet manager: start opensm on one host of the fabric (systemctl start opensm) or enable the switch's SM")
	}
	if s.PhysDown {
		r = append(r, "a port without phys_state LinkUp has no link: check cable/transceiver and the switch port; for RoCE bring the netdev up (ip link set <netdev> up)")
	}
	if len(r) == 0 {
		r = append(r, "check dmesg for the NIC driver's port messages and the switch port")
	}
	return strings.Join(r, "; ")
}

// ModeOf is a device node's mode and owner, for a message about why it
// does not open.
func ModeOf(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "unknown"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%v uid %d gid %d", fi.Mode(), st.Uid, st.Gid)
	}
	return fi.Mode().String()
}

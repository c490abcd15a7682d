// Command coredns is CoreDNS with the plugins the lab's cluster DNS uses:
// the kubernetes plugin serves the headless Service's pod records
// (gdrconf-<i>.gdrconf), the rest is what a Corefile of a cluster's DNS
// names first. CoreDNS's own main compiles every plugin it ships (cloud
// DNS providers among them); this one is its documented way to choose
// (coremain.Run with the plugins imported).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }

// Package nccltopo reads an NCCL topology file (NCCL_TOPO_FILE) the way NCCL
// does and classifies GPU<->NIC paths in it, so that the suite judges a VM
// whose PCIe tree the hypervisor flattened by the tree NCCL will use.
//
// Where NCCL looks (NVIDIA/nccl src/misc/param.cc initEnvFunc/setEnvFile and
// src/graph/topo.cc ncclTopoGetSystem):
//  1. NCCL_TOPO_FILE in the environment;
//  2. else NCCL_TOPO_FILE set in NCCL_CONF_FILE (or, without it,
//     $HOME/.nccl.conf), then in /etc/nccl.conf: setEnvFile sets each
//     "NAME=value" line with setenv(..., 0), so the first file that names it
//     wins and the environment beats both (Azure's HPC images write
//     NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml into /etc/nccl.conf:
//     Azure/azhpc-images components/customizations/ndv5.sh);
//  3. else /var/run/nvidia-topologyd/virtualTopology.xml when it exists.
//
// A named file that cannot be opened is ignored by NCCL (ncclTopoGetXmlFromFile
// logs INFO and goes on with the guest's own tree); one that does not parse
// makes NCCL fail. Both are errors here (ErrIgnored, ErrUnusable), with what
// NCCL does.
//
// The XML (src/graph/xml.cc, topo.cc ncclTopoAddCpu/ncclTopoAddPci):
// system > cpu(numaid, affinity) > pci(busid, class, link_speed, link_width)
// > ... > pci > gpu | nic > net(name, dev, gdr, ...). A pci element with pci
// children is a PCI switch (NCCL builds its own files one element per switch:
// xml.cc ncclTopoGetXmlFromSys walks up two sysfs levels, downstream and
// upstream port, per element). Leaf pci elements name GPUs (class 0x03xxxx)
// and NICs (0x02xxxx) by bus id; NCCL fills in the gpu/nic children from the
// running system by that bus id (ncclTopoFillGpu, ncclTopoFillNet), which is
// why clouds' files use the guest's bus ids and why this package matches by
// bus id (and by a net element's name when one is given).
//
// Classes, as NCCL's paths.cc computes them: GPU and NIC below one switch
// element with no other switch between = PIX; several switch elements, no CPU
// = PXB; through one cpu element = PHB (NCCL has no NODE); through the system
// (two cpu elements) = SYS.
package nccltopo

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Where NCCL looks besides the environment.
const (
	EtcConf     = "/etc/nccl.conf"
	DefaultFile = "/var/run/nvidia-topologyd/virtualTopology.xml"
	maxFile     = 4 << 20
)

// ErrUnusable marks a topology file that is named but does not parse: NCCL
// fails with it. ErrIgnored marks one NCCL would skip (it cannot be opened)
// or the suite cannot find (a relative path): NCCL goes on with the guest's
// own tree, which is a fault only where that tree is too far (TOPO-02).
var (
	ErrUnusable = errors.New("NCCL topology file unusable")
	ErrIgnored  = errors.New("NCCL topology file not loaded")
)

// Unusable is Load's error err as a finding when it is ErrUnusable (every
// NCCL job on the host would fail to initialise), with what to do about
// it; nil for any other error, which leaves NCCL on the host's tree.
func Unusable(err error) *verdict.Finding {
	if !errors.Is(err, ErrUnusable) {
		return nil
	}
	return verdict.Failf("fix the file or the setting that names it (NCCL_TOPO_FILE, NCCL_CONF_FILE, $HOME/.nccl.conf, /etc/nccl.conf); in a VM use the cloud's topology file for this VM size",
		"%v", err)
}

// Env is what of the environment decides where NCCL looks.
type Env struct {
	TopoFile string // NCCL_TOPO_FILE; "" = unset
	ConfFile string // NCCL_CONF_FILE; "" = unset
	Home     string // HOME, for $HOME/.nccl.conf
	GDRLevel string // NCCL_NET_GDR_LEVEL; "" = unset
}

// Source is where the topology file was named.
type Source struct {
	Path string // the file, a host path
	// From says who named it: "NCCL_TOPO_FILE in the environment",
	// "NCCL_TOPO_FILE in /etc/nccl.conf", or "NCCL's default location".
	From string
}

// Locate finds the topology file NCCL would load, through r. ok is false when
// NCCL would load none. A conf file that is unreadable (other than absent) is
// an error.
func Locate(r *hostfs.Root, env Env) (src Source, ok bool, err error) {
	if env.TopoFile != "" {
		return Source{Path: env.TopoFile, From: "NCCL_TOPO_FILE in the environment"}, true, nil
	}
	v, from, ok, err := confLookup(r, env, "NCCL_TOPO_FILE")
	if err != nil {
		return Source{}, false, err
	}
	if ok && v != "" {
		return Source{Path: v, From: "NCCL_TOPO_FILE in " + from}, true, nil
	}
	if r.Exists(DefaultFile) {
		return Source{Path: DefaultFile, From: "NCCL's default location (set by nvidia-topologyd)"}, true, nil
	}
	return Source{}, false, nil
}

// Setting finds NCCL variable name in NCCL's configuration files through r,
// as NCCL's initEnv reads them (see confLookup): the value, the file that
// sets it, and whether one does. It is internal/config's NCCLConf: the
// variables the suite inherits from NCCL (NCCL_IB_HCA, NCCL_IB_GID_INDEX,
// NCCL_IB_TC, NCCL_IB_SL) are looked up where NCCL_TOPO_FILE is.
func Setting(r *hostfs.Root, env Env, name string) (value, file string, ok bool, err error) {
	return confLookup(r, env, name)
}

// confLookup finds name in the NCCL configuration files, in NCCL's order
// (NCCL_CONF_FILE or $HOME/.nccl.conf, then /etc/nccl.conf; the first that
// sets it wins); from is the file.
func confLookup(r *hostfs.Root, env Env, name string) (v, from string, ok bool, err error) {
	var confs []string
	switch {
	case env.ConfFile != "":
		confs = append(confs, env.ConfFile)
	case env.Home != "":
		confs = append(confs, path.Join(env.Home, ".nccl.conf"))
	}
	confs = append(confs, EtcConf)
	for _, c := range confs {
		if !path.IsAbs(c) && r.Dir() == "/" {
			// The process's own root: NCCL opens a relative name from
			// the working directory, and so can the suite.
			if abs, err := filepath.Abs(c); err == nil {
				c = abs
			}
		}
		if !path.IsAbs(c) {
			return "", "", false, fmt.Errorf("NCCL configuration file %s is not an absolute path; the suite reads host files through GDR_HOST_ROOT and cannot resolve it", clip.Quote(c))
		}
		b, err := r.ReadFileMax(c, maxFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", false, fmt.Errorf("read NCCL configuration %s: %w", c, err)
		}
		if v, ok := confValue(string(b), name); ok {
			return v, c, true, nil
		}
	}
	return "", "", false, nil
}

// GDRLevel is NCCL_NET_GDR_LEVEL as NCCL reads it (the environment, then the
// configuration files; src/graph/paths.cc ncclGetLevel): the farthest class
// at which NCCL still uses GPUDirect RDMA, from names (LOC ... SYS) or the
// old numbers (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS). NCCL's PHB covers
// this suite's PHB and NODE. ok is false when it is unset or a value NCCL
// does not recognise (NCCL then keeps its default); topo.Unknown means
// no PCIe path at all (LOC, NVL, NVB, C2C).
func GDRLevel(r *hostfs.Root, env Env) (level topo.Class, setting string, ok bool, err error) {
	v, from := env.GDRLevel, "the environment"
	if v == "" {
		var found bool
		if v, from, found, err = confLookup(r, env, "NCCL_NET_GDR_LEVEL"); err != nil || !found {
			return topo.Unknown, "", false, err
		}
	}
	setting = "NCCL_NET_GDR_LEVEL=" + clip.Quote(v) + " in " + from
	switch v {
	case "LOC", "NVL", "NVB", "C2C":
		return topo.Unknown, setting, true, nil
	case "PIX":
		return topo.PIX, setting, true, nil
	case "PXB":
		return topo.PXB, setting, true, nil
	case "P2C", "PXN":
		// PXN (through a peer GPU's NIC) sits above P2C in NCCL's order
		// and has no class of its own here: P2C is the farthest it admits.
		return topo.P2C, setting, true, nil
	case "PHB":
		return topo.NODE, setting, true, nil
	case "SYS":
		return topo.SYS, setting, true, nil
	}
	if v != "" && v[0] >= '0' && v[0] <= '9' {
		n := 0
		for i := 0; i < len(v) && v[i] >= '0' && v[i] <= '9' && n < 100; i++ {
			n = n*10 + int(v[i]-'0') // strtol reads the leading digits
		}
		old := []topo.Class{topo.Unknown, topo.PIX, topo.PXB, topo.NODE, topo.SYS}
		return old[min(n, len(old)-1)], setting, true, nil
	}
	return topo.Unknown, setting, false, nil
}

// confValue reads name from an nccl.conf exactly as setEnvFile does: lines
// starting with '#' are comments, the name is everything before the first
// '=', the value everything after (neither is trimmed); the first line that
// sets name wins (setenv without overwrite).
func confValue(s, name string) (string, bool) {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Node is one XML element.
type Node struct {
	Tag    string
	Attrs  map[string]string
	Parent *Node
	Subs   []*Node
}

// Attr is the attribute's value, "" when absent.
func (n *Node) Attr(k string) string { return n.Attrs[k] }

// isSwitch: a pci element with pci children (or bridge class).
func (n *Node) isSwitch() bool {
	if n.Tag != "pci" {
		return false
	}
	if strings.HasPrefix(strings.ToLower(n.Attr("class")), "0x0604") {
		return true
	}
	for _, s := range n.Subs {
		if s.Tag == "pci" {
			return true
		}
	}
	return false
}

// File is a parsed topology file.
type File struct {
	Source
	Top *Node // <system>
	// byBus maps a normalized bus id to its pci element.
	byBus map[string]*Node
	// byNet maps a net element's name to its nic's parent (pci or cpu).
	byNet map[string]*Node
	// GPUs and NICs are the leaf pci elements' bus ids by class, in file order.
	GPUs, NICs []string
}

// Load finds (Locate) and parses the file NCCL would use; nil, nil when
// there is none. A named file NCCL would not load is ErrIgnored, one that
// does not parse ErrUnusable; both errors say what NCCL does then.
func Load(r *hostfs.Root, env Env) (*File, error) {
	src, ok, err := Locate(r, env)
	if err != nil || !ok {
		return nil, err
	}
	if !path.IsAbs(src.Path) {
		return nil, fmt.Errorf("%w: %s names %s, not an absolute path: NCCL opens it relative to each process's working directory, which the suite cannot know", ErrIgnored, src.From, clip.Quote(src.Path))
	}
	b, err := r.ReadFileMax(src.Path, maxFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s names %s, which cannot be read (%v): NCCL ignores it (\"Could not open XML topology file\") and uses the PCI tree the host shows",
			ErrIgnored, src.From, src.Path, err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s): %v: NCCL fails to initialise with it", ErrUnusable, src.Path, src.From, err)
	}
	f.Source = src
	return f, nil
}

// Parse reads a topology file's XML.
func Parse(b []byte) (*File, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var top, cur *Node
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			n := &Node{Tag: e.Name.Local, Attrs: map[string]string{}, Parent: cur}
			for _, a := range e.Attr {
				n.Attrs[a.Name.Local] = a.Value
			}
			if cur == nil {
				if top != nil {
					return nil, errors.New("more than one top-level element")
				}
				top = n
			} else {
				cur.Subs = append(cur.Subs, n)
			}
			cur = n
		case xml.EndElement:
			if cur != nil {
				cur = cur.Parent
			}
		}
	}
	if top == nil {
		return nil, errors.New("no <system> element")
	}
	if top.Tag != "system" {
		return nil, fmt.Errorf("top-level element is <%s>, want <system>", clip.Quote(top.Tag))
	}
	f := &File{Top: top, byBus: map[string]*Node{}, byNet: map[string]*Node{}}
	var walk func(n *Node) error
	walk = func(n *Node) error {
		switch n.Tag {
		case "cpu":
			if n.Attr("numaid") == "" {
				return errors.New("<cpu> without numaid")
			}
		case "pci":
			bus, err := normBus(n.Attr("busid"))
			if err != nil {
				return fmt.Errorf("<pci busid=%s>: %v", clip.Quote(n.Attr("busid")), err)
			}
			if _, dup := f.byBus[bus]; dup {
				return fmt.Errorf("<pci busid=%s> appears twice (NCCL expects unique bus ids)", bus)
			}
			f.byBus[bus] = n
			if !n.isSwitch() {
				cl := strings.ToLower(n.Attr("class"))
				switch {
				case strings.HasPrefix(cl, "0x03"):
					f.GPUs = append(f.GPUs, bus)
				case strings.HasPrefix(cl, "0x02"):
					f.NICs = append(f.NICs, bus)
				}
			}
		case "net":
			if nm := n.Attr("name"); nm != "" && n.Parent != nil && n.Parent.Tag == "nic" && n.Parent.Parent != nil {
				f.byNet[nm] = n.Parent.Parent
			}
		}
		for _, s := range n.Subs {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(top); err != nil {
		return nil, err
	}
	return f, nil
}

// normBus reads a bus id as NCCL writes it ("0001:00:00.0", "ffff:ff:01.0").
func normBus(s string) (string, error) {
	if s == "" {
		return "", errors.New("no busid")
	}
	return pci.NormalizeAddr(s)
}

// Path is a GPU<->NIC path in the file.
type Path struct {
	Class topo.Class
	// Via says where the path turns: "PCI switch ffff:ff:01.0", "cpu
	// numaid 0", "the system (cpu numaid 0 and 1)".
	Via string
	// Switches counts the switch elements on the path.
	Switches int
}

// Has says whether the file describes the function at bus id a (or, for a
// NIC, the net called name).
func (f *File) Has(a, name string) bool { return f.find(a, name) != nil }

func (f *File) find(a, name string) *Node {
	if b, err := normBus(a); err == nil {
		if n := f.byBus[b]; n != nil {
			return n
		}
	}
	if name != "" {
		return f.byNet[name]
	}
	return nil
}

// Classify returns the path between the GPU at bus id gpu and the NIC at
// bus id nic (or the net called name); ok is false when the file does not
// describe one of them (NCCL then adds it from the guest's tree).
func (f *File) Classify(gpu, nic, name string) (p Path, ok bool) {
	a, b := f.find(gpu, ""), f.find(nic, name)
	if a == nil || b == nil || a == b {
		return Path{}, false
	}
	anc := map[*Node]bool{}
	for n := a; n != nil; n = n.Parent {
		anc[n] = true
	}
	var lca *Node
	for n := b; n != nil; n = n.Parent {
		if anc[n] {
			lca = n
			break
		}
	}
	if lca == nil {
		return Path{}, false
	}
	count := func(from *Node) int {
		k := 0
		for n := from.Parent; n != nil && n != lca; n = n.Parent {
			if n.isSwitch() {
				k++
			}
		}
		return k
	}
	p.Switches = count(a) + count(b)
	if lca.isSwitch() {
		p.Switches++
	}
	switch {
	case lca.Tag == "pci" && p.Switches <= 1:
		p.Class, p.Via = topo.PIX, "PCI switch "+lca.Attr("busid")
	case lca.Tag == "pci":
		p.Class, p.Via = topo.PXB, fmt.Sprintf("PCI switch %s (%d switches)", lca.Attr("busid"), p.Switches)
	case lca.Tag == "cpu":
		p.Class, p.Via = topo.PHB, "cpu numaid "+lca.Attr("numaid")
	default:
		p.Class, p.Via = topo.SYS, fmt.Sprintf("the system (cpu numaid %s and %s)", cpuOf(a), cpuOf(b))
	}
	return p, true
}

func cpuOf(n *Node) string {
	for ; n != nil; n = n.Parent {
		if n.Tag == "cpu" {
			return n.Attr("numaid")
		}
	}
	return "none"
}

package config

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// maxTopologyErrors is how many wrong lines a topology file's error names.
const maxTopologyErrors = 5

// TopologyGroup is one group of the fabric: hosts behind one leaf switch
// (or one block, one scalable unit), whose pairs among themselves never
// cross the spine.
type TopologyGroup struct {
	Name  string
	Hosts []string
	Line  int // the line of the file that defines it
}

// Topology is the fabric's groups as GDR_TOPOLOGY_FILE gives them, in the
// file's order. A host is in one group at most.
type Topology struct {
	File   string
	Groups []TopologyGroup
}

// ReadTopology reads the topology file at path (ParseTopology); expand
// expands a Slurm hostlist (cluster/hostlist.Expand: internal packages do
// not import cluster/).
func ReadTopology(path string, expand func(string) ([]string, error)) (Topology, error) {
	b, err := sharedfile.ReadFile(path, sharedfile.MaxFile)
	if err != nil {
		return Topology{}, fmt.Errorf("GDR_TOPOLOGY_FILE=%s: %w", clip.Quote(path), err)
	}
	return ParseTopology(path, b, expand)
}

// ParseTopology reads a topology file in either of two forms, line by
// line ('#' starts a comment, blank lines are skipped, a line ending in
// '\' goes on on the next, as in Slurm's configuration files:
// src/common/parse_config.c _get_next_line):
//
//   - the suite's own: "<group> <hostlist>", one group a line, the
//     hostlist in Slurm's syntax (gpu[001-032],gpu100);
//   - Slurm's topology.conf (topology.conf(5)): "SwitchName=<name>
//     Nodes=<hostlist>" lines are the leaf switches, each a group;
//     "SwitchName=<name> Switches=<list>" lines are the switches above
//     them, which group no host and are passed over; "BlockName=<name>
//     Nodes=<hostlist>" lines (the topology/block plugin) are groups too,
//     and its "BlockSizes=" line is passed over. Keys are case
//     insensitive; LinkSpeed is read and ignored, as Slurm ignores it.
//
// Every error names the file and the line: a line of neither form, a
// switch with both Nodes and Switches (Slurm refuses it too:
// src/plugins/topology/tree/switch_record.c _parse_switches), a group
// named twice, a hostlist that does not expand, a host in two groups
// (Slurm warns of such a multi-homed node and keeps it on both; a pairing
// needs each host on one side), a file with no group.
func ParseTopology(file string, content []byte, expand func(string) ([]string, error)) (Topology, error) {
	t := Topology{File: file}
	where := func(line int) string { return fmt.Sprintf("GDR_TOPOLOGY_FILE=%s line %d", clip.Quote(file), line) }
	var errs []error
	more := 0
	bad := func(line int, format string, a ...any) {
		if len(errs) == maxTopologyErrors {
			more++ // a file of another kind: its first errors say enough
			return
		}
		errs = append(errs, fmt.Errorf("%s: %s", where(line), fmt.Sprintf(format, a...)))
	}
	groupAt := map[string]int{}
	hostIn := map[string]int{} // host -> index in t.Groups
	add := func(line int, name, hostlist string) {
		if at, ok := groupAt[name]; ok {
			bad(line, "group %s is defined on line %d too", clip.Quote(name), at)
			return
		}
		hosts, err := expand(hostlist)
		if err != nil {
			bad(line, "%v", err)
			return
		}
		if len(hosts) == 0 {
			bad(line, "group %s names no host", clip.Quote(name))
			return
		}
		groupAt[name] = line
		for _, h := range hosts {
			if g, ok := hostIn[h]; ok {
				bad(line, "host %s is in group %s (line %d) and in group %s: each host belongs to one group", h, clip.Quote(t.Groups[g].Name), t.Groups[g].Line, clip.Quote(name))
				return
			}
		}
		for _, h := range hosts {
			hostIn[h] = len(t.Groups)
		}
		t.Groups = append(t.Groups, TopologyGroup{Name: name, Hosts: hosts, Line: line})
	}
	lines := bytes.Split(content, []byte("\n"))
	for i := 0; i < len(lines); i++ {
		at := i + 1
		uncomment := func(s string) string {
			if c := strings.IndexByte(s, '#'); c >= 0 {
				return s[:c]
			}
			return s
		}
		// Comments go first, then a trailing '\' joins the next line
		// (Slurm's order: _strip_comments, then _strip_continuation).
		l := uncomment(string(lines[i]))
		for strings.HasSuffix(strings.TrimRight(l, " \t\r"), `\`) && i+1 < len(lines) {
			l = strings.TrimSuffix(strings.TrimRight(l, " \t\r"), `\`) + uncomment(string(lines[i+1]))
			i++
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if !strings.Contains(f[0], "=") {
			// <group> <hostlist>: the hostlist may hold separators.
			if len(f) < 2 {
				bad(at, "%s: want \"<group> <hostlist>\" (gpu-leaf1 gpu[001-032]) or Slurm's \"SwitchName=<name> Nodes=<hostlist>\"", clip.Quote(strings.TrimSpace(l)))
				continue
			}
			if strings.Contains(f[1], "=") {
				bad(at, "%s: a group's name comes first, then its hosts; a key=value line starts with SwitchName= or BlockName=", clip.Quote(strings.TrimSpace(l)))
				continue
			}
			add(at, f[0], strings.Join(f[1:], ","))
			continue
		}
		kv := map[string]string{}
		first := ""
		ok := true
		for _, p := range f {
			k, v, has := strings.Cut(p, "=")
			k = strings.ToLower(k)
			switch {
			case !has || k == "" || v == "":
				bad(at, "%s is not key=value", clip.Quote(p))
				ok = false
			case kv[k] != "":
				bad(at, "%s is given twice", k)
				ok = false
			}
			if !ok {
				break
			}
			if first == "" {
				first = k
			}
			kv[k] = v
		}
		if !ok {
			continue
		}
		switch first {
		case "switchname":
			for k := range kv {
				if k != "switchname" && k != "nodes" && k != "switches" && k != "linkspeed" {
					bad(at, "SwitchName= takes Nodes=, Switches= and LinkSpeed= (topology.conf(5)), not %s=", k)
					ok = false
				}
			}
			switch {
			case !ok:
			case kv["nodes"] != "" && kv["switches"] != "":
				bad(at, "switch %s has both Nodes= and Switches=: a leaf switch names its nodes, a switch above names its switches (Slurm refuses it too)", clip.Quote(kv["switchname"]))
			case kv["nodes"] != "":
				add(at, kv["switchname"], kv["nodes"])
			}
			// Switches= only (or neither: an empty leaf): no host to group.
		case "blockname":
			for k := range kv {
				if k != "blockname" && k != "nodes" {
					bad(at, "BlockName= takes Nodes= (topology.conf(5), topology/block), not %s=", k)
					ok = false
				}
			}
			switch {
			case !ok:
			case kv["nodes"] == "":
				bad(at, "block %s has no Nodes=", clip.Quote(kv["blockname"]))
			default:
				add(at, kv["blockname"], kv["nodes"])
			}
		case "blocksizes":
		default:
			bad(at, "%s= is not a topology.conf line: want SwitchName=, BlockName= or BlockSizes=, or \"<group> <hostlist>\"", first)
		}
	}
	if more > 0 {
		errs = append(errs, fmt.Errorf("GDR_TOPOLOGY_FILE=%s: %d more lines are wrong", clip.Quote(file), more))
	}
	if len(errs) == 0 && len(t.Groups) == 0 {
		errs = append(errs, fmt.Errorf("GDR_TOPOLOGY_FILE=%s names no group of hosts: want \"<group> <hostlist>\" lines, or topology.conf's SwitchName=<leaf> Nodes=<hostlist>", clip.Quote(file)))
	}
	return t, errors.Join(errs...)
}

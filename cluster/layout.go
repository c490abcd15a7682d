// Package cluster is the file side of an N-host run: the shared reports
// folder's layout, each round's plan, the pair results read back from the
// suite's test.json, and the barrier between rounds. Slurm or Kubernetes
// start the tasks; nothing here starts or reaches another host.
//
// Layout under the shared folder (GDR_REPORTS, on a file system every task
// mounts):
//
//	<root>/<host>/round-<k>/plan.json   written by gdrcluster plan before the round
//	<root>/<host>/round-<k>/test.json.gz the suite's go test -json events (GDR_ROUND_REPORTS),
//	                                     compacted (gdrreport -compact; test.json before)
//	<root>/<host>/round-<k>/summary.txt the round's summary
//	<root>/<host>/round-<k>/pairs.json  the round's pair results, compact (gdrcluster done)
//	<root>/<host>/round-<k>/done        written by gdrcluster done after the round
//	<root>/.gdrcluster/run-<run>/       the run's barriers (barrier.go)
//
// Files are written to a temporary name and renamed, so a reader on another
// host never sees half a file. plan.json and done name the run they belong
// to (jobenv.Task.Run: the job, and the attempt of a requeued Slurm job):
// the barrier counts only its own run's done files, and a reader of a
// folder that two runs wrote takes the one it is told, never both.
package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// Plan is one task's part of one round, as plan.json.
type Plan struct {
	Round    int    `json:"round"`
	Host     string `json:"host"`
	Index    int    `json:"index"` // the host's position in the job's host list
	Hosts    int    `json:"hosts"` // how many hosts the job has
	Repair   bool   `json:"repair,omitempty"`
	Role     string `json:"role"` // server, client, or idle
	Peer     string `json:"peer,omitempty"`
	PeerAddr string `json:"peer_addr,omitempty"`
	Port     int    `json:"port,omitempty"`
	Pairing  string `json:"pairing"`
	Job      string `json:"job"` // the job's key (engine/scope/id); the secret and token are never written
	// Run is the attempt of the job the plan belongs to (jobenv.Task.Run):
	// readers take only one run's files from a folder two runs wrote.
	Run string `json:"run,omitempty"`
	// PeerStopped is the partner the schedule gave the host this round
	// when that partner had stopped (in round PeerStoppedIn): the host
	// idles, and its pair is not judged (isolate.Stopped).
	PeerStopped   string `json:"peer_stopped,omitempty"`
	PeerStoppedIn int    `json:"peer_stopped_in,omitempty"`
	// NVLinkDomain and PeerNVLinkDomain are the NVLink domains the host and
	// its peer published at the start barrier (Config.Domains), which the
	// planner paired across; absent where a host had none.
	NVLinkDomain     string `json:"nvlink_domain,omitempty"`
	PeerNVLinkDomain string `json:"peer_nvlink_domain,omitempty"`
}

// Idle is Plan.Role for a host without a peer this round.
const Idle = "idle"

// RoundDir is the folder of host's round k.
func RoundDir(root, host string, k int) string {
	return filepath.Join(root, host, "round-"+strconv.Itoa(k))
}

var roundName = regexp.MustCompile(`^round-(0|[1-9][0-9]{0,5})$`)

// WritePlan stores p under root.
func WritePlan(root string, p Plan) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(RoundDir(root, p.Host, p.Round), "plan.json"), append(b, '\n'))
}

// writeFile writes atomically: a temporary file in the same folder, renamed.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// hostRound is one host's folder of one round.
type hostRound struct {
	host  string
	round int
	dir   string
	plan  *Plan // its plan.json, nil when it has none
}

// HostRound is one host's folder of one round of a run (RoundDirs).
type HostRound struct {
	Host  string
	Round int
	Dir   string
}

// RoundDirs lists the <host>/round-<k> folders of run under root (run ""
// is the folder's only run; several are an error naming them), sorted by
// host then round: what a reader of a cluster folder merges.
func RoundDirs(root, run string) ([]HostRound, error) {
	hrs, err := scan(fsys{}, root, run)
	if err != nil {
		return nil, err
	}
	out := make([]HostRound, len(hrs))
	for i, hr := range hrs {
		out[i] = HostRound{Host: hr.host, Round: hr.round, Dir: hr.dir}
	}
	return out, nil
}

// scan lists the <host>/round-<k> folders under root of one run, sorted by
// host then round, with their plans; anything else under root is ignored.
// run "" takes the folder's only run, and a folder holding several is an
// error naming them (PickRun).
func scan(f fsys, root, run string) ([]hostRound, error) {
	all, err := scanAll(f, root)
	if err != nil {
		return nil, err
	}
	run, err = pickRun(root, all, run)
	if err != nil {
		return nil, err
	}
	// A folder without a plan belongs to no run by its files: it is taken
	// only where there is no second run it could belong to.
	planless := len(runsOf(all)) <= 1
	out := all[:0]
	for _, hr := range all {
		if hr.plan == nil && planless || hr.plan != nil && hr.plan.Run == run {
			out = append(out, hr)
		}
	}
	return out, nil
}

// scanAll is scan of every run, plans read: one listing of root, one of
// each host's folder, and each round's plan.json.
func scanAll(f fsys, root string) ([]hostRound, error) {
	hosts, err := f.names(root)
	if err != nil {
		return nil, fmt.Errorf("reports folder %s: %w", root, err)
	}
	sort.Strings(hosts)
	var out []hostRound
	for _, h := range hosts {
		if h[0] == '.' {
			continue
		}
		rounds, err := f.names(filepath.Join(root, h))
		if err != nil {
			if errors.Is(err, syscall.ENOTDIR) {
				continue // a file beside the hosts' folders (isolate.txt)
			}
			return nil, err
		}
		for _, r := range rounds {
			m := roundName.FindStringSubmatch(r)
			if m == nil {
				continue
			}
			k, _ := strconv.Atoi(m[1])
			dir := filepath.Join(root, h, r)
			p, err := readPlan(f, dir)
			if errors.Is(err, syscall.ENOTDIR) {
				continue // a file named like a round
			}
			if err != nil {
				return nil, err
			}
			out = append(out, hostRound{host: h, round: k, dir: dir, plan: p})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].host != out[j].host {
			return out[i].host < out[j].host
		}
		return out[i].round < out[j].round
	})
	return out, nil
}

// readPlan reads dir/plan.json; a missing file is (nil, nil).
func readPlan(f fsys, dir string) (*Plan, error) {
	b, err := f.readFile(filepath.Join(dir, "plan.json"), sharedfile.MaxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "plan.json"), err)
	}
	return &p, nil
}

// RunInfo is one run whose plans a shared folder holds.
type RunInfo struct {
	Run          string // Plan.Run; "" for plans written before runs had one
	Hosts        int    // hosts with at least one round of it
	Rounds       int    // host rounds
	First, Until string // the first and last host round, <host>/round-<k>
}

// Runs lists the runs whose plans are under root, by name.
func Runs(root string) ([]RunInfo, error) {
	all, err := scanAll(fsys{}, root)
	if err != nil {
		return nil, err
	}
	return runsOf(all), nil
}

func runsOf(hrs []hostRound) []RunInfo {
	by := map[string]*RunInfo{}
	hosts := map[string]map[string]bool{}
	var names []string
	for _, hr := range hrs {
		if hr.plan == nil {
			continue
		}
		r := by[hr.plan.Run]
		if r == nil {
			r = &RunInfo{Run: hr.plan.Run, First: hr.host + "/round-" + strconv.Itoa(hr.round)}
			by[hr.plan.Run], hosts[hr.plan.Run] = r, map[string]bool{}
			names = append(names, hr.plan.Run)
		}
		r.Rounds++
		r.Until = hr.host + "/round-" + strconv.Itoa(hr.round)
		hosts[hr.plan.Run][hr.host] = true
	}
	sort.Strings(names)
	out := make([]RunInfo, 0, len(names))
	for _, n := range names {
		r := by[n]
		r.Hosts = len(hosts[n])
		out = append(out, *r)
	}
	return out
}

func (r RunInfo) String() string {
	name := r.Run
	if name == "" {
		name = "(a run from before run identities)"
	}
	hosts := "hosts"
	if r.Hosts == 1 {
		hosts = "host"
	}
	return fmt.Sprintf("%s: %d %s, %d host rounds (%s .. %s)", name, r.Hosts, hosts, r.Rounds, r.First, r.Until)
}

// pickRun is the run to read from root: want when set (an error when no
// plan has it), else the only one there. Two runs in one folder (a
// requeued job, a rerun on the same claim) are an error naming both: their
// files must never be judged together.
func pickRun(root string, hrs []hostRound, want string) (string, error) {
	runs := runsOf(hrs)
	if want != "" {
		for _, r := range runs {
			if r.Run == want {
				return want, nil
			}
		}
		var have []string
		for _, r := range runs {
			have = append(have, r.String())
		}
		return "", fmt.Errorf("reports folder %s holds no plan of run %s; it holds: %s", root, want, strings.Join(have, "; "))
	}
	switch len(runs) {
	case 0:
		return "", nil
	case 1:
		return runs[0].Run, nil
	}
	var have []string
	for _, r := range runs {
		have = append(have, r.String())
	}
	return "", fmt.Errorf("reports folder %s holds %d runs, which must not be judged together: %s; name the one to take (-run <id>), or give each run a folder of its own",
		root, len(runs), strings.Join(have, "; "))
}

// Hosts returns the job's host list in schedule order as the plans of run
// under root record it (for isolating after the job, outside it). Hosts
// whose plans disagree on the host count or position are an error.
func Hosts(root, run string) ([]string, error) {
	hrs, err := scan(fsys{}, root, run)
	if err != nil {
		return nil, err
	}
	if run == "" {
		run = runOf(hrs)
	}
	n := -1
	byIndex := map[int]string{}
	for _, hr := range hrs {
		p := hr.plan
		if p == nil {
			continue
		}
		if n >= 0 && p.Hosts != n {
			return nil, fmt.Errorf("%s: plan.json says %d hosts, another says %d: reports of two jobs in one folder?", hr.dir, p.Hosts, n)
		}
		n = p.Hosts
		if h, ok := byIndex[p.Index]; ok && h != p.Host {
			return nil, fmt.Errorf("%s: host %s has index %d, which %s has too: reports of two jobs in one folder?", hr.dir, p.Host, p.Index, h)
		}
		byIndex[p.Index] = p.Host
	}
	if n < 0 {
		return nil, fmt.Errorf("reports folder %s holds no <host>/round-<k>/plan.json", root)
	}
	// Hosts that did not start left no plan: the start barrier names them.
	if c, err := readClosedFile(fsys{}, root, run, StartBarrier); err == nil && c != nil && len(c.MissingIndex) == len(c.Missing) {
		for i, at := range c.MissingIndex {
			if _, ok := byIndex[at]; !ok && at >= 0 && at < n {
				byIndex[at] = c.Missing[i]
			}
		}
	}
	hosts := make([]string, 0, n)
	for i := range n {
		h, ok := byIndex[i]
		if !ok {
			h = fmt.Sprintf("(host %d: no report)", i)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// runOf is the run of scanned host rounds (scan keeps one): their first
// plan's.
func runOf(hrs []hostRound) string {
	for _, hr := range hrs {
		if hr.plan != nil {
			return hr.plan.Run
		}
	}
	return ""
}

// Package cluster is the file side of an N-host run: the shared reports
// folder's layout, each round's plan, the pair results read back from the
// suite's test.json, and the barrier between rounds. Slurm or Kubernetes
// start the tasks; nothing here starts or reaches another host.
//
// Layout under the shared folder (GDR_REPORTS, on a file system every task
// mounts):
//
//	<root>/<host>/round-<k>/plan.json   written by gdrcluster plan before the round
//	<root>/<host>/round-<k>/test.json   the suite's go test -json events (GDR_ROUND_REPORTS)
//	<root>/<host>/round-<k>/junit.xml   the suite's JUnit
//	<root>/<host>/round-<k>/done        written by gdrcluster done after the round
//
// Files are written to a temporary name and renamed, so a reader on another
// host never sees half a file.
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
}

// scan lists every <host>/round-<k> folder under root, sorted by host then
// round. Anything else under root is ignored.
func scan(root string) ([]hostRound, error) {
	hosts, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reports folder %s: %w", root, err)
	}
	var out []hostRound
	for _, h := range hosts {
		if !h.IsDir() || h.Name()[0] == '.' {
			continue
		}
		rounds, err := os.ReadDir(filepath.Join(root, h.Name()))
		if err != nil {
			return nil, err
		}
		for _, r := range rounds {
			m := roundName.FindStringSubmatch(r.Name())
			if !r.IsDir() || m == nil {
				continue
			}
			k, _ := strconv.Atoi(m[1])
			out = append(out, hostRound{host: h.Name(), round: k, dir: filepath.Join(root, h.Name(), r.Name())})
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
func readPlan(dir string) (*Plan, error) {
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
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

// Hosts returns the job's host list in schedule order as the plans under
// root record it (for isolating after the job, outside it). Hosts whose
// plans disagree on the host count or position are an error.
func Hosts(root string) ([]string, error) {
	hrs, err := scan(root)
	if err != nil {
		return nil, err
	}
	n := -1
	byIndex := map[int]string{}
	for _, hr := range hrs {
		p, err := readPlan(hr.dir)
		if err != nil {
			return nil, err
		}
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

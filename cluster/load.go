package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// event is the part of a go test -json event the loader reads (attr events
// carry Key and Value since Go 1.25).
type event struct {
	Action  string
	Package string
	Test    string
	Key     string
	Value   string
	Output  string
}

type testRec struct {
	name   string
	attrs  map[string]string
	status isolate.Status
	detail string
}

// readTests reads go test -json events into one record per test that ended.
// The report package owns the full event model; this reads only what pair
// results need (status, attributes, the first failure line).
//
// What a node that stopped mid-write leaves (a cut last line), a line too
// long to keep or one that does not decode is passed over: the pairs it
// would have told are then missing, which isolation counts; the report
// names the file's damage for its host. Only a failed read is an error.
func readTests(r io.Reader) ([]testRec, error) {
	byKey := map[string]*testRec{}
	var order []string
	_, err := sharedfile.Lines(r, sharedfile.MaxLine, func(b []byte, cut bool) error {
		if len(b) == 0 || b[0] != '{' {
			return nil // gotestsum may interleave non-JSON lines
		}
		var e event
		if json.Unmarshal(b, &e) != nil || e.Test == "" {
			return nil
		}
		k := e.Package + "\x00" + e.Test
		t := byKey[k]
		if t == nil {
			t = &testRec{name: e.Test, attrs: map[string]string{}}
			byKey[k] = t
			order = append(order, k)
		}
		switch e.Action {
		case "attr":
			t.attrs[e.Key] = e.Value
		case "output":
			if t.detail == "" {
				t.detail = failureLine(e.Output)
			}
		case "pass":
			t.status = isolate.Pass
		case "fail":
			t.status = isolate.Fail
		case "skip":
			t.status = isolate.Skip
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]testRec, 0, len(order))
	for _, k := range order {
		if t := byKey[k]; t.status != "" {
			out = append(out, *t)
		}
	}
	return out, nil
}

// failureLine returns the message of a "    file_test.go:12: message" line.
func failureLine(s string) string {
	s = strings.TrimSpace(s)
	file, msg, ok := strings.Cut(s, ": ")
	if !ok || !strings.Contains(file, ".go:") || strings.ContainsAny(file, " \t") {
		return ""
	}
	return strings.TrimSpace(msg)
}

// Load reads every host's rounds of run under root into pair results
// (package isolate documents which tests count and which attributes they
// carry; run "" is the folder's only run, see scan). A host that had a peer
// in a round and left no pair result for it gives one Missing result for
// every rail. It also returns the plans it read.
//
// A result's peer is its host's plan.json peer, never the host's own word
// alone (its gdr.peer): a test whose gdr.peer names another host than the
// plan (loadRound), or a round whose plan names a peer whose own plan
// names someone else (crossCheck), counts as a failure of the planned pair
// with a detail naming both, so hosts that claim a third one can never
// shift their failures onto it. A folder without a plan takes its
// gdr.peer only where that peer's plan, or its own records of the round,
// name this host back.
func Load(root, run string) ([]isolate.Result, []Plan, error) {
	return load(fsys{}, root, run, false)
}

// LoadCompact is Load for a task planning a repair round: each host
// round's pairs.json (Done wrote it: one result a rail, isolate.Compact)
// instead of its test.json, which holds every test of the suite; a round
// without one (a host that stopped before Done) is read from its
// test.json as Load does. The results judge the same as Load's.
func LoadCompact(root, run string) ([]isolate.Result, error) {
	rs, _, err := load(fsys{}, root, run, true)
	return rs, err
}

func load(f fsys, root, run string, compact bool) ([]isolate.Result, []Plan, error) {
	hrs, err := scan(f, root, run)
	if err != nil {
		return nil, nil, err
	}
	if run == "" {
		run = runOf(hrs)
	}
	var results []isolate.Result
	var plans []Plan
	for _, hr := range hrs {
		p := hr.plan
		if p != nil {
			plans = append(plans, *p)
		}
		if compact {
			rs, ok, err := readPairs(f, hr.dir, run, hr.host, hr.round)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				results = append(results, rs...)
				continue
			}
		}
		rs, err := loadRound(f, hr, p)
		if err != nil {
			return nil, nil, err
		}
		results = append(results, rs...)
	}
	return crossCheck(results, hrs), plans, nil
}

type hostRoundKey struct {
	host  string
	round int
}

// crossCheck holds each host round's results to its peer's word: a plan
// whose peer's plan names someone else makes the round a failure of the
// pair it names (both plans named), and a result without a plan stays
// only where its peer's plan or records name its host back.
func crossCheck(results []isolate.Result, hrs []hostRound) []isolate.Result {
	plans := map[hostRoundKey]*Plan{}
	for _, hr := range hrs {
		if hr.plan != nil {
			plans[hostRoundKey{hr.host, hr.round}] = hr.plan
		}
	}
	said := map[[2]hostRoundKey]bool{} // (host, round) -> peer its results name
	for _, r := range results {
		said[[2]hostRoundKey{{r.Host, r.Round}, {r.Peer, r.Round}}] = true
	}
	out := results[:0]
	for _, r := range results {
		p := plans[hostRoundKey{r.Host, r.Round}]
		switch {
		case p == nil:
			q := plans[hostRoundKey{r.Peer, r.Round}]
			if q != nil && q.Peer != r.Host || q == nil && !said[[2]hostRoundKey{{r.Peer, r.Round}, {r.Host, r.Round}}] {
				continue // nobody but this host says who its peer was
			}
		case r.Status != isolate.Stopped:
			if why := planConflict(plans, r.Host, r.Round, p); why != "" {
				if r.Status != isolate.Missing {
					r.Status = isolate.Fail
				}
				r.Detail = why
			}
		}
		out = append(out, r)
	}
	return out
}

// planConflict says why host's plan for round cannot be taken as it
// stands: its peer's plan names another peer. "" when the plans agree or
// the peer wrote none (it may have died before the round).
func planConflict(plans map[hostRoundKey]*Plan, host string, round int, p *Plan) string {
	if p.Peer == "" || p.Role == Idle {
		return ""
	}
	q := plans[hostRoundKey{p.Peer, round}]
	if q == nil || q.Peer == host {
		return ""
	}
	theirs := "no peer (idle)"
	if q.Peer != "" && q.Role != Idle {
		theirs = q.Peer
	}
	return fmt.Sprintf("plan.json of %s names %s as its peer in round %d, and %s's plan.json names %s: the plans disagree, so this round's records are not a result of the pair (counted as its failure)",
		host, p.Peer, round, p.Peer, theirs)
}

// pairsFile is a host round's pairs.json: its pair results, compact.
type pairsFile struct {
	Run     string           `json:"run"`
	Host    string           `json:"host"`
	Round   int              `json:"round"`
	Results []isolate.Result `json:"results"`
}

// writePairs stores a host round's pair results in compact form.
func writePairs(f fsys, dir, run, host string, k int, rs []isolate.Result) error {
	c := isolate.Compact(rs)
	if c == nil {
		c = []isolate.Result{}
	}
	b, err := json.Marshal(pairsFile{Run: run, Host: host, Round: k, Results: c})
	if err != nil {
		return err
	}
	return f.write(filepath.Join(dir, "pairs.json"), append(b, '\n'))
}

// readPairs reads a host round's pairs.json; ok is false when there is
// none, or it is another run's or round's (then test.json is read). A file
// that does not decode is an error naming it.
func readPairs(f fsys, dir, run, host string, k int) (rs []isolate.Result, ok bool, err error) {
	path := filepath.Join(dir, "pairs.json")
	b, err := f.readFile(path, sharedfile.MaxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var p pairsFile
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if p.Run != run || p.Host != host || p.Round != k {
		return nil, false, nil
	}
	for _, r := range p.Results {
		if r.Host != host || r.Round != k || r.Rail < isolate.AllRails {
			return nil, false, fmt.Errorf("%s: a result of %s round %d rail %d in the file of %s round %d", path, r.Host, r.Round, r.Rail, host, k)
		}
	}
	return p.Results, true, nil
}

func loadRound(fsy fsys, hr hostRound, p *Plan) ([]isolate.Result, error) {
	var recs []testRec
	// test.json, a compacted round's test.json.gz, or what a run that
	// never ended wrote so far.
	f, err := sharedfile.OpenEvents(hr.dir, fsy.open)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		// Not a file to read (a FIFO, a device, a .gz that is no gzip): no
		// results from it, as from a host that wrote none; the report
		// names the file.
	default:
		recs, err = readTests(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	peer, role := "", ""
	if p != nil {
		peer, role = p.Peer, p.Role
		if p.Role == Idle && p.PeerStopped != "" {
			// Its partner of the schedule had stopped: idle, not judged.
			return []isolate.Result{{Host: hr.host, Round: hr.round, Rail: isolate.AllRails, Peer: p.PeerStopped, Role: Idle,
				Status: isolate.Stopped, Detail: fmt.Sprintf("%s stopped in round %d: %s idled", p.PeerStopped, p.PeerStoppedIn, hr.host)}}, nil
		}
	}
	inherit(recs)
	var out []isolate.Result
	for _, t := range recs {
		rail, ok := t.attrs["gdr.rail"]
		if !ok {
			continue
		}
		if id := t.attrs["gdr.req"]; id != "" {
			if q, ok := reqs.Lookup(id); ok && q.Area != reqs.PairedArea {
				// A single-host check on a rail (GPU-08's dma-buf, GPU-09's
				// copies, memreg's loopback): the host's own finding, never
				// a pair's, although it names a rail.
				continue
			}
		}
		n, err := strconv.Atoi(rail)
		if err != nil || n < 0 || n > 1024 {
			return nil, fmt.Errorf("%s: test %s: gdr.rail=%q is not a rail index", hr.dir, t.name, rail)
		}
		r := isolate.Result{Host: hr.host, Round: hr.round, Rail: n, Peer: peer, Role: role, Test: t.name, Status: t.status, Detail: t.detail}
		switch claimed := t.attrs["gdr.peer"]; {
		case !isHostName(claimed):
		case p == nil:
			r.Peer = claimed // only if the peer names this host back (crossCheck)
		case claimed != peer:
			r.Status, r.Detail = isolate.Fail, fmt.Sprintf(
				"test %s records gdr.peer %s, and plan.json names %s as the peer of round %d: the record is not of the planned pair (counted as its failure)",
				t.name, claimed, peer, hr.round)
		}
		if v := t.attrs["gdr.role"]; v != "" {
			r.Role = v
		}
		if k, v, ok := first(t.attrs, "gdr.bw_gbit_s", "gdr.bw_gbps"); ok {
			if r.BWGbitS, err = strconv.ParseFloat(v, 64); err != nil || r.BWGbitS < 0 {
				return nil, fmt.Errorf("%s: test %s: %s=%q is not a bandwidth in Gbit/s", hr.dir, t.name, k, v)
			}
		}
		_, size, _ := first(t.attrs, "gdr.size_bytes", "gdr.size")
		r.Size, _ = strconv.Atoi(size)
		r.Op = t.attrs["gdr.op"]
		if r.Peer == "" {
			continue // not a two-host test (loopback)
		}
		out = append(out, r)
	}
	if len(out) == 0 && p != nil && p.Role != Idle && p.Peer != "" {
		why := "no pair results (no test.json)"
		if recs != nil {
			why = "no test with gdr.rail in test.json"
		}
		out = append(out, isolate.Result{Host: hr.host, Round: hr.round, Rail: isolate.AllRails, Peer: p.Peer, Role: p.Role,
			Status: isolate.Missing, Detail: why})
	}
	return out, nil
}

// first returns the first of keys that attrs has (the suite's key, then
// the name older recordings used).
func first(attrs map[string]string, keys ...string) (key, val string, ok bool) {
	for _, k := range keys {
		if v, ok := attrs[k]; ok {
			return k, v, true
		}
	}
	return "", "", false
}

// inherit gives each subtest the attributes of its parents that it does not
// set itself: pingpong records the rail on "TestPP08Bandwidth/rail1" and the
// bandwidth on "TestPP08Bandwidth/rail1/WRITE/1048576".
func inherit(recs []testRec) {
	byName := map[string]map[string]string{}
	for _, t := range recs {
		byName[t.name] = t.attrs
	}
	for _, t := range recs {
		for p := t.name; ; {
			i := strings.LastIndex(p, "/")
			if i < 0 {
				break
			}
			p = p[:i]
			for k, v := range byName[p] {
				if _, has := t.attrs[k]; !has {
					t.attrs[k] = v
				}
			}
		}
	}
}

// isHostName says whether a gdr.peer value names a host. Runs without
// GDR_PEER_NAME record the out-of-band session's remote address
// (198.18.0.2:41388, [fd00::2]:7), which names no host of the job's list
// and so contradicts no plan.
func isHostName(v string) bool {
	if v == "" || strings.ContainsAny(v, ":[] /") {
		return false
	}
	return net.ParseIP(v) == nil
}

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// A repair round is computed from every host's results of the rounds
// before it: reading them is one file per host round (pairs.json), so a
// fleet of N tasks that each read them asks the file server N² times (at
// 1024 hosts after the ring's two rounds: 5 million requests at once).
// One task computes it instead, the lead (the first host of the job's list
// still running), and writes it once to the run's folder:
//
//	<root>/.gdrcluster/run-<run>/round-<k>.plan.json
//
// The others wait for that file; one that waits longer than RepairWait
// (the lead died, or is slow) computes the round itself and writes it the
// same way, once. The round is a function of files that no longer change
// (the closed barriers, the pairs.json of the hosts that finished), so
// whoever writes it writes the same; every task then plans from the file,
// whichever won.

// RepairWait is how long a task waits for the lead's repair plan before
// it computes the round itself.
const RepairWait = 2 * time.Minute

// repairFile is round-<k>.plan.json.
type repairFile struct {
	Run   string         `json:"run"`
	Round int            `json:"round"`
	Done  bool           `json:"done"` // no round k: nothing left to re-pair
	Pairs []pairing.Pair `json:"pairs"`
	By    string         `json:"by"`
}

// RepairOptions say how a task gets a repair round.
type RepairOptions struct {
	Config Config
	Task   jobenv.Task
	Live   isolate.Liveness // LivenessBefore(k)
	Wait   time.Duration    // RepairWait
	Poll   time.Duration    // DefaultPoll
	Ops    *FileOps
}

// RepairPlan is repair round k (k past the schedule's rounds) as every
// task of the run plans it: from the lead's file, or computed.
func RepairPlan(ctx context.Context, o RepairOptions, k int) (r pairing.Round, done bool, err error) {
	f := fsys{o.Ops}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	run, self := o.Task.Run(), o.Task.Self()
	path := filepath.Join(RunDir(o.Config.Reports, run), RoundBarrier(k)+".plan.json")
	lead := ""
	if e := Expected(o.Task.Names, o.Live, k); len(e) > 0 {
		lead = e[0]
	}
	deadline := time.Now().Add(o.Wait)
	for self != lead {
		if rf, err := readRepair(f, path, run, k, len(o.Task.Names)); err != nil || rf != nil {
			return toRound(rf, k), rf != nil && rf.Done, err
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return pairing.Round{}, false, ctx.Err()
		case <-time.After(o.Poll):
		}
	}
	results, _, err := load(f, o.Config.Reports, run, true)
	if err != nil {
		return pairing.Round{}, false, err
	}
	r, done = isolate.Round(o.Config.Pairing, o.Task.Names, k, o.Config.RepairRounds, results,
		isolate.Options{MinFraction: o.Config.MinFraction, Live: o.Live.Before(k), Domains: o.Config.Domains})
	rf := repairFile{Run: run, Round: k, Done: done, Pairs: r.Pairs, By: self}
	if rf.Pairs == nil {
		rf.Pairs = []pairing.Pair{}
	}
	b, err := json.Marshal(rf)
	if err != nil {
		return pairing.Round{}, false, err
	}
	if _, err := f.writeOnce(path, append(b, '\n')); err != nil {
		return pairing.Round{}, false, fmt.Errorf("writing the repair plan %s: %w", path, err)
	}
	got, err := readRepair(f, path, run, k, len(o.Task.Names)) // whoever wrote it first: every task plans from it
	if err != nil || got == nil {
		return pairing.Round{}, false, fmt.Errorf("reading back the repair plan %s: %v", path, err)
	}
	return toRound(got, k), got.Done, nil
}

func toRound(rf *repairFile, k int) pairing.Round {
	if rf == nil || rf.Done {
		return pairing.Round{}
	}
	return pairing.Round{Index: k, Pairs: rf.Pairs, Repair: true}
}

// readRepair reads a repair plan; nil while there is none. One of another
// run or round, or with a host index out of the job's range, is an error
// naming it.
func readRepair(f fsys, path, run string, k, hosts int) (*repairFile, error) {
	b, err := f.readFile(path, sharedfile.MaxFile)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var rf repairFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return nil, fmt.Errorf("%s: not a repair plan: %w", path, err)
	}
	if rf.Run != run || rf.Round != k {
		return nil, fmt.Errorf("%s is round %d of run %s, not round %d of %s", path, rf.Round, rf.Run, k, run)
	}
	for _, p := range rf.Pairs {
		if p.Server < 0 || p.Server >= hosts || p.Client < 0 || p.Client >= hosts || p.Server == p.Client {
			return nil, fmt.Errorf("%s pairs host %d with host %d: the job has %d hosts", path, p.Server, p.Client, hosts)
		}
	}
	return &rf, nil
}

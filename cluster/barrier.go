package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// Done marks host's round k of run finished (after the suite has written
// its reports for it). The file names the run, so that a later attempt
// sharing the folder (a requeued Slurm job) never takes it for its own.
func Done(root, host string, k int, run string) error {
	return writeFile(filepath.Join(RoundDir(root, host, k), "done"), []byte(run+"\n"+time.Now().UTC().Format(time.RFC3339)+"\n"))
}

// doneRun is the run a done file names: its first line ("" for files
// written before done files named their run).
func doneRun(path string) (string, error) {
	f, err := sharedfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return "", sc.Err()
	}
	line := strings.TrimSpace(sc.Text())
	if _, err := time.Parse(time.RFC3339, line); err == nil {
		return "", nil // the old format: only the time
	}
	return line, nil
}

// Wait blocks until every host has marked round k of run done, polling
// every poll, or until ctx ends: the error then names the hosts still
// missing, and those whose done file is another run's. Tasks of one srun
// step per round do not need it (the step is the barrier); one
// long-running task per host (Kubernetes, or a single srun) calls it
// between rounds, since the next round may depend on every host's results.
func Wait(ctx context.Context, root string, hosts []string, k int, poll time.Duration, run string) error {
	for {
		var missing, stale []string
		for _, h := range hosts {
			got, err := doneRun(filepath.Join(RoundDir(root, h, k), "done"))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				missing = append(missing, h)
			case err != nil:
				return err
			case got != run:
				if got == "" {
					got = "no run named"
				}
				missing = append(missing, h)
				stale = append(stale, h+" ("+got+")")
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("round %d: %d of %d hosts did not finish: %s", k, len(missing), len(hosts), first10(missing))
			if len(stale) > 0 {
				msg += fmt.Sprintf("; a done file of another run, not counted: %s", first10(stale))
			}
			return fmt.Errorf("%s (%w)", msg, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// first10 lists at most ten names, and how many more.
func first10(names []string) string {
	if len(names) > 10 {
		names = append(names[:10:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Done marks host's round k as finished (after the suite has written its
// reports for it).
func Done(root, host string, k int) error {
	return writeFile(filepath.Join(RoundDir(root, host, k), "done"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"))
}

// Wait blocks until every host has marked round k done, polling every poll,
// or until ctx ends: the error then names the hosts still missing. Tasks of
// one srun step per round do not need it (the step is the barrier); one
// long-running task per host (Kubernetes, or a single srun) calls it between
// rounds, since the next round may depend on every host's results.
func Wait(ctx context.Context, root string, hosts []string, k int, poll time.Duration) error {
	for {
		var missing []string
		for _, h := range hosts {
			_, err := os.Stat(filepath.Join(RoundDir(root, h, k), "done"))
			if errors.Is(err, fs.ErrNotExist) {
				missing = append(missing, h)
			} else if err != nil {
				return err
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			shown := missing
			if len(shown) > 10 {
				shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(missing)-10))
			}
			return fmt.Errorf("round %d: %d of %d hosts did not finish: %s (%w)", k, len(missing), len(hosts), strings.Join(shown, ", "), ctx.Err())
		case <-time.After(poll):
		}
	}
}

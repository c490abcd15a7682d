package testenv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rdmares"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// leakSettle is how long the check waits for counts to come back down: a
// driver may finish releasing an object just after the verb returned.
const leakSettle = 2 * time.Second

var (
	rdmaOnce sync.Once
	rdmaPath string
	rdmaErr  error
)

// rdmaSummary runs iproute2's `rdma -j resource show`.
func rdmaSummary() (rdmares.Summary, error) {
	rdmaOnce.Do(func() {
		var looked []string
		if rdmaPath, looked = hostfs.LookTool("rdma"); rdmaPath == "" {
			rdmaErr = fmt.Errorf("%w in %s: install iproute2, or unset GDR_LEAK_CHECK", rdmares.ErrNoTool, strings.Join(looked, ", "))
		}
	})
	if rdmaErr != nil {
		return nil, rdmaErr
	}
	out, err := hostfs.Stdout(10*time.Second, rdmaPath, "-j", "resource", "show")
	if err != nil {
		return nil, err
	}
	return rdmares.Parse(out)
}

// leakCheck (GDR_LEAK_CHECK=1) reads the kernel's RDMA resource summary now
// and once more after every other cleanup of t has run (it is registered
// first, so it runs last), and fails t when QPs, CQs, MRs or PDs rose: a
// test must release what it made before the next one starts. The count is
// the attribute gdr.rdma_leaked_count. Subtests compare with what existed
// when they started, so their parent's open connection does not count.
func leakCheck(t testing.TB) {
	before, err := rdmaSummary()
	if err != nil {
		NotJudgedf(t, "install iproute2 (its rdma command), or unset GDR_LEAK_CHECK", "GDR_LEAK_CHECK=1: %v", err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(leakSettle)
		for {
			after, err := rdmaSummary()
			if err != nil {
				Error(t, *verdict.NotJudgedf("", "GDR_LEAK_CHECK=1: after the test: %v", err))
				return
			}
			rs := rdmares.Leaked(before, after)
			if len(rs) == 0 || time.Now().After(deadline) {
				Attr(t, "rdma_leaked_count", rdmares.Count(rs))
				if len(rs) > 0 {
					Errorf(t, "a suite bug (every object is released through t.Cleanup) or a driver that keeps objects after their destroy verb returned: see the test's cleanups",
						"%s left RDMA objects behind after its cleanups: %s (rdma resource show, %v after the test)", t.Name(), rdmares.Join(rs), leakSettle)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

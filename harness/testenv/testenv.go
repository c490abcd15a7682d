// Package testenv holds the helpers every conformance test stands on: the
// requirement tag, facts as JUnit properties, the run configuration, the host
// root, and the skip-or-fail rule for absent hardware (GDR_STRICT).
package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

var (
	loadOnce sync.Once
	loaded   config.Config
	loadErr  error
)

// Config returns the run configuration; a bad GDR_* value fails the test with
// the variable's name, its value and what is accepted. NCCL's settings the
// suite inherits (NCCL_IB_HCA, NCCL_IB_GID_INDEX, NCCL_IB_TC, NCCL_IB_SL)
// are read from the environment and, as NCCL does, from its configuration
// files under the host root (internal/nccltopo.Setting).
func Config(t testing.TB) config.Config {
	t.Helper()
	loadOnce.Do(func() {
		if loaded, loadErr = config.Load(); loadErr != nil {
			return
		}
		r, err := hostfs.New(loaded.HostRoot)
		if err != nil {
			return // Root reports it
		}
		env := nccltopo.Env{ConfFile: loaded.NCCLConfFile, Home: loaded.Home}
		loaded, loadErr = config.ParseConf(os.LookupEnv, func(name string) (string, string, bool, error) {
			return nccltopo.Setting(r, env, name)
		})
	})
	if loadErr != nil {
		NotJudgedf(t, "", "configuration: %v", loadErr)
	}
	return loaded
}

// Root returns the host root (GDR_HOST_ROOT) every /sys, /proc and /dev read goes through.
func Root(t testing.TB) *hostfs.Root {
	t.Helper()
	c := Config(t)
	r, err := hostfs.New(c.HostRoot)
	if err != nil {
		NotJudgedf(t, "", "GDR_HOST_ROOT=%q: %v", c.HostRoot, err)
	}
	return r
}

// Req tags the test with its requirement ID (JUnit property gdr.req). An ID
// missing from the catalogue is a suite bug and fails the test.
//
// It then makes sure no other conformance binary runs on this host
// meanwhile (alone.go).
//
// With GDR_LEAK_CHECK=1 it first registers the leak check: that cleanup
// runs last of the test's, after every object the test made is released.
func Req(t testing.TB, id string) {
	t.Helper()
	if Config(t).LeakCheck {
		leakCheck(t)
	}
	if _, ok := reqs.Lookup(id); !ok {
		NotJudgedf(t, "", "suite bug: requirement %s is not in internal/reqs", id)
	}
	t.Attr("gdr.req", id)
	alone(t)
}

// Attr records a fact or measurement as a JUnit property (key gdr.<name>).
// Floats are written with 3 significant decimals.
func Attr(t testing.TB, key string, value any) {
	t.Helper()
	key = withPrefix(key)
	var s string
	switch v := value.(type) {
	case float64:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	case float32:
		s = strconv.FormatFloat(float64(v), 'f', 3, 32)
	case string:
		s = v
	default:
		s = fmt.Sprint(v)
	}
	// Attribute values may not contain newlines (go test -json framing).
	t.Attr(key, strings.ReplaceAll(s, "\n", " "))
}

// NotAsked ends a test of an opt-in requirement (reqs.Req.OptIn) that
// this run did not ask for: the skip names the variable that asks and
// carries gdr.not_asked, GDR_STRICT=1 does not turn it into a failure (a
// soak is asked for, not hardware that is absent), and the report leaves
// the requirement out of the verdict. A requirement that is not opt-in
// cannot end this way: that is a suite bug, and fails.
func NotAsked(t testing.TB, id, format string, args ...any) {
	t.Helper()
	rq, ok := reqs.Lookup(id)
	if !ok || rq.OptIn == "" {
		NotJudgedf(t, "", "suite bug: %s is not an opt-in requirement in internal/reqs, so it cannot be left out as not asked", id)
	}
	msg := "not asked: " + fmt.Sprintf(format, args...)
	Attr(t, "gdr.not_asked", rq.OptIn)
	Attr(t, "gdr.skip", msg)
	t.Skip(msg)
}

// HostOnly ends a test of requirement id that is not judgeable from a
// container (reqs.ContainerRule.HostOnly: the host's developer
// environment). The skip says "not judgeable from a container: <why>;
// <what to do>" and carries gdr.host_only; GDR_STRICT=1 does not turn it
// into a failure and the report shows the requirement as "host only",
// which does not hold back QUALIFIED. A requirement without a host-only
// rule cannot end this way: that is a suite bug, and fails.
func HostOnly(t testing.TB, id, format string, args ...any) {
	t.Helper()
	rule, ok := reqs.Container(id)
	if !ok || rule.HostOnly == "" {
		NotJudgedf(t, "", "suite bug: %s has no host-only rule in internal/reqs (container.go), so it must be judged from a container or be absent", id)
	}
	msg := "not judgeable from a container: " + fmt.Sprintf(format, args...)
	Attr(t, "gdr.host_only", rule.HostOnly)
	Attr(t, "gdr.skip", msg)
	t.Skip(msg)
}

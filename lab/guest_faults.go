package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/lab/wait"
)

// Fault is something the guest agent does to its own VM while a step runs
// (make lab-faults): a command At after the step's program started (At 0:
// before it starts, so a qdisc is in place for the whole run), or a
// built-in disturbance of the server's out-of-band port repeated Every
// until the step ends.
type Fault struct {
	At     time.Duration `json:"at"`
	Argv   []string      `json:"argv,omitempty"`   // a command (ip, tc), run once
	Kind   string        `json:"kind,omitempty"`   // FaultStray or FaultHostile
	Target string        `json:"target,omitempty"` // host:port for Kind
	Every  time.Duration `json:"every,omitempty"`  // pause between connections for Kind
	// NIC is a MAC: "{nic}" in Argv becomes that NIC's netdev, found when
	// the fault runs (make lab-soak's rails are found by MAC, not by
	// probe order).
	NIC string `json:"nic,omitempty"`
	// After is a file: At then counts from when it first exists, not from
	// the step's start (make lab-soak: the soak's first sample writes
	// soak.json, so faults land in the soak, not in what runs before it).
	After string `json:"after,omitempty"`
}

// Built-in fault kinds.
const (
	// FaultStray connects to Target and closes at once, as a port scanner
	// or a health probe does.
	FaultStray = "stray"
	// FaultHostile sends Target garbage, an oversized frame header, a
	// replayed hello and the server's own hello reflected back.
	FaultHostile = "hostile"
	// FaultHog runs Argv from At until the step ends, with no limit of
	// its own: a CPU or memory hog beside the suite (make lab-soak's sag).
	FaultHog = "hog"
	// FaultSignal sends SIGTERM to the step's processes: its whole process
	// group when Target is "" (as srun signals every process of a step,
	// and a pod's deletion its container), else only those of the group
	// whose command name is Target (gotestsum: does it pass it on?).
	FaultSignal = "sigterm"
)

// startFaults runs the step's faults: those at 0 now, the others on their
// own goroutines. stop ends the loops and waits for them.
func (g *guest) startFaults(st Step, pgid *atomic.Int64) (stop func()) {
	if len(st.Faults) == 0 {
		return func() {}
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range st.Faults {
		if f.At <= 0 && f.Kind == "" && f.After == "" {
			g.fault(ctx, f, start, pgid)
			continue
		}
		wg.Go(func() {
			if f.After != "" {
				// Within the step's own limit: the step ends by then.
				if err := wait.For(ctx, start.Add(st.Timeout), 200*time.Millisecond, f.After, func() bool {
					_, err := os.Stat(f.After)
					return err == nil
				}); err != nil {
					g.logf("fault not run (%s): %v", strings.Join(f.Argv, " "), err)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(f.At):
			}
			g.fault(ctx, f, start, pgid)
		})
	}
	return func() { cancel(); wg.Wait() }
}

// fault runs one fault and logs what it did with its time in the step.
func (g *guest) fault(ctx context.Context, f Fault, start time.Time, pgid *atomic.Int64) {
	at := func() string {
		return fmt.Sprintf("+%.1fs (%s UTC)", time.Since(start).Seconds(), time.Now().UTC().Format("15:04:05"))
	}
	argv := f.Argv
	if f.NIC != "" {
		dev := netdevByMAC(f.NIC)
		if dev == "" {
			g.logf("fault %s: no NIC with MAC %s for %s", at(), f.NIC, strings.Join(argv, " "))
			return
		}
		argv = make([]string, len(f.Argv))
		for i, a := range f.Argv {
			argv[i] = strings.ReplaceAll(a, "{nic}", dev)
		}
	}
	switch f.Kind {
	case FaultSignal:
		pg := int(pgid.Load())
		if pg <= 0 {
			g.logf("fault %s: SIGTERM: the step has no process", at())
			return
		}
		if f.Target == "" {
			procs := strings.Join(groupProcs(pg, ""), " ") // before the signal: who got it
			err := syscall.Kill(-pg, syscall.SIGTERM)
			g.logf("fault %s: SIGTERM to process group %d (%s): %v", at(), pg, procs, errOr(err))
			return
		}
		for _, p := range groupProcs(pg, f.Target) {
			pid, _, _ := strings.Cut(p, ":")
			n, _ := strconv.Atoi(pid)
			err := syscall.Kill(n, syscall.SIGTERM)
			g.logf("fault %s: SIGTERM to %s: %v", at(), p, errOr(err))
		}
	case FaultHog:
		g.logf("fault %s: hog begins: %s", at(), strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		err := cmd.Run()
		g.logf("fault %s: hog ended: %s: %v", at(), strings.Join(argv, " "), errOr(err))
	case "":
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, argv[0], argv[1:]...).CombinedOutput()
		g.logf("fault %s: %s: %v %s", at(), strings.Join(argv, " "), errOr(err), strings.TrimSpace(string(out)))
	case FaultStray, FaultHostile:
		n, kinds := 0, map[string]int{}
		g.logf("fault %s: %s connections to %s every %v begin", at(), f.Kind, f.Target, f.Every)
		for i := 0; ; i++ {
			what := "connect-and-close"
			if f.Kind == FaultHostile {
				what = hostileConn(f.Target, i)
			} else if c, err := net.DialTimeout("tcp", f.Target, time.Second); err == nil {
				c.Close()
			} else {
				what = ""
			}
			if what != "" {
				n++
				kinds[what]++
			}
			select {
			case <-ctx.Done():
				g.logf("fault %s: %s: %d connections to %s made (%v)", at(), f.Kind, n, f.Target, kinds)
				return
			case <-time.After(f.Every):
			}
		}
	default:
		g.logf("fault %s: unknown kind %q", at(), f.Kind)
	}
}

// groupProcs are the live processes of process group pg, as "pid:comm",
// those named comm only when comm is not "" (read from /proc/<pid>/stat).
// Zombies are left out: they ended, and the agent, PID 1, does not reap
// the orphans a killed step leaves (a first cut run took four zombies for
// a step still running).
func groupProcs(pg int, comm string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold blanks and parens.
		st := string(b)
		l, r := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if l < 0 || r < l {
			continue
		}
		f := strings.Fields(st[r+1:])
		if len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g != pg || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if name := st[l+1 : r]; comm == "" || name == comm {
			out = append(out, fmt.Sprintf("%d:%s", pid, name))
		}
	}
	return out
}

func errOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// replayedShare is a v3 hello's key share that never changes: the
// ristretto255 generator's encoding (RFC 9496), a valid element, so the
// server takes the hello and turns the connection away at its proof.
var replayedShare, _ = hex.DecodeString("e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76")

// hostileConn makes the i-th hostile connection to target and returns what
// it sent ("" when nothing listened). Each is a way a confused or hostile
// peer can talk to the out-of-band port; the server must turn each away,
// naming this address, and go on waiting for its real client.
func hostileConn(target string, i int) string {
	c, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	hello := func(role string) []byte {
		nonce := bytes.Repeat([]byte{0x5a}, oob.NonceLen) // the same nonce every time: a replay
		b, _ := oob.Encode(oob.Message{Type: oob.THello, Hello: &oob.Hello{Version: oob.Version, Test: "TestPP01Device",
			Role: role, Nonce: nonce, Share: replayedShare}})
		return b
	}
	switch i % 4 {
	case 0:
		junk := make([]byte, 256)
		_, _ = rand.Read(junk)
		_, _ = c.Write(junk)
		return "garbage"
	case 1:
		// A valid header claiming a 4 GiB body: must be refused unread.
		h := append([]byte("GDRo"), byte(oob.THello), 0, 0, 0)
		h = binary.BigEndian.AppendUint32(h, 0xfffffff0)
		_, _ = c.Write(append(h, bytes.Repeat([]byte{'{'}, 64)...))
		return "oversized"
	case 2:
		// A hello, then the same hello again where the token proof belongs.
		_, _ = c.Write(hello("client"))
		buf := make([]byte, 4096)
		_, _ = c.Read(buf) // the server's hello, or its error
		_, _ = c.Write(hello("client"))
		return "replayed"
	default:
		// The server's own words sent back: a hello with role server.
		_, _ = c.Write(hello("server"))
		return "reflected"
	}
}

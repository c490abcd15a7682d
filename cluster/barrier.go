package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// A run's barriers live in a folder of their own in the shared folder, one
// per run, so that one listing shows every host that arrived and nothing
// of another run:
//
//	<root>/.gdrcluster/run-<run>/start/<host>      the host reached the start (and its NVLink domain)
//	<root>/.gdrcluster/run-<run>/start.json        the start barrier, closed (Closed; the domains)
//	<root>/.gdrcluster/run-<run>/round-<k>/<host>  the host finished round k (Done)
//	<root>/.gdrcluster/run-<run>/round-<k>.json    round k's barrier, closed
//	<root>/.gdrcluster/run-<run>/alive/<host>@<n>  the host's heartbeat n (Heartbeat)
//
// <run> is jobenv.Task.Run, path-escaped. A task waiting at a barrier
// opens, per look, the closed file (absent until it closes); the first
// host expected there (the lead) also lists the markers every look, the
// others every N/64 looks (32 s at 1024 hosts with the default poll),
// and at their own deadline: so a lead that died delays nobody long. A
// fleet of N tasks asks the file server about N+N/64+1 times a look and
// reads about 65 N names, where reading every host's done file was N
// opens for each task (N² a look).
//
// A barrier closes once, for everyone: the first task that sees every
// expected host there, its own deadline pass, or every missing host's
// heartbeat stand still for the quiet time, writes the closed file (a
// temporary file hard-linked to its name: it exists whole or not at all,
// and only the first link succeeds); every task, itself included, goes on
// from what that file says. Tasks that looked at different moments so plan
// around the same hosts, and a host that arrives after the file was written
// finds itself in its missing list: it is too late (LateError) and stops.

// Barrier names.
const (
	StartBarrier = "start"
	barrierDir   = ".gdrcluster"
	aliveDir     = "alive"
)

// RoundBarrier is round k's barrier name.
func RoundBarrier(k int) string { return "round-" + strconv.Itoa(k) }

// RunDir is the folder of run's barriers under root.
func RunDir(root, run string) string {
	return filepath.Join(root, barrierDir, "run-"+url.PathEscape(run))
}

// Closed is a barrier's outcome, as its closed file holds it.
type Closed struct {
	Run      string `json:"run"`
	Barrier  string `json:"barrier"`  // start, or round-<k>
	Expected int    `json:"expected"` // hosts expected there
	// Missing are the expected hosts that had not arrived when it closed,
	// in job order; the start barrier adds their positions in the job's
	// host list (MissingIndex), for readers without the job's variables.
	Missing      []string `json:"missing"`
	MissingIndex []int    `json:"missing_index,omitempty"`
	Why          string   `json:"why"` // what closed it
	By           string   `json:"by"`  // the host whose task closed it
	At           string   `json:"at"`  // when, RFC 3339 (By's clock)
	// Domains (the start barrier's): the NVLink domain each host that
	// arrived published in its marker (BarrierOptions.Domain), hosts
	// without one left out. The task that closes the barrier reads the
	// markers, once; every planner then reads the same domains here.
	Domains map[string]string `json:"nvlink_domains,omitempty"`
	// DomainNotes name the markers whose domain could not be read or is
	// not one (pairing.CheckDomain): those hosts are planned as without.
	DomainNotes []string `json:"nvlink_domain_notes,omitempty"`
}

// LateError is a host that reached a barrier after it closed without it:
// the fleet planned around it, so it must not go on.
type LateError struct {
	Host   string
	Closed Closed
}

func (e *LateError) Error() string {
	what := "finished " + strings.ReplaceAll(e.Closed.Barrier, "-", " ")
	if e.Closed.Barrier == StartBarrier {
		what = "reached the start"
	}
	return fmt.Sprintf("%s %s after its barrier closed at %s without it (closed by %s: %s): the run goes on without %s, which stops here",
		e.Host, what, e.Closed.At, e.Closed.By, e.Closed.Why, e.Host)
}

// BarrierOptions are one task's view of a barrier.
type BarrierOptions struct {
	Root, Run, Self string
	Hosts           []string      // every host expected there, in job order
	Timeout         time.Duration // from this task's arrival: when it runs out, this task closes the barrier
	Poll            time.Duration // between looks; default 2 s
	// Quiet: the barrier closes early when every missing host's heartbeat
	// (alive/) has stood still this long, as seen by this task's own clock
	// (no clocks are compared). 0: only the timeout closes it. Heartbeats
	// only ever shorten a wait: the timeout bounds it whatever they do.
	Quiet time.Duration
	Ops   *FileOps // counts the file operations; nil: not counted
	// Domain is this host's NVLink domain, which Start publishes in its
	// marker ("" where it has none: no line is written).
	Domain string
}

// DefaultPoll is the time between two looks at a barrier.
const DefaultPoll = 2 * time.Second

// QuietFor is how long the heartbeats of every host a round waits for
// must stand still before the round closes without them, under a round
// timeout: 3 min (well above the 60 s an NFS client may cache a folder's
// listing, acdirmax, so that a host that lives is never taken for dead),
// or a quarter of a shorter timeout. A host that beats is waited for up to
// the timeout, never longer: the timeout is the bound, and the heartbeat
// lets a round stop waiting for a host that died long before it.
func QuietFor(roundTimeout time.Duration) time.Duration { return min(3*time.Minute, roundTimeout/4) }

// HeartbeatFor is how often a task beats under a round timeout: twelve
// beats to a quiet time (15 s under the default).
func HeartbeatFor(roundTimeout time.Duration) time.Duration { return QuietFor(roundTimeout) / 12 }

type barrier struct {
	o        BarrierOptions
	fs       fsys
	name     string
	dir      string // the markers
	closed   string // the closed file
	alive    string
	deadline time.Time
	index    map[string]int
	seen     map[string]beat // the heartbeat counts this task saw, and when they last moved
	aliveAt  time.Time       // the last listing of alive/
	lead     bool            // the first host expected: it lists the markers every look
	every    int             // the others list them every so many looks
	looks    int
}

// listEvery is how many looks a task that does not lead a barrier of n
// hosts takes between two listings of its markers: n/64, so that a fleet
// lists about 65 times a look however large it is.
func listEvery(n int) int { return max(1, n/64) }

type beat struct {
	n  int64
	at time.Time
}

func newBarrier(o BarrierOptions, name string, now time.Time) *barrier {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	run := RunDir(o.Root, o.Run)
	b := &barrier{o: o, fs: fsys{o.Ops}, name: name, dir: filepath.Join(run, name), closed: filepath.Join(run, name+".json"),
		alive: filepath.Join(run, aliveDir), deadline: now.Add(o.Timeout), index: map[string]int{}, seen: map[string]beat{}}
	for i, h := range o.Hosts {
		b.index[h] = i
	}
	b.lead = len(o.Hosts) > 0 && o.Hosts[0] == o.Self
	b.every = listEvery(len(o.Hosts))
	return b
}

// domainLine starts the marker's line that names the host's NVLink
// domain.
const domainLine = "nvlink-domain "

// arrive writes this task's marker: the run and the time, and the host's
// NVLink domain where it has one.
func (b *barrier) arrive(now time.Time) error {
	m := b.o.Run + "\n" + now.UTC().Format(time.RFC3339) + "\n"
	if b.o.Domain != "" {
		m += domainLine + b.o.Domain + "\n"
	}
	return b.fs.write(filepath.Join(b.dir, b.o.Self), []byte(m))
}

// maxMarker bounds a marker read: the run, the time and a domain line.
const maxMarker = 4 << 10

// domains reads the NVLink domain of each host that arrived from its
// marker (the closing task's, once per host). A marker that does not read
// or whose domain is not one (pairing.CheckDomain) gives a note and no
// domain: that host is planned as one without.
func (b *barrier) domains(arrived []string) (map[string]string, []string) {
	var doms map[string]string
	var notes []string
	for _, h := range arrived {
		raw, err := b.fs.readFile(filepath.Join(b.dir, h), maxMarker)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: its start marker does not read (%v): planned without an NVLink domain", h, err))
			continue
		}
		d, found := "", false
		lines := strings.Split(string(raw), "\n")
		for _, line := range lines[min(2, len(lines)):] { // after the run and the time
			if v, ok := strings.CutPrefix(line, domainLine); ok {
				d, found = v, true
				break
			}
		}
		if !found || d == "" {
			continue
		}
		if err := pairing.CheckDomain(d); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v: planned without an NVLink domain", h, err))
			continue
		}
		if doms == nil {
			doms = map[string]string{}
		}
		doms[h] = d
	}
	return doms, notes
}

// readClosed returns the closed file, nil while there is none. A file
// that does not decode is one still being written where the file system
// has no hard links (fsys.writeOnce): read again later, until the
// deadline.
func (b *barrier) readClosed(now time.Time) (*Closed, error) {
	raw, err := b.fs.readFile(b.closed, sharedfile.MaxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Closed
	if err := json.Unmarshal(raw, &c); err != nil {
		if now.Before(b.deadline) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: not a barrier file: %w", b.closed, err)
	}
	if c.Run != b.o.Run || c.Barrier != b.name {
		return nil, fmt.Errorf("%s is the barrier %s of run %s, not %s of %s", b.closed, c.Barrier, c.Run, b.name, b.o.Run)
	}
	return &c, nil
}

// poll looks once: the closed file, else the markers (and, with Quiet, the
// heartbeats); it closes the barrier when every host is there, the
// deadline has passed or the missing hosts are quiet. nil: still open.
func (b *barrier) poll(now time.Time) (*Closed, error) {
	if c, err := b.readClosed(now); c != nil || err != nil {
		return c, err
	}
	b.looks++
	if !b.lead && (b.looks-1)%b.every != 0 && now.Before(b.deadline) {
		return nil, nil // the lead lists; this task only now and then
	}
	names, err := b.fs.names(b.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none there yet
		return nil, err
	}
	there := make(map[string]bool, len(names))
	for _, n := range names {
		there[n] = true
	}
	var missing []string
	for _, h := range b.o.Hosts {
		if !there[h] {
			missing = append(missing, h)
		}
	}
	var why string
	switch {
	case len(missing) == 0:
		why = "every host arrived"
	case !now.Before(b.deadline):
		why = fmt.Sprintf("%s's deadline passed, %s after it arrived", b.o.Self, b.o.Timeout)
	case b.quiet(now, missing):
		why = fmt.Sprintf("the heartbeats of the hosts missing had not moved for %s", b.o.Quiet)
	default:
		return nil, nil
	}
	c := Closed{Run: b.o.Run, Barrier: b.name, Expected: len(b.o.Hosts), Missing: missing, Why: why, By: b.o.Self,
		At: now.UTC().Format(time.RFC3339)}
	if c.Missing == nil {
		c.Missing = []string{}
	}
	if b.name == StartBarrier {
		for _, h := range missing {
			c.MissingIndex = append(c.MissingIndex, b.index[h])
		}
		var arrived []string
		for _, h := range b.o.Hosts {
			if there[h] {
				arrived = append(arrived, h)
			}
		}
		c.Domains, c.DomainNotes = b.domains(arrived)
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	created, err := b.fs.writeOnce(b.closed, append(raw, '\n'))
	if err != nil {
		return nil, fmt.Errorf("closing the barrier %s: %w", b.closed, err)
	}
	if created {
		return &c, nil
	}
	return b.readClosed(now) // another task closed it first: its file counts
}

// quiet reports whether every missing host's heartbeat has stood still for
// Quiet. alive/ is listed at most every Quiet/8: one listing shows every
// host's latest count.
func (b *barrier) quiet(now time.Time, missing []string) bool {
	if b.o.Quiet <= 0 {
		return false
	}
	if b.aliveAt.IsZero() || now.Sub(b.aliveAt) >= b.o.Quiet/8 {
		b.aliveAt = now
		names, err := b.fs.names(b.alive)
		if err != nil {
			return false
		}
		latest := map[string]int64{}
		for _, name := range names {
			h, n, ok := parseBeat(name)
			if ok && n > latest[h] {
				latest[h] = n
			}
		}
		for h, n := range latest {
			if s, ok := b.seen[h]; !ok || s.n != n {
				b.seen[h] = beat{n, now}
			}
		}
	}
	stale := true
	for _, h := range missing {
		s, ok := b.seen[h]
		if !ok { // never seen beating: its silence counts from now
			s = beat{-1, now}
			b.seen[h] = s
		}
		if now.Sub(s.at) < b.o.Quiet {
			stale = false
		}
	}
	return stale
}

// wait polls until the barrier closes and returns what closed it; this
// host in its missing list is a LateError. A look that fails (a shared
// file system's passing ESTALE or EIO) is tried again until the deadline;
// past it, the error is the answer.
func (b *barrier) wait(ctx context.Context) (Closed, error) {
	for {
		now := time.Now()
		c, err := b.poll(now)
		if err != nil && now.After(b.deadline) {
			return Closed{}, err
		}
		if c != nil {
			if slices.Contains(c.Missing, b.o.Self) {
				return *c, &LateError{Host: b.o.Self, Closed: *c}
			}
			return *c, nil
		}
		select {
		case <-ctx.Done():
			return Closed{}, fmt.Errorf("%s: the wait was cut short before the barrier closed (%w)", b.name, ctx.Err())
		case <-time.After(b.o.Poll):
		}
	}
}

// Start is the start barrier: this task marks its arrival and waits until
// every host of the job is there, or its timeout (GDR_START_TIMEOUT, long
// enough for the slowest image pull) runs out, or another task closed it.
// Hosts missing from the closed file did not start: the schedule is made
// over the others (isolate.Liveness). A host that arrives after it closed
// gets a LateError naming it.
func Start(ctx context.Context, o BarrierOptions) (Closed, error) {
	if o.Domain != "" {
		if err := pairing.CheckDomain(o.Domain); err != nil {
			return Closed{}, fmt.Errorf("%s cannot publish its NVLink domain: %w", o.Self, err)
		}
	}
	b := newBarrier(o, StartBarrier, time.Now())
	if err := b.arrive(time.Now()); err != nil {
		return Closed{}, fmt.Errorf("marking the start under GDR_REPORTS=%q: %w", o.Root, err)
	}
	return b.wait(ctx)
}

// WaitRound is round k's barrier (Done marked this task's arrival): it
// waits until every host expected in round k (Expected) finished it, the
// timeout runs out (GDR_ROUND_TIMEOUT) or every missing host's heartbeat
// stood still for Quiet. Hosts missing from the closed file stopped in
// round k; this host among them gets a LateError.
func WaitRound(ctx context.Context, o BarrierOptions, k int) (Closed, error) {
	return newBarrier(o, RoundBarrier(k), time.Now()).wait(ctx)
}

// Expected are the hosts of names that round k's barrier waits for: those
// that started and had not stopped before round k.
func Expected(names []string, live isolate.Liveness, k int) []string {
	var out []string
	for _, h := range names {
		if !live.Gone(h, k-1) {
			out = append(out, h)
		}
	}
	return out
}

// Done marks host's round k of run finished (after the suite has written
// its reports for it): pairs.json, the round's pair results in compact
// form (what a planner reads), then the done file, then the barrier's
// marker. The done file names the run, so that a later attempt sharing the
// folder (a requeued Slurm job) never takes it for its own.
func Done(root, host string, k int, run string) error {
	return done(fsys{}, root, host, k, run, time.Now())
}

func done(f fsys, root, host string, k int, run string, now time.Time) error {
	dir := RoundDir(root, host, k)
	p, err := readPlan(f, dir)
	if err != nil {
		return err
	}
	if p != nil && p.Run == run {
		rs, err := loadRound(f, hostRound{host: host, round: k, dir: dir, plan: p}, p)
		if err != nil {
			return err
		}
		if err := writePairs(f, dir, run, host, k, rs); err != nil {
			return err
		}
	}
	stamp := []byte(run + "\n" + now.UTC().Format(time.RFC3339) + "\n")
	if err := f.write(filepath.Join(dir, "done"), stamp); err != nil {
		return err
	}
	return f.write(filepath.Join(RunDir(root, run), RoundBarrier(k), host), stamp)
}

// doneRun is the run a done file names: its first line ("" for files
// written before done files named their run).
func doneRun(f fsys, path string) (string, error) {
	r, err := f.open(path)
	if err != nil {
		return "", err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		return "", sc.Err()
	}
	line := strings.TrimSpace(sc.Text())
	if _, err := time.Parse(time.RFC3339, line); err == nil {
		return "", nil // the old format: only the time
	}
	return line, nil
}

// Note says what a closed barrier's missing hosts left under root: those
// whose done file of round k (round 0 for the start) is another run's, a
// requeued job's earlier attempt, say. "" when none is.
func (c Closed) Note(root string) string {
	k := 0
	if n, ok := strings.CutPrefix(c.Barrier, "round-"); ok {
		k, _ = strconv.Atoi(n)
	}
	var stale []string
	for _, h := range c.Missing[:min(len(c.Missing), 10)] {
		got, err := doneRun(fsys{}, filepath.Join(RoundDir(root, h, k), "done"))
		if err != nil || got == c.Run {
			continue
		}
		if got == "" {
			got = "no run named"
		}
		stale = append(stale, h+" ("+got+")")
	}
	if len(stale) == 0 {
		return ""
	}
	return "a done file of another run, not counted: " + strings.Join(stale, ", ")
}

// Line says how the barrier closed for the hosts it waited for: "round 1:
// 1 of 16 hosts did not finish: n4 (...)", "" when every host arrived.
func (c Closed) Line() string {
	if len(c.Missing) == 0 {
		return ""
	}
	what := "did not finish"
	if c.Barrier == StartBarrier {
		what = "did not start"
	}
	return fmt.Sprintf("%s: %d of %d hosts %s: %s (closed by %s at %s: %s)", strings.ReplaceAll(c.Barrier, "-", " "), len(c.Missing), c.Expected, what,
		first10(c.Missing), c.By, c.At, c.Why)
}

// first10 lists at most ten names, and how many more.
func first10(names []string) string {
	if len(names) > 10 {
		names = append(names[:10:10], fmt.Sprintf("and %d more", len(names)-10))
	}
	return strings.Join(names, ", ")
}

// Heartbeat marks host alive under run every interval until ctx ends:
// alive/<host>@<n> with n counting up, the previous one removed, so that
// one listing of alive/ shows every host's latest count (a barrier's
// Quiet). It stops at the first error.
func Heartbeat(ctx context.Context, root, run, host string, interval time.Duration) error {
	dir := filepath.Join(RunDir(root, run), aliveDir)
	f := fsys{}
	prev := ""
	for n := int64(1); ; n++ {
		name := filepath.Join(dir, host+"@"+strconv.FormatInt(n, 10))
		if err := f.create(name); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if prev != "" {
			if err := f.remove(prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		prev = name
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// parseBeat reads "<host>@<n>".
func parseBeat(name string) (string, int64, bool) {
	i := strings.LastIndexByte(name, '@')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	return name[:i], n, err == nil && n > 0
}

// readClosedFile reads one closed barrier of run (nil when it has not
// closed).
func readClosedFile(f fsys, root, run, name string) (*Closed, error) {
	b := &barrier{o: BarrierOptions{Run: run}, fs: f, name: name, closed: filepath.Join(RunDir(root, run), name+".json")}
	return b.readClosed(time.Time{}) // a zero deadline: a file that does not decode is an error
}

// HostDomain is the NVLink domain a host publishes from its GPUs' (one
// value per GPU in a domain; nvml.Fabric.Domain): the one they share, ""
// when none has one. GPUs in different domains, or a value that is not a
// domain (pairing.CheckDomain), give "" and an error saying why: the host
// is then planned as one without a domain, never with a guessed one.
func HostDomain(gpus []string) (string, error) {
	var seen []string
	for _, d := range gpus {
		if d == "" || slices.Contains(seen, d) {
			continue
		}
		if err := pairing.CheckDomain(d); err != nil {
			return "", err
		}
		seen = append(seen, d)
	}
	switch len(seen) {
	case 0:
		return "", nil
	case 1:
		return seen[0], nil
	}
	return "", fmt.Errorf("this host's GPUs are in %d NVLink domains (%s): it publishes none", len(seen), first10(seen))
}

// StartDomains are the NVLink domains the hosts of run published at the
// start barrier (Closed.Domains); nil before it closed, or when none did.
// A domain the file holds that is not one (a foreign or damaged file) is
// an error naming the host and the value.
func StartDomains(root, run string) (pairing.Domains, error) {
	c, err := readClosedFile(fsys{}, root, run, StartBarrier)
	if err != nil || c == nil || len(c.Domains) == 0 {
		return nil, err
	}
	d := make(pairing.Domains, len(c.Domains))
	for h, v := range c.Domains {
		if err := pairing.CheckDomain(v); err != nil {
			return nil, fmt.Errorf("%s: host %s: %w", filepath.Join(RunDir(root, run), StartBarrier+".json"), clip.Quote(h), err)
		}
		d[h] = v
	}
	return d, nil
}

// LivenessBefore is what the closed barriers of run under root say before
// round k (k < 0: every round): the hosts missing from the start barrier
// did not start, and a host missing from round j's stopped in round j. It
// reads the start's file and one file per round: what a task planning
// round k (every task the same, the files being written once) plans
// around.
func LivenessBefore(root, run string, k int) (isolate.Liveness, error) {
	return livenessBefore(fsys{}, root, run, k)
}

func livenessBefore(f fsys, root, run string, k int) (isolate.Liveness, error) {
	var live isolate.Liveness
	c, err := readClosedFile(f, root, run, StartBarrier)
	if err != nil {
		return live, err
	}
	if c != nil && len(c.Missing) > 0 {
		live.NotStarted = map[string]bool{}
		for _, h := range c.Missing {
			live.NotStarted[h] = true
		}
	}
	for j := 0; k < 0 || j < k; j++ {
		c, err := readClosedFile(f, root, run, RoundBarrier(j))
		if err != nil {
			return live, err
		}
		if c == nil {
			break // rounds close in order: none after it has
		}
		for _, h := range c.Missing {
			if _, ok := live.Stopped[h]; !ok {
				if live.Stopped == nil {
					live.Stopped = map[string]int{}
				}
				live.Stopped[h] = j
			}
		}
	}
	return live, nil
}

// Liveness is what a reader after the run (the merge, gdrcluster isolate)
// judges hosts by: the closed barriers (LivenessBefore), and for rounds
// that have none (a run whose tasks all ended, or one from before the
// barrier files) the hosts' last files: where some host finished a round
// (its done file names the run), a host with a plan of the run that has
// no done file of that round stopped in it. A folder without any done
// file (a recording of plans and results only) says nothing of it.
func Liveness(root, run string) (isolate.Liveness, error) {
	hrs, err := scan(fsys{}, root, run)
	if err != nil {
		return isolate.Liveness{}, err
	}
	if run == "" {
		run = runOf(hrs)
	}
	live, err := LivenessBefore(root, run, -1)
	if err != nil {
		return live, err
	}
	rounds := map[int]bool{} // rounds some host finished
	byHost := map[string]map[int]bool{}
	for _, hr := range hrs {
		if hr.plan == nil {
			continue
		}
		if byHost[hr.host] == nil {
			byHost[hr.host] = map[int]bool{}
		}
		if got, err := doneRun(fsys{}, filepath.Join(hr.dir, "done")); err == nil && got == run {
			byHost[hr.host][hr.round] = true
			rounds[hr.round] = true
		}
	}
	var open []int // rounds whose barrier never closed: the files say who stopped
	for _, k := range slices.Sorted(maps.Keys(rounds)) {
		if c, err := readClosedFile(fsys{}, root, run, RoundBarrier(k)); err != nil || c == nil {
			open = append(open, k)
		}
	}
	for h, done := range byHost {
		if _, ok := live.Stopped[h]; ok || live.NotStarted[h] {
			continue
		}
		for _, k := range open {
			if !done[k] {
				if live.Stopped == nil {
					live.Stopped = map[string]int{}
				}
				live.Stopped[h] = k
				break
			}
		}
	}
	return live, nil
}

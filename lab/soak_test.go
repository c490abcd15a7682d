package lab

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/internal/soak"
)

// SOAK-03: the flap rail goes down 5 s every minute, each flap over
// before the soak's end.
func TestSOAK03FlapSchedule(t *testing.T) {
	c := SoakCases(6 * time.Minute)[0]
	var at []time.Duration
	for _, p := range c.Planted {
		if p.Kind == SoakFlap {
			if p.Rail != SoakRailFlap || p.For != FlapDown {
				t.Errorf("flap %+v: want rail %d for %v", p, SoakRailFlap, FlapDown)
			}
			at = append(at, p.At)
		}
	}
	want := []time.Duration{15 * time.Second, 75 * time.Second, 135 * time.Second, 195 * time.Second, 255 * time.Second, 315 * time.Second}
	if !slices.Equal(at, want) {
		t.Errorf("flaps at %v, want %v", at, want)
	}
	// CI's two minutes: two flaps.
	n := 0
	for _, p := range SoakCases(2 * time.Minute)[0].Planted {
		if p.Kind == SoakFlap {
			n++
			if p.At+p.For > 2*time.Minute-SoakFinish {
				t.Errorf("flap at %v ends after the soak's last %v", p.At, SoakFinish)
			}
		}
	}
	if n != 2 {
		t.Errorf("2m soak: %d flaps, want 2", n)
	}
}

// SOAK-02: the loss rail gets a burst every 90 s.
func TestSOAK02LossSchedule(t *testing.T) {
	var at []time.Duration
	for _, p := range SoakCases(6 * time.Minute)[0].Planted {
		if p.Kind == SoakLoss {
			at = append(at, p.At)
		}
	}
	want := []time.Duration{40 * time.Second, 130 * time.Second, 220 * time.Second, 310 * time.Second}
	if !slices.Equal(at, want) {
		t.Errorf("loss bursts at %v, want %v", at, want)
	}
	if got := Starts(0, 0, time.Second, time.Minute); len(got) != 0 {
		t.Errorf("Starts with no period: %v, want none", got)
	}
}

// SOAK-06: the hog starts a third into the soak (minute 2 of 6), in a
// case of its own.
func TestSOAK06HogSchedule(t *testing.T) {
	cs := SoakCases(6 * time.Minute)
	if len(cs) != 5 || cs[1].Name != "hog" || cs[2].Name != "cut" || cs[3].Name != "cut-gotestsum" || cs[4].Name != "guard" {
		t.Fatalf("cases %v: want flap-loss, hog, cut, cut-gotestsum, guard", cs)
	}
	h := cs[1].Planted
	if len(h) != 1 || h[0].Kind != SoakHog || h[0].At != 2*time.Minute {
		t.Errorf("hog %+v: want one hog from 2m", h)
	}
	for _, p := range cs[0].Planted {
		if p.Kind == SoakHog {
			t.Errorf("flap-loss has a hog: no rail could stay clean")
		}
	}
}

// The agent's commands: down then up on the flap rail's MAC, netem add then
// del on the loss rail's, the hog's loops; each from soak.json's first write.
func TestSoakFaultCommands(t *testing.T) {
	nics := soakNICs(2)
	fs := SoakCases(2 * time.Minute)[0].Faults(nics)
	var lines []string
	for _, f := range fs {
		if f.After != soakReports+"/"+soak.SeriesFile {
			t.Errorf("fault %v counts from %q, want soak.json", f.Argv, f.After)
		}
		lines = append(lines, f.At.String()+" "+f.NIC+" "+strings.Join(f.Argv, " "))
	}
	want := []string{
		"15s " + nics[1].MAC + " /usr/sbin/ip link set {nic} down",
		"20s " + nics[1].MAC + " /usr/sbin/ip link set {nic} up",
		"1m15s " + nics[1].MAC + " /usr/sbin/ip link set {nic} down",
		"1m20s " + nics[1].MAC + " /usr/sbin/ip link set {nic} up",
		"40s " + nics[2].MAC + " /usr/sbin/tc qdisc add dev {nic} root netem loss 30%",
		"50s " + nics[2].MAC + " /usr/sbin/tc qdisc del dev {nic} root",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("faults:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	hog := SoakCases(6 * time.Minute)[1].Faults(nics)
	if len(hog) != HogLoops || hog[0].Kind != FaultHog || hog[0].At != 2*time.Minute {
		t.Errorf("hog faults %+v", hog)
	}
	if n := soakNICs(1); len(n) != soakRails+1 || n[3].Rail != -1 || n[1].RXE != "rxe1" || n[0].Addr != "198.18.1.1/24" {
		t.Errorf("NICs %+v", n)
	}
}

// tests builds a host's SOAK tests: every requirement passes on every
// rail unless fails names it ("SOAK-03/rxe1": its text).
func tests(fails map[string]string) []SoakTest {
	names := map[string]string{"01": "NoDip", "02": "CounterRates", "03": "NoFlap", "04": "BER", "06": "Stable"}
	var out []SoakTest
	for _, n := range []string{"01", "02", "03", "04", "06"} {
		for rl := range soakRails {
			dev := "rxe" + string(rune('0'+rl))
			st := SoakTest{Name: "TestSOAK" + n + names[n] + "/" + dev, Action: "pass"}
			if txt, ok := fails["SOAK-"+n+"/"+dev]; ok {
				st.Action, st.Text = "fail", txt
			}
			out = append(out, st)
		}
	}
	return append(out, SoakTest{Name: "TestSOAK07KernelLog", Action: "pass"})
}

const (
	flapFinding = "fail: rail 1 rxe1 port 1: the link went down 2 times in 2m0s (hw_counters/link_downed +2), at 00:00:20 into the run (22:10:20 UTC), 00:01:20 into the run (22:11:20 UTC)"
	lossFinding = "fail: hw_counters/rcvd_seq_err rose by 412 in 2m0s, 12360.0 an hour, above 0 an hour"
	stopFinding = "fail: rail 1 rxe1 port 1: its traffic stopped on an error 00:00:25 into the run (22:10:25 UTC), and the rail carried nothing for the 1m35s the soak ran after it: rail1 rxe1: the load stopped: local QP operation error; its link went down before it, 00:00:20 into the run (22:10:20 UTC) (rxe1 port 1: DOWN (was ACTIVE))"
	sagFinding  = "fail: rail 0 rxe0 port 1 sagged over the run: its last quarter averaged 0.0 Gbit/s, 0.41 of its first quarter's 0.1 Gbit/s, below 0.80"
)

func oks(rows []SoakRow) (bad []string) {
	for _, r := range rows {
		if !r.OK {
			bad = append(bad, r.Host+" "+r.Rail+": "+strings.Join(r.Problems, "; "))
		}
	}
	return bad
}

// SOAK-03, SOAK-02 and the clean rail: the report as expected passes; a
// flap the report missed, a loss named nowhere, a clean rail failing each
// fail the lab with what was expected and what the report said.
func TestSOAK03JudgeFlapLoss(t *testing.T) {
	c := SoakCases(2 * time.Minute)[0]
	rate := 0.1
	measured := &soak.Series{Samples: []soak.Sample{{Rails: []soak.RailSample{{Gbps: &rate}, {}, {}}}}}
	good := func() map[string]*SoakHost {
		return map[string]*SoakHost{
			"server": {Role: "server", Series: measured, Tests: tests(map[string]string{"SOAK-02/rxe2": lossFinding})},
			"client": {Role: "client", Series: measured, Tests: tests(map[string]string{"SOAK-03/rxe1": flapFinding, "SOAK-02/rxe1": lossFinding, "SOAK-01/rxe1": stopFinding}), Log: []string{
				"role client, 2 steps",
				"fault +31.2s (22:10:17 UTC): /usr/sbin/ip link set eth1 down: ok ",
				"fault +36.1s (22:10:22 UTC): /usr/sbin/ip link set eth1 up: ok ",
				"fault +56.8s (22:10:50 UTC): /usr/sbin/tc qdisc add dev eth2 root netem loss 30%: ok ",
				"fault +91.0s (22:11:17 UTC): /usr/sbin/ip link set eth1 down: ok ",
			}},
		}
	}
	if bad := oks(JudgeSoak(c, good())); len(bad) > 0 {
		t.Fatalf("a report as expected failed the lab: %v", bad)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]*SoakHost)
		want string
	}{
		{"flap not named", func(h map[string]*SoakHost) { h["client"].Tests = tests(nil) },
			"client rxe1: expected SOAK-03 to fail naming the link going down and when; the report said: no SOAK failure"},
		{"stop not named", func(h map[string]*SoakHost) {
			h["client"].Tests = tests(map[string]string{"SOAK-03/rxe1": flapFinding, "SOAK-02/rxe1": lossFinding})
		}, "client rxe1: expected SOAK-01 to fail naming the traffic that stopped at a flap"},
		{"loss not named", func(h map[string]*SoakHost) { h["server"].Tests = tests(nil) },
			"client rxe2: expected SOAK-02 to fail on either host naming the RoCE counter"},
		{"clean rail fails", func(h map[string]*SoakHost) {
			h["server"].Tests = tests(map[string]string{"SOAK-02/rxe2": lossFinding, "SOAK-02/rxe0": lossFinding})
		}, "server rxe0: expected every SOAK requirement to pass on the clean rail; the report said: SOAK-02: " + lossFinding},
		{"loss read as a flap", func(h map[string]*SoakHost) {
			h["server"].Tests = tests(map[string]string{"SOAK-02/rxe2": lossFinding, "SOAK-03/rxe2": flapFinding})
		}, "server rxe2: expected no link flap (SOAK-03 passes): loss is not a flap"},
		{"run failed", func(h map[string]*SoakHost) { h["client"].StepErr = "dist/run.sh did not finish" }, "client -: client: dist/run.sh did not finish"},
		{"cut", func(h map[string]*SoakHost) {
			h["client"].Series = &soak.Series{Cut: "SIGTERM", Samples: measured.Samples}
		}, "client host: the soak was cut: SIGTERM"},
		{"flap at another time", func(h map[string]*SoakHost) { h["client"].Log = h["client"].Log[:3] },
			"client rxe1: SOAK-03's flap times are not the planted ones: 22:11:20 UTC not within 8s after a planted one"},
		{"nothing planted", func(h map[string]*SoakHost) { h["client"].Log = nil },
			"client rxe1: SOAK-03's flap times are not the planted ones: the client's agent logged no such fault"},
		{"clean rail not measured", func(h map[string]*SoakHost) { h["server"].Series = nil }, "server rxe0: expected the clean rail's rate measured"},
	} {
		h := good()
		tc.edit(h)
		bad := oks(JudgeSoak(c, h))
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, tc.want) }) {
			t.Errorf("%s: problems %q, want one starting %q", tc.name, bad, tc.want)
		}
	}
}

// SOAK-06: the hog case needs a client rail's sag named, and no flap.
func TestSOAK06JudgeHog(t *testing.T) {
	c := SoakCases(6 * time.Minute)[1]
	h := map[string]*SoakHost{
		"server": {Role: "server", Tests: tests(nil)},
		"client": {Role: "client", Tests: tests(map[string]string{"SOAK-06/rxe0": sagFinding, "SOAK-06/rxe2": sagFinding})},
	}
	if bad := oks(JudgeSoak(c, h)); len(bad) > 0 {
		t.Fatalf("a sag named failed the lab: %v", bad)
	}
	h["client"].Tests = tests(nil)
	bad := oks(JudgeSoak(c, h))
	if len(bad) != 1 || !strings.Contains(bad[0], "expected SOAK-06 to fail on a client rail naming the sag") {
		t.Errorf("no sag named: problems %q", bad)
	}
}

func TestSoakMeanRate(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	s := &soak.Series{Samples: []soak.Sample{{Rails: []soak.RailSample{{Gbps: v(0.1)}}}, {Rails: []soak.RailSample{{}}}, {Rails: []soak.RailSample{{Gbps: v(0.3)}}}}}
	m, n := meanRate(s, 0)
	if m == nil || n != 2 || *m < 0.199 || *m > 0.201 {
		t.Errorf("mean %v over %d samples, want 0.2 over 2", m, n)
	}
	if m, n := meanRate(nil, 0); m != nil || n != 0 {
		t.Errorf("no series: %v %d", m, n)
	}
}

func TestSoakUntar(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct{ name, body string }{{"./soak.json", "{}"}, {"../evil", "x"}, {"./sub/test.json", "y"}} {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	dir := t.TempDir()
	if err := untar(dir, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sub", "test.json")); string(got) != "y" {
		t.Errorf("sub/test.json = %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
		t.Errorf("a ../ name was written outside the folder")
	}
	if err := untar(dir, nil); err == nil {
		t.Errorf("an empty stream: no error")
	}
}

// The cut case: SIGTERM to the whole group on both hosts; soak.json must
// say SIGTERM and run.sh must still write the report; the rest is reported.
func TestSoakJudgeCut(t *testing.T) {
	c := SoakCases(2 * time.Minute)[2]
	if f := c.Faults(soakNICs(1)); len(f) != 1 || f[0].Kind != FaultSignal || f[0].Target != "" || f[0].At != CutAt {
		t.Errorf("cut faults %+v: want one SIGTERM to the group at %v", f, CutAt)
	}
	if j := (&runner{o: Options{Soak: SoakOptions{Duration: 2 * time.Minute, Interval: 5 * time.Second}}}).soakJobs(c); len(j[0].Steps[0].Faults) != 1 || len(j[1].Steps[0].Faults) != 1 {
		t.Errorf("cut: both hosts get the SIGTERM: %+v", j)
	}
	cut := &soak.Series{Cut: "SIGTERM (the job was stopped: ...)"}
	files := []string{"soak.json", "summary.txt", "test.json.partial"}
	h := map[string]*SoakHost{"server": {Role: "server", Series: cut, RC: 3, Files: files}, "client": {Role: "client", Series: cut, RC: 3, Files: files}}
	if bad := oks(JudgeSoak(c, h)); len(bad) > 0 {
		t.Errorf("a cut soak failed the lab: %v", bad)
	}
	h["client"].RC = 1
	if bad := oks(JudgeSoak(c, h)); len(bad) != 1 || !strings.Contains(bad[0], "expected dist/run.sh to exit 3 (INCOMPLETE, stopped by SIGTERM: the report knew the run was stopped); it exited 1") {
		t.Errorf("a stopped run read as failed: %v", bad)
	}
	h["client"].RC = 3
	h["server"].Files = []string{"soak.json", "test.json.partial"}
	if bad := oks(JudgeSoak(c, h)); len(bad) != 1 || !strings.Contains(bad[0], "expected dist/run.sh to write the report (summary.txt) after the SIGTERM; the folder has: soak.json test.json.partial") {
		t.Errorf("no report after the SIGTERM: %v", bad)
	}
	h["server"].Files = files
	h["client"].Series = &soak.Series{}
	if bad := oks(JudgeSoak(c, h)); len(bad) != 1 || !strings.Contains(bad[0], `expected soak.json to say the soak was cut by SIGTERM; it says cut ""`) {
		t.Errorf("a soak not cut: %v", bad)
	}
}

// The probe: SIGTERM to gotestsum alone, whatever it did is reported.
func TestSoakJudgeCutProbe(t *testing.T) {
	c := SoakCases(2 * time.Minute)[3]
	if f := c.Faults(soakNICs(1)); len(f) != 1 || f[0].Target != "gotestsum" {
		t.Errorf("probe faults %+v", f)
	}
	h := map[string]*SoakHost{"server": {Role: "server", Series: &soak.Series{}}, "client": {Role: "client"}}
	rows := JudgeSoak(c, h)
	if bad := oks(rows); len(bad) > 0 {
		t.Errorf("the probe failed the lab: %v", bad)
	}
	if len(rows) != 2 || rows[1].Notes[0] != "no soak.json" {
		t.Errorf("rows %+v", rows)
	}
}

func TestSelectSoakCases(t *testing.T) {
	all := SoakCases(2 * time.Minute)
	cs, err := selectSoakCases(all, nil)
	if err != nil || len(cs) != 4 || cs[0].Name != "flap-loss" || cs[1].Name != "hog" || cs[2].Name != "cut" || cs[3].Name != "guard" {
		t.Errorf("default cases %v, %v: want flap-loss, hog, cut, guard", cs, err)
	}
	if cs, err := selectSoakCases(all, []string{"cut", " cut-gotestsum"}); err != nil || len(cs) != 2 {
		t.Errorf("cut cases: %v, %v", cs, err)
	}
	if _, err := selectSoakCases(all, []string{"flap"}); err == nil || !strings.Contains(err.Error(), `no case "flap"; the cases are flap-loss, hog, cut, cut-gotestsum, guard`) {
		t.Errorf("unknown case: %v", err)
	}
}

package counters

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

func root(t *testing.T, dir string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r
}

// write makes files under dir: path -> content.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

func TestParseValue(t *testing.T) {
	for in, want := range map[string]uint64{"0\n": 0, "12345\n": 12345, " 7 ": 7, "18446744073709551615": 1<<64 - 1} {
		v, err := ParseValue(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v, in)
	}
	_, err := ParseValue("N/A (no PMA)\n")
	assert.ErrorIs(t, err, ErrNotAvailable)
	for _, bad := range []string{"", "-1", "0x10", "12 34", "1e3", "18446744073709551616"} {
		_, err := ParseValue(bad)
		assert.Error(t, err, bad)
		assert.Contains(t, err.Error(), "not a counter value", bad)
	}
}

// aerCorr is aer_dev_correctable as the kernel prints it (names from
// drivers/pci/pcie/aer.c), with an unnamed bit that counted.
const aerCorr = "RxErr 2\nBadTLP 0\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\ndev_cor_errs_bit[16] 4\nTOTAL_ERR_COR 7\n"

const aerUncorr = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nPoisonTLPBlocked 0\nTOTAL_ERR_NONFATAL 0\n"

func TestParseAER(t *testing.T) {
	m, err := ParseAER(aerCorr)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), m["RxErr"])
	assert.Equal(t, uint64(4), m["dev_cor_errs_bit[16]"])
	assert.Equal(t, uint64(7), m["TOTAL_ERR_COR"])
	assert.Len(t, m, 10)
	for _, bad := range []struct{ in, msg string }{
		{"RxErr\n", "want \"NAME value\""},
		{"RxErr 1 2\n", "want \"NAME value\""},
		{"RxErr x\n", "not a decimal count"},
		{"RxErr 1\nRxErr 2\n", "appears twice"},
		{"\n\n", "no counters"},
	} {
		_, err := ParseAER(bad.in)
		require.Error(t, err, bad.in)
		assert.Contains(t, err.Error(), bad.msg)
	}
}

func FuzzParseAER(f *testing.F) {
	f.Add(aerCorr)
	f.Add(aerUncorr)
	f.Add("x 1\n\ny 2")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseAER(s)
		if err == nil && len(m) == 0 {
			t.Fatalf("no error and no counters for %q", s)
		}
		_, _ = ParseValue(s)
	})
}

// The rxe trees are recorded from the lab (fixtures/counters/README.md).
func TestReadPortRXERecorded(t *testing.T) {
	r := root(t, "../../fixtures/counters/rxe-6.1-server")
	s, err := ReadPort(r, "rxe0", 1)
	require.NoError(t, err)
	assert.Empty(t, s.Problems)
	require.Len(t, s.Values, 15, "rxe 6.1 has 15 hw_counters (lifespan is a setting)")
	for _, k := range s.Keys() {
		assert.Equal(t, HW, k.Source)
		c := Classify(k)
		assert.NotEqual(t, Unknown, c.Kind, "%s is an rxe counter the table must know", k)
	}
	assert.Equal(t, uint64(191), s.Values[Key{Device: "rxe0", Port: 1, Source: HW, Name: "completer_retry_err"}])
	_, hasLifespan := s.Values[Key{Device: "rxe0", Port: 1, Source: HW, Name: "lifespan"}]
	assert.False(t, hasLifespan)
	require.Len(t, s.Absent, 1)
	assert.Contains(t, s.Absent[0], "rxe0 port 1: no counters/")
	assert.Contains(t, s.Absent[0], "software devices")
}

// mlx5Tree is a ConnectX port as the kernel lays it out (names from
// drivers/infiniband/core/sysfs.c and drivers/infiniband/hw/mlx5/counters.c).
func mlx5Tree(t *testing.T, vals map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	base := "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband/mlx5_0"
	files := map[string]string{base + "/ports/1/state": "4: ACTIVE\n"}
	for n, v := range map[string]string{
		"counters/symbol_error": "0\n", "counters/link_downed": "0\n", "counters/port_rcv_errors": "0\n",
		"counters/port_xmit_discards": "0\n", "counters/port_xmit_data": "1000\n", "counters/port_rcv_data": "1000\n",
		"counters/excessive_buffer_overrun_errors": "0\n", "counters/local_link_integrity_errors": "0\n",
		"hw_counters/out_of_sequence": "0\n", "hw_counters/packet_seq_err": "0\n", "hw_counters/local_ack_timeout_err": "0\n",
		"hw_counters/duplicate_request": "0\n", "hw_counters/rnr_nak_retry_err": "0\n", "hw_counters/np_cnp_sent": "0\n",
		"hw_counters/lifespan": "10\n",
	} {
		files[base+"/ports/1/"+n] = v
	}
	for n, v := range vals {
		files[base+"/ports/1/"+n] = v
	}
	write(t, dir, files)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/class/infiniband"), 0o755))
	require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband/mlx5_0", filepath.Join(dir, "sys/class/infiniband/mlx5_0")))
	return dir
}

func TestReadPortMLX5(t *testing.T) {
	r := root(t, mlx5Tree(t, map[string]string{
		"counters/VL15_dropped":           "N/A (no PMA)\n", // older kernels
		"counters/port_rcv_packets":       "lots\n",
		"hw_counters/vport_out_of_buffer": "3\n",
	}))
	s, err := ReadPort(r, "mlx5_0", 1)
	require.NoError(t, err)
	require.Len(t, s.Problems, 1)
	assert.Contains(t, s.Problems[0], "ports/1/counters/port_rcv_packets")
	assert.Contains(t, s.Problems[0], `"lots" is not a counter value`)
	require.Len(t, s.Absent, 1)
	assert.Contains(t, s.Absent[0], "VL15_dropped")
	k := Key{Device: "mlx5_0", Port: 1, Source: Port, Name: "symbol_error"}
	assert.Contains(t, s.Values, k)
	assert.Equal(t, 16, Classify(k).Width)
	vk := Key{Device: "mlx5_0", Port: 1, Source: HW, Name: "vport_out_of_buffer"}
	assert.Equal(t, uint64(3), s.Values[vk])
	assert.Equal(t, Error, Classify(vk).Kind, "switchdev's vport_ prefix is the same counter")
	assert.Equal(t, "mlx5_0 port 1 counters/symbol_error", k.String())
}

func TestReadPortBadInput(t *testing.T) {
	r := root(t, mlx5Tree(t, nil))
	for _, tc := range []struct {
		dev  string
		port int
		msg  string
	}{
		{"mlx5_0", 2, "mlx5_0 port 2"},
		{"mlx5_9", 1, "mlx5_9 port 1"},
		{"../x", 1, "not valid"},
		{"", 1, "not valid"},
		{"mlx5_0", 0, "not a port number"},
		{"mlx5_0", 256, "not a port number"},
	} {
		_, err := ReadPort(r, tc.dev, tc.port)
		require.Error(t, err, "%s %d", tc.dev, tc.port)
		assert.Contains(t, err.Error(), tc.msg)
	}
}

func aerTree(t *testing.T, corr, nonfatal string, rootPort bool) string {
	t.Helper()
	dir := t.TempDir()
	fn := "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
	files := map[string]string{fn + "/vendor": "0x15b3\n", "sys/devices/pci0000:00/0000:00:02.0/vendor": "0x8086\n"}
	if corr != "" {
		files[fn+"/aer_dev_correctable"] = corr
	}
	if nonfatal != "" {
		files[fn+"/aer_dev_nonfatal"] = nonfatal
		files[fn+"/aer_dev_fatal"] = strings.ReplaceAll(aerUncorr, "NONFATAL", "FATAL")
	}
	if rootPort {
		rp := "sys/devices/pci0000:00/0000:00:01.0"
		files[rp+"/aer_rootport_total_err_cor"] = "5\n"
		files[rp+"/aer_rootport_total_err_nonfatal"] = "0\n"
		files[rp+"/aer_rootport_total_err_fatal"] = "0\n"
		files[rp+"/vendor"] = "0x8086\n"
	}
	write(t, dir, files)
	for bdf, target := range map[string]string{
		"0000:01:00.0": "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
		"0000:00:01.0": "../../../devices/pci0000:00/0000:00:01.0",
		"0000:00:02.0": "../../../devices/pci0000:00/0000:00:02.0",
	} {
		l := filepath.Join(dir, "sys/bus/pci/devices", bdf)
		require.NoError(t, os.MkdirAll(filepath.Dir(l), 0o755))
		require.NoError(t, os.Symlink(target, l))
	}
	return dir
}

func TestReadAER(t *testing.T) {
	r := root(t, aerTree(t, aerCorr, aerUncorr, true))
	s, err := ReadAER(r, "0000:01:00.0")
	require.NoError(t, err)
	assert.Empty(t, s.Problems)
	assert.Empty(t, s.Absent)
	assert.Equal(t, uint64(2), s.Values[Key{Device: "0000:01:00.0", Source: AER, Group: AERCorrectable, Name: "RxErr"}])
	assert.Contains(t, s.Values, Key{Device: "0000:01:00.0", Source: AER, Group: AERFatal, Name: "TOTAL_ERR_FATAL"})
	assert.Len(t, s.Values, 10+19+19)

	rp, err := ReadAER(r, "0000:00:01.0")
	require.NoError(t, err)
	k := Key{Device: "0000:00:01.0", Source: AER, Group: AERRootPort, Name: "total_err_cor"}
	assert.Equal(t, uint64(5), rp.Values[k])
	assert.Equal(t, "0000:00:01.0 aer_rootport_total_err_cor", k.String())

	none, err := ReadAER(r, "0000:00:02.0")
	require.NoError(t, err)
	require.Len(t, none.Absent, 1)
	assert.Contains(t, none.Absent[0], "no aer_dev_* files")

	_, err = ReadAER(r, "0000:09:00.0")
	assert.ErrorContains(t, err, "PCI function 0000:09:00.0")
	_, err = ReadAER(r, "../../etc")
	assert.ErrorContains(t, err, "not valid")

	bad := root(t, aerTree(t, "RxErr two\n", "", false))
	bs, err := ReadAER(bad, "0000:01:00.0")
	require.NoError(t, err)
	require.Len(t, bs.Problems, 1)
	assert.Contains(t, bs.Problems[0], "aer_dev_correctable")
	assert.Contains(t, bs.Problems[0], `"two" is not a decimal count`)
}

func TestTakeCollectsProblems(t *testing.T) {
	dir := mlx5Tree(t, nil)
	r := root(t, dir)
	s := Take(r, []PortRef{{"mlx5_0", 1}, {"mlx5_7", 1}}, []string{"0000:01:00.0", "0000:01:00.0"})
	assert.NotEmpty(t, s.Values)
	require.Len(t, s.Problems, 2, "the missing NIC and the missing PCI function: %v", s.Problems)
	assert.Contains(t, s.Problems[0], "mlx5_7")
	assert.Contains(t, s.Problems[1], "0000:01:00.0")
}

func snap(vals map[Key]uint64) *Snapshot {
	s := newSnapshot()
	for k, v := range vals {
		s.Values[k] = v
	}
	return s
}

func k(dev string, src Source, group, name string) Key {
	port := 1
	if src == AER {
		port = 0
	}
	return Key{Device: dev, Port: port, Source: src, Group: group, Name: name}
}

func findingFor(t *testing.T, fs []Judged, key Key) Judged {
	t.Helper()
	for _, f := range fs {
		if f.Key == key {
			return f
		}
	}
	t.Fatalf("no finding for %s in %v", key, fs)
	return Judged{}
}

func TestJudge(t *testing.T) {
	sym := k("mlx5_0", Port, "", "symbol_error")
	data := k("mlx5_0", Port, "", "port_xmit_data")
	cnp := k("mlx5_0", HW, "", "np_cnp_sent")
	oos := k("mlx5_0", HW, "", "out_of_sequence")
	unknown := k("mlx5_0", HW, "", "brand_new_counter")
	quiet := k("mlx5_0", HW, "", "packet_seq_err")
	rx := k("0000:3b:00.0", AER, AERCorrectable, "RxErr")
	totCor := k("0000:3b:00.0", AER, AERCorrectable, "TOTAL_ERR_COR")
	bit := k("0000:3c:00.0", AER, AERCorrectable, "dev_cor_errs_bit[16]")
	totCor2 := k("0000:3c:00.0", AER, AERCorrectable, "TOTAL_ERR_COR")
	cto := k("0000:3c:00.0", AER, AERNonFatal, "CmpltTO")
	sat := k("mlx5_1", Port, "", "link_downed")
	reset := k("mlx5_1", Port, "", "port_rcv_errors")
	gone := k("mlx5_2", HW, "", "out_of_sequence")
	appeared := k("mlx5_3", HW, "", "local_ack_timeout_err")

	before := snap(map[Key]uint64{sym: 10, data: 100, cnp: 0, oos: 0, unknown: 1, quiet: 4, rx: 0, totCor: 0,
		bit: 0, totCor2: 0, cto: 0, sat: 255, reset: 50, gone: 0})
	after := snap(map[Key]uint64{sym: 13, data: 1e6, cnp: 9, oos: 2, unknown: 5, quiet: 4, rx: 2, totCor: 2,
		bit: 0, totCor2: 1, cto: 1, sat: 255, reset: 3, appeared: 6})
	after.Taken = before.Taken.Add(30 * time.Second)
	after.Problems = []string{"read x: permission denied"}
	d := Diff(before, after)
	assert.Equal(t, 30*time.Second, d.Elapsed())
	assert.Equal(t, []string{"after: read x: permission denied"}, d.Problems)
	fs := Judge(d)

	f := findingFor(t, fs, sym)
	assert.Equal(t, Fail, f.Level)
	assert.Equal(t, uint64(3), f.Delta)
	for _, want := range []string{"mlx5_0 port 1 counters/symbol_error", "rose by 3", "cable", "cable or optics"} {
		assert.Contains(t, f.Cause, want)
	}
	assert.Equal(t, Report, findingFor(t, fs, data).Level)
	assert.Equal(t, Report, findingFor(t, fs, cnp).Level, "congestion notifications are informational")
	f = findingFor(t, fs, oos)
	assert.Equal(t, Fail, f.Level)
	assert.Contains(t, f.Cause, "retransmission")
	f = findingFor(t, fs, unknown)
	assert.Equal(t, Report, f.Level)
	assert.Contains(t, f.Cause, "not in this suite's table")
	for _, x := range fs {
		assert.NotEqual(t, quiet, x.Key, "a counter that did not move is not a finding")
	}
	f = findingFor(t, fs, rx)
	assert.Equal(t, Warn, f.Level)
	assert.Contains(t, f.Cause, "PCIe signal integrity")
	assert.Equal(t, Report, findingFor(t, fs, totCor).Level, "RxErr explains the total")
	assert.Equal(t, Warn, findingFor(t, fs, totCor2).Level, "a total no named counter explains is judged")
	f = findingFor(t, fs, cto)
	assert.Equal(t, Fail, f.Level)
	assert.Contains(t, f.Cause, "completion timeout")
	f = findingFor(t, fs, sat)
	assert.Equal(t, Warn, f.Level)
	assert.Contains(t, f.Cause, "saturated")
	f = findingFor(t, fs, reset)
	assert.Equal(t, Warn, f.Level)
	assert.True(t, f.Reset)
	assert.Contains(t, f.Cause, "went back")
	assert.Equal(t, Warn, findingFor(t, fs, gone).Level)
	f = findingFor(t, fs, appeared)
	assert.Equal(t, Fail, f.Level)
	assert.Contains(t, f.Cause, "appeared during the run at 6")

	failed := Failed(fs)
	assert.Len(t, failed, 4) // symbol_error, out_of_sequence, CmpltTO, the counter that appeared
	sum := Summary(fs, Warn)
	assert.Contains(t, sum, "FAIL: mlx5_0 port 1 counters/symbol_error rose by 3")
	assert.NotContains(t, sum, "port_xmit_data")
}

// The lab's planted-loss case: rxe's sequence-error counter rises on the
// recorded tree and the finding names it.
func TestJudgeRXELoss(t *testing.T) {
	src := "../../fixtures/counters/rxe-6.1-client"
	before, err := ReadPort(root(t, src), "rxe0", 1)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	write(t, dir, map[string]string{"sys/devices/virtual/infiniband/rxe0/ports/1/hw_counters/rcvd_seq_err": "5\n",
		"sys/devices/virtual/infiniband/rxe0/ports/1/hw_counters/sent_pkts": "300000\n"})
	after, err := ReadPort(root(t, dir), "rxe0", 1)
	require.NoError(t, err)
	fs := Judge(Diff(before, after))
	failed := Failed(fs)
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Cause, "rxe0 port 1 hw_counters/rcvd_seq_err rose by 5")
	assert.Contains(t, failed[0].Cause, "packet loss")
	assert.Len(t, fs, 2) // and sent_pkts, reported
}

func TestTableIsComplete(t *testing.T) {
	es := Table()
	assert.Greater(t, len(es), 90)
	for _, e := range es {
		assert.NotEqual(t, Unknown, e.Class.Kind, e.Name)
		assert.NotEmpty(t, e.Class.Meaning, e.Name)
		assert.NotEmpty(t, e.Class.Source, e.Name)
		assert.NotEmpty(t, e.Class.Cause, e.Name)
		assert.Contains(t, []int{0, 4, 8, 16, 32}, e.Class.Width, e.Name)
	}
	// The named counters are all judged as errors.
	for _, n := range []string{"symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
		"port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors", "excessive_buffer_overrun_errors"} {
		assert.Equal(t, Error, Classify(Key{Source: Port, Name: n}).Kind, n)
	}
	for _, n := range []string{"out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err", "implied_nak_seq_err", "duplicate_request"} {
		assert.Equal(t, Error, Classify(Key{Source: HW, Name: n}).Kind, n)
	}
	assert.Equal(t, Unknown, Classify(Key{Source: AER, Group: AERCorrectable, Name: "dev_cor_errs_bit[16]"}).Kind)
	assert.Contains(t, Classify(Key{Source: AER, Group: AERFatal, Name: "DLP"}).Meaning, "fatal")
}

// On software devices the timer-driven retransmission counters warn (they
// rise under emulation without loss); the loss counters still fail, and
// the same names on hardware fail.
func TestJudgeSoftware(t *testing.T) {
	retry := k("rxe0", HW, "", "completer_retry_err")
	dup := k("rxe0", HW, "", "duplicate_request")
	oos := k("rxe0", HW, "", "out_of_seq_request")
	seq := k("rxe0", HW, "", "rcvd_seq_err")
	hw := k("mlx5_0", HW, "", "duplicate_request")
	before := snap(map[Key]uint64{retry: 1, dup: 2, oos: 0, seq: 0, hw: 0})
	after := snap(map[Key]uint64{retry: 60, dup: 900, oos: 3, seq: 2, hw: 5})
	fs := JudgeWith(Diff(before, after), Options{Software: map[string]bool{"rxe0": true}})
	f := findingFor(t, fs, retry)
	assert.Equal(t, Warn, f.Level)
	assert.Contains(t, f.Cause, "rxe0 port 1 hw_counters/completer_retry_err rose by 59")
	assert.Contains(t, f.Cause, "without loss")
	assert.Equal(t, Warn, findingFor(t, fs, dup).Level)
	f = findingFor(t, fs, oos)
	assert.Equal(t, Fail, f.Level)
	assert.Contains(t, f.Cause, "rxe0 port 1 hw_counters/out_of_seq_request rose by 3")
	assert.Contains(t, f.Cause, "retransmission")
	assert.Equal(t, Fail, findingFor(t, fs, seq).Level)
	assert.Equal(t, Fail, findingFor(t, fs, hw).Level, "a hardware NIC's duplicate_request still fails")
	assert.Equal(t, Fail, findingFor(t, Judge(Diff(before, after)), retry).Level, "without the option rxe's counters fail")
}

// Every cause an error counter can have has a remedy of its own, and the
// causes of the physical link and of PCIe name their part.
func TestRemedies(t *testing.T) {
	for _, e := range Table() {
		if e.Class.Kind != Error {
			continue
		}
		r := Remedy(e.Class.Cause)
		assert.False(t, strings.HasPrefix(r, "read the counter's meaning"), "%s %s: cause %q has no remedy", e.Source, e.Name, e.Class.Cause)
	}
	assert.Equal(t, PartLink, PartOf(CauseLink))
	assert.Equal(t, PartPCIe, PartOf(CausePCIe))
	assert.Equal(t, PartPath, PartOf(CauseRetrans))
	assert.Empty(t, PartOf(CauseInternal), "a device's own error names no part here")
}

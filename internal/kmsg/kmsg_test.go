package kmsg

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Records as the lab's 6.1 kernel returned them from /dev/kmsg (one per
// read; seen in the Soft-RoCE lab, fixtures/counters/README.md).
const (
	recActive = "6,357,4051755,-;infiniband rxe0: set active\n SUBSYSTEM=infiniband\n DEVICE=+infiniband:rxe0\n"
	recSpeed  = "4,359,4051909,-;eth0 speed is unknown, defaulting to 1000\n"
	recACPI   = "6,353,3690922,-;ACPI: \\x5c_SB_.LNKB: Enabled at IRQ 10\n"
)

func TestParseRecord(t *testing.T) {
	r, err := ParseRecord(recActive)
	require.NoError(t, err)
	assert.Equal(t, 6, r.Level)
	assert.Equal(t, 0, r.Facility)
	assert.Equal(t, uint64(357), r.Seq)
	assert.Equal(t, 4051755*time.Microsecond, r.Time)
	assert.Equal(t, "infiniband rxe0: set active", r.Text)
	assert.Equal(t, map[string]string{"SUBSYSTEM": "infiniband", "DEVICE": "+infiniband:rxe0"}, r.Dict)
	assert.Equal(t, "[    4.051755] infiniband rxe0: set active", r.String())

	r, err = ParseRecord(recACPI)
	require.NoError(t, err)
	assert.Equal(t, `ACPI: \_SB_.LNKB: Enabled at IRQ 10`, r.Text)

	r, err = ParseRecord("12,5,10,c,extra;user message\n") // facility 1 (user), level 4
	require.NoError(t, err)
	assert.Equal(t, 4, r.Level)
	assert.Equal(t, 1, r.Facility)

	for _, bad := range []string{"", "no header", "6,1;short", "x,1,2,-;text", "6,1,2,-;text\nnot a dict line\n"} {
		_, err := ParseRecord(bad)
		assert.Error(t, err, bad)
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{recActive, recSpeed, recACPI, "6,1,2,-;a\\x\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRecord(s)
		if err == nil && (r.Level < 0 || r.Level > 7) {
			t.Fatalf("level %d from %q", r.Level, s)
		}
	})
}

func tree(t *testing.T, kmsg string) (*hostfs.Root, string) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "dev", "kmsg")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(kmsg), 0o644))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r, p
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestWatchReadsOnlyNewRecords(t *testing.T) {
	r, p := tree(t, recACPI+recActive)
	w, err := Watch(r)
	require.NoError(t, err)
	defer w.Close()
	res := w.Read(time.Now().Add(time.Second))
	assert.Empty(t, res.Records, "records from before Watch are not returned")

	// A recorded file may end mid-record: the rest comes with the next read.
	appendFile(t, p, recSpeed+"3,360,5000000,-;mlx5_core 0000:3b:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count\n4,361,")
	res = w.Read(time.Now().Add(time.Second))
	require.Len(t, res.Records, 2)
	assert.Empty(t, res.Problems())
	appendFile(t, p, "5000001,-;eth0: link up\n")
	res = w.Read(time.Now().Add(time.Second))
	require.Len(t, res.Records, 1)
	assert.Equal(t, uint64(361), res.Records[0].Seq)

	// A gap in sequence numbers means records were overwritten unread.
	appendFile(t, p, "6,370,6000000,-;later\n")
	res = w.Read(time.Now().Add(time.Second))
	assert.Equal(t, uint64(8), res.Lost)
	require.Len(t, res.Problems(), 1)
	assert.Contains(t, res.Problems()[0], "8 kernel log records were overwritten")

	appendFile(t, p, "garbage line\n")
	res = w.Read(time.Now().Add(time.Second))
	require.Len(t, res.Malformed, 1)
	assert.Contains(t, res.Malformed[0], "garbage line")

	require.NoError(t, w.Close())
	assert.Contains(t, w.Read(time.Now().Add(time.Second)).Incomplete, "closed")
}

func TestReadAll(t *testing.T) {
	r, _ := tree(t, recACPI+recActive+recSpeed)
	res, err := ReadAll(r, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Len(t, res.Records, 3)
	assert.Equal(t, uint64(353), res.Records[0].Seq)
	assert.Equal(t, uint64(4), res.Lost, "353 -> 357 -> 359 are gaps of the recording, counted")

	res, err = ReadAll(r, time.Now().Add(-time.Second))
	require.NoError(t, err)
	assert.Empty(t, res.Records)
	assert.Contains(t, res.Incomplete, "deadline")
}

func TestUnreadable(t *testing.T) {
	r, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	_, err = Watch(r)
	require.ErrorIs(t, err, ErrUnreadable)
	assert.Contains(t, err.Error(), "dev/kmsg does not exist")
	_, err = ReadAll(r, time.Now().Add(time.Second))
	require.ErrorIs(t, err, ErrUnreadable)

	err = unreadable(r, Path, syscall.EPERM)
	assert.ErrorIs(t, err, ErrUnreadable)
	assert.Contains(t, err.Error(), "dmesg_restrict")
	assert.Contains(t, err.Error(), "run as root")
}

func rec(level int, text string) Record { return Record{Level: level, Text: text} }

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		rec      Record
		kind     string
		sev      Severity
		dev      string
		meaning  string
		notFound bool
	}{
		{rec: rec(3, "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."), kind: "xid", sev: Error, dev: "0000:2b:00", meaning: "Xid 79: GPU has fallen off the bus"},
		{rec: rec(3, "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."), kind: "xid", dev: "0000:10:1c", meaning: "row remapping"},
		{rec: rec(4, "NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007"), kind: "xid", dev: "0000:01:00", meaning: "Xid 3: see the Xid catalog"},
		{rec: rec(3, "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus."), kind: "nvrm", dev: "0000:2b:00.0", meaning: "lost the GPU"},
		{rec: rec(6, "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae"), notFound: true},
		{rec: rec(6, "pcieport 0000:00:03.0: AER: Corrected error received: 0000:01:00.0"), kind: "aer", sev: Warn, dev: "0000:01:00.0", meaning: "root port 0000:00:03.0"},
		{rec: rec(6, "pcieport 0000:00:03.0: AER: Multiple Correctable error message received: 0000:01:00.0"), kind: "aer", sev: Warn, dev: "0000:01:00.0"},
		// Newer kernels (drivers/pci/pcie/aer.c aer_print_port_info, later aer_print_source) print "... error message received from <bdf>".
		{rec: rec(6, "pcieport 0000:00:03.0: AER: Correctable error message received from 0000:01:00.0"), kind: "aer", sev: Warn, dev: "0000:01:00.0", meaning: "root port 0000:00:03.0"},
		{rec: rec(6, "pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:00:03:0"), kind: "aer", sev: Error, dev: "0000:00:03.0", meaning: "uncorrectable"},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Requester ID)"), kind: "aer", sev: Error, dev: "0000:3b:00.0", meaning: "Transaction Layer"},
		{rec: rec(4, "pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Receiver ID)"), kind: "aer", sev: Warn, dev: "0000:00:03.0"},
		{rec: rec(3, "DMAR: [DMA Read NO_PASID] Request device [3b:00.0] fault addr 0x1000 [fault reason 0x06] PTE Read access is not set"), kind: "iommu-fault", dev: "3b:00.0", meaning: "IOMMU"},
		{rec: rec(3, "AMD-Vi: Event logged [IO_PAGE_FAULT device=3b:00.0 domain=0x0000 address=0x1000 flags=0x0000]"), kind: "iommu-fault", dev: "3b:00.0"},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count"), kind: "mlx5-health", dev: "0000:3b:00.0", meaning: "health"},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: print_health_info:424:(pid 0): synd 0x1: firmware internal error"), kind: "mlx5-health", dev: "0000:3b:00.0"},
		{rec: rec(4, "mlx5_0:dump_cqe:272:(pid 1234): dump error cqe"), kind: "mlx5-cqe", meaning: "completion with error"},
		{rec: rec(6, "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable unplugged"), kind: "mlx5-module", sev: Warn, dev: "0000:3b:00.0"},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, High Temperature"), kind: "mlx5-module", sev: Error, meaning: "High Temperature"},
		{rec: rec(4, "mlx5_core 0000:3b:00.0: mlx5_pcie_event:299:(pid 5): Detected insufficient power on the PCIe slot (27W)."), kind: "mlx5", sev: Warn},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: wait_func:1132:(pid 77): ACCESS_REG(0x805) timeout. Will cause a leak of a command resource"), kind: "mlx5", sev: Error, meaning: "timed out"},
		{rec: rec(3, "mlx5_core 0000:3b:00.0: something odd: err -22"), kind: "mlx5", sev: Warn},
		{rec: rec(6, "mlx5_core 0000:3b:00.0: firmware version: 28.39.1002"), notFound: true},
		{rec: rec(3, "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing"), kind: "peermem", sev: Warn},
		{rec: rec(1, "BUG: unable to handle page fault for address: ffff0000"), kind: "kernel", sev: Error},
		{rec: rec(3, "INFO: task kworker/0:1:12 blocked for more than 120 seconds."), kind: "kernel"},
		{rec: rec(6, "infiniband rxe0: set active"), notFound: true},
		{rec: rec(4, "eth0 speed is unknown, defaulting to 1000"), notFound: true},
	} {
		ms := Scan([]Record{tc.rec})
		if tc.notFound {
			assert.Empty(t, ms, tc.rec.Text)
			continue
		}
		require.Len(t, ms, 1, tc.rec.Text)
		m := ms[0]
		assert.Equal(t, tc.kind, m.Kind, tc.rec.Text)
		if tc.sev != 0 {
			assert.Equal(t, tc.sev, m.Severity, tc.rec.Text)
		}
		if tc.dev != "" {
			assert.Equal(t, tc.dev, m.Device, tc.rec.Text)
		}
		assert.Contains(t, m.Meaning, tc.meaning, tc.rec.Text)
		assert.Contains(t, m.String(), tc.rec.Text)
	}
}

// The running host's log, when it is readable: every record parses, and a
// watcher started now sees nothing older than itself.
func TestLiveLog(t *testing.T) {
	r, err := hostfs.New("/")
	require.NoError(t, err)
	res, err := ReadAll(r, time.Now().Add(5*time.Second))
	if err != nil {
		require.ErrorIs(t, err, ErrUnreadable)
		t.Skipf("live log not readable here: %v", err)
	}
	assert.Empty(t, res.Malformed)
	assert.Empty(t, res.Incomplete)
	t.Logf("live log: %d records, %d lost, %d matches", len(res.Records), res.Lost, len(Scan(res.Records)))
	w, err := Watch(r)
	require.NoError(t, err)
	defer w.Close()
	for _, rec := range w.Read(time.Now().Add(time.Second)).Records {
		if len(res.Records) == 0 {
			break
		}
		assert.Greater(t, rec.Seq, res.Records[len(res.Records)-1].Seq, "a watcher returns only new records")
	}
}

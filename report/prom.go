package report

import (
	"io"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// PromFile is the report in Prometheus's text format, for node_exporter's
// textfile collector (one host's report on that host) or a monitoring
// system that scrapes the merge's folder: the verdict, the requirements by
// status, each rail's RDMA bandwidth, and when the run started.
const PromFile = "gdrconf.prom"

// WritePrometheus writes the report's metrics, one series per host and
// node (a Kubernetes pod's node, else the host), with expfmt.
func (r *Report) WritePrometheus(w io.Writer) error {
	gauge := func(name, help string) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
	}
	qualified := gauge("gdrconf_qualified", "1 when the host is QUALIFIED, 0 when it is not (NOT QUALIFIED or INCOMPLETE).")
	verdict := gauge("gdrconf_verdict", "The host's verdict as a label; the value is 1.")
	reqs := gauge("gdrconf_requirements", "Requirements of the host by status (passed, failed, skipped, not_run).")
	bw := gauge("gdrconf_rail_bandwidth_gbits", "RDMA WRITE bandwidth of a rail at the largest message size, Gbit/s (PP-08, the best of the host's measurements).")
	started := gauge("gdrconf_run_start_timestamp_seconds", "When the host's run started, Unix time.")
	label := func(kv ...string) []*dto.LabelPair {
		var ls []*dto.LabelPair
		for i := 0; i+1 < len(kv); i += 2 {
			ls = append(ls, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
		}
		return ls
	}
	add := func(f *dto.MetricFamily, v float64, ls []*dto.LabelPair) {
		f.Metric = append(f.Metric, &dto.Metric{Label: ls, Gauge: &dto.Gauge{Value: proto.Float64(v)}})
	}
	for _, h := range r.Hosts {
		if h.Earlier {
			continue
		}
		node := h.Identity.Node
		if node == "" {
			node = h.Identity.Host
		}
		hl := []string{"host", h.Identity.Host, "node", node}
		q := 0.0
		if h.Verdict.Verdict == Qualified {
			q = 1
		}
		add(qualified, q, label(hl...))
		add(verdict, 1, label(append(hl, "verdict", h.Verdict.Verdict)...))
		c := h.Counts()
		for _, s := range []struct {
			status string
			n      int
		}{{"passed", c.Pass}, {"failed", c.Fail}, {"skipped", c.Skip}, {"not_run", c.NotRun}} {
			add(reqs, float64(s.n), label(append(hl, "status", s.status)...))
		}
		for _, rb := range railBandwidth(h) {
			add(bw, rb.gbits, label(append(hl, "rail", strconv.Itoa(rb.rail), "nic", rb.nic)...))
		}
		if t, ok := h.start(); ok {
			add(started, float64(t.Unix()), label(hl...))
		}
	}
	for _, f := range []*dto.MetricFamily{qualified, verdict, reqs, bw, started} {
		if len(f.Metric) == 0 {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
			return err
		}
	}
	return nil
}

type railBW struct {
	rail  int
	nic   string
	size  int
	gbits float64
}

// railBandwidth is each rail's RDMA WRITE bandwidth at the largest size
// the host measured it (PP-08's cases: gdr.rail, gdr.op, gdr.size_bytes,
// gdr.bw_gbit_s), the best of its rounds.
func railBandwidth(h *HostResult) []railBW {
	best := map[int]railBW{}
	for _, c := range h.AllCases() {
		a := c.Attrs
		if a["gdr.req"] != "PP-08" || a["gdr.op"] != "WRITE" {
			continue
		}
		rail, err1 := strconv.Atoi(a["gdr.rail"])
		v, err2 := strconv.ParseFloat(a["gdr.bw_gbit_s"], 64)
		size, _ := strconv.Atoi(a["gdr.size_bytes"])
		if err1 != nil || err2 != nil {
			continue
		}
		b, ok := best[rail]
		if !ok || size > b.size || size == b.size && v > b.gbits {
			best[rail] = railBW{rail: rail, nic: a["gdr.nic"], size: size, gbits: v}
		}
	}
	out := make([]railBW, 0, len(best))
	for _, b := range best {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rail < out[j].rail })
	return out
}

// start is when the host's run started: its first event's time, else
// host.json's.
func (h *HostResult) start() (time.Time, bool) {
	for _, p := range h.pkgs {
		if !p.Timestamp.IsZero() {
			t := p.Timestamp
			for _, q := range h.pkgs {
				if !q.Timestamp.IsZero() && q.Timestamp.Before(t) {
					t = q.Timestamp
				}
			}
			return t, true
		}
	}
	if t, err := time.Parse(time.RFC3339, h.Identity.Time); err == nil {
		return t, true
	}
	return time.Time{}, false
}

package lab

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBenchPlanInterleaves(t *testing.T) {
	r := &runner{o: Options{Mode: ModeBench, Iters: 1000, Timeout: 45 * time.Second, StepTimeout: 5 * time.Minute, Out: io.Discard}, start: time.Now()}
	pp := testPkg{Import: Module + PingpongPkg, Short: PingpongPkg, Bin: "/x/pingpong.test", Guest: "/lab/bin/pingpong.test"}
	jobs, err := r.plan([]testPkg{pp})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	server, client := jobs[0], jobs[1]
	require.Len(t, server.Steps, (BenchPairs+1)*3*2)
	require.Len(t, client.Steps, len(server.Steps))
	var ids []string
	for i, st := range server.Steps {
		assert.Equal(t, st.ID, client.Steps[i].ID, "both VMs run the same step at the same time")
		assert.True(t, st.Barrier)
		ids = append(ids, st.ID)
	}
	// Metric by metric: a warm-up of each tool, then adjacent pairs, the
	// order alternating, as many pairs starting with ours as with perftest.
	assert.Equal(t, []string{"warm:ours:write_bw_65536", "warm:perftest:write_bw_65536",
		"b0:ours:write_bw_65536", "b0:perftest:write_bw_65536", "b1:perftest:write_bw_65536", "b1:ours:write_bw_65536",
		"b2:ours:write_bw_65536", "b2:perftest:write_bw_65536"}, ids[:8])
	assert.Equal(t, "warm:ours:write_bw_1048576", ids[2*(BenchPairs+1)])
	assert.Equal(t, "b5:ours:write_lat_2", ids[len(ids)-1])
	assert.Zero(t, BenchPairs%2)

	byID := map[string]Step{}
	for _, st := range client.Steps {
		byID[st.ID] = st
	}
	bw := byID["b2:ours:write_bw_1048576"]
	assert.Equal(t, "gotest", bw.Kind)
	assert.Equal(t, PingpongPkg+"@b2:ours:write_bw_1048576", bw.Pkg)
	assert.Contains(t, bw.Argv, "-test.run=^TestPP08Bandwidth$//^WRITE$/^1048576$")
	tail := bw.Env[len(bw.Env)-4:]
	assert.Equal(t, []string{"GDR_MEM=host", "GDR_ITERS=64", "GDR_BW_ITERS=64", "GDR_BW_SIZES=1048576"}, tail,
		"64 MiB per run, host memory like perftest; later than testEnv's values, so they win")
	assert.Contains(t, bw.Env, "GDR_ROLE=client")
	lat := byID["b4:ours:write_lat_2"]
	assert.Contains(t, lat.Argv, "-test.run=^TestPP07Latency$//^WRITE$")
	assert.Equal(t, "GDR_ITERS=500", lat.Env[len(lat.Env)-1])
	pt := byID["b1:perftest:write_bw_65536"]
	assert.Equal(t, "tool", pt.Kind)
	assert.Equal(t, []string{"/usr/bin/ib_write_bw", "-d", "rxe0", "-x", "1", "-F", "-s", "65536", "-n", "1000", ServerIP}, pt.Argv)
	ptl := byID["b3:perftest:write_lat_2"]
	assert.Equal(t, "/usr/bin/ib_write_lat", ptl.Argv[0])
	assert.Contains(t, strings.Join(ptl.Argv, " "), "-s 2 -n 500 "+ServerIP)
	assert.NotContains(t, strings.Join(server.Steps[1].Argv, " "), ServerIP, "the server side listens")

	// Without our binary only perftest runs.
	jobs, err = r.plan(nil)
	require.NoError(t, err)
	assert.Len(t, jobs[0].Steps, (BenchPairs+1)*3)
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 0.0, median(nil))
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	in := []float64{3, 1, 2}
	median(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "the input is not sorted in place")
}

func perftestBWOut(size int, mibps float64) string {
	return fmt.Sprintf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n %d      1000              %.2f               %.2f   		   0.000534\n", size, mibps, mibps)
}

func perftestLatOut(typ, p99 float64) string {
	return fmt.Sprintf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n 2       400          3990.12        24010.55     %.2f           4100.00        12.5         %.2f                24010.55\n", typ, p99)
}

func TestBenchRowsPairs(t *testing.T) {
	var suites []*Suite
	perftest := map[string]string{}
	mib := float64(1<<20) * 8 / 1e9 // Gb/s per MiB/s
	// Round r: the machine gets slower each round (load), both tools alike;
	// ours is 2 % slower than perftest within each pair, except one outlier.
	for round := 0; round < BenchPairs; round++ {
		speed := 40.0 - 5*float64(round)
		ours := 0.98 * speed
		if round == 3 {
			ours = 0.5 * speed
		}
		for _, size := range []int{65536, 1048576} {
			id := benchStepID(round, "ours", fmt.Sprintf("write_bw_%d", size))
			test := fmt.Sprintf("TestPP08Bandwidth/rxe0/WRITE/%d", size)
			suites = append(suites, &Suite{Host: "client", Pkg: PingpongPkg + "@" + id, Events: []Event{
				{Action: "attr", Test: "TestPP08Bandwidth/rxe0/READ/65536", Key: "gdr.bw_gbit_s", Value: "99"},
				{Action: "attr", Test: test, Key: "gdr.bw_gbit_s", Value: fmt.Sprint(ours * mib)}}})
			perftest[benchStepID(round, "perftest", fmt.Sprintf("write_bw_%d", size))] = perftestBWOut(size, speed)
		}
		lid := benchStepID(round, "ours", "write_lat_2")
		suites = append(suites, &Suite{Host: "client", Pkg: PingpongPkg + "@" + lid, Events: []Event{
			{Action: "attr", Test: "TestPP07Latency/rxe0/WRITE/2", Key: "gdr.lat_us_p50", Value: fmt.Sprint(22000 * (1 + 0.1*float64(round)) * 1.01)},
			{Action: "attr", Test: "TestPP07Latency/rxe0/WRITE/2", Key: "gdr.lat_us_p99", Value: fmt.Sprint(30000 * (1 + 0.1*float64(round)))}}})
		if round != 4 { // one perftest latency run produced nothing
			perftest[benchStepID(round, "perftest", "write_lat_2")] = perftestLatOut(22000*(1+0.1*float64(round)), 30000*(1+0.1*float64(round)))
		}
	}
	rows, problems := BenchRows(suites, perftest, 1000)
	require.Len(t, rows, 4)
	bw := rows[0]
	assert.Equal(t, "write_bw_65536", bw.Metric)
	assert.Equal(t, BenchPairs, bw.N)
	assert.InDelta(t, 0.98, bw.Ratio, 1e-6, "the median ignores the outlier and the drift")
	assert.InDelta(t, 0.5, bw.RatioMin, 1e-6)
	assert.InDelta(t, 0.98, bw.RatioMax, 1e-6)
	assert.True(t, bw.Met)
	assert.Equal(t, "ours", bw.Pairs[0].First)
	assert.Equal(t, "perftest", bw.Pairs[1].First)
	assert.Contains(t, bw.OursFrom, "TestPP08Bandwidth/rxe0/WRITE/65536")
	assert.Equal(t, 64, rows[1].Iters)
	p50 := rows[2]
	assert.Equal(t, "write_lat_2_p50", p50.Metric)
	assert.Equal(t, BenchPairs-1, p50.N)
	assert.InDelta(t, 1.01, p50.Ratio, 1e-6)
	assert.False(t, p50.Met, "one pair short is not enough")
	assert.InDelta(t, 1.0, rows[3].Ratio, 1e-6)
	joined := strings.Join(problems, "\n")
	assert.Contains(t, joined, fmt.Sprintf("write_lat_2_p50: %d of %d pairs complete", BenchPairs-1, BenchPairs))
	assert.Contains(t, joined, "b4:perftest:write_lat_2")

	var buf bytes.Buffer
	BenchTable(&buf, rows)
	out := buf.String()
	assert.Contains(t, out, "write_bw_65536")
	assert.Contains(t, out, "0.980")
	assert.Contains(t, out, "0.500..0.980")
	assert.Contains(t, out, "(miss)")
}

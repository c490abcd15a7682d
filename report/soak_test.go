package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/soak"
)

func fp(v float64) *float64 { return &v }

// synthSoak is a soak run of our own making in the runner's layout: rails
// 8-rail hosts' mlx5_<i> at about 380 Gbit/s over d at interval, GPUs at
// 1980 MHz warming from 45 to 70 C. When faulty: rail 1 goes DOWN for one
// sample every 20 minutes (the flapping optic: DOWN sample, link_down and
// link_up events, link_downed rising), rail 2 dips to 12 Gbit/s for one
// sample at two thirds of the run, rail 3's symbol errors rise by 3 an
// hour, GPU 0 throttles (SW thermal slowdown, 1410 MHz) from the run's
// middle, and an Xid comes at three quarters.
func synthSoak(host string, rails, gpus int, d, interval time.Duration, faulty bool) *soak.Series {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	s := &soak.Series{Version: soak.Version, Host: host, Start: t0, End: t0.Add(d), Planned: d, Interval: interval}
	for i := 0; i < rails; i++ {
		s.Rails = append(s.Rails, soak.Rail{Index: i, Device: fmt.Sprintf("mlx5_%d", i), Port: 1, PCI: fmt.Sprintf("0000:%02x:00.0", 0x1c+i*0x10),
			GPU: fmt.Sprintf("0000:%02x:00.0", 0x1b+i*0x10), Floor: fp(300), FloorSource: "75% of the 400 Gb/s port rate"})
	}
	for g := 0; g < gpus; g++ {
		s.GPUs = append(s.GPUs, soak.GPU{Index: g, PCI: fmt.Sprintf("0000:%02x:00.0", 0x1b+g*0x10), Name: "NVIDIA H200"})
	}
	n := int(d / interval)
	flapEvery := int(20 * time.Minute / interval)
	for k := 0; k < n; k++ {
		at := t0.Add(time.Duration(k+1) * interval)
		x := soak.Sample{At: at}
		for i := 0; i < rails; i++ {
			rs := soak.RailSample{Gbps: fp(378 + float64((k*7+i*3)%5)), State: "ACTIVE"}
			if k == 0 {
				for _, name := range []string{"symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"} {
					rs.Counters = append(rs.Counters, soak.Count{Key: counters.Key{Device: s.Rails[i].Device, Port: 1, Source: counters.Port, Name: name}})
				}
			}
			if faulty {
				switch {
				case i == 1 && k > 0 && k%flapEvery == 0:
					rs.Gbps, rs.State = nil, "DOWN"
					rs.Counters = []soak.Count{{Key: counters.Key{Device: "mlx5_1", Port: 1, Source: counters.Port, Name: "link_downed"}, Value: uint64(k / flapEvery)}}
					r := 1
					s.Events = append(s.Events,
						soak.Event{At: at.Add(-interval / 2), Kind: soak.LinkDown, Device: "mlx5_1", Rail: &r, Text: "mlx5_1 port 1 state DOWN"},
						soak.Event{At: at.Add(interval / 2), Kind: soak.LinkUp, Device: "mlx5_1", Rail: &r, Text: "mlx5_1 port 1 state ACTIVE"})
				case i == 2 && k == 2*n/3:
					rs.Gbps = fp(12)
				case i == 3 && k > 0 && k%int(20*time.Minute/interval) == 0:
					rs.Counters = []soak.Count{{Key: counters.Key{Device: "mlx5_3", Port: 1, Source: counters.Port, Name: "symbol_error"}, Value: uint64(k / flapEvery)}}
				}
			}
			x.Rails = append(x.Rails, rs)
		}
		for g := 0; g < gpus; g++ {
			var th uint64
			clock := 1980.0
			if faulty && g == 0 && k >= n/2 {
				th, clock = 0x20, 1410 // nvmlClocksEventReasonSwThermalSlowdown
			}
			x.GPUs = append(x.GPUs, soak.GPUSample{SMClockMHz: fp(clock), TempC: fp(45 + 25*float64(k)/float64(n)), PowerW: fp(600), Throttle: &th})
		}
		s.Samples = append(s.Samples, x)
	}
	if faulty {
		s.Events = append(s.Events, soak.Event{At: t0.Add(d * 3 / 4), Kind: soak.Xid, Device: "0000:1b:00.0", Text: "NVRM: Xid (PCI:0000:1b:00): 79, GPU has fallen off the bus."})
	}
	return s
}

// soakRun is a host that ran one SOAK test (failed with cause when not
// "") and the soak series s, left on disk in dir when dir is not "".
func soakRun(t testing.TB, host string, s *soak.Series, cause string) Run {
	pkg := "github.com/gdrconf/gdrconf/conformance/soak"
	c := tc{name: "TestSOAK03NoLinkFlap", result: "pass", attrs: []string{"gdr.req", "SOAK-03"}}
	if cause != "" {
		c.result = "fail"
		c.attrs = append(c.attrs, "gdr.cause", cause, "gdr.outcome", "fell short")
	}
	return Run{Host: Identity{Host: host}, Events: events(pkg, c), Soak: s}
}

// A host's soak.json is read from its folder and shown in every format:
// summary.json keeps the series downsampled with each rail's numbers,
// summary.txt a line naming the worst rail and the failed requirement.
func TestSoakFromFolder(t *testing.T) {
	dir := hostDir(t, t.TempDir(), "gpu-a", oneTest)
	s := synthSoak("gpu-a", 8, 8, 2*time.Hour, 10*time.Second, true)
	require.NoError(t, soak.Write(dir, s))
	r, err := FromDirs([]string{dir}, Options{})
	require.NoError(t, err)
	h := r.Hosts[0]
	require.NotNil(t, h.Soak)
	assert.Empty(t, h.Errors)
	assert.Len(t, h.Soak.Series.Samples, soakKeep)
	assert.Equal(t, 720, h.Soak.Series.Downsampled)
	require.NotNil(t, h.Soak.Worst)
	assert.Equal(t, 1, *h.Soak.Worst, "the flapping rail fares worst")
	assert.Equal(t, 5, h.Soak.Rails[1].Downs, "a DOWN every 20 minutes of 2 h, the last at the end")
	assert.Equal(t, 12.0, *h.Soak.Rails[2].Min, "rail 2's dip, from the whole run")
	assert.Equal(t, 1, h.Soak.Rails[2].Below)

	var txt bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	assert.Contains(t, txt.String(), "soak     soak 2h00m, 8 rails, 8 GPUs; worst rail 1 (mlx5_1): 5 link downs, min 378, median 380 Gbit/s\n")

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	var got struct {
		Soak struct {
			Series soak.Series `json:"series"`
			Rails  []SoakRail  `json:"rails"`
			Rates  []soak.CounterRate
		} `json:"soak"`
		Hosts []struct {
			Soak *json.RawMessage `json:"soak"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &got))
	assert.Len(t, got.Soak.Series.Samples, soakKeep, "summary.json keeps the series, downsampled")
	assert.Equal(t, 8, len(got.Soak.Series.Samples[0].Rails))
	require.NoError(t, got.Soak.Series.Validate())
	assert.Equal(t, 5, got.Soak.Rails[1].Downs)
	require.Len(t, got.Hosts, 1)
	assert.NotNil(t, got.Hosts[0].Soak)
	t.Logf("summary.json of 1 host x 8 rails x 2 h: %d bytes", js.Len())
}

// A soak round's series is read from a cluster host's round folder, and
// shown on the host the job names.
func TestSoakFromClusterRound(t *testing.T) {
	root := clusterFolder(t, nil)
	require.NoError(t, soak.Write(cluster.RoundDir(root, "vm2", 1), synthSoak("vm2", 2, 0, 10*time.Minute, 10*time.Second, false)))
	r, err := FromDirs([]string{root}, Options{})
	require.NoError(t, err)
	for _, h := range r.Hosts {
		if h.Identity.Host != "vm2" {
			assert.Nil(t, h.Soak, h.Identity.Host)
			continue
		}
		require.NotNil(t, h.Soak)
		assert.Len(t, h.Soak.Rails, 2)
		assert.Empty(t, h.Errors)
	}
}

// A damaged soak.json fails its host naming the file and what is wrong,
// and stops neither the merge nor the other hosts.
func TestSoakBadFile(t *testing.T) {
	fleet := t.TempDir()
	hostDir(t, fleet, "good", oneTest)
	d := hostDir(t, fleet, "newer", oneTest)
	require.NoError(t, os.WriteFile(filepath.Join(d, SoakFile), []byte(`{"version":9}`), 0o644))
	d = hostDir(t, fleet, "cut", oneTest)
	require.NoError(t, os.WriteFile(filepath.Join(d, SoakFile), []byte(`{"version":1,"host":"cut","rails":[`), 0o644))
	r, err := FromDirs([]string{fleet}, Options{})
	require.NoError(t, err)
	errs := map[string]string{}
	for _, h := range r.Hosts {
		errs[h.Identity.Host] = strings.Join(h.Errors, " | ")
		assert.Nil(t, h.Soak)
	}
	assert.Empty(t, errs["good"])
	assert.Contains(t, errs["newer"], filepath.Join(fleet, "newer", SoakFile)+": soak series version 9 is newer than this suite's 1")
	assert.Contains(t, errs["cut"], filepath.Join(fleet, "cut", SoakFile)+": cut short")
	for _, h := range r.Hosts {
		if h.Identity.Host != "good" {
			assert.Equal(t, NotQualified, h.Verdict.Verdict, h.Identity.Host)
		}
	}
}

// A host without a soak shows none in any format (goldens hold the rest).
func TestNoSoakNoSection(t *testing.T) {
	r := Build([]Run{soakRun(t, "x", nil, "")})
	var page, js, md bytes.Buffer
	require.NoError(t, r.WriteHTML(&page))
	require.NoError(t, r.WriteJSON(&js))
	require.NoError(t, r.WriteMarkdown(&md))
	assert.NotContains(t, page.String(), "soak-charts")
	assert.NotContains(t, page.String(), "<style>.soak")
	assert.NotContains(t, js.String(), `"soak": {`)
	assert.NotContains(t, js.String(), `"counter_rates"`)
	assert.NotContains(t, md.String(), "| soak |")
}

// soakPage is the section of page from a host's soak heading to its end.
func soakSection(page string) string {
	i := strings.Index(page, `soak">Soak: `)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</details>")
	return page[i : i+j]
}

// Budget of one host's soak section in report.html at 8 rails x 8 h.
const soakSectionBudget = 512 << 10

// At 1 host x 8 rails x 8 h (2880 samples a rail) the page draws a chart
// per rail and two for the GPUs, each line at most soakChartPoints points,
// within its budget; the flap, the dip, the throttle and the Xid are on
// them and in their text alternatives; the counters that rose are listed.
func TestSoakPage8Rails8Hours(t *testing.T) {
	s := synthSoak("gpu-a", 8, 8, 8*time.Hour, 10*time.Second, true)
	require.Len(t, s.Samples, 2880)
	r := Build([]Run{soakRun(t, "gpu-a", s, "mlx5_1 port 1 went down 23 times in 8h00m (rise of link_downed)")})
	var page bytes.Buffer
	require.NoError(t, r.WriteHTML(&page))
	html := page.String()
	sec := soakSection(html)
	require.NotEmpty(t, sec)
	if p := os.Getenv("GDR_SOAK_PAGE"); p != "" {
		require.NoError(t, os.WriteFile(p, page.Bytes(), 0o644))
	}
	t.Logf("page %d bytes, soak section %d bytes", len(html), len(sec))
	assert.Less(t, len(sec), soakSectionBudget)
	assert.Equal(t, 10, strings.Count(sec, `<svg class="chart soak"`), "8 rails, SM clock and temperature")
	for _, pl := range regexp.MustCompile(`<polyline[^>]*points="([^"]*)"`).FindAllStringSubmatch(sec, -1) {
		assert.LessOrEqual(t, len(strings.Fields(pl[1])), soakChartPoints)
	}
	assert.Contains(t, sec, `aria-label="rail 1 · mlx5_1 port 1: RDMA WRITE rate over 8h00m: 23 link downs, min 378, median 380 Gbit/s; floor 300 Gbit/s (75% of the 400 Gb/s port rate); 46 events marked"`)
	assert.Contains(t, sec, `aria-label="rail 2 · mlx5_2 port 1: RDMA WRITE rate over 8h00m: min 12, median 380 Gbit/s, 1 sample under the floor 300; floor 300 Gbit/s`)
	rail2 := sec[strings.Index(sec, "rail 2 · mlx5_2"):]
	rail2 = rail2[:strings.Index(rail2, "</svg>")]
	// Its band reaches below the floor's line (SVG's y grows downwards).
	floorY := regexp.MustCompile(`<line class="floor"[^>]* y1="([\d.]+)"`).FindStringSubmatch(rail2)
	band := regexp.MustCompile(`<polygon class="band"[^>]* points="([^"]*)"`).FindStringSubmatch(rail2)
	require.NotNil(t, floorY)
	require.NotNil(t, band)
	lowest := 0.0
	for _, p := range strings.Fields(band[1]) {
		_, y, _ := strings.Cut(p, ",")
		v, err := strconv.ParseFloat(y, 64)
		require.NoError(t, err)
		lowest = max(lowest, v)
	}
	fy, err := strconv.ParseFloat(floorY[1], 64)
	require.NoError(t, err)
	assert.Greater(t, lowest, fy+50, "rail 2's band reaches down to the dip, far below the floor")
	assert.Equal(t, 23, strings.Count(sec, `<rect class="down"`), "rail 1's DOWN samples")
	assert.Contains(t, sec, `aria-label="SM clock (MHz) of 8 GPUs over the run: from 1410 to 1980 (each point the lowest of its 2m)"`)
	assert.Contains(t, sec, `>X</text>`, "the Xid is marked")
	assert.Contains(t, sec, `<td>rail 3 (mlx5_3)</td><td>mlx5_3 port 1 counters/symbol_error</td><td class="num">23</td><td class="num">2.88</td>`)
	assert.Contains(t, sec, `NVRM: Xid (PCI:0000:1b:00): 79`)
	assert.Contains(t, html, "SOAK-03")

	// A clean run: no band below the floor, no down spans, no events.
	clean := Build([]Run{soakRun(t, "gpu-b", synthSoak("gpu-b", 8, 8, 8*time.Hour, 10*time.Second, false), "")})
	page.Reset()
	require.NoError(t, clean.WriteHTML(&page))
	sec = soakSection(page.String())
	assert.NotContains(t, sec, `<rect class="down"`)
	assert.NotContains(t, sec, `class="event"`)
	assert.Contains(t, sec, "No counter rose during the run (32 watched).")
}

// soakFleet is n hosts of fleetRuns, each with a soak of 8 rails x 8 h;
// every tenth flaps and fails SOAK-03.
func soakFleet(t testing.TB, n int) []Run {
	runs := fleetRuns(t, n)
	for i := range runs {
		bad := i%10 == 3
		runs[i].Soak = synthSoak(runs[i].Host.Host, 8, 8, 8*time.Hour, 10*time.Second, bad)
		if bad {
			pkg := "github.com/gdrconf/gdrconf/conformance/soak"
			runs[i].Events = append(append([]Event(nil), runs[i].Events...), events(pkg, tc{name: "TestSOAK03NoLinkFlap", result: "fail",
				attrs: []string{"gdr.req", "SOAK-03", "gdr.cause", "mlx5_1 port 1 went down 23 times in 8h00m", "gdr.outcome", "fell short"}})...)
		}
	}
	return runs
}

// A 64-host merge shows the soak of every host in one table (its per-rail
// lowest and median rate, link downs, the failed requirement), stays
// within the fleet's page budget, and draws charts for the failed hosts'
// sections only.
func TestSoakFleet64(t *testing.T) {
	r := Build(soakFleet(t, 64))
	var page, js, md, txt bytes.Buffer
	require.NoError(t, r.WriteHTML(&page))
	require.NoError(t, r.WriteJSON(&js))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteText(&txt))
	html := page.String()
	t.Logf("64 hosts x 8 rails x 8 h: report.html %d bytes, summary.json %d, summary.md %d", len(html), js.Len(), md.Len())
	assert.Less(t, len(html), fleetHTMLBudget)
	assert.Less(t, md.Len(), mdMergedBudget)
	i := strings.Index(html, `<table id="soakhosts">`)
	require.Greater(t, i, 0)
	table := html[i : i+strings.Index(html[i:], "</table>")]
	if p := os.Getenv("GDR_SOAK_PAGE"); p != "" {
		require.NoError(t, os.WriteFile(p+".fleet", page.Bytes(), 0o644))
	}
	assert.Equal(t, 64, strings.Count(table, "<tr class="))
	assert.Equal(t, 7, strings.Count(table, `<tr class="s-fail">`), "hosts 3, 13, ... 63")
	assert.Contains(t, table, "<div>1 mlx5_1: 378 / 380</div>")
	assert.Contains(t, table, "SOAK-03: mlx5_1 port 1 went down 23 times in 8h00m")
	assert.Equal(t, 7*10, strings.Count(html, `<svg class="chart soak"`), "charts in the failed hosts' sections only")
	assert.Equal(t, 64+7, strings.Count(md.String(), "soak 8h00m, 8 rails, 8 GPUs"), "the soak list, and the failed hosts' sections")
	assert.Equal(t, 64, strings.Count(txt.String(), "\nsoak     soak 8h00m"))
	var got struct {
		Hosts []struct {
			Soak *Soak `json:"soak"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &got))
	require.Len(t, got.Hosts, 64)
	for _, h := range got.Hosts {
		require.NotNil(t, h.Soak)
		assert.Len(t, h.Soak.Series.Samples, 256, "16384 samples shared by 64 hosts")
	}
}

// svgFitProbe writes on the root element how many soak charts laid out,
// how many are wider than their box or than the window, and the smallest
// rendered font size of their text (a chart squeezed unreadable shrinks
// it), once the page has laid out.
const svgFitProbe = `<script>window.addEventListener("load",function(){
var cs=document.querySelectorAll("svg.soak"),n=0,wide=0,small=1e9,W=document.documentElement.clientWidth;
cs.forEach(function(s){var r=s.getBoundingClientRect();if(r.width===0)return;n++;var p=s.parentElement.getBoundingClientRect();
if(r.right>p.right+1||r.right>W)wide++;var k=r.width/s.viewBox.baseVal.width;
s.querySelectorAll("text").forEach(function(t){var f=parseFloat(t.getAttribute("font-size")||"10")*k;if(f<small)small=f;});});
document.documentElement.setAttribute("data-svgfit",n+" "+wide+" "+small.toFixed(1));});</script>`

// The soak charts render in Chromium at 1 host x 8 rails x 8 h and in a
// 64-host merge (its failed hosts' sections open): no script error, no
// part of the page wider than a 1400 px window, every chart inside its
// box with its text at 9 px or more, text at 4.5:1 against its
// background, labels and text alternatives present.
func TestSoakHTMLInBrowser(t *testing.T) {
	shots := os.Getenv("GDR_REPORT_SHOTS")
	for _, c := range []struct {
		name   string
		runs   func(t *testing.T) []Run
		charts int
	}{
		{"1x8rails8h", func(t *testing.T) []Run {
			return []Run{soakRun(t, "gpu-a", synthSoak("gpu-a", 8, 8, 8*time.Hour, 10*time.Second, true), "mlx5_1 port 1 went down 23 times in 8h00m")}
		}, 10},
		{"64hosts", func(t *testing.T) []Run { return soakFleet(t, 64) }, 70},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Build(c.runs(t))
			var page bytes.Buffer
			require.NoError(t, r.WriteHTML(&page))
			dir := shots
			if dir == "" {
				dir = t.TempDir()
			}
			require.NoError(t, os.MkdirAll(dir, 0o755))
			file := filepath.Join(dir, "soak-"+c.name+".html")
			require.NoError(t, os.WriteFile(file, []byte(strings.Replace(page.String(), "<head>", "<head>"+errorHook+widthProbe+svgFitProbe+contrastProbe, 1)), 0o644))
			dom, _ := chromium(t, "--dump-dom", "--window-size=1400,900", "--virtual-time-budget=5000", "file://"+file)
			head := dom[:min(len(dom), 8000)]
			assert.NotRegexp(t, `data-jserror=`, head)
			assert.LessOrEqual(t, scrollWidth(t, dom), 1400, "the page scrolls sideways at 1400 px")
			fit := regexp.MustCompile(`data-svgfit="(\d+) (\d+) ([\d.]+)"`).FindStringSubmatch(head)
			require.NotNil(t, fit, "the chart probe ran")
			t.Logf("%s: %s soak charts laid out, %s too wide, smallest chart text %s px", c.name, fit[1], fit[2], fit[3])
			assert.Equal(t, c.charts, atoi(t, fit[1]), "every soak chart is laid out")
			assert.Equal(t, "0", fit[2], "no chart wider than its box or the window")
			small, err := strconv.ParseFloat(fit[3], 64)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, small, 9.0, "chart text readable")
			cm := regexp.MustCompile(`data-contrast="(\d+);([^"]*)"`).FindStringSubmatch(head)
			require.NotNil(t, cm, "the contrast probe ran")
			assert.Empty(t, cm[2], "text below 4.5:1 against its background")
			assert.Contains(t, dom, `aria-label="rail 1 · mlx5_1 port 1: RDMA WRITE rate over 8h00m: 23 link downs`)
			assert.Contains(t, dom, `>floor 300</text>`)
			assert.Contains(t, dom, `>time into the run · RDMA WRITE Gbit/s</text>`)
			assert.Contains(t, dom, `>4h</text>`, "the time axis is labelled in hours")
			if c.name == "64hosts" {
				assert.Contains(t, dom, `<table id="soakhosts">`)
			}
			if shots != "" {
				chromium(t, "--hide-scrollbars", "--window-size=1400,3000", "--screenshot="+strings.TrimSuffix(file, ".html")+".png", "file://"+file)
			}
		})
	}
}

// A soak cut before its first sample still renders, in every format,
// saying it was cut and that no rate was measured.
func TestSoakCutBeforeAnySample(t *testing.T) {
	s := synthSoak("gpu-a", 2, 1, 0, 10*time.Second, false)
	s.Planned, s.Cut = time.Hour, "SIGTERM"
	s.Events = []soak.Event{{At: s.Start, Kind: soak.Cut, Text: "SIGTERM from Slurm"}}
	r := Build([]Run{soakRun(t, "gpu-a", s, "")})
	h := r.Hosts[0]
	require.NotNil(t, h.Soak)
	assert.Nil(t, h.Soak.Worst)
	assert.Equal(t, "soak 0s of 1h00m, cut: SIGTERM, 2 rails, 1 GPU", h.Soak.Line())
	var page, js, txt bytes.Buffer
	require.NoError(t, r.WriteHTML(&page))
	require.NoError(t, r.WriteJSON(&js))
	require.NoError(t, r.WriteText(&txt))
	assert.Contains(t, page.String(), "rail 0 · mlx5_0 port 1: RDMA WRITE rate over 0s of 1h00m, cut: SIGTERM: no rate measured")
	assert.NotContains(t, page.String(), "NaN")
	assert.Contains(t, txt.String(), "soak 0s of 1h00m, cut: SIGTERM")

	// A run on the lab's emulated GPU says so wherever its line goes.
	s.Emulated = true
	h = Build([]Run{soakRun(t, "gpu-a", s, "")}).Hosts[0]
	assert.Equal(t, "soak 0s of 1h00m, cut: SIGTERM, 2 rails, 1 GPU (emulated GPU)", h.Soak.Line())
}
